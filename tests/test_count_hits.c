/* Evaluation's correct predictions (clt__count_hits_, src/ops/loss.c)
 * against plain C and against clt_argmax_rows, clt_count_equal and clt_add_,
 * bit for bit: ties (the first largest wins), NaN (counts as largest),
 * infinities, views, on both device classes and on either side of the
 * one-launch limit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "ops/loss.h"
#include "ops/ops_internal.h"
#include "support.h"

/* The first index of the row's largest value, NaN counting as largest. */
static int32_t ref_argmax(const float *row, int64_t cols)
{
    int32_t at = 0;
    for (int64_t c = 1; c < cols && !isnan(row[at]); c++)
        if (row[c] > row[at] || isnan(row[c])) at = (int32_t)c;
    return at;
}

/* Rows 0-5 of x (rows, cols) made hard: ties, NaN late, NaN first, all NaN,
 * all -inf, +inf then NaN. */
static void hard_rows(float *x, int64_t rows, int64_t cols)
{
    float nan = NAN, inf = INFINITY;
    for (int64_t r = 0; r < rows && r < 6 && cols >= 4; r++) {
        float *row = x + r * cols;
        if (r == 0) row[1] = row[3] = 9.0f;
        if (r == 1) row[2] = nan;
        if (r == 2) row[0] = nan;
        for (int64_t c = 0; c < cols; c++) {
            if (r == 3) row[c] = nan;
            if (r == 4) row[c] = -inf;
        }
        if (r == 5) {
            row[1] = inf;
            row[3] = nan;
        }
    }
}

/* A (rows, cols) view (ndim 2) or (rows) view (ndim 1, cols 1) of 4-byte items at row 2 of a tensor
 * with two more rows on each side. */
static clt_tensor *view_of(const void *data, clt_dtype dtype, int ndim, int64_t rows, int64_t cols,
                           clt_tensor **base)
{
    size_t item = 4, row = (size_t)cols * item;
    char *buf = calloc((size_t)(rows + 4) * row, 1);
    memcpy(buf + 2 * row, data, (size_t)rows * row);
    int64_t shape[] = {rows + 4, cols};
    ck_assert_ok(clt_from_host(base, clt_test_device(), dtype, ndim, shape, buf));
    free(buf);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, 2, rows));
    return v;
}

static float read_scalar(const clt_tensor *t)
{
    float v;
    ck_assert_ok(clt_to_host(t, &v, sizeof v));
    return v;
}

static void check_counts(const char *cls, int64_t rows, int64_t cols, int wide)
{
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    int32_t *labels = malloc((size_t)rows * sizeof *labels);
    clt_test_fill_uniform(x, rows * cols, 70 + (uint64_t)(rows * cols), -4, 4);
    hard_rows(x, rows, cols);
    int64_t want = 0;
    for (int64_t r = 0; r < rows; r++) {
        int32_t best = ref_argmax(x + r * cols, cols);
        /* every third row wrong; row 0 names its second tie */
        labels[r] = r == 0 && cols >= 4 ? 3 : r % 3 == 1 ? (best + 1) % (int32_t)cols : best;
        want += labels[r] == best;
    }
    setenv("CLT_DEVICE_CLASS", cls, 1);
    clt_tensor *xb, *lb, *tx = view_of(x, CLT_FLOAT32, 2, rows, cols, &xb);
    clt_tensor *tl = view_of(labels, CLT_INT32, 1, rows, 1, &lb), *pred, *hits, *sum_a, *sum_b;
    ck_assert_ok(clt_full(&sum_a, clt_test_device(), CLT_FLOAT32, 0, NULL, 3.0));
    ck_assert_ok(clt_full(&sum_b, clt_test_device(), CLT_FLOAT32, 0, NULL, 3.0));
    ck_assert_ok(clt_argmax_rows(&pred, tx));
    ck_assert_ok(clt_count_equal(&hits, pred, tl));
    ck_assert_ok(clt_add_(sum_a, hits));
    ck_assert_ok(clt__count_hits_(sum_b, tx, tl)); /* built before counting */
    ck_assert_ok(clt_fill_(sum_b, 3.0));
    clt_test_kernels_start();
    ck_assert_ok(clt__count_hits_(sum_b, tx, tl));
    uint64_t launches = clt_test_kernels_stop();
    unsetenv("CLT_DEVICE_CLASS");
    uint64_t expect = wide && rows <= 256 ? 1 : 4;
    ck_assert_msg(launches == expect, "%s class, (%lld, %lld): %llu launches, expected %llu", cls, (long long)rows,
                  (long long)cols, (unsigned long long)launches, (unsigned long long)expect);
    float a = read_scalar(sum_a), b = read_scalar(sum_b);
    ck_assert_msg(a == (float)(3 + want) && memcmp(&a, &b, sizeof a) == 0,
                  "%s class, (%lld, %lld): %a in one op, %a in three, %lld hits expected", cls, (long long)rows,
                  (long long)cols, (double)b, (double)a, (long long)want);
    clt_tensor *ts[] = {xb, lb, tx, tl, pred, hits, sum_a, sum_b};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) clt_tensor_release(ts[k]);
    free(x);
    free(labels);
}

