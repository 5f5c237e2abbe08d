/* Placement: explicit copies within a device, between devices of one
 * context (device to device), and between contexts or to and from pinned
 * memory (through host memory, see pinned.c). None waits for the device
 * unless pinned memory is involved and the call is a blocking one (clt_to,
 * clt_copy_to), or src is pinned memory a transfer still writes and dst is
 * pinned too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
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
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(dst->st->slot, &q));
    int foreign = dst->st->slot != src->st->slot;
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
    cl_event ev;
    cl_int err = clEnqueueCopyBuffer(q, clt__tensor_buf(src).mem, clt__tensor_buf(dst).mem,
                                     clt__tensor_byte_offset(src), clt__tensor_byte_offset(dst), nbytes, nwait,
                                     nwait ? wait : NULL, &ev);
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

/* Copies src into the new tensor dst; *done (may be NULL) receives the
 * last command. */
static clt_status copy_into(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api)
{
    if (clt__slot_plans(dst->st->slot) != clt__slot_plans(src->st->slot) && !clt__slot_plans(dst->st->slot))
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s is a planning device and holds no data to copy to %s", api,
                         clt__slot_get(src->st->slot)->name, clt__slot_get(dst->st->slot)->name);
    if (clt__is_pinned(dst) || clt__is_pinned(src) || !clt__same_context(dst->st->slot, src->st->slot))
        return clt__copy_via_host(dst, src, blocking, done, api);
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
    if (clt__is_pinned(dst)) return clt__copy_via_host(dst, (clt_tensor *)src, 0, NULL, "clt_copy_");
    return copy_same_context(dst, src);
}
