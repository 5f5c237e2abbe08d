/* Messages under resource limits name the limit (src/device/device.c,
 * no_platform_reason): a child of this binary lowers RLIMIT_AS or
 * RLIMIT_NOFILE before its first device use, and finds no device; the
 * message (from clt_device_list_info and from resolving cpu:0) names the
 * limit and its value, not a missing ICD. `clt devices` under `ulimit -v`
 * says the same. A program build that fails under a low limit, and host
 * memory running out under one, name it too (src/core/limits.c). With no
 * limit and no ICD (OCL_ICD_VENDORS an empty folder) the message still
 * says to install one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "device/device_internal.h"
#include "core/limits.h"
#include "kernels/program.h"
#include "support.h"

static char dir[256];
static char out[1 << 16];

#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

static void setup(void) { clt_test_make_temp_dir(dir, sizeof dir, "limits"); }
static void teardown(void) { clt_test_remove_dir(dir); }

/* This process's mapped size in bytes (VmSize), 0 when unknown. */
static unsigned long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb << 10;
}

/* The build child: finds gpu:0 or the CPU device, then (for "build") lowers
 * RLIMIT_AS to 1 GiB above what it maps, and builds a program whose
 * options break it (a program of its own, never cached). Prints the
 * message; exits 0 when the build failed. */
static int build_child(const char *which)
{
    int slot;
    if (clt__resolve(clt_try_gpu(0), &slot) != CLT_OK) return 5;
    if (strcmp(which, "build") == 0) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = vm_size() + (1ull << 30);
        if (rl.rlim_cur >= CLT__LOW_MEMORY_LIMIT) return 6; /* a driver that maps too much for a low limit */
        if (setrlimit(RLIMIT_AS, &rl) != 0) return 3;
    }
    cl_kernel k;
    clt_status s = clt__kernel_opts(slot, "elementwise", "-D__kernel=}", "relu_f32", &k);
    printf("build: %s\n", s == CLT_OK ? "ok" : clt_last_error());
    fflush(stdout);
    return s == CLT_OK ? 4 : 0;
}

/* The child: lowers the limit that `which` names, then asks for devices.
 * Prints the two messages; exits 0 when there was no device. */
static int child(const char *which)
{
    if (strncmp(which, "build", 5) == 0) return build_child(which);
    struct rlimit rl, nofile;
    if (strcmp(which, "as") == 0) {
        rl.rlim_cur = rl.rlim_max = vm_size() + (64ull << 20);
        if (setrlimit(RLIMIT_AS, &rl) != 0) return 3;
    } else if (strcmp(which, "nofile") == 0) {
        /* The soft limit only, restored before exit (LeakSanitizer's
         * exit-time check opens files). */
        if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return 3;
        rl = nofile;
        rl.rlim_cur = 3;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 3;
    }
    int n = clt_device_list_num_entries();
    clt_device_info info;
    clt_status s = clt_device_list_info(0, &info);
    printf("count %d\nlist: %s\n", n, s == CLT_OK ? "ok" : clt_last_error());
    clt_tensor *t = NULL;
    int64_t shape[1] = {4};
    s = clt_empty(&t, (clt_cpu)(), CLT_FLOAT32, 1, shape);
    printf("create: %s\n", s == CLT_OK ? "ok" : clt_last_error());
    clt_tensor_release(t);
    if (strcmp(which, "nofile") == 0) setrlimit(RLIMIT_NOFILE, &nofile);
    fflush(stdout);
    return n == 0 ? 0 : 4;
}

/* Runs the child for `which` with extra environment; its output in out. */
static int run_child(const char *which, const char *env_var)
{
    const char *set[] = {env_var, NULL};
    char **env = clt_test_environ_with(set);
    char log[300];
    snprintf(log, sizeof log, "%s/child.log", dir);
    char arg[64];
    snprintf(arg, sizeof arg, "--limits-child=%s", which);
    int code = clt_test_run_self(arg, env, log, 120);
    free(env);
    char *text = clt_test_read_file(log);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    return code;
}

static void expect_twice(const char *want, const char *unwanted)
{
    const char *list = strstr(out, "list: "), *create = strstr(out, "create: ");
    ck_assert_msg(list && create, "child said:\n%s", out);
    ck_assert_msg(strstr(list, want) && strstr(create, want), "\"%s\" missing from:\n%s", want, out);
    if (unwanted) ck_assert_msg(!strstr(out, unwanted), "\"%s\" in:\n%s", unwanted, out);
}

START_TEST(test_address_space_limit_is_named)
{
    clt_test_skip_if(ASAN, "no-asan", "AddressSanitizer reserves more address space than the limit");
    int code = run_child("as", NULL);
    ck_assert_msg(code == 0, "child exit %d:\n%s", code, out);
    expect_twice("under the address-space limit of ", "is an ICD");
    expect_twice("MiB (ulimit -v)", NULL);
}
END_TEST

