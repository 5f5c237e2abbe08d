/* Argument checks shared by the ops. */
#include <stdio.h>

#include "../device/device_internal.h"
#include "ops_internal.h"

const char *clt__shape_str(const clt_tensor *t, char *buf, size_t len)
{
    size_t used = 0;
    int n = snprintf(buf, len, "(");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < t->ndim && used < len; i++) {
        n = snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        if (n > 0) used += (size_t)n;
    }
    if (used < len) snprintf(buf + used, len - used, t->ndim == 1 ? ",)" : ")");
    return buf;
}

static clt_status need_dtype(const char *op, const char *what, const clt_tensor *t, clt_dtype dt)
{
    CLT_TRY(clt__need(op, what, t));
    if (t->dtype != dt)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s must be %s, not %s", op, what, clt_dtype_name(dt),
                         clt_dtype_name(t->dtype));
    return CLT_OK;
}

clt_status clt__need_f32(const char *op, const char *what, const clt_tensor *t)
{
    return need_dtype(op, what, t, CLT_FLOAT32);
}

clt_status clt__need_float_pair(const char *op, const char *what_a, const clt_tensor *a, const char *what_b,
                                const clt_tensor *b)
{
    CLT_TRY(clt__need(op, what_a, a));
    CLT_TRY(clt__need(op, what_b, b));
    if ((a->dtype != CLT_FLOAT32 && a->dtype != CLT_FLOAT16) || b->dtype != a->dtype)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s and %s must both be float32 or both float16, not %s and %s", op,
                         what_a, what_b, clt_dtype_name(a->dtype), clt_dtype_name(b->dtype));
    return CLT_OK;
}

clt_status clt__need_i32(const char *op, const char *what, const clt_tensor *t)
{
    return need_dtype(op, what, t, CLT_INT32);
}

clt_status clt__need_2d(const char *op, const char *what, const clt_tensor *t)
{
    if (t->ndim == 2) return CLT_OK;
    char s[128];
    return clt__fail(CLT_ERR_SHAPE, "%s: %s must be 2-D (rows, cols), got shape %s", op, what,
                     clt__shape_str(t, s, sizeof s));
}

clt_status clt__same_shape(const char *op, const clt_tensor *a, const clt_tensor *b)
{
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (same || (a->numel == 1 && b->numel == 1)) return CLT_OK;
    char sa[128], sb[128];
    return clt__fail(CLT_ERR_SHAPE, "%s: shapes %s and %s differ", op, clt__shape_str(a, sa, sizeof sa),
                     clt__shape_str(b, sb, sizeof sb));
}

clt_status clt__finish(clt_status s, clt_tensor *t, clt_tensor **out)
{
    if (s != CLT_OK) {
        clt_tensor_release(t);
        return s;
    }
    *out = t;
    return CLT_OK;
}

clt_status clt__wait_foreign_read(int slot, clt_tensor *t)
{
    cl_event wait = clt__tensor_take_foreign_read(t);
    if (!wait) return CLT_OK;
    cl_command_queue q;
    clt_status s = clt__slot_queue(slot, &q);
    cl_int err = s == CLT_OK ? clEnqueueBarrierWithWaitList(q, 1, &wait, NULL) : CL_SUCCESS;
    clReleaseEvent(wait);
    if (s != CLT_OK) return s;
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clEnqueueBarrierWithWaitList on %s", clt__slot_get(slot)->name);
    return CLT_OK;
}

void clt__same_write(clt_tensor *t, const clt_tensor *by)
{
    if (by->st->last_write) clt__tensor_set_write(t, by->st->last_write);
}
