/* Optimizer steps, one fused kernel over a parameter, as PyTorch computes them. */

/* d = g + weight_decay p; mode 0: no momentum (buf unused); 1: first step,
 * buf = d; 2: buf = momentum buf + d, d = buf. Then p -= lr d. */
__kernel void sgd_step_f32(__global float *p, ulong po, __global const float *g, ulong go, __global float *buf,
                           ulong bo, ulong n, float lr, float momentum, float weight_decay, int mode)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float w = p[po + i];
    float d = g[go + i] + weight_decay * w;
    if (mode == 1) buf[bo + i] = d;
    else if (mode == 2) buf[bo + i] = d = momentum * buf[bo + i] + d;
    p[po + i] = w - lr * d;
}

/* step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) come from
 * the host. decay is the AdamW factor 1 - lr wd (1 for Adam); l2 the weight
 * decay added to the gradient (0 for AdamW). */
__kernel void adam_step_f32(__global float *p, ulong po, __global const float *g, ulong go, __global float *m,
                            ulong mo, __global float *v, ulong vo, ulong n, float beta1, float beta2, float eps,
                            float l2, float decay, float step_size, float bc2_sqrt)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float w = p[po + i] * decay;
    float d = g[go + i] + l2 * w;
    float mi = beta1 * m[mo + i] + (1.0f - beta1) * d;
    float vi = beta2 * v[vo + i] + (1.0f - beta2) * d * d;
    m[mo + i] = mi;
    v[vo + i] = vi;
    p[po + i] = w - step_size * mi / (sqrt(vi) / bc2_sqrt + eps);
}