START_TEST(test_open_file_limit_is_named)
{
    int code = run_child("nofile", NULL);
    ck_assert_msg(code == 0, "child exit %d:\n%s", code, out);
    expect_twice("under the open-file limit of 3 (ulimit -n)", "is an ICD");
}
END_TEST

/* No limit, no ICD: the old advice stands. */
START_TEST(test_no_icd_says_install_one)
{
    char var[400];
    snprintf(var, sizeof var, "OCL_ICD_VENDORS=%s", dir);
    int code = run_child("none", var);
    ck_assert_msg(code == 0, "child exit %d:\n%s", code, out);
    expect_twice("no OpenCL platform was found (is an ICD such as pocl-opencl-icd installed?)", "limit");
    int rc = run("OCL_ICD_VENDORS=%s %s devices", dir, clt_test_clt_path());
    ck_assert_msg(rc == 1 && strstr(out, "clt devices: no OpenCL device: no OpenCL platform was found"),
                  "clt devices without an ICD: exit %d:\n%s", rc, out);
}
END_TEST

/* The tool under `ulimit -v`. */
START_TEST(test_tool_names_the_limit)
{
    clt_test_skip_if(ASAN, "no-asan", "AddressSanitizer reserves more address space than the limit");
    int rc = run("ulimit -v 200000 && %s devices", clt_test_clt_path());
    ck_assert_msg(rc == 1 && strstr(out, "clt devices: no OpenCL device: no OpenCL platform could be loaded under "
                                         "the address-space limit of 195 MiB (ulimit -v)"),
                  "clt devices under ulimit -v: exit %d:\n%s", rc, out);
    clt_test_write_idx_split(dir, "train", 32, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
    rc = run("ulimit -v 200000 && %s train --data %s --steps 1", clt_test_clt_path(), dir);
    ck_assert_msg(rc == 1 && strstr(out, "address-space limit of 195 MiB (ulimit -v)") && !strstr(out, "is an ICD"),
                  "clt train under ulimit -v: exit %d:\n%s", rc, out);
}
END_TEST

/* A program build that fails under a low address-space limit names the
 * limit; without one the message does not mention a limit. */
START_TEST(test_build_failure_names_the_limit)
{
    clt_test_skip_if(ASAN, "no-asan", "AddressSanitizer reserves more address space than the limit");
    int code = run_child("build", NULL);
    clt_test_skip_if(code == 6, "low-limit", "the driver maps 3 GiB or more, so no limit above it is low");
    ck_assert_msg(code == 0, "child exit %d:\n%s", code, out);
    ck_assert_msg(strstr(out, "build: building cl/elementwise.cl") && strstr(out, "failed (CL_BUILD_PROGRAM_FAILURE) "
                  "under the address-space limit of ") && strstr(out, "MiB (ulimit -v), the likely cause"),
                  "child said:\n%s", out);
    code = run_child("build-nolimit", NULL);
    ck_assert_msg(code == 0, "child exit %d:\n%s", code, out);
    ck_assert_msg(strstr(out, "failed (CL_BUILD_PROGRAM_FAILURE):\n") && !strstr(out, "ulimit"), "child said:\n%s",
                  out);
}
END_TEST

/* Host memory running out under `ulimit -v` in the tool: the library's
 * out-of-memory message names the limit (a 256 MiB sparse CSV read whole
 * under a 195 MiB address space). */
START_TEST(test_host_out_of_memory_names_the_limit)
{
    clt_test_skip_if(ASAN, "no-asan", "AddressSanitizer reserves more address space than the limit");
    char big[400];
    snprintf(big, sizeof big, "%s/big.csv", dir);
    ck_assert_int_eq(run("truncate -s 256M %s", big), 0);
    int rc = run("ulimit -v 200000 && %s train --data %s --steps 1", clt_test_clt_path(), big);
    ck_assert_msg(rc != 0 && strstr(out, "out of host memory") &&
                      strstr(out, "(the process runs under the address-space limit of 195 MiB (ulimit -v): raise the "
                              "limit)"),
                  "clt train under ulimit -v: exit %d:\n%s", rc, out);
    const char *first = strstr(out, "(ulimit -v)");
    ck_assert_msg(!strstr(first + 1, "(ulimit -v)"), "the limit named twice:\n%s", out);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strncmp(argv[1], "--limits-child=", 15) == 0) return child(argv[1] + 15);
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_address_space_limit_is_named);
    tcase_add_test(tc, test_open_file_limit_is_named);
    tcase_add_test(tc, test_no_icd_says_install_one);
    tcase_add_test(tc, test_tool_names_the_limit);
    tcase_add_test(tc, test_build_failure_names_the_limit);
    tcase_add_test(tc, test_host_out_of_memory_names_the_limit);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
