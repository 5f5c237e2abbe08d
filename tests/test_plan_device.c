/* The planning device (clt_plan_device): the same program run on a device
 * and on its planning twin allocates the same bytes in the same blocks
 * (every counter of clt_memory_get_stats but the driver's buffers, which a
 * planning device does not have, equal) and passes the same synchronization
 * points, while no kernel, fill or copy runs there (values read back are
 * zeros). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

/* The counters two runs must share: everything the book and the tensors
 * decide (the cap aside, which the caller sets). */
static void assert_same_stats(clt_device a, clt_device b, const char *what)
{
    clt_memory_stats x, y;
    ck_assert_ok(clt_memory_get_stats(a, &x));
    ck_assert_ok(clt_memory_get_stats(b, &y));
    char an[32], bn[32];
    clt_device_name(a, an, sizeof an);
    clt_device_name(b, bn, sizeof bn);
    ck_assert_msg(x.peak_allocated == y.peak_allocated, "%s: peak allocated %lld on %s, %lld on %s", what,
                  (long long)x.peak_allocated, an, (long long)y.peak_allocated, bn);
    ck_assert_msg(x.peak_reserved == y.peak_reserved, "%s: peak reserved %lld on %s, %lld on %s", what,
                  (long long)x.peak_reserved, an, (long long)y.peak_reserved, bn);
    ck_assert_int_eq(x.allocated, y.allocated);
    ck_assert_int_eq(x.reserved, y.reserved);
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) {
        ck_assert_int_eq(x.category_allocated[c], y.category_allocated[c]);
        ck_assert_msg(x.category_peak[c] == y.category_peak[c], "%s: %s peak %lld on %s, %lld on %s", what,
                      clt_memory_category_name((clt_memory_category)c), (long long)x.category_peak[c], an,
                      (long long)y.category_peak[c], bn);
    }
    ck_assert_int_eq(x.segments, y.segments);
    ck_assert_int_eq(x.cached_blocks, y.cached_blocks);
    ck_assert_int_eq(x.cache_hits, y.cache_hits);
    ck_assert_int_eq(x.splits, y.splits);
    ck_assert_int_eq(x.driver_allocs, y.driver_allocs);
    ck_assert_int_eq(x.driver_frees, y.driver_frees);
}

static clt_tensor *host_tensor(clt_device d, clt_dtype dt, int64_t rows, int64_t cols, uint64_t seed)
{
    int64_t shape[2] = {rows, cols};
    int ndim = cols ? 2 : 1;
    clt_tensor *t;
    if (dt == CLT_INT32) {
        int32_t *h = malloc((size_t)rows * sizeof *h);
        for (int64_t i = 0; i < rows; i++) h[i] = (int32_t)((i * 7 + (int64_t)seed) % 10);
        ck_assert_ok(clt_from_host(&t, d, dt, ndim, shape, h));
        free(h);
    } else {
        float *h = clt_test_random_floats(rows * cols, seed);
        ck_assert_ok(clt_from_host(&t, d, dt, ndim, shape, h));
        free(h);
    }
    return t;
}

/* A program of every kind of work: a ResMLP (recomputed or not, float32 or
 * float16) trained two steps by Adam with clipping, the loss read, then
 * evaluated, and two batches of a loader (pinned staging) on d. The loss
 * read back goes to *loss. */
static void program(clt_device d, int segments, int half, double *loss)
{
    enum { IN = 784, H = 96, BLOCKS = 4, OUT = 10, B = 48 };
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, d, IN, H, BLOCKS, OUT, 2));
    if (half) ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_model_set_recompute(m, segments));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    clt_tensor *x = host_tensor(d, CLT_FLOAT32, B, IN, 3), *y = host_tensor(d, CLT_INT32, B, 0, 1);
    for (int k = 0; k < 2; k++) {
        clt_tensor *logits = NULL, *l = NULL, *dl = NULL;
        ck_assert_ok(clt_model_zero_grad(m));
        ck_assert_ok(clt_model_forward(m, x, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&l, &dl, logits, y));
        ck_assert_ok(clt_model_backward(m, dl, NULL));
        ck_assert_ok(clt_model_clip_grad_norm(m, 1.0, NULL));
        ck_assert_ok(clt_optimizer_step(opt));
        ck_assert_ok(clt_item(l, loss));
        clt_tensor_release(logits);
        clt_tensor_release(l);
        clt_tensor_release(dl);
    }
    clt_model_set_training(m, 0);
    clt_tensor *logits = NULL, *pred = NULL;
    ck_assert_ok(clt_model_forward(m, x, &logits));
    ck_assert_ok(clt_argmax_rows(&pred, logits));
    clt_tensor_release(pred);
    clt_tensor_release(logits);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_dataset ds = clt_test_make_dataset(100, 5);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = 40;
    lo.flatten = 1;
    clt_loader *ld;
    ck_assert_ok(clt_loader_create(&ld, &ds, d, &lo));
    for (int k = 0; k < 2; k++) {
        clt_tensor *bx = NULL, *by = NULL;
        ck_assert_ok(clt_loader_next(ld, &bx, &by));
        ck_assert_ptr_nonnull(bx);
        /* Every copy done, so the real device's staging ring does not grow. */
        ck_assert_ok(clt_synchronize(d));
        clt_tensor_release(bx);
        clt_tensor_release(by);
    }
    clt_loader_free(ld);
    clt_dataset_free(&ds);
    ck_assert_ok(clt_synchronize(d));
}

