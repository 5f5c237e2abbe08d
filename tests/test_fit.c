/* --fit and clt_plan_fit: under a memory cap where the plain step does not
 * fit, the planner picks micro-batches and checkpointing that do, training
 * runs with them, and the memory it measures stays under the cap; when the
 * weights alone exceed the budget, it says so with the numbers. The
 * planner's prediction for an accumulated step is the measured one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "device/device_internal.h"
#include "ops/ops_internal.h"
#include "parallel/parallel_internal.h"
#include "trainer/loss.h"
#include "trainer/step.h"

static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)
#define MIB (1024 * 1024)

/* docs/planner.md's example, as printed there: a 32 MiB cap on every device
 * (the training device and the loaders' pinned staging), 8 blocks of 256,
 * batch 4096, evaluated on a whole validation set of Fashion-MNIST's test
 * size (10000 examples) after two steps. */
START_TEST(test_fit_trains_where_plain_fails)
{
    char dir[64];
    clt_test_make_temp_dir(dir, sizeof dir, "fit");
    clt_test_write_idx_split(dir, "train", 8192, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 10000, 2, 0);
    const char *args = "--hiddens 256 --blocks 8 --batch-size 4096 --steps 2";
    int rc = run("CLT_MEMORY_CAP=32M %s train --data %s %s", clt_test_clt_path(), dir, args);
    ck_assert_msg(rc == 1, "the plain run did not fail (%d): %s", rc, out);
    ck_assert_msg(strstr(out, "CLT_ERR_OUT_OF_MEMORY") || strstr(out, "out of memory"), "%s", out);
    rc = run("CLT_MEMORY_CAP=32M %s train --data %s %s --fit --memory-plot %s/m.svg", clt_test_clt_path(), dir, args,
             dir);
    ck_assert_msg(rc == 0, "clt train --fit failed (%d): %s", rc, out);
    printf("%s", out);
    int micro = 0;
    double peak = 0, reserved = 0;
    const char *at = strstr(out, "fit: batch 4096 as ");
    ck_assert_msg(at != NULL, "no choice printed: %s", out);
    ck_assert_int_eq(sscanf(at, "fit: batch 4096 as %d micro-batch", &micro), 1);
    ck_assert_int_gt(micro, 1);
    at = strstr(at, "predicted peak ");
    ck_assert_int_eq(sscanf(at, "predicted peak %lf MiB allocated, %lf MiB reserved", &peak, &reserved), 2);
    ck_assert_double_le(reserved, 32.0);
    ck_assert_msg(strstr(out, "fit: evaluation in batches of 316"), "%s", out);
    ck_assert_msg(strstr(out, "of pinned memory (capped at 32.0 MiB)"), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "trained 1 epoch(s), 2 steps"));
    ck_assert_msg(strstr(out, "test accuracy"), "no evaluation: %s", out);
    /* The measured peak, from the memory picture of both steps. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sed -n 's/.*peak: \\([0-9.]*\\) MiB allocated.*/\\1/p' %s/m.svg", dir);
    ck_assert_int_eq(run("%s", cmd), 0);
    double measured = atof(out);
    ck_assert_msg(measured > 0 && measured <= 32.0, "measured peak %g MiB under a 32 MiB cap", measured);
    ck_assert_msg(measured >= peak - 0.05 && measured <= peak + 0.05, "measured %g MiB, predicted %g", measured, peak);
    snprintf(cmd, sizeof cmd, "sed -n 's/.*reserved: at most \\([0-9.]*\\) MiB.*/\\1/p' %s/m.svg", dir);
    ck_assert_int_eq(run("%s", cmd), 0);
    double measured_reserved = atof(out);
    ck_assert_msg(measured_reserved > 0 && measured_reserved <= 32.0, "reserved %g MiB", measured_reserved);
    /* As predicted too: the plan runs the trainer's warm-up step (on a
     * scratch copy of the model) before the steps, under the same cap. */
    ck_assert_msg(measured_reserved >= reserved - 0.05 && measured_reserved <= reserved + 0.05,
                  "reserved %g MiB, predicted %g", measured_reserved, reserved);
    clt_test_remove_dir(dir);
}
END_TEST

