/* Reductions against plain C with double accumulation: sizes 1, primes,
 * non-multiples of the partial count, large; views; empty tensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static float *random_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    clt_test_fill_uniform(x, n, seed, -1, 1);
    return x;
}

/* (rows, cols) view at row 2 of a tensor with two padding rows on each side. */
static clt_tensor *view_of(const float *x, int64_t rows, int64_t cols, clt_tensor **base)
{
    int64_t total = (rows + 4) * cols;
    float *buf = malloc((size_t)(total ? total : 1) * sizeof *buf);
    for (int64_t i = 0; i < total; i++) buf[i] = 1000.0f;
    if (rows * cols > 0) memcpy(buf + 2 * cols, x, (size_t)(rows * cols) * sizeof *x);
    int64_t shape[] = {rows + 4, cols};
    ck_assert_ok(clt_from_host(base, clt_test_device(), CLT_FLOAT32, 2, shape, buf));
    free(buf);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, 2, rows));
    return v;
}

static double item(const clt_tensor *t)
{
    double v;
    ck_assert_int_eq(clt_tensor_numel(t), 1);
    ck_assert_ok(clt_item(t, &v));
    return v;
}

START_TEST(test_sum_mean)
{
    static const int64_t sizes[] = {1, 2, 7, 13, 257, 4095, 4097, 100003, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *x = random_floats(n, 1 + (uint64_t)n);
        double want = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; i++) {
            want += x[i];
            abs_sum += fabs(x[i]);
        }
        clt_tensor *base, *tx = view_of(x, n, 1, &base), *ts, *tm;
        ck_assert_ok(clt_sum(&ts, tx));
        ck_assert_ok(clt_mean(&tm, tx));
        ck_assert_int_eq(clt_tensor_ndim(ts), 0);
        /* float32 accumulation: error bounded relative to the sum of magnitudes */
        double tol = 1e-5 * (abs_sum + 1);
        ck_assert_msg(fabs(item(ts) - want) < tol, "sum of %lld: %.9g, expected %.9g", (long long)n, item(ts), want);
        ck_assert_msg(fabs(item(tm) - want / n) < tol / n, "mean of %lld: %.9g, expected %.9g", (long long)n,
                      item(tm), want / n);
        free(x);
        clt_tensor_release(tx);
        clt_tensor_release(base);
        clt_tensor_release(ts);
        clt_tensor_release(tm);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_sum_empty)
{
    int64_t shape[] = {0, 3};
    clt_tensor *x, *s, *m;
    ck_assert_ok(clt_empty(&x, clt_test_device(), CLT_FLOAT32, 2, shape));
    ck_assert_ok(clt_sum(&s, x));
    ck_assert_ok(clt_mean(&m, x));
    ck_assert(item(s) == 0.0);
    ck_assert(isnan(item(m))); /* as PyTorch: the mean of nothing is NaN */
    clt_tensor_release(x);
    clt_tensor_release(s);
    clt_tensor_release(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_sum_rows)
{
    static const int64_t shapes[][2] = {{1, 1}, {13, 7}, {257, 3}, {2, 1000}, {0, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = random_floats(rows * cols, 10 + (uint64_t)s);
        float *want = malloc((size_t)cols * sizeof *want);
        for (int64_t c = 0; c < cols; c++) {
            double acc = 0;
            for (int64_t r = 0; r < rows; r++) acc += x[r * cols + c];
            want[c] = (float)acc;
        }
        clt_tensor *base, *tx = view_of(x, rows, cols, &base), *ty;
        ck_assert_ok(clt_sum_rows(&ty, tx));
        ck_assert_int_eq(clt_tensor_ndim(ty), 1);
        ck_assert_int_eq(clt_tensor_dim(ty, 0), cols);
        float *got = clt_test_read(ty);
        ck_assert_msg(clt_test_max_rel_err(got, want, cols) < 1e-5, "sum_rows (%lld, %lld)", (long long)rows,
                      (long long)cols);
        free(got);
        free(x);
        free(want);
        clt_tensor_release(tx);
        clt_tensor_release(base);
        clt_tensor_release(ty);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_argmax_rows)
{
    static const int64_t shapes[][2] = {{1, 1}, {13, 7}, {257, 3}, {3, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = random_floats(rows * cols, 20 + (uint64_t)s);
        /* ties: row 0 has its maximum twice; the first one wins */
        if (cols >= 3) x[1] = x[2] = 5.0f;
        clt_tensor *base, *tx = view_of(x, rows, cols, &base), *ty;
        ck_assert_ok(clt_argmax_rows(&ty, tx));
        ck_assert_int_eq(clt_tensor_dtype(ty), CLT_INT32);
        int32_t *got = malloc((size_t)rows * sizeof *got);
        ck_assert_ok(clt_to_host(ty, got, (size_t)rows * sizeof *got));
        for (int64_t r = 0; r < rows; r++) {
            int64_t best = 0;
            for (int64_t c = 1; c < cols; c++)
                if (x[r * cols + c] > x[r * cols + best]) best = c;
            ck_assert_int_eq(got[r], best);
        }
        free(got);
        free(x);
        clt_tensor_release(tx);
        clt_tensor_release(base);
        clt_tensor_release(ty);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_count_equal)
{
    static const int64_t sizes[] = {1, 13, 4097, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int32_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        float *r = random_floats(2 * n, 30 + (uint64_t)n);
        int64_t want = 0;
        for (int64_t i = 0; i < n; i++) {
            a[i] = (int32_t)(r[i] * 3);
            b[i] = (int32_t)(r[n + i] * 3);
            want += a[i] == b[i];
        }
        int64_t shape[] = {n};
        clt_tensor *ta, *tb, *tc;
        ck_assert_ok(clt_from_host(&ta, clt_test_device(), CLT_INT32, 1, shape, a));
        ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_INT32, 1, shape, b));
        ck_assert_ok(clt_count_equal(&tc, ta, tb));
        ck_assert_int_eq(clt_tensor_dtype(tc), CLT_FLOAT32);
        ck_assert(item(tc) == (double)want);
        free(a);
        free(b);
        free(r);
        clt_tensor_release(ta);
        clt_tensor_release(tb);
        clt_tensor_release(tc);
    }
    int64_t zero[] = {0};
    clt_tensor *ta, *tc;
    ck_assert_ok(clt_empty(&ta, clt_test_device(), CLT_INT32, 1, zero));
    ck_assert_ok(clt_count_equal(&tc, ta, ta));
    ck_assert(item(tc) == 0.0);
    clt_tensor_release(ta);
    clt_tensor_release(tc);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors)
{
    int64_t s3[] = {3}, s23[] = {2, 3}, s20[] = {2, 0}, s4[] = {4};
    clt_tensor *f1, *f2, *i1, *i4, *e, *out = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&f1, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_ok(clt_zeros(&f2, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&i1, clt_test_device(), CLT_INT32, 1, s3));
    ck_assert_ok(clt_zeros(&i4, clt_test_device(), CLT_INT32, 1, s4));
    ck_assert_ok(clt_empty(&e, clt_test_device(), CLT_FLOAT32, 2, s20));
    ck_assert_status(clt_sum(NULL, f1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_sum(&out, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    ck_assert_status(clt_mean(&out, i1), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_sum_rows(&out, f1), CLT_ERR_SHAPE);
    ck_assert_status(clt_argmax_rows(&out, f1), CLT_ERR_SHAPE);
    ck_assert_status(clt_argmax_rows(&out, e), CLT_ERR_SHAPE);
    ck_assert_status(clt_argmax_rows(&out, i1), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_count_equal(&out, f1, i1), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_count_equal(&out, i1, i4), CLT_ERR_SHAPE);
    clt_device other;
    if (clt_test_other_device(&other)) {
        clt_tensor *far;
        ck_assert_ok(clt_zeros(&far, other, CLT_INT32, 1, s3));
        ck_assert_status(clt_count_equal(&out, i1, far), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(far);
    }
    clt_tensor *all[] = {f1, f2, i1, i4, e};
    for (int i = 0; i < 5; i++) clt_tensor_release(all[i]);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = clt_test_tcase("reduce");
    tcase_add_test(tc, test_sum_mean);
    tcase_add_test(tc, test_sum_empty);
    tcase_add_test(tc, test_sum_rows);
    tcase_add_test(tc, test_argmax_rows);
    tcase_add_test(tc, test_count_equal);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
