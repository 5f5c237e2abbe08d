/* Pinned host tensors and the transfers that involve host memory: uploads
 * from and downloads into pinned tensors, and copies between contexts
 * through a pinned staging buffer. Nothing here waits unless the caller
 * asked to (blocking clt_to, wait flags), the host itself reads pinned memory
 * a transfer still writes (a pinned-to-pinned copy's source), or a callback
 * cannot be registered: a transfer's completion is tracked by its event, and
 * memory it uses is released by completion callbacks. */
#include "pinned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/fault.h"
#include "../device/device_internal.h"
#include "../device/sync.h"

/* Transfers that read a pinned storage (its last_write covers the ones that
 * write it). */
struct clt__pinned_io {
    cl_event *reads;
    int n, cap;
};

int clt__is_pinned(const clt_tensor *t) { return clt__slot_is_pinned(t->st->slot); }

clt_device clt__pinned_beside(clt_device dev)
{
    return dev.type == CLT_DEVICE_PLAN ? clt_plan_device(clt_pinned()) : clt_pinned();
}

void *clt__pinned_ptr(const clt_tensor *t)
{
    return t->st->block ? (char *)clt__block_host(t->st->block) + t->offset : NULL;
}

/* Drops finished reads. */
static void prune(struct clt__pinned_io *io)
{
    if (!io) return;
    int k = 0;
    for (int i = 0; i < io->n; i++) {
        if (clt__event_done(io->reads[i])) clReleaseEvent(io->reads[i]);
        else io->reads[k++] = io->reads[i];
    }
    io->n = k;
}

static clt_status add_read(clt__storage *st, cl_event ev)
{
    if (!st->io && !(st->io = calloc(1, sizeof *st->io)))
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory tracking a transfer");
    struct clt__pinned_io *io = st->io;
    prune(io);
    if (io->n == io->cap) {
        int ncap = io->cap ? io->cap * 2 : 4;
        cl_event *grown = realloc(io->reads, (size_t)ncap * sizeof *grown);
        if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory tracking a transfer");
        io->reads = grown;
        io->cap = ncap;
    }
    clRetainEvent(ev);
    io->reads[io->n++] = ev;
    return CLT_OK;
}

static int writing(const clt__storage *st) { return st->last_write && !clt__event_done(st->last_write); }

static int reading(clt__storage *st)
{
    prune(st->io);
    return st->io && st->io->n > 0;
}

int clt_tensor_in_flight(const clt_tensor *t)
{
    if (!t || !clt__is_pinned(t)) return 0;
    clt__storage *st = t->st;
    return writing(st) || reading(st);
}

clt_status clt__pinned_writable(clt_tensor *t, int wait, const char *api)
{
    clt__storage *st = t->st;
    int w = writing(st), r = reading(st);
    if (!w && !r) return CLT_OK;
    if (!wait) {
        /* Only these two calls take a wait argument. */
        int offers_wait = strcmp(api, "clt_tensor_host_ptr") == 0 || strcmp(api, "clt_tensor_write") == 0;
        return clt__fail(CLT_ERR_BUSY, "%s: the pinned tensor is in flight (a non-blocking copy %s it); wait for "
                         "the copy's event with clt_event_wait first%s", api, w ? "writes" : "reads",
                         offers_wait ? ", or pass wait = 1" : "");
    }
    int n = (w ? 1 : 0) + (r ? st->io->n : 0);
    cl_event *evs = malloc((size_t)n * sizeof *evs);
    if (!evs) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory waiting for transfers");
    int k = 0;
    if (w) evs[k++] = st->last_write;
    for (int i = 0; r && i < st->io->n; i++) evs[k++] = st->io->reads[i];
    clt_status s = clt__sync_wait(st->slot, api, (cl_uint)n, evs);
    free(evs);
    prune(st->io);
    clt__pinned_reclaim();
    return s;
}

clt_status clt__pinned_readable(const clt_tensor *t, const char *api)
{
    if (!writing(t->st)) return CLT_OK;
    return clt__sync_wait(t->st->slot, api, 1, &t->st->last_write);
}

