/* The cold start of `clt train --helper` (tools/clt/helper.c): with empty
 * kernel caches a helper process, `clt warmup --helper`, runs the step's
 * kernels the last first while the run compiles them the first first, both
 * filling pocl's cache. Checked here: the helper compiles what a forward
 * warm-up of the same model asks for (that warm-up then compiles nothing);
 * a warm cache, or no --helper, starts no helper; the helper changes no
 * result; it dies with its parent. On pocl's CPU device, whose cache
 * (POCL_CACHE_DIR) the checks read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "device/device_internal.h"

enum { HIDDENS = 32, BLOCKS = 1, BATCH = 64 };

static char dir[256], out[16384];

static void setup(void)
{
    clt_test_make_temp_dir(dir, sizeof dir, "coldstart");
    char data[300];
    snprintf(data, sizeof data, "%s/data", dir);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", data);
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "%s", cmd), 0);
    clt_test_write_idx_split(data, "train", 512, 1, 1);
    clt_test_write_idx_split(data, "t10k", 128, 2, 1);
}

static void teardown(void) { clt_test_remove_dir(dir); }

/* 1 on pocl's CPU device, whose cache the checks read. */
static int pocl_cpu(void)
{
    char name[256] = "";
    int slot;
    if (!clt_device_exists(clt_cpu()) || clt__resolve(clt_cpu(), &slot) != CLT_OK) return 0;
    clGetPlatformInfo(clt__slot_get(slot)->platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    return strstr(name, "Portable Computing Language") != NULL;
}

#define NEED_POCL_CPU() clt_test_skip_if(!pocl_cpu(), "pocl", "needs pocl's CPU device, whose cache it reads")

/* The environment of every run: the test's own empty caches. */
#define CACHES "POCL_CACHE_DIR='%s/pocl' CLT_CACHE_DIR='%s/clt' "

/* Every compiled kernel in pocl's cache with its modification time, sorted. */
static char *kernel_files(void)
{
    char list[300];
    snprintf(list, sizeof list, "%s/kernels.txt", dir);
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "find '%s/pocl' -name '*.so' -printf '%%p %%T@\\n' | sort > '%s'",
                                    dir, list),
                     0);
    return clt_test_read_file(list);
}

/* `clt warmup --helper` for the test's model, as `clt train` starts it
 * (its parent: the shell, which runs a command after it). */
static int run_helper(void)
{
    return clt_test_shell(out, sizeof out,
                          "sh -c '" CACHES "\"%s\" warmup --helper $$ --device cpu:0 --hiddens %d --blocks %d "
                          "--batch-size %d; exit $?'",
                          dir, dir, clt_test_clt_path(), HIDDENS, BLOCKS, BATCH);
}

/* The forward warm-up, in a fresh process (this binary) with the caches. */
static int forward_child(void)
{
    clt_model *m;
    clt_status s = clt_model_create_resmlp(&m, clt_cpu(), 784, HIDDENS, BLOCKS, 10, 0);
    clt_warmup_result w;
    if (s == CLT_OK) s = clt_model_warmup(m, BATCH, CLT_OPTIMIZER_SGD, 0.0, 0, &w);
    if (s != CLT_OK) printf("forward warm-up: %s\n", clt_last_error());
    clt_model_free(m);
    return s == CLT_OK ? 0 : 1;
}

START_TEST(test_helper_fills_what_the_run_needs)
{
    NEED_POCL_CPU();
    int rc = run_helper();
    ck_assert_msg(rc == 0, "clt warmup --helper exited %d:\n%s", rc, out);
    ck_assert_msg(out[0] == '\0', "the helper printed:\n%s", out);
    char *before = kernel_files();
    ck_assert_msg(strstr(before, ".so"), "the helper compiled no kernel into %s/pocl", dir);
    char pocl[300], clt[300], log[300];
    snprintf(pocl, sizeof pocl, "POCL_CACHE_DIR=%s/pocl", dir);
    snprintf(clt, sizeof clt, "CLT_CACHE_DIR=%s/clt", dir);
    snprintf(log, sizeof log, "%s/forward.log", dir);
    const char *set[] = {pocl, clt, NULL};
    char **env = clt_test_environ_with(set);
    int code = clt_test_run_self("--forward-warmup", env, log, 600);
    free(env);
    char *said = clt_test_read_file(log);
    ck_assert_msg(code == 0, "the forward warm-up exited %d:\n%s", code, said);
    free(said);
    char *after = kernel_files();
    /* The first line that differs: a kernel compiled anew, or again. */
    size_t same = 0;
    while (before[same] && before[same] == after[same]) same++;
    while (same > 0 && after[same - 1] != '\n') same--;
    ck_assert_msg(strcmp(before, after) == 0, "the forward warm-up compiled kernels the helper had not (or again): %.300s",
                  after + same);
    free(before);
    free(after);
}
END_TEST

