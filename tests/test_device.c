/* Devices: values, counting, naming, parsing, the default device, and
 * CLT_CPU_AS_GPU. Runs under both pocl configurations of scripts/test; what
 * needs two GPUs checks clt_num_gpus() and asserts the absence otherwise. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static int cpu_as_gpu(void)
{
    const char *v = getenv("CLT_CPU_AS_GPU");
    return v && *v && strcmp(v, "0") != 0;
}

/* CLT_CPU_AS_GPU=only: every CPU device a GPU and no cpu:0. */
static int only(void)
{
    const char *v = getenv("CLT_CPU_AS_GPU");
    return v && strcmp(v, "only") == 0;
}

/* The default device when none is chosen: cpu:0, else the first listed. */
static clt_device first(void) { return only() ? clt_gpu(0) : clt_cpu(); }

/* 1 when pocl is the only OpenCL platform (CI), so exact counts are known. */
static int pocl_only(void)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device_info info;
        ck_assert_ok(clt_device_list_info(i, &info));
        if (!strstr(info.platform_name, "Portable Computing Language")) return 0;
    }
    return clt_device_list_num_entries() > 0;
}

static void assert_name(clt_device d, const char *want)
{
    char buf[32];
    ck_assert_ok(clt_device_name(d, buf, sizeof buf));
    ck_assert_str_eq(buf, want);
}

START_TEST(test_values_are_free_to_construct)
{
    clt_device c = clt_cpu(), g = clt_gpu(1), far = clt_gpu(7), at = clt_device_at(5, 3);
    ck_assert_int_eq(c.type, CLT_DEVICE_CPU);
    ck_assert_int_eq(c.index, 0);
    ck_assert_int_eq(g.type, CLT_DEVICE_GPU);
    ck_assert_int_eq(g.index, 1);
    ck_assert_int_eq(at.type, CLT_DEVICE_AT);
    ck_assert_int_eq(at.platform, 5);
    ck_assert_int_eq(at.index, 3);
    /* Naming works for devices that do not exist. */
    assert_name(far, "gpu:7");
    assert_name(clt_gpu(0), "gpu:0");
    assert_name(c, "cpu:0");
    assert_name(at, "5:3");
    ck_assert_int_eq(clt_device_exists(far), 0);
    ck_assert_int_eq(clt_device_exists(at), 0);
    ck_assert_int_eq(clt_device_exists(c), !only());
}
END_TEST

START_TEST(test_placement_checks_existence)
{
    clt_tensor *t = (clt_tensor *)&t;
    int64_t shape[] = {2};
    ck_assert_status(clt_zeros(&t, clt_gpu(7), CLT_FLOAT32, 1, shape), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "gpu:7"));
    ck_assert_status(clt_zeros(&t, clt_device_at(9, 0), CLT_FLOAT32, 1, shape), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "platform 9"));
    ck_assert_status(clt_zeros(&t, clt_device_at(0, 99), CLT_FLOAT32, 1, shape), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_zeros(&t, clt_gpu(-1), CLT_FLOAT32, 1, shape), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_zeros(&t, clt_device_at(-1, 0), CLT_FLOAT32, 1, shape), CLT_ERR_NO_DEVICE);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_counting_gpus)
{
    int n = clt_num_gpus(), gpus = 0, cpus = 0;
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device_info info;
        ck_assert_ok(clt_device_list_info(i, &info));
        if (strncmp(info.name, "gpu:", 4) == 0) gpus++;
        else cpus++;
        /* Without the switch a device is named by its type. */
        if (!cpu_as_gpu()) ck_assert_int_eq(strcmp(info.type, "cpu") == 0, strncmp(info.name, "cpu:", 4) == 0);
    }
    ck_assert_int_eq(n, gpus);
    if (pocl_only()) {
        const char *pd = getenv("POCL_DEVICES");
        if (!cpu_as_gpu()) ck_assert_int_eq(n, 0); /* pocl has only CPU devices */
        else if (pd && strcmp(pd, "pthread pthread") == 0) ck_assert_int_eq(n, 2);
        /* With the switch, cpu:0 is listed once more, in a context of its
         * own; with CLT_CPU_AS_GPU=only it is not there at all. */
        ck_assert_int_eq(cpus, only() ? 0 : 1);
        ck_assert_int_eq(clt_device_list_num_entries(), only() ? n : cpu_as_gpu() ? n + 1 : n + cpus);
    }
    for (int i = 0; i < n; i++) ck_assert_int_eq(clt_device_exists(clt_gpu(i)), 1);
    ck_assert_int_eq(clt_device_exists(clt_gpu(n)), 0);
    ck_assert_int_eq(clt_device_exists(clt_cpu()), !only());
}
END_TEST

