/* Elementwise ops and ReLU against plain C, on awkward sizes and on views. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const int64_t sizes[] = {1, 7, 13, 257, 1000};

static float *random_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    clt_test_fill_uniform(x, n, seed, -2, 2);
    return x;
}

/* A 1-D view of n elements at offset 3 in a tensor padded with `pad` values. */
static clt_tensor *view_of(const float *x, int64_t n, clt_tensor **base)
{
    float *buf = malloc((size_t)(n + 6) * sizeof *buf);
    for (int i = 0; i < 3; i++) buf[i] = buf[n + 3 + i] = 42.0f;
    memcpy(buf + 3, x, (size_t)n * sizeof *x);
    int64_t shape[] = {n + 6};
    ck_assert_ok(clt_from_host(base, clt_test_device(), CLT_FLOAT32, 1, shape, buf));
    free(buf);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, 3, n));
    return v;
}

static void assert_padding_kept(clt_tensor *base, int64_t n)
{
    float *all = clt_test_read(base);
    for (int i = 0; i < 3; i++) {
        ck_assert_float_eq(all[i], 42.0f);
        ck_assert_float_eq(all[n + 3 + i], 42.0f);
    }
    free(all);
}

static void assert_equal(clt_tensor *t, const float *want, int64_t n)
{
    float *got = clt_test_read(t);
    for (int64_t i = 0; i < n; i++) ck_assert_msg(got[i] == want[i], "element %lld of %lld: %g, expected %g",
                                                   (long long)i, (long long)n, (double)got[i], (double)want[i]);
    free(got);
}