/* A block to free when `left` callbacks have run. Callbacks run on the
 * runtime's threads, which must not take the allocator's lock (its holder
 * may be waiting for those threads), so a finished block only moves to the
 * `ready` list; clt__pinned_reclaim frees it on a caller's thread. */
typedef struct deferred_free {
    clt__block *block;
    atomic_int left;
    struct deferred_free *next;
} deferred_free;

static _Atomic(deferred_free *) ready;

static void CL_CALLBACK free_when_done(cl_event ev, cl_int status, void *data)
{
    (void)status;
    deferred_free *d = data;
    if (ev) clReleaseEvent(ev);
    if (atomic_fetch_sub(&d->left, 1) != 1) return;
    d->next = atomic_load(&ready);
    while (!atomic_compare_exchange_weak(&ready, &d->next, d)) {
    }
}

void clt__pinned_reclaim(void)
{
    deferred_free *d = atomic_exchange(&ready, NULL);
    while (d) {
        deferred_free *next = d->next;
        clt__free(d->block, NULL);
        free(d);
        d = next;
    }
}

#define RELEASE_WAIT "clt_tensor_release (pinned memory a transfer uses: no callback)"

/* Frees the block once every event has completed; never waits unless the
 * runtime refuses a callback. No flush: nothing waits for the callback, and
 * the queue's next flush or wait starts the command (a flush here would
 * block on implementations whose clFlush runs the queue, like oclgrind's). */
static void free_after(int slot, clt__block *block, int n, const cl_event *evs)
{
    deferred_free *d = n > 0 ? malloc(sizeof *d) : NULL;
    if (!d) {
        for (int i = 0; i < n; i++) clt__sync_fallback(slot, RELEASE_WAIT, evs[i]);
        clt__free(block, NULL);
        return;
    }
    d->block = block;
    /* Waits elsewhere reclaim it too (the device layer cannot call up). */
    clt__sync_set_after_wait(clt__pinned_reclaim);
    /* One extra count held while callbacks are registered, so none frees early. */
    atomic_init(&d->left, n + 1);
    for (int i = 0; i < n; i++) {
        clRetainEvent(evs[i]);
        if (clt__fault(CLT__FAULT_CALLBACK) || clSetEventCallback(evs[i], CL_COMPLETE, free_when_done, d) != CL_SUCCESS) {
            clt__sync_fallback(slot, RELEASE_WAIT, evs[i]);
            free_when_done(evs[i], CL_COMPLETE, d);
        }
    }
    free_when_done(NULL, CL_COMPLETE, d);
}

void clt__pinned_free(clt__storage *st)
{
    clt__pinned_reclaim();
    struct clt__pinned_io *io = st->io;
    prune(io);
    /* Reads of pinned memory wait for its pending write, so when reads are
     * pending they finish last. */
    if (st->block) {
        if (io && io->n > 0) free_after(st->slot, st->block, io->n, io->reads);
        else if (writing(st)) free_after(st->slot, st->block, 1, &st->last_write);
        else clt__free(st->block, NULL);
    }
    if (io) {
        for (int i = 0; i < io->n; i++) clReleaseEvent(io->reads[i]);
        free(io->reads);
        free(io);
    }
    st->io = NULL;
}

static void copy_name(char *buf, size_t len, int from, int to)
{
    snprintf(buf, len, "%s->%s", from >= 0 ? clt__slot_get(from)->name : "host",
             to >= 0 ? clt__slot_get(to)->name : "host");
}

/* Finishes a transfer's bookkeeping: hook, optional wait, hand-over of ev. */
static clt_status finish(int slot, cl_event ev, const char *name, size_t nbytes, int blocking, const char *api,
                         cl_event *done)
{
    clt_status s = clt__after_copy(slot, ev, name, nbytes);
    if (s == CLT_OK && blocking) s = clt__sync_wait(slot, api, 1, &ev);
    if (s == CLT_OK && done) *done = ev;
    else clReleaseEvent(ev);
    return s;
}

