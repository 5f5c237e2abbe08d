/* Reductions: sums over rows, whole-tensor sum and mean, argmax, counting.
 * CPU-class devices take the kernels without local memory; GPU-class ones
 * whose work-groups hold WG_SUM work-items (clt__reduce_wg) the work-group
 * tree reductions (the _wg kernels of cl/reduce.cl) for the sums. Argmax
 * and the counting's partials have no _wg form (the counting's final sum
 * does). */
#include "../device/device_internal.h"
#include "ops_internal.h"

/* Enough partial sums to keep every core (or GPU lane group) busy, few
 * enough for one work-item to add them up. */
#define MAX_PARTS 4096

cl_ulong clt__sum_parts(int64_t n)
{
    return n < MAX_PARTS ? (cl_ulong)(n > 0 ? n : 1) : MAX_PARTS;
}

/* The _wg kernels' work-group sizes (WG_SUM, WG_COLS x WG_LANES in cl/reduce.cl). */
#define WG_SUM 256
#define WG_COLS 16
#define WG_LANES 16

clt_status clt__reduce_wg(int slot, int *out)
{
    int gpu;
    CLT_TRY(clt__gpu_class(slot, &gpu));
    *out = gpu && clt__slot_get(slot)->max_work_group >= WG_SUM;
    return CLT_OK;
}

clt_status clt__launch_cols_wg(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                               cl_ulong cols, clt_tensor *written)
{
    size_t global[] = {(size_t)(cols + WG_COLS - 1) / WG_COLS * WG_COLS, WG_LANES}, local[] = {WG_COLS, WG_LANES};
    return clt__launch(slot, program, name, nargs, args, 2, global, local, written);
}

/* Work-groups of the first pass of a _wg sum of n elements: one per WG_SUM
 * elements, at most WG_SUM (so one group adds up their partials), never
 * more than clt__sum_parts(n), the scratch's size. */
static cl_ulong wg_groups(cl_ulong n)
{
    cl_ulong g = (n + WG_SUM - 1) / WG_SUM;
    return g < 1 ? 1 : g > WG_SUM ? WG_SUM : g;
}

static clt_status scalar_f32(clt_tensor **out, int slot)
{
    return clt__tensor_new(out, slot, CLT_FLOAT32, 0, NULL);
}

/* Adds up `parts` partials into out[0] / divisor; releases part. */
static clt_status finish_sum(clt_tensor *out, clt_tensor *part, cl_ulong parts, float divisor)
{
    clt__buf pb = clt__tensor_buf(part), ob = clt__tensor_buf(out);
    clt__arg args[] = {CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(parts), CLT_ARG(ob.mem), CLT_ARG(ob.off),
                       CLT_ARG(divisor)};
    int wg;
    clt_status s = clt__reduce_wg(out->st->slot, &wg);
    size_t one = WG_SUM;
    if (s == CLT_OK && wg) s = clt__launch(out->st->slot, "reduce", "sum_final_wg_f32", 6, args, 1, &one, &one, out);
    else if (s == CLT_OK) s = clt__launch1(out->st->slot, "reduce", "sum_final_f32", 6, args, 1, out);
    /* The allocator reuses part's memory only after the queue's pending work. */
    clt_tensor_release(part);
    return s;
}

clt_status clt__reduce_sum(clt_tensor *out, const clt_tensor *x, float divisor)
{
    int slot = x->st->slot;
    cl_ulong n = (cl_ulong)x->numel, parts = clt__sum_parts(x->numel);
    int64_t pshape[] = {(int64_t)parts};
    clt_tensor *part;
    CLT_TRY(clt__tensor_new(&part, slot, CLT_FLOAT32, 1, pshape));
    int wg;
    clt_status s = clt__reduce_wg(slot, &wg);
    if (s == CLT_OK && n == 0) {
        s = clt_fill_(part, 0.0);
    } else if (s == CLT_OK && wg) {
        /* One partial per work-group; the final pass adds those. */
        clt__buf xb = clt__tensor_buf(x), pb = clt__tensor_buf(part);
        clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(n), CLT_ARG(pb.mem), CLT_ARG(pb.off)};
        size_t local = WG_SUM, global = (size_t)wg_groups(n) * WG_SUM;
        s = clt__launch(slot, "reduce", "sum_partial_wg_f32", 5, args, 1, &global, &local, part);
        parts = wg_groups(n);
    } else if (s == CLT_OK) {
        clt__buf xb = clt__tensor_buf(x), pb = clt__tensor_buf(part);
        clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(n), CLT_ARG(pb.mem), CLT_ARG(pb.off),
                           CLT_ARG(parts)};
        s = clt__launch1(slot, "reduce", "sum_partial_f32", 6, args, (size_t)parts, part);
    }
    if (s != CLT_OK) {
        clt_tensor_release(part);
        return s;
    }
    return finish_sum(out, part, parts, divisor);
}

