/* A training step recorded once and replayed (replay.h). */
#include "replay.h"

#include <CL/cl_ext.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/env.h"
#include "device_internal.h"
#include "sync.h"

/* Six steps in a row that did not replay (a learning rate that changes
 * every step, a step with a host wait) end the attempts until the fit ends. */
#define MAX_MISSES 6

/* A command of a recording. Everything before `name` is what two commands
 * must share to be the same (compared as bytes: zeroed before filling), and
 * the kernel's arguments, bytes [at, at + len) of the recording's pool. */
typedef struct stored {
    clt__command_kind kind;
    cl_kernel kernel;
    cl_uint dims;
    size_t global[3], local[3];
    int has_local, nargs;
    cl_mem dst, src;
    size_t dst_offset, src_offset, size, pattern_size;
    unsigned char pattern[128];
    char name[48];
    size_t at, len;
    cl_kernel own; /* the recording's own copy of kernel (see own_kernel) */
} stored;

typedef struct recording {
    stored *cmds;
    int n, cap;
    unsigned char *pool;
    size_t used, room;
    cl_command_buffer_khr buffer; /* NULL until the first command */
    cl_sync_point_khr last;       /* the last command's, which the next waits for */
    int replayable;               /* 0 after a foreign command, or a failure to record */
    uint64_t key[2];              /* the step's key at its end */
} recording;

typedef enum mode { OFF, RECORD, COMPARE } mode;

/* Recordings kept per slot: a step's buffers can alternate between steps
 * (a tensor made before the last one is freed takes the other block), so
 * its recordings do too. */
#define KEPT 4

typedef struct session {
    pthread_mutex_t lock;
    pthread_mutex_t launch_lock;
    mode mode;
    recording kept[KEPT]; /* recordings that can be replayed */
    recording rec;        /* RECORD: the one being made */
    recording scratch;    /* COMPARE: the command being compared, encoded */
    int alive[KEPT];      /* COMPARE: the kept recordings every command so far matched */
    int lead;             /* COMPARE: one that matched them all, whose commands are held back */
    int matched;          /* COMPARE: commands held back so far */
    int next;             /* the kept recording the next new one replaces */
    int misses;           /* steps in a row that did not replay */
    cl_event held;        /* COMPARE: the event held-back commands' tensors take */
    int supported;        /* -1 unknown, 0, 1 */
    int simultaneous;     /* a buffer may be enqueued again before it has run */
    int cpu;              /* the driver's device is a CPU: replay only when CLT_REPLAY=1 */
} session;

static session *sessions;
static int nsessions;
static pthread_once_t sessions_once = PTHREAD_ONCE_INIT;
static atomic_ullong replays;

static clCreateCommandBufferKHR_fn create_buffer;
static clFinalizeCommandBufferKHR_fn finalize_buffer;
static clReleaseCommandBufferKHR_fn release_buffer;
static clEnqueueCommandBufferKHR_fn enqueue_buffer;
static clCommandNDRangeKernelKHR_fn record_kernel;
static clCommandFillBufferKHR_fn record_fill;
static clCommandCopyBufferKHR_fn record_copy;

static clt_status before_command(int slot);

static void make_sessions(void)
{
    int n = clt__slot_count();
    sessions = calloc((size_t)(n ? n : 1), sizeof *sessions);
    if (!sessions) return;
    nsessions = n;
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&sessions[i].lock, NULL);
        pthread_mutex_init(&sessions[i].launch_lock, NULL);
        sessions[i].supported = -1;
    }
}

static session *session_of(int slot)
{
    pthread_once(&sessions_once, make_sessions);
    return sessions && slot >= 0 && slot < nsessions ? &sessions[slot] : NULL;
}

void clt__launch_lock(int slot)
{
    session *s = session_of(slot);
    if (s) pthread_mutex_lock(&s->launch_lock);
}

void clt__launch_unlock(int slot)
{
    session *s = session_of(slot);
    if (s) pthread_mutex_unlock(&s->launch_lock);
}