/* dst (a device tensor) <- src (pinned), on dst's queue. */
static clt_status upload(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
{
    size_t n = clt_tensor_nbytes(src);
    int slot = dst->st->slot;
    cl_command_queue q;
    cl_context ctx;
    CLT_TRY(clt__slot_queue(slot, &q));
    CLT_TRY(clt__slot_context(slot, &ctx));
    cl_event wait[2];
    cl_uint nwait = 0;
    CLT_TRY(clt__bridge_event(src->st->last_write, ctx, &wait[nwait]));
    if (wait[nwait]) nwait++;
    if ((wait[nwait] = clt__tensor_take_foreign_read(dst))) nwait++;
    cl_event ev;
    cl_int err = clEnqueueWriteBuffer(q, clt__tensor_buf(dst).mem, CL_FALSE, clt__tensor_byte_offset(dst), n,
                                      clt__pinned_ptr(src), nwait, nwait ? wait : NULL, &ev);
    for (cl_uint i = 0; i < nwait; i++) clReleaseEvent(wait[i]);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "copying %zu bytes from pinned memory to %s", n, clt__slot_get(slot)->name);
    clt__tensor_set_write(dst, ev);
    clt_status s = add_read(src->st, ev);
    if (s != CLT_OK) {
        clt__sync_fallback(slot, api, ev); /* the transfer reads src: wait before failing */
        clReleaseEvent(ev);
        return s;
    }
    char name[48];
    copy_name(name, sizeof name, clt__pinned_slot(), slot);
    return finish(slot, ev, name, n, blocking, api, done);
}

/* dst (pinned) <- src (a device tensor), on src's queue after its writes. */
static clt_status download(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
{
    size_t n = clt_tensor_nbytes(src);
    int slot = src->st->slot;
    CLT_TRY(clt__pinned_writable(dst, blocking, api));
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(slot, &q));
    cl_event ev;
    cl_int err = clEnqueueReadBuffer(q, clt__tensor_buf(src).mem, CL_FALSE, clt__tensor_byte_offset(src), n,
                                     clt__pinned_ptr(dst), 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "copying %zu bytes from %s to pinned memory", n, clt__slot_get(slot)->name);
    clt__tensor_set_write(dst, ev);
    char name[48];
    copy_name(name, sizeof name, slot, clt__pinned_slot());
    return finish(slot, ev, name, n, blocking, api, done);
}

/* Between contexts: src's queue reads into pinned staging; dst's queue
 * writes from it once a user event of dst's context says the read is done.
 * The host never waits; the staging block is freed by the write's callback. */
static clt_status through_staging(clt_tensor *dst, clt_tensor *src, cl_event *done)
{
    size_t n = clt_tensor_nbytes(src);
    int ps = clt__pinned_slot(), from = src->st->slot, to = dst->st->slot;
    cl_command_queue qs, qd;
    cl_context ctx;
    CLT_TRY(clt__slot_queue(from, &qs));
    CLT_TRY(clt__slot_queue(to, &qd));
    CLT_TRY(clt__slot_context(to, &ctx));
    clt__block *stg;
    CLT_TRY(clt__alloc(ps, n, CLT_MEM_OTHER, &stg));
    void *host = clt__block_host(stg);
    cl_event rev;
    cl_int err = clEnqueueReadBuffer(qs, clt__tensor_buf(src).mem, CL_FALSE, clt__tensor_byte_offset(src), n, host,
                                     0, NULL, &rev);
    if (err != CL_SUCCESS) {
        clt__free(stg, NULL);
        return clt__cl_fail(err, "reading %zu bytes from %s", n, clt__slot_get(from)->name);
    }
    char name[48];
    copy_name(name, sizeof name, from, -1);
    clt_status s = clt__after_copy(from, rev, name, n);
    cl_event wait[2];
    cl_uint nwait = 0;
    if (s == CLT_OK) s = clt__bridge_event(rev, ctx, &wait[nwait]);
    if (s != CLT_OK) {
        free_after(from, stg, 1, &rev);
        clReleaseEvent(rev);
        return s;
    }
    nwait++;
    if ((wait[nwait] = clt__tensor_take_foreign_read(dst))) nwait++;
    cl_event wev;
    err = clEnqueueWriteBuffer(qd, clt__tensor_buf(dst).mem, CL_FALSE, clt__tensor_byte_offset(dst), n, host, nwait,
                               wait, &wev);
    for (cl_uint i = 0; i < nwait; i++) clReleaseEvent(wait[i]);
    if (err != CL_SUCCESS) {
        free_after(from, stg, 1, &rev);
        clReleaseEvent(rev);
        return clt__cl_fail(err, "writing %zu bytes to %s", n, clt__slot_get(to)->name);
    }
    clReleaseEvent(rev);
    free_after(to, stg, 1, &wev);
    clt__tensor_set_write(dst, wev);
    copy_name(name, sizeof name, -1, to);
    return finish(to, wev, name, n, 0, NULL, done);
}

