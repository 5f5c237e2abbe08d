/* Fault injection (src/core/fault.h): the N-th device allocation, kernel
 * enqueue or file write fails, for every N over a whole training step (zero
 * grad, forward, loss, backward, Adam step on a small ResMLP) and over a
 * checkpoint save. Each failure must surface as a status with a message,
 * leak nothing, leave the model usable and consistent (parameters either
 * untouched or fully updated), and leave on disk either the old or the new
 * complete checkpoint, with no temporary file behind. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "support.h"

#define B 7
#define IN_ROWS 3
#define IN_COLS 4
#define HIDDENS 16
#define CLASSES 5

static const char *const kind_names[] = {"alloc", "driver", "enqueue", "write"};

typedef struct fixture {
    clt_device dev;
    clt_model *model;
    clt_optimizer *opt;
    clt_tensor *x, *y;
} fixture;

static void fixture_free(fixture *f)
{
    clt_optimizer_free(f->opt);
    clt_model_free(f->model);
    clt_tensor_release(f->x);
    clt_tensor_release(f->y);
    memset(f, 0, sizeof *f);
}

/* The model, its optimizer and one batch; on failure, nothing. */
static clt_status fixture_try(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->dev = clt_test_cpu();
    float xs[B * IN_ROWS * IN_COLS];
    int32_t ys[B];
    clt_test_fill_uniform(xs, B * IN_ROWS * IN_COLS, 5, -1.0f, 1.0f);
    for (int i = 0; i < B; i++) ys[i] = (i * 3) % CLASSES;
    int64_t xshape[] = {B, IN_ROWS, IN_COLS}, yshape[] = {B};
    clt_status s = clt_model_create_resmlp(&f->model, f->dev, IN_ROWS * IN_COLS, HIDDENS, 1, CLASSES, 11);
    if (s == CLT_OK) s = clt_optimizer_create_adam(&f->opt, f->model, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0);
    if (s == CLT_OK) s = clt_from_host(&f->x, f->dev, CLT_FLOAT32, 3, xshape, xs);
    if (s == CLT_OK) s = clt_from_host(&f->y, f->dev, CLT_INT32, 1, yshape, ys);
    if (s != CLT_OK) fixture_free(f);
    return s;
}

static void fixture_make(fixture *f) { ck_assert_ok(fixture_try(f)); }

/* One whole training step; releases what it made on every path. */
static clt_status train_step(fixture *f, double *loss_out)
{
    clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_model_zero_grad(f->model);
    if (s == CLT_OK) s = clt_model_forward(f->model, f->x, &logits);
    if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, f->y);
    if (s == CLT_OK) s = clt_model_backward(f->model, dlogits, NULL);
    if (s == CLT_OK) s = clt_optimizer_step(f->opt);
    if (s == CLT_OK && loss_out) s = clt_item(loss, loss_out);
    clt_tensor_release(dlogits);
    clt_tensor_release(loss);
    clt_tensor_release(logits);
    return s;
}

static float *params(const fixture *f) { return clt_test_read(clt_model_parameters(f->model)); }

