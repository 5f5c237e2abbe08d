/* Placement: explicit copies within a device, between devices of one
 * context (device to device), and between contexts or to and from pinned
 * memory (through host memory: uploads from and downloads into pinned
 * tensors, copies between contexts through a pinned staging buffer; the
 * pinned memory itself is pinned.c's). None waits for the device unless
 * pinned memory is involved and the call is a blocking one (clt_to,
 * clt_copy_to), or src is pinned memory a transfer still writes and dst is
 * pinned too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "../device/replay.h"
#include "../device/sync.h"
#include "pinned.h"
#include "tensor_internal.h"

/* Copies src into dst (same element count and dtype), enqueued on dst's
 * queue after src's last write. */
static clt_status copy_same_context(clt_tensor *dst, const clt_tensor *src)
{
    size_t nbytes = clt_tensor_nbytes(src);
    if (nbytes == 0) return CLT_OK;
    if (clt__slot_plans(dst->st->slot)) { /* a planning device: the copy is skipped */
        clt__tensor_set_write(dst, NULL);
        return CLT_OK;
    }
    int foreign = dst->st->slot != src->st->slot, taken = 0;
    cl_event ev;
    clt__command c = {.kind = CLT__COMMAND_COPY, .name = "copy", .dst = clt__tensor_buf(dst).mem,
                      .src = clt__tensor_buf(src).mem, .dst_offset = clt__tensor_byte_offset(dst),
                      .src_offset = clt__tensor_byte_offset(src), .size = nbytes};
    CLT_TRY(clt__replay_take(dst->st->slot, &c, foreign || dst->st->foreign_read, &taken, &ev));
    if (taken) { /* held back for a replay of the step */
        clt__tensor_set_write(dst, ev);
        return CLT_OK;
    }
    cl_command_queue q;
    CLT_TRY(clt__slot_queue_replayable(dst->st->slot, &q));
    cl_event wait[3];
    cl_uint nwait = 0;
    if (foreign && src->st->last_write) wait[nwait++] = src->st->last_write;
    if (foreign && src->st->foreign_read) wait[nwait++] = src->st->foreign_read;
    /* dst may still be read by another queue: overwrite it only after that read. */
    cl_event dst_read = clt__tensor_take_foreign_read(dst);
    if (dst_read) wait[nwait++] = dst_read;
    /* OpenCL lets a queue wait on another queue's event only once that
     * queue is flushed; otherwise the wait may never end. */
    cl_command_queue src_q;
    if (foreign && clt__slot_queue(src->st->slot, &src_q) == CLT_OK) clFlush(src_q);
    cl_int err = clEnqueueCopyBuffer(q, c.src, c.dst, c.src_offset, c.dst_offset, nbytes, nwait, nwait ? wait : NULL,
                                     &ev);
    if (dst_read) clReleaseEvent(dst_read);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "copying %zu bytes from %s to %s", nbytes, clt__slot_get(src->st->slot)->name,
                            clt__slot_get(dst->st->slot)->name);
    if (foreign) {
        /* src's own queue must not overwrite or reuse it before this read,
         * and will wait for ev: flush so that it can. */
        clFlush(q);
        clRetainEvent(ev);
        if (src->st->foreign_read) clReleaseEvent(src->st->foreign_read);
        src->st->foreign_read = ev;
    }
    clt__tensor_set_write(dst, ev);
    char name[48];
    snprintf(name, sizeof name, "%s->%s", clt__slot_get(src->st->slot)->name, clt__slot_get(dst->st->slot)->name);
    clt_status s = clt__after_copy(dst->st->slot, ev, name, nbytes);
    clReleaseEvent(ev);
    return s;
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
    clt_status s = clt__pinned_add_read(src->st, ev);
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
        clt__pinned_free_after(from, stg, 1, &rev);
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
        clt__pinned_free_after(from, stg, 1, &rev);
        clReleaseEvent(rev);
        return clt__cl_fail(err, "writing %zu bytes to %s", n, clt__slot_get(to)->name);
    }
    clReleaseEvent(rev);
    clt__pinned_free_after(to, stg, 1, &wev);
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

/* Copies src into dst (a new tensor, or clt_copy_'s pinned destination) when
 * either is pinned, or when they live in different contexts (through a pinned
 * staging buffer, which ignores blocking). Enqueues only, unless blocking and
 * dst or src is pinned (then waits, a sync point named `api`); a copy between
 * two pinned tensors is a host memmove done at once, after waiting for a
 * transfer that writes src (dst in flight: CLT_ERR_BUSY unless blocking).
 * *done (may be NULL) receives the final command. */
