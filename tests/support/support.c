#include "support.h"

#include <math.h>
#include <stdlib.h>

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void clt_test_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)(next(&seed) >> 40) / 16777216.0f;
}

double clt_test_max_rel_err(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= worst)) worst = d; /* NaN counts as worst */
    }
    return worst;
}

float *clt_test_read(const clt_tensor *t)
{
    size_t n = clt_tensor_nbytes(t);
    float *x = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(x);
    ck_assert_ok(clt_to_host(t, x, n));
    return x;
}

void clt_test_assert_no_live_tensors(void)
{
    for (int i = 0; i < clt_device_count(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_from_list(i, &d));
        ck_assert_int_eq(clt_memory_allocated(d), 0);
    }
}

int clt_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