static int same(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

/* A status and message that name the failure. */
static void check_surfaced(clt_status s, const char *what)
{
    ck_assert_msg(s == CLT_ERR_OUT_OF_MEMORY || s == CLT_ERR_OPENCL || s == CLT_ERR_IO, "%s: status %s (%s)", what,
                  clt_status_string(s), clt_last_error());
    /* The injected failure itself, not a later one it caused. */
    ck_assert_msg(strstr(clt_last_error(), "injected by CLT_FAULT"), "%s: message '%s'", what, clt_last_error());
}

/* Sweeps kind over the first training step of a fresh model (which creates
 * the gradients and the optimizer state), with an empty allocator cache so
 * that every allocation reaches the driver. sticky: the N-th and every later
 * event fail. */
static void sweep_step(clt__fault_kind kind, int sticky)
{
    /* Reference: parameters before, after one and after two clean steps,
     * and the events one step counts. */
    fixture f;
    fixture_make(&f);
    int64_t np = clt_model_num_parameter_elements(f.model);
    float *p0 = params(&f);
    ck_assert_ok(clt_memory_empty_cache(f.dev));
    ck_assert_int_eq(clt__fault_set(NULL), 0);
    ck_assert_ok(train_step(&f, NULL));
    int64_t events = clt__fault_count(kind);
    int64_t allocated1 = clt_memory_allocated(f.dev);
    float *p1 = params(&f);
    ck_assert_ok(train_step(&f, NULL));
    float *p2 = params(&f);
    fixture_free(&f);
    clt_test_assert_no_live_tensors();
    ck_assert_int_gt(events, 0);

    int failures = 0;
    for (int64_t n = 1; n <= events + 1; n++) {
        char spec[64], what[160];
        snprintf(spec, sizeof spec, "%s:%lld%s", kind_names[kind], (long long)n, sticky ? "+" : "");
        snprintf(what, sizeof what, "training step with CLT_FAULT=%s", spec);
        fixture_make(&f);
        ck_assert_ok(clt_memory_empty_cache(f.dev));
        ck_assert_int_eq(clt__fault_set(spec), 0);
        clt_status s = train_step(&f, NULL);
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        float *p = params(&f);
        if (s != CLT_OK) {
            check_surfaced(s, what);
            failures++;
            /* Parameters change in the optimizer's one kernel, all or nothing. */
            ck_assert_msg(same(p, p0, np), "%s: failed but changed the parameters", what);
        } else {
            ck_assert_msg(!sticky || n > events, "%s: succeeded although every later event failed", what);
            ck_assert_msg(same(p, p1, np), "%s: succeeded with other parameters than a clean step", what);
        }
        free(p);
        /* Usable: a clean step continues exactly where the model stands. */
        double loss;
        ck_assert_ok(train_step(&f, &loss));
        p = params(&f);
        ck_assert_msg(same(p, s == CLT_OK ? p2 : p1, np), "%s: the next clean step diverged", what);
        ck_assert_msg(clt_memory_allocated(f.dev) == allocated1,
                      "%s: %lld bytes allocated after a clean step, not %lld", what,
                      (long long)clt_memory_allocated(f.dev), (long long)allocated1);
        free(p);
        fixture_free(&f);
        clt_test_assert_no_live_tensors();
        ck_assert_ok(clt_memory_empty_cache(clt_test_cpu()));
        ck_assert_int_eq(clt_memory_reserved(clt_test_cpu()), 0);
    }
    /* Single allocation faults may be absorbed by the allocator's retry;
     * every other plan fails the step at least once. */
    ck_assert_int_gt(failures, 0);
    printf("training step, CLT_FAULT=%s:N%s: %lld faults injected, %d surfaced as a status, %lld recovered\n",
           kind_names[kind], sticky ? "+" : "", (long long)events, failures, (long long)events - failures);
    free(p0);
    free(p1);
    free(p2);
}

START_TEST(test_step_alloc) { sweep_step(CLT__FAULT_ALLOC, 0); }
END_TEST

START_TEST(test_step_alloc_sticky) { sweep_step(CLT__FAULT_ALLOC, 1); }
END_TEST

/* Driver allocations happen only when the allocator's cache misses: this
 * sweep covers building the model and its first step from an empty cache. */
static void sweep_driver(int sticky)
{
    fixture f;
    ck_assert_ok(clt_memory_empty_cache(clt_test_cpu()));
    ck_assert_int_eq(clt__fault_set(NULL), 0);
    fixture_make(&f);
    ck_assert_ok(train_step(&f, NULL));
    int64_t events = clt__fault_count(CLT__FAULT_DRIVER);
    float *p1 = params(&f);
    int64_t np = clt_model_num_parameter_elements(f.model);
    fixture_free(&f);
    ck_assert_int_gt(events, 0);
    int failures = 0;
    for (int64_t n = 1; n <= events + 1; n++) {
        char spec[64], what[160];
        snprintf(spec, sizeof spec, "driver:%lld%s", (long long)n, sticky ? "+" : "");
        snprintf(what, sizeof what, "model and training step with CLT_FAULT=%s", spec);
        ck_assert_ok(clt_memory_empty_cache(clt_test_cpu()));
        ck_assert_int_eq(clt__fault_set(spec), 0);
        clt_status s = fixture_try(&f);
        if (s == CLT_OK) s = train_step(&f, NULL);
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        if (s != CLT_OK) {
            check_surfaced(s, what);
            failures++;
            fixture_free(&f);
        } else {
            float *p = params(&f);
            ck_assert_msg(same(p, p1, np), "%s: succeeded with other parameters than a clean step", what);
            free(p);
            ck_assert_ok(train_step(&f, NULL));
            fixture_free(&f);
        }
        clt_test_assert_no_live_tensors();
        ck_assert_ok(clt_memory_empty_cache(clt_test_cpu()));
        ck_assert_int_eq(clt_memory_reserved(clt_test_cpu()), 0);
    }
    if (sticky) ck_assert_int_eq(failures, events);
    printf("model and training step, CLT_FAULT=driver:N%s: %lld faults injected, %d surfaced as a status, %lld "
           "recovered by the allocator's retry\n",
           sticky ? "+" : "", (long long)events, failures, (long long)events - failures);
    free(p1);
}

START_TEST(test_step_driver) { sweep_driver(0); }
END_TEST

START_TEST(test_step_driver_sticky) { sweep_driver(1); }
END_TEST

START_TEST(test_step_enqueue) { sweep_step(CLT__FAULT_ENQUEUE, 0); }
END_TEST

START_TEST(test_step_enqueue_sticky) { sweep_step(CLT__FAULT_ENQUEUE, 1); }
END_TEST

static char dir[256];

static void make_dir(void) { clt_test_make_temp_dir(dir, sizeof dir, "faults"); }

static void remove_dir(void) { clt_test_remove_dir(dir); }


static void put(const char *path, const uint8_t *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(data, 1, n, fp), n);
    ck_assert_int_eq(fclose(fp), 0);
}

