/* The memory planner: it runs the trainer's own code on the planning device
 * of the device asked about (clt_plan_device): the model is built with the
 * ordinary calls (its layers' descriptions copied, clt_model_init, the
 * dtype, recompute and optimizer the options ask for), and the trainer's
 * step (clt__train_step, src/trainer/step.c) runs twice on a batch of the right shape,
 * with no kernel, fill or copy run, while the allocator counts and places
 * every tensor as it would on the device. What this file keeps is the
 * search (the largest batch, clt_plan_fit's configurations) and the report:
 * nothing here knows a layer, an op, a model or an optimizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../memory/allocator.h"
#include "../nn/nn_internal.h"
#include "../trainer/engine.h"
#include "../trainer/step.h"
#include "plan_internal.h"
#include "cltensor/async.h"
#include "cltensor/data.h"
#include "cltensor/memory.h"
#include "cltensor/plan.h"
#include "cltensor/trainer.h"
#include "cltensor/warmup.h"

clt_plan_options clt_plan_default_options(void)
{
    clt_plan_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = 256;
    o.optimizer = CLT_OPTIMIZER_SGD;
    o.dtype = CLT_FLOAT32;
    o.device = clt_try_gpu(0);
    return o;
}

/* The planning devices a plan of o runs on, the device's and pinned
 * memory's (where the loaders stage): each must hold nothing (one plan at a
 * time per device). */
typedef struct plan_device {
    clt_device dev, pinned;
} plan_device;

clt_status clt__plan_idle(clt_device dev)
{
    clt_memory_stats st;
    CLT_TRY(clt_memory_get_stats(dev, &st)); /* CLT_ERR_NO_DEVICE naming it */
    if (clt_memory_allocated(dev) == 0) return CLT_OK;
    char name[32] = "";
    clt_device_name(dev, name, sizeof name);
    return clt__fail(CLT_ERR_BUSY, "the planning device %s holds %lld bytes of another plan or program: one "
                     "plan at a time per device", name, (long long)clt_memory_allocated(dev));
}

clt_status clt__plan_pinned_cap(int64_t *cap)
{
    clt_memory_stats st;
    *cap = 0;
    if (!clt_device_exists(clt_pinned())) return CLT_OK;
    CLT_TRY(clt_memory_get_stats(clt_pinned(), &st));
    *cap = st.cap;
    return CLT_OK;
}

uint64_t clt__plan_refusals(const clt_device *devs, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += clt__alloc_refusals(devs[i]);
    return sum;
}

int clt__plan_ran_out(clt_status s, const clt_device *devs, int n, uint64_t before)
{
    return s == CLT_ERR_OUT_OF_MEMORY && clt__plan_refusals(devs, n) != before;
}

/* Pinned memory's planning twin is one for every device: only a whole run
 * (whole_run) uses it, so only whole runs need it idle. */
static clt_status device_of(const clt_plan_options *o, plan_device *d)
{
    d->dev = clt_plan_device(o->device);
    d->pinned = clt_plan_device(clt_pinned());
    CLT_TRY(clt__plan_idle(d->dev));
    return o->whole_run ? clt__plan_idle(d->pinned) : CLT_OK;
}

/* The first Linear's input width, from the model's description of itself. */
static int64_t input_features(const clt_model *m)
{
    for (int i = 0; i < clt_model_num_layers(m); i++) {
        clt_layer_info l;
        if (clt_model_layer(m, i, &l) == CLT_OK && l.in_features > 0) return l.in_features;
    }
    return 0;
}

/* The longest recomputed segment of c's last forward, in blocks. */
static int longest_segment(const clt_model *c)
{
    int most = 0;
    for (int i = 0; i < c->nlayers; i++)
        if (c->layers[i].seg_len > most) most = c->layers[i].seg_len;
    return most;
}

/* The examples of a whole run (plan_internal.h): one batch, or two
 * evaluation batches when they are more, or the training set's examples
 * when they are more still (the trainer's loader uses only train_examples
 * of them: clt__plan_trainer_options' limit). */
