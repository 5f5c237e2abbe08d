/* The timeline: a trace file in Chrome trace-event JSON, parsed back. The
 * first test must run before any device is used (queues record device
 * times only when created while tracing), also with CK_FORK=no. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static void temp_path(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "/tmp/clt_trace_%s_%ld.json", tag, (long)getpid());
}

static json_t *load_events(const char *path, json_t **root)
{
    json_error_t err;
    *root = json_load_file(path, 0, &err);
    ck_assert_msg(*root != NULL, "%s: %s (line %d)", path, err.text, err.line);
    json_t *events = json_object_get(*root, "traceEvents");
    ck_assert(json_is_array(events));
    return events;
}

/* The first event with this name (and category, when not NULL). */
static json_t *find(json_t *events, const char *name, const char *cat)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *c = json_string_value(json_object_get(e, "cat"));
        if (n && strcmp(n, name) == 0 && (!cat || (c && strcmp(c, cat) == 0))) return e;
    }
    return NULL;
}

static double num(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_number(v), "no number %s", key);
    return json_number_value(v);
}

START_TEST(test_trace_records_commands_and_sync_points)
{
    char path[256];
    temp_path(path, sizeof path, "api");
    ck_assert_ok(clt_trace_start(path));
    ck_assert_status(clt_trace_start(path), CLT_ERR_INVALID_ARGUMENT);
    enum { N = 1031 };
    float data[N];
    clt_test_fill_uniform(data, N, 1, 0, 1);
    int64_t shape[] = {N};
    clt_device dev = clt_try_gpu(0);
    char devname[32];
    ck_assert_ok(clt_device_name(dev, devname, sizeof devname));
    clt_tensor *a, *y, *s, *c = NULL;
    ck_assert_ok(clt_from_host(&a, dev, CLT_FLOAT32, 1, shape, data));
    ck_assert_ok(clt_add(&y, a, a));
    ck_assert_ok(clt_sum(&s, y));
    if (clt_num_gpus() > 1) ck_assert_ok(clt_to(&c, y, clt_gpu(1)));
    double v;
    ck_assert_ok(clt_item(s, &v));
    ck_assert_ok(clt_trace_stop());
    ck_assert_ok(clt_trace_stop()); /* nothing running: fine */

    json_t *root, *events = load_events(path, &root);
    ck_assert_str_eq(json_string_value(json_object_get(root, "displayTimeUnit")), "ms");
    json_t *add = find(events, "add_f32", "kernel");
    ck_assert_ptr_nonnull(add);
    ck_assert_str_eq(json_string_value(json_object_get(add, "ph")), "X");
    ck_assert(num(add, "dur") >= 0);
    json_t *args = json_object_get(add, "args");
    ck_assert_str_eq(json_string_value(json_object_get(args, "device")), devname);
    double queued = num(args, "queued_us"), submit = num(args, "submit_us"), start = num(args, "start_us"),
           end = num(args, "end_us");
    ck_assert(queued <= submit && submit <= start && start <= end);
    ck_assert_double_eq_tol(num(add, "ts"), start, 1e-3);

    char upload[64];
    snprintf(upload, sizeof upload, "host->%s", devname);
    json_t *copy = find(events, upload, "copy");
    ck_assert_ptr_nonnull(copy);
    ck_assert_int_eq((int)num(json_object_get(copy, "args"), "bytes"), N * 4);
    if (c) {
        json_t *p2p = find(events, "gpu:0->gpu:1", "copy");
        ck_assert_ptr_nonnull(p2p);
        ck_assert_int_eq((int)num(json_object_get(p2p, "args"), "bytes"), N * 4);
    }

    json_t *sync = find(events, "clt_item", "sync");
    ck_assert_ptr_nonnull(sync);
    ck_assert_int_eq((int)num(sync, "tid"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(sync, "args"), "device")), devname);
    /* The host waited for the reduction it reads. */
    ck_assert(num(sync, "ts") + num(sync, "dur") + 1.0 >= num(add, "ts"));

    /* Rows are named: the host and each device. */
    int named_host = 0, named_dev = 0;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!n || strcmp(n, "thread_name") != 0) continue;
        const char *label = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
        named_host |= strcmp(label, "host") == 0;
        named_dev |= strcmp(label, devname) == 0;
    }
    ck_assert(named_host && named_dev);
    json_decref(root);
    unlink(path);
    clt_tensor_release(a);
    clt_tensor_release(y);
    clt_tensor_release(s);
    clt_tensor_release(c);
}
END_TEST

/* CLT_TRACE starts the trace; the file is written at exit without a stop.
 * A fresh process (an example) reads the environment. */
START_TEST(test_trace_from_environment_written_at_exit)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    ck_assert_msg(dir && *dir, "CLT_BINARY_DIR is not set (run through ctest)");
    char path[256], cmd[1024];
    temp_path(path, sizeof path, "env");
    unlink(path);
    snprintf(cmd, sizeof cmd, "CLT_TRACE='%s' '%s/examples/async' --size 32 >/dev/null 2>&1", path, dir);
    int status = system(cmd);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    json_t *root, *events = load_events(path, &root);
    ck_assert_ptr_nonnull(find(events, "clt_synchronize", "sync"));
    /* Every product is a traced kernel (CLBlastSgemm, or cltensor's own GEMM on CPUs). */
    int gemms = 0;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *ph = json_string_value(json_object_get(e, "ph"));
        gemms += n && strcasestr(n, "gemm") && ph && strcmp(ph, "X") == 0;
    }
    ck_assert_int_ge(gemms, 33); /* the warm-up and the 32 products */
    json_decref(root);
    unlink(path);
}
END_TEST

/* A path that cannot be written is refused when the trace starts; one that
 * goes away while tracing fails at stop. Both name the path. */
START_TEST(test_trace_unwritable_path_fails)
{
    ck_assert_status(clt_trace_start(NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_trace_start("/nonexistent-dir/trace.json"), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "/nonexistent-dir/trace.json"));
    char dir[256], path[512];
    clt_test_make_temp_dir(dir, sizeof dir, "trace");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    ck_assert_ok(clt_trace_start(path));
    clt_tensor *t;
    int64_t shape[] = {8};
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_int_eq(rmdir(dir), 0);
    ck_assert_status(clt_trace_stop(), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
    clt_tensor_release(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_trace_records_commands_and_sync_points);
    tcase_add_test(tc, test_trace_from_environment_written_at_exit);
    tcase_add_test(tc, test_trace_unwritable_path_fails);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
