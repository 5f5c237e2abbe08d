/* The Trainer: device choice (num_gpus as a ceiling, CPU fallback), the
 * epoch loop with the loss accumulated on the device, evaluation, progress,
 * metrics and the plot. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/error.h"
#include "../core/file.h"
#include "board.h"
#include "cltensor/ops.h"
#include "cltensor/trainer.h"
#include "progress.h"

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
    o.progress = -1;
    o.log = stderr;
    return o;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clt_status check_options(const clt_trainer_options *o)
{
    if (o->max_epochs < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "max_epochs is %d; it must be at least 1", o->max_epochs);
    if (o->num_gpus < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "num_gpus is %d; it must not be negative", o->num_gpus);
    if (o->batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "batch_size is %lld; it must be at least 1", (long long)o->batch_size);
    if (!(o->lr > 0) || !isfinite(o->lr)) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "lr is %g; it must be positive", o->lr);
    if (!(o->gradient_clip_val >= 0))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "gradient_clip_val is %g; it must be >= 0", o->gradient_clip_val);
    if (o->max_steps < 0 || o->train_limit < 0 || o->val_limit < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "max_steps, train_limit and val_limit must not be negative");
    if (o->optimizer != CLT_OPTIMIZER_SGD && o->optimizer != CLT_OPTIMIZER_ADAM)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "unknown optimizer %d", (int)o->optimizer);
    /* Output paths checked before any work, so a bad --metrics or --plot is
     * refused now instead of failing an epoch (and skipping its checkpoint). */
    const char *const outputs[] = {o->metrics_path, o->plot_path, o->save_path};
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        if (outputs[i]) CLT_TRY(clt__file_check_target(outputs[i]));
    return CLT_OK;
}

/* The chapter's rule: min(num_gpus, available) GPUs, the first of which
 * trains; none means the CPU. */
static clt_device training_device(const clt_trainer_options *o)
{
    if (o->use_device) return o->device;
    int n = clt_num_gpus();
    return (o->num_gpus < n ? o->num_gpus : n) > 0 ? clt_gpu(0) : clt_cpu();
}

typedef struct step_tensors {
    clt_tensor *x, *y, *logits, *loss, *dlogits;
} step_tensors;

static void step_release(step_tensors *t)
{
    clt_tensor_release(t->x);
    clt_tensor_release(t->y);
    clt_tensor_release(t->logits);
    clt_tensor_release(t->loss);
    clt_tensor_release(t->dlogits);
    memset(t, 0, sizeof *t);
}

/* One optimizer step on a batch; adds loss * batch to loss_sum on the device. */
static clt_status train_step(clt_model *m, clt_optimizer *opt, step_tensors *t, clt_tensor *loss_sum, double clip)
{
    CLT_TRY(clt_model_forward(m, t->x, &t->logits));
    CLT_TRY(clt_cross_entropy_forward(&t->loss, &t->dlogits, t->logits, t->y));
    CLT_TRY(clt_model_zero_grad(m));
    CLT_TRY(clt_model_backward(m, t->dlogits, NULL));
    if (clip > 0) CLT_TRY(clt_model_clip_grad_norm(m, clip, NULL));
    CLT_TRY(clt_optimizer_step(opt));
    return clt_axpy_(loss_sum, (float)clt_tensor_dim(t->x, 0), t->loss);
}

clt_status clt_evaluate(clt_model *model, const clt_dataset *ds, int64_t batch_size, int64_t limit, double *loss,
                        double *accuracy)
{
    if (!model || !ds || !loss || !accuracy)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_evaluate: NULL argument");
    if (batch_size < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_evaluate: batch_size %lld", (long long)batch_size);
    clt_device dev = clt_model_device(model);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = batch_size;
    lo.shuffle = 0;
    lo.limit = limit;
    lo.flatten = 1;
    clt_loader *loader;
    CLT_TRY(clt_loader_create(&loader, ds, dev, &lo));
    int was_training = clt_model_training(model);
    clt_model_set_training(model, 0);
    int64_t one = 1;
    clt_tensor *loss_sum = NULL, *correct = NULL;
    clt_status s = clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK) s = clt_zeros(&correct, dev, CLT_FLOAT32, 1, &one);
    int64_t seen = 0;
    while (s == CLT_OK) {
        step_tensors t = {0};
        clt_tensor *pred = NULL, *hits = NULL;
        s = clt_loader_next(loader, &t.x, &t.y);
        if (s != CLT_OK || !t.x) break;
        int64_t b = clt_tensor_dim(t.x, 0);
        s = clt_model_forward(model, t.x, &t.logits);
        if (s == CLT_OK) s = clt_cross_entropy_forward(&t.loss, NULL, t.logits, t.y);
        if (s == CLT_OK) s = clt_axpy_(loss_sum, (float)b, t.loss);
        if (s == CLT_OK) s = clt_argmax_rows(&pred, t.logits);
        if (s == CLT_OK) s = clt_count_equal(&hits, pred, t.y);
        if (s == CLT_OK) s = clt_add_(correct, hits);
        clt_tensor_release(pred);
        clt_tensor_release(hits);
        step_release(&t);
        seen += b;
    }
    double total = 0, right = 0;
    if (s == CLT_OK) s = clt_item(loss_sum, &total);
    if (s == CLT_OK) s = clt_item(correct, &right);
    if (s == CLT_OK) {
        *loss = seen ? total / (double)seen : NAN;
        *accuracy = seen ? right / (double)seen : NAN;
    }
    clt_tensor_release(loss_sum);
    clt_tensor_release(correct);
    clt_loader_free(loader);
    clt_model_set_training(model, was_training);
    return s;
}

