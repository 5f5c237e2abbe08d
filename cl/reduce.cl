/* Reductions. Whole-tensor reductions run in two passes: `parts` partial
 * results, partial p covering elements p, p + parts, p + 2 parts, ... (so
 * neighbouring work-items read neighbouring elements), then one work-item
 * over the partials. No local memory or barriers: they are slow on CPUs. */

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

/* The first index of each row's largest value; NaN counts as largest, as in PyTorch. */
__kernel void argmax_rows_f32(__global const float *x, ulong xo, ulong rows, ulong cols, __global int *out,
                              ulong oo)
{
    size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *row = x + xo + r * cols;
    float best = row[0];
    int at = 0;
    for (ulong c = 1; c < cols && !isnan(best); c++) {
        float v = row[c];
        if (v > best || isnan(v)) {
            best = v;
            at = (int)c;
        }
    }
    out[oo + r] = at;
}
