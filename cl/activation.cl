/* Activations and their backward passes. */

__kernel void relu_f32(__global const float *x, ulong xo, __global float *y, ulong yo, ulong n)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float v = x[xo + i];
    y[yo + i] = v < 0.0f ? 0.0f : v; /* NaN passes through, as in PyTorch */
}

/* y is the forward output: y > 0 exactly where x > 0. */
__kernel void relu_backward_f32(__global const float *dy, ulong dyo, __global const float *y, ulong yo,
                                __global float *dx, ulong dxo, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) dx[dxo + i] = y[yo + i] > 0.0f ? dy[dyo + i] : 0.0f;
}

/* relu_backward_f32 fused with the bias gradient of the Linear before the
 * ReLU: dy, y and dx are (rows, cols); db[c] += the sum of dx's column c,
 * summed in row order as sum_rows_f32 does, so db is bit for bit that of the
 * two passes. Each work-item walks down 16 adjacent columns as one vector
 * (the last one fewer, element by element): no local memory or barriers,
 * and work-groups of one spread over a CPU's cores. */
__kernel void relu_backward_bias_f32(__global const float *dy, ulong dyo, __global const float *y, ulong yo,
                                     __global float *dx, ulong dxo, ulong rows, ulong cols, __global float *db,
                                     ulong dbo)
{
    ulong c0 = get_global_id(0) * 16;
    if (c0 >= cols) return;
    dy += dyo + c0;
    y += yo + c0;
    dx += dxo + c0;
    db += dbo + c0;
    if (c0 + 16 <= cols) {
        float16 s = (float16)(0.0f);
        for (ulong r = 0; r < rows; r++) {
            float16 g = select((float16)(0.0f), vload16(0, dy + r * cols), isgreater(vload16(0, y + r * cols), 0.0f));
            vstore16(g, 0, dx + r * cols);
            s += g;
        }
        vstore16(vload16(0, db) + s, 0, db);
        return;
    }
    for (ulong c = 0; c < cols - c0; c++) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++) {
            float g = y[r * cols + c] > 0.0f ? dy[r * cols + c] : 0.0f;
            dx[r * cols + c] = g;
            s += g;
        }
        db[c] = db[c] + s;
    }
}

/* The GPU-shaped form (GPU-class devices whose work-groups hold 256
 * work-items, clt__reduce_wg; src/ops/activation.c); WG_COLS x WG_LANES as
 * sum_rows_wg_f32 in cl/reduce.cl. bias_relu_f32 below runs after every
 * CLBlast product with a bias or ReLU (src/ops/dense.c), whatever the class. */
#define WG_COLS 16
#define WG_LANES 16

/* relu_backward_bias_f32 as work-group tree reductions: dx as there; db[c]
 * += the sum of dx's column c, lane j adding rows j, j + WG_LANES, ... in
 * order, then the lanes pairwise in a fixed tree (so db is bit for bit that
 * of relu_backward_f32 then sum_rows_wg_f32). */
__kernel __attribute__((reqd_work_group_size(WG_COLS, WG_LANES, 1))) void
relu_backward_bias_wg_f32(__global const float *dy, ulong dyo, __global const float *y, ulong yo, __global float *dx,
                          ulong dxo, ulong rows, ulong cols, __global float *db, ulong dbo)
{
    __local float t[WG_LANES * WG_COLS];
    uint lc = (uint)get_local_id(0), j = (uint)get_local_id(1);
    ulong c = get_global_id(0);
    float s = 0.0f;
    if (c < cols)
        for (ulong r = j; r < rows; r += WG_LANES) {
            ulong i = r * cols + c;
            float g = y[yo + i] > 0.0f ? dy[dyo + i] : 0.0f;
            dx[dxo + i] = g;
            s += g;
        }
    t[j * WG_COLS + lc] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = WG_LANES / 2; h > 0; h /= 2) {
        if (j < h) t[j * WG_COLS + lc] += t[(j + h) * WG_COLS + lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (j == 0 && c < cols) db[dbo + c] = db[dbo + c] + t[lc];
}

/* The epilogue of a CLBlast product, in one pass: c (rows, cols) = c +
 * bias[col] when has_bias, then ReLU when relu (NaN passes through, as
 * relu_f32). */
__kernel void bias_relu_f32(__global float *c, ulong co, __global const float *bias, ulong bo, ulong rows, ulong cols,
                            int has_bias, int relu)
{
    size_t i = get_global_id(0);
    if (i >= rows * cols) return;
    float v = c[co + i];
    if (has_bias) v += bias[bo + i % cols];
    c[co + i] = relu && v < 0.0f ? 0.0f : v;
}