START_TEST(test_nothing_fits)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 256, 8, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    o.batch_size = 64;
    o.optimizer = CLT_OPTIMIZER_ADAM;
    clt_plan_fit_result r;
    /* 1.26M parameters: 4.8 MiB of weights, 19.2 with gradients and Adam. */
    ck_assert_status(clt_plan_fit(m, &o, 8 * MIB, 1, &r), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "the float32 weights, gradients and optimizer state alone need 19.2 MiB"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "8.0 MiB"));
    ck_assert_status(clt_plan_fit(m, &o, 0, 0, &r), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_plan_fit(NULL, &o, MIB, 0, &r), CLT_ERR_INVALID_ARGUMENT);
    /* Room enough: one pass, no checkpointing. */
    ck_assert_ok(clt_plan_fit(m, &o, 1024 * MIB, 0, &r));
    ck_assert_int_eq(r.accumulate, 1);
    ck_assert_int_eq(r.recompute_blocks, 0);
    ck_assert_int_eq(r.dtype, CLT_FLOAT32);
    clt_model_free(m);
}
END_TEST

/* The search order: at a budget where one pass does not fit but
 * checkpointing does, checkpointing with one pass wins over two micro-batches. */
START_TEST(test_fit_order)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 128, 8, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    o.batch_size = 2048;
    clt_plan plain, ckpt;
    ck_assert_ok(clt_plan_step(m, &o, &plain));
    o.recompute_blocks = 3;
    ck_assert_ok(clt_plan_step(m, &o, &ckpt));
    ck_assert_int_lt(ckpt.reserved, plain.reserved);
    /* A budget between the two (with the margin added). */
    int64_t budget = (ckpt.reserved + plain.reserved) / 2;
    budget += 2 * MIB + budget / 31;
    clt_plan_fit_result r;
    ck_assert_ok(clt_plan_fit(m, &o, budget, 0, &r));
    ck_assert_int_eq(r.accumulate, 1);
    ck_assert_int_gt(r.recompute_blocks, 0);
    ck_assert_int_le(r.plan.reserved, budget - r.margin);
    clt_model_free(m);
}
END_TEST

/* Gradient accumulation predicted as measured: the planner's peak for an
 * accumulated step is clt_memory_max_allocated over the same steps
 * (clt__accumulate, as the trainer runs them). */
START_TEST(test_accumulated_plan_exact)
{
    clt_device dev = clt_test_cpu();
    for (int ckpt = 0; ckpt <= 2; ckpt += 2) {
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 64, 4, 10, 0));
        ck_assert_ok(clt_model_set_recompute(m, ckpt));
        clt_plan_options o = clt_plan_default_options();
        o.device = dev;
        o.batch_size = 301;
        o.accumulate = 4;
        o.optimizer = CLT_OPTIMIZER_ADAM;
        o.recompute_blocks = ckpt;
        clt_plan p;
        ck_assert_ok(clt_plan_step(m, &o, &p));
        clt_optimizer *opt;
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
        int64_t one = 1, n = 301;
        clt_tensor *loss_sum = NULL;
        ck_assert_ok(clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one));
        for (int step = 0; step < 2; step++) {
            if (step == 1) ck_assert_ok(clt_memory_reset_peak(dev));
            float *xs = clt_test_random_floats(n * 784, 5);
            clt_tensor *x = clt_test_upload(dev, xs, n, 784), *y = NULL;
            free(xs);
            ck_assert_ok(clt_zeros(&y, dev, CLT_INT32, 1, &n));
            ck_assert_ok(clt_model_zero_grad(m));
            ck_assert_ok(clt__accumulate(m, NULL, x, y, 4, n, loss_sum, 0));
            ck_assert_ok(clt_optimizer_step(opt));
            clt_tensor_release(x);
            clt_tensor_release(y);
        }
        int64_t measured = clt_memory_max_allocated(dev); /* the loss sum included: the plan's step holds one too */
        ck_assert_msg(measured == p.peak, "checkpointing %d: predicted %lld, measured %lld", ckpt, (long long)p.peak,
                      (long long)measured);
        ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_ACTIVATIONS), p.peak_activations);
        clt_tensor_release(loss_sum);
        clt_optimizer_free(opt);
        clt_model_free(m);
    }
}
END_TEST

/* A whole run as the plan runs it, measured on the device: the trainer's
 * loader over ds at batch n (reset pinned memory's peak first), two steps
 * of n in `accumulate` micro-batches, the second's peak, then with the
 * loader still alive an evaluation of two batches of eval: its peak, the
 * examples it saw, and pinned memory's peak over the run (staging). */
