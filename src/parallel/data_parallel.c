/* Data parallel training: a replica per device, each global batch split in
 * shards, gradients combined on the primary weighted by shard size (and
 * summed over processes through a clt_collective), one optimizer step on
 * the primary, parameters broadcast back to the replicas. float16 models
 * combine their gradients in float32 and step as on one device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../nn/nn_internal.h"
#include "../ops/half.h"
#include "../plan/plan_internal.h"
#include "../trainer/step.h"
#include "../trainer/engine.h"
#include "cltensor/async.h"
#include "cltensor/ops.h"
#include "cltensor/parallel.h"
#include "parallel_internal.h"

#define CLT__MAX_REPLICAS 64

static clt__dp_step_hook step_hook;
static void *step_hook_ctx;

void clt__dp_set_step_hook(clt__dp_step_hook hook, void *ctx)
{
    step_hook = hook;
    step_hook_ctx = ctx;
}

typedef struct replica {
    clt_model *model;     /* [0] is the caller's model */
    clt_loader *loader;   /* this replica's shard of every global batch */
    clt_tensor *loss_sum; /* sum of per-example losses this epoch, on the device */
    clt__step_tensors t;  /* the current shard and its step's tensors */
    int64_t n;            /* examples in the current shard */
} replica;

typedef struct dp_state {
    replica r[CLT__MAX_REPLICAS];
    int k;                     /* replicas in this process */
    int rank, world;
    const clt_collective *comm;
    clt_optimizer *opt;
    float *staging;            /* host copy of the gradients (and the stop request) for allreduce_sum */
    int64_t examples;          /* per epoch, after the limit, over all ranks */
    int64_t batch_size, batch; /* global; the next global batch of the epoch */
    int64_t local_seen;        /* examples this process took this epoch (the progress bar's) */
    double clip;
    int accumulate;            /* micro-batches per shard (gradient accumulation); 0 or 1: none */
    const clt__loss *loss;     /* the training set's */
    clt_task task;             /* the training set's */
    int64_t primary_batch;     /* the bytes of the primary's last shard (x and targets), for a plan */
} dp_state;

static void batch_release(replica *r)
{
    clt__step_tensors_release(&r->t);
    r->n = 0;
}

static void dp_release(dp_state *d)
{
    for (int i = 0; i < d->k; i++) {
        batch_release(&d->r[i]);
        clt_loader_free(d->r[i].loader);
        clt_tensor_release(d->r[i].loss_sum);
        if (i > 0) clt_model_free(d->r[i].model);
    }
    clt_optimizer_free(d->opt);
    free(d->staging);
}

/* The primary needs a gradient buffer to combine into even when its own
 * shard is empty: a backward of zeros through one zero example creates it,
 * zeroed. */
static clt_status ensure_gradients(clt_model *m, int64_t features)
{
    if (clt_model_gradients(m)) return CLT_OK;
    int64_t shape[2] = {1, features};
    clt_tensor *x = NULL, *y = NULL, *dy = NULL;
    clt_status s = clt_zeros(&x, clt_model_device(m), CLT_FLOAT32, 2, shape);
    if (s == CLT_OK) s = clt_model_forward(m, x, &y);
    if (s == CLT_OK) s = clt_zeros_like(&dy, y);
    if (s == CLT_OK) s = clt_model_backward(m, dy, NULL);
    if (s == CLT_OK) s = clt_model_zero_grad(m);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    return s;
}

/* comm->allreduce_sum, its failure named. */
static clt_status collective_sum(const clt_collective *comm, float *buf, int64_t n, const char *what)
{
    clt_clear_error(); /* so that an earlier failure's message is not taken for its own */
    clt_status s = comm->allreduce_sum(comm->ctx, buf, n);
    if (s == CLT_OK) return CLT_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", clt_last_error());
    return clt__fail(s, "clt_parallel_fit: rank %d of %d: allreduce_sum of the %s (%lld floats) failed%s%s", comm->rank,
                     comm->world, what, (long long)n, why[0] ? ": " : "", why);
}

/* g (float32, on the primary) += its counterparts of every process (host
 * staging). One more float rides along: *stop, this process's stop request
 * in, whether any process asked out, so that every rank stops after the
 * same step without a collective of its own. */
