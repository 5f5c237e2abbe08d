/* The float16 Linear: the linear layer's forward and backward on float16
 * tensors, on float16 products (cl/gemm_gpu.cl's on GPU-class devices, with
 * what it fuses; the CPU kernels' float16 forms) or through float32 copies
 * of the operands (half.c converts them). */
#include "gemm_gpu.h"
#include "half.h"
#include "linear_f16.h"
#include "ops_internal.h"

/* Where the float16 Linear's products run: float32 copies around the
 * float32 products, the CPU kernels' float16 forms (bias fused), or
 * cl/gemm_gpu.cl's float16 form (everything fused). */
enum { VIA_F32, ON_CPU, ON_GPU };

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
 * *mode is where the products run: ON_GPU where cl/gemm_gpu.cl takes them
 * (clt__dense_fuses_backward), ON_CPU on the CPU kernels, every size > 0
 * for both, else VIA_F32. */
static clt_status linear_f16_args(const char *op, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b,
                                  const char *bname, const clt_tensor *dy, const clt_tensor *dw, int *mode)
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
    int cpu, gpu, sized = B > 0 && C > 0 && OC > 0;
    CLT_TRY(clt__dense_cpu(x->st->slot, &cpu));
    CLT_TRY(clt__dense_fuses_backward(x->st->slot, (size_t)B, (size_t)OC, (size_t)C, &gpu));
    *mode = !sized ? VIA_F32 : gpu ? ON_GPU : cpu ? ON_CPU : VIA_F32;
    return CLT_OK;
}

/* t (may be NULL), named what, is float16 (rows, cols) on x's device. */
static clt_status need_shaped(const char *op, const char *what, const clt_tensor *t, int64_t rows, int64_t cols,
                              const clt_tensor *x)
{
    if (!t) return CLT_OK;
    CLT_TRY(clt__need_f16(op, what, t));
    CLT_TRY(clt__same_device(op, x, t));
    if (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) return CLT_OK;
    char st[128];
    return clt__fail(CLT_ERR_SHAPE, "%s: %s must be (%lld,%lld), not %s", op, what, (long long)rows,
                     (long long)cols, clt__shape_str(t, st, sizeof st));
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

/* y = x w^T + b: on float16 products y is written directly (with ep, which
 * only ON_GPU takes, in its store); VIA_F32 through float32 copies. Either
 * way y is the float32 product rounded once. */
static clt_status forward(int mode, clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b,
                          clt__gemm_fusion *ep)
{
    if (mode != VIA_F32) {
        int slot = x->st->slot;
        size_t rows = (size_t)x->shape[0], cols = (size_t)w->shape[0], in = (size_t)x->shape[1];
        int64_t shape[] = {x->shape[0], w->shape[0]};
        clt_tensor *out;
        CLT_TRY(clt__tensor_new(&out, slot, CLT_FLOAT16, 2, shape));
        ep->bias = b;
        clt_status s = clt__dense_gemm_f16(slot, 0, 1, rows, cols, in, 1.0f, x, in, w, in, 0.0f, out, cols, ep);
        return clt__finish(s, out, y);
    }
    clt_tensor *x32, *w32, *b32, *y32 = NULL;
    CLT_TRY(widen(x, w, b, &x32, &w32, &b32));
    clt_status s = clt_linear_forward(&y32, x32, w32, b32);
    release3(x32, w32, b32);
    return narrow_out(s, y32, y);
}

clt_status clt__linear_forward_f16(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b)
{
    const char *op = "clt_linear_forward";
    CLT_TRY(clt__need(op, "y", y));
    *y = NULL;
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "w", w));
    int mode;
    CLT_TRY(linear_f16_args(op, x, w, b, "b", NULL, NULL, &mode));
    clt__gemm_fusion ep = {0};
    return forward(mode, y, x, w, b, &ep);
}

clt_status clt__linear_relu_forward_f16(clt_tensor **y, clt_tensor **sum, const clt_tensor *x, const clt_tensor *w,
                                        const clt_tensor *b, const clt_tensor *res)
{
    const char *op = "clt_linear_relu_forward";
    CLT_TRY(clt__need(op, "y", y));
    *y = NULL;
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "w", w));
    if (res) {
        CLT_TRY(clt__need(op, "sum", sum));
        *sum = NULL;
    }
    int mode;
    CLT_TRY(linear_f16_args(op, x, w, b, "b", NULL, NULL, &mode));
    int64_t shape[] = {x->shape[0], w->shape[0]};
    CLT_TRY(need_shaped(op, "res", res, shape[0], shape[1], x));
    if (res && mode == ON_GPU) CLT_TRY(clt__tensor_new(sum, x->st->slot, CLT_FLOAT16, 2, shape));
    if (mode == ON_GPU) {
        clt__gemm_fusion ep = {.relu = 1, .residual = res, .sum = res ? *sum : NULL};
        clt_status s = forward(mode, y, x, w, b, &ep);
        if (s != CLT_OK && res) {
            clt_tensor_release(*sum);
            *sum = NULL;
        }
        return s;
    }
    /* The ReLU's and the sum's passes of their own. */
    clt_tensor *lin;
    clt__gemm_fusion ep = {0};
    CLT_TRY(forward(mode, &lin, x, w, b, &ep));
    clt_status s = clt_relu(y, lin);
    clt_tensor_release(lin);
    if (s == CLT_OK && res) s = clt_add(sum, *y, res);
    if (s != CLT_OK) {
        clt_tensor_release(*y);
        *y = NULL;
    }
    return s;
}