START_TEST(test_matches_reference_and_three_ops)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    int wide = clt__slot_get(slot)->max_work_group >= CLT__XENT_WG_ROWS;
    static const int64_t rows_of[] = {1, 6, 37, 256, 257, 1000};
    static const int64_t cols_of[] = {1, 4, 10};
    static const char *const classes[] = {"cpu", "gpu"};
    for (size_t i = 0; i < sizeof rows_of / sizeof rows_of[0]; i++)
        for (size_t j = 0; j < sizeof cols_of / sizeof cols_of[0]; j++)
            for (int c = 0; c < 2; c++) check_counts(classes[c], rows_of[i], cols_of[j], wide);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The work-group count_hits_f32 is compiled for is the one src/ops/loss.c launches. */
START_TEST(test_work_group)
{
    int slot;
    cl_kernel k;
    size_t wg[3] = {0};
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    ck_assert_ok(clt__kernel(slot, "reduce", "count_hits_f32", &k));
    ck_assert_int_eq(clGetKernelWorkGroupInfo(k, clt__slot_get(slot)->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                              sizeof wg, wg, NULL), CL_SUCCESS);
    ck_assert_int_eq(wg[0], CLT__XENT_WG_ROWS);
}
END_TEST

START_TEST(test_errors)
{
    int64_t s2[] = {4, 3}, s1[] = {4}, s5[] = {5};
    clt_tensor *x, *xi, *lab, *lab5, *sum;
    ck_assert_ok(clt_zeros(&x, clt_test_device(), CLT_FLOAT32, 2, s2));
    ck_assert_ok(clt_zeros(&xi, clt_test_device(), CLT_INT32, 2, s2));
    ck_assert_ok(clt_zeros(&lab, clt_test_device(), CLT_INT32, 1, s1));
    ck_assert_ok(clt_zeros(&lab5, clt_test_device(), CLT_INT32, 1, s5));
    ck_assert_ok(clt_zeros(&sum, clt_test_device(), CLT_FLOAT32, 0, NULL));
    ck_assert_status(clt__count_hits_(sum, xi, lab), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt__count_hits_(sum, x, lab5), CLT_ERR_SHAPE);
    ck_assert_status(clt__count_hits_(sum, x, x), CLT_ERR_UNSUPPORTED);
    ck_assert_ok(clt__count_hits_(sum, x, lab)); /* every row's argmax is 0, every label 0 */
    ck_assert(read_scalar(sum) == 4.0f);
    clt_tensor *ts[] = {x, xi, lab, lab5, sum};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) clt_tensor_release(ts[k]);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("count_hits");
    TCase *tc = clt_test_tcase("count_hits");
    tcase_add_test(tc, test_matches_reference_and_three_ops);
    tcase_add_test(tc, test_work_group);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