clt_status clt__plan_dataset(clt_dataset *ds, const clt_plan_options *o, int64_t eval, int64_t in, int64_t outputs)
{
    int regress = o->task == CLT_TASK_REGRESS, floats = o->train_value_bytes == 4;
    int64_t n = o->batch_size > 2 * eval ? o->batch_size : 2 * eval, bytes, targets;
    if (o->train_examples > n) n = o->train_examples;
    if (clt__mul_i64(n, in, &bytes) != 0 || clt__mul_i64(bytes, floats ? 4 : 1, &bytes) != 0 ||
        (uint64_t)bytes > SIZE_MAX || clt__mul_i64(n, outputs, &targets) != 0 ||
        (uint64_t)targets > SIZE_MAX / sizeof(float) || outputs > INT32_MAX)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_step: %lld examples of %lld values are too many to plan",
                         (long long)n, (long long)in);
    *ds = (clt_dataset){.n = n, .rows = 1, .cols = in, .num_classes = regress ? 0 : (int)outputs, .task = o->task,
                        .outputs = regress ? outputs : 0};
    if (floats) ds->x = calloc((size_t)bytes, 1);
    else ds->images = calloc((size_t)bytes, 1);
    if (regress) ds->values = calloc((size_t)targets, sizeof(float));
    else ds->labels = calloc((size_t)n, 1);
    if ((ds->images || ds->x) && (ds->labels || ds->values)) return CLT_OK;
    clt_dataset_free(ds);
    return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_plan_step: out of host memory for %lld examples of %lld values",
                     (long long)n, (long long)in);
}

clt_trainer_options clt__plan_trainer_options(const clt_plan_options *o)
{
    clt_trainer_options to = clt_trainer_default_options();
    to.batch_size = o->batch_size;
    to.accumulate = o->accumulate;
    to.optimizer = o->optimizer;
    to.momentum = o->optimizer == CLT_OPTIMIZER_SGD ? o->momentum : 0.0f;
    to.fp16 = o->dtype == CLT_FLOAT16;
    to.recompute_blocks = o->recompute_blocks;
    to.shuffle = 0;
    to.train_limit = o->whole_run ? o->train_examples : 0;
    return to;
}

/* Step k's batch: from the loader when there is one (the trainer's, over
 * pinned staging), else made on dev: x (B, in) and int32 labels (B) or
 * float32 targets (B, outputs). */
static clt_status next_batch(clt_loader *loader, const clt_plan_options *o, clt_device dev, int64_t in,
                             int64_t outputs, clt_tensor **x, clt_tensor **y)
{
    if (loader) {
        CLT_TRY(clt_loader_set_position(loader, 0, 0));
        return clt_loader_next(loader, x, y);
    }
    int64_t xs[2] = {o->batch_size, in}, ys[2] = {o->batch_size, outputs};
    CLT_TRY(clt_empty(x, dev, CLT_FLOAT32, 2, xs));
    return o->task == CLT_TASK_REGRESS ? clt_zeros(y, dev, CLT_FLOAT32, 2, ys) : clt_zeros(y, dev, CLT_INT32, 1, ys);
}

clt_status clt__plan_warmup(const clt_model *c, const clt_plan_options *o, int64_t micro, int64_t examples)
{
    int flags = o->task == CLT_TASK_REGRESS ? CLT_WARMUP_REGRESSION : 0;
    return clt_model_warmup(c, micro < examples ? micro : examples, o->optimizer, 0.0, flags, NULL);
}

clt_status clt__plan_evaluate(clt_model *c, const clt_dataset *ds, int64_t eval, clt_device dev, clt_device pinned,
                              clt_plan *p)
{
    double loss, accuracy;
    clt_memory_stats st, pin;
    CLT_TRY(clt_memory_reset_peak(dev));
    CLT_TRY(clt_trainer_evaluate(c, ds, eval, 2 * eval, &loss, &accuracy));
    CLT_TRY(clt_memory_get_stats(dev, &st));
    CLT_TRY(clt_memory_get_stats(pinned, &pin));
    p->eval_peak = st.peak_allocated;
    if (st.peak_reserved > p->reserved) p->reserved = st.peak_reserved;
    p->staging = pin.peak_allocated;
    p->staging_reserved = pin.peak_reserved;
    return CLT_OK;
}

clt_status clt__plan_read(clt_device dev, int64_t batch, int64_t reserved, clt_plan *p)
{
    clt_memory_stats st;
    int64_t at[CLT_MEM_CATEGORY_COUNT];
    CLT_TRY(clt_memory_get_stats(dev, &st));
    CLT_TRY(clt__memory_at_peak(dev, at));
    p->batch = batch;
    p->peak = st.peak_allocated;
    p->weights = at[CLT_MEM_WEIGHTS];
    p->gradients = at[CLT_MEM_GRADIENTS];
    p->optimizer = at[CLT_MEM_OPTIMIZER];
    p->activations = at[CLT_MEM_ACTIVATIONS];
    p->temporaries = p->peak - p->weights - p->gradients - p->optimizer - p->batch - p->activations;
    p->peak_activations = st.category_peak[CLT_MEM_ACTIVATIONS];
    p->reserved = st.peak_reserved > reserved ? st.peak_reserved : reserved;
    return CLT_OK;
}