/* `clt train` on the test's data with the test's caches and `extra`
 * options; its exit status. */
static int train(const char *extra)
{
    return clt_test_shell(out, sizeof out,
                          CACHES "'%s' train --data '%s/data' --epochs 1 --device cpu:0 --hiddens %d --blocks %d "
                                 "--batch-size %d %s",
                          dir, dir, clt_test_clt_path(), dir, HIDDENS, BLOCKS, BATCH, extra);
}

/* The line of the run's result ("trained ..."), images/s left out. */
static void result_line(char *line, size_t len)
{
    const char *t = strstr(out, "test loss");
    ck_assert_msg(t != NULL, "no result in:\n%s", out);
    snprintf(line, len, "%.*s", (int)strcspn(t, "\n"), t);
}

static const char *said = "cold kernel caches: compiled with a helper process";

START_TEST(test_warm_cache_starts_no_helper)
{
    NEED_POCL_CPU();
    int rc = train("--helper");
    ck_assert_msg(rc == 0, "clt train exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, said), "the cold run started no helper:\n%s", out);
    char cold[512], warm[512];
    result_line(cold, sizeof cold);
    rc = train("--helper");
    ck_assert_msg(rc == 0, "clt train exited %d:\n%s", rc, out);
    ck_assert_msg(!strstr(out, said), "the warm run started a helper:\n%s", out);
    result_line(warm, sizeof warm);
    ck_assert_msg(strcmp(cold, warm) == 0, "the helper changed the result:\nwith it:    %s\nwithout it: %s", cold, warm);
}
END_TEST

/* Without --helper a cold run compiles alone. */
START_TEST(test_no_helper_by_default)
{
    NEED_POCL_CPU();
    int rc = train("");
    ck_assert_msg(rc == 0, "clt train exited %d:\n%s", rc, out);
    ck_assert_msg(!strstr(out, said), "a helper started without --helper:\n%s", out);
}
END_TEST

/* Started by a shell that ends at once, the helper ends with it. */
START_TEST(test_helper_dies_with_its_parent)
{
    NEED_POCL_CPU();
    ck_assert_int_eq(clt_test_shell(out, sizeof out,
                                    "sh -c '(exec env " CACHES "\"%s\" warmup --helper $$ --device cpu:0 --hiddens 512 "
                                    "--blocks 4 --batch-size 512 >/dev/null 2>&1) & echo $!; sleep 1'",
                                    dir, dir, clt_test_clt_path()),
                     0);
    int pid = atoi(out);
    ck_assert_msg(pid > 0, "no process id: %s", out);
    /* Gone, or a zombie its new parent has not reaped yet. */
    int rc = clt_test_shell(out, sizeof out, "for i in 1 2 3 4 5 6 7 8 9 10; do s=$(cut -d' ' -f3 /proc/%d/stat "
                            "2>/dev/null); [ -z \"$s\" ] || [ \"$s\" = Z ] && exit 0; sleep 0.2; done; kill -9 %d; "
                            "exit 1", pid, pid);
    ck_assert_msg(rc == 0, "the helper %d outlived its parent by 2 s", pid);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--forward-warmup") == 0) return forward_child();
    Suite *s = suite_create("cold_start");
    TCase *tc = clt_test_tcase("cold");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_helper_fills_what_the_run_needs);
    tcase_add_test(tc, test_warm_cache_starts_no_helper);
    tcase_add_test(tc, test_no_helper_by_default);
    tcase_add_test(tc, test_helper_dies_with_its_parent);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
