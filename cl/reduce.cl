/* Reductions. Whole-tensor reductions run in two passes: `parts` partial
 * results, partial p covering elements p, p + parts, p + 2 parts, ... (so
 * neighbouring work-items read neighbouring elements), then one work-item
 * over the partials. No local memory or barriers: they are slow on CPUs.
 *
 * GPU-class devices whose work-groups hold WG_SUM work-items (clt__reduce_wg
 * in src/ops/reduce.c) take the _wg forms at the end of this file instead
 * (argmax and count_equal_partial_i32 have none): work-group tree
 * reductions in local memory, whose order of additions is fixed by the
 * sizes alone, so a result is the same run to run. */

__kernel void sum_partial_f32(__global const float *x, ulong xo, ulong n, __global float *part, ulong po,
                              ulong parts)
{
    size_t p = get_global_id(0);
    if (p >= parts) return;
    float s = 0.0f;
    for (ulong i = p; i < n; i += parts) s += x[xo + i];
    part[po + p] = s;
}

/* out = (sum of the partials) / divisor; divisor 0 gives NaN for an empty mean. */
__kernel void sum_final_f32(__global const float *part, ulong po, ulong parts, __global float *out, ulong oo,
                            float divisor)
{
    if (get_global_id(0) != 0) return;
    float s = 0.0f;
    for (ulong p = 0; p < parts; p++) s += part[po + p];
    out[oo] = s / divisor;
}

__kernel void count_equal_partial_i32(__global const int *a, ulong ao, __global const int *b, ulong bo, ulong n,
                                      __global float *part, ulong po, ulong parts)
{
    size_t p = get_global_id(0);
    if (p >= parts) return;
    uint c = 0;
    for (ulong i = p; i < n; i += parts) c += a[ao + i] == b[bo + i];
    part[po + p] = (float)c;
}

/* x is (rows, cols): out[c] = (accumulate ? out[c] : 0) + sum over rows of
 * x[r, c], in row order. Each work-item walks down 16 adjacent columns as
 * one vector (the last one fewer, element by element). */
__kernel void sum_rows_f32(__global const float *x, ulong xo, ulong rows, ulong cols, __global float *out,
                           ulong oo, int accumulate)
{
    ulong c0 = get_global_id(0) * 16;
    if (c0 >= cols) return;
    x += xo + c0;
    out += oo + c0;
    if (c0 + 16 <= cols) {
        float16 s = (float16)(0.0f);
        for (ulong r = 0; r < rows; r++) s += vload16(0, x + r * cols);
        vstore16(accumulate ? vload16(0, out) + s : s, 0, out);
        return;
    }
    for (ulong c = 0; c < cols - c0; c++) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++) s += x[r * cols + c];
        out[c] = accumulate ? out[c] + s : s;
    }
}

/* The first index of the row's largest value (cols >= 1); NaN counts as
 * largest, as in PyTorch. */
static inline int row_argmax(__global const float *row, ulong cols)
{
    float best = row[0];
    int at = 0;
    for (ulong c = 1; c < cols && !isnan(best); c++) {
        float v = row[c];
        if (v > best || isnan(v)) {
            best = v;
            at = (int)c;
        }
    }
    return at;
}

__kernel void argmax_rows_f32(__global const float *x, ulong xo, ulong rows, ulong cols, __global int *out,
                              ulong oo)
{
    size_t r = get_global_id(0);
    if (r >= rows) return;
    out[oo + r] = row_argmax(x + xo + r * cols, cols);
}

/* Evaluation's correct predictions in one launch of one work-group
 * (src/ops/loss.c, clt__count_hits_), for 1 to WG_HITS rows of x (rows,
 * cols): work-item l compares row l's row_argmax with labels[l], then
 * work-item 0 counts the matches and adds the count to sum[so], as
 * argmax_rows_f32, count_equal_partial_i32, sum_final_f32 and add_f32
 * would (whole numbers, so the same float32 bits). */