static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Sweeps kind over a checkpoint save (model and Adam state) that replaces
 * an older checkpoint. */
static void sweep_save(clt__fault_kind kind, int sticky)
{
    make_dir();
    char path[300], fresh[300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(fresh, sizeof fresh, "%s/fresh.safetensors", dir);
    fixture f, g;
    fixture_make(&f);
    fixture_make(&g);
    ck_assert_ok(clt_optimizer_init_state(g.opt));
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = HIDDENS, .blocks = 1, .epoch = 1, .steps = 1};
    ck_assert_ok(train_step(&f, NULL));
    ck_assert_ok(clt_checkpoint_save(path, f.model, f.opt, &info));
    size_t old_n, new_n;
    uint8_t *old_bytes = clt_test_read_bytes(path, &old_n);
    ck_assert_ok(train_step(&f, NULL));
    info.steps = 2;
    ck_assert_int_eq(clt__fault_set(NULL), 0);
    ck_assert_ok(clt_checkpoint_save(fresh, f.model, f.opt, &info));
    int64_t events = clt__fault_count(kind);
    uint8_t *new_bytes = clt_test_read_bytes(fresh, &new_n);
    ck_assert_int_eq(unlink(fresh), 0);
    ck_assert_msg(old_n != new_n || memcmp(old_bytes, new_bytes, old_n) != 0, "the two checkpoints are the same");
    ck_assert_int_gt(events, 0);

    int failures = 0;
    for (int64_t n = 1; n <= events + 1; n++) {
        char spec[64], what[160];
        snprintf(spec, sizeof spec, "%s:%lld%s", kind_names[kind], (long long)n, sticky ? "+" : "");
        snprintf(what, sizeof what, "checkpoint save with CLT_FAULT=%s", spec);
        put(path, old_bytes, old_n);
        ck_assert_int_eq(clt__fault_set(spec), 0);
        clt_status s = clt_checkpoint_save(path, f.model, f.opt, &info);
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        size_t got_n;
        uint8_t *got = clt_test_read_bytes(path, &got_n);
        if (s != CLT_OK) {
            check_surfaced(s, what);
            failures++;
            ck_assert_msg(got_n == old_n && memcmp(got, old_bytes, old_n) == 0, "%s: failed and changed the file",
                          what);
        } else {
            ck_assert_msg(got_n == new_n && memcmp(got, new_bytes, new_n) == 0,
                          "%s: succeeded but the file is not the new checkpoint", what);
        }
        free(got);
        ck_assert_msg(files_in_dir() == 1, "%s: a temporary file remains in %s", what, dir);
        /* Whatever is on disk loads, into another model. */
        clt_checkpoint_info back;
        ck_assert_ok(clt_checkpoint_load(path, g.model, g.opt, &back));
        ck_assert_int_eq(back.steps, s == CLT_OK ? 2 : 1);
    }
    ck_assert_int_eq(failures, events);
    printf("checkpoint save, CLT_FAULT=%s:N%s: %lld faults injected, %d surfaced as a status, file always old or new\n",
           kind_names[kind], sticky ? "+" : "", (long long)events, failures);
    free(old_bytes);
    free(new_bytes);
    fixture_free(&f);
    fixture_free(&g);
    clt_test_assert_no_live_tensors();
    remove_dir();
}

