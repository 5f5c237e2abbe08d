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

/* The updates of one element, or of sixteen at once (T float or float16,
 * the same expressions either way, so the same bits): the step kernels
 * below apply them one element per work-item (the GPU class) or a chunk of
 * `per` contiguous elements per work-item (the CPU class, src/ops/optim_step.c). */

/* d = g + weight_decay w; mode 0: no momentum (*b unused); 1: first step,
 * *b = d; 2: *b = momentum *b + d, d = *b. Returns w - lr d. */
#define DEFINE_SGD(T, N)                                                                                     \
    static T sgd_update##N(T g, T w, T *b, float lr, float momentum, float weight_decay, int mode)           \
    {                                                                                                        \
        T d = g + weight_decay * w;                                                                          \
        if (mode == 1) *b = d;                                                                               \
        else if (mode == 2) *b = d = momentum * *b + d;                                                      \
        return w - lr * d;                                                                                   \
    }
DEFINE_SGD(float, 1)
DEFINE_SGD(float16, 16)

/* w = p decay, d = g + l2 w, then *m and *v move towards d and d^2;
 * returns w - step_size m / (sqrt(v) / bc2_sqrt + eps). */
#define DEFINE_ADAM(T, N)                                                                                    \
    static T adam_update##N(T g, T p, T *m, T *v, float beta1, float beta2, float eps, float l2, float decay, \
                            float step_size, float bc2_sqrt)                                                 \
    {                                                                                                        \
        T w = p * decay;                                                                                     \
        T d = g + l2 * w;                                                                                    \
        *m = beta1 * *m + (1.0f - beta1) * d;                                                                \
        *v = beta2 * *v + (1.0f - beta2) * d * d;                                                            \
        return w - step_size * *m / (sqrt(*v) / bc2_sqrt + eps);                                             \
    }
DEFINE_ADAM(float, 1)
DEFINE_ADAM(float16, 16)

/* With AMP, Adam's bias corrections for the step the device counts. */
static void adam_corrections(__global const int *amp, ulong ao, int flags, float lr, float beta1, float beta2,
                             ulong base, float *step_size, float *bc2_sqrt)
{
    if (!(flags & AMP)) return;
    float t = (float)(base + (ulong)(uint)amp[ao + 1] + 1);
    *step_size = lr / (1.0f - pow(beta1, t));
    *bc2_sqrt = sqrt(1.0f - pow(beta2, t));
}

/* The elements [*lo, *hi) of a CPU-class work-item, `per` of them; 0 past n. */
static int chunk(ulong n, ulong per, ulong *lo, ulong *hi)
{
    *lo = (ulong)get_global_id(0) * per;
    *hi = min(*lo + per, n);
    return *lo < n;
}

/* Sixteen narrowed weights, with AMP. */
static void narrow16(__global half *h, ulong ho, ulong i, float16 w, int flags)
{
    if (flags & AMP) vstore_half16(w, 0, h + ho + i);
}

/* Reads g at i (sixteen elements), zeroing them with ZERO_GRAD. */
static float16 take_grad16(__global float *g, ulong i, int flags)
{
    float16 gi = vload16(0, g + i);
    if (flags & ZERO_GRAD) vstore16((float16)(0.0f), 0, g + i);
    return gi;
}

/* Element i of SGD's step: reads g (zeroing it with ZERO_GRAD), then,
 * unless skip, updates p, buf (by mode) and h. */
static void sgd_element(__global float *p, ulong po, __global float *g, ulong go, __global float *buf, ulong bo,
                        ulong i, float lr, float momentum, float weight_decay, int mode, int skip, __global half *h,
                        ulong ho, int flags)
{
    float gi = g[go + i];
    if (flags & ZERO_GRAD) g[go + i] = 0.0f;
    if (skip) return;
    float b = mode == 2 ? buf[bo + i] : 0.0f;
    float w = sgd_update1(gi, p[po + i], &b, lr, momentum, weight_decay, mode);
    if (mode != 0) buf[bo + i] = b;
    p[po + i] = w;
    narrow(h, ho, i, w, flags);
}

/* p -= lr d over p[po + i] for i < n (sgd_update1); buf the momentum. */
__kernel void sgd_step_f32(__global float *p, ulong po, __global float *g, ulong go, __global float *buf, ulong bo,
                           ulong n, float lr, float momentum, float weight_decay, int mode, __global const int *amp,
                           ulong ao, __global half *h, ulong ho, int flags)
{
    size_t i = get_global_id(0);
    if (i < n) sgd_element(p, po, g, go, buf, bo, i, lr, momentum, weight_decay, mode, skipped(amp, ao, flags), h, ho,
                           flags);
}

