/* Dense ops against a plain C reference with double accumulation: GEMM in
 * every transpose combination on views, matmul, linear forward/backward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TOL 1e-4

/* The device under test: gpu:0 when CLT_CPU_AS_GPU presents one, else cpu:0. */
static void check_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k)
{
    float *a = clt_test_random_floats(m * k, 1 + (uint64_t)m), *b = clt_test_random_floats(k * n, 2 + (uint64_t)n);
    float *c = clt_test_random_floats(m * n, 3 + (uint64_t)k);
    clt_tensor *ab, *bb, *cb;
    clt_tensor *ta_ = clt_test_upload_view(clt_test_device(), a, ta ? k : m, ta ? m : k, 2, 9.0f, &ab);
    clt_tensor *tb_ = clt_test_upload_view(clt_test_device(), b, tb ? n : k, tb ? k : n, 1, 9.0f, &bb);
    clt_tensor *tc = clt_test_upload_view(clt_test_device(), c, m, n, 3, 7.0f, &cb);
    ck_assert_ok(clt_gemm_(ta, tb, 0.75f, ta_, tb_, 0.5f, tc));
    clt_test_ref_gemm(ta, tb, m, n, k, 0.75f, a, b, 0.5f, c);
    float *got = clt_test_read(tc);
    double err = clt_test_max_rel_err(got, c, m * n);
    ck_assert_msg(err < TOL, "gemm ta=%d tb=%d m=%lld n=%lld k=%lld: error %g", ta, tb, (long long)m, (long long)n,
                  (long long)k, err);
    /* The rows around the view are untouched. */
    float *all = clt_test_read(cb);
    for (int64_t i = 0; i < 3 * n; i++) ck_assert_float_eq(all[i], 7.0f);
    for (int64_t i = (m + 3) * n; i < (m + 6) * n; i++) ck_assert_float_eq(all[i], 7.0f);
    free(all);
    free(got);
    free(a);
    free(b);
    free(c);
    clt_tensor_release(ta_);
    clt_tensor_release(tb_);
    clt_tensor_release(tc);
    clt_tensor_release(ab);
    clt_tensor_release(bb);
    clt_tensor_release(cb);
}

START_TEST(test_gemm_transposes)
{
    /* The last size is large enough for CLBlast's indirect (padded) path.
     * On a simulator, where CLBlast does not run (scripts/oclgrind's device
     * is a CPU), it is smaller with the same partial tiles. */
    int64_t sizes[][3] = {{1, 1, 1}, {7, 13, 257}, {65, 3, 67}, {13, 70, 1}, {515, 263, 513}};
    if (clt_test_simulated()) memcpy(sizes[4], (int64_t[3]){131, 67, 129}, sizeof sizes[4]);
    for (int t = 0; t < 4; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            check_gemm(t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2]);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* beta = 0 ignores c, even NaN in it (BLAS semantics). */
static void check_beta_zero(int64_t M, int64_t N, int64_t K)
{
    float *a = clt_test_random_floats(M * K, 11), *b = clt_test_random_floats(K * N, 12), *c = malloc((size_t)(M * N) * sizeof *c);
    for (int64_t i = 0; i < M * N; i++) c[i] = NAN;
    clt_tensor *ta = clt_test_upload(clt_test_device(), a, M, K), *tb = clt_test_upload(clt_test_device(), b, K, N), *tc = clt_test_upload(clt_test_device(), c, M, N);
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, ta, tb, 0.0f, tc));
    clt_test_ref_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, c);
    float *got = clt_test_read(tc);
    ck_assert_double_lt(clt_test_max_rel_err(got, c, M * N), TOL);
    free(got);
    free(a);
    free(b);
    free(c);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tc);
}

