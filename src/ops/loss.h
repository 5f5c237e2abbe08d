/* Internal: the training step's form of the cross-entropy (src/ops/loss.c). */
#ifndef CLT_OPS_LOSS_H
#define CLT_OPS_LOSS_H

#include "cltensor/tensor.h"

/* clt_softmax_cross_entropy, and sum (a one-element float32 tensor) +=
 * rows * the mean loss, with axpy_f32's float32 bits: in the loss's own
 * launch where the GPU-class one-group kernel takes the batch
 * (softmax_xent_mean_wg_f32), else by a clt_axpy_ after it. */
clt_status clt__softmax_cross_entropy_sum(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                          const clt_tensor *labels, clt_tensor *sum);

#endif
