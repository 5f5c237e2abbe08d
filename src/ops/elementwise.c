/* Elementwise operations. */
#include "../kernels/program.h"

clt_status clt_add(clt_tensor **out, const clt_tensor *a, const clt_tensor *b)
{
    CLT_TRY(clt__need("clt_add", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_add", "a", a));
    CLT_TRY(clt__need("clt_add", "b", b));
    CLT_TRY(clt__same_device("clt_add", a, b));
    if (a->dtype != CLT_FLOAT32 || b->dtype != CLT_FLOAT32)
        return clt__fail(CLT_ERR_UNSUPPORTED, "clt_add: float32 only (got %s and %s)", clt_dtype_name(a->dtype),
                         clt_dtype_name(b->dtype));
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (!same) return clt__fail(CLT_ERR_SHAPE, "clt_add: shapes differ (%d and %d dimensions, %lld and %lld elements)",
                                a->ndim, b->ndim, (long long)a->numel, (long long)b->numel);
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, a->st->slot, CLT_FLOAT32, a->ndim, a->shape));
    clt__buf ab = clt__tensor_buf(a), bb = clt__tensor_buf(b), yb = clt__tensor_buf(y);
    cl_ulong n = (cl_ulong)a->numel;
    clt__arg args[] = {CLT_ARG(ab.mem), CLT_ARG(ab.off), CLT_ARG(bb.mem), CLT_ARG(bb.off),
                       CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(n)};
    clt_status s = clt__launch1(a->st->slot, "elementwise", "add_f32", 7, args, (size_t)n, y);
    if (s != CLT_OK) {
        clt_tensor_release(y);
        return s;
    }
    *out = y;
    return CLT_OK;
}