/* The run: the model built on the planning device, then two of the
 * trainer's steps at the batch, the second the steady state whose peak is
 * the plan's (the first makes the gradients and the optimizer's state);
 * with whole_run the batches come through the trainer's loader and an
 * evaluation follows. */
static clt_status run_steps(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t in,
                            clt_plan *p, int *in_evaluation)
{
    clt_device dev = d->dev;
    clt_model *c = NULL;
    clt_optimizer *opt = NULL;
    clt_tensor *loss_sum = NULL;
    clt_loader *loader = NULL;
    clt_dataset ds = {0};
    clt_trainer_options to = clt__plan_trainer_options(o);
    int64_t one = 1, reserved = 0;
    int64_t micro = o->accumulate > 1 ? (o->batch_size + o->accumulate - 1) / o->accumulate : o->batch_size;
    int64_t eval = o->eval_batch_size > 0 ? o->eval_batch_size : micro;
    clt_status s = o->whole_run ? clt__plan_dataset(&ds, o, eval, in, m->features) : CLT_OK;
    if (s == CLT_OK) s = clt__model_layout(&c, m);
    if (s == CLT_OK) s = clt_model_init(c, dev, 0);
    if (s == CLT_OK && o->dtype != CLT_FLOAT32) s = clt_model_to_dtype(c, o->dtype);
    if (s == CLT_OK && o->drop_packed) clt_model_set_keep_packed(c, 0);
    if (s == CLT_OK) s = clt_model_set_recompute(c, o->recompute_blocks);
    if (s == CLT_OK) s = clt__fit_optimizer(&opt, c, &to); /* the trainer's */
    if (s == CLT_OK && o->whole_run) {
        clt_loader_options lo = clt__fit_loader_options(&to);
        s = clt_loader_create(&loader, &ds, dev, &lo);
    }
    if (s == CLT_OK) s = clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && o->whole_run) s = clt__plan_warmup(c, o, micro, clt_loader_num_examples(loader));
    for (int k = 0; k < 2 && s == CLT_OK; k++) {
        if (k == 1) {
            reserved = clt_memory_max_reserved(dev);
            s = clt_memory_reset_peak(dev);
        }
        clt_tensor *x = NULL, *y = NULL;
        if (s == CLT_OK) s = next_batch(loader, o, dev, in, m->features, &x, &y);
        p->batch = (int64_t)(clt_tensor_nbytes(x) + clt_tensor_nbytes(y));
        clt__step_tensors t = {.x = x, .y = y};
        clt__step_options so = {.loss = clt__loss_for_task(o->task), .accumulate = o->accumulate};
        if (s == CLT_OK) s = clt__train_step(c, opt, &t, loss_sum, 0, &so);
        clt__step_tensors_release(&t); /* in the trainer's order */
    }
    if (s == CLT_OK) s = clt__plan_read(dev, p->batch, reserved, p);
    if (s == CLT_OK) p->recompute_blocks = o->recompute_blocks ? longest_segment(c) : 0;
    if (s == CLT_OK && o->whole_run) {
        *in_evaluation = 1;
        s = clt__plan_evaluate(c, &ds, eval, dev, d->pinned, p);
    }
    clt_loader_free(loader);
    clt_dataset_free(&ds);
    clt_tensor_release(loss_sum);
    clt_optimizer_free(opt);
    clt_model_free(c);
    return s;
}

/* 1 when a batch's own bytes, with room to spare, pass INT64_MAX. */
static int too_large(int64_t batch, int64_t in)
{
    int64_t bytes;
    return clt__mul_i64(batch, in + 1, &bytes) != 0 || clt__mul_i64(bytes, 64, &bytes) != 0;
}

/* Plans o's step with the planning device capped at cap (0: none); *fits
 * (may be NULL) says whether every request found room (1), or not (0), or
 * every request of the steps but not of the evaluation after them (-1); a
 * run that does not fit is no error when fits is given. */
