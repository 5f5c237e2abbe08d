/* Softmax cross-entropy, fused: one work-item per row computes the row's
 * loss and, when asked, its gradient (softmax - onehot) / batch. */

/* Row r of logits (rows, cols): returns its loss (NaN for a label outside
 * [0, cols), whose gradient row is NaN too) and, when want_grad, writes its
 * gradient row (softmax - onehot) / rows. */
static float xent_row(__global const float *logits, ulong lo, __global const int *labels, ulong labo, ulong rows,
                      ulong cols, ulong r, __global float *dlogits, ulong dlo, int want_grad)
{
    __global const float *x = logits + lo + r * cols;
    int label = labels[labo + r];
    if (label < 0 || (ulong)label >= cols) {
        if (want_grad)
            for (ulong c = 0; c < cols; c++) dlogits[dlo + r * cols + c] = NAN;
        return NAN;
    }
    float m = x[0];
    for (ulong c = 1; c < cols; c++) m = fmax(m, x[c]);
    float s = 0.0f;
    for (ulong c = 0; c < cols; c++) s += exp(x[c] - m);
    float lse = log(s);
    if (want_grad) {
        float inv_s = 1.0f / s, inv_b = 1.0f / (float)rows;
        for (ulong c = 0; c < cols; c++) {
            float p = exp(x[c] - m) * inv_s;
            dlogits[dlo + r * cols + c] = (p - (c == (ulong)label ? 1.0f : 0.0f)) * inv_b;
        }
    }
    return lse - (x[label] - m);
}

/* mean[mo] = total / rows and, with want_sum, sum[so] += rows * mean (the
 * training step's loss sum, as axpy_f32 would add it). */
static void write_mean(float total, ulong rows, __global float *mean, ulong mo, __global float *sum, ulong so,
                       int want_sum)
{
    float alpha = (float)rows, mv = total / alpha;
    mean[mo] = mv;
    if (want_sum) sum[so] += alpha * mv;
}

/* loss[r] is row r's loss. */
__kernel void softmax_xent_f32(__global const float *logits, ulong lo, __global const int *labels, ulong labo,
                               ulong rows, ulong cols, __global float *loss, ulong losso, __global float *dlogits,
                               ulong dlo, int want_grad)
{
    size_t r = get_global_id(0);
    if (r >= rows) return;
    loss[losso + r] = xent_row(logits, lo, labels, labo, rows, cols, r, dlogits, dlo, want_grad);
}

/* The GPU-class form for batches of at most WG_ROWS rows (src/ops/loss.c,
 * whose CLT__XENT_WG_ROWS must equal it: test_loss checks):
 * one work-group, work-item l takes row l, and the rows' losses are added
 * pairwise in a fixed tree (t[l] += t[l + h] for h = WG_ROWS / 2, ..., 1),
 * then mean[mo] = the total / rows: the order of cl/reduce.cl's
 * sum_partial_wg_f32 and sum_final_wg_f32 over the per-row losses, in one
 * launch instead of three, and the same bits (test_loss compares them).
 * With want_sum, also sum[so] += rows * mean: the training step's loss sum,
 * as axpy_f32 would add it, in the same launch. */
#define WG_ROWS 256
__kernel __attribute__((reqd_work_group_size(WG_ROWS, 1, 1))) void
softmax_xent_mean_wg_f32(__global const float *logits, ulong lo, __global const int *labels, ulong labo, ulong rows,
                         ulong cols, __global float *mean, ulong mo, __global float *dlogits, ulong dlo,
                         int want_grad, __global float *sum, ulong so, int want_sum)
{
    __local float t[WG_ROWS];
    uint l = (uint)get_local_id(0);
    float s = 0.0f;
    if (l < rows) s += xent_row(logits, lo, labels, labo, rows, cols, l, dlogits, dlo, want_grad);
    t[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = WG_ROWS / 2; h > 0; h /= 2) {
        if (l < h) t[l] += t[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) write_mean(t[0], rows, mean, mo, sum, so, want_sum);
}

/* The CPU-class form of softmax_xent_mean_wg_f32 (src/ops/loss.c), same
 * arguments and results: work-item l takes row l, then work-item 0 adds
 * the rows' losses one after the other, the order of cl/reduce.cl's
 * sum_partial_f32 and sum_final_f32 over the per-row losses (one partial a
 * row, clt__sum_parts), so their bits in one launch instead of three (four
 * with the sum). On pocl the rows run as one loop the work-group
 * vectoriser widens, the sum as one scalar loop. */
__kernel __attribute__((reqd_work_group_size(WG_ROWS, 1, 1))) void
softmax_xent_mean_seq_f32(__global const float *logits, ulong lo, __global const int *labels, ulong labo,
                          ulong rows, ulong cols, __global float *mean, ulong mo, __global float *dlogits, ulong dlo,
                          int want_grad, __global float *sum, ulong so, int want_sum)
{
    __local float t[WG_ROWS];
    uint l = (uint)get_local_id(0);
    t[l] = l < rows ? xent_row(logits, lo, labels, labo, rows, cols, l, dlogits, dlo, want_grad) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l != 0) return;
    float s = 0.0f;
    for (uint r = 0; r < rows; r++) s += t[r];
    write_mean(s, rows, mean, mo, sum, so, want_sum);
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