static clt_status allreduce_gradients(dp_state *d, clt_tensor *g, int *stop)
{
    clt_tensor *back = NULL;
    int64_t n = clt_tensor_numel(g);
    CLT_TRY(clt_to_host(g, d->staging, (size_t)n * sizeof(float)));
    d->staging[n] = *stop ? 1.0f : 0.0f;
    CLT_TRY(collective_sum(d->comm, d->staging, n + 1, "gradients"));
    *stop = d->staging[n] > 0;
    CLT_TRY(clt_from_host(&back, clt_tensor_device(g), CLT_FLOAT32, 1, &n, d->staging));
    clt_status s = clt_copy_(g, back);
    clt_tensor_release(back);
    return s;
}

/* The primary's gradients become the sum of every replica's, of every
 * process. The sum runs in float32 (a float16 model's gradients widened
 * first), so that adding shards costs no float16 rounding and cannot
 * overflow where the global gradient does not; narrowed back, it holds what
 * one device's backward on the global batch would. An inf or NaN of any
 * replica survives the sum, so the optimizer's overflow check on the
 * primary skips the step for all. */
static clt_status reduce_gradients(dp_state *d, int *stop)
{
    clt_tensor *g0 = clt_model_gradients(d->r[0].model), *sum = NULL;
    CLT_TRY(clt_to_dtype(&sum, g0, CLT_FLOAT32)); /* g0 itself for float32 */
    clt_status s = sum == g0 ? CLT_OK : clt_tensor_set_category(sum, CLT_MEM_GRADIENTS);
    for (int i = 1; s == CLT_OK && i < d->k; i++) {
        if (d->r[i].n == 0) continue;
        clt_tensor *moved = NULL, *wide = NULL;
        s = clt_to(&moved, clt_model_gradients(d->r[i].model), clt_tensor_device(g0));
        if (s == CLT_OK) s = clt_to_dtype(&wide, moved, CLT_FLOAT32);
        if (s == CLT_OK) s = clt_add_(sum, wide);
        clt_tensor_release(wide);
        clt_tensor_release(moved);
    }
    if (s == CLT_OK && d->comm) s = allreduce_gradients(d, sum, stop);
    if (s == CLT_OK && sum != g0) s = clt__convert_to_half(g0, sum, 1.0f);
    clt_tensor_release(sum);
    return s;
}

/* Every replica takes the primary's parameters and loss scaler state (which
 * a float16 step may have halved or doubled). */
static clt_status broadcast(dp_state *d)
{
    for (int i = 1; i < d->k; i++) CLT_TRY(clt__model_copy_state(d->r[i].model, d->r[0].model));
    return CLT_OK;
}

/* One optimizer step on a global batch of global_n examples, its shards already loaded. */
static clt_status dp_step(dp_state *d, int64_t global_n, double clip, int *stop)
{
    clt_model *primary = d->r[0].model;
    /* Issue every device's work before waiting on any. */
    CLT_TRY(clt_model_zero_grad(primary));
    for (int i = 0; i < d->k; i++) {
        replica *r = &d->r[i];
        if (r->n == 0) continue;
        /* Each (micro-)batch's dout is its mean loss's gradient; scaled by its
         * rows / global_n, the sum over shards is the global mean's. */
        clt__step_options so = {.loss = d->loss, .accumulate = d->accumulate, .denom = global_n};
        CLT_TRY(clt__step_gradients(r->model, &r->t, r->loss_sum, &so));
    }
    CLT_TRY(reduce_gradients(d, stop));
    if (clip > 0) CLT_TRY(clt_model_clip_grad_norm(primary, clip, NULL));
    CLT_TRY(clt_optimizer_step(d->opt));
    CLT_TRY(broadcast(d));
    if (step_hook) {
        clt_model *models[CLT__MAX_REPLICAS];
        for (int i = 0; i < d->k; i++) models[i] = d->r[i].model;
        step_hook(models, d->k, step_hook_ctx);
    }
    return CLT_OK;
}

