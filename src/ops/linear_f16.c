/* The float16 Linear: the linear layer's forward and backward on float16
 * tensors, on the CPU kernels' float16 products or through float32 copies
 * of the operands (half.c converts them). */
#include "half.h"
#include "linear_f16.h"
#include "ops_internal.h"

/* Float32 copies of up to three float16 operands (NULL stays NULL), in one launch. */
static clt_status widen(const clt_tensor *a, const clt_tensor *b, const clt_tensor *c, clt_tensor **wa,
                        clt_tensor **wb, clt_tensor **wc)
{
    const clt_tensor *const in[3] = {a, b, c};
    clt_tensor **out[3] = {wa, wb, wc};
    return clt__widen3(in, out);
}

static void release3(clt_tensor *a, clt_tensor *b, clt_tensor *c)
{
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
}

/* *out = half(y32) unless s failed; releases y32. */
static clt_status narrow_out(clt_status s, clt_tensor *y32, clt_tensor **out)
{
    if (s == CLT_OK) s = clt__to_dtype_scaled(out, y32, CLT_FLOAT16, 1.0f);
    clt_tensor_release(y32);
    return s;
}

/* The float16 Linear's operands, as clt_linear_forward / _backward check
 * them (b, named bname: the bias or its gradient; b, dy and dw may be NULL);
 * *direct = 1 when the products can run on the CPU kernels' float16 forms,
 * with no float32 copies: every size > 0. */
static clt_status linear_f16_args(const char *op, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b,
                                  const char *bname, const clt_tensor *dy, const clt_tensor *dw, int *direct)
{
    const clt_tensor *t[] = {x, w, b, dy, dw};
    const char *const names[] = {"x", "w", bname, "dy", "dw"};
    for (int i = 0; i < 5; i++) {
        if (!t[i]) continue;
        CLT_TRY(clt__need_f16(op, names[i], t[i]));
        CLT_TRY(clt__same_device(op, x, t[i]));
        if (i != 2) CLT_TRY(clt__need_2d(op, names[i], t[i]));
    }
    char sx[128], sw[128], so[128];
    int64_t B = x->shape[0], C = x->shape[1], OC = w->shape[0];
    clt__shape_str(x, sx, sizeof sx);
    clt__shape_str(w, sw, sizeof sw);
    if (w->shape[1] != C)
        return clt__fail(CLT_ERR_SHAPE, "%s: x is (B,C) and w must be (OC,C) (shapes %s, %s)", op, sx, sw);
    if (b && (b->ndim != 1 || b->shape[0] != OC))
        return clt__fail(CLT_ERR_SHAPE, "%s: w is (OC,C) and %s must be (OC) (shapes %s, %s)", op, bname, sw,
                         clt__shape_str(b, so, sizeof so));
    if (dy && (dy->shape[0] != B || dy->shape[1] != OC))
        return clt__fail(CLT_ERR_SHAPE, "%s: dy must be (B,OC) for x (B,C) and w (OC,C) (shapes %s, %s, %s)", op,
                         clt__shape_str(dy, so, sizeof so), sx, sw);
    if (dw && (dw->shape[0] != OC || dw->shape[1] != C))
        return clt__fail(CLT_ERR_SHAPE, "%s: dw must have w's shape (shapes %s, %s)", op,
                         clt__shape_str(dw, so, sizeof so), sw);
    CLT_TRY(clt__dense_cpu(x->st->slot, direct));
    *direct = *direct && B > 0 && C > 0 && OC > 0;
    return CLT_OK;
}

/* db += the column sums of dy (B,OC), each a float32 sum from zero added once. */
static clt_status sum_rows_add_f16(clt_tensor *db, const clt_tensor *dy)
{
    cl_ulong rows = (cl_ulong)dy->shape[0], cols = (cl_ulong)dy->shape[1];
    if (rows == 0 || cols == 0) return CLT_OK; /* nothing to add */
    clt__buf xb = clt__tensor_buf(dy), ob = clt__tensor_buf(db);
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(rows), CLT_ARG(cols), CLT_ARG(ob.mem),
                       CLT_ARG(ob.off)};
    int wg;
    CLT_TRY(clt__reduce_wg(db->st->slot, &wg));
    if (wg) return clt__launch_cols_wg(db->st->slot, "half", "sum_rows_add_wg_f16", 6, args, cols, db);
    size_t global = (size_t)(cols + 15) / 16, local = 1;
    return clt__launch(db->st->slot, "half", "sum_rows_add_f16", 6, args, 1, &global, &local, db);
}

