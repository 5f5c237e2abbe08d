/* The fused losses, softmax cross-entropy and mean squared error, against
 * double-precision C references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "ops/loss.h"
#include "ops/ops_internal.h"
#include "support.h"

/* Mean loss over rows; grad = (softmax - onehot) / rows. */
static double ref_xent(const float *x, const int32_t *labels, int64_t rows, int64_t cols, float *grad)
{
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        double m = row[0], s = 0;
        for (int64_t c = 1; c < cols; c++) m = fmax(m, row[c]);
        for (int64_t c = 0; c < cols; c++) s += exp(row[c] - m);
        total += log(s) + m - row[labels[r]];
        for (int64_t c = 0; c < cols; c++)
            grad[r * cols + c] = (float)((exp(row[c] - m) / s - (c == labels[r])) / (double)rows);
    }
    return total / (double)rows;
}

static void run(const float *x, const int32_t *labels, int64_t rows, int64_t cols, int as_view, double *loss,
                float *grad)
{
    int64_t total = (rows + 2) * cols;
    float *buf = calloc((size_t)(total ? total : 1), sizeof *buf);
    memcpy(buf + cols, x, (size_t)(rows * cols) * sizeof *x);
    int64_t sx[] = {rows + 2, cols}, sl[] = {rows};
    clt_tensor *base, *tx, *tl, *tloss, *tgrad;
    if (as_view) {
        ck_assert_ok(clt_from_host(&base, clt_test_device(), CLT_FLOAT32, 2, sx, buf));
        ck_assert_ok(clt_narrow(&tx, base, 1, rows));
    } else {
        sx[0] = rows;
        ck_assert_ok(clt_from_host(&base, clt_test_device(), CLT_FLOAT32, 2, sx, x));
        tx = clt_tensor_retain(base);
    }
    free(buf);
    ck_assert_ok(clt_from_host(&tl, clt_test_device(), CLT_INT32, 1, sl, labels));
    ck_assert_ok(clt_softmax_cross_entropy(&tloss, grad ? &tgrad : NULL, tx, tl));
    ck_assert_int_eq(clt_tensor_ndim(tloss), 0);
    ck_assert_ok(clt_item(tloss, loss));
    if (grad) {
        ck_assert_int_eq(clt_tensor_dim(tgrad, 0), rows);
        ck_assert_int_eq(clt_tensor_dim(tgrad, 1), cols);
        ck_assert_ok(clt_to_host(tgrad, grad, (size_t)(rows * cols) * sizeof *grad));
        clt_tensor_release(tgrad);
    }
    clt_tensor_release(tx);
    clt_tensor_release(base);
    clt_tensor_release(tl);
    clt_tensor_release(tloss);
}

START_TEST(test_matches_reference)
{
    static const int64_t shapes[][2] = {{1, 1}, {13, 7}, {257, 10}, {3, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = malloc((size_t)(rows * cols) * sizeof *x), *r = malloc((size_t)rows * sizeof *r);
        float *want = malloc((size_t)(rows * cols) * sizeof *want), *got = malloc((size_t)(rows * cols) * sizeof *got);
        int32_t *labels = malloc((size_t)rows * sizeof *labels);
        clt_test_fill_uniform(x, rows * cols, 1 + (uint64_t)s, -4, 4);
        clt_test_fill_uniform(r, rows, 2 + (uint64_t)s, 0, (float)cols);
        for (int64_t i = 0; i < rows; i++) labels[i] = (int32_t)r[i];
        double ref = ref_xent(x, labels, rows, cols, want), loss;
        run(x, labels, rows, cols, (int)(s & 1), &loss, got);
        ck_assert_msg(fabs(loss - ref) < 1e-5 * fmax(1, fabs(ref)), "loss (%lld, %lld): %.9g, expected %.9g",
                      (long long)rows, (long long)cols, loss, ref);
        ck_assert_double_lt(clt_test_max_rel_err(got, want, rows * cols), 1e-6);
        /* without the gradient the loss is the same */
        double loss_only;
        run(x, labels, rows, cols, 0, &loss_only, NULL);
        ck_assert(loss_only == loss);
        free(x);
        free(r);
        free(want);
        free(got);
        free(labels);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A one-launch mean has the bits of the three launches: the per-row
 * losses (each row's alone, as a batch of one on the CPU class, is exactly
 * its loss), then the mean of cl/reduce.cl's two passes on class cls,
 * which stays set. */
static void expect_three_launches(const float *x, const int32_t *labels, int64_t rows, int64_t cols, const char *cls,
                                  double one_launch)
{
    float *per_row = malloc((size_t)rows * sizeof *per_row);
    setenv("CLT_DEVICE_CLASS", "cpu", 1);
    for (int64_t r = 0; r < rows; r++) {
        double one;
        run(x + r * cols, labels + r, 1, cols, 0, &one, NULL);
        per_row[r] = (float)one;
    }
    setenv("CLT_DEVICE_CLASS", cls, 1);
    clt_tensor *t = NULL, *mean = NULL;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_FLOAT32, 1, &rows, per_row));
    ck_assert_ok(clt_mean(&mean, t));
    double three;
    ck_assert_ok(clt_item(mean, &three));
    float a = (float)one_launch, b = (float)three;
    ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s class (%lld, %lld): one launch %.9g, three %.9g", cls,
                  (long long)rows, (long long)cols, one_launch, three);
    clt_tensor_release(mean);
    clt_tensor_release(t);
    free(per_row);
}