static clt_status plan_with(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t cap,
                            clt_plan *p, int *fits)
{
    const char *op = "clt_plan_step";
    memset(p, 0, sizeof *p);
    if (fits) *fits = 0;
    int64_t in = input_features(m);
    if (!m->initialised || in < 1 || m->features < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the model must be initialised and have a Linear", op);
    if (o->batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch size %lld (must be >= 1)", op, (long long)o->batch_size);
    if (o->eval_batch_size < 0 || o->eval_batch_size > INT64_MAX / 4)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: eval_batch_size %lld (0: the micro-batch size)", op,
                         (long long)o->eval_batch_size);
    if (too_large(o->batch_size, in))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch size %lld is too large to plan: the batch alone would "
                         "be past %lld bytes", op, (long long)o->batch_size, (long long)(INT64_MAX / 16));
    if (o->recompute_blocks < 0 && o->recompute_blocks != CLT_RECOMPUTE_AUTO)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: segment size %d", op, o->recompute_blocks);
    if (o->accumulate < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: accumulate %d (micro-batches per step; 0 or 1: none)", op,
                         o->accumulate);
    if (o->task != CLT_TASK_CLASSIFY && o->task != CLT_TASK_REGRESS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: task %d (CLT_TASK_CLASSIFY or CLT_TASK_REGRESS)", op,
                         (int)o->task);
    if (o->dtype != CLT_FLOAT32 && o->dtype != CLT_FLOAT16)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: a model is float32 or float16, not %s", op,
                         clt_dtype_name(o->dtype));
    p->input_features = in;
    clt_plan_options q = *o;
    if (q.accumulate > q.batch_size) q.accumulate = (int)q.batch_size;
    clt_memory_stats before, pinned_before;
    int64_t pinned_real_cap;
    CLT_TRY(clt_memory_get_stats(d->dev, &before));
    CLT_TRY(clt_memory_get_stats(d->pinned, &pinned_before));
    CLT_TRY(clt__plan_pinned_cap(&pinned_real_cap));
    /* From empty allocators, as devices no program has used yet; pinned
     * memory (a whole run's) under its own cap when the plan has a budget. */
    int pinned = q.whole_run != 0;
    clt_status s = clt_memory_set_cap(d->dev, cap);
    if (s == CLT_OK) s = clt_memory_empty_cache(d->dev);
    if (s == CLT_OK) s = clt_memory_reset_peak(d->dev);
    if (s == CLT_OK && pinned) s = clt_memory_set_cap(d->pinned, cap ? pinned_real_cap : 0);
    if (s == CLT_OK && pinned) s = clt_memory_empty_cache(d->pinned);
    if (s == CLT_OK && pinned) s = clt_memory_reset_peak(d->pinned);
    int in_evaluation = 0;
    clt_device devs[2] = {d->dev, d->pinned};
    uint64_t refused = clt__plan_refusals(devs, 2);
    if (s == CLT_OK) s = run_steps(m, &q, d, in, p, &in_evaluation);
    clt_memory_empty_cache(d->dev);
    clt_memory_set_cap(d->dev, before.cap);
    if (pinned) clt_memory_empty_cache(d->pinned);
    if (pinned) clt_memory_set_cap(d->pinned, pinned_before.cap);
    if (fits && clt__plan_ran_out(s, devs, 2, refused)) {
        /* Out of memory under the cap, or past the device's largest buffer; the host's is an error. */
        p->peak = 0;
        *fits = in_evaluation ? -1 : 0;
        return CLT_OK;
    }
    if (fits && s == CLT_OK) *fits = 1;
    return s;
}

clt_status clt_plan_step(const clt_model *m, const clt_plan_options *o, clt_plan *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_step: NULL argument");
    plan_device d;
    CLT_TRY(device_of(o, &d));
    return plan_with(m, o, &d, 0, out, NULL);
}

/* A batch fits when its run under the budget as a cap never runs out. */
static clt_status max_batch(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t budget,
                            int64_t hi, int64_t *batch)
{
    clt_plan_options q = *o;
    clt_plan p;
    int64_t lo = 0; /* the largest known to fit */
    /* Batches too large to plan do not fit any budget. */
    while (hi > 0 && too_large(hi, input_features(m))) hi /= 2;
    while (lo < hi) {
        q.batch_size = lo + (hi - lo + 1) / 2;
        int fits;
        CLT_TRY(plan_with(m, &q, d, budget, &p, &fits));
        if (fits > 0) lo = q.batch_size;
        else hi = q.batch_size - 1;
    }
    *batch = lo;
    return CLT_OK;
}