START_TEST(test_try_gpu)
{
    int n = clt_num_gpus();
    clt_device d = clt_try_gpu(0);
    ck_assert_int_eq(d.type, n > 0 ? CLT_DEVICE_GPU : CLT_DEVICE_CPU);
    ck_assert_int_eq(d.index, 0);
    d = clt_try_gpu(10);
    ck_assert_int_eq(d.type, CLT_DEVICE_CPU);
    d = clt_try_gpu(-1);
    ck_assert_int_eq(d.type, CLT_DEVICE_CPU);
    d = clt_try_gpu(1);
    ck_assert_int_eq(d.type, n > 1 ? CLT_DEVICE_GPU : CLT_DEVICE_CPU);
    if (n > 1) ck_assert_int_eq(d.index, 1);
}
END_TEST

START_TEST(test_try_all_gpus)
{
    int n = clt_num_gpus();
    clt_device out[8];
    memset(out, 0xff, sizeof out);
    int got = clt_try_all_gpus(out, 8);
    if (n == 0) {
        ck_assert_int_eq(got, 1);
        ck_assert_int_eq(out[0].type, CLT_DEVICE_CPU);
        ck_assert_int_eq(out[0].index, 0);
    } else {
        ck_assert_int_eq(got, n);
        for (int i = 0; i < n && i < 8; i++) {
            ck_assert_int_eq(out[i].type, CLT_DEVICE_GPU);
            ck_assert_int_eq(out[i].index, i);
        }
    }
    /* A short array gets what fits; the count still says how many exist. */
    clt_device one[1];
    ck_assert_int_eq(clt_try_all_gpus(one, 1), got);
    ck_assert_int_eq(one[0].type, n ? CLT_DEVICE_GPU : CLT_DEVICE_CPU);
    ck_assert_int_eq(clt_try_all_gpus(NULL, 0), got);
}
END_TEST