static void measure_whole_run(clt_model *m, clt_optimizer *opt, const clt_dataset *ds, clt_device dev, int64_t n,
                              int accumulate, int64_t eval, clt_plan *measured, int64_t *examples)
{
    ck_assert_ok(clt_memory_reset_peak(clt_pinned()));
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = n;
    lo.flatten = 1;
    clt_loader *loader;
    ck_assert_ok(clt_loader_create(&loader, ds, dev, &lo));
    int64_t one = 1;
    clt_tensor *loss_sum = NULL;
    ck_assert_ok(clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one));
    for (int step = 0; step < 2; step++) {
        if (step == 1) ck_assert_ok(clt_memory_reset_peak(dev));
        clt__step_tensors t = {0};
        ck_assert_ok(clt_loader_set_epoch(loader, step));
        ck_assert_ok(clt_loader_next(loader, &t.x, &t.y));
        clt__step_options so = {.loss = clt__loss_for(ds), .accumulate = accumulate};
        ck_assert_ok(clt__train_step(m, opt, &t, loss_sum, 0, &so));
        clt__step_tensors_release(&t);
    }
    measured->peak = clt_memory_max_allocated(dev);
    ck_assert_ok(clt_memory_reset_peak(dev));
    clt_evaluation ev;
    ck_assert_ok(clt_trainer_evaluate_metrics(m, ds, eval, 2 * eval, NULL, &ev));
    *examples = ev.examples;
    measured->eval_peak = clt_memory_max_allocated(dev);
    measured->staging = clt_memory_max_allocated(clt_pinned());
    clt_loader_free(loader);
    clt_tensor_release(loss_sum);
}

/* A whole run (whole_run: the trainer's loader and an evaluation after the
 * steps) predicted as measured: the evaluation's peak on the device and the
 * loaders' staging in pinned memory, for classes and for a regression, with
 * and without kept packed weights. Pinned memory has a cap here, so its
 * loaders keep the two staging buffers the plan counts. */
START_TEST(test_whole_run_plan_exact)
{
    clt_device dev = clt_test_cpu();
    ck_assert_ok(clt_memory_set_cap(clt_pinned(), 1024 * MIB));
    for (int k = 0; k < 4; k++) {
        int regress = k & 1, keep = !(k & 2);
        int64_t n = 301, in = 784, outputs = regress ? 3 : 10, micro = 76;
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, dev, in, 64, 4, outputs, 0));
        clt_model_set_keep_packed(m, keep);
        ck_assert_int_eq(clt_model_keep_packed(m), keep);
        clt_plan_options o = clt_plan_default_options();
        o.device = dev;
        o.batch_size = n;
        o.accumulate = 4;
        o.optimizer = CLT_OPTIMIZER_ADAM;
        o.task = regress ? CLT_TASK_REGRESS : CLT_TASK_CLASSIFY;
        o.whole_run = 1;
        o.train_examples = n; /* float32 features: held resident on a GPU-class device */
        o.train_value_bytes = 4;
        clt_plan p;
        ck_assert_ok(clt_plan_step(m, &o, &p));
        /* The same run on the device: data of the plan's shape, the trainer's loader, two steps, an evaluation. */
        float *xs = clt_test_random_floats(n * in, 7), *ys = clt_test_random_floats(n * outputs, 8);
        int32_t *labels = calloc((size_t)n, sizeof *labels);
        clt_dataset ds;
        if (regress) ck_assert_ok(clt_dataset_from_host(&ds, n, in, xs, NULL, 0, NULL, ys, outputs));
        else ck_assert_ok(clt_dataset_from_host(&ds, n, in, xs, labels, (int)outputs, NULL, NULL, 0));
        free(xs);
        free(ys);
        free(labels);
        clt_optimizer *opt;
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
        clt_plan got;
        int64_t seen;
        measure_whole_run(m, opt, &ds, dev, n, 4, micro, &got, &seen);
        ck_assert_int_eq(got.peak, p.peak);
        ck_assert_int_eq(seen, 2 * micro);
        ck_assert_msg(got.eval_peak == p.eval_peak, "regress %d keep %d: evaluation measured %lld, predicted %lld",
                      regress, keep, (long long)got.eval_peak, (long long)p.eval_peak);
        ck_assert_int_eq(got.staging, p.staging);
        int slot, gpu;
        ck_assert_ok(clt__resolve(dev, &slot));
        ck_assert_ok(clt__gpu_class(slot, &gpu));
        if (!gpu) ck_assert_int_gt(p.staging, 2 * n * in * 4); /* else the set is resident: indices staged */
        else ck_assert_int_lt(p.staging, 2 * n * in * 4);
        clt_optimizer_free(opt);
        clt_dataset_free(&ds);
        clt_model_free(m);
    }
}
END_TEST

/* The trainer's options for two steps at batch with r's choice, quiet:
 * its micro-batches, segments, precision and evaluation batch (r's kept
 * packed weights are the model's to set), SGD without momentum as
 * clt_plan_default_options plans. */
