/* Synchronization points: every host wait for a device goes through this
 * file. A synchronization point (clt__sync_*) is counted, can be reported
 * and (but a fallback's) refused, and appears on the trace; a
 * clt__host_wait only appears on the trace, and blocking mode's wait after
 * each command is neither counted nor traced as a wait. Also the
 * per-command hook (trace, blocking mode) and events. The trace (trace.c,
 * above this file) registers its recorder here when it starts. */
#include "sync.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/async.h"
#include "../core/clock.h"
#include "../core/env.h"
#include "device_internal.h"

static atomic_ullong *counts;
static cl_command_queue *side_queues;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int debug_mode = -1;
static atomic_int launch_blocking = -1;
static _Atomic(clt__after_wait_hook) after_wait;
static _Atomic(const clt__sync_tracer *) tracer;
static _Atomic(clt__command_hook) command_hook;

void clt__sync_set_after_wait(clt__after_wait_hook hook) { atomic_store(&after_wait, hook); }

void clt__sync_set_tracer(const clt__sync_tracer *t) { atomic_store(&tracer, t); }

void clt__sync_set_command_hook(clt__command_hook hook) { atomic_store(&command_hook, hook); }

clt_status clt__sync_before_command(int slot)
{
    clt__command_hook hook = atomic_load(&command_hook);
    return hook ? hook(slot) : CLT_OK;
}

static void trace_command(int slot, cl_event ev, const char *name, const char *cat, size_t bytes)
{
    const clt__sync_tracer *t = atomic_load(&tracer);
    if (t) t->command(slot, ev, name, cat, bytes);
}

static void trace_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns)
{
    const clt__sync_tracer *t = atomic_load(&tracer);
    if (t) t->host(slot, what, cat, start_ns, end_ns);
}

static void run_after_wait(void)
{
    clt__after_wait_hook hook = atomic_load(&after_wait);
    if (hook) hook();
}

static void make_tables(void)
{
    int n = clt__slot_count();
    counts = calloc((size_t)(n ? n : 1), sizeof *counts);
    side_queues = calloc((size_t)(n ? n : 1), sizeof *side_queues);
}

static int tables_ready(int slot)
{
    pthread_once(&tables_once, make_tables);
    return counts && side_queues && slot >= 0 && slot < clt__slot_count();
}

clt_sync_debug clt_sync_get_debug(void)
{
    int m = atomic_load(&debug_mode);
    if (m >= 0) return (clt_sync_debug)m;
    /* off, warn, error: the words' order is the enum's. */
    m = clt__env_int(CLT__ENV_SYNC_DEBUG, CLT_SYNC_DEBUG_OFF);
    int unset = -1;
    atomic_compare_exchange_strong(&debug_mode, &unset, m);
    return (clt_sync_debug)atomic_load(&debug_mode);
}

void clt_sync_set_debug(clt_sync_debug mode) { atomic_store(&debug_mode, (int)mode); }

int clt_launch_get_blocking(void)
{
    int m = atomic_load(&launch_blocking);
    if (m >= 0) return m;
    m = clt__env_int(CLT__ENV_LAUNCH_BLOCKING, 0);
    int unset = -1;
    atomic_compare_exchange_strong(&launch_blocking, &unset, m);
    return atomic_load(&launch_blocking);
}

void clt_launch_set_blocking(int on) { atomic_store(&launch_blocking, on ? 1 : 0); }

/* The device's counter, or NULL when it does not exist (the caller's last
 * error message is left alone). */
static atomic_ullong *counter(clt_device dev)
{
    int slot;
    if (!clt_device_exists(dev) || clt__resolve(dev, &slot) != CLT_OK) return NULL;
    return tables_ready(slot) ? &counts[slot] : NULL;
}

uint64_t clt_sync_count(clt_device dev)
{
    atomic_ullong *c = counter(dev);
    return c ? atomic_load(c) : 0;
}

