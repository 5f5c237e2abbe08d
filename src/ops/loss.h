/* Internal: the training step's and evaluation's forms of the
 * cross-entropy's ops (src/ops/loss.c). */
#ifndef CLT_OPS_LOSS_H
#define CLT_OPS_LOSS_H

#include "cltensor/tensor.h"

/* clt_softmax_cross_entropy, and sum (a one-element float32 tensor) +=
 * rows * the mean loss, with axpy_f32's float32 bits: in the loss's own
 * launch where one work-group takes the batch (softmax_xent_mean_wg_f32 or
 * softmax_xent_mean_seq_f32), else by a clt_axpy_ after it. */
clt_status clt__softmax_cross_entropy_sum(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                          const clt_tensor *labels, clt_tensor *sum);

/* sum (a one-element float32 tensor) += the rows of logits (B, C) whose
 * largest value's first index (clt_argmax_rows) is their int32 label (B),
 * the float32 bits of clt_argmax_rows, clt_count_equal and clt_add_: in one
 * launch where clt_softmax_cross_entropy takes the batch in one. */
clt_status clt__count_hits_(clt_tensor *sum, const clt_tensor *logits, const clt_tensor *labels);

#endif