START_TEST(test_device_at_and_equal)
{
    /* Every listed device is reachable by P:D (except the extra cpu:0 of
     * CLT_CPU_AS_GPU, whose P:D names the GPU it is presented as). */
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device_info info;
        clt_device d;
        ck_assert_ok(clt_device_list_info(i, &info));
        ck_assert_ok(clt_device_list_entry(i, &d));
        ck_assert_int_eq(clt_device_exists(d), 1);
        assert_name(d, info.name);
        ck_assert_int_eq(clt_device_equal(d, d), 1);
        clt_device at = clt_device_at(info.platform_index, info.device_index);
        ck_assert_int_eq(clt_device_exists(at), 1);
        char name[32];
        ck_assert_ok(clt_device_name(at, name, sizeof name));
        if (strcmp(info.name, "cpu:0") != 0 || !cpu_as_gpu()) {
            ck_assert_int_eq(clt_device_equal(at, d), 1);
            ck_assert_str_eq(name, info.name);
        }
        ck_assert_int_eq(info.presented_as_gpu, cpu_as_gpu() && strncmp(info.name, "gpu:", 4) == 0);
        ck_assert_int_gt(info.global_mem_bytes, 0);
        ck_assert_int_gt(info.max_alloc_bytes, 0);
        ck_assert_int_le(info.max_alloc_bytes, info.global_mem_bytes);
    }
    ck_assert_int_eq(clt_device_equal(clt_cpu(), clt_gpu(7)), 0);
    ck_assert_int_eq(clt_device_equal(clt_gpu(7), clt_gpu(7)), 1);
    ck_assert_int_eq(clt_device_equal(clt_gpu(7), clt_gpu(8)), 0);
    if (clt_num_gpus() > 1) ck_assert_int_eq(clt_device_equal(clt_gpu(0), clt_gpu(1)), 0);
    if (pocl_only()) {
        /* Under the switch cpu:0 is a device of its own, though it is the
         * same hardware as gpu:0, which P:D 0:0 names. */
        if (cpu_as_gpu()) ck_assert_int_eq(clt_device_equal(clt_cpu(), clt_gpu(0)), 0);
        assert_name(clt_device_at(0, 0), cpu_as_gpu() ? "gpu:0" : "cpu:0");
    }
    clt_device d;
    ck_assert_status(clt_device_list_entry(clt_device_list_num_entries(), &d), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_device_list_entry(-1, &d), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_device_list_entry(0, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_device_info info;
    ck_assert_status(clt_device_list_info(clt_device_list_num_entries(), &info), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_device_list_info(0, NULL), CLT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_name_errors)
{
    char small[4];
    ck_assert_status(clt_device_name(clt_cpu(), NULL, 16), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_device_name(clt_cpu(), small, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_device_name(clt_cpu(), small, sizeof small), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "too small"));
    char exact[6];
    ck_assert_ok(clt_device_name(clt_cpu(), exact, sizeof exact));
    ck_assert_str_eq(exact, "cpu:0");
}
END_TEST

START_TEST(test_parse)
{
    static const struct {
        const char *text;
        clt_device_type type;
        int index, platform;
    } ok[] = {{"cpu", CLT_DEVICE_CPU, 0, 0},   {"cpu:0", CLT_DEVICE_CPU, 0, 0}, {"cpu:3", CLT_DEVICE_CPU, 3, 0},
              {"gpu", CLT_DEVICE_GPU, 0, 0},   {"gpu:1", CLT_DEVICE_GPU, 1, 0}, {"gpu:12", CLT_DEVICE_GPU, 12, 0},
              {"0:0", CLT_DEVICE_AT, 0, 0},    {"2:5", CLT_DEVICE_AT, 5, 2}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        clt_device d;
        ck_assert_ok(clt_device_parse(ok[i].text, &d));
        ck_assert_int_eq(d.type, ok[i].type);
        ck_assert_int_eq(d.index, ok[i].index);
        if (d.type == CLT_DEVICE_AT) ck_assert_int_eq(d.platform, ok[i].platform);
    }
    static const char *bad[] = {"", "cuda:0", "gpu:", "gpu:-1", "cpu:1x", "gpu 1", "1:", ":1", "-1:0",
                                "1:2:3", "GPU:0", " cpu"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clt_device d = clt_gpu(42);
        ck_assert_status(clt_device_parse(bad[i], &d), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "cannot parse device"));
        ck_assert_int_eq(d.index, 42); /* untouched */
    }
    clt_device d;
    ck_assert_status(clt_device_parse(NULL, &d), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_device_parse("cpu", NULL), CLT_ERR_INVALID_ARGUMENT);
    /* Parsing and naming round-trip. */
    ck_assert_ok(clt_device_parse("gpu:3", &d));
    assert_name(d, "gpu:3");
}
END_TEST

START_TEST(test_default_device_from_env)
{
    unsetenv("CLT_DEVICE");
    clt_device d = clt_device_get_default();
    ck_assert_int_eq(d.type, first().type);
    ck_assert_int_eq(d.index, 0);
    setenv("CLT_DEVICE", "0:0", 1);
    d = clt_device_get_default();
    ck_assert_int_eq(d.type, CLT_DEVICE_AT);
    ck_assert_int_eq(d.platform, 0);
    ck_assert_int_eq(d.index, 0);
    setenv("CLT_DEVICE", "gpu:1", 1);
    d = clt_device_get_default();
    ck_assert_int_eq(d.type, CLT_DEVICE_GPU);
    ck_assert_int_eq(d.index, 1);
    /* An unparsable value falls back to cpu() (the first device without one). */
    setenv("CLT_DEVICE", "tpu:0", 1);
    d = clt_device_get_default();
    ck_assert_int_eq(d.type, first().type);
    unsetenv("CLT_DEVICE");
}
END_TEST

static void *thread_default(void *arg)
{
    clt_device *seen = arg;
    seen[0] = clt_device_get_default(); /* not affected by the main thread's choice */
    clt_device_set_default(clt_gpu(5));
    seen[1] = clt_device_get_default();
    return NULL;
}

START_TEST(test_default_device_per_thread)
{
    unsetenv("CLT_DEVICE");
    clt_device_set_default(clt_gpu(3));
    clt_device d = clt_device_get_default();
    ck_assert_int_eq(d.type, CLT_DEVICE_GPU);
    ck_assert_int_eq(d.index, 3);
    /* The thread's choice beats the environment. */
    setenv("CLT_DEVICE", "cpu", 1);
    ck_assert_int_eq(clt_device_get_default().type, CLT_DEVICE_GPU);
    unsetenv("CLT_DEVICE");
    clt_device seen[2];
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, thread_default, seen), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(seen[0].type, first().type);
    ck_assert_int_eq(seen[1].type, CLT_DEVICE_GPU);
    ck_assert_int_eq(seen[1].index, 5);
    d = clt_device_get_default();
    ck_assert_int_eq(d.index, 3); /* still this thread's own */
    clt_device_set_default(clt_cpu());
}
END_TEST