static clt_trainer_options fit_choice(const clt_plan_fit_result *r, int64_t batch)
{
    clt_trainer_options to = clt_trainer_default_options();
    to.log = NULL;
    to.progress = 0;
    to.batch_size = batch;
    to.max_steps = 2;
    to.optimizer = CLT_OPTIMIZER_SGD;
    to.momentum = 0;
    to.accumulate = r->accumulate;
    to.recompute_blocks = r->recompute_blocks;
    to.fp16 = r->dtype == CLT_FLOAT16;
    to.eval_batch_size = r->eval_batch_size;
    return to;
}

/* A plan that fits is a run that fits: for budgets from 16 to 32 MiB,
 * clt_plan_fit's choice for a whole run, where it finds one, trained by
 * clt_trainer_fit with the budget as the device's cap (as `clt train --fit`
 * under CLT_MEMORY_CAP), runs. The trainer first warms up on a scratch
 * copy of the model (a second set of weights and gradients, clt__fit_run),
 * and the allocator's segments under the budget are not those under the
 * budget less the margin: a plan that counted neither chose a
 * configuration at 18, 20 and 22 MiB whose run then ran out of memory. */
START_TEST(test_fit_plan_then_run)
{
    clt_device dev = clt_test_cpu();
    clt_dataset train = clt_test_make_dataset(128, 1), val = clt_test_make_dataset(128, 2);
    int fitted = 0, refused = 0;
    for (int mib = 16; mib <= 32; mib += 2) {
        ck_assert_ok(clt_memory_empty_cache(dev));
        ck_assert_ok(clt_memory_set_cap(dev, mib * MIB)); /* before the model, as CLT_MEMORY_CAP */
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 512, 2, 10, 0));
        clt_plan_options o = clt_plan_default_options();
        o.device = dev;
        o.batch_size = 64;
        o.whole_run = 1;
        o.train_examples = train.n;
        clt_plan_fit_result r;
        clt_status s = clt_plan_fit(m, &o, mib * MIB, 0, &r);
        if (s == CLT_OK) {
            clt_trainer_options to = fit_choice(&r, 64);
            clt_model_set_keep_packed(m, r.keep_packed);
            clt_trainer_result res;
            s = clt_trainer_fit(m, &train, &val, &to, &res);
            ck_assert_msg(s == CLT_OK, "%d MiB: planned %d micro-batches, segments of %d blocks; the run: %s", mib,
                          r.accumulate, r.recompute_blocks, clt_last_error());
            fitted++;
        } else {
            ck_assert_status(s, CLT_ERR_OUT_OF_MEMORY);
            refused++;
        }
        clt_model_free(m);
        ck_assert_ok(clt_memory_set_cap(dev, 0));
    }
    ck_assert_int_gt(fitted, 0);
    ck_assert_int_gt(refused, 0);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
}
END_TEST

/* On a GPU-class device (CLT_DEVICE_CLASS=gpu) the training loader keeps
 * an image set resident (docs/data.md): a plan told the set's size and
 * type counts that copy, predicted as measured to the byte, steps,
 * evaluation and pinned staging; and the copy is there: the plan of the
 * whole set is larger than that of a set of one batch by the other
 * examples' bytes and int32 labels. */
START_TEST(test_resident_set_counted)
{
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    clt_device dev = clt_test_cpu();
    enum { N = 1000, IN = 784, BATCH = 128 };
    ck_assert_ok(clt_memory_set_cap(clt_pinned(), 1024 * MIB));
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, IN, 64, 2, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = dev;
    o.batch_size = BATCH;
    o.whole_run = 1;
    o.train_examples = N;
    o.train_value_bytes = 1;
    clt_plan p, one;
    ck_assert_ok(clt_plan_step(m, &o, &p));
    o.train_examples = BATCH;
    ck_assert_ok(clt_plan_step(m, &o, &one));
    ck_assert_int_eq(p.peak - one.peak, (int64_t)(N - BATCH) * (IN + 4));
    clt_dataset ds = {.n = N, .rows = 1, .cols = IN, .num_classes = 10};
    ds.images = malloc(N * IN);
    ds.labels = malloc(N);
    for (int i = 0; i < N * IN; i++) ds.images[i] = (uint8_t)(i * 13);
    for (int i = 0; i < N; i++) ds.labels[i] = (uint8_t)(i % 10);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.1f, 0, 0));
    clt_plan got;
    int64_t seen;
    measure_whole_run(m, opt, &ds, dev, BATCH, 0, BATCH, &got, &seen);
    ck_assert_int_eq(got.peak, p.peak);
    ck_assert_int_eq(got.eval_peak, p.eval_peak);
    ck_assert_int_eq(got.staging, p.staging);
    clt_optimizer_free(opt);
    clt_dataset_free(&ds);
    clt_model_free(m);
}
END_TEST

