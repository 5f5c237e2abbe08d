/* Strict submission: an LD_PRELOAD layer over the OpenCL ICD loader in which
 * no command starts until its queue is flushed, as the OpenCL specification
 * allows and some GPU drivers do. A missing clFlush then deadlocks here, on
 * any implementation (pocl in CI), instead of on a user's GPU.
 *
 * Every command enqueued on a queue since its last flush waits for a user
 * event (the queue's "gate"). The gate opens on what the specification
 * counts as a flush of that queue: clFlush, clFinish, a blocking read,
 * write or map on it, clWaitForEvents on one of its events, and
 * clReleaseCommandQueue. A watchdog thread reports a gate that stays closed
 * longer than CLT_STRICT_TIMEOUT seconds (default 10): the queue, its
 * device, the first command and how many wait, and ends the process with
 * exit status 86, so a test that would hang fails with the report instead.
 *
 * Build and run (tests/CMakeLists.txt builds it as clt_strict_submit):
 *   LD_PRELOAD=build/tests/libclt_strict_submit.so build/clt train --steps 3
 * CLT_STRICT_LOG=file appends the report to a file as well. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STRICT_EXIT 86
#define MAX_QUEUES 256

typedef struct gate {
    cl_command_queue queue;
    cl_event ev;       /* the user event commands wait for; NULL when the queue is flushed */
    double since;      /* when the first command after the last flush was enqueued */
    unsigned waiting;  /* commands enqueued since */
    char first[64];    /* the first of them */
} gate;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gate gates[MAX_QUEUES];
static pthread_once_t watchdog_once = PTHREAD_ONCE_INIT;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double timeout_s(void)
{
    const char *v = getenv("CLT_STRICT_TIMEOUT");
    double t = v ? atof(v) : 0.0;
    return t > 0.0 ? t : 10.0;
}

static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "clt-strict: %s not found in the OpenCL loader\n", name);
        _exit(STRICT_EXIT);
    }
    return f;
}

#define REAL(ret, name, params)                                  \
    typedef ret(CL_API_CALL * name##_fn) params;                \
    static name##_fn real_##name;                               \
    if (!real_##name) real_##name = (name##_fn)real(#name)

static void report(const gate *g, double age)
{
    char dev[128] = "?";
    cl_device_id d = NULL;
    if (clGetCommandQueueInfo(g->queue, CL_QUEUE_DEVICE, sizeof d, &d, NULL) == CL_SUCCESS && d)
        clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof dev, dev, NULL);
    dev[sizeof dev - 1] = '\0';
    char msg[512];
    snprintf(msg, sizeof msg,
             "clt-strict: DEADLOCK: %u command(s) on queue %p (device \"%s\"), the first %s, were enqueued %.1f s "
             "ago and their queue was never flushed; a spec-strict driver never starts them, so whatever waits "
             "for them (another queue, a callback, the host) waits forever. Add a clFlush of that queue where "
             "the dependency is made.\n",
             g->waiting, (void *)g->queue, dev, g->first, age);
    fputs(msg, stderr);
    const char *log = getenv("CLT_STRICT_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fputs(msg, f);
        fclose(f);
    }
}

static void *watchdog(void *arg)
{
    (void)arg;
    double limit = timeout_s();
    for (;;) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&lock);
        double t = now();
        for (int i = 0; i < MAX_QUEUES; i++)
            if (gates[i].ev && t - gates[i].since > limit) {
                report(&gates[i], t - gates[i].since);
                _exit(STRICT_EXIT);
            }
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void start_watchdog(void)
{
    pthread_t th;
    if (pthread_create(&th, NULL, watchdog, NULL) == 0) pthread_detach(th);
}

static gate *find(cl_command_queue q, int add)
{
    gate *free_slot = NULL;
    for (int i = 0; i < MAX_QUEUES; i++) {
        if (gates[i].queue == q) return &gates[i];
        if (!gates[i].queue && !free_slot) free_slot = &gates[i];
    }
    if (!add || !free_slot) return NULL;
    free_slot->queue = q;
    return free_slot;
}

/* Opens q's gate: the commands behind it may start. */
static void flush_queue(cl_command_queue q)
{
    pthread_mutex_lock(&lock);
    gate *g = find(q, 0);
    cl_event ev = g ? g->ev : NULL;
    if (g) {
        g->ev = NULL;
        g->waiting = 0;
    }
    pthread_mutex_unlock(&lock);
    if (ev) {
        clSetUserEventStatus(ev, CL_COMPLETE);
        clReleaseEvent(ev);
    }
}

/* The wait list of a command on q: the caller's plus q's gate (closed, and
 * made so when the queue was flushed). *list is the caller's list or buf. */
static cl_uint gated(cl_command_queue q, const char *what, cl_uint n, const cl_event **list, cl_event *buf)
{
    pthread_once(&watchdog_once, start_watchdog);
    pthread_mutex_lock(&lock);
    gate *g = find(q, 1);
    if (g && !g->ev) {
        cl_context ctx = NULL;
        cl_int err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL);
        g->ev = err == CL_SUCCESS ? clCreateUserEvent(ctx, &err) : NULL;
        if (err != CL_SUCCESS) g->ev = NULL;
        g->since = now();
        g->waiting = 0;
        snprintf(g->first, sizeof g->first, "%s", what);
    }
    cl_event ev = g ? g->ev : NULL;
    if (g && ev) g->waiting++;
    pthread_mutex_unlock(&lock);
    if (!ev || n >= 63) return n;
    for (cl_uint i = 0; i < n; i++) buf[i] = (*list)[i];
    buf[n] = ev;
    *list = buf;
    return n + 1;
}

