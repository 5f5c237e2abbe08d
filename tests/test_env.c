/* The environment parser (src/core/env.c): its grammar (booleans, sizes,
 * per-device caps, words), the library reporting a malformed value through
 * the status of the first call that uses a device, the value each variable
 * then takes (in a child process where it is read once per process), and
 * every `clt` command exiting 2 on a malformed value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "device/sync.h"
#include "memory/allocator.h"
#include "nn/nn_internal.h"
#include "support.h"

#define MIB (INT64_C(1) << 20)

START_TEST(test_bool_grammar)
{
    static const struct {
        const char *text;
        int value;
    } ok[] = {{"1", 1},    {"0", 0},   {"true", 1}, {"FALSE", 0}, {"Yes", 1},
              {"no", 0},   {"ON", 1},  {"off", 0},  {"tRuE", 1},  {"nO", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int v = -1;
        ck_assert_msg(clt__parse_bool(ok[i].text, &v) == 0, "%s refused", ok[i].text);
        ck_assert_int_eq(v, ok[i].value);
    }
    static const char *const bad[] = {"", "2", "-1", "y", "n", "enable", "true ", " 1", "01", "onn", "of"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int v = -1;
        ck_assert_msg(clt__parse_bool(bad[i], &v) != 0, "\"%s\" accepted", bad[i]);
        ck_assert_int_eq(v, -1);
    }
}
END_TEST

START_TEST(test_size_grammar)
{
    const int64_t total = 8 * (INT64_C(1) << 30); /* an 8 GiB device */
    static const struct {
        const char *text;
        int64_t bytes;
    } ok[] = {
        {"0", 0},
        {"1", 1},
        {"1048576", 1048576},
        {"100B", 100},
        {"512K", 512 << 10},
        {"512k", 512 << 10},
        {"512KB", 512 << 10},
        {"512KiB", 512 << 10},
        {"512M", 512 * MIB},
        {"512MB", 512 * MIB}, /* the B is optional: binary units either way */
        {"512MiB", 512 * MIB},
        {"2G", 2048 * MIB},
        {"1.5G", 1536 * MIB},
        {"1T", INT64_C(1) << 40},
        {"8388607T", INT64_C(8388607) << 40},
        {"0.5", 4096 * MIB},
        {"1.0", 8192 * MIB},
        {"0.25", 2048 * MIB},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -1;
        ck_assert_msg(clt__parse_size(ok[i].text, total, &v) == 0, "%s refused", ok[i].text);
        ck_assert_msg(v == ok[i].bytes, "%s gave %lld, not %lld", ok[i].text, (long long)v, (long long)ok[i].bytes);
    }
    /* The reproductions first: each used to be a 1-byte, 100-byte,
     * absent or negative cap. */
    static const char *const bad[] = {"1.5",  "100.5", "lots", "-1",   "1e23", "inf",  "nan",  "",     " 1",
                                      "1 ",   "+1",    "0x10", "1.5B", "5iB",  "5Mi",  "5MBB", "0.0",  "1.01",
                                      ".5",   "5.",    "8388608T", "99999999999999999999", "1,2", "5P", "NaN"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = -1;
        ck_assert_msg(clt__parse_size(bad[i], total, &v) != 0, "\"%s\" accepted as %lld", bad[i], (long long)v);
        ck_assert_int_eq(v, -1);
    }
    /* The public form: the same byte counts, no share of a device. */
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -1;
        int fraction = strchr(ok[i].text, '.') && !strpbrk(ok[i].text, "KMGTkmgt");
        ck_assert_int_eq(clt_size_parse(ok[i].text, &v), fraction ? CLT_ERR_INVALID_ARGUMENT : CLT_OK);
        ck_assert_msg(v == (fraction ? 0 : ok[i].bytes), "%s gave %lld", ok[i].text, (long long)v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = -1;
        ck_assert_int_eq(clt_size_parse(bad[i], &v), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(v, 0);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "is not a byte count"));
    }
    ck_assert_int_eq(clt_size_parse(NULL, &(int64_t){0}), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(clt_size_parse("1G", NULL), CLT_ERR_INVALID_ARGUMENT);
    /* A fraction too small to be a byte is 1 byte, never "no cap". */
    int64_t v = -1;
    ck_assert_int_eq(clt__parse_size("0.0000000001", 1024, &v), 0);
    ck_assert_int_eq(v, 1);
}
END_TEST

