/* ReLU and its backward pass. */
#include "ops_internal.h"

clt_status clt_relu(clt_tensor **y, const clt_tensor *x)
{
    CLT_TRY(clt__need("clt_relu", "y", y));
    *y = NULL;
    CLT_TRY(clt__need_f32("clt_relu", "x", x));
    clt_tensor *out;
    CLT_TRY(clt__tensor_new(&out, x->st->slot, CLT_FLOAT32, x->ndim, x->shape));
    clt__buf xb = clt__tensor_buf(x), ob = clt__tensor_buf(out);
    cl_ulong n = (cl_ulong)x->numel;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(n)};
    return clt__finish(clt__launch1(x->st->slot, "activation", "relu_f32", 5, args, (size_t)n, out), out, y);
}

clt_status clt_relu_backward(clt_tensor **dx, const clt_tensor *dy, const clt_tensor *y)
{
    const char *op = "clt_relu_backward";
    CLT_TRY(clt__need(op, "dx", dx));
    *dx = NULL;
    CLT_TRY(clt__need_f32(op, "dy", dy));
    CLT_TRY(clt__need_f32(op, "y", y));
    CLT_TRY(clt__same_device(op, dy, y));
    CLT_TRY(clt__same_numel(op, dy, y));
    clt_tensor *out;
    CLT_TRY(clt__tensor_new(&out, dy->st->slot, CLT_FLOAT32, dy->ndim, dy->shape));
    clt__buf db = clt__tensor_buf(dy), yb = clt__tensor_buf(y), ob = clt__tensor_buf(out);
    cl_ulong n = (cl_ulong)dy->numel;
    clt__arg args[] = {CLT_ARG(db.mem), CLT_ARG(db.off), CLT_ARG(yb.mem), CLT_ARG(yb.off),
                       CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(n)};
    return clt__finish(clt__launch1(dy->st->slot, "activation", "relu_backward_f32", 7, args, (size_t)n, out), out,
                       dx);
}
