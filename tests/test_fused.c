/* clt_linear_relu_forward (bias and ReLU in the GEMM's store on CPU
 * devices, a ReLU pass after CLBlast elsewhere) against a C reference on
 * awkward sizes, with and without bias, NaN passing through as in clt_relu;
 * and its errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TOL 1e-4

static const char *const impls[] = {"cpu", "clblast"};

static clt_device dev(void) { return clt_try_gpu(0); }

static void check_linear_relu(const char *impl, int64_t B, int64_t C, int64_t OC, int with_bias, int nan_row)
{
    ck_assert_int_eq(setenv("CLT_DENSE", impl, 1), 0);
    float *x = malloc((size_t)(B * C) * sizeof *x), *w = malloc((size_t)(OC * C) * sizeof *w);
    float *bias = malloc((size_t)OC * sizeof *bias), *want = malloc((size_t)(B * OC) * sizeof *want);
    clt_test_fill_uniform(x, B * C, 11 + (uint64_t)B, -1, 1);
    clt_test_fill_uniform(w, OC * C, 13 + (uint64_t)C, -1, 1);
    clt_test_fill_uniform(bias, OC, 17 + (uint64_t)OC, -1, 1);
    if (nan_row) x[(B - 1) * C] = NAN; /* the last row of y is NaN */
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < OC; j++) {
            double s = with_bias ? bias[j] : 0.0;
            for (int64_t p = 0; p < C; p++) s += (double)x[i * C + p] * (double)w[j * C + p];
            want[i * OC + j] = s < 0 ? 0.0f : (float)s;
        }
    int64_t xs[] = {B, C}, ws[] = {OC, C}, bs[] = {OC};
    clt_tensor *tx, *tw, *tb, *ty;
    ck_assert_ok(clt_from_host(&tx, dev(), CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&tw, dev(), CLT_FLOAT32, 2, ws, w));
    ck_assert_ok(clt_from_host(&tb, dev(), CLT_FLOAT32, 1, bs, bias));
    ck_assert_ok(clt_linear_relu_forward(&ty, tx, tw, with_bias ? tb : NULL));
    ck_assert_int_eq(clt_tensor_ndim(ty), 2);
    ck_assert_int_eq(clt_tensor_dim(ty, 0), B);
    ck_assert_int_eq(clt_tensor_dim(ty, 1), OC);
    float *got = clt_test_read(ty);
    int64_t rows = nan_row ? B - 1 : B;
    double err = clt_test_max_rel_err(got, want, rows * OC);
    ck_assert_msg(err < TOL, "%s %lldx%lld->%lld bias %d: max rel err %g", impl, (long long)B, (long long)C,
                  (long long)OC, with_bias, err);
    for (int64_t j = 0; nan_row && j < OC; j++)
        ck_assert_msg(isnan(got[(B - 1) * OC + j]), "%s: NaN became %g", impl, got[(B - 1) * OC + j]);
    free(got);
    free(x);
    free(w);
    free(bias);
    free(want);
    clt_tensor_release(tx);
    clt_tensor_release(tw);
    clt_tensor_release(tb);
    clt_tensor_release(ty);
    unsetenv("CLT_DENSE");
}

START_TEST(test_linear_relu_sizes)
{
    const int64_t sizes[][3] = {{1, 1, 1}, {1, 7, 13}, {13, 17, 19}, {37, 131, 61}, {97, 64, 16}, {12, 3, 16}};
    for (int i = 0; i < 2; i++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int bias = 0; bias < 2; bias++)
                check_linear_relu(impls[i], sizes[s][0], sizes[s][1], sizes[s][2], bias, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_linear_relu_nan_passes)
{
    for (int i = 0; i < 2; i++) {
        check_linear_relu(impls[i], 5, 9, 16, 1, 1);
        check_linear_relu(impls[i], 14, 9, 21, 1, 1);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_linear_relu_errors)
{
    int64_t xs[] = {4, 5}, ws[] = {3, 6}, bs[] = {4};
    clt_tensor *x, *w, *b, *y = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&x, dev(), CLT_FLOAT32, 2, xs));
    ck_assert_ok(clt_zeros(&w, dev(), CLT_FLOAT32, 2, ws));
    ck_assert_ok(clt_zeros(&b, dev(), CLT_FLOAT32, 1, bs));
    ck_assert_status(clt_linear_relu_forward(&y, x, w, NULL), CLT_ERR_SHAPE);
    ck_assert_ptr_null(y);
    ck_assert(strstr(clt_last_error(), "clt_linear_relu_forward") != NULL);
    ck_assert_status(clt_linear_relu_forward(&y, x, NULL, b), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_linear_relu_forward(NULL, x, w, b), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(x);
    clt_tensor_release(w);
    clt_tensor_release(b);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_linear_relu_sizes);
    tcase_add_test(tc, test_linear_relu_nan_passes);
    tcase_add_test(tc, test_linear_relu_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