/* Sum of the replicas' loss sums in this process (a synchronization point). */
static clt_status local_loss(dp_state *d, double *sum)
{
    *sum = 0;
    for (int i = 0; i < d->k; i++) {
        double v;
        CLT_TRY(clt__step_read(d->r[i].loss_sum, &v, "clt_parallel_fit (reading the loss)"));
        *sum += v;
    }
    return CLT_OK;
}

/* ---- The backend of the fit engine (src/trainer/engine.h) ---- */

static clt_status dp_begin(void *ctx, int64_t epoch, int64_t batch, double loss_sum)
{
    dp_state *d = ctx;
    for (int i = 0; i < d->k; i++) {
        CLT_TRY(clt_loader_set_position(d->r[i].loader, epoch, batch));
        /* A resumed partial epoch's sum, counted once: on rank 0's primary. */
        CLT_TRY(clt_fill_(d->r[i].loss_sum, i == 0 && d->rank == 0 ? loss_sum : 0.0));
    }
    d->batch = batch;
    d->local_seen = 0;
    return CLT_OK;
}

static clt_status dp_next(void *ctx, int64_t *n, int *stop)
{
    dp_state *d = ctx;
    int done = 0;
    clt_status s = CLT_OK;
    *n = 0;
    for (int i = 0; s == CLT_OK && i < d->k; i++) {
        replica *r = &d->r[i];
        s = clt_loader_next(r->loader, &r->t.x, &r->t.y);
        if (s == CLT_OK && !r->t.x) done = 1;
        r->n = r->t.x ? clt_tensor_dim(r->t.x, 0) : 0;
    }
    d->primary_batch = (int64_t)(clt_tensor_nbytes(d->r[0].t.x) + clt_tensor_nbytes(d->r[0].t.y));
    if (s == CLT_OK && !done) {
        int64_t start = d->batch * d->batch_size;
        int64_t global_n = d->examples - start < d->batch_size ? d->examples - start : d->batch_size;
        for (int i = 0; i < d->k; i++) d->local_seen += d->r[i].n;
        s = dp_step(d, global_n, d->clip, stop);
        if (s == CLT_OK) {
            *n = global_n;
            d->batch++;
        }
    }
    for (int i = 0; i < d->k; i++) batch_release(&d->r[i]);
    return s;
}

static clt_status dp_loss(void *ctx, double *sum)
{
    dp_state *d = ctx;
    CLT_TRY(local_loss(d, sum));
    if (!d->comm) return CLT_OK;
    float total = (float)*sum;
    CLT_TRY(collective_sum(d->comm, &total, 1, "epoch's loss"));
    *sum = total;
    return CLT_OK;
}

static clt_status dp_running(void *ctx, int64_t seen, double *mean)
{
    dp_state *d = ctx;
    double sum = 0;
    CLT_TRY(local_loss(d, &sum));
    int64_t of = d->comm ? d->local_seen : seen;
    *mean = of ? sum / (double)of : NAN;
    return CLT_OK;
}

static clt_status dp_sync(void *ctx) { return broadcast(ctx); }

static clt_status dp_agree(void *ctx, float *values, int64_t n)
{
    return collective_sum(((dp_state *)ctx)->comm, values, n, "epoch's verdict");
}

