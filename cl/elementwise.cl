/* Elementwise float32 kernels. Every tensor argument is a buffer and an
 * element offset into it; n is the element count. */

__kernel void add_f32(__global const float *a, ulong ao, __global const float *b, ulong bo,
                      __global float *y, ulong yo, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] = a[ao + i] + b[bo + i];
}
