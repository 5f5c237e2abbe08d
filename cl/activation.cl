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