static const char *kernel_name(cl_kernel k, char *buf, size_t len)
{
    snprintf(buf, len, "kernel ");
    size_t used = strlen(buf);
    if (clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, len - used, buf + used, NULL) != CL_SUCCESS) buf[used] = '\0';
    buf[len - 1] = '\0';
    return buf;
}

#define GATE(q, what)                 \
    cl_event gate_buf_[64];           \
    const cl_event *gl_ = list;       \
    cl_uint gn_ = gated(q, what, n, &gl_, gate_buf_)

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                                                       const size_t *gws, const size_t *lws, cl_uint n,
                                                       const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueNDRangeKernel,
         (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,
          const cl_event *, cl_event *));
    char name[64];
    GATE(q, kernel_name(k, name, sizeof name));
    return real_clEnqueueNDRangeKernel(q, k, dim, off, gws, lws, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t o, size_t s,
                                                    void *p, cl_uint n, const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueReadBuffer,
         (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *, cl_event *));
    if (blocking) {
        flush_queue(q);
        return real_clEnqueueReadBuffer(q, m, blocking, o, s, p, n, list, ev);
    }
    GATE(q, "clEnqueueReadBuffer");
    return real_clEnqueueReadBuffer(q, m, blocking, o, s, p, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t o, size_t s,
                                                     const void *p, cl_uint n, const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueWriteBuffer,
         (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint, const cl_event *, cl_event *));
    if (blocking) {
        flush_queue(q);
        return real_clEnqueueWriteBuffer(q, m, blocking, o, s, p, n, list, ev);
    }
    GATE(q, "clEnqueueWriteBuffer");
    return real_clEnqueueWriteBuffer(q, m, blocking, o, s, p, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY void *CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags f,
                                                  size_t o, size_t s, cl_uint n, const cl_event *list, cl_event *ev,
                                                  cl_int *err)
{
    REAL(void *, clEnqueueMapBuffer,
         (cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, cl_uint, const cl_event *, cl_event *,
          cl_int *));
    if (blocking) {
        flush_queue(q);
        return real_clEnqueueMapBuffer(q, m, blocking, f, o, s, n, list, ev, err);
    }
    GATE(q, "clEnqueueMapBuffer");
    return real_clEnqueueMapBuffer(q, m, blocking, f, o, s, gn_, gn_ ? gl_ : NULL, ev, err);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue q, cl_mem a, cl_mem b, size_t oa, size_t ob,
                                                    size_t s, cl_uint n, const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueCopyBuffer,
         (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *));
    GATE(q, "clEnqueueCopyBuffer");
    return real_clEnqueueCopyBuffer(q, a, b, oa, ob, s, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *pat, size_t ps, size_t o,
                                                    size_t s, cl_uint n, const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueFillBuffer,
         (cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *));
    GATE(q, "clEnqueueFillBuffer");
    return real_clEnqueueFillBuffer(q, m, pat, ps, o, s, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueUnmapMemObject(cl_command_queue q, cl_mem m, void *p, cl_uint n,
                                                        const cl_event *list, cl_event *ev)
{
    REAL(cl_int, clEnqueueUnmapMemObject, (cl_command_queue, cl_mem, void *, cl_uint, const cl_event *, cl_event *));
    GATE(q, "clEnqueueUnmapMemObject");
    return real_clEnqueueUnmapMemObject(q, m, p, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint n, const cl_event *list,
                                                            cl_event *ev)
{
    REAL(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue, cl_uint, const cl_event *, cl_event *));
    GATE(q, "clEnqueueMarkerWithWaitList");
    return real_clEnqueueMarkerWithWaitList(q, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueBarrierWithWaitList(cl_command_queue q, cl_uint n, const cl_event *list,
                                                             cl_event *ev)
{
    REAL(cl_int, clEnqueueBarrierWithWaitList, (cl_command_queue, cl_uint, const cl_event *, cl_event *));
    GATE(q, "clEnqueueBarrierWithWaitList");
    return real_clEnqueueBarrierWithWaitList(q, gn_, gn_ ? gl_ : NULL, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clFlush(cl_command_queue q)
{
    REAL(cl_int, clFlush, (cl_command_queue));
    flush_queue(q);
    return real_clFlush(q);
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q)
{
    REAL(cl_int, clFinish, (cl_command_queue));
    flush_queue(q);
    return real_clFinish(q);
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event *evs)
{
    REAL(cl_int, clWaitForEvents, (cl_uint, const cl_event *));
    for (cl_uint i = 0; i < n; i++) {
        cl_command_queue q = NULL;
        if (clGetEventInfo(evs[i], CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) == CL_SUCCESS && q) flush_queue(q);
    }
    return real_clWaitForEvents(n, evs);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue q)
{
    REAL(cl_int, clReleaseCommandQueue, (cl_command_queue));
    cl_uint refs = 0;
    clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    flush_queue(q);
    if (refs == 1) {
        pthread_mutex_lock(&lock);
        gate *g = find(q, 0);
        if (g) g->queue = NULL;
        pthread_mutex_unlock(&lock);
    }
    return real_clReleaseCommandQueue(q);
}
