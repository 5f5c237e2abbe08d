/* Fused softmax cross-entropy against a double-precision C reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static clt_device dev(void) { return clt_try_gpu(0); }

/* Some device other than dev(), when there is one. */
static int other_device(clt_device *out)
{
    for (int i = 0; i < clt_device_list_count(); i++) {
        ck_assert_ok(clt_device_list_entry(i, out));
        if (!clt_device_equal(*out, dev())) return 1;
    }
    return 0;
}

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
        ck_assert_ok(clt_from_host(&base, dev(), CLT_FLOAT32, 2, sx, buf));
        ck_assert_ok(clt_narrow(&tx, base, 1, rows));
    } else {
        sx[0] = rows;
        ck_assert_ok(clt_from_host(&base, dev(), CLT_FLOAT32, 2, sx, x));
        tx = clt_tensor_retain(base);
    }
    free(buf);
    ck_assert_ok(clt_from_host(&tl, dev(), CLT_INT32, 1, sl, labels));
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
    ck_assert_ok(clt_empty(&x, dev(), CLT_FLOAT32, 2, sx));
    ck_assert_ok(clt_empty(&l, dev(), CLT_INT32, 1, sl));
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
    ck_assert_ok(clt_zeros(&x, dev(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&l, dev(), CLT_INT32, 1, s2));
    ck_assert_ok(clt_zeros(&l3, dev(), CLT_INT32, 1, s3));
    ck_assert_ok(clt_zeros(&lf, dev(), CLT_FLOAT32, 1, s2));
    ck_assert_status(clt_softmax_cross_entropy(NULL, NULL, x, l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_softmax_cross_entropy(&loss, &grad, NULL, l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(loss);
    ck_assert_ptr_null(grad);
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, x, lf), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, x, l3), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3)") && strstr(clt_last_error(), "(3,)"), "%s", clt_last_error());
    ck_assert_status(clt_softmax_cross_entropy(&loss, NULL, lf, l), CLT_ERR_SHAPE);
    clt_device other;
    if (other_device(&other)) {
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

int main(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = clt_test_tcase("softmax_cross_entropy");
    tcase_add_test(tc, test_matches_reference);
    tcase_add_test(tc, test_gradient_matches_finite_differences);
    tcase_add_test(tc, test_huge_logits_stay_finite);
    tcase_add_test(tc, test_bad_label_gives_nan);
    tcase_add_test(tc, test_empty_batch);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