/* Under device class cls (CLT_DEVICE_CLASS) with work-groups of 256, a
 * batch of 1 to 256 rows takes the one-work-group loss, which also takes
 * the mean: one launch, where a larger batch makes three (the per-row
 * losses, the two passes of the mean); against the reference and the CPU
 * class, the gradients the CPU class's bits (one row's arithmetic,
 * cl/loss.cl xent_row), the mean the three launches' (the GPU class's tree
 * or the CPU class's row order), and a label outside [0, cols) still makes
 * the mean NaN. */
static void check_one_launch(const char *cls, uint64_t seed)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    int wide = clt__slot_get(slot)->max_work_group >= 256;
    static const int64_t shapes[][2] = {{1, 10}, {37, 10}, {256, 10}, {257, 10}, {5, 1000}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t rows = shapes[i][0], cols = shapes[i][1];
        float *x = malloc((size_t)(rows * cols) * sizeof *x), *want = malloc((size_t)(rows * cols) * sizeof *want);
        float *cpu = malloc((size_t)(rows * cols) * sizeof *cpu), *got = malloc((size_t)(rows * cols) * sizeof *got);
        int32_t *labels = malloc((size_t)rows * sizeof *labels);
        clt_test_fill_uniform(x, rows * cols, seed + (uint64_t)i, -4, 4);
        for (int64_t r = 0; r < rows; r++) labels[r] = (int32_t)((r * 7 + 3) % cols);
        double ref = ref_xent(x, labels, rows, cols, want), on_cpu, on_cls;
        setenv("CLT_DEVICE_CLASS", "cpu", 1);
        run(x, labels, rows, cols, 0, &on_cpu, cpu);
        setenv("CLT_DEVICE_CLASS", cls, 1);
        run(x, labels, rows, cols, 0, &on_cls, NULL); /* built and cached before counting */
        clt_test_kernels_start();
        run(x, labels, rows, cols, (int)(i & 1), &on_cls, got);
        uint64_t launches = clt_test_kernels_stop();
        uint64_t expect = wide && rows <= 256 ? 1 : 3;
        ck_assert_msg(launches == expect, "%s class (%lld, %lld): %llu launches for the loss, expected %llu", cls,
                      (long long)rows, (long long)cols, (unsigned long long)launches, (unsigned long long)expect);
        ck_assert_msg(fabs(on_cls - ref) < 1e-5 * fmax(1, fabs(ref)), "loss (%lld, %lld): %.9g, expected %.9g",
                      (long long)rows, (long long)cols, on_cls, ref);
        ck_assert_msg(fabs(on_cls - on_cpu) < 1e-5 * fmax(1, fabs(on_cpu)), "%s class %.9g, cpu class %.9g", cls,
                      on_cls, on_cpu);
        ck_assert_double_lt(clt_test_max_rel_err(got, want, rows * cols), 1e-6);
        ck_assert_msg(memcmp(got, cpu, (size_t)(rows * cols) * sizeof *got) == 0, "(%lld, %lld): gradients differ",
                      (long long)rows, (long long)cols);
        if (expect == 1) expect_three_launches(x, labels, rows, cols, cls, on_cls);
        unsetenv("CLT_DEVICE_CLASS");
        free(x);
        free(want);
        free(cpu);
        free(got);
        free(labels);
    }
    float x[3 * 4] = {0};
    int32_t bad[3] = {1, 4, 0};
    double loss;
    setenv("CLT_DEVICE_CLASS", cls, 1);
    run(x, bad, 3, 4, 0, &loss, NULL);
    unsetenv("CLT_DEVICE_CLASS");
    ck_assert(isnan(loss));
    clt_test_assert_no_live_tensors();
}

