/* Internal: the losses a training step minimises (src/trainer/step.c). A
 * loss is a pair of functions on the model's output and the batch's
 * targets; the step, evaluation and warm-up call them through this table,
 * so that adding a loss touches only src/trainer/loss.c (and the op that
 * computes it). */
#ifndef CLT_TRAINER_LOSS_H
#define CLT_TRAINER_LOSS_H

#include "cltensor/data.h"
#include "cltensor/nn.h"

typedef struct clt__loss {
    const char *name; /* "cross-entropy" */
    /* *loss: a one-element float32 tensor, the batch's mean loss of out
     * against y; when dout is not NULL, *dout: its gradient with respect to
     * out, what clt_model_backward takes. */
    clt_status (*loss_grad)(clt_tensor **loss, clt_tensor **dout, const clt_tensor *out, const clt_tensor *y);
    /* Adds to sum (a one-element float32 tensor) the examples of the batch
     * out predicts right (evaluation's accuracy). NULL: the loss has no
     * accuracy. */
    clt_status (*correct)(clt_tensor *sum, const clt_tensor *out, const clt_tensor *y);
    /* *mse and *mae: one-element float32 tensors, the batch's mean squared
     * and mean absolute errors, each column's error multiplied by scale's
     * (K) first when scale is not NULL (clt_regression_errors). NULL: the
     * loss has no such errors. */
    clt_status (*errors)(clt_tensor **mse, clt_tensor **mae, const clt_tensor *out, const clt_tensor *y,
                         const clt_tensor *scale);
    /* loss_grad that also adds the batch's rows times *loss to sum (a
     * one-element float32 tensor), in fewer launches than loss_grad and a
     * clt_axpy_ (the training step's loss sum). NULL: the step adds it with
     * clt_axpy_. */
    clt_status (*loss_grad_sum)(clt_tensor **loss, clt_tensor **dout, const clt_tensor *out, const clt_tensor *y,
                                clt_tensor *sum);
} clt__loss;

/* Softmax cross-entropy of logits (B, C) against int32 labels (B); correct:
 * the rows whose largest logit is the label's. */
extern const clt__loss clt__loss_cross_entropy;

/* Mean squared error of predictions (B, K) against float32 values (B, K)
 * (PyTorch's MSELoss), with the regression errors and no accuracy. */
extern const clt__loss clt__loss_mse;

/* The loss a dataset trains with: MSE for CLT_TASK_REGRESS, else
 * cross-entropy. NULL gives cross-entropy. */
const clt__loss *clt__loss_for(const clt_dataset *ds);

/* The loss of a task: MSE for CLT_TASK_REGRESS, else cross-entropy. */
const clt__loss *clt__loss_for_task(clt_task task);

#endif
