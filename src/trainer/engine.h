/* Internal: the one epoch/step engine behind clt_trainer_fit and
 * clt_parallel_fit. A backend says how a step runs (one device, replicas in
 * one process, ranks of a clt_collective); the engine owns everything else
 * once: resume, the epoch loop, step limits, stop requests, divergence
 * checks, evaluation, the log line, progress, metrics, plot and the
 * checkpoint saved at every epoch's end and when stopped. A higher layer
 * (src/parallel) fills a backend and calls clt__fit_run: the trainer never
 * calls up into it. */
#ifndef CLT_TRAINER_ENGINE_H
#define CLT_TRAINER_ENGINE_H

#include "cltensor/trainer.h"

typedef struct clt__fit_backend {
    void *ctx;
    const char *op;          /* names messages: "clt_trainer_fit" */
    char device[32];         /* where it trains ("gpu:0+1"), for the result and the log */
    char log_suffix[32];     /* after the device in the log line (" x 2 ranks"), may be "" */
    int tabular;             /* 1: the training set holds float features, not byte images: the log line
                              * and the progress bar count "examples/s" (0: "images/s") */
    int lead;                /* 1: this process evaluates, logs and writes files (rank 0) */
    int collective;          /* 1: ranks must agree on stopping, so step() carries the request */
    clt_model *model;        /* the primary: resumed into, evaluated and saved */
    clt_optimizer *opt;      /* the primary's optimizer */
    /* Global examples and batches per epoch (after train_limit, over every rank). */
    int64_t examples, batches;
    clt_task task;           /* the training data's: the loss the warm-up's step runs */
    /* After a resume loaded model and opt: every replica takes the primary's state. NULL: nothing to do. */
    clt_status (*sync)(void *ctx);
    /* Puts every loader at (epoch from 0, global batch) and the epoch's loss sum at loss_sum
     * (0 for a fresh epoch, the checkpoint's partial sum when resuming mid-epoch). */
    clt_status (*begin_epoch)(void *ctx, int64_t epoch, int64_t batch, double loss_sum);
    /* Loads the next global batch and takes one optimizer step on it, adding its loss to the sum.
     * *n: the batch's global examples, 0 at the epoch's end (no step taken). With collective,
     * *stop comes in as this process's stop request and goes out as whether any rank asked. */
    clt_status (*step)(void *ctx, int64_t *n, int *stop);
    /* The epoch's summed per-example loss so far over every rank (collective when there are
     * ranks: every rank calls it at the same point). A synchronization point. */
    clt_status (*loss_sum)(void *ctx, double *sum);
    /* A running mean for the progress bar, this process's only (no collective). */
    clt_status (*running_loss)(void *ctx, int64_t seen, double *mean);
    /* With collective: values[0..n) replaced by their sum over every rank (every rank calls it at
     * the same point). The end of an epoch's verdict goes through it. NULL without ranks. */
    clt_status (*agree)(void *ctx, float *values, int64_t n);
    /* The most examples of a global batch one device's step takes (data parallel's largest shard),
     * for the warm-up's batch; 0: the whole batch. */
    int64_t shard;
} clt__fit_backend;

/* The end of an epoch's verdict over ranks, summed by the backend's agree: each rank's vote is
 * CLT__VERDICT_FLOATS floats, the lead's status (0 from the other ranks, and when the lead did
 * not fail) and one count per status from CLT_ERR_INVALID_ARGUMENT to CLT_ERR_DIVERGED, then
 * one for any other, 1 in the slot of this rank's status when it failed. */
#define CLT__VERDICT_FLOATS (1 + (CLT_ERR_DIVERGED - CLT_ERR_INVALID_ARGUMENT + 1) + 1)
void clt__fit_vote(float *v, int lead, clt_status s);

/* Checks what every backend needs of the options and the data (op names the
 * message); lead (the process that writes files) also checks the output paths,
 * so that a bad one is refused before any work instead of failing an epoch. */
clt_status clt__fit_check(const char *op, const clt_dataset *train, const clt_trainer_options *o, int lead);

/* The optimizer the options ask for, on model. */
clt_status clt__fit_optimizer(clt_optimizer **out, clt_model *model, const clt_trainer_options *o);

/* The training loader's options (rank and world left at one process). */
clt_loader_options clt__fit_loader_options(const clt_trainer_options *o);

/* Runs step(ctx, n, stop), one step of training model, replayed where it
 * can be (device/replay.h): where one_device (the backend trains on the
 * model's device alone) and that device supports it. The engine runs every
 * step through it; a benchmark can too. */
clt_status clt__replayed_step(clt_model *model, int one_device, clt_status (*step)(void *, int64_t *, int *),
                              void *ctx, int64_t *n, int *stop);
/* Drops the recordings of the model's device (the end of a fit). */
void clt__replay_forget(const clt_model *model);

/* 1 after clt_trainer_request_stop, until a fit consumes the request. */
int clt__fit_stop_requested(void);

/* Runs the fit: resume (o->resume_path), then epochs until max_epochs, max_steps, a stop
 * request or an error. out (may be NULL) receives the result. */
clt_status clt__fit_run(const clt__fit_backend *b, const clt_dataset *val, const clt_trainer_options *o,
                        clt_trainer_result *out);

#endif
