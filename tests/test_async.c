/* Asynchronous dispatch: operations only enqueue, synchronization points are
 * counted and can be reported or refused, copies between devices and
 * platforms wait on events (never on the host), and blocking mode waits for
 * every command. A "gate" (a user event the device queue waits on) holds
 * the device back, so "has not run yet" is a fact, not a timing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/device_internal.h"
#include "support.h"
#include "tensor/tensor_internal.h"

/* 1 when the tensor's last write has finished. */
static int written(const clt_tensor *t)
{
    cl_event ev = t->st->last_write;
    if (!ev) return 1;
    cl_int exec = CL_QUEUED;
    clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
    return exec == CL_COMPLETE;
}

static uint64_t total_syncs(void)
{
    uint64_t n = clt_sync_count(clt_pinned());
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        n += clt_sync_count(d);
    }
    return n;
}

START_TEST(test_ops_only_enqueue)
{
    enum { N = 1031 };
    float a[N], b[N];
    clt_test_fill_uniform(a, N, 1, -1, 1);
    clt_test_fill_uniform(b, N, 2, -1, 1);
    int64_t shape[] = {N}, mshape[] = {7, 13}, m2shape[] = {13, 5};
    clt_device dev = clt_try_gpu(0);
    clt_tensor *ta, *tb, *y, *m1, *m2, *mm, *sum;
    /* Builds the kernels before the gate (building is not what is tested). */
    ck_assert_ok(clt_from_host(&ta, dev, CLT_FLOAT32, 1, shape, a));
    ck_assert_ok(clt_add(&y, ta, ta));
    ck_assert_ok(clt_sum(&sum, y));
    clt_tensor_release(y);
    clt_tensor_release(sum);
    ck_assert_ok(clt_synchronize(dev));
    clt_sync_reset_count(dev);

    cl_event gate = clt_test_close_gate(dev);
    ck_assert_ok(clt_from_host(&tb, dev, CLT_FLOAT32, 1, shape, b));
    ck_assert_ok(clt_add(&y, ta, tb));     /* y = a + b */
    ck_assert_ok(clt_add_(y, ta));         /* y = 2a + b */
    ck_assert_ok(clt_scale_(y, 0.5f));     /* y = a + b/2 */
    ck_assert_ok(clt_rand(&m1, dev, 2, mshape, 3));
    ck_assert_ok(clt_rand(&m2, dev, 2, m2shape, 4));
    ck_assert_ok(clt_matmul(&mm, m1, m2));
    ck_assert_ok(clt_sum(&sum, y));
    ck_assert_int_eq(clt_sync_count(dev), 0);
    ck_assert_int_eq(written(y), 0);
    ck_assert_int_eq(written(sum), 0);
    clt_test_open_gate(gate);

    double s;
    ck_assert_ok(clt_item(sum, &s));
    ck_assert_int_eq(clt_sync_count(dev), 1);
    double want = 0;
    for (int i = 0; i < N; i++) want += (double)a[i] + 0.5 * (double)b[i];
    ck_assert_double_eq_tol(s, want, 1e-3 * N);
    float *host = clt_test_read(y);
    ck_assert_int_eq(clt_sync_count(dev), 2);
    for (int i = 0; i < N; i++) ck_assert_float_eq_tol(host[i], a[i] + 0.5f * b[i], 1e-5f);
    free(host);
    ck_assert_ok(clt_synchronize(dev));
    ck_assert_int_eq(clt_sync_count(dev), 3);
    ck_assert_ok(clt_synchronize_all());
    ck_assert_uint_ge(clt_sync_count(dev), 4);
    clt_sync_reset_count(dev);
    ck_assert_int_eq(clt_sync_count(dev), 0);
    ck_assert_int_eq(clt_sync_count(clt_gpu(99)), 0);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(y);
    clt_tensor_release(m1);
    clt_tensor_release(m2);
    clt_tensor_release(mm);
    clt_tensor_release(sum);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* One training step: forward, loss, backward, optimizer step. */
static void train_step(clt_model *m, clt_optimizer *opt, clt_tensor *x, clt_tensor *labels, clt_tensor **loss)
{
    clt_tensor *logits, *dlogits;
    ck_assert_ok(clt_model_zero_grad(m));
    ck_assert_ok(clt_model_forward(m, x, &logits));
    ck_assert_ok(clt_cross_entropy_loss_grad(loss, &dlogits, logits, labels));
    ck_assert_ok(clt_model_backward(m, dlogits, NULL));
    ck_assert_ok(clt_optimizer_step(opt));
    clt_tensor_release(logits);
    clt_tensor_release(dlogits);
}

START_TEST(test_training_step_has_no_sync_point)
{
    enum { B = 19, IN = 37, OUT = 10 };
    clt_device dev = clt_try_gpu(0);
    float x[B * IN];
    int32_t y[B];
    clt_test_fill_uniform(x, B * IN, 5, 0, 1);
    for (int i = 0; i < B; i++) y[i] = (i * 7) % OUT;
    int64_t xs[] = {B, IN}, ys[] = {B}, hidden[] = {29};
    clt_model *m;
    clt_optimizer *opt;
    clt_tensor *tx, *ty, *loss;
    ck_assert_ok(clt_model_create_mlp(&m, dev, IN, 1, hidden, OUT, 7));
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    ck_assert_ok(clt_from_host(&tx, dev, CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&ty, dev, CLT_INT32, 1, ys, y));
    /* Warm-up: kernels built, gradients and optimizer state created. */
    train_step(m, opt, tx, ty, &loss);
    clt_tensor_release(loss);
    ck_assert_ok(clt_synchronize_all());
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        clt_sync_reset_count(d);
    }
    clt_sync_reset_count(clt_pinned());

    /* With sync points refused, a full step still succeeds... */
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    cl_event gate = clt_test_close_gate(dev);
    train_step(m, opt, tx, ty, &loss);
    /* ...and ran nothing yet: the host raced ahead of the device. */
    ck_assert_int_eq(written(loss), 0);
    ck_assert_int_eq(total_syncs(), 0);
    double value;
    ck_assert_status(clt_item(loss, &value), CLT_ERR_SYNC);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_item"));
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_test_open_gate(gate);
    ck_assert_int_eq(total_syncs(), 0);
    ck_assert_ok(clt_item(loss, &value));
    ck_assert_int_eq(total_syncs(), 1);
    ck_assert(value > 0 && value < 10);
    clt_tensor_release(loss);
    clt_tensor_release(tx);
    clt_tensor_release(ty);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_sync_debug_error)
{
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    ck_assert_int_eq(clt_sync_get_debug(), CLT_SYNC_DEBUG_ERROR);
    clt_sync_reset_count(clt_test_cpu());
    clt_tensor *t;
    int64_t shape[] = {3};
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    float host[3];
    char buf[128];
    ck_assert_status(clt_to_host(t, host, sizeof host), CLT_ERR_SYNC);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_to_host"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), clt_test_cpu_name()));
    ck_assert_status(clt_tensor_format(t, buf, sizeof buf), CLT_ERR_SYNC);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_tensor_format"));
    ck_assert_status(clt_synchronize(clt_test_cpu()), CLT_ERR_SYNC);
    ck_assert_status(clt_synchronize_all(), CLT_ERR_SYNC);
    ck_assert_int_eq(clt_sync_count(clt_test_cpu()), 0);
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    ck_assert_ok(clt_to_host(t, host, sizeof host));
    ck_assert_float_eq(host[2], 1.0f);
    ck_assert_int_eq(clt_sync_count(clt_test_cpu()), 1);
    clt_tensor_release(t);
}
END_TEST