clt_status clt_plan_max_batch(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch_size,
                              int64_t *batch)
{
    if (!m || !o || !batch) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_max_batch: NULL argument");
    *batch = 0;
    if (max_batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_max_batch: max_batch %lld", (long long)max_batch_size);
    if (budget <= 0) return CLT_OK;
    plan_device d;
    CLT_TRY(device_of(o, &d));
    return max_batch(m, o, &d, budget, max_batch_size, batch);
}

#define MIB (1024.0 * 1024.0)

/* The micro-batch counts clt_plan_fit tries, in order: 1 to 64, then
 * doubling, then the batch size itself (micro-batches of one example), none
 * past the batch size or 2^30; 0 after the last. */
static int next_micro(int n, int64_t batch)
{
    int64_t cap = batch < (1 << 30) ? batch : (1 << 30);
    int64_t next = n < 64 ? n + 1 : 2 * (int64_t)n;
    if (next > cap) next = n < cap ? cap : 0;
    return (int)next;
}

/* Plans q under the budget less its margin and, where that fits, under
 * the budget itself, the trained run's cap, whose figures p then holds:
 * the allocator rounds a segment up only where the rounded one fits under
 * the cap, so under a larger cap a segment can take the room a later
 * request needs (a 20 MiB segment up to the cap, then no room for a small
 * one), and a run that fits under a cap need not under a larger one.
 * *fits is the lower of the two (0 below -1 below 1). */
static clt_status plan_both(clt__plan_try try_plan, void *ctx, const clt_plan_options *q, clt_plan *p, int *fits)
{
    CLT_TRY(try_plan(ctx, q, CLT__PLAN_MARGIN, p, fits));
    if (*fits == 0) return CLT_OK;
    clt_plan run;
    int run_fits;
    CLT_TRY(try_plan(ctx, q, CLT__PLAN_BUDGET, &run, &run_fits));
    if (run_fits <= 0) *fits = run_fits;
    if (run_fits != 0) *p = run;
    return CLT_OK;
}

/* Plans q under the budget (plan_both); when its steps fit but its
 * evaluation does not and the model keeps packed weights, tries again
 * without them (q->drop_packed). */
static clt_status plan_fitting(const clt_model *m, clt_plan_options *q, clt__plan_try try_plan, void *ctx,
                               clt_plan *p, int *fits)
{
    q->drop_packed = 0;
    CLT_TRY(plan_both(try_plan, ctx, q, p, fits));
    if (*fits >= 0 || m->drop_packed) return CLT_OK;
    q->drop_packed = 1;
    return plan_both(try_plan, ctx, q, p, fits);
}

/* The segment size with the lowest predicted peak that fits (0: none), and
 * whether it evaluates without kept packed weights (q->drop_packed). */
static clt_status best_segments(const clt_model *m, clt_plan_options *q, clt__plan_try try_plan, void *ctx,
                                clt_plan *best)
{
    int blocks = clt_model_num_blocks(m), found = 0, drop = 0;
    for (int seg = 1; seg <= blocks; seg++) {
        clt_plan p;
        int fits;
        q->recompute_blocks = seg;
        CLT_TRY(plan_fitting(m, q, try_plan, ctx, &p, &fits));
        if (fits > 0 && (!found || p.peak < best->peak)) {
            drop = q->drop_packed;
            *best = p;
            found = seg;
        }
    }
    q->recompute_blocks = found;
    q->drop_packed = drop;
    return CLT_OK;
}

/* The first configuration of one dtype that fits, in clt_plan_fit's order. */
static clt_status fit_dtype(const clt_model *m, clt_plan_options q, clt__plan_try try_plan, void *ctx,
                            clt_plan_fit_result *out, int *found)
{
    *found = 0;
    for (int n = 1; n; n = next_micro(n, q.batch_size)) {
        q.accumulate = n;
        q.recompute_blocks = 0;
        int fits;
        CLT_TRY(plan_fitting(m, &q, try_plan, ctx, &out->plan, &fits));
        if (fits <= 0) CLT_TRY(best_segments(m, &q, try_plan, ctx, &out->plan));
        if (fits > 0 || q.recompute_blocks) {
            out->accumulate = n;
            out->recompute_blocks = q.recompute_blocks;
            out->dtype = q.dtype;
            out->keep_packed = !q.drop_packed && !m->drop_packed;
            *found = 1;
            return CLT_OK;
        }
    }
    return CLT_OK;
}

/* A whole run's loaders stage at least the training batch (two buffers of
 * it) and an evaluation batch of one example in pinned memory, whatever
 * the configuration: past pinned memory's cap, nothing can fit. */
static clt_status check_staging(const clt_plan_options *o, clt__plan_try try_plan, void *ctx)
{
    int64_t cap;
    CLT_TRY(clt__plan_pinned_cap(&cap));
    if (!o->whole_run || !cap) return CLT_OK;
    clt_plan_options q = *o;
    q.accumulate = q.recompute_blocks = q.drop_packed = 0;
    q.eval_batch_size = 1;
    clt_plan p;
    CLT_TRY(try_plan(ctx, &q, CLT__PLAN_UNCAPPED, &p, NULL));
    if (p.staging <= cap) return CLT_OK;
    return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                     "the loaders' staging of a batch of %lld needs %.1f MiB of pinned memory (%lld bytes), past "
                     "pinned memory's cap of %.1f MiB (%lld bytes): no configuration of the step can fit; lower the "
                     "batch size or raise pinned memory's cap (CLT_MEMORY_CAP=pinned=SIZE)",
                     (long long)o->batch_size, p.staging / MIB, (long long)p.staging, cap / MIB, (long long)cap);
}

