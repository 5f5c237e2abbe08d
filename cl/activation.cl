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