/* check_one_launch on the GPU class (CLT_DEVICE_CLASS=gpu here), and the
 * work-group its kernel is compiled for. */
START_TEST(test_gpu_class_one_launch)
{
    check_one_launch("gpu", 40);
    /* The work-group cl/loss.cl compiles its one-group losses for is the one src/ops/loss.c launches. */
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    static const char *const kernels[] = {"softmax_xent_mean_wg_f32", "softmax_xent_mean_seq_f32"};
    for (int i = 0; i < 2; i++) {
        cl_kernel k;
        size_t wg[3] = {0};
        ck_assert_ok(clt__kernel(slot, "loss", kernels[i], &k));
        ck_assert_int_eq(clGetKernelWorkGroupInfo(k, clt__slot_get(slot)->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                                  sizeof wg, wg, NULL), CL_SUCCESS);
        ck_assert_int_eq(wg[0], CLT__XENT_WG_ROWS);
    }
}
END_TEST

/* check_one_launch on the CPU class, whose one launch adds the rows' losses
 * in row order. */
START_TEST(test_cpu_class_one_launch)
{
    check_one_launch("cpu", 60);
}
END_TEST

/* The training step's loss sum (clt__softmax_cross_entropy_sum): sum +=
 * rows * the mean, the bits of clt_softmax_cross_entropy and a clt_axpy_, on
 * both classes and on either side of the one-launch limits; where the loss
 * is one launch (test_gpu_class_one_launch, test_cpu_class_one_launch) the
 * sum rides in it. */
START_TEST(test_loss_sum_in_the_launch)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    int wide = clt__slot_get(slot)->max_work_group >= 256;
    static const int64_t rows_of[] = {1, 37, 256, 257};
    static const char *const classes[] = {"cpu", "gpu"};
    for (size_t i = 0; i < sizeof rows_of / sizeof rows_of[0]; i++)
        for (int c = 0; c < 2; c++) {
            int64_t rows = rows_of[i], cols = 10, shape[2] = {rows, cols};
            float *x = malloc((size_t)(rows * cols) * sizeof *x);
            int32_t *labels = malloc((size_t)rows * sizeof *labels);
            clt_test_fill_uniform(x, rows * cols, 90 + (uint64_t)i, -4, 4);
            for (int64_t r = 0; r < rows; r++) labels[r] = (int32_t)((r * 3 + 1) % cols);
            setenv("CLT_DEVICE_CLASS", classes[c], 1);
            clt_tensor *logits, *lab, *loss = NULL, *dl = NULL, *want = NULL, *got = NULL, *sum_a, *sum_b;
            ck_assert_ok(clt_from_host(&logits, clt_test_device(), CLT_FLOAT32, 2, shape, x));
            ck_assert_ok(clt_from_host(&lab, clt_test_device(), CLT_INT32, 1, &rows, labels));
            ck_assert_ok(clt_full(&sum_a, clt_test_device(), CLT_FLOAT32, 0, NULL, 3.7));
            ck_assert_ok(clt_full(&sum_b, clt_test_device(), CLT_FLOAT32, 0, NULL, 3.7));
            ck_assert_ok(clt_softmax_cross_entropy(&want, NULL, logits, lab));
            ck_assert_ok(clt_axpy_(sum_a, (float)rows, want));
            ck_assert_ok(clt__softmax_cross_entropy_sum(&loss, &dl, logits, lab, sum_b)); /* built before counting */
            clt_tensor_release(loss);
            clt_tensor_release(dl);
            ck_assert_ok(clt_axpy_(sum_a, (float)rows, want));
            clt_test_kernels_start();
            ck_assert_ok(clt__softmax_cross_entropy_sum(&got, &dl, logits, lab, sum_b));
            uint64_t launches = clt_test_kernels_stop();
            unsetenv("CLT_DEVICE_CLASS");
            uint64_t expect = wide && rows <= 256 ? 1 : 4;
            ck_assert_msg(launches == expect, "%s class, %lld rows: %llu launches for the loss and its sum, expected "
                          "%llu", classes[c], (long long)rows, (unsigned long long)launches,
                          (unsigned long long)expect);
            float a, b, l1, l2;
            ck_assert_ok(clt_to_host(sum_a, &a, sizeof a));
            ck_assert_ok(clt_to_host(sum_b, &b, sizeof b));
            ck_assert_ok(clt_to_host(want, &l1, sizeof l1));
            ck_assert_ok(clt_to_host(got, &l2, sizeof l2));
            ck_assert_msg(memcmp(&a, &b, sizeof a) == 0 && memcmp(&l1, &l2, sizeof l1) == 0,
                          "%s class, %lld rows: sum %a with the axpy, %a in the loss; loss %a and %a", classes[c],
                          (long long)rows, (double)a, (double)b, (double)l1, (double)l2);
            ck_assert(a > 3.7f);
            clt_tensor *ts[] = {logits, lab, dl, want, got, sum_a, sum_b};
            for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) clt_tensor_release(ts[k]);
            free(x);
            free(labels);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The gradient matches central finite differences of the loss in double. */
