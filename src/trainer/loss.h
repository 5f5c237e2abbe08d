/* Internal: the losses a training step minimises (src/trainer/step.c). A
 * loss is a pair of functions on the model's output and the batch's
 * targets; the step, evaluation and warm-up call them through this table,
 * so that adding a loss touches only src/trainer/loss.c (and the op that
 * computes it). */
#ifndef CLT_TRAINER_LOSS_H
#define CLT_TRAINER_LOSS_H

#include "cltensor/nn.h"

typedef struct clt__loss {
    const char *name; /* "cross-entropy" */
    /* *loss: a one-element float32 tensor, the batch's mean loss of out
     * against y; when dout is not NULL, *dout: its gradient with respect to
     * out, what clt_model_backward takes. */
    clt_status (*loss_grad)(clt_tensor **loss, clt_tensor **dout, const clt_tensor *out, const clt_tensor *y);
    /* *hits: a one-element float32 tensor, the examples of the batch out
     * predicts right (evaluation's accuracy). NULL: the loss has no
     * accuracy. */
    clt_status (*correct)(clt_tensor **hits, const clt_tensor *out, const clt_tensor *y);
} clt__loss;

/* Softmax cross-entropy of logits (B, C) against int32 labels (B); correct:
 * the rows whose largest logit is the label's. */
extern const clt__loss clt__loss_cross_entropy;

#endif
