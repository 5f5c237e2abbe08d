/* The memory planner against the allocator: the chapter's exercise 1
 * (predicted vs measured peak of a training step at batch 64, 256 and 1024,
 * for the four-plateau MLP with Adam and for a checkpointed ResMLP, in
 * float32 and in float16 with loss scaling) and exercise 2 (the batch at
 * which each variant runs out of memory under a cap, against the predicted
 * largest batch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static clt_tensor *batch_x(int64_t rows, int64_t cols)
{
    float *host = malloc((size_t)(rows * cols) * sizeof *host);
    clt_test_fill_uniform(host, rows * cols, (uint64_t)rows, -1.0f, 1.0f);
    int64_t shape[2] = {rows, cols};
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_FLOAT32, 2, shape, host));
    free(host);
    return t;
}

static clt_tensor *batch_labels(int64_t rows, int classes)
{
    int32_t *host = malloc((size_t)rows * sizeof *host);
    for (int64_t i = 0; i < rows; i++) host[i] = (int32_t)(i * 7 % classes);
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_INT32, 1, &rows, host));
    free(host);
    return t;
}

/* The trainer's running loss sum, made after the optimizer as the trainer
 * makes it (one per model: the tests free it with the model). */
static clt_tensor *loss_sum;

static void make_loss_sum(void)
{
    int64_t one = 1;
    clt_tensor_release(loss_sum);
    ck_assert_ok(clt_zeros(&loss_sum, clt_test_device(), CLT_FLOAT32, 1, &one));
}

static void free_loss_sum(void)
{
    clt_tensor_release(loss_sum);
    loss_sum = NULL;
}

/* The trainer's step (src/trainer/step.c clt__train_step), its loss added to the sum. */
static clt_status train_step(clt_model *m, clt_optimizer *opt, clt_tensor *x, clt_tensor *y)
{
    clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_model_forward(m, x, &logits);
    if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y);
    if (s == CLT_OK) s = clt_model_zero_grad(m);
    if (s == CLT_OK) s = clt_model_backward(m, dlogits, NULL);
    if (s == CLT_OK) s = clt_axpy_(loss_sum, (float)clt_tensor_dim(x, 0), loss);
    if (s == CLT_OK) s = clt_optimizer_step(opt);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    return s;
}

/* Measured peak (total and activations) of one step after a warm-up step;
 * both steps update (a float16 step that overflowed would be skipped). */
static void measure(clt_model *m, clt_optimizer *opt, int64_t rows, int64_t in, int classes, int64_t *peak,
                    int64_t *peak_act)
{
    clt_tensor *x = batch_x(rows, in), *y = batch_labels(rows, classes);
    int64_t steps = clt_optimizer_steps(opt);
    ck_assert_ok(train_step(m, opt, x, y));
    ck_assert_ok(clt_synchronize(clt_test_device()));
    ck_assert_ok(clt_memory_reset_peak(clt_test_device()));
    ck_assert_ok(train_step(m, opt, x, y));
    *peak = clt_memory_max_allocated(clt_test_device());
    *peak_act = clt_memory_max_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS);
    ck_assert_int_eq(clt_optimizer_steps(opt), steps + 2);
    clt_tensor_release(x);
    clt_tensor_release(y);
}

/* Predicted against measured at batch 64, 256 and 1024 for a dt model
 * (converted here, before its optimizer, as the trainer does) trained by
 * Adam or SGD with momentum. */
