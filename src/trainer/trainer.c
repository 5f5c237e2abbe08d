/* The Trainer: device choice (num_gpus as a ceiling, CPU fallback) and the
 * one-device backend of the fit engine (engine.c), whose step (step.c)
 * keeps the loss on the device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "cltensor/ops.h"
#include "cltensor/trainer.h"
#include "engine.h"
#include "step.h"

/* No log and no progress bar: by default a fit prints nothing; a program that
 * wants the epoch lines sets opt.log (clt train sets stdout), and opt.progress
 * (-1: when stderr is a terminal) draws the bar on stderr. */
clt_trainer_options clt_trainer_default_options(void)
{
    clt_trainer_options o;
    memset(&o, 0, sizeof o);
    o.max_epochs = 1;
    o.num_gpus = 1;
    o.batch_size = 256;
    o.lr = 0.1f;
    o.optimizer = CLT_OPTIMIZER_SGD;
    o.shuffle = 1;
    o.progress = 0;
    o.log = NULL;
    return o;
}

/* The chapter's rule: min(num_gpus, available) GPUs, the first of which
 * trains; none means the CPU. */
static clt_device training_device(const clt_trainer_options *o)
{
    if (o->use_device) return o->device;
    int n = clt_num_gpus();
    return (o->num_gpus < n ? o->num_gpus : n) > 0 ? clt_gpu(0) : clt_cpu();
}

/* ---- The one-device backend ---- */

typedef struct one_device {
    clt_model *model;
    clt_optimizer *opt;
    clt_loader *loader;
    clt_tensor *loss_sum; /* the epoch's, on the device */
    double clip;
    int accumulate;
    int64_t steps, record_until; /* steps taken by this fit; recording memory until record_until (0: not) */
    const char *memory_plot;
    const clt_trainer_options *record_opt; /* a recording to start at the first epoch (after the warm-up) */
    const clt__loss *loss;     /* the training set's */
} one_device;

/* memory_plot_path: records the first steps' memory on the training device. */
static clt_status record_start(one_device *d, const clt_trainer_options *o)
{
    if (!o->memory_plot_path) return CLT_OK;
    CLT_TRY(clt_memory_record_start(clt_model_device(d->model)));
    d->memory_plot = o->memory_plot_path;
    d->record_until = o->memory_plot_steps > 0 ? o->memory_plot_steps : 2;
    return CLT_OK;
}

/* Stops a recording and draws it when s is CLT_OK; returns s, else the drawing's status. */
static clt_status record_finish(one_device *d, clt_status s)
{
    if (!d->record_until) return s;
    d->record_until = 0;
    clt_memory_record *r = NULL;
    clt_status rs = clt_memory_record_stop(clt_model_device(d->model), &r);
    if (s == CLT_OK && rs == CLT_OK) rs = clt_memory_record_write_svg(r, d->memory_plot);
    clt_memory_record_free(r);
    return s == CLT_OK ? rs : s;
}

static clt_status one_begin(void *ctx, int64_t epoch, int64_t batch, double loss_sum)
{
    one_device *d = ctx;
    if (d->record_opt) {
        CLT_TRY(record_start(d, d->record_opt));
        d->record_opt = NULL;
    }
    CLT_TRY(clt_loader_set_position(d->loader, epoch, batch));
    return clt_fill_(d->loss_sum, loss_sum);
}

static clt_status one_step(void *ctx, int64_t *n, int *stop)
{
    (void)stop;
    one_device *d = ctx;
    clt__step_tensors t = {0};
    *n = 0;
    clt_status s = clt_loader_next(d->loader, &t.x, &t.y);
    if (s == CLT_OK && t.x) {
        *n = clt_tensor_dim(t.x, 0);
        int recording = d->record_until > d->steps;
        clt__step_options so = {.loss = d->loss, .accumulate = d->accumulate, .mark = recording ? d->steps + 1 : 0};
        s = clt__train_step(d->model, d->opt, &t, d->loss_sum, d->clip, &so);
        d->steps++;
    }
    clt__step_tensors_release(&t);
    if (d->record_until && d->steps >= d->record_until) s = record_finish(d, s);
    return s;
}

static clt_status one_loss(void *ctx, double *sum)
{
    return clt__step_read(((one_device *)ctx)->loss_sum, sum, "clt_trainer_fit (reading the loss)");
}

static clt_status one_running(void *ctx, int64_t seen, double *mean)
{
    double sum = 0;
    CLT_TRY(one_loss(ctx, &sum));
    *mean = seen ? sum / (double)seen : NAN;
    return CLT_OK;
}

static clt_status one_setup(one_device *d, clt__fit_backend *b, const clt_dataset *train, const clt_trainer_options *opt)
{
    clt_device dev = training_device(opt);
    CLT_TRY(clt_device_name(dev, b->device, sizeof b->device));
    CLT_TRY(clt_model_to(d->model, dev));
    clt_model_set_training(d->model, 1);
    CLT_TRY(clt_model_set_recompute(d->model, opt->recompute_blocks));
    if (opt->fp16) CLT_TRY(clt_model_to_dtype(d->model, CLT_FLOAT16));
    CLT_TRY(clt__fit_optimizer(&d->opt, d->model, opt));
    clt_loader_options lo = clt__fit_loader_options(opt);
    CLT_TRY(clt_loader_create(&d->loader, train, dev, &lo));
    int64_t one = 1;
    CLT_TRY(clt_zeros(&d->loss_sum, dev, CLT_FLOAT32, 1, &one));
    d->record_opt = opt; /* started by one_begin, after the engine's warm-up */
    b->ctx = d;
    b->model = d->model;
    b->opt = d->opt;
    b->examples = clt_loader_num_examples(d->loader);
    b->batches = clt_loader_num_batches(d->loader);
    b->task = train->task;
    return CLT_OK;
}

clt_status clt_trainer_fit(clt_model *model, const clt_dataset *train, const clt_dataset *val,
                           const clt_trainer_options *opt, clt_trainer_result *out)
{
    if (!model || !train || !opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_fit: NULL argument");
    CLT_TRY(clt__fit_check("clt_trainer_fit", train, opt, 1));
    one_device d = {.model = model, .clip = opt->gradient_clip_val, .accumulate = opt->accumulate,
                    .loss = clt__loss_for(train)};
    clt__fit_backend b = {.op = "clt_trainer_fit", .lead = 1, .begin_epoch = one_begin, .step = one_step,
                          .loss_sum = one_loss, .running_loss = one_running, .tabular = train->images == NULL};
    clt_status s = one_setup(&d, &b, train, opt);
    if (s == CLT_OK) s = clt__fit_run(&b, val, opt, out);
    s = record_finish(&d, s); /* fewer steps than asked for, or a failure */
    clt_optimizer_free(d.opt);
    clt_loader_free(d.loader);
    clt_tensor_release(d.loss_sum);
    return s;
}
