/* Synchronization points: every host wait for a device goes through this
 * file, so each one is counted, can be reported or refused, and appears on
 * the trace. Also the per-command hook (trace, blocking mode) and events. */
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
#include "trace.h"

static atomic_ullong *counts;
static cl_command_queue *side_queues;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int debug_mode = -1;
static atomic_int launch_blocking = -1;
static _Atomic(clt__after_wait_hook) after_wait;

void clt__sync_set_after_wait(clt__after_wait_hook hook) { atomic_store(&after_wait, hook); }

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

clt_sync_debug clt_get_sync_debug(void)
{
    int m = atomic_load(&debug_mode);
    if (m >= 0) return (clt_sync_debug)m;
    /* off, warn, error: the words' order is the enum's. */
    m = clt__env_int(CLT__ENV_SYNC_DEBUG, CLT_SYNC_DEBUG_OFF);
    int unset = -1;
    atomic_compare_exchange_strong(&debug_mode, &unset, m);
    return (clt_sync_debug)atomic_load(&debug_mode);
}

void clt_set_sync_debug(clt_sync_debug mode) { atomic_store(&debug_mode, (int)mode); }

int clt_get_launch_blocking(void)
{
    int m = atomic_load(&launch_blocking);
    if (m >= 0) return m;
    m = clt__env_int(CLT__ENV_LAUNCH_BLOCKING, 0);
    int unset = -1;
    atomic_compare_exchange_strong(&launch_blocking, &unset, m);
    return atomic_load(&launch_blocking);
}

void clt_set_launch_blocking(int on) { atomic_store(&launch_blocking, on ? 1 : 0); }

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

void clt_reset_sync_count(clt_device dev)
{
    atomic_ullong *c = counter(dev);
    if (c) atomic_store(c, 0);
}

static const char *slot_name(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    return s ? s->name : "?";
}

clt_status clt__sync_point(int slot, const char *api)
{
    clt_sync_debug mode = clt_get_sync_debug();
    if (mode == CLT_SYNC_DEBUG_ERROR)
        return clt__fail(CLT_ERR_SYNC, "%s on %s is a synchronization point (the host would wait for the "
                         "device) and CLT_SYNC_DEBUG=error refuses it", api, slot_name(slot));
    if (tables_ready(slot)) atomic_fetch_add(&counts[slot], 1);
    /* The one message the library prints: the user asked for it. */
    if (mode == CLT_SYNC_DEBUG_WARN)
        fprintf(stderr, "cltensor: synchronization point: %s waits for %s\n", api, slot_name(slot));
    return CLT_OK;
}

/* Waits for the events and returns the first failure among them. */
static clt_status wait_events(int slot, const char *what, cl_uint n, const cl_event *evs)
{
    cl_int err = CL_SUCCESS;
    for (cl_uint i = 0; i < n && err == CL_SUCCESS; i++) {
        /* One at a time: the events may belong to different contexts. */
        err = clWaitForEvents(1, &evs[i]);
        cl_int exec = CL_COMPLETE;
        clGetEventInfo(evs[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
        if (exec < 0) err = exec;
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
    uint64_t t0 = clt__now_ns();
    clt_status s = wait_events(slot, api, n, evs);
    clt__trace_host(slot, api, "sync", t0, clt__now_ns());
    run_after_wait();
    return s;
}

clt_status clt__sync_queue(int slot, const char *api)
{
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(slot, &q));
    CLT_TRY(clt__sync_point(slot, api));
    uint64_t t0 = clt__now_ns();
    cl_int err = clFinish(q);
    clt__trace_host(slot, api, "sync", t0, clt__now_ns());
    run_after_wait();
    if (err != CL_SUCCESS) return clt__cl_fail(err, "%s: clFinish on %s", api, slot_name(slot));
    return CLT_OK;
}

clt_status clt__host_wait(int slot, const char *why, cl_event ev)
{
    uint64_t t0 = clt__now_ns();
    clt_status s = wait_events(slot, why, 1, &ev);
    clt__trace_host(slot, why, "wait", t0, clt__now_ns());
    return s;
}

static clt_status blocking_wait(int slot, cl_event ev, const char *name)
{
    if (!clt_get_launch_blocking()) return CLT_OK;
    return wait_events(slot, name, 1, &ev);
}

clt_status clt__after_enqueue(int slot, cl_event ev, const char *name)
{
    clt__trace_command(slot, ev, name, "kernel", 0);
    return blocking_wait(slot, ev, name);
}

clt_status clt__after_copy(int slot, cl_event ev, const char *what, size_t bytes)
{
    clt__trace_command(slot, ev, what, "copy", bytes);
    return blocking_wait(slot, ev, what);
}

cl_command_queue_properties clt__queue_properties(void)
{
    clt__trace_from_env();
    return clt__trace_on() ? CL_QUEUE_PROFILING_ENABLE : 0;
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

clt_status clt__bridge_event(cl_event ev, cl_context ctx, cl_event *out)
{
    *out = NULL;
    if (!ev) return CLT_OK;
    cl_context own = NULL;
    clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof own, &own, NULL);
    if (own == ctx) {
        clRetainEvent(ev);
        *out = ev;
        return CLT_OK;
    }
    cl_int err;
    cl_event user = clCreateUserEvent(ctx, &err);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clCreateUserEvent");
    clRetainEvent(user); /* the callback's reference */
    err = clSetEventCallback(ev, CL_COMPLETE, complete_user_event, user);
    if (err != CL_SUCCESS) {
        clReleaseEvent(user);
        clReleaseEvent(user);
        return clt__cl_fail(err, "clSetEventCallback");
    }
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
    if (!ev) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_event_wait: ev is NULL");
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

void clt_event_release(clt_event *ev)
{
    if (!ev) return;
    clReleaseEvent(ev->ev);
    free(ev);
}