uint64_t clt__replay_count(void) { return atomic_load(&replays); }

/* The version of cl_khr_command_buffer the device reports, 0 when none. */
static cl_version_khr extension_version(cl_device_id dev)
{
    size_t len = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS_WITH_VERSION_KHR, 0, NULL, &len) != CL_SUCCESS || len == 0) return 0;
    cl_name_version_khr *v = malloc(len);
    cl_version_khr found = 0;
    if (v && clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS_WITH_VERSION_KHR, len, v, NULL) == CL_SUCCESS)
        for (size_t i = 0; i < len / sizeof *v; i++)
            if (strcmp(v[i].name, "cl_khr_command_buffer") == 0) found = v[i].version;
    free(v);
    return found;
}

/* The entry points, from the slot's platform; 1 when all were found. */
static int find_entry_points(cl_platform_id p)
{
#define ENTRY(var, name) (var = (name##_fn)clGetExtensionFunctionAddressForPlatform(p, #name)) != NULL
    return ENTRY(create_buffer, clCreateCommandBufferKHR) && ENTRY(finalize_buffer, clFinalizeCommandBufferKHR) &&
           ENTRY(release_buffer, clReleaseCommandBufferKHR) && ENTRY(enqueue_buffer, clEnqueueCommandBufferKHR) &&
           ENTRY(record_kernel, clCommandNDRangeKernelKHR) && ENTRY(record_fill, clCommandFillBufferKHR) &&
           ENTRY(record_copy, clCommandCopyBufferKHR);
#undef ENTRY
}

/* Whether the device lets a command buffer be enqueued while an earlier
 * enqueue of it has not run yet: two recordings used in turn then never
 * wait for each other (without it such a step is enqueued command by
 * command). */
static int simultaneous_use(cl_device_id dev)
{
    cl_device_command_buffer_capabilities_khr caps = 0;
    return clGetDeviceInfo(dev, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps, NULL) == CL_SUCCESS &&
           (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR);
}

/* Whether the driver's device is a CPU (whatever CLT_CPU_AS_GPU presents
 * it as). On pocl 3.1 clEnqueueCommandBufferKHR costs the host about what
 * the enqueues it replaces do (bench/bench_step.c), so a CPU replays only
 * when CLT_REPLAY=1 asks. */
static int cpu_driver(cl_device_id dev)
{
    cl_device_type type = 0;
    return clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
           (type & CL_DEVICE_TYPE_CPU);
}

/* This build's entry points are those of versions 0.9.0 to 0.9.4 (later
 * ones take a properties argument in every command). */
static int probe(int slot)
{
    const clt__slot *sl = clt__slot_get(slot);
    if (!sl || sl->described || clt__slot_plans(slot) || clt__slot_is_pinned(slot)) return 0;
    cl_version_khr v = extension_version(sl->device);
    if (CL_VERSION_MAJOR_KHR(v) != 0 || CL_VERSION_MINOR_KHR(v) != 9 || CL_VERSION_PATCH_KHR(v) > 4) return 0;
    return find_entry_points(sl->platform);
}

int clt__replay_supported(int slot)
{
    session *s = session_of(slot);
    if (!s) return 0;
    int asked = clt__env_int(CLT__ENV_REPLAY, -1); /* read at every step: a test turns it off and on */
    if (asked == 0) return 0;
    pthread_mutex_lock(&s->lock);
    if (s->supported < 0) {
        s->supported = probe(slot);
        s->simultaneous = s->supported && simultaneous_use(clt__slot_get(slot)->device);
        s->cpu = s->supported && cpu_driver(clt__slot_get(slot)->device);
    }
    int on = s->supported && (asked == 1 || !s->cpu);
    pthread_mutex_unlock(&s->lock);
    return on;
}

static void recording_clear(recording *r)
{
    if (r->buffer) release_buffer(r->buffer);
    for (int i = 0; i < r->n; i++)
        if (r->cmds[i].own) clReleaseKernel(r->cmds[i].own);
    free(r->cmds);
    free(r->pool);
    memset(r, 0, sizeof *r);
}