static clt_status sum_or_mean(const char *op, clt_tensor **out, const clt_tensor *x, int mean)
{
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need_f32(op, "x", x));
    clt_tensor *y;
    CLT_TRY(scalar_f32(&y, x->st->slot));
    float divisor = mean ? (float)x->numel : 1.0f;
    return clt__finish(clt__reduce_sum(y, x, divisor), y, out);
}

clt_status clt_sum(clt_tensor **out, const clt_tensor *x) { return sum_or_mean("clt_sum", out, x, 0); }
clt_status clt_mean(clt_tensor **out, const clt_tensor *x) { return sum_or_mean("clt_mean", out, x, 1); }

clt_status clt__sum_rows_into(clt_tensor *out, const clt_tensor *x, int accumulate)
{
    cl_ulong rows = (cl_ulong)x->shape[0], cols = (cl_ulong)x->shape[1];
    cl_int acc = accumulate;
    clt__buf xb = clt__tensor_buf(x), ob = clt__tensor_buf(out);
    if (rows == 0) return accumulate ? CLT_OK : clt_fill_(out, 0.0);
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(rows), CLT_ARG(cols),
                       CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(acc)};
    int wg;
    CLT_TRY(clt__reduce_wg(x->st->slot, &wg));
    if (wg) return clt__launch_cols_wg(x->st->slot, "reduce", "sum_rows_wg_f32", 7, args, cols, out);
    size_t global = (size_t)(cols + 15) / 16, local = 1;
    return clt__launch(x->st->slot, "reduce", "sum_rows_f32", 7, args, 1, &global, &local, out);
}

clt_status clt_sum_rows(clt_tensor **out, const clt_tensor *x)
{
    CLT_TRY(clt__need("clt_sum_rows", "out", out));
    *out = NULL;
    CLT_TRY(clt__need_f32("clt_sum_rows", "x", x));
    CLT_TRY(clt__need_2d("clt_sum_rows", "x", x));
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, x->st->slot, CLT_FLOAT32, 1, &x->shape[1]));
    return clt__finish(clt__sum_rows_into(y, x, 0), y, out);
}

clt_status clt_argmax_rows(clt_tensor **out, const clt_tensor *x)
{
    const char *op = "clt_argmax_rows";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need_f32(op, "x", x));
    CLT_TRY(clt__need_2d(op, "x", x));
    cl_ulong rows = (cl_ulong)x->shape[0], cols = (cl_ulong)x->shape[1];
    if (rows > 0 && cols == 0) {
        char s[128];
        return clt__fail(CLT_ERR_SHAPE, "%s: rows of x %s are empty and have no largest value", op,
                         clt__shape_str(x, s, sizeof s));
    }
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, x->st->slot, CLT_INT32, 1, &x->shape[0]));
    clt__buf xb = clt__tensor_buf(x), yb = clt__tensor_buf(y);
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(rows), CLT_ARG(cols), CLT_ARG(yb.mem),
                       CLT_ARG(yb.off)};
    return clt__finish(clt__launch1(x->st->slot, "reduce", "argmax_rows_f32", 6, args, (size_t)rows, y), y, out);
}

clt_status clt_count_equal(clt_tensor **out, const clt_tensor *a, const clt_tensor *b)
{
    const char *op = "clt_count_equal";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need_i32(op, "a", a));
    CLT_TRY(clt__need_i32(op, "b", b));
    CLT_TRY(clt__same_device(op, a, b));
    CLT_TRY(clt__same_shape(op, a, b));
    int slot = a->st->slot;
    cl_ulong n = (cl_ulong)a->numel, parts = clt__sum_parts(a->numel);
    int64_t pshape[] = {(int64_t)parts};
    clt_tensor *y, *part;
    CLT_TRY(scalar_f32(&y, slot));
    clt_status s = clt__tensor_new(&part, slot, CLT_FLOAT32, 1, pshape);
    if (s != CLT_OK) return clt__finish(s, y, out);
    if (n == 0) s = clt_fill_(part, 0.0);
    else {
        clt__buf ab = clt__tensor_buf(a), bb = clt__tensor_buf(b), pb = clt__tensor_buf(part);
        clt__arg args[] = {CLT_ARG(ab.mem), CLT_ARG(ab.off), CLT_ARG(bb.mem), CLT_ARG(bb.off), CLT_ARG(n),
                           CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(parts)};
        s = clt__launch1(slot, "reduce", "count_equal_partial_i32", 8, args, (size_t)parts, part);
    }
    if (s != CLT_OK) {
        clt_tensor_release(part);
        return clt__finish(s, y, out);
    }
    return clt__finish(finish_sum(y, part, parts, 1.0f), y, out);
}
