/* Optimizer steps, one fused kernel over a parameter, as PyTorch computes them.
 *
 * flags (src/ops/optim_step.c): ZERO_GRAD zeroes g[i] once read (the
 * trainer's step, which would zero the gradients before the next backward);
 * AMP is a float16 model's step: amp[ao] is the step's overflow flag
 * (set by unscale_f16 in cl/half.cl), and when it is set the step is skipped,
 * p, the state and h left as they were; otherwise h[ho + i] = half(p[po + i]),
 * the float16 parameters narrowed from the float32 master weights.
 * amp[ao + 1] counts the steps taken since the host last set its count
 * (scaler_update below). */
#define ZERO_GRAD 1
#define AMP 2

/* 1 when the step is a float16 model's and its gradients overflowed. */
static int skipped(__global const int *amp, ulong ao, int flags) { return (flags & AMP) && amp[ao] != 0; }

/* The updated master weight w of element i: its narrowing, with AMP. */
static void narrow(__global half *h, ulong ho, size_t i, float w, int flags)
{
    if (flags & AMP) vstore_half(w, ho + i, h);
}

/* d = g + weight_decay p; mode 0: no momentum (buf unused); 1: first step,
 * buf = d; 2: buf = momentum buf + d, d = buf. Then p -= lr d. */
__kernel void sgd_step_f32(__global float *p, ulong po, __global float *g, ulong go, __global float *buf, ulong bo,
                           ulong n, float lr, float momentum, float weight_decay, int mode, __global const int *amp,
                           ulong ao, __global half *h, ulong ho, int flags)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float gi = g[go + i];
    if (flags & ZERO_GRAD) g[go + i] = 0.0f;
    if (skipped(amp, ao, flags)) return;
    float w = p[po + i];
    float d = gi + weight_decay * w;
    if (mode == 1) buf[bo + i] = d;
    else if (mode == 2) buf[bo + i] = d = momentum * buf[bo + i] + d;
    w = w - lr * d;
    p[po + i] = w;
    narrow(h, ho, i, w, flags);
}

/* step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) come from
 * the host, except with AMP: there t = base + amp[ao + 1] + 1, the steps
 * taken, which only the device knows, and the kernel computes both in
 * float32 from lr, as PyTorch's Adam with capturable=True does
 * (torch/optim/adam.py, _single_tensor_adam's capturable branch: the step
 * count a device tensor, the bias corrections computed on the device).
 * decay is the AdamW factor 1 - lr wd (1 for Adam); l2 the weight decay
 * added to the gradient (0 for AdamW). */
__kernel void adam_step_f32(__global float *p, ulong po, __global float *g, ulong go, __global float *m, ulong mo,
                            __global float *v, ulong vo, ulong n, float beta1, float beta2, float eps, float l2,
                            float decay, float step_size, float bc2_sqrt, __global const int *amp, ulong ao,
                            __global half *h, ulong ho, int flags, float lr, ulong base)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float gi = g[go + i];
    if (flags & ZERO_GRAD) g[go + i] = 0.0f;
    if (skipped(amp, ao, flags)) return;
    if (flags & AMP) {
        float t = (float)(base + (ulong)(uint)amp[ao + 1] + 1);
        step_size = lr / (1.0f - pow(beta1, t));
        bc2_sqrt = sqrt(1.0f - pow(beta2, t));
    }
    float w = p[po + i] * decay;
    float d = gi + l2 * w;
    float mi = beta1 * m[mo + i] + (1.0f - beta1) * d;
    float vi = beta2 * v[vo + i] + (1.0f - beta2) * d * d;
    m[mo + i] = mi;
    v[vo + i] = vi;
    w = w - step_size * mi / (sqrt(vi) / bc2_sqrt + eps);
    p[po + i] = w;
    narrow(h, ho, i, w, flags);
}

/* The end of a float16 model's step, one work-item, after the update: the
 * loss scaler s (scale, 1 / scale, clean steps; the floats by their bits;
 * src/ops/half.h's CLT__SCALER_*) and the optimizer's amp words (overflow
 * flag, steps taken). On overflow the step was skipped: the clean steps
 * restart and a dynamic scale halves, to 2^-16 at the least. Otherwise the
 * step counts, and a dynamic scale doubles after `growth` clean steps in a
 * row when the double is finite. The flag is cleared for the next step.
 * 1 / scale follows the scale by the same power of two, so it stays the
 * float32 reciprocal the host computed (exactly, while it is a normal
 * number). */
__kernel void scaler_update(__global int *s, ulong so, __global int *amp, ulong ao, int dynamic, int growth)
{
    if (get_global_id(0) != 0) return;
    s += so;
    amp += ao;
    float scale = as_float(s[0]), inv = as_float(s[1]);
    int clean = s[2];
    if (amp[0] != 0) {
        amp[0] = 0;
        clean = 0;
        if (dynamic) {
            float half_scale = scale * 0.5f, least = 1.0f / 65536.0f;
            inv = half_scale < least ? 65536.0f : inv * 2.0f;
            scale = fmax(half_scale, least);
        }
    } else {
        amp[1] = (int)((uint)amp[1] + 1u);
        if (dynamic && ++clean >= growth) {
            clean = 0;
            if (isfinite(scale * 2.0f)) {
                scale *= 2.0f;
                inv *= 0.5f;
            }
        }
    }
    s[0] = as_int(scale);
    s[1] = as_int(inv);
    s[2] = clean;
}