int64_t clt__plan_margin(int64_t budget) { return 2 * 1024 * 1024 + budget / 32; }

clt_status clt__plan_search(const clt_model *m, const clt_plan_options *o, int allow_fp16, clt__plan_try try_plan,
                            void *ctx, int64_t (*micro)(void *ctx, const clt_plan_options *q), const char *where,
                            clt_plan_fit_result *out)
{
    CLT_TRY(check_staging(o, try_plan, ctx));
    int found = 0;
    clt_plan_options q = *o;
    CLT_TRY(fit_dtype(m, q, try_plan, ctx, out, &found));
    if (!found && allow_fp16 && o->dtype != CLT_FLOAT16) {
        q.dtype = CLT_FLOAT16;
        CLT_TRY(fit_dtype(m, q, try_plan, ctx, out, &found));
    }
    if (found) {
        q.accumulate = out->accumulate;
        out->eval_batch_size = o->eval_batch_size > 0 ? o->eval_batch_size : micro(ctx, &q);
        return CLT_OK;
    }
    clt_plan p;
    q = *o;
    q.accumulate = q.recompute_blocks = 0;
    CLT_TRY(try_plan(ctx, &q, CLT__PLAN_UNCAPPED, &p, NULL));
    return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                     "no configuration of a %s%s step at batch %lld fits %s: "
                     "the %s weights, gradients and optimizer state alone need %.1f MiB and the batch %.1f MiB, "
                     "beside the allocator's segments%s; use a smaller model or batch%s, or a larger device",
                     clt_dtype_name(o->dtype), allow_fp16 && o->dtype != CLT_FLOAT16 ? " or float16" : "",
                     (long long)o->batch_size, where, clt_dtype_name(o->dtype),
                     (p.weights + p.gradients + p.optimizer) / MIB, p.batch / MIB,
                     o->whole_run ? " and, in the trainer's warm-up step, a scratch copy of the model" : "",
                     allow_fp16 || o->dtype == CLT_FLOAT16 ? "" : ", or allow float16 (--fit=any)");
}

/* One device's configuration under its budget or its limit (the budget
 * less the margin), for clt__plan_search. */
typedef struct one_device {
    const clt_model *m;
    const plan_device *d;
    int64_t budget, limit;
} one_device;

static clt_status try_one_device(void *ctx, const clt_plan_options *q, int capped, clt_plan *p, int *fits)
{
    const one_device *t = ctx;
    if (capped && t->limit <= 0) { /* the margin leaves nothing */
        memset(p, 0, sizeof *p);
        *fits = 0;
        return CLT_OK;
    }
    int64_t cap = capped == CLT__PLAN_BUDGET ? t->budget : capped ? t->limit : 0;
    return plan_with(t->m, q, t->d, cap, p, capped ? fits : NULL);
}

/* One device's largest micro-batch. */
static int64_t one_device_micro(void *ctx, const clt_plan_options *q)
{
    (void)ctx;
    return clt__micro_rows(q->batch_size, q->accumulate > 1 ? q->accumulate : 1, 0);
}