/* When the loaders' staging alone (two buffers of the training batch) is
 * past pinned memory's cap, no configuration can fit: clt_plan_fit says so
 * first, naming pinned memory, its cap and the staging's size, instead of
 * blaming the weights after searching every configuration. On a GPU-class
 * device the set is resident instead (docs/data.md): only the batch's
 * indices are staged, and the fit finds a configuration. */
START_TEST(test_staging_past_pinned_cap)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 64, 2, 10, 0));
    ck_assert_ok(clt_memory_set_cap(clt_pinned(), 4 * MIB));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    o.batch_size = 4096;
    o.whole_run = 1;
    clt_plan_fit_result r;
    int slot, gpu;
    ck_assert_ok(clt__resolve(o.device, &slot));
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    if (gpu) {
        ck_assert_ok(clt_plan_fit(m, &o, 256 * MIB, 0, &r));
        ck_assert_int_lt(r.plan.staging, 4 * MIB);
        clt_model_free(m);
        return;
    }
    ck_assert_status(clt_plan_fit(m, &o, 256 * MIB, 0, &r), CLT_ERR_OUT_OF_MEMORY);
    const char *msg = clt_last_error(), *at = strstr(msg, "MiB of pinned memory (");
    ck_assert_msg(at && strstr(msg, "staging of a batch of 4096 needs ") &&
                      strstr(msg, "past pinned memory's cap of 4.0 MiB (4194304 bytes)"), "%s", msg);
    long long bytes = 0;
    ck_assert_int_eq(sscanf(at, "MiB of pinned memory (%lld bytes)", &bytes), 1);
    ck_assert_int_ge(bytes, 2LL * 4096 * (784 * 4 + 4));
    ck_assert_msg(!strstr(msg, "weights"), "%s", msg);
    /* Under the cap, the same fit searches and finds a configuration. */
    ck_assert_ok(clt_memory_set_cap(clt_pinned(), 0));
    ck_assert_ok(clt_plan_fit(m, &o, 256 * MIB, 0, &r));
    clt_model_free(m);
}
END_TEST

/* The evaluation is part of the fit: where the steps fit a budget but an
 * evaluation keeping packed weights does not (on the CPU kernels), clt_plan_fit
 * drops them. */
