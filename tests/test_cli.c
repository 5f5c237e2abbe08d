/* The `clt` tool: help and exit codes, `clt devices`, and `clt smi` showing
 * live processes from their published counters. Runs the built binary
 * ($CLT_BINARY_DIR/clt). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memory/publish.h"
#include "support.h"

typedef struct run_result {
    int status; /* exit status, or 128 + signal */
    char *out, *err;
} run_result;

static char *slurp(FILE *f)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = '\0';
    return buf;
}

/* Runs a shell command line, capturing stdout and stderr. */
static run_result run_shell(const char *cmdline)
{
    char errpath[] = "/tmp/clt-test-cli-XXXXXX";
    int fd = mkstemp(errpath);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char *full;
    ck_assert_int_ge(asprintf(&full, "%s 2>%s", cmdline, errpath), 0);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    run_result r;
    r.out = slurp(p);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    FILE *e = fopen(errpath, "r");
    ck_assert_ptr_nonnull(e);
    r.err = slurp(e);
    fclose(e);
    unlink(errpath);
    free(full);
    return r;
}

/* Runs `[env] clt args`. */
static run_result run_clt(const char *env, const char *args)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    ck_assert_msg(dir != NULL, "CLT_BINARY_DIR is not set (run through ctest)");
    char *cmd;
    ck_assert_int_ge(asprintf(&cmd, "%s '%s/clt' %s", env ? env : "", dir, args), 0);
    run_result r = run_shell(cmd);
    free(cmd);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(test_help)
{
    run_result r = run_clt(NULL, "--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "devices"));
    ck_assert_ptr_nonnull(strstr(r.out, "smi"));
    run_free(&r);
    const char *commands[] = {"devices", "smi"};
    for (int i = 0; i < 2; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        r = run_clt(NULL, args);
        ck_assert_msg(r.status == 0, "clt %s exited %d", args, r.status);
        ck_assert_msg(strncmp(r.out, "usage: clt ", 11) == 0, "clt %s printed: %s", args, r.out);
        ck_assert_str_eq(r.err, "");
        run_free(&r);
    }
}
END_TEST

START_TEST(test_usage_errors)
{
    /* Each bad invocation exits 2, says what is wrong on stderr and prints nothing on stdout. */
    const struct {
        const char *args, *message;
    } cases[] = {
        {"", "usage: clt"},
        {"frobnicate", "unknown command 'frobnicate'"},
        {"devices --all", "unexpected argument '--all'"},
        {"smi --bogus", "unknown option '--bogus'"},
        {"smi --watch 0", "--watch takes a positive number"},
        {"smi --watch=soon", "not 'soon'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run_clt(NULL, cases[i].args);
        ck_assert_msg(r.status == 2, "clt %s exited %d", cases[i].args, r.status);
        ck_assert_msg(strstr(r.err, cases[i].message), "clt %s: stderr lacks '%s': %s", cases[i].args,
                      cases[i].message, r.err);
        ck_assert_msg(r.out[0] == '\0', "clt %s printed on stdout: %s", cases[i].args, r.out);
        run_free(&r);
    }
}
END_TEST

START_TEST(test_devices_lists_what_the_library_sees)
{
    run_result r = run_clt(NULL, "devices");
    ck_assert_int_eq(r.status, 0);
    int n = clt_device_list_num_entries();
    ck_assert_int_ge(n, 1);
    ck_assert_int_eq(count_substr(r.out, "platform: "), n);
    for (int i = 0; i < n; i++) {
        clt_device_info info;
        ck_assert_ok(clt_device_list_info(i, &info));
        char row[96];
        snprintf(row, sizeof row, "%d:%d  %-6s", info.platform_index, info.device_index, info.name);
        ck_assert_msg(strstr(r.out, row), "no row '%s' in:\n%s", row, r.out);
    }
    run_free(&r);
}
END_TEST

START_TEST(test_devices_two_pocl_devices)
{
    run_result r = run_clt("env -u CLT_CPU_AS_GPU POCL_DEVICES='pthread pthread'", "devices");
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count_substr(r.out, "platform: Portable Computing Language"), 2);
    run_free(&r);

    /* Presented as GPUs: gpu:0 and gpu:1, plus the CPU again as cpu:0. */
    r = run_clt("env CLT_CPU_AS_GPU=1 POCL_DEVICES='pthread pthread'", "devices");
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count_substr(r.out, "platform: Portable Computing Language"), 3);
    ck_assert_int_eq(count_substr(r.out, "(CPU presented as GPU)"), 2);
    ck_assert_ptr_nonnull(strstr(r.out, "gpu:1"));
    ck_assert_ptr_nonnull(strstr(r.out, "cpu:0"));
    run_free(&r);
}
END_TEST

/* Finds the `clt smi --bytes` row of pid and name; returns 1 and its counters. */
static int smi_row(const char *out, int pid, const char *name, long long *alloc, long long *res, long long *peak,
                   char *command, size_t command_len)
{
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        int p, off = 0;
        char pd[32], nm[32];
        if (sscanf(line, "%d %31s %31s %lld %lld %lld %n", &p, pd, nm, alloc, res, peak, &off) == 6 && p == pid &&
            strcmp(nm, name) == 0) {
            const char *end = strchr(line + off, '\n');
            size_t len = end ? (size_t)(end - (line + off)) : strlen(line + off);
            snprintf(command, command_len, "%.*s", (int)len, line + off);
            return 1;
        }
    }
    return 0;
}