/* The float16 Linear's backward with f on cl/gemm_gpu.cl: dw += the float32
 * product in its store (dw read, rounded once), db += dy's column sums in
 * the same launch, the masks in the loads and the store, and *dx = base +
 * the product rounded to float16 (the add_f16 of the two). */
static clt_status backward_gpu(clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw, clt_tensor *db,
                               const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w)
{
    int slot = x->st->slot;
    size_t B = (size_t)x->shape[0], C = (size_t)x->shape[1], OC = (size_t)w->shape[0];
    clt__gemm_fusion dw_ep = {.a_mask = f->dy_mask, .rowsum = db};
    CLT_TRY(clt__dense_gemm_f16(slot, 1, 0, OC, C, B, 1.0f, dy, OC, x, C, 1.0f, dw, C, &dw_ep));
    if (!dx) return CLT_OK;
    clt_tensor *g = NULL;
    clt_status s = CLT_OK;
    if (f->base && f->in_place) g = clt_tensor_retain(f->base);
    else CLT_TRY(clt__tensor_new(&g, slot, CLT_FLOAT16, 2, x->shape));
    if (f->base && !f->in_place) s = clt_copy_(g, f->base);
    clt__gemm_fusion dx_ep = {.a_mask = f->dy_mask, .mask = f->dx_mask, .round = f->base != NULL};
    if (s == CLT_OK)
        s = clt__dense_gemm_f16(slot, 0, 0, B, C, OC, 1.0f, dy, OC, w, C, f->base ? 1.0f : 0.0f, g, C, &dx_ep);
    return clt__finish(s, g, dx);
}

/* The float16 Linear's backward: on the CPU kernels dw accumulates the
 * float16 product straight into dw (beta 1: dw read and rounded once, as
 * adding a fresh float32 sum) and dx is written in float16; VIA_F32
 * through float32 copies and a fresh float32 sum for dw. Either way db adds
 * the column sums of the float16 dy (sum_rows_add_f16). */
static clt_status backward(int mode, clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                           const clt_tensor *x, const clt_tensor *w)
{
    if (mode == ON_CPU) {
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

/* backward with f's folds as passes of their own: dy through dy_mask
 * (relu_backward_f16), then *dx = base + the input gradient (add_f16; into
 * base itself when in_place), then dx_mask, in place. */
static clt_status backward_passes(int mode, clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw,
                                  clt_tensor *db, const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w)
{
    clt_tensor *masked = NULL, *h = NULL;
    if (f->dy_mask) CLT_TRY(clt_relu_backward(&masked, dy, f->dy_mask));
    clt_status s = backward(mode, dx ? &h : NULL, dw, db, masked ? masked : dy, x, w);
    clt_tensor_release(masked);
    if (s != CLT_OK || !dx) return s;
    if (f->base && f->in_place) {
        s = clt__add_into(f->base, f->base, h);
        clt_tensor_release(h);
        h = clt_tensor_retain(f->base);
    } else if (f->base) {
        s = clt__add_into(h, f->base, h);
    }
    if (s == CLT_OK && f->dx_mask) s = clt__relu_backward_into(h, h, f->dx_mask);
    return clt__finish(s, h, dx);
}

clt_status clt__linear_backward_fold_f16(clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw, clt_tensor *db,
                                         const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w)
{
    const char *op = "clt_linear_backward_";
    static const clt__linear_fold none = {0};
    if (!f) f = &none;
    if (dx) *dx = NULL;
    CLT_TRY(clt__need_f16(op, "dw", dw));
    CLT_TRY(clt__need(op, "dy", dy));
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "w", w));
    if (f->base) CLT_TRY(clt__need(op, "dx", dx));
    int mode;
    CLT_TRY(linear_f16_args(op, x, w, db, "db", dy, dw, &mode));
    CLT_TRY(need_shaped(op, "base", f->base, x->shape[0], x->shape[1], x));
    CLT_TRY(need_shaped(op, "dx_mask", f->dx_mask, x->shape[0], x->shape[1], x));
    CLT_TRY(need_shaped(op, "dy_mask", f->dy_mask, dy->shape[0], dy->shape[1], x));
    if (mode == ON_GPU) return backward_gpu(dx, f, dw, db, dy, x, w);
    return backward_passes(mode, dx, f, dw, db, dy, x, w);
}

clt_status clt__linear_backward_f16(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                                    const clt_tensor *x, const clt_tensor *w)
{
    return clt__linear_backward_fold_f16(dx, NULL, dw, db, dy, x, w);
}
