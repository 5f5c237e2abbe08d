/* The examples build and run: each exits 0 and prints the chapter's key
 * lines. The binaries are found under $CLT_BINARY_DIR/examples (set by ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

/* Runs examples/<name> (which may carry arguments) with `env` (may be "")
 * prefixed; returns its output
 * (malloc'd) and stores the exit status. */
static char *run_example(const char *name, const char *env, int *status)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    ck_assert_msg(dir && *dir, "CLT_BINARY_DIR is not set (run through ctest)");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s/examples/'%s 2>&1", env, dir, name);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 0, n;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    while ((n = fread(out + len, 1, cap - 1 - len, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
    }
    out[len] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static void assert_has(const char *out, const char *line)
{
    ck_assert_msg(strstr(out, line) != NULL, "output lacks \"%s\":\n%s", line, out);
}

START_TEST(test_devices_example)
{
    int status;
    char *out = run_example("devices", "", &status);
    ck_assert_msg(status == 0, "devices exited with %d:\n%s", status, out);
    int n = clt_num_gpus();
    char line[256];
    assert_has(out, "cpu(), gpu(0), gpu(1): cpu:0 gpu:0 gpu:1\n");
    snprintf(line, sizeof line, "num_gpus(): %d\n", n);
    assert_has(out, line);
    if (n == 0) assert_has(out, "try_gpu(), try_gpu(10), try_all_gpus(): cpu:0 cpu:0 [cpu:0]\n");
    if (n == 2) assert_has(out, "try_gpu(), try_gpu(10), try_all_gpus(): gpu:0 cpu:0 [gpu:0, gpu:1]\n");
    const char *d0 = n > 0 ? "gpu:0" : "cpu:0", *d1 = n > 1 ? "gpu:1" : "cpu:0";
    snprintf(line, sizeof line, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='%s')\n", d0);
    assert_has(out, line);
    snprintf(line, sizeof line, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='%s')\n", d1);
    assert_has(out, line);
    if (n > 1)
        assert_has(out, "X + Y: CLT_ERR_DEVICE_MISMATCH: clt_add: tensors are on different devices (gpu:0 and "
                        "gpu:1)");
    else
        assert_has(out, "X + Y: X and Y share");
    assert_has(out, "Y + Z:\ntensor([[1.");
    assert_has(out, "clt_to(Z, try_gpu(1)) is Z: true\n");
    free(out);
}
END_TEST

START_TEST(test_memory_example)
{
    int status;
    char *out = run_example("memory", "", &status);
    ck_assert_msg(status == 0, "memory exited with %d:\n%s", status, out);
    assert_has(out, clt_num_gpus() > 0 ? "device gpu:0\n" : "device cpu:0\n");
    assert_has(out, "after creating big:  1024.0 MiB allocated,  1024.0 MiB reserved\n");
    assert_has(out, "after deleting it :     0.0 MiB allocated,  1024.0 MiB reserved\n");
    assert_has(out, "after empty_cache :     0.0 MiB allocated,     0.0 MiB reserved\n");
    assert_has(out, "peak allocated: 1024.0 MiB\n");
    /* A GPU-class device's free memory is unknown (docs/gpu.md). */
    const char *cls = getenv("CLT_DEVICE_CLASS");
    int gpu_class = cls && strcasecmp(cls, "gpu") == 0;
    assert_has(out, gpu_class ? "baseline          : device free memory unknown" : "baseline          : device has ");
    assert_has(out, "MiB total\n");
    /* The report: every tensor was "other", peaking at 1 GiB. */
    char line[128];
    snprintf(line, sizeof line, "    %-16s %10.1f %10.1f\n", "other", 0.0, 1024.0);
    assert_has(out, line);
    snprintf(line, sizeof line, "    %-16s %10.1f %10.1f\n", "optimizer state", 0.0, 0.0);
    assert_has(out, line);
    free(out);
}
END_TEST

START_TEST(test_memory_example_bad_device)
{
    int status;
    char *out = run_example("memory", "CLT_DEVICE=gpu:9", &status);
    ck_assert_int_eq(status, 1);
    assert_has(out, "CLT_ERR_NO_DEVICE: no such device gpu:9");
    free(out);
}
END_TEST

/* Exercise 4, scaled down: splits the work over two devices when there are
 * two GPUs, else says why it skips that half. */
START_TEST(test_two_devices_example)
{
    int status;
    char *out = run_example("two_devices --size 128 --count 8", "", &status);
    ck_assert_msg(status == 0, "two_devices exited %d: %s", status, out);
    assert_has(out, clt_num_gpus() >= 2 ? "speedup: " : "two devices: skipped");
    free(out);
}
END_TEST

/* docs/own-data.md's program: it writes a CSV (XOR of two bits, named
 * "one" and "zero"), trains, saves, reloads the model from the file alone
 * and predicts the four rows right; the file it saved serves clt predict. */
START_TEST(test_own_data_example)
{
    char dir[256], env[300], out2[4096];
    clt_test_make_temp_dir(dir, sizeof dir, "own-data");
    snprintf(env, sizeof env, "cd '%s' &&", dir);
    int status;
    char *out = run_example("own_data", env, &status);
    ck_assert_msg(status == 0, "own_data exited %d: %s", status, out);
    assert_has(out, "0 0: zero ");
    assert_has(out, "1 0: one ");
    assert_has(out, "0 1: one ");
    assert_has(out, "1 1: zero ");
    int rc = clt_test_shell(out2, sizeof out2, "%s predict --load %s/xor.safetensors --input %s/xor.csv",
                            clt_test_clt_path(), dir, dir);
    const char *want = "predicted,p_one,p_zero\nzero,";
    ck_assert_msg(rc == 0 && strncmp(out2, want, strlen(want)) == 0, "exit %d: %.300s", rc, out2);
    free(out);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    const char *bin = getenv("CLT_BINARY_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/devices", bin ? bin : ".");
    if (access(path, X_OK) != 0)
        return clt_test_skip_all("examples", "%s is not built (configure with -DCLT_BUILD_EXAMPLES=ON)", path);
    Suite *s = suite_create("examples");
    TCase *tc = clt_test_tcase("run");
    tcase_add_test(tc, test_devices_example);
    tcase_add_test(tc, test_memory_example);
    tcase_add_test(tc, test_memory_example_bad_device);
    tcase_add_test(tc, test_two_devices_example);
    tcase_add_test(tc, test_own_data_example);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