START_TEST(test_save_write) { sweep_save(CLT__FAULT_WRITE, 0); }
END_TEST

START_TEST(test_save_write_sticky) { sweep_save(CLT__FAULT_WRITE, 1); }
END_TEST

START_TEST(test_spec_parsing)
{
    ck_assert_int_eq(clt__fault_set("alloc:2,write:1+"), 0);
    ck_assert_int_eq(clt__fault(CLT__FAULT_ALLOC), 0);
    ck_assert_int_eq(clt__fault(CLT__FAULT_ALLOC), 1);
    ck_assert_int_eq(clt__fault(CLT__FAULT_ALLOC), 0);
    ck_assert_int_eq(clt__fault(CLT__FAULT_WRITE), 1);
    ck_assert_int_eq(clt__fault(CLT__FAULT_WRITE), 1);
    ck_assert_int_eq(clt__fault(CLT__FAULT_ENQUEUE), 0);
    ck_assert_int_eq(clt__fault_count(CLT__FAULT_ALLOC), 3);
    static const char *const bad[] = {"alloc", "alloc:", "alloc:0", "alloc:-1", "alloc:3x", "disk:1", "alloc:1,",
                                      ":1", "alloc:1++", "write:1,enqueue"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(clt__fault_set(bad[i]) == -1, "'%s' was accepted", bad[i]);
        ck_assert_int_eq(clt__fault(CLT__FAULT_ALLOC), 0);
    }
    ck_assert_int_eq(clt__fault_set(""), 0);
    ck_assert_int_eq(clt__fault(CLT__FAULT_WRITE), 0);
}
END_TEST

/* A plan's search counts a configuration as not fitting only when a
 * planning device runs out: a refused device allocation (CLT_FAULT=alloc:1)
 * moves the search on to recompute, while the host running out
 * (host:1, binding the planning model's parameter views) is the search's
 * error, with the host's message, for one device and for data parallel. */
START_TEST(test_plan_host_out_of_memory)
{
    clt_device dev = clt_test_cpu();
    clt_model *m = NULL;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, IN_ROWS * IN_COLS, HIDDENS, 1, CLASSES, 11));
    clt_plan_options o = clt_plan_default_options();
    o.device = dev;
    o.batch_size = 8;
    int64_t budget = 256 << 20, peaks[1];
    for (int parallel = 0; parallel < 2; parallel++) {
        for (int host = 0; host < 2; host++) {
            clt_plan_fit_result r;
            ck_assert_int_eq(clt__fault_set(host ? "host:1" : "alloc:1"), 0);
            clt_status s = parallel ? clt_parallel_plan_fit(m, &o, &dev, 1, &budget, 0, &r, peaks)
                                    : clt_plan_fit(m, &o, budget, 0, &r);
            ck_assert_int_eq(clt__fault_set(""), 0);
            if (host) {
                ck_assert_msg(s == CLT_ERR_OUT_OF_MEMORY, "%s: %s", clt_status_string(s), clt_last_error());
                ck_assert_msg(strstr(clt_last_error(), "out of host memory binding parameter views"), "%s",
                              clt_last_error());
            } else {
                ck_assert_msg(s == CLT_OK, "%s: %s", clt_status_string(s), clt_last_error());
                ck_assert_int_eq(r.accumulate, 1);
                ck_assert_int_eq(r.recompute_blocks, 1); /* without the fault: 0 */
            }
        }
    }
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_spec_parsing);
    tcase_add_test(tc, test_step_alloc);
    tcase_add_test(tc, test_step_alloc_sticky);
    tcase_add_test(tc, test_step_driver);
    tcase_add_test(tc, test_step_driver_sticky);
    tcase_add_test(tc, test_step_enqueue);
    tcase_add_test(tc, test_step_enqueue_sticky);
    tcase_add_test(tc, test_save_write);
    tcase_add_test(tc, test_save_write_sticky);
    tcase_add_test(tc, test_plan_host_out_of_memory);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
