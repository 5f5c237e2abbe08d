/* Tensors: creation, reading back, views, placement and printing. */
#include <stdlib.h>
#include <string.h>

#include "support.h"

START_TEST(test_ones_read_back)
{
    clt_tensor *t;
    int64_t shape[] = {2, 3};
    ck_assert_ok(clt_ones(&t, clt_cpu(), CLT_FLOAT32, 2, shape));
    float *x = clt_test_read(t);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(x[i], 1.0f);
    free(x);
    char buf[256];
    ck_assert_ok(clt_tensor_format(t, buf, sizeof buf));
    ck_assert_str_eq(buf, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='cpu:0')");
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_add_matches_host)
{
    enum { N = 1031 };
    float a[N], b[N];
    clt_test_fill_uniform(a, N, 1, -1, 1);
    clt_test_fill_uniform(b, N, 2, -1, 1);
    int64_t shape[] = {N};
    clt_tensor *ta, *tb, *ty;
    ck_assert_ok(clt_from_host(&ta, clt_cpu(), CLT_FLOAT32, 1, shape, a));
    ck_assert_ok(clt_from_host(&tb, clt_cpu(), CLT_FLOAT32, 1, shape, b));
    ck_assert_ok(clt_add(&ty, ta, tb));
    float *y = clt_test_read(ty);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], a[i] + b[i]);
    free(y);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ones_read_back);
    tcase_add_test(tc, test_add_matches_host);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