START_TEST(test_gradient_matches_finite_differences)
{
    enum { B = 3, C = 5 };
    float x[B * C], got[B * C], unused[B * C];
    int32_t labels[B] = {4, 0, 2};
    clt_test_fill_uniform(x, B * C, 7, -3, 3);
    double loss;
    run(x, labels, B, C, 0, &loss, got);
    for (int i = 0; i < B * C; i++) {
        float saved = x[i];
        const float h = 1e-2f;
        float hi = saved + h, lo = saved - h;
        x[i] = hi;
        double up = ref_xent(x, labels, B, C, unused);
        x[i] = lo;
        double down = ref_xent(x, labels, B, C, unused);
        x[i] = saved;
        double fd = (up - down) / ((double)hi - (double)lo); /* the step float32 really took */
        ck_assert_msg(fabs(got[i] - fd) < 1e-4, "dlogits[%d] = %g, finite difference %g", i, (double)got[i], fd);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Logits around 1e4 overflow a naive exp; max-subtraction keeps them finite. */
START_TEST(test_huge_logits_stay_finite)
{
    enum { B = 3, C = 4 };
    float x[B * C] = {1e4f, -1e4f, 0.0f, 1e4f - 1.0f, -1e4f, -1e4f, -1e4f, -1e4f, 2e4f, 1e4f, -3e4f, 0.0f};
    int32_t labels[B] = {3, 0, 1};
    float want[B * C], got[B * C];
    double ref = ref_xent(x, labels, B, C, want), loss;
    run(x, labels, B, C, 1, &loss, got);
    ck_assert(isfinite(loss));
    ck_assert_msg(fabs(loss - ref) < 1e-5 * fmax(1, fabs(ref)), "loss %.9g, expected %.9g", loss, ref);
    for (int i = 0; i < B * C; i++) ck_assert(isfinite(got[i]));
    ck_assert_double_lt(clt_test_max_rel_err(got, want, B * C), 1e-6);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_bad_label_gives_nan)
{
    enum { B = 2, C = 3 };
    float x[B * C] = {1, 2, 3, 4, 5, 6}, got[B * C];
    int32_t high[B] = {0, C}, low[B] = {-1, 1};
    double loss;
    run(x, high, B, C, 1, &loss, got);
    ck_assert(isnan(loss));
    for (int c = 0; c < C; c++) {
        ck_assert(isfinite(got[c])); /* the good row keeps its gradient */
        ck_assert(isnan(got[C + c]));
    }
    run(x, low, B, C, 0, &loss, NULL);
    ck_assert(isnan(loss));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_empty_batch)
{
    int64_t sx[] = {0, 5}, sl[] = {0};
    clt_tensor *x, *l, *loss, *grad;
    ck_assert_ok(clt_empty(&x, clt_test_device(), CLT_FLOAT32, 2, sx));
    ck_assert_ok(clt_empty(&l, clt_test_device(), CLT_INT32, 1, sl));
    ck_assert_ok(clt_softmax_cross_entropy(&loss, &grad, x, l));
    double v;
    ck_assert_ok(clt_item(loss, &v));
    ck_assert(isnan(v)); /* as PyTorch: the mean over no rows */
    ck_assert_int_eq(clt_tensor_numel(grad), 0);
    clt_tensor_release(x);
    clt_tensor_release(l);
    clt_tensor_release(loss);
    clt_tensor_release(grad);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors)
{
    int64_t s23[] = {2, 3}, s2[] = {2}, s3[] = {3};
    clt_tensor *x, *l, *l3, *lf, *loss = (clt_tensor *)1, *grad = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&x, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&l, clt_test_device(), CLT_INT32, 1, s2));
    ck_assert_ok(clt_zeros(&l3, clt_test_device(), CLT_INT32, 1, s3));
    ck_assert_ok(clt_zeros(&lf, clt_test_device(), CLT_FLOAT32, 1, s2));
    ck_assert_status(clt_softmax_cross_entropy(NULL, NULL, x, l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_softmax_cross_entropy(&loss, &grad, NULL, l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(loss);
    ck_assert_ptr_null(grad);
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, x, lf), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, x, l3), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3)") && strstr(clt_last_error(), "(3,)"), "%s", clt_last_error());
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, lf, l), CLT_ERR_SHAPE);
    clt_device other;
    if (clt_test_other_device(&other)) {
        clt_tensor *far;
        ck_assert_ok(clt_zeros(&far, other, CLT_INT32, 1, s2));
        ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, x, far), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(far);
    }
    clt_tensor_release(x);
    clt_tensor_release(l);
    clt_tensor_release(l3);
    clt_tensor_release(lf);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- Mean squared error ---- */