void clt_sync_reset_count(clt_device dev)
{
    atomic_ullong *c = counter(dev);
    if (c) atomic_store(c, 0);
}

static const char *slot_name(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    return s ? s->name : "?";
}

/* Counts a synchronization point and reports it in warn mode. */
static void note_point(int slot, const char *api, clt_sync_debug mode)
{
    if (tables_ready(slot)) atomic_fetch_add(&counts[slot], 1);
    /* Printed because the user asked for it (CLT_SYNC_DEBUG=warn); the
     * trainer's progress bar, when its options ask for one, is the other. */
    if (mode == CLT_SYNC_DEBUG_WARN)
        fprintf(stderr, "cltensor: synchronization point: %s waits for %s\n", api, slot_name(slot));
}

clt_status clt__sync_point(int slot, const char *api)
{
    CLT_TRY(clt__sync_before_command(slot));
    clt_sync_debug mode = clt_sync_get_debug();
    if (mode == CLT_SYNC_DEBUG_ERROR)
        return clt__fail(CLT_ERR_SYNC, "%s on %s is a synchronization point (the host would wait for the "
                         "device) and CLT_SYNC_DEBUG=error refuses it", api, slot_name(slot));
    note_point(slot, api, mode);
    return CLT_OK;
}

void clt__flush_event_queue(cl_event ev)
{
    cl_command_queue q = NULL;
    if (ev && clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) == CL_SUCCESS && q) clFlush(q);
}

/* The execution status of ev: CL_COMPLETE, a negative error, or a positive
 * status (queued, submitted, running). */
static cl_int status_of(cl_event ev)
{
    cl_int exec = CL_QUEUED;
    cl_int err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
    return err != CL_SUCCESS ? err : exec;
}

int clt__event_done(cl_event ev)
{
    cl_int exec = CL_QUEUED;
    if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL) != CL_SUCCESS) return 0;
    return exec == CL_COMPLETE || exec < 0;
}

/* A host wait without clWaitForEvents, which some drivers (NVIDIA's) spin
 * in: a completion callback signals a condition variable. The waiter and
 * the callback share this block; the last of the two frees it. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    atomic_int refs;
} waiter;

static void waiter_unref(waiter *w)
{
    if (atomic_fetch_sub(&w->refs, 1) != 1) return;
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static void CL_CALLBACK wake_waiter(cl_event ev, cl_int status, void *data)
{
    (void)ev;
    (void)status;
    waiter *w = data;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    waiter_unref(w);
}

/* Sleeps between status polls, from 10 us up to 1 ms: the fallback when the
 * runtime refuses a callback. */
static cl_int poll_until_done(cl_event ev)
{
    long ns = 10000;
    cl_int st;
    while ((st = status_of(ev)) > CL_COMPLETE) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
    return st;
}

/* Waits for one event: flushes its queue first (a command that is never
 * flushed may never start, and no clWaitForEvents flushes it implicitly
 * here), then sleeps until its completion callback runs. Returns its final
 * status (CL_COMPLETE or a negative error). */
static cl_int wait_one(cl_event ev)
{
    cl_int st = status_of(ev);
    if (st <= CL_COMPLETE) return st;
    clt__flush_event_queue(ev);
    waiter *w = malloc(sizeof *w);
    if (!w) return poll_until_done(ev);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = 0;
    atomic_init(&w->refs, 2);
    if (clSetEventCallback(ev, CL_COMPLETE, wake_waiter, w) != CL_SUCCESS) {
        atomic_store(&w->refs, 1);
        waiter_unref(w);
        return poll_until_done(ev);
    }
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    waiter_unref(w);
    return status_of(ev);
}