static void check_step(clt_model *m, int64_t in, int classes, int segments, clt_dtype dt, clt_optimizer_kind kind)
{
    ck_assert_ok(clt_model_to_dtype(m, dt));
    clt_optimizer *opt;
    if (kind == CLT_OPTIMIZER_ADAM)
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    else
        ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.01f, 0.9f, 0.0f));
    ck_assert_ok(clt_model_set_recompute(m, segments));
    make_loss_sum();
    int64_t n = clt_model_num_parameter_elements(m), es = dt == CLT_FLOAT16 ? 2 : 4;
    const int64_t batches[] = {64, 256, 1024};
    for (int k = 0; k < 3; k++) {
        clt_plan_options o = clt_plan_default_options();
        o.batch_size = batches[k];
        o.optimizer = kind;
        o.momentum = kind == CLT_OPTIMIZER_SGD ? 0.9f : 0.0f;
        o.dtype = dt;
        o.recompute_blocks = segments;
        o.device = clt_test_device();
        clt_plan p;
        ck_assert_ok(clt_plan_step(m, &o, &p));
        ck_assert_int_eq(p.input_features, in);
        ck_assert_int_eq(p.weights + p.gradients + p.optimizer + p.batch + p.activations + p.temporaries, p.peak);
        ck_assert_int_eq(p.weights, es * n);
        /* float32 state (2 or 1 buffers), plus float32 master weights in float16. */
        ck_assert_int_eq(p.optimizer, 4 * n * ((kind == CLT_OPTIMIZER_ADAM ? 2 : 1) + (dt == CLT_FLOAT16)));
        /* float16: plus the float32 unscaled copy when the peak is in the optimizer's step. */
        ck_assert(p.gradients == es * n || (dt == CLT_FLOAT16 && p.gradients == 6 * n));
        int64_t peak, peak_act;
        measure(m, opt, batches[k], in, classes, &peak, &peak_act);
        double err = fabs((double)p.peak - (double)peak) / (double)peak;
        ck_assert_msg(err <= 0.05, "segments %d, batch %lld: predicted %lld bytes, measured %lld", segments,
                      (long long)batches[k], (long long)p.peak, (long long)peak);
        /* The replay follows the allocator's accounting exactly. */
        ck_assert_int_eq(p.peak, peak);
        ck_assert_int_eq(p.peak_activations, peak_act);
    }
    free_loss_sum();
    clt_optimizer_free(opt);
}

static void check_model(clt_model *m, int64_t in, int classes, int segments)
{
    check_step(m, in, classes, segments, CLT_FLOAT32, CLT_OPTIMIZER_ADAM);
}

/* Exercise 1 on the four-plateau MLP (smaller: 256 -> 512 x 3 -> 10), Adam. */
START_TEST(test_exercise1_mlp)
{
    int64_t hiddens[3] = {512, 512, 512};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 256, 3, hiddens, 10, 0));
    check_model(m, 256, 10, 0);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Layers 1024 wide: on CPU devices the products pack x and dy, whose rows
 * are 4 KiB apart, into row panels for the call, and the replay counts
 * those buffers too: at batch 45 (partial 12-row panels) the peak is in a
 * forward product, at 2048 in a backward one. */
START_TEST(test_exercise1_packed_rows)
{
    int64_t hiddens[2] = {1024, 1024};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 1024, 2, hiddens, 10, 0));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.01f, 0.0f, 0.0f));
    make_loss_sum();
    const int64_t batches[] = {45, 2048};
    for (int k = 0; k < 2; k++) {
        clt_plan_options o = clt_plan_default_options();
        o.batch_size = batches[k];
        o.device = clt_test_device();
        clt_plan p;
        ck_assert_ok(clt_plan_step(m, &o, &p));
        int64_t peak, peak_act;
        measure(m, opt, batches[k], 1024, 10, &peak, &peak_act);
        ck_assert_msg(p.peak == peak, "batch %lld: predicted %lld bytes, measured %lld", (long long)batches[k],
                      (long long)p.peak, (long long)peak);
    }
    free_loss_sum();
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The same for a ResMLP with and without checkpointing. */
START_TEST(test_exercise1_resmlp)
{
    int sizes[] = {0, CLT_RECOMPUTE_AUTO, 3};
    for (int k = 0; k < 3; k++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 48, 64, 7, 10, 1));
        check_model(m, 48, 10, sizes[k]);
        clt_model_free(m);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Mixed precision, as `clt train --fp16` runs it: float16 weights,
 * gradients and activations, float32 master weights and optimizer state,
 * loss scaling on (the default dynamic scale), float32 scratch in every
 * product and in the optimizer's unscaling. Adam and SGD with momentum,
 * the MLP and the ResMLP with and without checkpointing. */