/* Mean of squared (and absolute) errors, each column's error times scale[c]
 * when scale is not NULL; grad = 2 (pred - target) / (rows * cols). */
static double ref_mse(const float *p, const float *t, int64_t rows, int64_t cols, const float *scale, double *mae,
                      float *grad)
{
    double sq = 0, ab = 0, n = (double)rows * (double)cols;
    for (int64_t i = 0; i < rows * cols; i++) {
        double d = (double)p[i] - (double)t[i], e = scale ? d * scale[i % cols] : d;
        sq += e * e;
        ab += fabs(e);
        if (grad) grad[i] = (float)(2.0 * d / n);
    }
    if (mae) *mae = ab / n;
    return sq / n;
}

/* clt_mse_loss (and clt_regression_errors with scale) on pred and target;
 * a 1-D target when flat_target and cols is 1. */
static void run_mse(const float *p, const float *t, int64_t rows, int64_t cols, int flat_target, const float *scale,
                    double *loss, double *mse, double *mae, float *grad)
{
    int64_t sp[] = {rows, cols}, st[] = {rows}, ss[] = {cols};
    clt_tensor *tp, *tt, *tl, *tg = NULL, *tm, *ta, *tsc = NULL;
    ck_assert_ok(clt_from_host(&tp, clt_test_device(), CLT_FLOAT32, 2, sp, p));
    if (flat_target) ck_assert_ok(clt_from_host(&tt, clt_test_device(), CLT_FLOAT32, 1, st, t));
    else ck_assert_ok(clt_from_host(&tt, clt_test_device(), CLT_FLOAT32, 2, sp, t));
    if (scale) ck_assert_ok(clt_from_host(&tsc, clt_test_device(), CLT_FLOAT32, 1, ss, scale));
    ck_assert_ok(clt_mse_loss(&tl, grad ? &tg : NULL, tp, tt));
    ck_assert_int_eq(clt_tensor_ndim(tl), 0);
    ck_assert_ok(clt_item(tl, loss));
    if (grad) {
        ck_assert_int_eq(clt_tensor_dim(tg, 0), rows);
        ck_assert_int_eq(clt_tensor_dim(tg, 1), cols);
        ck_assert_ok(clt_to_host(tg, grad, (size_t)(rows * cols) * sizeof *grad));
    }
    ck_assert_ok(clt_regression_errors(&tm, &ta, tp, tt, tsc));
    ck_assert_ok(clt_item(tm, mse));
    ck_assert_ok(clt_item(ta, mae));
    clt_tensor *tonly;
    double mae_only;
    ck_assert_ok(clt_regression_errors(NULL, &tonly, tp, tt, tsc));
    ck_assert_ok(clt_item(tonly, &mae_only));
    ck_assert(mae_only == *mae || (isnan(mae_only) && isnan(*mae)));
    clt_tensor_release(tonly);
    clt_tensor_release(tp);
    clt_tensor_release(tt);
    clt_tensor_release(tl);
    clt_tensor_release(tg);
    clt_tensor_release(tm);
    clt_tensor_release(ta);
    clt_tensor_release(tsc);
}