START_TEST(test_gemm_beta_zero_ignores_nan)
{
    check_beta_zero(5, 3, 4);
    if (clt_test_simulated())
        check_beta_zero(131, 67, 129); /* the smaller large size, as in test_gemm_transposes */
    else
        check_beta_zero(515, 263, 513);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* K = 0 makes c = beta c; M = 0 or N = 0 does nothing. */
START_TEST(test_gemm_empty)
{
    float c[6] = {1, 2, 3, 4, 5, 6};
    clt_tensor *a, *b, *tc = clt_test_upload(clt_test_device(), c, 2, 3);
    int64_t sa[] = {2, 0}, sb[] = {0, 3};
    ck_assert_ok(clt_empty(&a, clt_test_device(), CLT_FLOAT32, 2, sa));
    ck_assert_ok(clt_empty(&b, clt_test_device(), CLT_FLOAT32, 2, sb));
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, a, b, 0.5f, tc));
    float *got = clt_test_read(tc);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(got[i], 0.5f * c[i]);
    free(got);
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, a, b, 0.0f, tc));
    got = clt_test_read(tc);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(got[i], 0.0f);
    free(got);
    clt_tensor *ct, *m0;
    int64_t st[] = {3, 2};
    ck_assert_ok(clt_zeros(&ct, clt_test_device(), CLT_FLOAT32, 2, st));
    ck_assert_ok(clt_matmul(&m0, b, ct));
    ck_assert_int_eq(clt_tensor_dim(m0, 0), 0);
    ck_assert_int_eq(clt_tensor_dim(m0, 1), 2);
    clt_tensor_release(m0);
    clt_tensor_release(ct);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(tc);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_matmul)
{
    enum { M = 13, K = 7, N = 66 };
    float *a = clt_test_random_floats(M * K, 21), *b = clt_test_random_floats(K * N, 22), c[M * N];
    clt_tensor *ta = clt_test_upload(clt_test_device(), a, M, K), *tb = clt_test_upload(clt_test_device(), b, K, N), *tc;
    ck_assert_ok(clt_matmul(&tc, ta, tb));
    ck_assert_int_eq(clt_tensor_dim(tc, 0), M);
    ck_assert_int_eq(clt_tensor_dim(tc, 1), N);
    clt_test_ref_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, c);
    float *got = clt_test_read(tc);
    ck_assert_double_lt(clt_test_max_rel_err(got, c, M * N), TOL);
    free(got);
    free(a);
    free(b);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tc);
    clt_test_assert_no_live_tensors();
}
END_TEST

static void check_linear(int64_t B, int64_t C, int64_t OC, int with_bias)
{
    float *x = clt_test_random_floats(B * C, 31 + (uint64_t)B), *w = clt_test_random_floats(OC * C, 32 + (uint64_t)C);
    float *bias = clt_test_random_floats(OC, 33), *dy = clt_test_random_floats(B * OC, 34 + (uint64_t)OC);
    float *dw0 = clt_test_random_floats(OC * C, 35), *db0 = clt_test_random_floats(OC, 36);
    clt_tensor *xb, *tx = clt_test_upload_view(clt_test_device(), x, B, C, 1, 5.0f, &xb), *tw = clt_test_upload(clt_test_device(), w, OC, C), *tdy = clt_test_upload(clt_test_device(), dy, B, OC);
    clt_tensor *tdw = clt_test_upload(clt_test_device(), dw0, OC, C), *tb = NULL, *tdb = NULL;
    int64_t sb[] = {OC};
    if (with_bias) {
        ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_FLOAT32, 1, sb, bias));
        ck_assert_ok(clt_from_host(&tdb, clt_test_device(), CLT_FLOAT32, 1, sb, db0));
    }
    clt_tensor *ty, *tdx;
    ck_assert_ok(clt_linear_forward(&ty, tx, tw, tb));
    ck_assert_ok(clt_linear_backward_(&tdx, tdw, tdb, tdy, tx, tw));

    /* y = x w^T + b */
    float *y = malloc((size_t)(B * OC) * sizeof *y);
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < OC; j++) y[i * OC + j] = with_bias ? bias[j] : 0.0f;
    clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, with_bias ? 1.0f : 0.0f, y);
    /* dw += dy^T x, db += sum_rows(dy), dx = dy w */
    clt_test_ref_gemm(1, 0, OC, C, B, 1.0f, dy, x, 1.0f, dw0);
    for (int64_t j = 0; j < OC; j++) {
        double s = db0[j];
        for (int64_t i = 0; i < B; i++) s += dy[i * OC + j];
        db0[j] = (float)s;
    }
    float *dx = malloc((size_t)(B * C) * sizeof *dx);
    clt_test_ref_gemm(0, 0, B, C, OC, 1.0f, dy, w, 0.0f, dx);

    float *got = clt_test_read(ty);
    ck_assert_msg(clt_test_max_rel_err(got, y, B * OC) < TOL, "linear forward %lld %lld %lld", (long long)B,
                  (long long)C, (long long)OC);
    free(got);
    got = clt_test_read(tdw);
    ck_assert_double_lt(clt_test_max_rel_err(got, dw0, OC * C), TOL);
    free(got);
    got = clt_test_read(tdx);
    ck_assert_double_lt(clt_test_max_rel_err(got, dx, B * C), TOL);
    free(got);
    if (with_bias) {
        got = clt_test_read(tdb);
        ck_assert_double_lt(clt_test_max_rel_err(got, db0, OC), TOL);
        free(got);
    }
    free(x);
    free(w);
    free(bias);
    free(dy);
    free(dw0);
    free(db0);
    free(y);
    free(dx);
    clt_tensor *all[] = {tx, xb, tw, tdy, tdw, tb, tdb, ty, tdx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) clt_tensor_release(all[i]);
}