START_TEST(test_exercise1_half)
{
    int64_t hiddens[3] = {512, 512, 512};
    const clt_optimizer_kind kinds[] = {CLT_OPTIMIZER_ADAM, CLT_OPTIMIZER_SGD};
    for (int k = 0; k < 2; k++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 256, 3, hiddens, 10, 0));
        ck_assert_float_eq(clt_model_loss_scale(m), 65536.0f);
        check_step(m, 256, 10, 0, CLT_FLOAT16, kinds[k]);
        clt_model_free(m);
    }
    const int sizes[] = {0, CLT_RECOMPUTE_AUTO, 3};
    for (int k = 0; k < 3; k++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 48, 64, 7, 10, 1));
        check_step(m, 48, 10, sizes[k], CLT_FLOAT16, kinds[k % 2]);
        clt_model_free(m);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The planner runs the model's own layers on a planning device, so any
 * model is planned exactly, with nothing in the planner about its layers:
 * MLPs of several depths and widths (float32 with SGD and momentum, one in
 * float16 with Adam), and a model assembled layer by layer in an order no
 * helper builds (Flatten, a Linear, two ReLUs in a row, two residual
 * blocks, a Linear, a ReLU after the logits' Linear). */
START_TEST(test_any_model)
{
    const int64_t h1[] = {17}, h2[] = {300, 5}, h5[] = {64, 96, 64, 128, 64};
    const int64_t *hiddens[] = {h1, h2, h5};
    const int depth[] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 40, depth[k], hiddens[k], 7, 0));
        check_step(m, 40, 7, 0, k == 2 ? CLT_FLOAT16 : CLT_FLOAT32, k == 2 ? CLT_OPTIMIZER_ADAM : CLT_OPTIMIZER_SGD);
        clt_model_free(m);
    }
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, "odd"));
    ck_assert_ok(clt_model_add_flatten(m));
    ck_assert_ok(clt_model_add_linear(m, 24, 48));
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_add_residual(m, 48));
    ck_assert_ok(clt_model_add_residual(m, 48));
    ck_assert_ok(clt_model_add_linear(m, 48, 5));
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_init(m, clt_test_device(), 3));
    check_step(m, 24, 5, 1, CLT_FLOAT32, CLT_OPTIMIZER_ADAM);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* What float16 halves and what it does not: weights, gradients and
 * activations halve; optimizer memory grows by the master weights; the
 * optimizer's step adds a float32 copy of the gradients. At a batch where
 * activations dominate, the peak drops. */
START_TEST(test_half_halves)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 48, 64, 7, 10, 1));
    int64_t n = clt_model_num_parameter_elements(m);
    clt_plan_options o = clt_plan_default_options();
    o.batch_size = 1024;
    o.optimizer = CLT_OPTIMIZER_ADAM;
    o.device = clt_test_device();
    clt_plan f32, f16;
    ck_assert_ok(clt_plan_step(m, &o, &f32));
    o.dtype = CLT_FLOAT16;
    ck_assert_ok(clt_plan_step(m, &o, &f16));
    ck_assert_int_eq(2 * f16.weights, f32.weights);
    ck_assert_int_eq(f16.optimizer, f32.optimizer + 4 * n);
    ck_assert_int_eq(f16.batch, f32.batch);
    ck_assert_int_lt(f16.peak_activations, f32.peak_activations);
    ck_assert_int_lt(f16.peak, f32.peak);
    /* float16 layers never fuse, so CLT_FUSE changes nothing. */
    clt_plan unfused;
    ck_assert_int_eq(setenv("CLT_FUSE", "0", 1), 0);
    ck_assert_ok(clt_plan_step(m, &o, &unfused));
    unsetenv("CLT_FUSE");
    ck_assert_int_eq(unfused.peak, f16.peak);
    ck_assert_int_eq(unfused.peak_activations, f16.peak_activations);
    /* At batch 1 the static memory decides: Adam's float16 step needs more. */
    o.batch_size = 1;
    ck_assert_ok(clt_plan_step(m, &o, &f16));
    ck_assert_int_eq(f16.gradients, 6 * n);
    o.dtype = CLT_FLOAT32;
    ck_assert_ok(clt_plan_step(m, &o, &f32));
    ck_assert_int_gt(f16.peak, f32.peak);
    clt_model_free(m);
}
END_TEST

/* With fusion off (CLT_FUSE=0) the replay follows the unfused layers just
 * as exactly, and fusion does not raise the peak (it allocates less: no
 * Linear output before its ReLU, residual gradients added in place; for
 * these models not at the moment of the peak). */