/* Waits for the events and returns the first failure among them. */
static clt_status wait_events(int slot, const char *what, cl_uint n, const cl_event *evs)
{
    cl_int err = CL_SUCCESS;
    /* Every queue first, so that no event waits behind an unflushed one. */
    for (cl_uint i = 0; i < n; i++) clt__flush_event_queue(evs[i]);
    for (cl_uint i = 0; i < n && err == CL_SUCCESS; i++) {
        /* One at a time: the events may belong to different contexts. */
        cl_int st = wait_one(evs[i]);
        if (st < 0) err = st;
    }
    if (err != CL_SUCCESS) return clt__cl_fail(err, "%s: a command on %s failed", what, slot_name(slot));
    return CLT_OK;
}

clt_status clt__sync_wait(int slot, const char *api, cl_uint n, const cl_event *evs)
{
    CLT_TRY(clt__sync_point(slot, api));
    return clt__sync_wait_only(slot, api, n, evs);
}

clt_status clt__sync_wait_only(int slot, const char *api, cl_uint n, const cl_event *evs)
{
    if (clt__slot_plans(slot)) { /* a planning device: nothing ran, nothing to wait for */
        run_after_wait();
        return CLT_OK;
    }
    uint64_t t0 = clt__now_ns();
    clt_status s = wait_events(slot, api, n, evs);
    trace_host(slot, api, "sync", t0, clt__now_ns());
    run_after_wait();
    return s;
}

clt_status clt__sync_queue(int slot, const char *api)
{
    /* No queue (a planning device, or one nothing was enqueued on yet): nothing to wait for. */
    cl_command_queue q = clt__slot_queue_made(slot);
    if (!q) {
        CLT_TRY(clt__sync_point(slot, api));
        run_after_wait();
        return CLT_OK;
    }
    CLT_TRY(clt__sync_point(slot, api));
    uint64_t t0 = clt__now_ns();
    /* A marker after everything queued, waited for as any event: clFinish,
     * like clWaitForEvents, may spin a core on some drivers. */
    cl_event marker = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(q, 0, NULL, &marker);
    clt_status s = CLT_OK;
    if (err == CL_SUCCESS) {
        s = wait_events(slot, api, 1, &marker);
        clReleaseEvent(marker);
    } else {
        err = clFinish(q);
    }
    trace_host(slot, api, "sync", t0, clt__now_ns());
    run_after_wait();
    if (err != CL_SUCCESS) return clt__cl_fail(err, "%s: clFinish on %s", api, slot_name(slot));
    return s;
}

clt_status clt__sync_fallback(int slot, const char *api, cl_event ev)
{
    clt_status held = clt__sync_before_command(slot);
    note_point(slot, api, clt_sync_get_debug());
    if (clt__slot_plans(slot)) return CLT_OK;
    uint64_t t0 = clt__now_ns();
    clt_status s = wait_events(slot, api, 1, &ev);
    trace_host(slot, api, "sync", t0, clt__now_ns());
    run_after_wait();
    return s != CLT_OK ? s : held;
}

clt_status clt__host_wait(int slot, const char *why, cl_event ev)
{
    if (clt__slot_plans(slot)) return CLT_OK;
    uint64_t t0 = clt__now_ns();
    clt_status s = wait_events(slot, why, 1, &ev);
    trace_host(slot, why, "wait", t0, clt__now_ns());
    return s;
}

static clt_status blocking_wait(int slot, cl_event ev, const char *name)
{
    if (!clt_launch_get_blocking()) return CLT_OK;
    return wait_events(slot, name, 1, &ev);
}

clt_status clt__after_enqueue(int slot, cl_event ev, const char *name)
{
    trace_command(slot, ev, name, "kernel", 0);
    return blocking_wait(slot, ev, name);
}

clt_status clt__after_copy(int slot, cl_event ev, const char *what, size_t bytes)
{
    trace_command(slot, ev, what, "copy", bytes);
    return blocking_wait(slot, ev, what);
}

