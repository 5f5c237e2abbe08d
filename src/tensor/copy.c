/* Placement: explicit copies within a device, between devices of one
 * context (device to device), and between contexts (through the host). */
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "tensor_internal.h"

/* Copies src into dst (same element count and dtype), enqueued on dst's
 * queue after src's last write. */
static clt_status copy_same_context(clt_tensor *dst, const clt_tensor *src)
{
    size_t nbytes = clt_tensor_nbytes(src);
    if (nbytes == 0) return CLT_OK;
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(dst->st->slot, &q));
    int foreign = dst->st->slot != src->st->slot;
    cl_event wait[2];
    cl_uint nwait = 0;
    if (foreign && src->st->last_write) wait[nwait++] = src->st->last_write;
    if (foreign && src->st->foreign_read) wait[nwait++] = src->st->foreign_read;
    cl_event ev;
    cl_int err = clEnqueueCopyBuffer(q, clt__tensor_buf(src).mem, clt__tensor_buf(dst).mem,
                                     clt__tensor_byte_offset(src), clt__tensor_byte_offset(dst), nbytes, nwait,
                                     nwait ? wait : NULL, &ev);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "copying %zu bytes from %s to %s", nbytes, clt__slot_get(src->st->slot)->name,
                            clt__slot_get(dst->st->slot)->name);
    if (foreign) {
        /* src's own queue must not overwrite or reuse it before this read. */
        clRetainEvent(ev);
        if (src->st->foreign_read) clReleaseEvent(src->st->foreign_read);
        src->st->foreign_read = ev;
    }
    clt__tensor_set_write(dst, ev);
    clReleaseEvent(ev);
    return CLT_OK;
}

static void CL_CALLBACK free_staging(cl_event ev, cl_int status, void *data)
{
    (void)ev;
    (void)status;
    free(data);
}

/* Across contexts (platforms) the bytes go through host memory. */
static clt_status copy_through_host(clt_tensor *dst, const clt_tensor *src)
{
    size_t nbytes = clt_tensor_nbytes(src);
    if (nbytes == 0) return CLT_OK;
    void *staging = malloc(nbytes);
    if (!staging) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory staging %zu bytes", nbytes);
    clt_status s = clt_to_host(src, staging, nbytes);
    cl_command_queue q;
    if (s == CLT_OK) s = clt__slot_queue(dst->st->slot, &q);
    if (s != CLT_OK) {
        free(staging);
        return s;
    }
    cl_event ev;
    cl_int err = clEnqueueWriteBuffer(q, clt__tensor_buf(dst).mem, CL_FALSE, clt__tensor_byte_offset(dst), nbytes,
                                      staging, 0, NULL, &ev);
    if (err != CL_SUCCESS) {
        free(staging);
        return clt__cl_fail(err, "writing %zu bytes to %s", nbytes, clt__slot_get(dst->st->slot)->name);
    }
    if (clSetEventCallback(ev, CL_COMPLETE, free_staging, staging) != CL_SUCCESS) {
        clWaitForEvents(1, &ev);
        free(staging);
    }
    clt__tensor_set_write(dst, ev);
    clReleaseEvent(ev);
    return CLT_OK;
}

static clt_status copy_into(clt_tensor *dst, const clt_tensor *src)
{
    if (clt__same_context(dst->st->slot, src->st->slot)) return copy_same_context(dst, src);
    return copy_through_host(dst, src);
}

clt_status clt_copy_to(clt_tensor **out, clt_tensor *t, clt_device dev)
{
    CLT_TRY(clt__need("clt_copy_to", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_copy_to", "t", t));
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    clt_tensor *c;
    CLT_TRY(clt__tensor_new(&c, slot, t->dtype, t->ndim, t->shape));
    clt_status s = copy_into(c, t);
    if (s == CLT_OK) s = clt_tensor_set_category(c, t->st->cat);
    if (s != CLT_OK) {
        clt_tensor_release(c);
        return s;
    }
    *out = c;
    return CLT_OK;
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
    return clt_copy_to(out, t, dev);
}

clt_status clt_copy_(clt_tensor *dst, const clt_tensor *src)
{
    CLT_TRY(clt__need("clt_copy_", "dst", dst));
    CLT_TRY(clt__need("clt_copy_", "src", src));
    CLT_TRY(clt__same_device("clt_copy_", dst, src));
    if (dst->dtype != src->dtype || dst->numel != src->numel)
        return clt__fail(CLT_ERR_SHAPE, "clt_copy_: %lld %s elements into %lld %s elements", (long long)src->numel,
                         clt_dtype_name(src->dtype), (long long)dst->numel, clt_dtype_name(dst->dtype));
    return copy_same_context(dst, src);
}