static clt_status copy_via_host(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
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

/* Copies src into the new tensor dst; *done (may be NULL) receives the
 * last command. */
static clt_status copy_into(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
{
    if (clt__slot_plans(dst->st->slot) != clt__slot_plans(src->st->slot) && !clt__slot_plans(dst->st->slot))
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s is a planning device and holds no data to copy to %s", api,
                         clt__slot_get(src->st->slot)->name, clt__slot_get(dst->st->slot)->name);
    if (clt__is_pinned(dst) || clt__is_pinned(src) || !clt__same_context(dst->st->slot, src->st->slot))
        return copy_via_host(dst, src, blocking, done, api);
    if (done) *done = NULL;
    CLT_TRY(copy_same_context(dst, src));
    if (done && dst->st->last_write) {
        clRetainEvent(dst->st->last_write);
        *done = dst->st->last_write;
    }
    return CLT_OK;
}

static clt_status copy_to(clt_tensor **out, clt_tensor *t, clt_device dev, int blocking, cl_event *done,
                          const char *api)
{
    CLT_TRY(clt__need(api, "out", out));
    *out = NULL;
    CLT_TRY(clt__need(api, "t", t));
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    clt_tensor *c;
    CLT_TRY(clt__tensor_new(&c, slot, t->dtype, t->ndim, t->shape));
    clt_status s = copy_into(c, t, blocking, done, api);
    if (s == CLT_OK) s = clt_tensor_set_category(c, t->st->cat);
    if (s != CLT_OK) {
        if (done && *done) clReleaseEvent(*done);
        clt_tensor_release(c);
        return s;
    }
    *out = c;
    return CLT_OK;
}

clt_status clt_copy_to(clt_tensor **out, clt_tensor *t, clt_device dev)
{
    return copy_to(out, t, dev, 1, NULL, "clt_copy_to");
}

clt_status clt_to(clt_tensor **out, clt_tensor *t, clt_device dev)
{
    CLT_TRY(clt__need("clt_to", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_to", "t", t));
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    if (slot == t->st->slot) {
        *out = clt_tensor_retain(t);
        return CLT_OK;
    }
    return copy_to(out, t, dev, 1, NULL, "clt_to");
}

clt_status clt_to_async(clt_tensor **out, clt_tensor *t, clt_device dev, clt_event **done)
{
    if (done) *done = NULL;
    CLT_TRY(clt__need("clt_to_async", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_to_async", "t", t));
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    if (slot == t->st->slot) {
        *out = clt_tensor_retain(t);
        return CLT_OK;
    }
    cl_event ev = NULL;
    CLT_TRY(copy_to(out, t, dev, 0, done ? &ev : NULL, "clt_to_async"));
    if (!ev) return CLT_OK;
    /* The command ran on the queue of the device side of the transfer. */
    int queue_slot = clt__slot_is_pinned(slot) ? t->st->slot : slot;
    clt_status s = clt__event_new(ev, queue_slot, done);
    clReleaseEvent(ev);
    if (s != CLT_OK) {
        clt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

clt_status clt_copy_(clt_tensor *dst, const clt_tensor *src)
{
    CLT_TRY(clt__need("clt_copy_", "dst", dst));
    CLT_TRY(clt__need("clt_copy_", "src", src));
    CLT_TRY(clt__same_device("clt_copy_", dst, src));
    if (dst->dtype != src->dtype || dst->numel != src->numel)
        return clt__fail(CLT_ERR_SHAPE, "clt_copy_: %lld %s elements into %lld %s elements", (long long)src->numel,
                         clt_dtype_name(src->dtype), (long long)dst->numel, clt_dtype_name(dst->dtype));
    size_t n = clt_tensor_nbytes(src);
    if (dst->st == src->st && n > 0 && dst->offset < src->offset + n && src->offset < dst->offset + n)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_copy_: source and destination overlap (bytes %zu..%zu and "
                         "%zu..%zu of one storage); copy through clt_copy_to", src->offset, src->offset + n,
                         dst->offset, dst->offset + n);
    if (clt__is_pinned(dst)) return copy_via_host(dst, (clt_tensor *)src, 0, NULL, "clt_copy_");
    return copy_same_context(dst, src);
}
