/* The timeline: every command that passes the enqueue hook (sync.h; with
 * OpenCL profiling times when its queue was created while tracing) and the
 * host waits sync.c reports (synchronization points, clt_trace_stop's own
 * among them, and clt__host_wait) to the recorder a trace registers with it
 * when it starts (clt__sync_set_tracer), written as Chrome trace-event JSON. Device clocks are mapped onto the
 * host's monotonic clock by the first command harvested with profiling times
 * on each device: its QUEUED time is taken to be the moment it was enqueued. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

#include "../core/clock.h"
#include "../core/env.h"
#include "../core/file.h"
#include "device_internal.h"
#include "sync.h"

/* Completed commands are harvested once this many are waiting, so a long
 * run does not hold every event alive. */
#define HARVEST_EVERY 4096

typedef struct record {
    char name[64];
    const char *cat; /* "kernel", "copy", "sync", "wait" */
    int slot;
    size_t bytes;
    cl_event ev;           /* until harvested */
    uint64_t host_ns;      /* enqueue (commands) or start (host waits) */
    uint64_t end_ns;       /* host waits */
    cl_ulong prof[4];      /* queued, submit, start, end (device clock) */
    int has_prof;
} record;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int active;
static char *out_path;
static uint64_t origin_ns;
static record *recs;
static size_t nrecs, cap, unharvested;
static int64_t *offsets; /* per slot: host ns minus device ns; 0 until known */
static int *offset_known;
static int exit_hook;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

int clt__trace_on(void) { return atomic_load(&active); }

static record *push(void)
{
    if (nrecs == cap) {
        size_t ncap = cap ? cap * 2 : 1024;
        record *grown = realloc(recs, ncap * sizeof *recs);
        if (!grown) return NULL;
        recs = grown;
        cap = ncap;
    }
    record *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    return r;
}

/* Reads a finished command's times and drops its event. Lock held. */
static void harvest(record *r)
{
    static const cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                              CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
    r->has_prof = 1;
    for (int i = 0; i < 4 && r->has_prof; i++)
        r->has_prof = clGetEventProfilingInfo(r->ev, what[i], sizeof r->prof[i], &r->prof[i], NULL) == CL_SUCCESS;
    if (r->has_prof && !offset_known[r->slot]) {
        offsets[r->slot] = (int64_t)r->host_ns - (int64_t)r->prof[0];
        offset_known[r->slot] = 1;
    }
    clReleaseEvent(r->ev);
    r->ev = NULL;
    unharvested--;
}

/* Harvests every finished command. Lock held. */
static void harvest_all(void)
{
    for (size_t i = 0; i < nrecs; i++)
        if (recs[i].ev && clt__event_done(recs[i].ev)) harvest(&recs[i]);
}

/* The recorded commands of slot not yet harvested, retained, in a new array
 * (*out NULL when there are none). Lock held. */
static clt_status pending_of(int slot, cl_event **out, cl_uint *n)
{
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < nrecs; i++) {
        if (!recs[i].ev || recs[i].slot != slot) continue;
        if (!*out) {
            *out = malloc(unharvested * sizeof **out);
            if (!*out) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_trace_stop: out of host memory");
        }
        clRetainEvent(recs[i].ev);
        (*out)[(*n)++] = recs[i].ev;
    }
    return CLT_OK;
}

/* The recorder sync.c calls (clt__sync_tracer). */
static void record_command(int slot, cl_event ev, const char *name, const char *cat, size_t bytes)
{
    if (!atomic_load(&active) || !ev) return;
    uint64_t now = clt__now_ns();
    pthread_mutex_lock(&lock);
    record *r = atomic_load(&active) ? push() : NULL;
    if (r) {
        snprintf(r->name, sizeof r->name, "%s", name);
        r->cat = cat;
        r->slot = slot;
        r->bytes = bytes;
        r->host_ns = now;
        clRetainEvent(ev);
        r->ev = ev;
        if (++unharvested >= HARVEST_EVERY) harvest_all();
    }
    pthread_mutex_unlock(&lock);
}

