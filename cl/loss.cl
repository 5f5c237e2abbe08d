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

/* Mean squared error, fused: one work-item per row of pred and target
 * (rows, cols) computes the row's sum of squared errors, its sum of absolute
 * errors and, when asked, its gradient 2 (pred - target) / (rows * cols).
 * With want_scale, each column's error is multiplied by scale[c] in the two
 * sums (the gradient never is): the errors in a target's own units when the
 * model predicts standardised values. */
__kernel void mse_f32(__global const float *pred, ulong po, __global const float *target, ulong to, ulong rows,
                      ulong cols, __global float *sq, ulong sqo, __global float *ab, ulong abo,
                      __global float *dpred, ulong dpo, int want_grad, __global const float *scale, ulong so,
                      int want_scale)
{
    size_t r = get_global_id(0);
    if (r >= rows) return;
    float s2 = 0.0f, s1 = 0.0f, coef = 2.0f / ((float)rows * (float)cols);
    for (ulong c = 0; c < cols; c++) {
        float d = pred[po + r * cols + c] - target[to + r * cols + c];
        if (want_grad) dpred[dpo + r * cols + c] = coef * d;
        float e = want_scale ? d * scale[so + c] : d;
        s2 += e * e;
        s1 += fabs(e);
    }
    sq[sqo + r] = s2;
    ab[abo + r] = s1;
}