START_TEST(test_exercise1_unfused)
{
    int64_t hiddens[3] = {512, 512, 512};
    clt_plan_options o = clt_plan_default_options();
    o.batch_size = 256;
    o.device = clt_test_device();
    clt_plan unfused[2], fused[2];
    /* One model at a time: the measured peak is the device's. */
    for (int k = 0; k < 2; k++) {
        clt_model *m;
        if (k == 0) ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 256, 3, hiddens, 10, 0));
        else ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 48, 64, 7, 10, 1));
        ck_assert_int_eq(setenv("CLT_FUSE", "0", 1), 0);
        check_model(m, k ? 48 : 256, 10, 0);
        if (k) check_model(m, 48, 10, 3);
        ck_assert_ok(clt_plan_step(m, &o, &unfused[k]));
        unsetenv("CLT_FUSE");
        ck_assert_ok(clt_plan_step(m, &o, &fused[k]));
        clt_model_free(m);
    }
    ck_assert_int_le(fused[0].peak, unfused[0].peak);
    ck_assert_int_le(fused[1].peak, unfused[1].peak);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Exercise 2: under a memory cap, the largest batch each variant trains at.
 * The cap bounds what the allocator reserves, not what tensors use: the
 * caching allocator's segments (2 MiB for requests up to 1 MiB, 20 MiB
 * above, each serving one pool) sit partly unused, so the batch is far
 * below what the tensor bytes alone allow (about a quarter at this size,
 * see docs/planner.md). The planner replays the allocator's policy
 * (src/memory/book.c) over the model's creation and two steps, and finds
 * the batch that training from scratch under the cap reaches. */
enum { IN = 32, H = 128, BLOCKS = 16, OUT = 10 };

/* The trainer's step, releasing in its order (step_release). */
static clt_status trainer_step(clt_model *m, clt_optimizer *opt, int64_t rows)
{
    clt_tensor *x = batch_x(rows, IN), *y = batch_labels(rows, OUT), *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_model_forward(m, x, &logits);
    if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y);
    if (s == CLT_OK) s = clt_model_zero_grad(m);
    if (s == CLT_OK) s = clt_model_backward(m, dlogits, NULL);
    if (s == CLT_OK) s = clt_axpy_(loss_sum, (float)rows, loss);
    if (s == CLT_OK) s = clt_optimizer_step(opt);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    return s;
}

/* Training from scratch under cap (0: none): the model made (and made
 * float16 when half, as the trainer does), then two steps at the batch. Its
 * status, and the peak reserved memory. */
static clt_status from_scratch(int64_t cap, int segments, int half, int64_t batch, int64_t *reserved)
{
    ck_assert_ok(clt_memory_empty_cache(clt_test_device()));
    ck_assert_ok(clt_memory_reset_peak(clt_test_device()));
    ck_assert_ok(clt_memory_set_cap(clt_test_device(), cap));
    clt_model *m = NULL;
    clt_optimizer *opt = NULL;
    clt_status s = clt_model_create_resmlp(&m, clt_test_device(), IN, H, BLOCKS, OUT, 2);
    if (s == CLT_OK && half) s = clt_model_to_dtype(m, CLT_FLOAT16);
    if (s == CLT_OK) s = clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0);
    if (s == CLT_OK) s = clt_model_set_recompute(m, segments);
    int64_t one = 1;
    if (s == CLT_OK) s = clt_zeros(&loss_sum, clt_test_device(), CLT_FLOAT32, 1, &one);
    for (int k = 0; k < 2 && s == CLT_OK; k++) s = trainer_step(m, opt, batch);
    if (s == CLT_OK) s = clt_synchronize(clt_test_device());
    *reserved = clt_memory_max_reserved(clt_test_device());
    free_loss_sum();
    clt_optimizer_free(opt);
    clt_model_free(m);
    ck_assert_ok(clt_memory_set_cap(clt_test_device(), 0));
    ck_assert_ok(clt_memory_empty_cache(clt_test_device()));
    if (s != CLT_OK) ck_assert_int_eq(s, CLT_ERR_OUT_OF_MEMORY);
    return s;
}

