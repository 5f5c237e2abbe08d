/* Internal: the training step, written once. The one-device trainer, gradient
 * accumulation, the warm-up (src/trainer/warmup.c) and data parallel
 * (src/parallel/data_parallel.c) all run a batch through clt__micro_step:
 * forward, loss, scale, backward, and the loss added to a sum on the device.
 * It allocates through the ordinary tensor calls only, so it runs unchanged
 * on any device, and the order of its allocations and frees is the one the
 * memory planner (src/plan/plan.c) predicts. */
#ifndef CLT_TRAINER_STEP_H
#define CLT_TRAINER_STEP_H

#include "../core/error.h"
#include "cltensor/nn.h"
#include "cltensor/optim.h"
#include "loss.h"

/* A (micro-)batch and what its step made: x and y are the caller's (a loader's
 * batch, or row views of one); out, loss and dout the step's. */
typedef struct clt__step_tensors {
    clt_tensor *x, *y, *out, *loss, *dout;
} clt__step_tensors;

/* Releases x, y, out, loss and dout, in that order, and zeroes t. */
void clt__step_tensors_release(clt__step_tensors *t);

/* How a step runs. */
typedef struct clt__step_options {
    const clt__loss *loss; /* NULL: cross-entropy (clt__loss_for gives a dataset's) */
    int accumulate;        /* micro-batches per step; 0 or 1: one pass */
    /* > 0: the examples the gradients are the mean over (every micro-batch's,
     * and every shard's of data parallel): each (micro-)batch's dout is scaled
     * by its rows / denom before backward. 0: one pass is not scaled, and
     * micro-batches are scaled by rows / x's rows. */
    int64_t denom;
    int64_t mark; /* > 0: the step's number, which names its phases in a memory record */
} clt__step_options;

/* Examples in micro-batch k of `micro` over n rows: the first n % micro get
 * one more (the memory planner splits the same way). */
int64_t clt__micro_rows(int64_t n, int micro, int k);

/* The micro-step: out = forward(t->x), loss and dout of out against t->y,
 * dout *= scale (0: not scaled), backward (which adds to the gradients),
 * loss_sum += rows * loss. Zeroes nothing and releases nothing: t's tensors
 * stay the caller's. label (NULL: none) prefixes the memory record's marks
 * of its phases ("LABEL forward", "LABEL loss", "LABEL backward"). */
clt_status clt__micro_step(clt_model *m, const clt__loss *loss, clt__step_tensors *t, double scale,
                           clt_tensor *loss_sum, const char *label);

/* The gradients of one step, added to the model's (zeroed by the caller):
 * x (n, features) and targets y (n) in `micro` micro-batches, row views of
 * them, one after the other, each micro-batch's dout scaled by its rows /
 * denom, so that over every micro-batch (and over shards whose sizes sum to
 * denom) the gradients are those of the mean loss over denom examples. Adds
 * rows * loss to loss_sum per micro-batch. step > 0 marks the phases of a
 * memory record ("step S micro K forward", ...). Each micro-batch's tensors
 * go before the next one starts. */
clt_status clt__accumulate(clt_model *m, const clt__loss *loss, clt_tensor *x, clt_tensor *y, int micro, int64_t denom,
                           clt_tensor *loss_sum, int64_t step);

/* The gradients of a step on t->x, t->y: the model's zeroed, then one
 * micro-step on the whole batch (whose out, loss and dout stay in t, for
 * the caller to release after the optimizer) or o->accumulate > 1
 * micro-batches (released as they go). */
clt_status clt__step_gradients(clt_model *m, clt__step_tensors *t, clt_tensor *loss_sum, const clt__step_options *o);

/* One optimizer step: clt__step_gradients, the gradients clipped to a norm of
 * clip (0: not clipped), the optimizer's update. */
clt_status clt__train_step(clt_model *m, clt_optimizer *opt, clt__step_tensors *t, clt_tensor *loss_sum, double clip,
                           const clt__step_options *o);

/* What an evaluation adds up on the device, each a one-element float32
 * tensor: loss (required), correct (the rows predicted right), mse and mae
 * (rows times the batch's mean squared and absolute errors, each column's
 * error multiplied by scale's first when scale is not NULL); those NULL, or
 * that the loss lacks, are left alone. */
typedef struct clt__eval_sums {
    clt_tensor *loss, *correct, *mse, *mae;
    const clt_tensor *scale;
} clt__eval_sums;

/* One evaluation batch (the model as it is set, in inference): out =
 * forward(x), and its sums added to sums. */
clt_status clt__eval_step(clt_model *m, const clt__loss *loss, clt_tensor *x, clt_tensor *y, const clt__eval_sums *sums);

/* *out = the one-element float32 tensor t (a loss sum, a count), a
 * synchronization point reported as `api` (the public call, and what it
 * reads: "clt_trainer_fit (reading the loss)"), not as clt_item. */
clt_status clt__step_read(const clt_tensor *t, double *out, const char *api);

#endif