/* A copy to a planning device through host memory: skipped, but for its
 * synchronization point when blocking, and the pinned staging of a copy
 * between contexts, taken and given back. */
static clt_status planned_copy(clt_tensor *dst, clt_tensor *src, int blocking, const char *api)
{
    int from = src->st->slot, to = dst->st->slot;
    if (!clt__is_pinned(src) && !clt__is_pinned(dst)) {
        clt__block *stg;
        CLT_TRY(clt__alloc(clt__pinned_slot_of(to), clt_tensor_nbytes(src), CLT_MEM_OTHER, &stg));
        clt__free(stg, NULL);
    }
    clt__tensor_set_write(dst, NULL);
    int slot = clt__is_pinned(dst) ? from : to;
    return blocking ? clt__sync_wait(slot, api, 0, NULL) : CLT_OK;
}

clt_status clt__copy_via_host(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
{
    if (done) *done = NULL;
    clt__pinned_reclaim();
    size_t n = clt_tensor_nbytes(src);
    if (n == 0) return CLT_OK;
    int sp = clt__is_pinned(src), dp = clt__is_pinned(dst);
    if (sp && dp) {
        CLT_TRY(clt__pinned_writable(dst, blocking, api));
        CLT_TRY(clt__pinned_readable(src, api));
        memmove(clt__pinned_ptr(dst), clt__pinned_ptr(src), n);
        return CLT_OK;
    }
    if (clt__slot_plans(dst->st->slot)) return planned_copy(dst, src, blocking, api);
    if (sp) return upload(dst, src, blocking, done, api);
    if (dp) return download(dst, src, blocking, done, api);
    if (clt__pinned_slot() < 0) return clt__fail(CLT_ERR_NO_DEVICE, "internal: no pinned memory for staging");
    return through_staging(dst, src, done);
}

clt_status clt_tensor_host_ptr(clt_tensor *t, int wait, void **out)
{
    CLT_TRY(clt__need("clt_tensor_host_ptr", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_tensor_host_ptr", "t", t));
    if (!clt__is_pinned(t))
        return clt__fail(CLT_ERR_UNSUPPORTED, "clt_tensor_host_ptr: the tensor lives on %s, not in pinned memory; "
                         "copy it with clt_to(..., clt_pinned())", clt__slot_get(t->st->slot)->name);
    CLT_TRY(clt__pinned_writable(t, wait, "clt_tensor_host_ptr"));
    *out = clt__pinned_ptr(t);
    return CLT_OK;
}

clt_status clt_tensor_write(clt_tensor *t, const void *src, size_t nbytes, int wait)
{
    CLT_TRY(clt__need("clt_tensor_write", "t", t));
    if (nbytes != clt_tensor_nbytes(t))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tensor_write: %zu bytes for a tensor of %zu bytes", nbytes,
                         clt_tensor_nbytes(t));
    if (nbytes == 0) return CLT_OK;
    CLT_TRY(clt__need("clt_tensor_write", "src", src));
    if (clt__is_pinned(t)) {
        CLT_TRY(clt__pinned_writable(t, wait, "clt_tensor_write"));
        memcpy(clt__pinned_ptr(t), src, nbytes);
        return CLT_OK;
    }
    return clt__write_host(t, src, nbytes);
}
