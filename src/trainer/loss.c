/* The losses a training step minimises (loss.h). */
#include "loss.h"

#include "../core/error.h"
#include "../ops/loss.h"
#include "cltensor/memory.h"
#include "cltensor/ops.h"

/* clt_cross_entropy_loss_grad with the loss sum in the loss's launch. */
static clt_status xent_grad_sum(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                const clt_tensor *labels, clt_tensor *sum)
{
    CLT_TRY(clt__softmax_cross_entropy_sum(loss, dlogits, logits, labels, sum));
    if (dlogits) clt_tensor_set_category(*dlogits, CLT_MEM_ACTIVATIONS);
    return CLT_OK;
}

const clt__loss clt__loss_cross_entropy = {"cross-entropy", clt_cross_entropy_loss_grad, clt__count_hits_, NULL,
                                           xent_grad_sum};

const clt__loss clt__loss_mse = {"mse", clt_mse_loss, NULL, clt_regression_errors, NULL};

const clt__loss *clt__loss_for_task(clt_task task)
{
    return task == CLT_TASK_REGRESS ? &clt__loss_mse : &clt__loss_cross_entropy;
}

const clt__loss *clt__loss_for(const clt_dataset *ds)
{
    return clt__loss_for_task(ds ? ds->task : CLT_TASK_CLASSIFY);
}
