/* Softmax cross-entropy, fused: one work-item per row computes the row's
 * loss and, when asked, its gradient (softmax - onehot) / batch. */

/* logits is (rows, cols); loss[r] is the row's loss (NaN for a label outside
 * [0, cols), whose gradient row is NaN too). */
__kernel void softmax_xent_f32(__global const float *logits, ulong lo, __global const int *labels, ulong labo,
                               ulong rows, ulong cols, __global float *loss, ulong losso, __global float *dlogits,
                               ulong dlo, int want_grad)
{
    size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *x = logits + lo + r * cols;
    int label = labels[labo + r];
    if (label < 0 || (ulong)label >= cols) {
        loss[losso + r] = NAN;
        if (want_grad)
            for (ulong c = 0; c < cols; c++) dlogits[dlo + r * cols + c] = NAN;
        return;
    }
    float m = x[0];
    for (ulong c = 1; c < cols; c++) m = fmax(m, x[c]);
    float s = 0.0f;
    for (ulong c = 0; c < cols; c++) s += exp(x[c] - m);
    float lse = log(s);
    loss[losso + r] = lse - (x[label] - m);
    if (!want_grad) return;
    float inv_s = 1.0f / s, inv_b = 1.0f / (float)rows;
    for (ulong c = 0; c < cols; c++) {
        float p = exp(x[c] - m) * inv_s;
        dlogits[dlo + r * cols + c] = (p - (c == (ulong)label ? 1.0f : 0.0f)) * inv_b;
    }
}