static int64_t bisect(int64_t cap, int segments, int64_t lo, int64_t hi)
{
    int64_t reserved;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (from_scratch(cap, segments, 0, mid, &reserved) == CLT_OK) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* CLT_ALLOC_EXACT=1: no segments, reserved is allocated. */
static int exact_buffers(void)
{
    const char *e = getenv("CLT_ALLOC_EXACT");
    return e && strcmp(e, "1") == 0;
}

static clt_plan_options resmlp_options(int segments)
{
    clt_plan_options o = clt_plan_default_options();
    o.optimizer = CLT_OPTIMIZER_ADAM;
    o.recompute_blocks = segments;
    o.device = clt_test_device();
    return o;
}

START_TEST(test_exercise2_cap)
{
    const int64_t cap = 24ll << 20;
    int64_t predicted[2], measured[2], tensors_only[2];
    for (int ck = 0; ck < 2; ck++) {
        int segments = ck ? CLT_RECOMPUTE_AUTO : 0;
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), IN, H, BLOCKS, OUT, 2));
        clt_plan_options o = resmlp_options(segments);
        ck_assert_ok(clt_plan_max_batch(m, &o, cap, 1 << 20, &predicted[ck]));
        /* The largest batch whose tensor bytes alone fit. */
        int64_t lo = 0, hi = 1 << 20;
        while (lo < hi) {
            clt_plan p;
            o.batch_size = lo + (hi - lo + 1) / 2;
            ck_assert_ok(clt_plan_step(m, &o, &p));
            if (p.peak <= cap) lo = o.batch_size;
            else hi = o.batch_size - 1;
        }
        tensors_only[ck] = lo;
        clt_model_free(m);
        ck_assert_int_gt(predicted[ck], 16);
        measured[ck] = bisect(cap, segments, 0, predicted[ck] + predicted[ck] / 4 + 1);
        ck_assert_msg(llabs(measured[ck] - predicted[ck]) <= predicted[ck] / 50,
                      "checkpointing %d: predicted %lld, measured %lld", ck, (long long)predicted[ck],
                      (long long)measured[ck]);
        /* Without the segments the estimate would be several times too high. */
        if (!exact_buffers()) ck_assert_int_gt(tensors_only[ck], 2 * measured[ck]);
    }
    /* Checkpointing (segments of 4) stores 3 + 11 of 47 (B,H) tensors per
     * example, plus the same transients. */
    ck_assert_int_gt(predicted[1], 2 * predicted[0]);
    ck_assert_int_gt(measured[1], 2 * measured[0]);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Without a cap the allocator never gives a segment back, and the plan's
 * reserved peak is clt_memory_max_reserved from the model's creation on,
 * in float32 and in float16. The largest batch is the first whose float32
 * (batch, H) tensors are past the small pool's 1 MiB (memory/book.c). */
START_TEST(test_reserved_uncapped)
{
    const int64_t batches[] = {64, 1000, 2049};
    for (int v = 0; v < 4; v++) {
        int half = v / 2, ck = v % 2;
        for (int k = 0; k < 3; k++) {
            int segments = ck ? CLT_RECOMPUTE_AUTO : 0;
            clt_model *m;
            ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), IN, H, BLOCKS, OUT, 2));
            clt_plan_options o = resmlp_options(segments);
            o.batch_size = batches[k];
            o.dtype = half ? CLT_FLOAT16 : CLT_FLOAT32;
            clt_plan p;
            ck_assert_ok(clt_plan_step(m, &o, &p));
            clt_model_free(m);
            int64_t reserved;
            ck_assert_ok(from_scratch(0, segments, half, batches[k], &reserved));
            ck_assert_msg(p.reserved == reserved,
                          "%s, checkpointing %d, batch %lld: predicted %lld reserved, measured %lld",
                          half ? "float16" : "float32", ck, (long long)batches[k], (long long)p.reserved,
                          (long long)reserved);
            ck_assert_int_ge(p.reserved, p.peak);
        }
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors_and_report)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 8, 16, 4, 3, 1));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_device();
    clt_plan p;
    ck_assert_status(clt_plan_step(NULL, &o, &p), CLT_ERR_INVALID_ARGUMENT);
    o.batch_size = 0;
    ck_assert_status(clt_plan_step(m, &o, &p), CLT_ERR_INVALID_ARGUMENT);
    o.batch_size = 4;
    o.recompute_blocks = -3;
    ck_assert_status(clt_plan_step(m, &o, &p), CLT_ERR_INVALID_ARGUMENT);
    o.recompute_blocks = 0;
    o.dtype = CLT_INT32;
    ck_assert_status(clt_plan_step(m, &o, &p), CLT_ERR_UNSUPPORTED);
    o.dtype = CLT_FLOAT16;
    ck_assert_ok(clt_plan_step(m, &o, &p));
    ck_assert_int_eq(p.weights, 2 * clt_model_num_parameter_elements(m));
    ck_assert_int_eq(p.optimizer, 2 * p.weights);
    o.dtype = CLT_FLOAT32;
    o.optimizer = CLT_OPTIMIZER_SGD;
    ck_assert_ok(clt_plan_step(m, &o, &p));
    ck_assert_int_eq(p.optimizer, 0);
    ck_assert_int_eq(p.weights, 4 * clt_model_num_parameter_elements(m));
    o.momentum = 0.9f;
    ck_assert_ok(clt_plan_step(m, &o, &p));
    ck_assert_int_eq(p.optimizer, p.weights);
    int64_t b;
    ck_assert_ok(clt_plan_max_batch(m, &o, p.weights, 100, &b));
    ck_assert_int_eq(b, 0);
    ck_assert_ok(clt_plan_max_batch(m, &o, 1ll << 40, 100, &b));
    ck_assert_int_eq(b, 100);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ok(clt_plan_report(m, &o, p.peak - 1, 1 << 16, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "DOES NOT FIT"));
    free(buf);
    /* Two small segments' worth. */
    const int64_t budget = 4 << 20;
    o.batch_size = 1 << 15;
    ck_assert_ok(clt_plan_max_batch(m, &o, budget, 1 << 16, &b));
    ck_assert_int_gt(b, 0);
    ck_assert_int_lt(b, o.batch_size);
    f = open_memstream(&buf, &len);
    ck_assert_ok(clt_plan_report(m, &o, budget, 1 << 16, f));
    fclose(f);
    char lower[64];
    snprintf(lower, sizeof lower, "lower the batch size to %lld", (long long)b);
    ck_assert_msg(strstr(buf, "DOES NOT FIT") && strstr(buf, lower), "%s", buf);
    free(buf);
    clt_model_free(m);
}
END_TEST

