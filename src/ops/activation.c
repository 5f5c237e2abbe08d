/* ReLU and its backward pass: float32's kernels in cl/activation.cl,
 * float16's (float32 arithmetic on half storage) in cl/half.cl; the bias and
 * ReLU epilogue of a CLBlast product. */
#include "half.h"
#include "ops_internal.h"

clt_status clt_relu(clt_tensor **y, const clt_tensor *x)
{
    CLT_TRY(clt__need("clt_relu", "y", y));
    *y = NULL;
    CLT_TRY(clt__need_float_pair("clt_relu", "x", x, "x", x));
    int half = x->dtype == CLT_FLOAT16;
    clt_tensor *out;
    CLT_TRY(clt__tensor_new(&out, x->st->slot, x->dtype, x->ndim, x->shape));
    clt__buf xb = clt__tensor_buf(x), ob = clt__tensor_buf(out);
    cl_ulong n = (cl_ulong)x->numel;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(n)};
    clt_status s = half ? clt__launch_half16(x->st->slot, "relu_f16", 5, args, n, out)
                        : clt__launch1(x->st->slot, "activation", "relu_f32", 5, args, (size_t)n, out);
    return clt__finish(s, out, y);
}

clt_status clt__relu_backward_into(clt_tensor *dx, const clt_tensor *dy, const clt_tensor *y)
{
    clt__buf db = clt__tensor_buf(dy), yb = clt__tensor_buf(y), ob = clt__tensor_buf(dx);
    cl_ulong n = (cl_ulong)dy->numel;
    clt__arg args[] = {CLT_ARG(db.mem), CLT_ARG(db.off), CLT_ARG(yb.mem), CLT_ARG(yb.off),
                       CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(n)};
    return dy->dtype == CLT_FLOAT16
               ? clt__launch_half16(dy->st->slot, "relu_backward_f16", 7, args, n, dx)
               : clt__launch1(dy->st->slot, "activation", "relu_backward_f32", 7, args, (size_t)n, dx);
}

clt_status clt_relu_backward(clt_tensor **dx, const clt_tensor *dy, const clt_tensor *y)
{
    const char *op = "clt_relu_backward";
    CLT_TRY(clt__need(op, "dx", dx));
    *dx = NULL;
    CLT_TRY(clt__need_float_pair(op, "dy", dy, "y", y));
    CLT_TRY(clt__same_device(op, dy, y));
    CLT_TRY(clt__same_shape(op, dy, y));
    clt_tensor *out;
    CLT_TRY(clt__tensor_new(&out, dy->st->slot, dy->dtype, dy->ndim, dy->shape));
    return clt__finish(clt__relu_backward_into(out, dy, y), out, dx);
}

clt_status clt_relu_backward_bias_(clt_tensor **dx, clt_tensor *db, const clt_tensor *dy, const clt_tensor *y)
{
    const char *op = "clt_relu_backward_bias_";
    CLT_TRY(clt__need(op, "dx", dx));
    *dx = NULL;
    CLT_TRY(clt__need_f32(op, "db", db));
    CLT_TRY(clt__need_f32(op, "dy", dy));
    CLT_TRY(clt__need_f32(op, "y", y));
    CLT_TRY(clt__same_device(op, dy, y));
    CLT_TRY(clt__same_device(op, dy, db));
    CLT_TRY(clt__need_2d(op, "dy", dy));
    char sa[128], sb[128];
    if (y->ndim != 2 || y->shape[0] != dy->shape[0] || y->shape[1] != dy->shape[1])
        return clt__fail(CLT_ERR_SHAPE, "%s: y must have dy's shape %s, got %s", op, clt__shape_str(dy, sa, sizeof sa),
                         clt__shape_str(y, sb, sizeof sb));
    if (db->ndim != 1 || db->shape[0] != dy->shape[1])
        return clt__fail(CLT_ERR_SHAPE, "%s: dy is (B,N) and db must be (N), got %s and %s", op,
                         clt__shape_str(dy, sa, sizeof sa), clt__shape_str(db, sb, sizeof sb));
    int slot = dy->st->slot;
    /* The launch writes db besides dx. */
    CLT_TRY(clt__wait_foreign_read(slot, db));
    clt_tensor *out;
    CLT_TRY(clt__tensor_new(&out, slot, CLT_FLOAT32, 2, dy->shape));
    clt__buf gb = clt__tensor_buf(dy), yb = clt__tensor_buf(y), ob = clt__tensor_buf(out), bb = clt__tensor_buf(db);
    cl_ulong rows = (cl_ulong)dy->shape[0], cols = (cl_ulong)dy->shape[1];
    clt__arg args[] = {CLT_ARG(gb.mem), CLT_ARG(gb.off), CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(ob.mem),
                       CLT_ARG(ob.off), CLT_ARG(rows),   CLT_ARG(cols),   CLT_ARG(bb.mem), CLT_ARG(bb.off)};
    int wg;
    clt_status s = clt__reduce_wg(slot, &wg);
    size_t global = (size_t)(cols + 15) / 16, local = 1;
    if (s == CLT_OK && wg)
        s = clt__launch_cols_wg(slot, "activation", "relu_backward_bias_wg_f32", 10, args, cols, out);
    else if (s == CLT_OK)
        s = clt__launch(slot, "activation", "relu_backward_bias_f32", 10, args, 1, &global, &local, out);
    if (s == CLT_OK) clt__same_write(db, out);
    return clt__finish(s, out, dx);
}

clt_status clt__bias_relu_epilogue(int slot, clt_tensor *c, const clt_tensor *bias, size_t rows, size_t cols,
                                   int relu)
{
    clt__buf cb = clt__tensor_buf(c), bb = bias ? clt__tensor_buf(bias) : cb;
    cl_ulong ur = rows, uc = cols;
    cl_int has_bias = bias != NULL, r = relu != 0;
    clt__arg args[] = {CLT_ARG(cb.mem), CLT_ARG(cb.off), CLT_ARG(bb.mem), CLT_ARG(bb.off),
                       CLT_ARG(ur),     CLT_ARG(uc),     CLT_ARG(has_bias), CLT_ARG(r)};
    return clt__launch1(slot, "activation", "bias_relu_f32", 8, args, rows * cols, c);
}
