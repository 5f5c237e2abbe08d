/* Elementwise operations. */
#include "../tensor/pinned.h"
#include "../tensor/tensor_internal.h"
#include "half.h"
#include "ops_internal.h"

clt_status clt__add_into(clt_tensor *y, const clt_tensor *a, const clt_tensor *b)
{
    clt__buf ab = clt__tensor_buf(a), bb = clt__tensor_buf(b), yb = clt__tensor_buf(y);
    cl_ulong n = (cl_ulong)a->numel;
    clt__arg args[] = {CLT_ARG(ab.mem), CLT_ARG(ab.off), CLT_ARG(bb.mem), CLT_ARG(bb.off),
                       CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(n)};
    /* float16 storage, float32 arithmetic: cl/half.cl */
    return a->dtype == CLT_FLOAT16 ? clt__launch_half16(a->st->slot, "add_f16", 7, args, n, y)
                                   : clt__launch1(a->st->slot, "elementwise", "add_f32", 7, args, (size_t)n, y);
}

clt_status clt_add(clt_tensor **out, const clt_tensor *a, const clt_tensor *b)
{
    CLT_TRY(clt__need("clt_add", "out", out));
    *out = NULL;
    CLT_TRY(clt__need_float_pair("clt_add", "a", a, "b", b));
    CLT_TRY(clt__same_device("clt_add", a, b));
    CLT_TRY(clt__same_shape("clt_add", a, b));
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, a->st->slot, a->dtype, a->ndim, a->shape));
    return clt__finish(clt__add_into(y, a, b), y, out);
}

/* clt_fill_ of up to this many 4-byte elements enqueues a fill of the
 * buffer, above it launches fill_u32: pocl 3.1 fills a buffer on one
 * thread, one 4-byte pattern at a time, slower than the kernel from about
 * 4096 floats (three times slower at 470k), faster below (a loss sum's one
 * element).
 * Fewer kernels for pocl to compile in a training run's first step. */
#define FILL_BUFFER_MOST 4096

clt_status clt_fill_(clt_tensor *t, double value)
{
    CLT_TRY(clt__need("clt_fill_", "t", t));
    if (t->dtype == CLT_FLOAT16) return clt__fill_f16(t, value);
    union {
        float f;
        int32_t i;
        cl_uint u;
    } bits;
    if (t->dtype == CLT_FLOAT32) bits.f = (float)value;
    else if (value >= -2147483648.0 && value <= 2147483647.0) bits.i = (int32_t)value;
    else return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_fill_: %g does not fit int32", value);
    if (t->numel <= FILL_BUFFER_MOST && !clt__is_pinned(t)) return clt__tensor_fill(t, &bits);
    clt__buf tb = clt__tensor_buf(t);
    cl_ulong n = (cl_ulong)t->numel;
    clt__arg args[] = {CLT_ARG(tb.mem), CLT_ARG(tb.off), CLT_ARG(bits.u), CLT_ARG(n)};
    return clt__launch1(t->st->slot, "elementwise", "fill_u32", 4, args, (size_t)n, t);
}

clt_status clt_scale_(clt_tensor *x, float alpha)
{
    CLT_TRY(clt__need_f32("clt_scale_", "x", x));
    clt__buf xb = clt__tensor_buf(x);
    cl_ulong n = (cl_ulong)x->numel;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(alpha), CLT_ARG(n)};
    return clt__launch1(x->st->slot, "elementwise", "scale_f32", 4, args, (size_t)n, x);
}

static clt_status axpy(const char *op, clt_tensor *y, float alpha, const clt_tensor *x)
{
    CLT_TRY(clt__need_f32(op, "y", y));
    CLT_TRY(clt__need_f32(op, "x", x));
    CLT_TRY(clt__same_device(op, y, x));
    CLT_TRY(clt__same_shape(op, y, x));
    clt__buf yb = clt__tensor_buf(y), xb = clt__tensor_buf(x);
    cl_ulong n = (cl_ulong)y->numel;
    clt__arg args[] = {CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(alpha), CLT_ARG(xb.mem), CLT_ARG(xb.off),
                       CLT_ARG(n)};
    return clt__launch1(y->st->slot, "elementwise", "axpy_f32", 6, args, (size_t)n, y);
}

clt_status clt_axpy_(clt_tensor *y, float alpha, const clt_tensor *x) { return axpy("clt_axpy_", y, alpha, x); }

/* 1 * x is exact, so axpy with alpha 1 is exactly y + x. */
clt_status clt_add_(clt_tensor *y, const clt_tensor *x) { return axpy("clt_add_", y, 1.0f, x); }