/* Room in r's pool for len more bytes; 0 when there is none (out of
 * memory, or sizes past int64). */
static int reserve(recording *r, size_t len)
{
    int64_t need, room;
    if (len > INT64_MAX || clt__add_i64((int64_t)r->used, (int64_t)len, &need) != 0) return 0;
    if ((size_t)need <= r->room) return 1;
    if (clt__mul_i64(need, 2, &room) != 0 || clt__add_i64(room, 1024, &room) != 0) return 0;
    unsigned char *grown = realloc(r->pool, (size_t)room);
    if (!grown) return 0;
    r->pool = grown;
    r->room = (size_t)room;
    return 1;
}

/* The command as a stored one, its arguments at the end of r's pool (not
 * yet counted in r->used). 0 when it cannot be stored (out of memory, a
 * pattern or a range too large). */
static int encode(recording *r, const clt__command *c, stored *out)
{
    memset(out, 0, sizeof *out);
    out->kind = c->kind;
    snprintf(out->name, sizeof out->name, "%s", c->name ? c->name : "?");
    if (c->kind != CLT__COMMAND_KERNEL) {
        if (c->pattern_size > sizeof out->pattern) return 0;
        out->dst = c->dst;
        out->src = c->src;
        out->dst_offset = c->dst_offset;
        out->src_offset = c->src_offset;
        out->size = c->size;
        out->pattern_size = c->pattern_size;
        if (c->pattern) memcpy(out->pattern, c->pattern, c->pattern_size);
        return 1;
    }
    if (c->dims < 1 || c->dims > 3) return 0;
    out->kernel = c->kernel;
    out->dims = c->dims;
    out->nargs = c->nargs;
    out->has_local = c->local != NULL;
    for (cl_uint d = 0; d < c->dims; d++) {
        out->global[d] = c->global[d];
        out->local[d] = c->local ? c->local[d] : 0;
    }
    size_t len = 0;
    for (int i = 0; i < c->nargs; i++) len += sizeof(size_t) + 1 + (c->args[i].value ? c->args[i].size : 0);
    if (!reserve(r, len)) return 0;
    unsigned char *p = r->pool + r->used;
    for (int i = 0; i < c->nargs; i++) {
        memcpy(p, &c->args[i].size, sizeof(size_t));
        p += sizeof(size_t);
        *p++ = c->args[i].value != NULL;
        if (c->args[i].value) {
            memcpy(p, c->args[i].value, c->args[i].size);
            p += c->args[i].size;
        }
    }
    out->at = r->used;
    out->len = len;
    return 1;
}

/* 1 when a (encoded into a's pool, past its used bytes) is b of b's recording. */
static int same(const recording *ra, const stored *a, const recording *rb, const stored *b)
{
    return memcmp(a, b, offsetof(stored, name)) == 0 && a->len == b->len &&
           (a->len == 0 || memcmp(ra->pool + a->at, rb->pool + b->at, a->len) == 0);
}

/* Sets a stored kernel's arguments on k (c's kernel under the launch
 * lock, or a copy of it). */
static cl_int set_args(const recording *r, const stored *c, cl_kernel k)
{
    const unsigned char *p = r->pool + c->at;
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < c->nargs && err == CL_SUCCESS; i++) {
        size_t size;
        memcpy(&size, p, sizeof size);
        p += sizeof size;
        int has = *p++;
        err = clSetKernelArg(k, (cl_uint)i, size, has ? p : NULL);
        if (has) p += size;
    }
    return err;
}

/* A kernel object of k's own, for one command of a recording: pocl 3.1
 * takes a recorded kernel's arguments when the buffer is enqueued, not
 * when the command is recorded, so a kernel shared with later launches
 * would replay with their arguments. */
static cl_int own_kernel(cl_kernel k, cl_kernel *out)
{
    cl_program p = NULL;
    char name[256] = "";
    cl_int err = clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof p, &p, NULL);
    if (err == CL_SUCCESS) err = clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, NULL);
    if (err == CL_SUCCESS) *out = clCreateKernel(p, name, &err);
    return err;
}