/* sgd_step_f32's update, `per` contiguous elements a work-item, sixteen at a
 * time with vector loads and stores: on a CPU the work-items are loop
 * iterations, and one per element costs more than its arithmetic (the
 * conditional store of ZERO_GRAD keeps pocl from vectorizing across them). */
__kernel void sgd_step_chunk_f32(__global float *p, ulong po, __global float *g, ulong go, __global float *buf,
                                 ulong bo, ulong n, float lr, float momentum, float weight_decay, int mode,
                                 __global const int *amp, ulong ao, __global half *h, ulong ho, int flags, ulong per)
{
    ulong lo, hi, i;
    if (!chunk(n, per, &lo, &hi)) return;
    int skip = skipped(amp, ao, flags);
    for (i = lo; i + 16 <= hi; i += 16) {
        float16 gi = take_grad16(g + go, i, flags);
        if (skip) continue;
        float16 b = mode == 2 ? vload16(0, buf + bo + i) : (float16)(0.0f);
        float16 w = sgd_update16(gi, vload16(0, p + po + i), &b, lr, momentum, weight_decay, mode);
        if (mode != 0) vstore16(b, 0, buf + bo + i);
        vstore16(w, 0, p + po + i);
        narrow16(h, ho, i, w, flags);
    }
    for (; i < hi; i++) sgd_element(p, po, g, go, buf, bo, i, lr, momentum, weight_decay, mode, skip, h, ho, flags);
}

/* Element i of Adam's step, as sgd_element. */
static void adam_element(__global float *p, ulong po, __global float *g, ulong go, __global float *m, ulong mo,
                         __global float *v, ulong vo, ulong i, float beta1, float beta2, float eps, float l2,
                         float decay, float step_size, float bc2_sqrt, int skip, __global half *h, ulong ho,
                         int flags)
{
    float gi = g[go + i];
    if (flags & ZERO_GRAD) g[go + i] = 0.0f;
    if (skip) return;
    float mi = m[mo + i], vi = v[vo + i];
    float w = adam_update1(gi, p[po + i], &mi, &vi, beta1, beta2, eps, l2, decay, step_size, bc2_sqrt);
    m[mo + i] = mi;
    v[vo + i] = vi;
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
    int skip = skipped(amp, ao, flags);
    if (!skip) adam_corrections(amp, ao, flags, lr, beta1, beta2, base, &step_size, &bc2_sqrt);
    adam_element(p, po, g, go, m, mo, v, vo, i, beta1, beta2, eps, l2, decay, step_size, bc2_sqrt, skip, h, ho, flags);
}

/* adam_step_f32's update, `per` elements a work-item (as sgd_step_chunk_f32). */
__kernel void adam_step_chunk_f32(__global float *p, ulong po, __global float *g, ulong go, __global float *m,
                                  ulong mo, __global float *v, ulong vo, ulong n, float beta1, float beta2, float eps,
                                  float l2, float decay, float step_size, float bc2_sqrt, __global const int *amp,
                                  ulong ao, __global half *h, ulong ho, int flags, float lr, ulong base,
                                  ulong per)
{
    ulong lo, hi, i;
    if (!chunk(n, per, &lo, &hi)) return;
    int skip = skipped(amp, ao, flags);
    if (!skip) adam_corrections(amp, ao, flags, lr, beta1, beta2, base, &step_size, &bc2_sqrt);
    for (i = lo; i + 16 <= hi; i += 16) {
        float16 gi = take_grad16(g + go, i, flags);
        if (skip) continue;
        float16 mi = vload16(0, m + mo + i), vi = vload16(0, v + vo + i);
        float16 w = adam_update16(gi, vload16(0, p + po + i), &mi, &vi, beta1, beta2, eps, l2, decay, step_size,
                                bc2_sqrt);
        vstore16(mi, 0, m + mo + i);
        vstore16(vi, 0, v + vo + i);
        vstore16(w, 0, p + po + i);
        narrow16(h, ho, i, w, flags);
    }
    for (; i < hi; i++)
        adam_element(p, po, g, go, m, mo, v, vo, i, beta1, beta2, eps, l2, decay, step_size, bc2_sqrt, skip, h, ho,
                     flags);
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