static void record_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns)
{
    if (!atomic_load(&active)) return;
    pthread_mutex_lock(&lock);
    record *r = atomic_load(&active) ? push() : NULL;
    if (r) {
        snprintf(r->name, sizeof r->name, "%s", what);
        r->cat = cat;
        r->slot = slot;
        r->host_ns = start_ns;
        r->end_ns = end_ns;
    }
    pthread_mutex_unlock(&lock);
}

static const clt__sync_tracer recorder = {record_command, record_host};

static double us(uint64_t host_ns) { return (double)(int64_t)(host_ns - origin_ns) / 1000.0; }

static json_t *event_json(const record *r)
{
    const clt__slot *s = clt__slot_get(r->slot);
    json_t *args = json_pack("{s:s}", "device", s ? s->name : "?");
    json_t *e = json_pack("{s:s, s:s, s:i}", "name", r->name, "cat", r->cat, "pid", 1);
    if (!args || !e) {
        json_decref(args);
        json_decref(e);
        return NULL;
    }
    if (!r->ev && !r->has_prof && r->end_ns) {
        /* Host waits go on the host's row. */
        json_object_set_new(e, "ph", json_string("X"));
        json_object_set_new(e, "tid", json_integer(0));
        json_object_set_new(e, "ts", json_real(us(r->host_ns)));
        json_object_set_new(e, "dur", json_real((double)(r->end_ns - r->host_ns) / 1000.0));
    } else if (r->has_prof && offset_known[r->slot]) {
        int64_t off = offsets[r->slot];
        json_object_set_new(e, "ph", json_string("X"));
        json_object_set_new(e, "tid", json_integer(r->slot + 1));
        json_object_set_new(e, "ts", json_real(us((uint64_t)((int64_t)r->prof[2] + off))));
        json_object_set_new(e, "dur", json_real((double)(r->prof[3] - r->prof[2]) / 1000.0));
        json_object_set_new(args, "queued_us", json_real(us((uint64_t)((int64_t)r->prof[0] + off))));
        json_object_set_new(args, "submit_us", json_real(us((uint64_t)((int64_t)r->prof[1] + off))));
        json_object_set_new(args, "start_us", json_real(us((uint64_t)((int64_t)r->prof[2] + off))));
        json_object_set_new(args, "end_us", json_real(us((uint64_t)((int64_t)r->prof[3] + off))));
    } else {
        /* No device times (queue made before tracing, or unfinished at exit). */
        json_object_set_new(e, "ph", json_string("i"));
        json_object_set_new(e, "s", json_string("t"));
        json_object_set_new(e, "tid", json_integer(r->slot + 1));
        json_object_set_new(e, "ts", json_real(us(r->host_ns)));
        json_object_set_new(args, "enqueued_us", json_real(us(r->host_ns)));
    }
    if (strcmp(r->cat, "copy") == 0) json_object_set_new(args, "bytes", json_integer((json_int_t)r->bytes));
    json_object_set_new(e, "args", args);
    return e;
}

static json_t *thread_name(int tid, const char *name)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", 1, "tid", tid,
                     "args", "name", name);
}

/* Lock held. */
static clt_status write_file(void)
{
    json_t *events = json_array();
    json_t *root = json_pack("{s:o, s:s}", "traceEvents", events, "displayTimeUnit", "ms");
    if (!events || !root) {
        json_decref(root);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory writing the trace");
    }
    json_array_append_new(events, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid",
                                            1, "args", "name", "cltensor"));
    json_array_append_new(events, thread_name(0, "host"));
    int n = clt__slot_count();
    for (int i = 0; i < n; i++)
        if (clt__slot_in_use(i)) json_array_append_new(events, thread_name(i + 1, clt__slot_get(i)->name));
    for (size_t i = 0; i < nrecs; i++) {
        json_t *e = event_json(&recs[i]);
        if (e) json_array_append_new(events, e);
    }
    char *text = json_dumps(root, JSON_COMPACT);
    clt_status s = text ? clt__file_write(out_path, text, strlen(text))
                        : clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory writing the trace to %s", out_path);
    free(text);
    json_decref(root);
    return s;
}

