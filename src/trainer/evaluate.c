/* clt_trainer_evaluate: the mean loss and accuracy of a model over a data
 * set, one evaluation step (step.c) per batch. */
#include <math.h>

#include "../core/error.h"
#include "cltensor/ops.h"
#include "cltensor/trainer.h"
#include "step.h"

clt_status clt_trainer_evaluate(clt_model *model, const clt_dataset *ds, int64_t batch_size, int64_t limit, double *loss,
                                double *accuracy)
{
    if (!model || !ds || !loss || !accuracy)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_evaluate: NULL argument");
    if (batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_evaluate: batch_size %lld", (long long)batch_size);
    clt_device dev = clt_model_device(model);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = batch_size;
    lo.shuffle = 0;
    lo.limit = limit;
    lo.flatten = 1;
    clt_loader *loader;
    CLT_TRY(clt_loader_create(&loader, ds, dev, &lo));
    int was_training = clt_model_training(model);
    clt_model_set_training(model, 0);
    int64_t one = 1;
    clt_tensor *loss_sum = NULL, *correct = NULL;
    clt_status s = clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK) s = clt_zeros(&correct, dev, CLT_FLOAT32, 1, &one);
    int64_t seen = 0;
    while (s == CLT_OK) {
        clt_tensor *x = NULL, *y = NULL;
        s = clt_loader_next(loader, &x, &y);
        if (s != CLT_OK || !x) break;
        int64_t b = clt_tensor_dim(x, 0);
        s = clt__eval_step(model, NULL, x, y, loss_sum, correct);
        clt_tensor_release(x);
        clt_tensor_release(y);
        seen += b;
    }
    double total = 0, right = 0;
    if (s == CLT_OK) s = clt__step_read(loss_sum, &total, "clt_trainer_evaluate (reading the loss)");
    if (s == CLT_OK) s = clt__step_read(correct, &right, "clt_trainer_evaluate (reading the correct count)");
    if (s == CLT_OK) {
        *loss = seen ? total / (double)seen : NAN;
        *accuracy = seen ? right / (double)seen : NAN;
    }
    clt_tensor_release(loss_sum);
    clt_tensor_release(correct);
    clt_loader_free(loader);
    clt_model_set_training(model, was_training);
    return s;
}