static void same_program(int segments, int half)
{
    clt_device real = clt_test_device(), plan = clt_plan_device(real);
    double real_loss = 0, plan_loss = -1;
    uint64_t s0 = clt_sync_count(real), p0 = clt_sync_count(plan);
    program(real, segments, half, &real_loss);
    program(plan, segments, half, &plan_loss);
    assert_same_stats(real, plan, half ? "float16" : segments ? "recomputed" : "float32");
    assert_same_stats(clt_pinned(), clt_plan_device(clt_pinned()), "pinned staging");
    ck_assert_int_eq(clt_sync_count(real) - s0, clt_sync_count(plan) - p0);
    ck_assert_int_gt(clt_sync_count(plan) - p0, 4);
    /* Nothing ran on the planning device: its loss reads as zero. */
    ck_assert(real_loss > 0 && isfinite(real_loss));
    ck_assert(plan_loss == 0.0);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_same_program_float32) { same_program(0, 0); }
END_TEST

START_TEST(test_same_program_recompute) { same_program(CLT_RECOMPUTE_AUTO, 0); }
END_TEST

START_TEST(test_same_program_float16) { same_program(0, 1); }
END_TEST

/* Names, existence, what is refused, and that fills and kernels are skipped. */
START_TEST(test_device_values)
{
    clt_device real = clt_test_device(), plan = clt_plan_device(real);
    char name[32], want[40];
    ck_assert_ok(clt_device_name(real, want + 5, sizeof want - 5));
    memcpy(want, "plan:", 5);
    ck_assert_ok(clt_device_name(plan, name, sizeof name));
    ck_assert_str_eq(name, want);
    ck_assert(clt_device_exists(plan));
    ck_assert(!clt_device_equal(plan, real));
    ck_assert(clt_device_equal(clt_plan_device(plan), plan));
    ck_assert_ok(clt_device_name(clt_plan_device(clt_pinned()), name, sizeof name));
    ck_assert_str_eq(name, "plan:pinned");
    /* Not listed: the list is the machine's devices. */
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        ck_assert_int_ne(d.type, CLT_DEVICE_PLAN);
    }
    clt_device none = clt_plan_device(clt_gpu(99));
    ck_assert(!clt_device_exists(none));
    clt_tensor *t = NULL;
    int64_t n = 1000;
    ck_assert_status(clt_zeros(&t, none, CLT_FLOAT32, 1, &n), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "plan:gpu:99"));
    /* A fill and a kernel are skipped: the values read back are zeros. */
    clt_tensor *ones = NULL, *sum = NULL;
    ck_assert_ok(clt_ones(&ones, plan, CLT_FLOAT32, 1, &n));
    ck_assert_ok(clt_add(&sum, ones, ones));
    float host[1000];
    ck_assert_ok(clt_to_host(sum, host, sizeof host));
    for (int i = 0; i < 1000; i++) ck_assert(host[i] == 0.0f);
    ck_assert_int_eq(clt_memory_allocated(plan), 8000);
    /* Into a planning device, a copy is skipped; out of one, refused. */
    clt_tensor *r = NULL, *back = NULL, *p = NULL;
    ck_assert_ok(clt_ones(&r, real, CLT_FLOAT32, 1, &n));
    ck_assert_ok(clt_to(&p, r, plan));
    ck_assert_status(clt_to(&back, sum, real), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "planning device"));
    clt_tensor_release(p);
    clt_tensor_release(r);
    clt_tensor_release(sum);
    clt_tensor_release(ones);
    ck_assert_int_eq(clt_memory_allocated(plan), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The cap of the device planned for, and a cap of its own. */
START_TEST(test_caps)
{
    clt_device plan = clt_plan_device(clt_test_device());
    ck_assert_ok(clt_memory_set_cap(plan, 4 << 20));
    int64_t n = 2 << 20;
    clt_tensor *a = NULL, *b = NULL;
    ck_assert_status(clt_empty(&a, plan, CLT_FLOAT32, 1, &n), CLT_ERR_OUT_OF_MEMORY); /* 8 MiB: over */
    n = 768 << 10; /* 3 MiB each: the second does not fit beside the first's segment */
    ck_assert_ok(clt_empty(&a, plan, CLT_FLOAT32, 1, &n));
    ck_assert_status(clt_empty(&b, plan, CLT_FLOAT32, 1, &n), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "plan:"));
    clt_tensor_release(a);
    ck_assert_ok(clt_memory_set_cap(plan, 0));
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_device");
    TCase *tc = clt_test_tcase("plan_device");
    tcase_add_test(tc, test_device_values);
    tcase_add_test(tc, test_caps);
    tcase_add_test(tc, test_same_program_float32);
    tcase_add_test(tc, test_same_program_recompute);
    tcase_add_test(tc, test_same_program_float16);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
