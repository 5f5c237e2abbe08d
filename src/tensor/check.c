/* The shared argument checks (check.h). */
#include "check.h"

#include <stdio.h>

#include "../device/device_internal.h"
#include "tensor_internal.h"

clt_status clt__need_dtype(const char *op, const char *what, const clt_tensor *t, clt_dtype dt)
{
    CLT_TRY(clt__need(op, what, t));
    if (t->dtype != dt)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s must be %s, not %s", op, what, clt_dtype_name(dt),
                         clt_dtype_name(t->dtype));
    return CLT_OK;
}

clt_status clt__need_f32(const char *op, const char *what, const clt_tensor *t)
{
    return clt__need_dtype(op, what, t, CLT_FLOAT32);
}

clt_status clt__need_i32(const char *op, const char *what, const clt_tensor *t)
{
    return clt__need_dtype(op, what, t, CLT_INT32);
}

clt_status clt__need_f16(const char *op, const char *what, const clt_tensor *t)
{
    return clt__need_dtype(op, what, t, CLT_FLOAT16);
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

clt_status clt__same_device(const char *op, const clt_tensor *a, const clt_tensor *b)
{
    if (a->st->slot == b->st->slot) return CLT_OK;
    return clt__fail(CLT_ERR_DEVICE_MISMATCH,
                     "%s: tensors are on different devices (%s and %s); move one with clt_to first", op,
                     clt__slot_get(a->st->slot)->name, clt__slot_get(b->st->slot)->name);
}

clt_status clt__need_device(const char *op, const char *what, const clt_tensor *t, clt_device dev, const char *held,
                            const char *mover)
{
    clt_device td = clt_tensor_device(t);
    if (clt_device_equal(td, dev)) return CLT_OK;
    char a[32], b[32];
    clt_device_name(td, a, sizeof a);
    clt_device_name(dev, b, sizeof b);
    return clt__fail(CLT_ERR_DEVICE_MISMATCH, "%s: %s is on %s but %s on %s; move one with %s", op, what, a, held, b,
                     mover);
}