typedef struct fit_state {
    clt_model *model;
    clt_optimizer *opt;
    clt_loader *loader;
    clt_tensor *loss_sum;
    clt__board board;
    clt__progress progress;
} fit_state;

static void fit_release(fit_state *f)
{
    clt_optimizer_free(f->opt);
    clt_loader_free(f->loader);
    clt_tensor_release(f->loss_sum);
    clt__board_clear(&f->board);
}

static volatile sig_atomic_t stop_flag;

void clt_trainer_request_stop(void) { stop_flag = 1; }

static int stop_requested(void) { return stop_flag != 0; }

/* Runs epoch `epoch` (from 1) from global batch *batch on; leaves in *batch
 * how many of its batches are done (all of them unless a step limit or a
 * stop request ended it), and returns its mean loss, examples and seconds. */
static clt_status run_epoch(fit_state *f, const clt_trainer_options *o, int epoch, int64_t *batch, int64_t *steps,
                            double *mean_loss, int64_t *examples, double *seconds)
{
    CLT_TRY(clt_loader_set_position(f->loader, epoch - 1, *batch));
    CLT_TRY(clt_fill_(f->loss_sum, 0.0));
    int64_t seen = 0, total_batches = clt_loader_num_batches(f->loader);
    double start = now();
    clt__progress_begin(&f->progress, epoch, o->max_epochs, total_batches);
    clt_status s = CLT_OK;
    while (s == CLT_OK && !(o->max_steps && *steps >= o->max_steps) && !stop_requested()) {
        step_tensors t = {0};
        s = clt_loader_next(f->loader, &t.x, &t.y);
        if (s != CLT_OK || !t.x) break;
        int64_t b = clt_tensor_dim(t.x, 0);
        s = train_step(f->model, f->opt, &t, f->loss_sum, o->gradient_clip_val);
        step_release(&t);
        if (s != CLT_OK) break;
        seen += b;
        (*steps)++;
        (*batch)++;
        if (clt__progress_due(&f->progress)) {
            double sum = 0;
            s = clt_item(f->loss_sum, &sum);
            clt__progress_update(&f->progress, *batch, seen, seen ? sum / (double)seen : NAN);
        }
    }
    double sum = 0;
    if (s == CLT_OK) s = clt_item(f->loss_sum, &sum);
    *seconds = now() - start;
    clt__progress_end(&f->progress);
    *mean_loss = seen ? sum / (double)seen : NAN;
    *examples = seen;
    return s;
}

static clt_status save(const clt_trainer_options *o, const fit_state *f, int64_t epochs_done, int64_t batch,
                       int64_t steps)
{
    if (!o->save_path) return CLT_OK;
    clt_checkpoint_info info = o->save_info;
    info.epoch = epochs_done;
    info.batch = batch;
    info.steps = steps;
    return clt_checkpoint_save(o->save_path, f->model, f->opt, &info);
}