START_TEST(test_mse_matches_reference)
{
    static const int64_t shapes[][2] = {{1, 1}, {13, 1}, {37, 3}, {300, 10}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols;
        float *p = malloc((size_t)n * sizeof *p), *t = malloc((size_t)n * sizeof *t);
        float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
        float scale[10];
        clt_test_fill_uniform(p, n, 11 + (uint64_t)k, -3, 3);
        clt_test_fill_uniform(t, n, 21 + (uint64_t)k, -3, 3);
        clt_test_fill_uniform(scale, cols, 31 + (uint64_t)k, 0.1f, 5);
        for (int with_scale = 0; with_scale < 2; with_scale++) {
            double ref_mae, ref_scaled_mae, loss, mse, mae;
            double ref = ref_mse(p, t, rows, cols, NULL, &ref_mae, want);
            double ref_scaled = ref_mse(p, t, rows, cols, scale, &ref_scaled_mae, NULL);
            run_mse(p, t, rows, cols, cols == 1 && (k & 1), with_scale ? scale : NULL, &loss, &mse, &mae, got);
            ck_assert_msg(fabs(loss - ref) < 1e-5 * fmax(1, ref), "mse (%lld, %lld): %.9g, expected %.9g",
                          (long long)rows, (long long)cols, loss, ref);
            ck_assert_double_lt(clt_test_max_rel_err(got, want, n), 1e-6);
            double want_mse = with_scale ? ref_scaled : ref, want_mae = with_scale ? ref_scaled_mae : ref_mae;
            ck_assert_msg(fabs(mse - want_mse) < 1e-5 * fmax(1, want_mse), "errors mse %.9g, expected %.9g", mse,
                          want_mse);
            ck_assert_msg(fabs(mae - want_mae) < 1e-5 * fmax(1, want_mae), "mae %.9g, expected %.9g", mae, want_mae);
        }
        free(p);
        free(t);
        free(want);
        free(got);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The gradient is the loss's: central differences of the double reference. */
START_TEST(test_mse_gradient_matches_finite_differences)
{
    enum { B = 4, K = 3 };
    float p[B * K], t[B * K], got[B * K];
    clt_test_fill_uniform(p, B * K, 5, -2, 2);
    clt_test_fill_uniform(t, B * K, 6, -2, 2);
    double loss, mse, mae;
    run_mse(p, t, B, K, 0, NULL, &loss, &mse, &mae, got);
    ck_assert(mse == loss);
    for (int i = 0; i < B * K; i++) {
        float saved = p[i], hi = saved + 1e-2f, lo = saved - 1e-2f;
        p[i] = hi;
        double up = ref_mse(p, t, B, K, NULL, NULL, NULL);
        p[i] = lo;
        double down = ref_mse(p, t, B, K, NULL, NULL, NULL);
        p[i] = saved;
        double fd = (up - down) / ((double)hi - (double)lo);
        ck_assert_msg(fabs(got[i] - fd) < 1e-5, "dpred[%d] = %g, finite difference %g", i, (double)got[i], fd);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A NaN prediction makes the loss NaN (no silent skip); a perfect one is 0. */
START_TEST(test_mse_nan_and_zero)
{
    float p[3] = {1, 2, 3}, t[3] = {1, 2, 3}, g[3];
    double loss, mse, mae;
    run_mse(p, t, 3, 1, 1, NULL, &loss, &mse, &mae, g);
    ck_assert(loss == 0 && mse == 0 && mae == 0);
    for (int i = 0; i < 3; i++) ck_assert(g[i] == 0);
    p[1] = NAN;
    run_mse(p, t, 3, 1, 0, NULL, &loss, &mse, &mae, g);
    ck_assert(isnan(loss) && isnan(mae));
    ck_assert(g[0] == 0 && isnan(g[1]));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_mse_errors)
{
    int64_t s23[] = {2, 3}, s32[] = {3, 2}, s2[] = {2}, s21[] = {2, 1}, s3[] = {3};
    clt_tensor *p, *t32, *ti, *col, *flat, *sc2, *sc3, *loss = (clt_tensor *)1, *grad = (clt_tensor *)1;
    clt_tensor *mae = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&p, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&t32, clt_test_device(), CLT_FLOAT32, 2, s32));
    ck_assert_ok(clt_zeros(&ti, clt_test_device(), CLT_INT32, 2, s23));
    ck_assert_ok(clt_zeros(&col, clt_test_device(), CLT_FLOAT32, 2, s21));
    ck_assert_ok(clt_zeros(&flat, clt_test_device(), CLT_FLOAT32, 1, s2));
    ck_assert_ok(clt_zeros(&sc2, clt_test_device(), CLT_FLOAT32, 1, s2));
    ck_assert_ok(clt_zeros(&sc3, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_status(clt_mse_loss(NULL, NULL, p, p), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_mse_loss(&loss, &grad, NULL, p), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(loss);
    ck_assert_ptr_null(grad);
    ck_assert_status(clt_mse_loss(&loss, NULL, p, ti), CLT_ERR_UNSUPPORTED);
    /* equal element counts are not enough */
    ck_assert_status(clt_mse_loss(&loss, NULL, p, t32), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3)") && strstr(clt_last_error(), "(3, 2)"), "%s", clt_last_error());
    /* a 1-D target only for one column */
    ck_assert_status(clt_mse_loss(&loss, NULL, p, flat), CLT_ERR_SHAPE);
    ck_assert_ok(clt_mse_loss(&loss, NULL, col, flat));
    clt_tensor_release(loss);
    ck_assert_status(clt_regression_errors(NULL, NULL, p, p, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_regression_errors(NULL, &mae, p, p, sc2), CLT_ERR_SHAPE);
    ck_assert_ptr_null(mae);
    ck_assert_msg(strstr(clt_last_error(), "3 columns"), "%s", clt_last_error());
    ck_assert_ok(clt_regression_errors(NULL, &mae, p, p, sc3));
    clt_tensor_release(mae);
    clt_tensor *pp[] = {p, t32, ti, col, flat, sc2, sc3};
    for (size_t i = 0; i < sizeof pp / sizeof pp[0]; i++) clt_tensor_release(pp[i]);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_mse_empty_batch)
{
    int64_t s[] = {0, 2};
    clt_tensor *p, *loss, *grad;
    ck_assert_ok(clt_empty(&p, clt_test_device(), CLT_FLOAT32, 2, s));
    ck_assert_ok(clt_mse_loss(&loss, &grad, p, p));
    double v;
    ck_assert_ok(clt_item(loss, &v));
    ck_assert(isnan(v)); /* as PyTorch: the mean over no elements */
    ck_assert_int_eq(clt_tensor_numel(grad), 0);
    clt_tensor_release(p);
    clt_tensor_release(loss);
    clt_tensor_release(grad);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = clt_test_tcase("softmax_cross_entropy");
    tcase_add_test(tc, test_matches_reference);
    tcase_add_test(tc, test_gpu_class_one_launch);
    tcase_add_test(tc, test_cpu_class_one_launch);
    tcase_add_test(tc, test_loss_sum_in_the_launch);
    tcase_add_test(tc, test_gradient_matches_finite_differences);
    tcase_add_test(tc, test_huge_logits_stay_finite);
    tcase_add_test(tc, test_bad_label_gives_nan);
    tcase_add_test(tc, test_empty_batch);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    TCase *mse = clt_test_tcase("mse");
    tcase_add_test(mse, test_mse_matches_reference);
    tcase_add_test(mse, test_mse_gradient_matches_finite_differences);
    tcase_add_test(mse, test_mse_nan_and_zero);
    tcase_add_test(mse, test_mse_errors);
    tcase_add_test(mse, test_mse_empty_batch);
    suite_add_tcase(s, mse);
    return clt_test_run(s);
}