START_TEST(test_fit_drops_kept_panels)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 256, 8, 10, 0));
    /* Capped as a run under the smaller budget is, so that on the GPU class its
     * loader keeps the host path there (docs/data.md), as before. */
    ck_assert_ok(clt_memory_set_cap(clt_test_cpu(), 32 * MIB));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    o.batch_size = 4096;
    clt_plan_fit_result steps, whole;
    ck_assert_ok(clt_plan_fit(m, &o, 32 * MIB, 0, &steps));
    o.whole_run = 1;
    ck_assert_ok(clt_plan_fit(m, &o, 32 * MIB, 0, &whole));
    /* Only the CPU kernels keep packed weights (CLBlast packs none the planner sees). */
    int slot, cpu = 0;
    ck_assert_ok(clt__resolve(clt_test_cpu(), &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    ck_assert_int_eq(whole.keep_packed, !cpu);
    ck_assert_int_gt(whole.plan.eval_peak, 0);
    ck_assert_int_le(whole.plan.eval_peak, whole.budget - whole.margin);
    ck_assert_int_eq(steps.plan.eval_peak, 0);
    /* With room, the evaluation keeps its packed weights. */
    ck_assert_ok(clt_plan_fit(m, &o, 256 * MIB, 0, &whole));
    ck_assert_int_eq(whole.keep_packed, 1);
    clt_model_free(m);
}
END_TEST

/* Data parallel's peaks as clt_parallel_fit measures them: reset after the
 * first step, read after the second. */
static int64_t measured_steps[2], held_after[2];
static void record_peaks(clt_model *const *replicas, int k, void *ctx)
{
    int *steps = ctx;
    ++*steps;
    for (int i = 0; i < k && i < 2; i++) {
        clt_device dev = clt_model_device(replicas[i]);
        if (*steps == 2) {
            measured_steps[i] = clt_memory_max_allocated(dev);
            held_after[i] = clt_memory_allocated(dev); /* from here on the peak is the evaluation's */
        }
        ck_assert_ok(clt_memory_reset_peak(dev));
    }
}

/* With two GPUs capped at 64 and 48 MiB, clt_parallel_plan_fit fits each
 * within its own cap: data parallel holds a shard of the batch per device,
 * so it needs fewer micro-batches than one device planned at the global
 * batch within the smaller cap (what --fit did before). Trained with its
 * choice under those caps, every device's steps peak as predicted, to the
 * byte, and the primary's evaluation as predicted too. */
START_TEST(test_fit_every_gpu)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    clt_device list[2] = {clt_gpu(0), clt_gpu(1)};
    int64_t budgets[2] = {64 * MIB, 48 * MIB}, peaks[2];
    for (int i = 0; i < 2; i++) ck_assert_ok(clt_memory_set_cap(list[i], budgets[i]));
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, list[0], 784, 256, 8, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = list[0];
    o.batch_size = 4096;
    o.whole_run = 1;
    clt_plan_fit_result one, both;
    ck_assert_ok(clt_plan_fit(m, &o, budgets[1], 0, &one));
    ck_assert_ok(clt_parallel_plan_fit(m, &o, list, 2, budgets, 0, &both, peaks));
    printf("one device at the batch within 48 MiB: %d micro-batches, segments %d; data parallel: %d, segments %d; "
           "peaks %lld and %lld, evaluation %lld\n", one.accumulate, one.recompute_blocks, both.accumulate,
           both.recompute_blocks, (long long)peaks[0], (long long)peaks[1], (long long)both.plan.eval_peak);
    ck_assert_int_lt(both.accumulate, one.accumulate);
    for (int i = 0; i < 2; i++) ck_assert_int_le(peaks[i], budgets[i] - (2 * MIB + budgets[i] / 32));
    ck_assert_int_eq(both.plan.peak, peaks[0]);
    ck_assert_int_eq(both.eval_batch_size, (2048 + both.accumulate - 1) / both.accumulate);
    ck_assert_int_gt(both.plan.eval_peak, 0);
    /* The run with that choice, under the caps. */
    int64_t eval = both.eval_batch_size;
    clt_dataset train = clt_test_make_dataset(8192, 1), val = clt_test_make_dataset(2 * eval, 2);
    clt_trainer_options to = fit_choice(&both, 4096);
    clt_model_set_keep_packed(m, both.keep_packed);
    int steps = 0;
    clt__dp_set_step_hook(record_peaks, &steps);
    clt_trainer_result r;
    clt_status s = clt_parallel_fit(m, &train, &val, &to, list, 2, NULL, &r);
    clt__dp_set_step_hook(NULL, NULL);
    ck_assert_msg(s == CLT_OK, "%s", clt_last_error());
    ck_assert_int_eq(steps, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(measured_steps[i] == peaks[i], "gpu:%d: measured %lld, predicted %lld", i,
                      (long long)measured_steps[i], (long long)peaks[i]);
    /* After the second step (its batch still held), gpu:0's peak is the evaluation's, as predicted. */
    ck_assert_int_lt(held_after[0], both.plan.eval_peak);
    ck_assert_int_eq(clt_memory_max_allocated(list[0]), both.plan.eval_peak);
    for (int i = 0; i < 2; i++) ck_assert_ok(clt_memory_set_cap(list[i], 0));
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_model_free(m);
}
END_TEST

/* The other way round: at a small batch, data parallel holds more on each
 * device than one device's step at the whole batch (its own buffers of
 * parameter size outweigh the batch's shard). Under 28 MiB per GPU, one
 * device planned at the batch fits with no micro-batches, and a run of
 * that choice runs out of memory, or where it fits within the margin (the
 * GPU class's products) its steps peak above the one device's plan on
 * gpu:0; clt_parallel_plan_fit says so before training. */
START_TEST(test_fit_every_gpu_when_one_underestimates)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    clt_device list[2] = {clt_gpu(0), clt_gpu(1)};
    int64_t budgets[2] = {28 * MIB, 28 * MIB}, peaks[2];
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, list[0], 784, 512, 2, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = list[0];
    o.batch_size = 64;
    o.whole_run = 1;
    clt_plan_fit_result one, both;
    ck_assert_ok(clt_plan_fit(m, &o, budgets[1], 0, &one));
    ck_assert_int_eq(one.accumulate, 1);
    ck_assert_status(clt_parallel_plan_fit(m, &o, list, 2, budgets, 0, &both, peaks), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(clt_last_error(), "gpu:0's 28.0 MiB (less 2.9 MiB) and gpu:1's 28.0 MiB (less 2.9 MiB)"), "%s",
                  clt_last_error());
    int64_t need[2];
    ck_assert_ok(clt_parallel_plan(m, &o, list, 2, need));
    ck_assert_int_gt(need[0], one.plan.peak);
    /* The one-device choice, trained data parallel under the caps. */
    for (int i = 0; i < 2; i++) ck_assert_ok(clt_memory_set_cap(list[i], budgets[i]));
    clt_dataset train = clt_test_make_dataset(128, 1);
    clt_trainer_options to = fit_choice(&one, 64);
    int steps = 0;
    clt__dp_set_step_hook(record_peaks, &steps);
    clt_status s = clt_parallel_fit(m, &train, NULL, &to, list, 2, NULL, NULL);
    clt__dp_set_step_hook(NULL, NULL);
    for (int i = 0; i < 2; i++) ck_assert_ok(clt_memory_set_cap(list[i], 0));
    ck_assert_msg(s == CLT_ERR_OUT_OF_MEMORY || (s == CLT_OK && measured_steps[0] > one.plan.peak),
                  "%s: %s; gpu:0's second step %lld bytes, one device's plan %lld", clt_status_string(s),
                  clt_last_error(), (long long)measured_steps[0], (long long)one.plan.peak);
    clt_dataset_free(&train);
    clt_model_free(m);
}
END_TEST

