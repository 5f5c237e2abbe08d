/* The one epoch/step engine (engine.h): every backend's resume, epoch loop,
 * stop, divergence check, evaluation, log, progress, metrics, plot and
 * checkpoints. */
#include "engine.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/file.h"
#include "../device/device_internal.h"
#include "../device/replay.h"
#include "../device/trace.h"
#include "board.h"
#include "checkpoint.h"
#include "progress.h"
#include "schedule.h"

static volatile sig_atomic_t stop_flag;

void clt_trainer_request_stop(void) { stop_flag = 1; }

int clt__fit_stop_requested(void) { return stop_flag != 0; }

clt_status clt__fit_check(const char *op, const clt_dataset *train, const clt_trainer_options *o, int lead)
{
    if (o->max_epochs < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: max_epochs is %d; it must be at least 1", op, o->max_epochs);
    if (o->num_gpus < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: num_gpus is %d; it must not be negative", op, o->num_gpus);
    if (o->batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch_size is %lld; it must be at least 1", op, (long long)o->batch_size);
    if (!(o->lr > 0) || !isfinite(o->lr)) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: lr is %g; it must be positive", op, o->lr);
    if (!(o->gradient_clip_val >= 0))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: gradient_clip_val is %g; it must be >= 0", op, o->gradient_clip_val);
    if (o->max_steps < 0 || o->train_limit < 0 || o->val_limit < 0 || o->eval_batch_size < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: max_steps, train_limit, val_limit and eval_batch_size must not be negative", op);
    if (o->optimizer != CLT_OPTIMIZER_SGD && o->optimizer != CLT_OPTIMIZER_ADAM)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: unknown optimizer %d", op, (int)o->optimizer);
    if (train->n < 1 || (!train->images && !train->x) || (!train->labels && !train->classes && !train->values))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the training set has no examples (%lld images): nothing to train on",
                         op, (long long)train->n);
    if (!(o->momentum >= 0 && o->momentum < 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: momentum is %g; it must lie in [0, 1)", op, o->momentum);
    if (o->momentum > 0 && o->optimizer == CLT_OPTIMIZER_ADAM)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: momentum %g is SGD's; Adam has its betas (0.9, 0.999) instead", op, o->momentum);
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: weight_decay is %g; it must be >= 0", op, o->weight_decay);
    if (o->early_stopping < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: early_stopping is %d; it must not be negative", op,
                         o->early_stopping);
    CLT_TRY(clt__schedule_check(op, o));
    if (o->accumulate < 0 || o->accumulate > o->batch_size)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: accumulate is %d; it must be 0 to batch_size (%lld)", op,
                         o->accumulate, (long long)o->batch_size);
    if (!lead) return CLT_OK;
    /* Every output writable now, none another's file or the resumed checkpoint (but save_path). */
    char *trace = clt__trace_path();
    const clt_file_use uses[] = {
        {"save_path", o->save_path, CLT_FILE_REPLACES_INPUT},
        {"metrics_path", o->metrics_path, CLT_FILE_OUTPUT},
        {"plot_path", o->plot_path, CLT_FILE_OUTPUT},
        {"memory_plot_path", o->memory_plot_path, CLT_FILE_OUTPUT},
        {"the running trace (clt_trace_start or CLT_TRACE)", trace, CLT_FILE_OUTPUT},
        {"resume_path", o->resume_path, CLT_FILE_INPUT},
    };
    clt_status s = clt__file_check_uses(uses, sizeof uses / sizeof uses[0]);
    free(trace);
    return s;
}

clt_status clt__fit_optimizer(clt_optimizer **out, clt_model *model, const clt_trainer_options *o)
{
    return o->optimizer == CLT_OPTIMIZER_ADAM
               ? clt_optimizer_create_adam(out, model, o->lr, 0.9f, 0.999f, 1e-8f, o->weight_decay, 0)
               : clt_optimizer_create_sgd(out, model, o->lr, o->momentum, o->weight_decay);
}

clt_loader_options clt__fit_loader_options(const clt_trainer_options *o)
{
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = o->batch_size;
    lo.shuffle = o->shuffle;
    lo.seed = o->seed;
    lo.limit = o->train_limit;
    lo.flatten = 1;
    return lo;
}

typedef struct engine {
    const clt__fit_backend *b;
    const clt_trainer_options *o;
    const clt_dataset *val;
    clt__board board;
    clt__progress progress;
    clt_trainer_result r;
    int64_t total_examples;
    int64_t total_steps;       /* the run's steps, for a cosine schedule */
    int stop;                  /* every rank agreed to stop (or this one asked, without ranks) */
    /* Early stopping: the best epoch's parameters (a copy on the model's device), its loss, and
     * the epochs since. */
    clt_tensor *best;
    double best_loss;
    int bad_epochs;
    int at_best;               /* 1: the model's parameters are best's (no step since) */
} engine;

/* Where an epoch starts: a checkpoint's partial epoch, or its beginning. */
typedef struct position {
    int64_t batch;
    double loss_sum, seconds;
} position;

/* How an epoch ended. */
typedef struct epoch_end {
    int64_t batch, examples, steps, skipped;
    double loss_sum, seconds;
} epoch_end;

/* Examples in the global batches before `batch`. */
static int64_t examples_before(const clt__fit_backend *b, const clt_trainer_options *o, int64_t batch)
{
    return batch >= b->batches ? b->examples : batch * o->batch_size;
}

static int stop_asked(const engine *e) { return e->stop || (!e->b->collective && clt__fit_stop_requested()); }

static int steps_done(const engine *e) { return e->o->max_steps && e->r.steps >= e->o->max_steps; }

static clt_status diverged(const engine *e, int64_t epoch, double loss)
{
    return clt__fail(CLT_ERR_DIVERGED,
                     "%s: training diverged: the loss is %g in epoch %lld after step %lld; stopped without saving, "
                     "so the last checkpoint is the last finite one (try a lower learning rate than %g)",
                     e->b->op, loss, (long long)epoch, (long long)e->r.steps, e->o->lr);
}

/* *finite = 0 when a parameter is NaN or infinite: read to the host (float32 or float16). */
static clt_status parameters_finite(const clt_model *model, int *finite)
{
    const clt_tensor *p = clt_model_parameters(model);
    size_t nbytes = clt_tensor_nbytes(p);
    int64_t n = clt_tensor_numel(p);
    clt_dtype dt = clt_tensor_dtype(p);
    void *host = malloc(nbytes ? nbytes : 1);
    if (!host) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "no host memory to check %lld parameters", (long long)n);
    clt_status s = clt_to_host(p, host, nbytes);
    *finite = 1;
    for (int64_t i = 0; s == CLT_OK && *finite && i < n; i++) {
        if (dt == CLT_FLOAT32) *finite = isfinite(((const float *)host)[i]);
        else if (dt == CLT_FLOAT16) *finite = (((const uint16_t *)host)[i] & 0x7c00) != 0x7c00;
    }
    free(host);
    return s;
}

/* The epoch's last step can be the one that breaks the parameters: its loss, read before the
 * update, is finite, the model after it is not. The validation loss shows it (what the next
 * epoch's first step would); without validation examples (no set, an empty one), the
 * parameters themselves. */
static clt_status check_model(const engine *e, int64_t epoch, double val_loss, int64_t val_examples)
{
    if (val_examples > 0) {
        if (isfinite(val_loss)) return CLT_OK;
        return clt__fail(CLT_ERR_DIVERGED,
                         "%s: training diverged: the validation loss is %g after epoch %lld (step %lld), though its "
                         "training loss was finite: the last steps broke the model; stopped without saving, so the "
                         "last checkpoint is the last finite one (try a lower learning rate than %g)",
                         e->b->op, val_loss, (long long)epoch, (long long)e->r.steps, e->o->lr);
    }
    int finite = 1;
    CLT_TRY(parameters_finite(e->b->model, &finite));
    if (finite) return CLT_OK;
    return clt__fail(CLT_ERR_DIVERGED,
                     "%s: training diverged: the parameters are not finite after epoch %lld (step %lld), though its "
                     "training loss was; stopped without saving, so the last checkpoint is the last finite one (try "
                     "a lower learning rate than %g)",
                     e->b->op, (long long)epoch, (long long)e->r.steps, e->o->lr);
}

/* The progress bar's update, and a divergence check where no other rank must agree. */
static clt_status progress(engine *e, int64_t epoch, int64_t batch, int64_t seen)
{
    if (!clt__progress_due(&e->progress)) return CLT_OK;
    double mean = 0;
    CLT_TRY(e->b->running_loss(e->b->ctx, seen, &mean));
    if (!e->b->collective && !isfinite(mean)) return diverged(e, epoch, mean);
    clt__progress_update(&e->progress, batch, seen, mean);
    return CLT_OK;
}

/* The slot whose steps may be replayed (device/replay.h): the model's
 * device where one_device, the model is float32 and the device supports
 * it; -1 for any other. A float16 step is not replayed: its equality with
 * the step run as usual is not tested (two such runs differed without
 * replay when it was written). */
static int replay_slot(const clt_model *model, int one_device)
{
    int slot;
    if (!one_device || clt_tensor_dtype(clt_model_parameters(model)) != CLT_FLOAT32 ||
        clt__resolve(clt_model_device(model), &slot) != CLT_OK)
        return -1;
    return clt__replay_supported(slot) ? slot : -1;
}

/* What a recording's buffers depend on: the driver buffers the allocator
 * has made and returned (a buffer returned and another made could reuse
 * its handle). */
static void replay_key(const clt_model *model, uint64_t key[2])
{
    clt_memory_stats st = {0};
    clt_memory_get_stats(clt_model_device(model), &st);
    key[0] = st.driver_allocs;
    key[1] = st.driver_frees;
}

clt_status clt__replayed_step(clt_model *model, int one_device, clt_status (*step)(void *, int64_t *, int *),
                              void *ctx, int64_t *n, int *stop)
{
    int slot = replay_slot(model, one_device);
    if (slot < 0) return step(ctx, n, stop);
    uint64_t key[2];
    replay_key(model, key);
    clt__replay_step_begin(slot, key);
    clt_status s = step(ctx, n, stop);
    replay_key(model, key);
    return clt__replay_step_end(slot, s, key);
}

void clt__replay_forget(const clt_model *model)
{
    int slot;
    if (clt__resolve(clt_model_device(model), &slot) == CLT_OK) clt__replay_reset(slot);
}

/* A backend with neither ranks nor shards trains on one device. */
static int one_device(const clt__fit_backend *b) { return !b->collective && b->shard == 0; }

/* Runs epoch `epoch` (from 1) from `at` until its end, the step limit or a stop request. */
static clt_status run_epoch(engine *e, int64_t epoch, const position *at, epoch_end *end)
{
    const clt__fit_backend *b = e->b;
    memset(end, 0, sizeof *end);
    CLT_TRY(b->begin_epoch(b->ctx, epoch - 1, at->batch, at->loss_sum));
    int64_t batch = at->batch, seen = examples_before(b, e->o, at->batch), opt_steps = clt_optimizer_steps(b->opt);
    double start = clt__now_seconds();
    clt__progress_begin(&e->progress, (int)epoch, e->o->max_epochs, b->batches);
    clt_status s = CLT_OK;
    while (s == CLT_OK && !steps_done(e) && !stop_asked(e)) {
        int stop = clt__fit_stop_requested();
        int64_t n = 0;
        if (clt__schedule_active(e->o))
            s = clt_optimizer_set_lr(b->opt, (float)clt__schedule_lr(e->o, e->r.steps, e->total_steps));
        if (s == CLT_OK) s = clt__replayed_step(b->model, one_device(b), b->step, b->ctx, &n, &stop);
        if (s != CLT_OK || n == 0) break;
        seen += n;
        e->at_best = 0;
        e->r.steps++;
        end->steps++;
        batch++;
        if (b->collective && stop) e->stop = 1;
        s = progress(e, epoch, batch, seen);
    }
    double sum = 0;
    if (s == CLT_OK) s = b->loss_sum(b->ctx, &sum);
    clt__progress_end(&e->progress);
    if (s == CLT_OK && !isfinite(sum)) s = diverged(e, epoch, sum);
    end->batch = batch;
    end->examples = seen - examples_before(b, e->o, at->batch);
    end->loss_sum = sum;
    end->seconds = at->seconds + (clt__now_seconds() - start);
    end->skipped = end->steps - (clt_optimizer_steps(b->opt) - opt_steps);
    if (s == CLT_OK && end->steps > 0 && end->skipped == end->steps)
        s = clt__fail(CLT_ERR_DIVERGED,
                      "%s: every one of the %lld steps of epoch %lld was skipped: the float16 gradients overflowed at "
                      "every loss scale (try a lower learning rate than %g, or float32)",
                      b->op, (long long)end->steps, (long long)epoch, e->o->lr);
    e->r.skipped_steps += end->skipped;
    return s;
}

static clt_status save(engine *e, int64_t epochs_done, int64_t batch, double loss_sum, double seconds)
{
    if (!e->o->save_path || !e->b->lead) return CLT_OK;
    clt_checkpoint_info info = e->o->save_info;
    info.epoch = epochs_done;
    info.batch = batch;
    info.steps = e->r.steps;
    clt__partial_epoch partial = {loss_sum, seconds};
    CLT_TRY(clt__checkpoint_save(e->o->save_path, e->b->model, e->b->opt, &info, &partial));
    e->r.saves++;
    return CLT_OK;
}

/* The first failure of the epoch's metrics and plot writes, kept until the checkpoint is saved. */
typedef struct file_failure {
    clt_status s;
    char why[1024];
} file_failure;

static void keep_failure(file_failure *f, clt_status s)
{
    if (s == CLT_OK || f->s != CLT_OK) return;
    f->s = s;
    snprintf(f->why, sizeof f->why, "%s", clt_last_error());
}

static void log_row(const engine *e, const clt__epoch_row *row, const epoch_end *end, int complete)
{
    FILE *f = e->o->log;
    if (!f || !e->b->lead) return;
    fprintf(f, "epoch %d/%d", row->epoch, e->o->max_epochs);
    if (!complete) fprintf(f, " (stopped after batch %lld of %lld)", (long long)end->batch, (long long)e->b->batches);
    fprintf(f, ": train loss %.4f", row->train_loss);
    if (e->val && e->board.regression)
        fprintf(f, ", val loss %.4f, val mse %.4g, val mae %.4g", row->val_loss, row->val_mse, row->val_mae);
    else if (e->val)
        fprintf(f, ", val loss %.4f, val acc %.4f", row->val_loss, row->val_accuracy);
    fprintf(f, ", %.2f s, %.0f %s/s on %s%s", row->seconds, row->images_per_second, e->progress.unit,
            e->b->device, e->b->log_suffix);
    if (end->skipped)
        fprintf(f, "; %lld of %lld steps skipped (float16 gradients overflowed)", (long long)end->skipped,
                (long long)end->steps);
    fputc('\n', f);
    fflush(f); /* a log to a file or pipe shows each epoch as it ends */
}

/* Early stopping after a whole epoch's validation loss: *best is 1 when it is the lowest so far
 * (its parameters are kept); patience epochs in a row without one stop the run. */
static clt_status track_best(engine *e, int64_t epoch, const clt__epoch_row *row, int *best)
{
    double loss = row->val_loss;
    *best = isfinite(loss) && (!e->best || loss < e->best_loss);
    if (!*best) {
        if (++e->bad_epochs >= e->o->early_stopping && epoch < e->o->max_epochs) {
            e->r.early_stopped = 1;
        }
        return CLT_OK;
    }
    clt_tensor *params = clt_model_parameters(e->b->model);
    if (e->best) CLT_TRY(clt_copy_(e->best, params));
    else CLT_TRY(clt_copy_to(&e->best, params, clt_model_device(e->b->model)));
    e->best_loss = loss;
    e->bad_epochs = 0;
    e->at_best = 1;
    e->r.best_epoch = (int)epoch;
    e->r.best_val_loss = row->val_loss;
    e->r.best_val_accuracy = row->val_accuracy;
    e->r.best_val_mse = row->val_mse;
    e->r.best_val_mae = row->val_mae;
    return CLT_OK;
}

/* After an early-stopped (or ended) run: the model takes the best epoch's parameters. */
static clt_status restore_best(engine *e)
{
    if (!e->best || e->at_best) return CLT_OK;
    CLT_TRY(clt_copy_(clt_model_parameters(e->b->model), e->best));
    return e->b->sync ? e->b->sync(e->b->ctx) : CLT_OK;
}

/* An epoch that ran (whole, or up to the step limit): evaluation, its row, files, checkpoint. */
static clt_status end_epoch(engine *e, int64_t epoch, const epoch_end *end)
{
    const clt__fit_backend *b = e->b;
    const clt_trainer_options *o = e->o;
    int complete = end->batch >= b->batches;
    int64_t examples = examples_before(b, o, end->batch);
    clt__epoch_row row = {.epoch = (int)epoch, .steps = e->r.steps, .val_loss = NAN, .val_accuracy = NAN,
                          .val_mse = NAN, .val_mae = NAN};
    row.train_loss = examples ? end->loss_sum / (double)examples : NAN;
    row.seconds = end->seconds;
    row.images_per_second = row.seconds > 0 ? (double)examples / row.seconds : 0;
    clt_status s = CLT_OK;
    int64_t val_examples = 0;
    if (e->val && b->lead) {
        clt_evaluation ev;
        int64_t batch = o->eval_batch_size > 0 ? o->eval_batch_size : o->batch_size;
        s = clt_trainer_evaluate_metrics(b->model, e->val, batch, o->val_limit, o->standardizer, &ev);
        if (s == CLT_OK) {
            row.val_loss = ev.loss;
            row.val_accuracy = ev.accuracy;
            row.val_mse = ev.mse;
            row.val_mae = ev.mae;
            val_examples = ev.examples;
        }
    }
    clt_model_set_training(b->model, 1);
    /* A broken model writes nothing: no row, no metrics, no checkpoint. */
    if (s == CLT_OK && b->lead) s = check_model(e, epoch, row.val_loss, val_examples);
    int best = 1; /* without early stopping every epoch is saved */
    if (s == CLT_OK && o->early_stopping && complete) s = track_best(e, epoch, &row, &best);
    if (s == CLT_OK) s = clt__board_add(&e->board, &row);
    if (s == CLT_OK) log_row(e, &row, end, complete);
    e->r.epochs = complete ? (int)epoch : (int)epoch - 1;
    e->r.train_loss = row.train_loss;
    e->r.val_loss = row.val_loss;
    e->r.val_accuracy = row.val_accuracy;
    e->r.val_mse = row.val_mse;
    e->r.val_mae = row.val_mae;
    /* The metrics and the plot, then the checkpoint, which their failure does not skip: it is
     * saved, then the failure reported. In this order a run killed between the two resumes with
     * every metrics row (resume() drops the row of an epoch the checkpoint does not have). */
    file_failure files = {CLT_OK, ""};
    if (s == CLT_OK && b->lead && o->metrics_path) keep_failure(&files, clt__board_write_csv(&e->board, o->metrics_path));
    if (s == CLT_OK && b->lead && o->plot_path) keep_failure(&files, clt__board_write_svg(&e->board, o->plot_path));
    /* A step limit's stop is part of the run (same seed, same checkpoint bytes), so its elapsed
     * time goes to the metrics row only, where a resumed run finds it (resume()). */
    if (s == CLT_OK && best)
        s = complete ? save(e, epoch, 0, 0, 0) : save(e, epoch - 1, end->batch, end->loss_sum, 0);
    if (s == CLT_OK && files.s != CLT_OK) {
        if (o->save_path && best)
            s = clt__fail(files.s, "%s (the checkpoint of epoch %lld was saved to %s all the same: resuming from it "
                                   "continues the run)", files.why, (long long)epoch, o->save_path);
        else
            s = clt__fail(files.s, "%s", files.why);
    }
    return s;
}

/* The epoch's verdict (engine.h): slot 0 the lead's status, then one count per status. */
#define FIRST_STATUS CLT_ERR_INVALID_ARGUMENT
#define STATUS_SLOTS (CLT_ERR_DIVERGED - FIRST_STATUS + 1)

void clt__fit_vote(float *v, int lead, clt_status s)
{
    for (int i = 0; i < CLT__VERDICT_FLOATS; i++) v[i] = 0.0f;
    if (lead) v[0] = (float)s;
    if (s == CLT_OK) return;
    int slot = s >= FIRST_STATUS && s <= CLT_ERR_DIVERGED ? (int)s - FIRST_STATUS : STATUS_SLOTS; /* or another */
    v[1 + slot] = 1.0f;
}

/* With ranks, one verdict on an epoch's end for all: the lead alone evaluates, checks the model
 * and writes files, so its failure (a diverged model, above all) goes to every rank through the
 * backend's agree, as does any other rank's, and no rank goes on to the next epoch's collectives
 * without the others. A rank that failed keeps its own status and message; the others stop with
 * the lead's status when it failed, else the one status of the ranks that failed, or when they
 * failed with several, the most common (the first in status.h's order on a tie), their message
 * counting the ranks of each. */
static clt_status agree_on(engine *e, int64_t epoch, clt_status s)
{
    const clt__fit_backend *b = e->b;
    if (!b->collective || !b->agree) return s;
    char why[1024];
    snprintf(why, sizeof why, "%s", clt_last_error());
    float v[CLT__VERDICT_FLOATS];
    clt__fit_vote(v, b->lead, s);
    clt_status a = b->agree(b->ctx, v, CLT__VERDICT_FLOATS);
    if (s != CLT_OK) return clt__fail(s, "%s", why);
    if (a != CLT_OK) return a;
    if (v[0] == (float)CLT_ERR_DIVERGED)
        return clt__fail(CLT_ERR_DIVERGED, "%s: training diverged: rank 0 found the model broken after epoch %lld "
                         "(step %lld); stopped without saving, as every rank did", b->op, (long long)epoch,
                         (long long)e->r.steps);
    double failed = 0, most = 0;
    int kinds = 0;
    clt_status theirs = CLT_ERR_IO; /* when every failed rank's status is outside status.h's */
    char counts[512] = "";
    size_t used = 0;
    for (int i = 0; i <= STATUS_SLOTS; i++) {
        if (v[1 + i] < 1) continue;
        clt_status si = i < STATUS_SLOTS ? (clt_status)(FIRST_STATUS + i) : CLT_ERR_IO;
        failed += v[1 + i];
        kinds++;
        if (i < STATUS_SLOTS && v[1 + i] > most) {
            most = v[1 + i];
            theirs = si;
        }
        if (used < sizeof counts)
            used += (size_t)snprintf(counts + used, sizeof counts - used, "%s%.0f with %s", kinds > 1 ? ", " : "",
                                     v[1 + i], i < STATUS_SLOTS ? clt_status_string(si) : "another status");
    }
    if (failed < 1) return CLT_OK;
    if (v[0] != 0) theirs = (clt_status)(int)v[0];
    return clt__fail(theirs, "%s: %.0f other rank%s failed at the end of epoch %lld (%s; %s own message%s say%s why); "
                     "stopped with %s%s", b->op, failed, failed == 1 ? "" : "s", (long long)epoch, counts,
                     failed == 1 ? "its" : "their", failed == 1 ? "" : "s", failed == 1 ? "s" : "",
                     clt_status_string(theirs),
                     v[0] != 0 ? ", rank 0's" : kinds > 1 ? ", the most common" : "");
}

static clt_status finish_epoch(engine *e, int64_t epoch, const epoch_end *end)
{
    return agree_on(e, epoch, end_epoch(e, epoch, end));
}

/* Loads o->resume_path into the primary and checks its position against this run. */
static clt_status resume(engine *e, int64_t *epochs_done, position *at)
{
    const clt__fit_backend *b = e->b;
    const char *path = e->o->resume_path;
    clt_checkpoint_info info = {0};
    clt__partial_epoch partial = {0, 0};
    CLT_TRY(clt__checkpoint_load(path, b->model, b->opt, &info, &partial));
    if (info.batch >= b->batches)
        return clt__fail(CLT_ERR_FORMAT,
                         "%s: metadata cltensor.batch is %lld but an epoch of this run has %lld batches (resume with "
                         "the batch size and train limit of the run that saved it)",
                         path, (long long)info.batch, (long long)b->batches);
    if (b->sync) CLT_TRY(b->sync(b->ctx));
    if (b->lead && e->o->metrics_path) {
        /* The epochs before, and the partial epoch's row a step limit wrote (its time, when the
         * checkpoint has none): the resumed epoch replaces that row. */
        CLT_TRY(clt__board_read_csv(&e->board, e->o->metrics_path, (int)info.epoch + 1));
        if (e->board.count && e->board.rows[e->board.count - 1].epoch == info.epoch + 1) {
            double seconds = e->board.rows[--e->board.count].seconds;
            if (info.batch && partial.seconds == 0 && isfinite(seconds) && seconds >= 0) partial.seconds = seconds;
        }
    }
    *epochs_done = info.epoch;
    e->r.epochs = (int)info.epoch;
    e->r.steps = info.steps;
    at->batch = info.batch;
    at->loss_sum = info.batch ? partial.loss_sum : 0;
    at->seconds = info.batch ? partial.seconds : 0;
    return CLT_OK;
}

clt_status clt__fit_run(const clt__fit_backend *b, const clt_dataset *val, const clt_trainer_options *o,
                        clt_trainer_result *out)
{
    engine e = {.b = b, .o = o, .val = val};
    snprintf(e.r.device, sizeof e.r.device, "%s", b->device);
    e.r.val_loss = e.r.val_accuracy = e.r.val_mse = e.r.val_mae = NAN;
    e.r.best_val_loss = e.r.best_val_accuracy = e.r.best_val_mse = e.r.best_val_mae = NAN;
    e.board.regression = val && val->task == CLT_TASK_REGRESS;
    if (o->early_stopping && !val)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: early_stopping needs validation data (val is NULL)", b->op);
    if (o->early_stopping && b->collective)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: early_stopping works in one process, not over the ranks of a collective", b->op);
    e.total_steps = b->batches * (int64_t)o->max_epochs;
    if (o->max_steps && o->max_steps < e.total_steps) e.total_steps = o->max_steps;
    int show_bar = b->lead && (o->progress < 0 ? isatty(fileno(stderr)) : o->progress);
    clt__progress_init(&e.progress, show_bar ? stderr : NULL, b->device, b->tabular ? "examples" : "images");
    position at = {0};
    int64_t done = 0;
    clt_status s = o->resume_path ? resume(&e, &done, &at) : CLT_OK;
    /* Compilation before the clock: the epochs' times and images/s exclude it. */
    clt_warmup_result warm;
    clt__progress_compiling(&e.progress);
    /* The largest (micro-)batch one device's step runs: no batch is larger
     * than the data, no shard than b->shard, no micro-batch than its rows /
     * accumulate rounded up. */
    int64_t micro = b->shard > 0 && b->shard < o->batch_size ? b->shard : o->batch_size;
    if (o->accumulate > 1) micro = (micro + o->accumulate - 1) / o->accumulate;
    int64_t warm_batch = micro < b->examples ? micro : b->examples;
    /* None once a stop is asked for (without ranks, which must all warm up): the loop stops first. */
    int warmed = s == CLT_OK && !stop_asked(&e);
    int flags = b->task == CLT_TASK_REGRESS ? CLT_WARMUP_REGRESSION : 0;
    if (warmed) s = clt_model_warmup(b->model, warm_batch, o->optimizer, o->gradient_clip_val, flags, &warm);
    clt__progress_end(&e.progress);
    if (warmed && s == CLT_OK && b->lead) clt__progress_warmup_log(o->log, b->device, &warm);
    for (int64_t epoch = done + 1; s == CLT_OK && epoch <= o->max_epochs; epoch++) {
        if (steps_done(&e) || e.r.early_stopped) break;
        if (stop_asked(&e)) {
            e.r.stopped = 1;
            break;
        }
        epoch_end end;
        s = run_epoch(&e, epoch, &at, &end);
        double carried = at.seconds; /* spent by the run that saved the checkpoint */
        memset(&at, 0, sizeof at);
        if (s != CLT_OK) break;
        e.r.seconds += end.seconds - carried;
        e.total_examples += end.examples;
        if (end.batch < b->batches && stop_asked(&e)) {
            /* Interrupted: save the position for resume_path, skip evaluation. */
            e.r.stopped = 1;
            e.r.epochs = (int)epoch - 1;
            s = save(&e, epoch - 1, end.batch, end.loss_sum, end.seconds);
            break;
        }
        s = finish_epoch(&e, epoch, &end);
    }
    clt__replay_forget(b->model); /* its recordings hold the run's buffers */
    if (s == CLT_OK && !e.r.stopped) s = restore_best(&e);
    e.r.images_per_second = e.r.seconds > 0 ? (double)e.total_examples / e.r.seconds : 0;
    if (out) *out = e.r;
    clt_tensor_release(e.best);
    clt__board_clear(&e.board);
    stop_flag = 0; /* a request that came too late to act on does not stop the next fit */
    return s;
}