static clt_status check_args(const clt_model *model, const clt_dataset *train, const clt_trainer_options *opt,
                             const clt_device *devices, int num_devices, const clt_collective *comm)
{
    const char *op = "clt_parallel_fit";
    if (!model || !train || !opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    if (num_devices < 0 || num_devices > CLT__MAX_REPLICAS || (devices && num_devices < 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: num_devices is %d; it must be 1..%d (0: every GPU without a "
                         "list)", op, num_devices, CLT__MAX_REPLICAS);
    if (comm && (comm->world < 1 || comm->rank < 0 || comm->rank >= comm->world || !comm->allreduce_sum))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: collective with rank %d of world %d%s", op, comm->rank,
                         comm->world, comm->allreduce_sum ? "" : " and no allreduce_sum");
    if (opt->memory_plot_path)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: memory_plot_path works with clt_trainer_fit, on one device", op);
    return clt__fit_check(op, train, opt, !comm || comm->rank == 0);
}

/* Moves the model to the primary, makes the replicas and the loaders. */
static clt_status dp_setup(dp_state *d, clt_model *model, const clt_dataset *train, const clt_trainer_options *opt,
                           const clt_device *list)
{
    for (int i = 0; i < d->k; i++) {
        if (!clt_device_exists(list[i])) {
            char name[32] = "?";
            clt_device_name(list[i], name, sizeof name);
            return clt__fail(CLT_ERR_NO_DEVICE, "clt_parallel_fit: device %s (replica %d) does not exist", name, i);
        }
    }
    CLT_TRY(clt_model_to(model, list[0]));
    clt_model_set_training(model, 1);
    /* Before replicating: the replicas copy the float16 parameters bit for bit. */
    if (opt->fp16) CLT_TRY(clt_model_to_dtype(model, CLT_FLOAT16));
    d->r[0].model = model;
    for (int i = 1; i < d->k; i++) {
        d->r[i].model = NULL;
        CLT_TRY(clt_model_replicate(&d->r[i].model, model, list[i]));
    }
    for (int i = 0; i < d->k; i++) CLT_TRY(clt_model_set_recompute(d->r[i].model, opt->recompute_blocks));
    CLT_TRY(ensure_gradients(model, train->rows * train->cols));
    CLT_TRY(clt__fit_optimizer(&d->opt, model, opt));
    d->loss = clt__loss_for(train);
    d->task = train->task;
    clt_loader_options lo = clt__fit_loader_options(opt);
    lo.world = d->world * d->k;
    int64_t one = 1;
    for (int i = 0; i < d->k; i++) {
        lo.rank = d->rank * d->k + i;
        CLT_TRY(clt_loader_create(&d->r[i].loader, train, list[i], &lo));
        CLT_TRY(clt_zeros(&d->r[i].loss_sum, list[i], CLT_FLOAT32, 1, &one));
    }
    d->examples = clt_loader_num_examples(d->r[0].loader);
    d->batch_size = opt->batch_size;
    d->clip = opt->gradient_clip_val;
    d->accumulate = opt->accumulate;
    if (d->comm) {
        /* The gradients and one float for the stop request. */
        d->staging = malloc(((size_t)clt_model_num_parameter_elements(model) + 1) * sizeof(float));
        if (!d->staging) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_parallel_fit: no host memory for staging");
    }
    return CLT_OK;
}

/* The engine's view of d. */
static void dp_backend(dp_state *d, const clt_device *list, clt__fit_backend *b)
{
    memset(b, 0, sizeof *b);
    b->ctx = d;
    b->op = "clt_parallel_fit";
    char primary[24] = "?";
    clt_device_name(list[0], primary, sizeof primary);
    if (d->k > 1) snprintf(b->device, sizeof b->device, "%s+%d", primary, d->k - 1);
    else snprintf(b->device, sizeof b->device, "%s", primary);
    if (d->world > 1) snprintf(b->log_suffix, sizeof b->log_suffix, " x %d ranks", d->world);
    b->lead = d->rank == 0;
    b->collective = d->comm != NULL;
    b->model = d->r[0].model;
    b->opt = d->opt;
    b->examples = d->examples;
    b->batches = clt_loader_num_batches(d->r[0].loader);
    b->task = d->task;
    b->sync = dp_sync;
    b->begin_epoch = dp_begin;
    b->step = dp_next;
    b->loss_sum = dp_loss;
    b->running_loss = dp_running;
    b->agree = d->comm ? dp_agree : NULL;
    int64_t shards = (int64_t)d->world * d->k;
    b->shard = d->batch_size / shards + (d->batch_size % shards != 0);
}

clt_status clt_parallel_fit(clt_model *model, const clt_dataset *train, const clt_dataset *val,
                            const clt_trainer_options *opt, const clt_device *devices, int num_devices,
                            const clt_collective *comm, clt_trainer_result *out)
{
    CLT_TRY(check_args(model, train, opt, devices, num_devices, comm));
    clt_device list[CLT__MAX_REPLICAS];
    int k = num_devices;
    if (devices) {
        memcpy(list, devices, (size_t)k * sizeof *list);
    } else {
        int avail = clt_try_all_gpus(list, CLT__MAX_REPLICAS);
        if (avail > CLT__MAX_REPLICAS) avail = CLT__MAX_REPLICAS;
        if (k == 0 || k > avail) k = avail;
    }
    dp_state *d = calloc(1, sizeof *d);
    if (!d) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_parallel_fit: out of host memory");
    d->k = k;
    d->comm = comm;
    d->rank = comm ? comm->rank : 0;
    d->world = comm ? comm->world : 1;
    clt_status s = dp_setup(d, model, train, opt, list);
    clt__fit_backend b;
    if (s == CLT_OK) {
        dp_backend(d, list, &b);
        b.tabular = train->images == NULL;
        s = clt__fit_run(&b, val, opt, out);
    }
    dp_release(d);
    free(d);
    return s;
}

/* ---- Planning (clt_parallel_plan, clt_parallel_plan_fit) ---- */

/* The planning devices of devices (a device listed twice holds two
 * replicas, as in clt_parallel_fit), each existing and holding nothing. */
static clt_status plan_devices(const char *op, const clt_device *devices, int k, clt_device *twins)
{
    for (int i = 0; i < k; i++) {
        char name[32] = "?";
        clt_device_name(devices[i], name, sizeof name);
        if (!clt_device_exists(devices[i]))
            return clt__fail(CLT_ERR_NO_DEVICE, "%s: device %s (replica %d) does not exist", op, name, i);
        twins[i] = clt_plan_device(devices[i]);
        CLT_TRY(clt__plan_idle(twins[i]));
        CLT_TRY(clt_memory_empty_cache(twins[i]));
        CLT_TRY(clt_memory_reset_peak(twins[i]));
    }
    return CLT_OK;
}

/* The largest micro-batch a device's step runs: of the largest shard
 * (ceil(batch / k) rows), in o's micro-batches. */
static int64_t largest_micro(const clt_plan_options *o, int k)
{
    int64_t shard = o->batch_size / k + (o->batch_size % k != 0);
    return clt__micro_rows(shard, o->accumulate > 1 ? o->accumulate : 1, 0);
}

/* A plan's run on the planning devices twins[0..k) (and pinned memory's, twins[k]). */
typedef struct plan_run_args {
    const clt_model *m;
    const clt_plan_options *o;
    const clt_device *twins;
    int k;
    int64_t eval;       /* with whole_run, the evaluation's batch */
    int64_t *peaks;     /* per device, over the second step */
    clt_plan *p;        /* the primary's, and the evaluation's */
    int in_evaluation;  /* 1 once the steps are done */
} plan_run_args;

/* Two of clt_parallel_fit's steps over ds on the planning devices, peaks
 * over the second; with whole_run, the primary's evaluation after them, the
 * replicas still alive as in clt_parallel_fit. */
static clt_status plan_run(dp_state *d, const clt_dataset *ds, plan_run_args *a)
{
    clt_trainer_options to = clt__plan_trainer_options(a->o);
    clt_model *c = NULL;
    int64_t reserved = 0;
    clt_status s = clt__model_layout(&c, a->m);
    if (s == CLT_OK) s = clt_model_init(c, a->twins[0], 0);
    if (s == CLT_OK && a->o->drop_packed) clt_model_set_keep_packed(c, 0);
    if (s == CLT_OK) s = dp_setup(d, c, ds, &to, a->twins);
    if (s == CLT_OK && a->o->whole_run) s = clt__plan_warmup(c, a->o, largest_micro(a->o, a->k), d->examples);
    for (int step = 0; s == CLT_OK && step < 2; step++) {
        int64_t n = 0;
        int stop = 0;
        s = dp_begin(d, 0, 0, 0.0);
        if (step == 1) reserved = clt_memory_max_reserved(a->twins[0]);
        for (int i = 0; step == 1 && s == CLT_OK && i < d->k; i++) s = clt_memory_reset_peak(a->twins[i]);
        if (s == CLT_OK) s = dp_next(d, &n, &stop);
    }
    for (int i = 0; s == CLT_OK && i < d->k; i++) a->peaks[i] = clt_memory_max_allocated(a->twins[i]);
    if (s == CLT_OK) s = clt__plan_read(a->twins[0], d->primary_batch, reserved, a->p);
    if (s == CLT_OK && a->o->whole_run) {
        a->in_evaluation = 1;
        s = clt__plan_evaluate(c, ds, a->eval, a->twins[0], a->twins[a->k], a->p);
    }
    dp_release(d); /* the replicas; the primary is c */
    clt_model_free(c);
    return s;
}

/* Checks what a plan of data parallel needs of its arguments. */
static clt_status plan_check(const char *op, const clt_model *m, const clt_plan_options *o, const clt_device *devices,
                             int num_devices)
{
    if (!m || !o || !devices) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    if (num_devices < 1 || num_devices > CLT__MAX_REPLICAS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: num_devices is %d; it must be 1..%d", op, num_devices,
                         CLT__MAX_REPLICAS);
    if (!m->initialised || clt_model_num_inputs(m) < 1 || o->batch_size < 1 || o->accumulate < 0 ||
        o->accumulate > o->batch_size || (o->dtype != CLT_FLOAT32 && o->dtype != CLT_FLOAT16) ||
        o->eval_batch_size < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: an initialised model with a Linear, batch_size >= 1, accumulate "
                         "0..batch_size, a float32 or float16 step and eval_batch_size >= 0 are needed", op);
    return CLT_OK;
}

/* Plans o on devices[0..k): with limits (NULL: no caps) each planning
 * device capped at its limit and pinned memory's at pinned memory's own
 * cap, *fits (may be NULL without limits) as clt__plan_try's: only the
 * planning devices running out is "does not fit", the host's is an error. */
static clt_status plan_parallel(const char *op, const clt_model *m, const clt_plan_options *o,
                                const clt_device *devices, int k, const int64_t *limits, int64_t *peaks, clt_plan *p,
                                int *fits)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < k; i++) peaks[i] = 0;
    if (fits) *fits = 0;
    clt_device twins[CLT__MAX_REPLICAS + 1]; /* and pinned memory's, where the loaders stage */
    CLT_TRY(plan_devices(op, devices, k, twins));
    twins[k] = clt_plan_device(clt_pinned());
    CLT_TRY(clt__plan_idle(twins[k]));
    int64_t pinned_cap;
    CLT_TRY(clt__plan_pinned_cap(&pinned_cap));
    /* Each planning device under its limit, or uncapped (a planning device takes its device's cap): the peaks
     * are what the run would take. Restored in reverse, so that a device listed twice gets its own cap back last. */
    int64_t caps[CLT__MAX_REPLICAS + 1];
    for (int i = 0; i <= k; i++) {
        clt_memory_stats st;
        CLT_TRY(clt_memory_get_stats(twins[i], &st));
        caps[i] = st.cap;
    }
    clt_status s = CLT_OK;
    for (int i = 0; s == CLT_OK && i < k; i++) s = clt_memory_set_cap(twins[i], limits ? limits[i] : 0);
    if (s == CLT_OK) s = clt_memory_set_cap(twins[k], limits ? pinned_cap : 0);
    if (s == CLT_OK) s = clt_memory_empty_cache(twins[k]);
    if (s == CLT_OK) s = clt_memory_reset_peak(twins[k]);
    plan_run_args a = {.m = m, .o = o, .twins = twins, .k = k, .peaks = peaks, .p = p};
    a.eval = o->eval_batch_size > 0 ? o->eval_batch_size : largest_micro(o, k);
    uint64_t refused = clt__plan_refusals(twins, k + 1);
    clt_dataset ds = {0}; /* freed whether made or not */
    if (s == CLT_OK) s = clt__plan_dataset(&ds, o, o->whole_run ? a.eval : 1, clt_model_num_inputs(m),
                                           clt_model_num_outputs(m));
    dp_state *d = s == CLT_OK ? calloc(1, sizeof *d) : NULL;
    if (s == CLT_OK && !d) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if (s == CLT_OK) {
        d->k = k;
        d->world = 1;
        s = plan_run(d, &ds, &a);
    }
    free(d);
    clt_dataset_free(&ds);
    for (int i = k; i >= 0; i--) {
        clt_memory_empty_cache(twins[i]);
        clt_memory_set_cap(twins[i], caps[i]);
    }
    if (limits && clt__plan_ran_out(s, twins, k + 1, refused)) {
        /* A planning device out of memory under its limit: that configuration does not fit. */
        for (int i = 0; i < k; i++) peaks[i] = 0;
        p->peak = 0;
        *fits = a.in_evaluation ? -1 : 0;
        return CLT_OK;
    }
    if (fits && s == CLT_OK) *fits = 1;
    return s;
}