/* With several GPUs, --fit fits each of those the run uses within its own budget. */
START_TEST(test_fit_each_gpu_budget)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    char dir[64];
    clt_test_make_temp_dir(dir, sizeof dir, "fitgpus");
    clt_test_write_idx_split(dir, "train", 4096, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 1000, 2, 0);
    int rc = run("CLT_MEMORY_CAP=gpu:0=64M,gpu:1=32M %s train --data %s --hiddens 256 --blocks 8 --batch-size 4096 "
                 "--steps 1 --num-gpus 2 --fit", clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "fit: data parallel on 2 GPUs (clt_parallel_plan_fit), predicted peak of the steps per "
                              "device: gpu:0 "), "%s", out);
    ck_assert_msg(strstr(out, " MiB of 64.0 MiB, gpu:1 ") && strstr(out, " MiB of 32.0 MiB\n"), "%s", out);
    ck_assert_msg(strstr(out, "MiB reserved, of 64.0 MiB on gpu:0 (") && strstr(out, "in shards of up to 2048"), "%s",
                  out);
    /* Each shard's micro-batch: ceil(2048 / N) rows for N micro-batches. */
    int n = 0;
    long long rows = 0;
    const char *each = strstr(out, "in shards of up to 2048, each as ");
    ck_assert_msg(each && sscanf(each, "in shards of up to 2048, each as %d micro-batch%*[es] of up to %lld", &n,
                                 &rows) == 2, "%s", out);
    ck_assert_int_eq(rows, (2048 + n - 1) / n);
    /* Under the sanitizers, LeakSanitizer's tracer crashes (signal 11, "Tracer caught signal") at the exit of
     * this one run, also with slow unwinding and at commits before this test: its leak scan is left out here
     * (AddressSanitizer still checks it); test_fit_trains_where_plain_fails scans the same --fit path. */
    rc = run("ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" CLT_MEMORY_CAP=gpu:0=64M,gpu:1=32M %s train --data %s "
             "--hiddens 256 --blocks 8 --batch-size 4096 --steps 1 --num-gpus 1 --fit", clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0 && strstr(out, "MiB reserved, of 64.0 MiB on gpu:0"), "exit %d: %s", rc, out);
    /* --plan with two GPUs adds each one's peak as data parallel holds it: less than one device's at the batch. */
    rc = run("%s train --plan --hiddens 64 --blocks 2 --batch-size 512 --num-gpus 2", clt_test_clt_path());
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    double one = 0, g0 = 0, g1 = 0;
    const char *at = strstr(out, "  total ");
    ck_assert_msg(at && sscanf(at, "  total %lf MiB", &one) == 1, "%s", out);
    at = strstr(out, "data parallel on 2 GPUs (clt_parallel_plan), ");
    ck_assert_msg(at && sscanf(at, "data parallel on 2 GPUs (clt_parallel_plan), predicted peak per device: gpu:0 %lf "
                                   "MiB, gpu:1 %lf MiB", &g0, &g1) == 2, "%s", out);
    ck_assert_double_gt(g0, 0);
    ck_assert_double_gt(g1, 0);
    ck_assert_double_lt(g0, one);
    clt_test_remove_dir(dir);
}
END_TEST

/* --plan names an accumulated step, says why checkpointing goes further
 * (its ratio is the printed batches'), and lists --fit's choice. */