START_TEST(test_linear)
{
    check_linear(13, 257, 7, 1);
    check_linear(1, 1, 1, 1);
    check_linear(66, 5, 130, 0);
    check_linear(3, 0, 4, 1); /* C = 0: y is the bias, dx is empty */
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Backward without dx and db only accumulates dw. */
START_TEST(test_linear_backward_no_dx)
{
    enum { B = 3, C = 4, OC = 2 };
    float *x = clt_test_random_floats(B * C, 41), *dy = clt_test_random_floats(B * OC, 42), *w = clt_test_random_floats(OC * C, 43);
    float dw[OC * C] = {0};
    clt_tensor *tx = clt_test_upload(clt_test_device(), x, B, C), *tdy = clt_test_upload(clt_test_device(), dy, B, OC), *tw = clt_test_upload(clt_test_device(), w, OC, C), *tdw = clt_test_upload(clt_test_device(), dw, OC, C);
    ck_assert_ok(clt_linear_backward_(NULL, tdw, NULL, tdy, tx, tw));
    ck_assert_ok(clt_linear_backward_(NULL, tdw, NULL, tdy, tx, tw));
    clt_test_ref_gemm(1, 0, OC, C, B, 2.0f, dy, x, 0.0f, dw);
    float *got = clt_test_read(tdw);
    ck_assert_double_lt(clt_test_max_rel_err(got, dw, OC * C), TOL);
    free(got);
    free(x);
    free(dy);
    free(w);
    clt_tensor_release(tx);
    clt_tensor_release(tdy);
    clt_tensor_release(tw);
    clt_tensor_release(tdw);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_dense_errors)
{
    float z[64] = {0};
    clt_tensor *a = clt_test_upload(clt_test_device(), z, 2, 3), *b = clt_test_upload(clt_test_device(), z, 4, 5), *c = clt_test_upload(clt_test_device(), z, 2, 5), *out = (clt_tensor *)1;
    clt_tensor *i32;
    int64_t s23[] = {2, 3};
    ck_assert_ok(clt_zeros(&i32, clt_test_device(), CLT_INT32, 2, s23));
    ck_assert_status(clt_gemm_(0, 0, 1, NULL, b, 0, c), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_gemm_(0, 0, 1, a, b, 0, c), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3)") && strstr(clt_last_error(), "(4, 5)"), "%s", clt_last_error());
    ck_assert_status(clt_gemm_(0, 1, 1, a, a, 0, c), CLT_ERR_SHAPE); /* (2,3)(3,2) -> (2,2), not (2,5) */
    ck_assert_status(clt_gemm_(0, 0, 1, i32, b, 0, c), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_matmul(&out, a, a), CLT_ERR_SHAPE);
    ck_assert_ptr_null(out);
    ck_assert_status(clt_matmul(NULL, a, a), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_linear_forward(&out, a, b, NULL), CLT_ERR_SHAPE); /* x (2,3), w (4,5) */
    ck_assert_status(clt_linear_forward(&out, a, a, c), CLT_ERR_SHAPE);    /* b must be (2) */
    ck_assert_status(clt_linear_backward_(&out, NULL, NULL, c, a, a), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_linear_backward_(&out, c, NULL, c, a, a), CLT_ERR_SHAPE);
    clt_device other;
    if (clt_test_other_device(&other)) {
        clt_tensor *far;
        ck_assert_ok(clt_zeros(&far, other, CLT_FLOAT32, 2, s23));
        ck_assert_status(clt_gemm_(0, 1, 1, a, far, 0, c), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_status(clt_linear_forward(&out, far, a, NULL), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(far);
    }
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(i32);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dense");
    TCase *tc = clt_test_tcase("dense");
    tcase_add_test(tc, test_gemm_transposes);
    tcase_add_test(tc, test_gemm_beta_zero_ignores_nan);
    tcase_add_test(tc, test_gemm_empty);
    tcase_add_test(tc, test_matmul);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_linear_backward_no_dx);
    tcase_add_test(tc, test_dense_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