clt_status clt_plan_fit(const clt_model *m, const clt_plan_options *o, int64_t budget, int allow_fp16,
                        clt_plan_fit_result *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_fit: NULL argument");
    memset(out, 0, sizeof *out);
    if (budget <= 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_fit: budget %lld", (long long)budget);
    plan_device d;
    CLT_TRY(device_of(o, &d));
    out->budget = budget;
    out->margin = clt__plan_margin(budget);
    one_device t = {m, &d, budget, budget - out->margin};
    char dev[32] = "", where[96];
    clt_device_name(o->device, dev, sizeof dev);
    snprintf(where, sizeof where, "%.1f MiB on %s (less a margin of %.1f MiB)", budget / MIB, dev, out->margin / MIB);
    return clt__plan_search(m, o, allow_fp16, try_one_device, &t, one_device_micro, where, out);
}

/* The allocated peak at batch b of o with segment size seg (0: off). */
static clt_status peak_at(const clt_model *m, const clt_plan_options *o, const plan_device *d, int seg, int64_t b,
                          int64_t *peak)
{
    clt_plan_options q = *o;
    q.batch_size = b;
    q.recompute_blocks = seg;
    clt_plan p;
    CLT_TRY(plan_with(m, &q, d, 0, &p, NULL));
    *peak = p.peak;
    return CLT_OK;
}

/* Exercise 2's "why": what a step holds per example with and without
 * checkpointing (the slope of the allocated peak from batch 1 to the
 * largest that fits, b_plain > 1, so that every batch planned runs on the
 * device) beside what does not grow with the batch. */
static clt_status why_further(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t b_plain,
                              int64_t b_recompute, FILE *out)
{
    int seg = o->recompute_blocks ? o->recompute_blocks : CLT_RECOMPUTE_AUTO;
    int64_t p1, pb, c1, cb;
    CLT_TRY(peak_at(m, o, d, 0, 1, &p1));
    CLT_TRY(peak_at(m, o, d, 0, b_plain, &pb));
    CLT_TRY(peak_at(m, o, d, seg, 1, &c1));
    CLT_TRY(peak_at(m, o, d, seg, b_recompute, &cb));
    double per_plain = (double)(pb - p1) / (double)(b_plain - 1),
           per_recompute = (double)(cb - c1) / (double)(b_recompute - 1);
    fprintf(out, "checkpointing goes %.2fx as far: per example a step holds %.1f KiB without checkpointing, %.1f KiB "
                 "with (%.2fx less); %.1f MiB does not grow with the batch\n",
            (double)b_recompute / (double)b_plain, per_plain / 1024, per_recompute / 1024, per_plain / per_recompute,
            (double)(p1 - (int64_t)per_plain) / MIB);
    return CLT_OK;
}

/* The figures of a step that ran with no cap (runs > 0), else what
 * stopped the step (0) or a whole run's evaluation (-1), why: a request
 * past the device's largest buffer, which no budget makes fit. */
static void print_figures(const clt_plan *p, int runs, const char *why, FILE *out)
{
    if (runs <= 0) {
        fprintf(out, "  no figures: the %s stops at any budget: %s\n", runs < 0 ? "evaluation" : "step", why);
        return;
    }
    fprintf(out, "  weights      %10.1f MiB\n  gradients    %10.1f MiB\n  optimizer    %10.1f MiB\n", p->weights / MIB,
            p->gradients / MIB, p->optimizer / MIB);
    fprintf(out, "  batch        %10.1f MiB\n  activations  %10.1f MiB (peak %.1f MiB)\n  temporaries  %10.1f MiB\n",
            p->batch / MIB, p->activations / MIB, p->peak_activations / MIB, p->temporaries / MIB);
    fprintf(out, "  total        %10.1f MiB\n", p->peak / MIB);
}

clt_status clt_plan_report(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch_size,
                           FILE *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_report: NULL argument");
    plan_device d;
    CLT_TRY(device_of(o, &d));
    clt_plan p;
    int runs;
    char why[256] = "";
    CLT_TRY(plan_with(m, o, &d, 0, &p, &runs));
    if (runs <= 0) snprintf(why, sizeof why, "%s", clt_last_error());
    char dev[32];
    CLT_TRY(clt_device_name(o->device, dev, sizeof dev));
    int half = o->dtype == CLT_FLOAT16;
    char micro[48] = "";
    if (o->accumulate > 1) snprintf(micro, sizeof micro, " in %d micro-batches", o->accumulate);
    fprintf(out, "predicted peak of one %s training step at batch %lld%s on %s%s:\n",
            half ? "float16 (mixed-precision)" : "float32", (long long)o->batch_size, micro, dev,
            p.recompute_blocks ? "" : ", no checkpointing");
    if (p.recompute_blocks)
        fprintf(out, "  (activation checkpointing: segments of %d block%s%s)\n", p.recompute_blocks,
                p.recompute_blocks == 1 ? "" : "s",
                o->recompute_blocks == CLT_RECOMPUTE_AUTO ? ", chosen by auto as about sqrt(blocks)" : "");
    print_figures(&p, runs, why, out);
    if (budget <= 0) {
        if (runs > 0)
            fprintf(out, "  reserved     %10.1f MiB (the allocator's segments, from the model's creation on)\n",
                    p.reserved / MIB);
        return CLT_OK;
    }
    /* Under the cap the allocator releases its cache on a miss: what it
     * reserves there is what counts, and what the table shows. */
    clt_plan capped;
    int fits = 0;
    if (runs > 0) CLT_TRY(plan_with(m, o, &d, budget, &capped, &fits));
    if (runs <= 0)
        fprintf(out, "DOES NOT FIT: %.1f MiB available, and no budget is enough at this batch\n", budget / MIB);
    else if (fits > 0)
        fprintf(out, "  reserved     %10.1f MiB (the allocator's segments under the %.1f MiB cap, from the model's "
                "creation on)\n", capped.reserved / MIB, budget / MIB);
    else
        fprintf(out, "  reserved     %10.1f MiB (the allocator's segments with no cap; under %.1f MiB a request "
                "fails)\n", p.reserved / MIB, budget / MIB);
    if (runs > 0)
        fprintf(out, "%s: %.1f MiB available (tensors %.0f%%, reserved %.0f%%)\n", fits > 0 ? "fits" : "DOES NOT FIT",
                budget / MIB, 100.0 * (double)p.peak / (double)budget,
                100.0 * (double)(fits > 0 ? capped.reserved : p.reserved) / (double)budget);
    clt_plan_options plain = *o, recompute = *o;
    plain.recompute_blocks = 0;
    if (!recompute.recompute_blocks) recompute.recompute_blocks = CLT_RECOMPUTE_AUTO;
    int64_t b_plain, b_recompute;
    CLT_TRY(max_batch(m, &plain, &d, budget, max_batch_size, &b_plain));
    CLT_TRY(max_batch(m, &recompute, &d, budget, max_batch_size, &b_recompute));
    const char *more = " (or more)";
    fprintf(out, "largest batch that fits: %lld without checkpointing%s, %lld with%s\n", (long long)b_plain,
            b_plain == max_batch_size ? more : "", (long long)b_recompute, b_recompute == max_batch_size ? more : "");
    if (b_plain > 1 && b_recompute > b_plain && b_recompute < max_batch_size)
        CLT_TRY(why_further(m, o, &d, b_plain, b_recompute, out));
    if (fits > 0) return CLT_OK;
    fprintf(out, "to fit:\n");
    clt_plan_fit_result fit;
    clt_plan_options whole = *o; /* as --fit plans it: the evaluation and the loader's staging too */
    whole.whole_run = 1;
    if (o->batch_size > 1 && clt_plan_fit(m, &whole, budget, 0, &fit) == CLT_OK && fit.accumulate > 1) {
        fprintf(out, "  - keep the batch of %lld (--fit): %d micro-batches", (long long)o->batch_size, fit.accumulate);
        if (fit.recompute_blocks) fprintf(out, ", checkpointed segments of %d blocks", fit.recompute_blocks);
        if (!fit.keep_packed) fprintf(out, ", evaluation without kept packed weights");
        fprintf(out, ", predicted peak %.1f MiB\n", fit.plan.peak / MIB);
    }
    if (b_plain > 0) fprintf(out, "  - lower the batch size to %lld\n", (long long)b_plain);
    if (b_recompute >= o->batch_size && m->nlayers > 0 && clt_model_num_blocks(m) > 0)
        fprintf(out, "  - recompute activations (--recompute auto)\n");
    else if (b_recompute > b_plain)
        fprintf(out, "  - recompute activations (--recompute auto) and lower the batch size to %lld\n",
                (long long)b_recompute);
    /* Of a float16 step's optimizer memory, the master weights (twice the
     * float16 weights) stay whatever the optimizer. */
    int64_t state = half ? p.optimizer - 2 * p.weights : p.optimizer;
    if (state > 0) fprintf(out, "  - SGD without momentum keeps no optimizer state: %.1f MiB less\n", state / MIB);
    if (!half) {
        clt_plan_options h = *o;
        h.dtype = CLT_FLOAT16;
        clt_plan ph;
        int half_runs;
        CLT_TRY(plan_with(m, &h, &d, 0, &ph, &half_runs));
        if (half_runs > 0 && (runs <= 0 || ph.peak < p.peak))
            fprintf(out, "  - train in float16 (--fp16): predicted peak %.1f MiB\n", ph.peak / MIB);
    }
    if (b_plain == 0 && b_recompute == 0 && runs > 0)
        fprintf(out, "  - the weights, gradients and optimizer state alone need %.1f MiB: use a smaller model or a "
                     "larger device\n", (p.weights + p.gradients + p.optimizer) / MIB);
    else if (b_plain == 0 && b_recompute == 0) /* no figures either: a list with nothing to try */
        fprintf(out, "  - no batch fits, not even 1: use a smaller model or a larger device\n");
    return CLT_OK;
}