/* Appends c (stored in r) to r's command buffer, after the one before it:
 * a command buffer is out of order whatever its queue, so each command
 * waits for the one before it through its sync point, as on the queue. */
static cl_int append(cl_command_queue q, const session *s, recording *r, stored *c)
{
    cl_int err = CL_SUCCESS;
    cl_command_buffer_properties_khr props[] = {CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR,
                                                 0};
    if (!r->buffer) r->buffer = create_buffer(1, &q, s->simultaneous ? props : NULL, &err);
    if (err != CL_SUCCESS) return err;
    cl_uint nwait = r->n > 0;
    const cl_sync_point_khr *wait = nwait ? &r->last : NULL;
    cl_sync_point_khr point = 0;
    if (c->kind == CLT__COMMAND_FILL)
        err = record_fill(r->buffer, NULL, c->dst, c->pattern, c->pattern_size, c->dst_offset, c->size, nwait, wait,
                          &point, NULL);
    else if (c->kind == CLT__COMMAND_COPY)
        err = record_copy(r->buffer, NULL, c->src, c->dst, c->src_offset, c->dst_offset, c->size, nwait, wait,
                          &point, NULL);
    else {
        err = own_kernel(c->kernel, &c->own);
        if (err == CL_SUCCESS) err = set_args(r, c, c->own);
        if (err == CL_SUCCESS)
            err = record_kernel(r->buffer, NULL, NULL, c->own, c->dims, NULL, c->global,
                                c->has_local ? c->local : NULL, nwait, wait, &point, NULL);
    }
    r->last = point;
    return err;
}

/* Adds st (its arguments at the end of the pool of the recording being
 * made) to that recording: appended to its buffer, and stored. */
static void push(cl_command_queue q, session *s, stored *st)
{
    recording *r = &s->rec;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        stored *grown = realloc(r->cmds, (size_t)cap * sizeof *grown);
        if (!grown) {
            r->replayable = 0;
            return;
        }
        r->cmds = grown;
        r->cap = cap;
    }
    if (append(q, s, r, st) != CL_SUCCESS) {
        if (st->own) clReleaseKernel(st->own);
        r->replayable = 0;
        return;
    }
    r->used += st->len;
    r->cmds[r->n++] = *st;
}

/* Adds c to the recording being made. */
static void record(cl_command_queue q, session *s, const clt__command *c)
{
    stored st;
    if (!s->rec.replayable) return;
    if (!encode(&s->rec, c, &st)) s->rec.replayable = 0;
    else push(q, s, &st);
}

/* Adds command c of recording from to the recording being made. */
static void record_stored(cl_command_queue q, session *s, const recording *from, const stored *c)
{
    recording *r = &s->rec;
    if (!r->replayable) return;
    if (!reserve(r, c->len)) {
        r->replayable = 0;
        return;
    }
    stored st = *c;
    st.own = NULL;
    st.at = r->used;
    if (c->len) memcpy(r->pool + r->used, from->pool + c->at, c->len);
    push(q, s, &st);
}

/* Enqueues stored command c as its choke point would have. */
static cl_int enqueue_one(cl_command_queue q, session *s, const recording *r, const stored *c, cl_event *ev)
{
    if (c->kind == CLT__COMMAND_FILL)
        return clEnqueueFillBuffer(q, c->dst, c->pattern, c->pattern_size, c->dst_offset, c->size, 0, NULL, ev);
    if (c->kind == CLT__COMMAND_COPY)
        return clEnqueueCopyBuffer(q, c->src, c->dst, c->src_offset, c->dst_offset, c->size, 0, NULL, ev);
    pthread_mutex_lock(&s->launch_lock);
    cl_int err = set_args(r, c, c->kernel);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, c->kernel, c->dims, NULL, c->global, c->has_local ? c->local : NULL, 0, NULL,
                                     ev);
    pthread_mutex_unlock(&s->launch_lock);
    return err;
}