clt_status clt_trainer_fit(clt_model *model, const clt_dataset *train, const clt_dataset *val,
                           const clt_trainer_options *opt, clt_trainer_result *out)
{
    if (!model || !train || !opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_fit: NULL argument");
    CLT_TRY(check_options(opt));
    clt_device dev = training_device(opt);
    char devname[32];
    CLT_TRY(clt_device_name(dev, devname, sizeof devname));
    CLT_TRY(clt_model_to(model, dev));
    clt_model_set_training(model, 1);
    CLT_TRY(clt_model_set_checkpointing(model, opt->checkpoint_segments));
    if (opt->fp16) CLT_TRY(clt_model_to_dtype(model, CLT_FLOAT16));

    fit_state f = {.model = model};
    clt_status s = opt->optimizer == CLT_OPTIMIZER_ADAM
                       ? clt_optimizer_create_adam(&f.opt, model, opt->lr, 0.9f, 0.999f, 1e-8f, 0.0f, 0)
                       : clt_optimizer_create_sgd(&f.opt, model, opt->lr, 0.0f, 0.0f);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = opt->batch_size;
    lo.shuffle = opt->shuffle;
    lo.seed = opt->seed;
    lo.limit = opt->train_limit;
    lo.flatten = 1;
    if (s == CLT_OK) s = clt_loader_create(&f.loader, train, dev, &lo);
    int64_t one = 1;
    if (s == CLT_OK) s = clt_zeros(&f.loss_sum, dev, CLT_FLOAT32, 1, &one);
    int show_bar = opt->progress < 0 ? isatty(fileno(stderr)) : opt->progress;
    clt__progress_init(&f.progress, show_bar ? stderr : NULL, devname);

    clt_trainer_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.device, sizeof r.device, "%s", devname);
    r.val_loss = r.val_accuracy = NAN;
    int64_t first_batch = 0;
    if (s == CLT_OK && opt->resume_path) {
        clt_checkpoint_info at = {0};
        s = clt_checkpoint_load(opt->resume_path, model, f.opt, &at);
        if (s == CLT_OK && opt->metrics_path) s = clt__board_read_csv(&f.board, opt->metrics_path, (int)at.epoch);
        if (s == CLT_OK && (at.epoch < 0 || at.batch < 0 || at.steps < 0))
            s = clt__fail(CLT_ERR_FORMAT, "%s: negative epoch, batch or step count in the metadata", opt->resume_path);
        r.epochs = (int)at.epoch;
        r.steps = at.steps;
        first_batch = at.batch;
    }
    /* Compilation before the clock: the epochs' times and images/s exclude it. */
    clt_warmup_result warm;
    clt__progress_compiling(&f.progress);
    /* The largest batch the loader makes: no batch is larger than the data. */
    int64_t warm_batch = clt_loader_num_examples(f.loader);
    if (opt->batch_size < warm_batch) warm_batch = opt->batch_size;
    if (s == CLT_OK) s = clt_model_warmup(model, warm_batch, opt->optimizer, opt->gradient_clip_val, 0, &warm);
    clt__progress_end(&f.progress);
    if (s == CLT_OK) clt__progress_warmup_log(opt->log, devname, &warm);
    int64_t total_examples = 0;
    for (int epoch = r.epochs + 1; s == CLT_OK && epoch <= opt->max_epochs; epoch++) {
        if (opt->max_steps && r.steps >= opt->max_steps) break;
        if (stop_requested()) {
            r.stopped = 1;
            break;
        }
        clt__epoch_row row = {.epoch = epoch, .val_loss = NAN, .val_accuracy = NAN};
        int64_t examples = 0, batch = first_batch;
        first_batch = 0;
        s = run_epoch(&f, opt, epoch, &batch, &r.steps, &row.train_loss, &examples, &row.seconds);
        if (s != CLT_OK) break;
        r.seconds += row.seconds;
        total_examples += examples;
        int complete = batch >= clt_loader_num_batches(f.loader);
        if (!complete && stop_requested()) {
            /* Interrupted: save the position for --resume, skip evaluation. */
            r.stopped = 1;
            s = save(opt, &f, epoch - 1, batch, r.steps);
            break;
        }
        row.steps = r.steps;
        row.images_per_second = row.seconds > 0 ? (double)examples / row.seconds : 0;
        if (val) s = clt_evaluate(model, val, opt->batch_size, opt->val_limit, &row.val_loss, &row.val_accuracy);
        clt_model_set_training(model, 1);
        if (s == CLT_OK) s = clt__board_add(&f.board, &row);
        if (s == CLT_OK && opt->log)
            fprintf(opt->log,
                    "epoch %d/%d: train loss %.4f, val loss %.4f, val acc %.4f, %.2f s, %.0f images/s on %s\n",
                    epoch, opt->max_epochs, row.train_loss, row.val_loss, row.val_accuracy, row.seconds,
                    row.images_per_second, devname);
        r.epochs = epoch;
        r.train_loss = row.train_loss;
        r.val_loss = row.val_loss;
        r.val_accuracy = row.val_accuracy;
        if (s == CLT_OK && opt->metrics_path) s = clt__board_write_csv(&f.board, opt->metrics_path);
        if (s == CLT_OK && opt->plot_path) s = clt__board_write_svg(&f.board, opt->plot_path);
        if (s == CLT_OK) s = complete ? save(opt, &f, epoch, 0, r.steps) : save(opt, &f, epoch - 1, batch, r.steps);
    }
    r.images_per_second = r.seconds > 0 ? (double)total_examples / r.seconds : 0;
    if (out) *out = r;
    fit_release(&f);
    stop_flag = 0; /* a request that came too late to act on does not stop the next fit */
    return s;
}
