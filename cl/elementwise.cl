/* Elementwise float32 kernels. Every tensor argument is a buffer and an
 * element offset into it; n is the element count. */

__kernel void add_f32(__global const float *a, ulong ao, __global const float *b, ulong bo,
                      __global float *y, ulong yo, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] = a[ao + i] + b[bo + i];
}

/* Any 4-byte dtype: the value's bits. */
__kernel void fill_u32(__global uint *y, ulong yo, uint v, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] = v;
}

__kernel void scale_f32(__global float *x, ulong xo, float alpha, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) x[xo + i] *= alpha;
}

__kernel void axpy_f32(__global float *y, ulong yo, float alpha, __global const float *x, ulong xo, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] += alpha * x[xo + i];
}
