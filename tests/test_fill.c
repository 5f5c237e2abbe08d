/* clt_fill_ of float32 and int32 tensors: a buffer fill up to 4096
 * elements, the fill_u32 kernel above (src/ops/elementwise.c); either way
 * every element of a view and nothing around it. */
#include <stdlib.h>
#include <string.h>

#include "device/sync.h"
#include "support.h"

static int fill_kernels, buffer_fills;

static void see(int slot, cl_event ev, const char *name, const char *cat, size_t bytes)
{
    (void)slot, (void)ev, (void)cat, (void)bytes;
    fill_kernels += strcmp(name, "fill_u32") == 0;
    buffer_fills += strcmp(name, "fill") == 0;
}

static void ignore_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns)
{
    (void)slot, (void)what, (void)cat, (void)start_ns, (void)end_ns;
}

START_TEST(test_fill_either_way)
{
    static const clt__sync_tracer tracer = {see, ignore_host};
    static const int64_t sizes[] = {1, 7, 4096, 4097, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int as_int = 0; as_int < 2; as_int++) {
            int64_t n = sizes[s], total = n + 6;
            clt_dtype dt = as_int ? CLT_INT32 : CLT_FLOAT32;
            clt_tensor *base, *view;
            ck_assert_ok(clt_full(&base, clt_test_device(), dt, 1, &total, 5));
            ck_assert_ok(clt_narrow(&view, base, 3, n));
            fill_kernels = buffer_fills = 0;
            clt__sync_set_tracer(&tracer);
            ck_assert_ok(clt_fill_(view, -3));
            clt__sync_set_tracer(NULL);
            int small = n <= 4096;
            ck_assert_msg(fill_kernels == !small && buffer_fills == small,
                          "%lld elements: %d fill_u32 launches, %d buffer fills", (long long)n, fill_kernels,
                          buffer_fills);
            int32_t *got = malloc((size_t)total * sizeof *got);
            ck_assert_ok(clt_to_host(base, got, (size_t)total * sizeof *got));
            for (int64_t i = 0; i < total; i++) {
                float f = 0;
                int32_t v = 0;
                memcpy(&f, &got[i], sizeof f);
                v = as_int ? got[i] : (int32_t)f;
                ck_assert_msg(v == (i >= 3 && i < 3 + n ? -3 : 5), "%lld elements, %s, element %lld: %d",
                              (long long)n, as_int ? "int32" : "float32", (long long)i, (int)v);
            }
            free(got);
            clt_tensor_release(view);
            clt_tensor_release(base);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fill");
    TCase *tc = clt_test_tcase("fill");
    tcase_add_test(tc, test_fill_either_way);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