/* Lock held. */
static clt_status stop_locked(void)
{
    if (!atomic_load(&active)) return CLT_OK;
    atomic_store(&active, 0);
    harvest_all();
    clt_status s = write_file();
    for (size_t i = 0; i < nrecs; i++)
        if (recs[i].ev) clReleaseEvent(recs[i].ev);
    free(recs);
    recs = NULL;
    nrecs = cap = unharvested = 0;
    free(out_path);
    out_path = NULL;
    free(offsets);
    free(offset_known);
    offsets = NULL;
    offset_known = NULL;
    return s;
}

/* At exit nothing waits: commands still running are written without device times. */
static void at_exit(void)
{
    pthread_mutex_lock(&lock);
    stop_locked();
    pthread_mutex_unlock(&lock);
}

clt_status clt_trace_start(const char *path)
{
    if (!path || !*path) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trace_start: path is NULL or empty");
    /* Refused now, not at the end of the run when the events are written. */
    CLT_TRY(clt__file_check_target(path));
    int n = clt__slot_count();
    pthread_mutex_lock(&lock);
    clt_status s = CLT_OK;
    if (atomic_load(&active)) {
        s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trace_start: a trace to %s is already running", out_path);
    } else {
        out_path = strdup(path);
        offsets = calloc((size_t)(n ? n : 1), sizeof *offsets);
        offset_known = calloc((size_t)(n ? n : 1), sizeof *offset_known);
        if (!out_path || !offsets || !offset_known) {
            free(out_path);
            free(offsets);
            free(offset_known);
            out_path = NULL;
            offsets = NULL;
            offset_known = NULL;
            s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory starting a trace");
        } else {
            origin_ns = clt__now_ns();
            if (!exit_hook) exit_hook = atexit(at_exit) == 0;
            clt__sync_set_tracer(&recorder);
            atomic_store(&active, 1);
        }
    }
    pthread_mutex_unlock(&lock);
    return s;
}

char *clt__trace_path(void)
{
    pthread_mutex_lock(&lock);
    char *p = atomic_load(&active) && out_path ? strdup(out_path) : NULL;
    pthread_mutex_unlock(&lock);
    return p;
}

clt_status clt_trace_stop(void)
{
    /* The wait for each device's recorded commands is a synchronization
     * point of clt_trace_stop (sync.c: counted, reported, refusable); the
     * lock is not held, as the wait is recorded too. A refusal leaves the
     * trace running; a failed command is reported after the file is written. */
    clt_status waited = CLT_OK;
    int nslots = clt__slot_count();
    for (int slot = 0; slot < nslots; slot++) {
        cl_event *evs = NULL;
        cl_uint n = 0;
        pthread_mutex_lock(&lock);
        clt_status s = atomic_load(&active) ? pending_of(slot, &evs, &n) : CLT_OK;
        pthread_mutex_unlock(&lock);
        if (s == CLT_OK && n > 0) s = clt__sync_wait(slot, "clt_trace_stop", n, evs);
        for (cl_uint i = 0; i < n; i++) clReleaseEvent(evs[i]);
        free(evs);
        if (s == CLT_ERR_SYNC || s == CLT_ERR_OUT_OF_MEMORY) return s;
        if (waited == CLT_OK) waited = s;
    }
    pthread_mutex_lock(&lock);
    clt_status s = stop_locked();
    pthread_mutex_unlock(&lock);
    return s != CLT_OK ? s : waited;
}

/* CLT_TRACE's outcome: a path that cannot be written fails every queue's
 * creation with this message, so the run stops at its first device use. */
static clt_status env_status;
static char env_message[1200];

static void start_from_env(void)
{
    const char *path = clt__env_text(CLT__ENV_TRACE);
    if (!path || !*path) return;
    env_status = clt_trace_start(path);
    if (env_status != CLT_OK) snprintf(env_message, sizeof env_message, "CLT_TRACE=%s: %s", path, clt_last_error());
}

void clt__trace_from_env(void) { pthread_once(&env_once, start_from_env); }

clt_status clt__trace_env_status(void)
{
    pthread_once(&env_once, start_from_env);
    return env_status == CLT_OK ? CLT_OK : clt__fail(env_status, "%s", env_message);
}