START_TEST(test_inplace_ops)
{
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *x = random_floats(n, 1 + (uint64_t)n), *y = random_floats(n, 100 + (uint64_t)n);
        clt_tensor *xb, *yb, *tx = view_of(x, n, &xb), *ty = view_of(y, n, &yb);

        ck_assert_ok(clt_scale_(ty, -1.5f));
        for (int64_t i = 0; i < n; i++) y[i] *= -1.5f;
        assert_equal(ty, y, n);

        ck_assert_ok(clt_axpy_(ty, 0.25f, tx));
        for (int64_t i = 0; i < n; i++) y[i] += 0.25f * x[i];
        float *got = clt_test_read(ty);
        ck_assert_double_lt(clt_test_max_rel_err(got, y, n), 1e-6); /* the device may fuse the multiply-add */
        free(got);

        ck_assert_ok(clt_add_(tx, ty));
        got = clt_test_read(ty);
        for (int64_t i = 0; i < n; i++) x[i] += got[i];
        free(got);
        assert_equal(tx, x, n);

        ck_assert_ok(clt_fill_(tx, 0.1));
        for (int64_t i = 0; i < n; i++) x[i] = 0.1f;
        assert_equal(tx, x, n);

        assert_padding_kept(xb, n);
        assert_padding_kept(yb, n);
        free(x);
        free(y);
        clt_tensor_release(tx);
        clt_tensor_release(ty);
        clt_tensor_release(xb);
        clt_tensor_release(yb);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_fill_int32)
{
    int64_t shape[] = {3, 5};
    clt_tensor *t;
    ck_assert_ok(clt_zeros(&t, clt_test_device(), CLT_INT32, 2, shape));
    ck_assert_ok(clt_fill_(t, -7));
    int32_t got[15];
    ck_assert_ok(clt_to_host(t, got, sizeof got));
    for (int i = 0; i < 15; i++) ck_assert_int_eq(got[i], -7);
    ck_assert_status(clt_fill_(t, 1e10), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_relu)
{
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *x = random_floats(n, 7 + (uint64_t)n), *dy = random_floats(n, 8 + (uint64_t)n);
        float *y = malloc((size_t)n * sizeof *y), *dx = malloc((size_t)n * sizeof *dx);
        x[0] = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            y[i] = x[i] > 0 ? x[i] : 0.0f;
            dx[i] = y[i] > 0 ? dy[i] : 0.0f;
        }
        clt_tensor *xb, *dyb, *tx = view_of(x, n, &xb), *tdy = view_of(dy, n, &dyb), *ty, *tdx;
        ck_assert_ok(clt_relu(&ty, tx));
        ck_assert_ok(clt_relu_backward(&tdx, tdy, ty));
        assert_equal(ty, y, n);
        assert_equal(tdx, dx, n);
        ck_assert_int_eq(clt_tensor_ndim(ty), 1);
        ck_assert_int_eq(clt_tensor_dim(tdx, 0), n);
        free(x);
        free(dy);
        free(y);
        free(dx);
        clt_tensor *all[] = {tx, xb, tdy, dyb, ty, tdx};
        for (int i = 0; i < 6; i++) clt_tensor_release(all[i]);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_relu_nan_passes)
{
    float x[3] = {NAN, -1.0f, 2.0f};
    int64_t shape[] = {3};
    clt_tensor *tx, *ty;
    ck_assert_ok(clt_from_host(&tx, clt_test_device(), CLT_FLOAT32, 1, shape, x));
    ck_assert_ok(clt_relu(&ty, tx));
    float *y = clt_test_read(ty);
    ck_assert(isnan(y[0]));
    ck_assert_float_eq(y[1], 0.0f);
    ck_assert_float_eq(y[2], 2.0f);
    free(y);
    clt_tensor_release(tx);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_zero_size)
{
    int64_t shape[] = {0, 4};
    clt_tensor *a, *b, *y, *dx;
    ck_assert_ok(clt_empty(&a, clt_test_device(), CLT_FLOAT32, 2, shape));
    ck_assert_ok(clt_empty(&b, clt_test_device(), CLT_FLOAT32, 2, shape));
    ck_assert_ok(clt_fill_(a, 1));
    ck_assert_ok(clt_scale_(a, 2));
    ck_assert_ok(clt_axpy_(a, 2, b));
    ck_assert_ok(clt_add_(a, b));
    ck_assert_ok(clt_relu(&y, a));
    ck_assert_ok(clt_relu_backward(&dx, a, y));
    ck_assert_int_eq(clt_tensor_numel(dx), 0);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(y);
    clt_tensor_release(dx);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors)
{
    int64_t s3[] = {3}, s4[] = {4};
    clt_tensor *a, *b, *i, *out = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&a, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_ok(clt_zeros(&b, clt_test_device(), CLT_FLOAT32, 1, s4));
    ck_assert_ok(clt_zeros(&i, clt_test_device(), CLT_INT32, 1, s3));
    ck_assert_status(clt_fill_(NULL, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_scale_(NULL, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_scale_(i, 1), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_axpy_(a, 1, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_axpy_(a, 1, b), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(3,)") && strstr(clt_last_error(), "(4,)"), "%s", clt_last_error());
    ck_assert_status(clt_add_(a, i), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_relu(&out, i), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(out);
    ck_assert_status(clt_relu(NULL, a), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_relu_backward(&out, a, b), CLT_ERR_SHAPE);
    clt_device other;
    if (clt_test_other_device(&other)) {
        clt_tensor *far;
        ck_assert_ok(clt_zeros(&far, other, CLT_FLOAT32, 1, s3));
        ck_assert_status(clt_add_(a, far), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_status(clt_relu_backward(&out, a, far), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(far);
    }
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(i);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Shapes must match exactly: equal element counts are not equal shapes. */
START_TEST(test_shapes_match_exactly)
{
    int64_t s23[] = {2, 3}, s32[] = {3, 2}, s2[] = {2}, s21[] = {2, 1};
    clt_tensor *a, *b, *i2, *i21, *out = NULL;
    ck_assert_ok(clt_zeros(&a, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&b, clt_test_device(), CLT_FLOAT32, 2, s32));
    ck_assert_ok(clt_zeros(&i2, clt_test_device(), CLT_INT32, 1, s2));
    ck_assert_ok(clt_zeros(&i21, clt_test_device(), CLT_INT32, 2, s21));
    ck_assert_status(clt_add_(a, b), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "clt_add_: shapes (2, 3) and (3, 2) differ"), "%s", clt_last_error());
    ck_assert_status(clt_axpy_(a, 2, b), CLT_ERR_SHAPE);
    ck_assert_status(clt_add(&out, a, b), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3) and (3, 2)"), "%s", clt_last_error());
    ck_assert_ptr_null(out);
    ck_assert_status(clt_relu_backward(&out, a, b), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2, 3) and (3, 2)"), "%s", clt_last_error());
    ck_assert_ptr_null(out);
    ck_assert_status(clt_count_equal(&out, i2, i21), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "(2,) and (2, 1)"), "%s", clt_last_error());
    ck_assert_ptr_null(out);
    /* Two one-element tensors match: a loss of shape () adds into a (1) total. */
    int64_t s1[] = {1};
    clt_tensor *total, *loss;
    ck_assert_ok(clt_zeros(&total, clt_test_device(), CLT_FLOAT32, 1, s1));
    ck_assert_ok(clt_full(&loss, clt_test_device(), CLT_FLOAT32, 0, NULL, 2.5));
    ck_assert_ok(clt_axpy_(total, 2, loss));
    double v;
    ck_assert_ok(clt_item(total, &v));
    ck_assert_double_eq(v, 5.0);
    clt_tensor_release(total);
    clt_tensor_release(loss);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(i2);
    clt_tensor_release(i21);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = clt_test_tcase("elementwise");
    tcase_add_test(tc, test_inplace_ops);
    tcase_add_test(tc, test_fill_int32);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_relu_nan_passes);
    tcase_add_test(tc, test_zero_size);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_shapes_match_exactly);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