/* The held-back commands' event completes with ev (or fails with status). */
static void finish_held(int slot, session *s, cl_event ev, cl_int status)
{
    if (!s->held) return;
    if (!ev || clt__event_chain(ev, s->held) != CL_SUCCESS) {
        /* No callback: the host waits instead. */
        if (ev && clt__host_wait(slot, "a replayed step (no completion callback)", ev) != CLT_OK) status = -1;
        clSetUserEventStatus(s->held, status < 0 ? status : CL_COMPLETE);
    }
    clReleaseEvent(s->held);
    s->held = NULL;
}

/* Starts a new recording in the session. */
static void record_afresh(session *s)
{
    recording_clear(&s->rec);
    s->rec.replayable = 1;
}

/* Enqueues the commands held back so far, one by one, and leaves the
 * comparison: the rest of the step runs as usual and, when then is
 * RECORD, is recorded, the commands held back first. The session's lock
 * held. */
static clt_status release_held(int slot, session *s, mode then)
{
    cl_command_queue q = clt__slot_queue_made(slot);
    const recording *lead = &s->kept[s->lead];
    cl_event last = NULL;
    cl_int err = CL_SUCCESS;
    const char *failed = NULL;
    if (then == RECORD) record_afresh(s);
    for (int i = 0; i < s->matched && err == CL_SUCCESS; i++) {
        const stored *c = &lead->cmds[i];
        cl_event ev = NULL;
        if (then == RECORD) record_stored(q, s, lead, c);
        err = enqueue_one(q, s, lead, c, &ev);
        if (err != CL_SUCCESS) {
            failed = c->name;
            break;
        }
        clt__after_enqueue(slot, ev, c->name);
        if (last) clReleaseEvent(last);
        last = ev;
    }
    finish_held(slot, s, err == CL_SUCCESS ? last : NULL, err);
    if (last) clReleaseEvent(last);
    s->mode = err == CL_SUCCESS ? then : OFF;
    s->matched = 0;
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "enqueueing %s on %s (a step that was to be replayed)", failed,
                            clt__slot_get(slot)->name);
    return CLT_OK;
}

/* The hook sync.c calls before a command the replay does not see, and
 * before a host wait: in a comparison, what was held back goes first; in a
 * recording that has begun, the step can no longer be replayed. */
static clt_status before_command(int slot)
{
    session *s = session_of(slot);
    if (!s) return CLT_OK;
    pthread_mutex_lock(&s->lock);
    clt_status st = CLT_OK;
    if (s->mode == COMPARE && s->matched > 0) st = release_held(slot, s, OFF);
    else if (s->mode == RECORD && s->rec.n > 0) s->rec.replayable = 0;
    pthread_mutex_unlock(&s->lock);
    return st;
}

