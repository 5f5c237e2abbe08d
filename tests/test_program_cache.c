/* The program-binary cache: `clt warmup` writes the binaries of the
 * programs a step needs and a second process loads them instead of
 * compiling, on every device, including two devices of one context (gpu:0
 * and gpu:1 under POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1), whose
 * programs have one binary per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "device/device_internal.h"

/* `clt warmup --device D` (small model) into cache dir; its counts. */
static void warmup(const char *cache, const char *dev, int *built, int *loaded, int *saved)
{
    char out[4096];
    int rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' '%s' warmup --device %s --hiddens 16 --blocks 1 "
                            "--batch-size 8", cache, clt_test_clt_path(), dev);
    ck_assert_msg(rc == 0, "clt warmup --device %s exited %d:\n%s", dev, rc, out);
    char name[32];
    double t1, t2, t3;
    ck_assert_msg(sscanf(out, "%31s %d program(s) compiled in %lf s, %d loaded from the cache, %d binar%*s saved in "
                         "%lf s; %lf s in all", name, built, &t1, loaded, saved, &t2, &t3) == 7,
                  "unexpected output: %s", out);
    char want[40];
    snprintf(want, sizeof want, "%s:", dev);
    ck_assert_str_eq(name, want);
}

static int count_bin_files(const char *dir)
{
    char out[256];
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "ls '%s' | grep -c '\\.bin$' || true", dir), 0);
    return atoi(out);
}

static void check_device(const char *dev)
{
    char cache[256];
    clt_test_make_temp_dir(cache, sizeof cache, "progcache");
    int built, loaded, saved;
    warmup(cache, dev, &built, &loaded, &saved);
    ck_assert_msg(built > 0 && loaded == 0, "%s, empty cache: %d built, %d loaded", dev, built, loaded);
    ck_assert_msg(saved == built, "%s: %d programs built but %d binaries saved", dev, built, saved);
    ck_assert_int_eq(count_bin_files(cache), saved);
    int built2, loaded2, saved2;
    warmup(cache, dev, &built2, &loaded2, &saved2);
    ck_assert_msg(built2 == 0 && loaded2 == built && saved2 == 0,
                  "%s, second process: %d built, %d loaded, %d saved (want 0, %d, 0)", dev, built2, loaded2, saved2,
                  built);
    clt_test_remove_dir(cache);
}

START_TEST(test_cpu_saves_and_loads)
{
    check_device(clt_test_cpu_name()); /* cpu:0, or the last GPU where there is none */
}
END_TEST

/* The two GPUs share one context: a program built for one of them is a
 * program of both devices, and its binary is its device's entry of two. */
START_TEST(test_two_devices_of_one_context)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    int a, b;
    ck_assert_ok(clt__resolve(clt_gpu(0), &a));
    ck_assert_ok(clt__resolve(clt_gpu(1), &b));
    clt_test_skip_if(!clt__same_context(a, b), "two-gpus", "gpu:0 and gpu:1 are in separate contexts here");
    check_device("gpu:1");
    check_device("gpu:0");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("program_cache");
    TCase *tc = clt_test_tcase("cache");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cpu_saves_and_loads);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_set_timeout(gpus, 600);
    tcase_add_test(gpus, test_two_devices_of_one_context);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