START_TEST(test_synchronize)
{
    ck_assert_ok(clt_synchronize(first()));
    if (only()) ck_assert_status(clt_synchronize(clt_cpu()), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_synchronize(clt_gpu(9)), CLT_ERR_NO_DEVICE);
    clt_tensor *t;
    int64_t shape[] = {1000};
    ck_assert_ok(clt_rand(&t, clt_try_gpu(0), 1, shape, 1));
    ck_assert_ok(clt_synchronize(clt_try_gpu(0)));
    ck_assert_ok(clt_synchronize_all());
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_status_strings)
{
    ck_assert_str_eq(clt_status_string(CLT_OK), "CLT_OK");
    ck_assert_str_eq(clt_status_string(CLT_ERR_DEVICE_MISMATCH), "CLT_ERR_DEVICE_MISMATCH");
    ck_assert_str_eq(clt_status_string(CLT_ERR_OUT_OF_MEMORY), "CLT_ERR_OUT_OF_MEMORY");
    ck_assert_str_eq(clt_status_string((clt_status)12345), "unknown status");
    ck_assert_status(clt_device_parse("x", &(clt_device){0}), CLT_ERR_INVALID_ARGUMENT);
    clt_clear_error();
    ck_assert_str_eq(clt_last_error(), "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_values_are_free_to_construct);
    tcase_add_test(tc, test_placement_checks_existence);
    tcase_add_test(tc, test_counting_gpus);
    tcase_add_test(tc, test_try_gpu);
    tcase_add_test(tc, test_try_all_gpus);
    tcase_add_test(tc, test_device_at_and_equal);
    tcase_add_test(tc, test_name_errors);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_default_device_from_env);
    tcase_add_test(tc, test_default_device_per_thread);
    tcase_add_test(tc, test_synchronize);
    tcase_add_test(tc, test_status_strings);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
