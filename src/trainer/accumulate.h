/* Internal: gradient accumulation, the part of a training step shared by
 * the trainer and data parallel. */
#ifndef CLT_TRAINER_ACCUMULATE_H
#define CLT_TRAINER_ACCUMULATE_H

#include "../core/error.h"
#include "cltensor/nn.h"

/* Examples in micro-batch k of `micro` over n rows: the first n % micro get
 * one more (the memory planner splits the same way). */
int64_t clt__micro_rows(int64_t n, int micro, int k);

/* Forward, loss and backward of x (n, features) and labels y (n) in `micro`
 * micro-batches, row views of them, one after the other: each micro-batch's
 * dlogits (its mean loss's gradient) is scaled by its rows / denom before
 * backward, which adds it to the gradients, so that over every micro-batch
 * (and over shards whose sizes sum to denom) the gradients are those of
 * the mean loss over denom examples. Adds rows * loss to loss_sum per
 * micro-batch. Zeroes nothing. step > 0 marks the phases of a memory record
 * ("step S micro K forward", ...). Each micro-batch's tensors go before the
 * next one starts. */
clt_status clt__accumulate(clt_model *m, clt_tensor *x, clt_tensor *y, int micro, int64_t denom, clt_tensor *loss_sum,
                           int64_t step);

#endif