void clt__replay_step_begin(int slot, const uint64_t key[2])
{
    if (!clt__replay_supported(slot) || clt_launch_get_blocking() || !clt__slot_queue_made(slot)) return;
    session *s = session_of(slot);
    clt__sync_set_command_hook(before_command);
    pthread_mutex_lock(&s->lock);
    s->matched = 0;
    s->mode = OFF;
    if (s->misses < MAX_MISSES) {
        int any = 0;
        for (int i = 0; i < KEPT; i++) {
            s->alive[i] = s->kept[i].n > 0 && memcmp(s->kept[i].key, key, sizeof s->kept[i].key) == 0;
            if (s->alive[i] && !any) s->lead = i;
            any |= s->alive[i];
        }
        s->mode = any ? COMPARE : RECORD;
        if (!any) record_afresh(s);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Enqueues the lead recording's command buffer in place of the held-back commands. */
static clt_status replay(int slot, session *s)
{
    cl_command_queue q = clt__slot_queue_made(slot);
    cl_event ev = NULL;
    cl_int err = enqueue_buffer(1, &q, s->kept[s->lead].buffer, 0, NULL, &ev);
    if (err != CL_SUCCESS) return release_held(slot, s, OFF); /* the commands one by one instead */
    finish_held(slot, s, ev, CL_COMPLETE);
    s->matched = 0;
    s->misses = 0;
    atomic_fetch_add(&replays, 1);
    clt_status st = clt__after_enqueue(slot, ev, "replay");
    clReleaseEvent(ev);
    return st;
}

/* A recorded step that can be replayed is kept, in place of the oldest. */
static void keep(session *s, clt_status st, const uint64_t key[2])
{
    recording *r = &s->rec;
    if (st == CLT_OK && r->replayable && r->n > 0 && finalize_buffer(r->buffer) == CL_SUCCESS) {
        memcpy(r->key, key, sizeof r->key);
        recording_clear(&s->kept[s->next]);
        s->kept[s->next] = *r;
        s->next = (s->next + 1) % KEPT;
        memset(r, 0, sizeof *r);
        return;
    }
    recording_clear(r);
}

clt_status clt__replay_step_end(int slot, clt_status st, const uint64_t key[2])
{
    session *s = session_of(slot);
    if (!s) return st;
    pthread_mutex_lock(&s->lock);
    clt_status out = CLT_OK;
    int replayed = 0;
    if (s->mode == COMPARE) {
        replayed = st == CLT_OK && s->matched == s->kept[s->lead].n;
        for (int i = 0; !replayed && st == CLT_OK && i < KEPT; i++)
            if (s->alive[i] && s->matched == s->kept[i].n) {
                s->lead = i;
                replayed = 1;
            }
        out = replayed ? replay(slot, s) : release_held(slot, s, OFF);
    } else if (s->mode == RECORD) {
        keep(s, st, key);
    }
    if (!replayed) s->misses++;
    s->mode = OFF;
    pthread_mutex_unlock(&s->lock);
    return st != CLT_OK ? st : out;
}

void clt__replay_reset(int slot)
{
    session *s = session_of(slot);
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < KEPT; i++) recording_clear(&s->kept[i]);
    recording_clear(&s->rec);
    recording_clear(&s->scratch);
    s->misses = 0;
    s->next = 0;
    s->mode = OFF;
    pthread_mutex_unlock(&s->lock);
}

/* In a comparison: holds c back while it is the next command of a kept
 * recording that matched every command before it; else releases what was
 * held back and records the rest of the step. */
static int hold(int slot, session *s, const clt__command *c, cl_event *deferred, clt_status *st)
{
    stored cand;
    s->scratch.used = 0;
    int ok = encode(&s->scratch, c, &cand), any = 0;
    for (int i = 0; i < KEPT; i++) {
        if (!s->alive[i]) continue;
        const recording *k = &s->kept[i];
        s->alive[i] = ok && s->matched < k->n && same(&s->scratch, &cand, k, &k->cmds[s->matched]);
        if (s->alive[i] && !any) s->lead = i;
        any |= s->alive[i];
    }
    if (any && !s->held) {
        cl_context ctx;
        cl_int err = CL_SUCCESS;
        if (clt__slot_context(slot, &ctx) == CLT_OK) s->held = clCreateUserEvent(ctx, &err);
        if (!s->held || err != CL_SUCCESS) s->held = NULL, any = 0;
    }
    if (!any) {
        /* s->lead still matched every command before this one. */
        *st = release_held(slot, s, RECORD);
        if (*st == CLT_OK) record(clt__slot_queue_made(slot), s, c);
        return 0;
    }
    s->matched++;
    *deferred = s->held;
    return 1;
}

clt_status clt__replay_take(int slot, const clt__command *c, int waits, int *taken, cl_event *deferred)
{
    *taken = 0;
    *deferred = NULL;
    session *s = session_of(slot);
    if (!s) return CLT_OK;
    if (waits) return before_command(slot);
    pthread_mutex_lock(&s->lock);
    clt_status st = CLT_OK;
    if (s->mode == COMPARE) *taken = hold(slot, s, c, deferred, &st);
    else if (s->mode == RECORD) record(clt__slot_queue_made(slot), s, c);
    pthread_mutex_unlock(&s->lock);
    return st;
}