START_TEST(test_plan_report_lines)
{
    int rc = run("CLT_MEMORY_CAP=cpu:0=32M,gpu:0=32M %s train --plan --hiddens 256 --blocks 8 --batch-size 4096",
                 clt_test_clt_path());
    /* The batch does not fit the cap: --plan says so and exits 1. */
    ck_assert_msg(rc == 1 && strstr(out, "DOES NOT FIT"), "exit %d: %s", rc, out);
    long plain = 0, ckpt = 0;
    double ratio = 0, per_plain = 0, per_ckpt = 0;
    const char *at = strstr(out, "largest batch that fits: ");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at, "largest batch that fits: %ld without checkpointing, %ld with", &plain, &ckpt), 2);
    at = strstr(out, "checkpointing goes ");
    ck_assert_msg(at != NULL, "%s", out);
    ck_assert_int_eq(sscanf(at, "checkpointing goes %lfx as far: per example a step holds %lf KiB without "
                                "checkpointing, %lf KiB with", &ratio, &per_plain, &per_ckpt), 3);
    ck_assert_double_eq_tol(ratio, (double)ckpt / (double)plain, 0.006);
    ck_assert_double_gt(per_plain, per_ckpt);
    ck_assert_msg(strstr(out, "  - keep the batch of 4096 (--fit): 13 micro-batches, checkpointed segments of 2 blocks"),
                  "%s", out);
    rc = run("CLT_MEMORY_CAP=cpu:0=32M,gpu:0=32M %s train --plan --hiddens 256 --blocks 8 --batch-size 4096 "
             "--accumulate 13 --recompute 2", clt_test_clt_path());
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strstr(out, "training step at batch 4096 in 13 micro-batches on "), "%s", out);
    /* The CPU kernels pack dy^T for a weight gradient's product that more
     * than 8 column panels read (the first layer's, 784 wide: 0.2 MiB more
     * at the peak); CLBlast packs nothing the planner sees. */
    int slot, cpu = 0;
    ck_assert_ok(clt__resolve(clt_try_gpu(0), &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    ck_assert_msg(strstr(out, cpu ? "  total              25.5 MiB" : "  total              25.3 MiB"), "%s", out);
    ck_assert_msg(strstr(out, "\nfits: 32.0 MiB"), "%s", out);
}
END_TEST

/* --fit=any keeps float32 where float32 fits, and names both dtypes when neither does. */
START_TEST(test_fit_any)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 512, 8, 10, 0));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    o.batch_size = 4096;
    o.optimizer = CLT_OPTIMIZER_ADAM;
    clt_plan_fit_result r;
    ck_assert_ok(clt_plan_fit(m, &o, 256 * MIB, 1, &r));
    ck_assert_int_eq(r.dtype, CLT_FLOAT32);
    /* 32 MiB: under even float16's weights and gradients (35.2 MiB), so each
     * configuration the search tries fails early (at 48 MiB each one ran its
     * micro-batches first, about ten times as long). */
    ck_assert_status(clt_plan_fit(m, &o, 32 * MIB, 1, &r), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "no configuration of a float32 or float16 step at batch 4096 fits "
                                                   "32.0 MiB"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "alone need 70.3 MiB and the batch 12.3 MiB"));
    /* A budget just above the step at one example per micro-batch finds a configuration within it. */
    o.batch_size = 100;
    clt_model_free(m);
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 256, 2, 10, 0));
    clt_plan one;
    clt_plan_options q = o;
    q.accumulate = 100;
    ck_assert_ok(clt_plan_step(m, &q, &one));
    ck_assert_ok(clt_plan_fit(m, &o, one.reserved + 2 * MIB + (one.reserved + 3 * MIB) / 31, 0, &r));
    ck_assert_int_le(r.plan.reserved, r.budget - r.margin);
    clt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fit");
    TCase *tc = clt_test_tcase("fit");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_nothing_fits);
    tcase_add_test(tc, test_fit_order);
    tcase_add_test(tc, test_accumulated_plan_exact);
    tcase_add_test(tc, test_plan_report_lines);
    tcase_add_test(tc, test_fit_any);
    tcase_add_test(tc, test_whole_run_plan_exact);
    tcase_add_test(tc, test_resident_set_counted);
    tcase_add_test(tc, test_fit_drops_kept_panels);
    tcase_add_test(tc, test_staging_past_pinned_cap);
    tcase_add_test(tc, test_fit_trains_where_plain_fails);
    tcase_add_test(tc, test_fit_plan_then_run);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_set_timeout(gpus, 600);
    tcase_add_test(gpus, test_fit_each_gpu_budget);
    tcase_add_test(gpus, test_fit_every_gpu);
    tcase_add_test(gpus, test_fit_every_gpu_when_one_underestimates);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