/* clt train --plan: the report, with the cap from the environment as budget;
 * it needs no data. */
static char *run_clt(const char *env, const char *args, int *status)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    char path[1024], cmd[2048];
    snprintf(path, sizeof path, "%s/clt", dir ? dir : ".");
    if (!dir || access(path, X_OK) != 0) return NULL;
    snprintf(cmd, sizeof cmd, "%s '%s' train --plan --data /nonexistent %s 2>&1", env, path, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char *out = calloc(1, 1 << 16);
    size_t n = fread(out, 1, (1 << 16) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

START_TEST(test_cli_plan)
{
    int st;
    char *out = run_clt("CLT_MEMORY_CAP=64M", "--batch-size 64 --blocks 2 --hiddens 32 --optimizer adam", &st);
    clt_test_skip_if(!out, "clt", "the clt tool is not built");
    ck_assert_msg(st == 0, "exit %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "fits: 64.0 MiB available") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "largest batch that fits:") != NULL, "%s", out);
    free(out);
    /* Under a cap the table's reserved figure is the capped replay's. */
    out = run_clt("CLT_MEMORY_CAP=8M", "--batch-size 64 --blocks 2 --hiddens 32", &st);
    ck_assert_msg(st == 0, "exit %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "segments under the 8.0 MiB cap") != NULL, "%s", out);
    free(out);
    /* A plan that does not fit exits 1; auto says what it chose, in words. */
    out = run_clt("CLT_MEMORY_CAP=8M", "--batch-size 4096 --recompute auto", &st);
    ck_assert_msg(st == 1, "exit %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "segments of 1 block, chosen by auto") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "1 blocks") == NULL, "%s", out);
    ck_assert_msg(strstr(out, "DOES NOT FIT") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "to fit:") != NULL, "%s", out);
    free(out);
    out = run_clt("", "--recompute -2", &st);
    ck_assert_int_eq(st, 2);
    free(out);
    /* The option's old spelling is refused, naming the new one. */
    out = run_clt("", "--checkpoint-segments 2", &st);
    ck_assert_int_eq(st, 2);
    ck_assert_msg(strstr(out, "--checkpoint-segments is now --recompute N") != NULL, "%s", out);
    free(out);
    /* A float16 step is predicted as one. */
    out = run_clt("CLT_MEMORY_CAP=64M", "--fp16 --batch-size 64 --blocks 2 --hiddens 32", &st);
    ck_assert_msg(st == 0, "exit %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "one float16 (mixed-precision) training step at batch 64") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "fits: 64.0 MiB available") != NULL, "%s", out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_exercise1_mlp);
    tcase_add_test(tc, test_exercise1_resmlp);
    tcase_add_test(tc, test_exercise1_packed_rows);
    tcase_add_test(tc, test_exercise1_half);
    tcase_add_test(tc, test_any_model);
    tcase_add_test(tc, test_half_halves);
    tcase_add_test(tc, test_exercise1_unfused);
    tcase_add_test(tc, test_exercise2_cap);
    tcase_add_test(tc, test_reserved_uncapped);
    tcase_add_test(tc, test_errors_and_report);
    tcase_add_test(tc, test_cli_plan);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