START_TEST(test_sync_debug_warn_names_call_and_device)
{
    char path[] = "/tmp/clt_sync_warnXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    ck_assert_int_ge(dup2(fd, 2), 0);
    clt_sync_set_debug(CLT_SYNC_DEBUG_WARN);
    clt_tensor *t;
    int64_t shape[] = {1};
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape, 4.0));
    double v;
    clt_status s = clt_item(t, &v);
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_ok(s);
    ck_assert_double_eq(v, 4.0);
    char text[512] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    close(fd);
    unlink(path);
    ck_assert_msg(strstr(text, "clt_item") && strstr(text, clt_test_cpu_name()), "warning was: %s", text);
    ck_assert_ptr_eq(strchr(text, '\n'), text + strlen(text) - 1); /* one line */
    clt_tensor_release(t);
}
END_TEST

/* A sync point inside a public call is reported as that call, with what
 * inside it synchronized, not as the internal read. */
START_TEST(test_sync_points_name_the_public_call)
{
    enum { B = 8, IN = 12, OUT = 4 };
    clt_device dev = clt_try_gpu(0);
    float x[B * IN];
    int32_t y[B];
    clt_test_fill_uniform(x, B * IN, 9, 0, 1);
    for (int i = 0; i < B; i++) y[i] = i % OUT;
    int64_t xs[] = {B, IN}, ys[] = {B}, hidden[] = {6};
    clt_tensor *tx, *ty, *logits, *loss, *dlogits;
    ck_assert_ok(clt_from_host(&tx, dev, CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&ty, dev, CLT_INT32, 1, ys, y));
    for (int half = 0; half < 2; half++) {
        clt_model *m;
        clt_optimizer *opt;
        ck_assert_ok(clt_model_create_mlp(&m, dev, IN, 1, hidden, OUT, 5));
        if (half) ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
        ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.1f, 0.0f, 0.0f));
        ck_assert_ok(clt_model_zero_grad(m));
        ck_assert_ok(clt_model_forward(m, tx, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, ty));
        ck_assert_ok(clt_model_backward(m, dlogits, NULL));
        clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
        double norm;
        ck_assert_status(clt_model_clip_grad_norm(m, 1.0, &norm), CLT_ERR_SYNC);
        ck_assert_msg(strstr(clt_last_error(), "clt_model_clip_grad_norm (reading the norm) on ") &&
                          !strstr(clt_last_error(), "clt_item"),
                      "%s", clt_last_error());
        ck_assert_ok(clt_optimizer_step(opt)); /* no sync point: a float16 step decides on the device */
        if (half) {
            /* Reading its outcome back is one. */
            ck_assert_status(clt_model_loss_scale_state(m, NULL, NULL, NULL), CLT_ERR_SYNC);
            ck_assert_msg(strstr(clt_last_error(), "clt_model_loss_scale_state (reading the loss scaler) on ") &&
                              !strstr(clt_last_error(), "clt_item"),
                          "%s", clt_last_error());
        }
        clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
        ck_assert_ok(clt_model_clip_grad_norm(m, 1.0, &norm));
        ck_assert(norm > 0);
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
        clt_optimizer_free(opt);
        clt_model_free(m);
    }
    clt_tensor_release(tx);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_launch_blocking_waits_for_each_command)
{
    clt_sync_reset_count(clt_test_cpu());
    clt_launch_set_blocking(1);
    ck_assert_int_eq(clt_launch_get_blocking(), 1);
    clt_tensor *a, *y;
    int64_t shape[] = {4099};
    ck_assert_ok(clt_ones(&a, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_int_eq(written(a), 1);
    ck_assert_ok(clt_add(&y, a, a));
    ck_assert_int_eq(written(y), 1);
    ck_assert_int_eq(clt_sync_count(clt_test_cpu()), 0);
    clt_launch_set_blocking(0);
    float *h = clt_test_read(y);
    ck_assert_float_eq(h[4098], 2.0f);
    free(h);
    clt_tensor_release(a);
    clt_tensor_release(y);
}
END_TEST

/* src gated, so the copy must be ordered after src's producers by events
 * alone; dst then computes on it, and nothing waits on the host (sync
 * points are refused meanwhile). Between contexts this is the pinned
 * staging path. */
static void check_copy_ordered(clt_device from, clt_device to)
{
    enum { N = 100003 };
    float *data = malloc(N * sizeof *data);
    clt_test_fill_uniform(data, N, 11, -2, 2);
    int64_t shape[] = {N};
    clt_tensor *x, *warm, *z, *w;
    ck_assert_ok(clt_from_host(&x, from, CLT_FLOAT32, 1, shape, data));
    ck_assert_ok(clt_from_host(&warm, to, CLT_FLOAT32, 1, shape, data));
    ck_assert_ok(clt_add_(warm, warm));
    ck_assert_ok(clt_scale_(x, 1.0f));
    ck_assert_ok(clt_synchronize_all());
    clt_sync_reset_count(from);
    clt_sync_reset_count(to);

    cl_event gate = clt_test_close_gate(from);
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR); /* any host wait would fail the calls below */
    ck_assert_ok(clt_scale_(x, 2.0f));
    ck_assert_ok(clt_add_(x, x)); /* x = 4 data, not yet computed */
    ck_assert_ok(clt_to(&z, x, to));
    ck_assert_ok(clt_add(&w, z, z)); /* w = 8 data on the destination */
    ck_assert_ok(clt_scale_(x, 0.0f)); /* a later write to x must not reach z */
    ck_assert_int_eq(written(z), 0);
    ck_assert_int_eq(written(w), 0);
    ck_assert_int_eq(clt_sync_count(from) + clt_sync_count(to), 0);
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_test_open_gate(gate);

    float *h = clt_test_read(w);
    for (int i = 0; i < N; i++) ck_assert_float_eq_tol(h[i], 8.0f * data[i], 1e-5f);
    free(h);
    clt_tensor_release(x);
    clt_tensor_release(warm);
    clt_tensor_release(z);
    clt_tensor_release(w);
    free(data);
}

/* Long work without a gate: many queued kernels, then the copy. */
static void check_copy_after_long_work(clt_device from, clt_device to)
{
    enum { N = 262147, STEPS = 40 };
    int64_t shape[] = {N};
    clt_tensor *x, *one, *z;
    ck_assert_ok(clt_zeros(&x, from, CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_ones(&one, from, CLT_FLOAT32, 1, shape));
    for (int i = 0; i < STEPS; i++) ck_assert_ok(clt_add_(x, one));
    ck_assert_ok(clt_to(&z, x, to));
    float *h = clt_test_read(z);
    ck_assert_float_eq(h[0], (float)STEPS);
    ck_assert_float_eq(h[N - 1], (float)STEPS);
    free(h);
    clt_tensor_release(x);
    clt_tensor_release(one);
    clt_tensor_release(z);
}

static int both_exist(clt_device a, clt_device b) { return clt_device_exists(a) && clt_device_exists(b); }

START_TEST(test_copies_between_devices_are_ordered)
{
    clt_device pairs[][2] = {{clt_gpu(0), clt_gpu(1)}, {clt_gpu(1), clt_gpu(0)}, {clt_gpu(0), clt_test_cpu()},
                             {clt_test_cpu(), clt_gpu(0)}, {clt_test_cpu(), clt_pinned()}, {clt_pinned(), clt_test_cpu()}};
    int tested = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (!both_exist(pairs[i][0], pairs[i][1])) continue;
        if (pairs[i][0].type != CLT_DEVICE_PINNED && pairs[i][1].type != CLT_DEVICE_PINNED)
            check_copy_ordered(pairs[i][0], pairs[i][1]);
        if (pairs[i][0].type != CLT_DEVICE_PINNED) check_copy_after_long_work(pairs[i][0], pairs[i][1]);
        tested++;
    }
    ck_assert_int_gt(tested, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Keeping the results of queued work makes the allocator ask the driver for
 * new segments; getting one must not make the host wait for the work queued
 * ahead (pocl runs even a side queue's fill only after it). The gate holds
 * the device back; the trace records every host wait, counted or not. */
START_TEST(test_new_segments_do_not_wait)
{
    char dir[64], path[128];
    clt_test_make_temp_dir(dir, sizeof dir, "segments");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    clt_device dev = clt_try_gpu(0);
    int64_t shape[] = {3 << 20}; /* 12 MiB: a driver buffer of its own */
    clt_tensor *kept[6];
    ck_assert_ok(clt_zeros(&kept[0], dev, CLT_FLOAT32, 1, shape)); /* builds the fill kernel */
    ck_assert_ok(clt_synchronize(dev));
    clt_tensor_release(kept[0]);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_memory_stats before, after;
    ck_assert_ok(clt_memory_get_stats(dev, &before));
    clt_sync_reset_count(dev);
    ck_assert_ok(clt_trace_start(path));
    cl_event gate = clt_test_close_gate(dev);
    for (int i = 0; i < 6; i++) {
        ck_assert_ok(clt_zeros(&kept[i], dev, CLT_FLOAT32, 1, shape));
        if (i) ck_assert_ok(clt_add_(kept[i], kept[i - 1]));
    }
    ck_assert_int_eq(clt_sync_count(dev), 0);
    ck_assert_int_eq(written(kept[5]), 0);
    ck_assert_ok(clt_memory_get_stats(dev, &after));
    ck_assert_int_ge((int64_t)(after.driver_allocs - before.driver_allocs), 6);
    clt_test_open_gate(gate);
    ck_assert_ok(clt_synchronize(dev));
    ck_assert_ok(clt_trace_stop());
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    ck_assert_msg(len > 0 && strstr(text, "clt_synchronize"), "no trace written:\n%.2000s", text);
    ck_assert_msg(!strstr(text, "\"wait\""), "the host waited while queueing:\n%.4000s", text);
    float *host = clt_test_read(kept[5]);
    ck_assert_float_eq(host[0], 0.0f);
    ck_assert_float_eq(host[shape[0] - 1], 0.0f);
    free(host);
    for (int i = 0; i < 6; i++) clt_tensor_release(kept[i]);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Where the library may wait for a device: sync.c only (the sync points,
 * clt_trace_stop's among them, and short side-queue waits). */
static int allowed(const char *path)
{
    return strstr(path, "src/device/sync.c") != NULL;
}

/* Scans src/ for host waits elsewhere. */
static void scan(const char *dir, int *found, char *where, size_t len)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = strlen(path);
        if (e->d_type == DT_DIR) {
            scan(path, found, where, len);
            continue;
        }
        if (n < 2 || strcmp(path + n - 2, ".c") != 0) continue;
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        char line[4096];
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            if (!strstr(line, "clFinish(") && !strstr(line, "clWaitForEvents(") && !strstr(line, "CL_TRUE") &&
                !strstr(line, "CL_BLOCKING"))
                continue;
            if (allowed(path)) continue;
            (*found)++;
            size_t used = strlen(where);
            snprintf(where + used, len - used, "%s:%d ", path, lineno);
        }
        fclose(f);
    }
    closedir(d);
}

START_TEST(test_no_host_wait_outside_sync_points)
{
    const char *root = getenv("CLT_SOURCE_DIR");
    ck_assert_ptr_nonnull(root);
    char src[1024], where[4096] = "";
    snprintf(src, sizeof src, "%s/src", root);
    int found = 0;
    scan(src, &found, where, sizeof where);
    ck_assert_msg(found == 0, "host waits outside the sync points: %s", where);
}
END_TEST

/* Runs build/examples/<cmd> with `env` prefixed (through ctest, which sets
 * CLT_BINARY_DIR); returns its output and stores its exit status. A fresh
 * process is also how the environment switches are tested: the library
 * reads them once. */
static char *run_example(const char *env, const char *cmd, int *status)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    ck_assert_msg(dir && *dir, "CLT_BINARY_DIR is not set (run through ctest)");
    char line[2048];
    snprintf(line, sizeof line, "%s '%s'/examples/%s 2>&1", env, dir, cmd);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16;
    char *out = calloc(1, cap);
    ck_assert_ptr_nonnull(out);
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static void assert_has(const char *out, const char *text)
{
    ck_assert_msg(strstr(out, text) != NULL, "output lacks \"%s\":\n%s", text, out);
}

static char *run_ok(const char *cmd)
{
    int status;
    char *out = run_example("", cmd, &status);
    ck_assert_msg(status == 0, "%s exited with %d:\n%s", cmd, status, out);
    return out;
}

START_TEST(test_examples_run)
{
    char *out = run_ok("async --size 96");
    assert_has(out, "32 products of 96x96 matrices on ");
    assert_has(out, "time to queue 32 matrix products: ");
    assert_has(out, "time until they all finished:     ");
    assert_has(out, "synchronization points while queueing: 0\n");
    free(out);
    out = run_ok("pinned --copies 3");
    assert_has(out, "pageable copy:              ");
    assert_has(out, "pinned, non-blocking copy:  ");
    assert_has(out, "writing the pinned source while its copy may run: ");
    free(out);
    /* Random images, 2 steps of 256: one sync point per step plus the final
     * clt_synchronize, against one read and the synchronize. */
    out = run_ok("sync_points --data /nonexistent --limit 512");
    assert_has(out, "training on random images");
    assert_has(out, "2 steps, 3 synchronization points\n");
    assert_has(out, "2 steps, 2 synchronization points\n");
    free(out);
}
END_TEST

START_TEST(test_environment_switches)
{
    int status;
    char *out = run_example("CLT_SYNC_DEBUG=warn", "async --size 32", &status);
    ck_assert_msg(status == 0, "%s", out);
    assert_has(out, "cltensor: synchronization point: clt_synchronize waits for ");
    free(out);
    /* The example's first sync point is refused, and it stops there. */
    out = run_example("CLT_SYNC_DEBUG=error", "async --size 32", &status);
    ck_assert_int_eq(status, 1);
    assert_has(out, "CLT_ERR_SYNC: clt_synchronize on ");
    assert_has(out, "CLT_SYNC_DEBUG=error");
    free(out);
    out = run_example("CLT_LAUNCH_BLOCKING=1", "async --size 32", &status);
    ck_assert_msg(status == 0, "%s", out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("async");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ops_only_enqueue);
    tcase_add_test(tc, test_new_segments_do_not_wait);
    tcase_add_test(tc, test_training_step_has_no_sync_point);
    tcase_add_test(tc, test_sync_debug_error);
    tcase_add_test(tc, test_sync_debug_warn_names_call_and_device);
    tcase_add_test(tc, test_sync_points_name_the_public_call);
    tcase_add_test(tc, test_launch_blocking_waits_for_each_command);
    tcase_add_test(tc, test_copies_between_devices_are_ordered);
    tcase_add_test(tc, test_no_host_wait_outside_sync_points);
    tcase_add_test(tc, test_examples_run);
    tcase_add_test(tc, test_environment_switches);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
