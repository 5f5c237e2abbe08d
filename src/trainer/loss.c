/* The losses a training step minimises (loss.h). */
#include "loss.h"

#include "cltensor/ops.h"

static clt_status argmax_hits(clt_tensor **hits, const clt_tensor *logits, const clt_tensor *labels)
{
    clt_tensor *pred = NULL;
    *hits = NULL;
    clt_status s = clt_argmax_rows(&pred, logits);
    if (s == CLT_OK) s = clt_count_equal(hits, pred, labels);
    clt_tensor_release(pred);
    return s;
}

const clt__loss clt__loss_cross_entropy = {"cross-entropy", clt_cross_entropy_loss_grad, argmax_hits, NULL};

const clt__loss clt__loss_mse = {"mse", clt_mse_loss, NULL, clt_regression_errors};

const clt__loss *clt__loss_for_task(clt_task task)
{
    return task == CLT_TASK_REGRESS ? &clt__loss_mse : &clt__loss_cross_entropy;
}

const clt__loss *clt__loss_for(const clt_dataset *ds)
{
    return clt__loss_for_task(ds ? ds->task : CLT_TASK_CLASSIFY);
}
