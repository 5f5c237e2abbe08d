/* Helpers around the dense (GEMM) op. */

/* y (rows, cols) = b (cols) on every row: the bias, before a GEMM adds x w^T with beta 1. */
__kernel void bias_rows_f32(__global float *y, ulong yo, __global const float *b, ulong bo, ulong rows, ulong cols)
{
    size_t c = get_global_id(0), r = get_global_id(1);
    if (c < cols && r < rows) y[yo + r * cols + c] = b[bo + c];
}
