/* The programs a warm-up builds: a float32 model's step builds none of the
 * float16 GEMM kernels (cl/gemm_cpu_f16.cl, a program of its own so that a
 * cold start does not compile them), a float16 model's step builds them.
 * Where the products run on the CPU kernels (clt__dense_cpu), the float32
 * step builds cl/gemm_cpu.cl and the float16 one cl/gemm_cpu_f16.cl; where
 * they do not (the GPU class), neither. */
#include <stdio.h>

#include "device/device_internal.h"
#include "kernels/program.h"
#include "ops/ops_internal.h"
#include "support.h"

/* The programs built on the slot so far, for the failure messages. */
static void list_built(int slot, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < clt__program_count() && at < len; i++)
        if (clt__program_built(slot, clt__program_name(i)))
            at += (size_t)snprintf(out + at, len - at, " %s", clt__program_name(i));
}

START_TEST(test_float32_builds_no_float16_gemm)
{
    clt_device dev = clt_test_cpu();
    int slot, cpu;
    ck_assert_ok(clt__resolve(dev, &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    int64_t hiddens[] = {32, 16};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 20, 2, hiddens, 3, 1));
    ck_assert_ok(clt_model_warmup(m, 8, CLT_OPTIMIZER_SGD, 0.0, 0, NULL));
    char built[512];
    list_built(slot, built, sizeof built);
    ck_assert_msg(!clt__program_built(slot, "gemm_cpu_f16"),
                  "a float32 model's warm-up built the float16 GEMM program; built:%s", built);
    ck_assert_msg(clt__program_built(slot, "gemm_cpu") == cpu,
                  "cl/gemm_cpu.cl built: %d, the CPU kernels in use: %d; built:%s",
                  clt__program_built(slot, "gemm_cpu"), cpu, built);
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_model_warmup(m, 8, CLT_OPTIMIZER_SGD, 0.0, 0, NULL));
    list_built(slot, built, sizeof built);
    ck_assert_msg(clt__program_built(slot, "gemm_cpu_f16") == cpu,
                  "a float16 model's warm-up: cl/gemm_cpu_f16.cl built: %d, the CPU kernels in use: %d; built:%s", clt__program_built(slot, "gemm_cpu_f16"), cpu, built);
    clt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warmup_programs");
    TCase *tc = clt_test_tcase("warmup_programs");
    tcase_add_test(tc, test_float32_builds_no_float16_gemm);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