clt_status clt_parallel_plan(const clt_model *m, const clt_plan_options *o, const clt_device *devices,
                             int num_devices, int64_t *peaks)
{
    const char *op = "clt_parallel_plan";
    if (!peaks) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    CLT_TRY(plan_check(op, m, o, devices, num_devices));
    clt_plan_options steps = *o; /* the steps alone */
    steps.whole_run = steps.drop_packed = 0;
    steps.eval_batch_size = 0;
    clt_plan p;
    return plan_parallel(op, m, &steps, devices, num_devices, NULL, peaks, &p, NULL);
}

/* clt_parallel_plan_fit's model, devices and their limits, for clt__plan_search. */
typedef struct fit_devices {
    const clt_model *m;
    const clt_device *devices;
    int k;
    int64_t budgets[CLT__MAX_REPLICAS], limits[CLT__MAX_REPLICAS]; /* the limits: less the margins */
    int64_t *peaks;
} fit_devices;

static clt_status try_devices(void *ctx, const clt_plan_options *q, int capped, clt_plan *p, int *fits)
{
    const fit_devices *f = ctx;
    int none = 0;
    for (int i = 0; capped && i < f->k; i++) none |= f->limits[i] <= 0;
    if (none) { /* a margin leaves nothing */
        memset(p, 0, sizeof *p);
        *fits = 0;
        return CLT_OK;
    }
    clt_plan_options o = *q;
    if (o.accumulate > o.batch_size) o.accumulate = (int)o.batch_size;
    const int64_t *caps = capped == CLT__PLAN_BUDGET ? f->budgets : capped ? f->limits : NULL;
    return plan_parallel("clt_parallel_plan_fit", f->m, &o, f->devices, f->k, caps, f->peaks, p, capped ? fits : NULL);
}