START_TEST(test_memory_cap_lists)
{
    const int64_t total = 1024 * MIB;
    int64_t cap = -1;
    ck_assert_int_eq(clt__parse_memory_cap("gpu:0=1G,cpu:0=0.5,pinned=64K", "cpu:0", total, &cap), 0);
    ck_assert_int_eq(cap, 512 * MIB);
    ck_assert_int_eq(clt__parse_memory_cap("gpu:0=1G,cpu:0=0.5,pinned=64K", "pinned", total, &cap), 0);
    ck_assert_int_eq(cap, 64 << 10);
    ck_assert_int_eq(clt__parse_memory_cap("gpu:0=1G,cpu:0=0.5", "gpu:1", total, &cap), 0);
    ck_assert_int_eq(cap, 0); /* not named: no cap */
    ck_assert_int_eq(clt__parse_memory_cap("256M", "gpu:7", total, &cap), 0);
    ck_assert_int_eq(cap, 256 * MIB);
    static const char *const bad[] = {"banana=1G", "gpu:0=",    "gpu:0=1G,",  "=1G",      "gpu:0=1.5",
                                      "gpu=1G",    "gpu:x=1G",  "gpu:0=1G,,", "gpu:0:1G", "cpu:0=1G,gpu:1=lots"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(clt__parse_memory_cap(bad[i], "cpu:0", total, &cap) != 0, "\"%s\" accepted", bad[i]);
}
END_TEST

/* Sets name=value and checks that the first call using a device fails with
 * a message naming the variable, the value and the grammar. */
static void expect_refused(const char *name, const char *value, const char *grammar)
{
    ck_assert_int_eq(setenv(name, value, 1), 0);
    clt__env_forget();
    clt_tensor *t = (clt_tensor *)1;
    int64_t shape[1] = {4};
    ck_assert_status(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    const char *msg = clt_last_error();
    char want[256];
    snprintf(want, sizeof want, "%s=\"%s\"", name, value);
    ck_assert_msg(strstr(msg, want) && strstr(msg, grammar), "%s=%s: message '%s'", name, value, msg);
    ck_assert_status(clt_check_environment(), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(unsetenv(name), 0);
    clt__env_forget();
    ck_assert_ok(clt_check_environment());
}

START_TEST(test_library_reports_malformed_values)
{
    static const char *const caps[] = {"1.5", "100.5", "lots", "-1", "1e23", "inf", "nan"};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) expect_refused("CLT_MEMORY_CAP", caps[i], "fraction");
    expect_refused("CLT_MEMORY_CAP", "gpu:0=1G,banana=2G", "NAME=SIZE");
    expect_refused("CLT_SYNC_DEBUG", "1", "off, warn or error");
    expect_refused("CLT_DEVICE", "banana", "cpu:N");
    expect_refused("CLT_DEVICE", "GPU:0", "P:D"); /* device names are lower case */
    static const char *const bools[] = {"CLT_CPU_AS_GPU", "CLT_LAUNCH_BLOCKING", "CLT_FUSE", "CLT_TUNE",
                                        "CLT_ALLOC_EXACT", "CLT_NO_PUBLISH", "CLT_REPLAY"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) expect_refused(bools[i], "maybe", "yes/no");
    expect_refused("CLT_DENSE", "gpu", "cpu or clblast");
    expect_refused("CLT_FAULT", "alloc:0", "KIND:N");
    /* Bytes a terminal would act on are shown escaped. */
    ck_assert_int_eq(setenv("CLT_TUNE", "\x1b[2J", 1), 0);
    clt__env_forget();
    ck_assert_status(clt_check_environment(), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "CLT_TUNE=\"\\x1b[2J\""));
    ck_assert_ptr_null(strchr(clt_last_error(), '\x1b'));
    unsetenv("CLT_TUNE");
    clt__env_forget();
}
END_TEST

START_TEST(test_values_taken)
{
    /* Each of these was read another way before: "no" meant on, "true"
     * meant off, "false" kept fusion on. */
    setenv("CLT_CPU_AS_GPU", "no", 1);
    ck_assert_int_eq(clt__env_int(CLT__ENV_CPU_AS_GPU, -1), 0);
    setenv("CLT_CPU_AS_GPU", "On", 1);
    ck_assert_int_eq(clt__env_int(CLT__ENV_CPU_AS_GPU, -1), 1);
    unsetenv("CLT_CPU_AS_GPU");
    ck_assert_int_eq(clt__env_int(CLT__ENV_CPU_AS_GPU, -1), -1);
    setenv("CLT_TUNE", "true", 1);
    ck_assert_int_eq(clt__env_int(CLT__ENV_TUNE, 0), 1);
    unsetenv("CLT_TUNE");
    setenv("CLT_FUSE", "false", 1);
    ck_assert_int_eq(clt__fuse_enabled(), 0);
    setenv("CLT_FUSE", "YES", 1);
    ck_assert_int_eq(clt__fuse_enabled(), 1);
    setenv("CLT_FUSE", "", 1); /* empty is unset: the default, on */
    ck_assert_int_eq(clt__fuse_enabled(), 1);
    unsetenv("CLT_FUSE");
    setenv("CLT_DENSE", "CLBlast", 1);
    ck_assert_int_eq(clt__env_int(CLT__ENV_DENSE, -1), 1);
    unsetenv("CLT_DENSE");
    setenv("CLT_DEVICE", "gpu:3", 1);
    ck_assert_int_eq(clt_device_get_default().index, 3);
    unsetenv("CLT_DEVICE");
    clt__env_forget();
    ck_assert_ok(clt_check_environment());
}
END_TEST

/* The values read once per process (CLT_ALLOC_EXACT, CLT_SYNC_DEBUG and the
 * allocator's CLT_MEMORY_CAP) are checked in a new process, this binary run
 * again with CLT_TEST_ENV_CHILD set, so the suite also holds when Check runs
 * every test in one process (CK_FORK=no, as under valgrind). */
static int child_checks(void)
{
    int bad = 0;
    /* "yes" used to be off, "ERROR" off, "512MB" no cap at all. */
    if (clt__alloc_exact() != 1) bad |= fprintf(stderr, "CLT_ALLOC_EXACT=yes is off\n") > 0;
    if (clt_sync_get_debug() != CLT_SYNC_DEBUG_ERROR)
        bad |= fprintf(stderr, "CLT_SYNC_DEBUG=ERROR is not error\n") > 0;
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_tensor *t;
    int64_t shape[1] = {4};
    clt_memory_stats st = {0};
    if (clt_zeros(&t, clt_device_get_default(), CLT_FLOAT32, 1, shape) != CLT_OK ||
        clt_memory_get_stats(clt_device_get_default(), &st) != CLT_OK)
        bad |= fprintf(stderr, "allocating: %s\n", clt_last_error()) > 0;
    else
        clt_tensor_release(t);
    if (st.cap != 512 * MIB) bad |= fprintf(stderr, "CLT_MEMORY_CAP=512MB gave a cap of %lld\n", (long long)st.cap) > 0;
    return bad;
}

START_TEST(test_values_read_once)
{
    char self[4096], out[4096];
    clt_test_self_path(self, sizeof self);
    int rc = clt_test_shell(out, sizeof out,
                            "CLT_TEST_ENV_CHILD=1 CLT_ALLOC_EXACT=yes CLT_SYNC_DEBUG=ERROR CLT_MEMORY_CAP=512MB '%s'",
                            self);
    ck_assert_msg(rc == 0, "child exited %d: %s", rc, out);
}
END_TEST

/* Every command exits 2 with the message on a malformed value. */
START_TEST(test_clt_exit_codes)
{
    static const char *const envs[] = {"CLT_MEMORY_CAP=lots", "CLT_DEVICE=banana", "CLT_SYNC_DEBUG=1",
                                       "CLT_CPU_AS_GPU=maybe"};
    static const char *const commands[] = {"devices", "smi", "train --epochs 1", "eval --load x.safetensors",
                                           "timeline a.json b.svg", "tune"};
    for (size_t e = 0; e < sizeof envs / sizeof envs[0]; e++) {
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
            char out[4096];
            int rc = clt_test_shell(out, sizeof out, "env %s '%s' %s", envs[e], clt_test_clt_path(), commands[c]);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(strchr(envs[e], '=') - envs[e]), envs[e]);
            ck_assert_msg(rc == 2, "%s clt %s exited %d: %s", envs[e], commands[c], rc, out);
            ck_assert_msg(strstr(out, name) && strstr(out, "is not valid"), "%s clt %s: '%s'", envs[e], commands[c],
                          out);
        }
    }
    /* Well-formed values in other spellings are fine. */
    char out[4096];
    int rc = clt_test_shell(out, sizeof out, "env CLT_MEMORY_CAP=512MiB CLT_SYNC_DEBUG=Off CLT_FUSE=no '%s' devices",
                            clt_test_clt_path());
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
}
END_TEST

int main(void)
{
    if (getenv("CLT_TEST_ENV_CHILD")) return child_checks();
    Suite *s = suite_create("env");
    TCase *tc = clt_test_tcase("grammar");
    tcase_add_test(tc, test_bool_grammar);
    tcase_add_test(tc, test_size_grammar);
    tcase_add_test(tc, test_memory_cap_lists);
    tcase_add_test(tc, test_library_reports_malformed_values);
    tcase_add_test(tc, test_values_taken);
    tcase_add_test(tc, test_values_read_once);
    tcase_add_test(tc, test_clt_exit_codes);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