clt_status clt__side_queue(int slot, cl_command_queue *out)
{
    if (!tables_ready(slot)) return clt__fail(CLT_ERR_NO_DEVICE, "internal: bad device slot %d", slot);
    cl_context ctx;
    CLT_TRY(clt__slot_context(slot, &ctx));
    pthread_mutex_lock(&side_lock);
    clt_status s = CLT_OK;
    if (!side_queues[slot]) {
        cl_int err;
        side_queues[slot] = clCreateCommandQueue(ctx, clt__slot_get(slot)->device, 0, &err);
        if (err != CL_SUCCESS) {
            side_queues[slot] = NULL;
            s = clt__cl_fail(err, "clCreateCommandQueue (side queue) for %s", slot_name(slot));
        }
    }
    *out = side_queues[slot];
    pthread_mutex_unlock(&side_lock);
    return s;
}

static void CL_CALLBACK complete_user_event(cl_event ev, cl_int status, void *data)
{
    (void)ev;
    cl_event user = data;
    clSetUserEventStatus(user, status < 0 ? status : CL_COMPLETE);
    clReleaseEvent(user);
}

cl_int clt__event_chain(cl_event ev, cl_event user)
{
    clRetainEvent(user); /* the callback's reference */
    cl_int err = clSetEventCallback(ev, CL_COMPLETE, complete_user_event, user);
    if (err != CL_SUCCESS) clReleaseEvent(user);
    return err;
}

clt_status clt__bridge_event(cl_event ev, cl_context ctx, cl_event *out)
{
    *out = NULL;
    if (!ev) return CLT_OK;
    cl_context own = NULL;
    clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof own, &own, NULL);
    if (own == ctx) {
        clRetainEvent(ev);
        *out = ev;
        /* Another queue will wait for ev: OpenCL asks ev's queue to be flushed. */
        clt__flush_event_queue(ev);
        return CLT_OK;
    }
    cl_int err;
    cl_event user = clCreateUserEvent(ctx, &err);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clCreateUserEvent");
    err = clt__event_chain(ev, user);
    if (err != CL_SUCCESS) {
        clReleaseEvent(user);
        return clt__cl_fail(err, "clSetEventCallback");
    }
    /* The callback runs only once ev's command has run, which a spec-strict
     * driver does not start before its queue is flushed. */
    clt__flush_event_queue(ev);
    *out = user;
    return CLT_OK;
}

clt_status clt_synchronize(clt_device dev)
{
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    if (!clt__slot_in_use(slot)) return CLT_OK;
    return clt__sync_queue(slot, "clt_synchronize");
}

clt_status clt_synchronize_all(void)
{
    int n = clt__slot_count();
    for (int i = 0; i < n; i++)
        if (clt__slot_in_use(i)) CLT_TRY(clt__sync_queue(i, "clt_synchronize_all"));
    return CLT_OK;
}

/* Public events. */

struct clt_event {
    cl_event ev;
    int slot;
};

clt_status clt__event_new(cl_event ev, int slot, clt_event **out)
{
    *out = NULL;
    if (!ev) return CLT_OK;
    clt_event *e = malloc(sizeof *e);
    if (!e) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for an event");
    clRetainEvent(ev);
    e->ev = ev;
    e->slot = slot;
    *out = e;
    return CLT_OK;
}

clt_status clt_event_wait(clt_event *ev)
{
    CLT_TRY(clt__need("clt_event_wait", "ev", ev));
    return clt__sync_wait(ev->slot, "clt_event_wait", 1, &ev->ev);
}

clt_status clt_event_query(const clt_event *ev, int *done)
{
    if (!ev || !done) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_event_query: NULL argument");
    cl_int exec = CL_QUEUED;
    cl_int err = clGetEventInfo(ev->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clt_event_query");
    if (exec < 0) return clt__cl_fail(exec, "clt_event_query: the command on %s failed", slot_name(ev->slot));
    *done = exec == CL_COMPLETE;
    return CLT_OK;
}

void clt_event_free(clt_event *ev)
{
    if (!ev) return;
    clReleaseEvent(ev->ev);
    free(ev);
}