static int64_t devices_micro(void *ctx, const clt_plan_options *q)
{
    return largest_micro(q, ((const fit_devices *)ctx)->k);
}

clt_status clt_parallel_plan_fit(const clt_model *m, const clt_plan_options *o, const clt_device *devices,
                                 int num_devices, const int64_t *budgets, int allow_fp16, clt_plan_fit_result *out,
                                 int64_t *peaks)
{
    const char *op = "clt_parallel_plan_fit";
    if (!budgets || !out || !peaks) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    CLT_TRY(plan_check(op, m, o, devices, num_devices));
    memset(out, 0, sizeof *out);
    fit_devices f = {.m = m, .devices = devices, .k = num_devices, .peaks = peaks};
    char where[2048] = "";
    size_t used = 0;
    for (int i = 0; i < num_devices; i++) {
        char name[32] = "?";
        clt_device_name(devices[i], name, sizeof name);
        if (budgets[i] <= 0)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: budget %lld for %s", op, (long long)budgets[i], name);
        f.budgets[i] = budgets[i];
        f.limits[i] = budgets[i] - clt__plan_margin(budgets[i]);
        if (used < sizeof where)
            used += (size_t)snprintf(where + used, sizeof where - used, "%s%s's %.1f MiB (less %.1f MiB)",
                                     i == 0 ? "" : i + 1 < num_devices ? ", " : " and ", name,
                                     budgets[i] / 1048576.0, clt__plan_margin(budgets[i]) / 1048576.0);
    }
    out->budget = budgets[0];
    out->margin = clt__plan_margin(budgets[0]);
    CLT_TRY(clt__plan_search(m, o, allow_fp16, try_devices, &f, devices_micro, where, out));
    /* The chosen configuration's peaks on every device, under the budgets (the run's caps). */
    clt_plan_options q = *o;
    q.accumulate = out->accumulate;
    q.recompute_blocks = out->recompute_blocks;
    q.dtype = out->dtype;
    q.drop_packed = !out->keep_packed;
    int fits = 0;
    CLT_TRY(try_devices(&f, &q, CLT__PLAN_BUDGET, &out->plan, &fits));
    if (fits > 0) return CLT_OK;
    return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: the configuration chosen no longer fits %s", op, where);
}