START_TEST(test_smi_shows_this_process)
{
    clt_device dev = clt_try_gpu(0);
    char name[16];
    ck_assert_ok(clt_device_name(dev, name, sizeof name));
    clt_tensor *t;
    int64_t shape[] = {1000003};
    ck_assert_ok(clt_zeros(&t, dev, CLT_FLOAT32, 1, shape));
    const char *path = clt__publish_path();
    ck_assert_ptr_nonnull(path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);

    run_result r = run_clt(NULL, "smi --bytes");
    ck_assert_int_eq(r.status, 0);
    long long alloc, res, peak;
    char command[256];
    ck_assert_msg(smi_row(r.out, (int)getpid(), name, &alloc, &res, &peak, command, sizeof command),
                  "pid %d on %s not in:\n%s", (int)getpid(), name, r.out);
    ck_assert_int_eq(alloc, 4000012);
    ck_assert_int_eq(alloc, clt_memory_allocated(dev));
    ck_assert_int_eq(res, clt_memory_reserved(dev));
    ck_assert_int_eq(peak, clt_memory_max_allocated(dev));
    ck_assert_msg(strstr(command, "test_cli"), "command is '%s'", command);
    run_free(&r);

    /* The row follows the counters: freed, the tensor's bytes stay reserved. */
    clt_tensor_release(t);
    r = run_clt(NULL, "smi --bytes");
    ck_assert_int_eq(r.status, 0);
    ck_assert(smi_row(r.out, (int)getpid(), name, &alloc, &res, &peak, command, sizeof command));
    ck_assert_int_eq(alloc, 0);
    ck_assert_int_ge(res, 4000012);
    ck_assert_int_ge(peak, 4000012);
    run_free(&r);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The child side of the tests below: allocates a tensor, prints its pid and
 * publication path ("-" when none), then exits normally or is killed. */
static int child_main(const char *how)
{
    clt_tensor *t;
    int64_t shape[] = {1024};
    if (clt_ones(&t, clt_try_gpu(0), CLT_FLOAT32, 1, shape) != CLT_OK) {
        fprintf(stderr, "%s\n", clt_last_error());
        return 1;
    }
    const char *path = clt__publish_path();
    printf("%d %s\n", (int)getpid(), path ? path : "-");
    fflush(stdout);
    if (strcmp(how, "kill") == 0) raise(SIGKILL);
    clt_tensor_release(t);
    return 0;
}

/* This test binary, from argv[0] (not /proc/self/exe, which is valgrind's
 * own binary under valgrind). */
static char self_path[4096];

/* Runs this test binary as a child; returns its pid and publication path. */
static run_result run_child(const char *env, const char *how, int *pid, char *path, size_t path_len)
{
    char *cmd;
    ck_assert_int_ge(asprintf(&cmd, "%s '%s' --child %s", env, self_path, how), 0);
    run_result r = run_shell(cmd);
    free(cmd);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%d %%%zus", path_len - 1);
    ck_assert_msg(sscanf(r.out, fmt, pid, path) == 2, "child printed '%s' (stderr '%s')", r.out, r.err);
    return r;
}

START_TEST(test_publication_file_lifetime)
{
    int pid;
    char path[512];
    struct stat st;

    /* Removed at a normal exit. */
    run_result r = run_child("", "exit", &pid, path, sizeof path);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_ne(path, "-");
    char expect[64];
    snprintf(expect, sizeof expect, "/cltensor.%d", pid);
    ck_assert_msg(strstr(path, expect), "path %s does not name pid %d", path, pid);
    ck_assert_int_ne(stat(path, &st), 0);
    run_free(&r);

    /* Left behind by a killed process until `clt smi` notices it is dead. */
    r = run_child("", "kill", &pid, path, sizeof path);
    ck_assert_int_eq(r.status, 128 + SIGKILL);
    ck_assert_int_eq(stat(path, &st), 0);
    run_free(&r);
    r = run_clt(NULL, "smi --bytes");
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_ne(stat(path, &st), 0);
    char row[32];
    snprintf(row, sizeof row, "\n%d ", pid);
    ck_assert_ptr_null(strstr(r.out, row));
    run_free(&r);

    /* CLT_NO_PUBLISH=1 publishes nothing. */
    r = run_child("CLT_NO_PUBLISH=1", "exit", &pid, path, sizeof path);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(path, "-");
    run_free(&r);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
    if (!realpath(argv[0], self_path)) snprintf(self_path, sizeof self_path, "%s", argv[0]);
    Suite *s = suite_create("cli");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_usage_errors);
    tcase_add_test(tc, test_devices_lists_what_the_library_sees);
    tcase_add_test(tc, test_devices_two_pocl_devices);
    tcase_add_test(tc, test_smi_shows_this_process);
    tcase_add_test(tc, test_publication_file_lifetime);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
