/* clt_trainer_evaluate: the mean loss and accuracy (or a regression's
 * errors) of a model over a data set, one evaluation step (step.c) per
 * batch. */
#include <math.h>

#include "../core/error.h"
#include "cltensor/ops.h"
#include "cltensor/trainer.h"
#include "loss.h"
#include "step.h"

/* The target's deviations on dev, when s standardised ds's regression targets. */
static clt_status target_scale(clt_tensor **out, const clt_standardizer *st, const clt_dataset *ds, clt_device dev)
{
    *out = NULL;
    if (!st || ds->task != CLT_TASK_REGRESS || st->outputs == 0 || !st->y_std) return CLT_OK;
    if (st->outputs != ds->outputs)
        return clt__fail(CLT_ERR_SHAPE,
                         "clt_trainer_evaluate_metrics: the standardizer has %lld targets, the data set %lld outputs",
                         (long long)st->outputs, (long long)ds->outputs);
    int64_t k = st->outputs;
    return clt_from_host(out, dev, CLT_FLOAT32, 1, &k, st->y_std);
}

clt_status clt_trainer_evaluate_metrics(clt_model *model, const clt_dataset *ds, int64_t batch_size, int64_t limit,
                                        const clt_standardizer *standardizer, clt_evaluation *out)
{
    if (!model || !ds || !out)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_evaluate: NULL argument");
    if (batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_evaluate: batch_size %lld", (long long)batch_size);
    const clt__loss *loss = clt__loss_for(ds);
    clt_device dev = clt_model_device(model);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = batch_size;
    lo.shuffle = 0;
    lo.limit = limit;
    lo.flatten = 1;
    lo.resident = 0; /* a new loader each evaluation: the host path, no upload of the whole set each time */
    clt_tensor *scale = NULL;
    CLT_TRY(target_scale(&scale, standardizer, ds, dev));
    clt_loader *loader = NULL;
    clt_status s = clt_loader_create(&loader, ds, dev, &lo);
    int was_training = clt_model_training(model);
    clt_model_set_training(model, 0);
    int64_t one = 1;
    clt__eval_sums sums = {.scale = scale};
    if (s == CLT_OK) s = clt_zeros(&sums.loss, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->correct) s = clt_zeros(&sums.correct, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->errors) s = clt_zeros(&sums.mse, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->errors) s = clt_zeros(&sums.mae, dev, CLT_FLOAT32, 1, &one);
    int64_t seen = 0;
    while (s == CLT_OK) {
        clt_tensor *x = NULL, *y = NULL;
        s = clt_loader_next(loader, &x, &y);
        if (s != CLT_OK || !x) break;
        int64_t b = clt_tensor_dim(x, 0);
        s = clt__eval_step(model, loss, x, y, &sums);
        clt_tensor_release(x);
        clt_tensor_release(y);
        seen += b;
    }
    double total = 0, right = NAN, mse = NAN, mae = NAN;
    if (s == CLT_OK) s = clt__step_read(sums.loss, &total, "clt_trainer_evaluate (reading the loss)");
    if (s == CLT_OK && sums.correct)
        s = clt__step_read(sums.correct, &right, "clt_trainer_evaluate (reading the correct count)");
    if (s == CLT_OK && sums.mse) s = clt__step_read(sums.mse, &mse, "clt_trainer_evaluate (reading the errors)");
    if (s == CLT_OK && sums.mae) s = clt__step_read(sums.mae, &mae, "clt_trainer_evaluate (reading the errors)");
    if (s == CLT_OK) {
        double n = seen ? (double)seen : NAN;
        out->examples = seen;
        out->loss = total / n;
        out->accuracy = right / n;
        out->mse = mse / n;
        out->mae = mae / n;
    }
    clt_tensor_release(sums.loss);
    clt_tensor_release(sums.correct);
    clt_tensor_release(sums.mse);
    clt_tensor_release(sums.mae);
    clt_tensor_release(scale);
    clt_loader_free(loader);
    clt_model_set_training(model, was_training);
    return s;
}

clt_status clt_trainer_evaluate(clt_model *model, const clt_dataset *ds, int64_t batch_size, int64_t limit, double *loss,
                                double *accuracy)
{
    if (!model || !ds || !loss || !accuracy)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_trainer_evaluate: NULL argument");
    clt_evaluation ev;
    CLT_TRY(clt_trainer_evaluate_metrics(model, ds, batch_size, limit, NULL, &ev));
    *loss = ev.loss;
    *accuracy = ev.accuracy;
    return CLT_OK;
}