/* On the CPU kernels the product reads float16 x, w and b and writes y
 * directly; elsewhere (CLBlast), and when a size is 0, through float32
 * copies. Either way y is the float32 product rounded once. */
clt_status clt__linear_forward_f16(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b)
{
    const char *op = "clt_linear_forward";
    CLT_TRY(clt__need(op, "y", y));
    *y = NULL;
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "w", w));
    int direct;
    CLT_TRY(linear_f16_args(op, x, w, b, "b", NULL, NULL, &direct));
    if (direct) {
        int slot = x->st->slot;
        size_t rows = (size_t)x->shape[0], cols = (size_t)w->shape[0], in = (size_t)x->shape[1];
        int64_t shape[] = {x->shape[0], w->shape[0]};
        clt_tensor *out;
        CLT_TRY(clt__tensor_new(&out, slot, CLT_FLOAT16, 2, shape));
        clt_status s = clt__dense_gemm_f16(slot, 0, 1, rows, cols, in, 1.0f, x, in, w, in, 0.0f, out, cols, b);
        return clt__finish(s, out, y);
    }
    clt_tensor *x32, *w32, *b32, *y32 = NULL;
    CLT_TRY(widen(x, w, b, &x32, &w32, &b32));
    clt_status s = clt_linear_forward(&y32, x32, w32, b32);
    release3(x32, w32, b32);
    return narrow_out(s, y32, y);
}

/* On the CPU kernels dw accumulates the float16 product straight into dw
 * (beta 1: dw read and rounded once, as adding a fresh float32 sum) and dx
 * is written in float16; elsewhere (CLBlast, or a size of 0) through
 * float32 copies and a fresh float32 sum for dw. Either way db adds the
 * column sums of the float16 dy (sum_rows_add_f16). */
clt_status clt__linear_backward_f16(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                                    const clt_tensor *x, const clt_tensor *w)
{
    const char *op = "clt_linear_backward_";
    if (dx) *dx = NULL;
    CLT_TRY(clt__need_f16(op, "dw", dw));
    CLT_TRY(clt__need(op, "dy", dy));
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "w", w));
    int direct;
    CLT_TRY(linear_f16_args(op, x, w, db, "db", dy, dw, &direct));
    if (direct) {
        int slot = x->st->slot;
        size_t B = (size_t)x->shape[0], C = (size_t)x->shape[1], OC = (size_t)w->shape[0];
        CLT_TRY(clt__dense_gemm_f16(slot, 1, 0, OC, C, B, 1.0f, dy, OC, x, C, 1.0f, dw, C, NULL));
        if (db) CLT_TRY(sum_rows_add_f16(db, dy));
        if (!dx) return CLT_OK;
        clt_tensor *g;
        CLT_TRY(clt__tensor_new(&g, slot, CLT_FLOAT16, 2, x->shape));
        clt_status s = clt__dense_gemm_f16(slot, 0, 0, B, C, OC, 1.0f, dy, OC, w, C, 0.0f, g, C, NULL);
        return clt__finish(s, g, dx);
    }
    clt_tensor *dy32, *x32, *w32, *dw32 = NULL, *dx32 = NULL;
    CLT_TRY(widen(dy, x, w, &dy32, &x32, &w32));
    /* A fresh float32 sum, added to the float16 gradient once; db's column
     * sums of the float16 dy are float32 sums from zero added once too, in
     * one launch (dy widens exactly, so they are the sums of dy32). */
    clt_status s = clt_zeros_like(&dw32, w32);
    if (s == CLT_OK) s = clt_linear_backward_(dx ? &dx32 : NULL, dw32, NULL, dy32, x32, w32);
    if (s == CLT_OK) s = clt__accumulate_f16(dw, dw32);
    if (s == CLT_OK && db) s = sum_rows_add_f16(db, dy);
    release3(dy32, x32, w32);
    clt_tensor_release(dw32);
    if (!dx) return s;
    return narrow_out(s, dx32, dx);
}