#define WG_HITS 256
__kernel __attribute__((reqd_work_group_size(WG_HITS, 1, 1))) void
count_hits_f32(__global const float *x, ulong xo, ulong rows, ulong cols, __global const int *labels, ulong lo,
               __global float *sum, ulong so)
{
    __local uint t[WG_HITS];
    uint l = (uint)get_local_id(0);
    t[l] = l < rows && row_argmax(x + xo + l * cols, cols) == labels[lo + l];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l != 0) return;
    uint c = 0;
    for (uint r = 0; r < rows; r++) c += t[r];
    sum[so] += (float)c;
}

/* The GPU-shaped forms. WG_SUM work-items a group for whole-tensor sums;
 * WG_COLS columns x WG_LANES lanes a group for column sums. */
#define WG_SUM 256
#define WG_COLS 16
#define WG_LANES 16

/* Adds the n values t[i * stride] (n a power of two, i the caller's index
 * along them) pairwise in a fixed tree: t[i] += t[i + n/2], then n/4, ...
 * Every work-item of the group calls it; t[0] holds the total on return. */
static inline void tree_sum(__local float *t, uint i, uint n, uint stride)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = n / 2; h > 0; h /= 2) {
        if (i < h) t[i * stride] += t[(i + h) * stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* part[po + g] = the sum of x[xo + i] for i = gid, gid + global size, ...
 * over the work-items of group g, added in tree_sum's order. */
__kernel __attribute__((reqd_work_group_size(WG_SUM, 1, 1))) void
sum_partial_wg_f32(__global const float *x, ulong xo, ulong n, __global float *part, ulong po)
{
    __local float t[WG_SUM];
    uint l = (uint)get_local_id(0);
    ulong stride = get_global_size(0);
    float s = 0.0f;
    for (ulong i = get_global_id(0); i < n; i += stride) s += x[xo + i];
    t[l] = s;
    tree_sum(t, l, WG_SUM, 1);
    if (l == 0) part[po + get_group_id(0)] = t[0];
}

/* One work-group: out = (the sum of the partials) / divisor; work-item l
 * adds partials l, l + WG_SUM, ..., then the tree. */
__kernel __attribute__((reqd_work_group_size(WG_SUM, 1, 1))) void
sum_final_wg_f32(__global const float *part, ulong po, ulong parts, __global float *out, ulong oo, float divisor)
{
    __local float t[WG_SUM];
    uint l = (uint)get_local_id(0);
    float s = 0.0f;
    for (ulong p = l; p < parts; p += WG_SUM) s += part[po + p];
    t[l] = s;
    tree_sum(t, l, WG_SUM, 1);
    if (l == 0) out[oo] = t[0] / divisor;
}

/* sum_rows_f32 on a GPU: the group's WG_COLS adjacent columns (dimension 0,
 * so neighbouring work-items read neighbouring addresses) by WG_LANES lanes
 * (dimension 1); lane j sums rows j, j + WG_LANES, ... in order, then the
 * lanes' sums go through tree_sum. The global size is rounded up to whole
 * groups; work-items past the last column add nothing and store nothing. */
__kernel __attribute__((reqd_work_group_size(WG_COLS, WG_LANES, 1))) void
sum_rows_wg_f32(__global const float *x, ulong xo, ulong rows, ulong cols, __global float *out, ulong oo,
                int accumulate)
{
    __local float t[WG_LANES * WG_COLS];
    uint lc = (uint)get_local_id(0), j = (uint)get_local_id(1);
    ulong c = get_global_id(0);
    float s = 0.0f;
    if (c < cols)
        for (ulong r = j; r < rows; r += WG_LANES) s += x[xo + r * cols + c];
    t[j * WG_COLS + lc] = s;
    tree_sum(t + lc, j, WG_LANES, WG_COLS);
    if (j == 0 && c < cols) out[oo + c] = accumulate ? out[oo + c] + t[lc] : t[lc];
}
