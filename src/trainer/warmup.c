/* clt_model_warmup: one training step and one evaluation batch on a scratch
 * copy of a model, so that every kernel program its training uses is built
 * and the driver's code generation at first launch happens here, before the
 * trainer's clock starts, instead of inside the first epoch. */
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../device/device_internal.h"
#include "../kernels/program.h"
#include "../nn/nn_internal.h"
#include "cltensor/ops.h"
#include "cltensor/warmup.h"
#include "step.h"

/* The model's layers rebuilt on its device (clt__model_layout: the same
 * layers, recompute setting and loss scaling), in its dtype, with fresh
 * parameters. */
static clt_status scratch_copy(const clt_model *m, clt_model **out)
{
    *out = NULL;
    clt_model *c;
    CLT_TRY(clt__model_layout(&c, m));
    clt_status s = clt_model_num_inputs(m) > 0 && clt_model_num_outputs(m) > 0
                       ? CLT_OK
                       : clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_warmup: the model has no Linear layer to feed");
    if (s == CLT_OK) s = clt_model_init(c, clt_model_device(m), 0);
    if (s == CLT_OK && clt_model_dtype(m) != CLT_FLOAT32) s = clt_model_to_dtype(c, clt_model_dtype(m));
    if (s != CLT_OK) {
        clt_model_free(c);
        return s;
    }
    *out = c;
    return CLT_OK;
}

/* What clt_trainer_fit's step and clt_trainer_evaluate's batch do, once
 * each: the trainer's own step and evaluation step (step.c) with the
 * training data's loss, on zeros. */
static clt_status warm_step(const clt_model *m, int64_t batch, clt_optimizer_kind kind, double clip, int regress)
{
    clt_model *c;
    CLT_TRY(scratch_copy(m, &c));
    int64_t in = clt_model_num_inputs(m), outputs = clt_model_num_outputs(m);
    const clt__loss *loss = clt__loss_for_task(regress ? CLT_TASK_REGRESS : CLT_TASK_CLASSIFY);
    clt_device dev = clt_model_device(m);
    clt_optimizer *opt = NULL;
    clt_status s = kind == CLT_OPTIMIZER_ADAM ? clt_optimizer_create_adam(&opt, c, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0)
                                              : clt_optimizer_create_sgd(&opt, c, 0.1f, 0.0f, 0.0f);
    clt__step_tensors t = {0};
    clt_tensor *loss_sum = NULL, *correct = NULL, *mse = NULL, *mae = NULL;
    int64_t xs[] = {batch, in}, ys[] = {batch, outputs}, one = 1;
    double ignored;
    if (s == CLT_OK) s = clt_zeros(&t.x, dev, CLT_FLOAT32, 2, xs);
    if (s == CLT_OK) s = regress ? clt_zeros(&t.y, dev, CLT_FLOAT32, 2, ys) : clt_zeros(&t.y, dev, CLT_INT32, 1, ys);
    if (s == CLT_OK) s = clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->correct) s = clt_zeros(&correct, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->errors) s = clt_zeros(&mse, dev, CLT_FLOAT32, 1, &one);
    if (s == CLT_OK && loss->errors) s = clt_zeros(&mae, dev, CLT_FLOAT32, 1, &one);
    clt__step_options so = {.loss = loss};
    if (s == CLT_OK) s = clt__train_step(c, opt, &t, loss_sum, clip, &so);
    if (s == CLT_OK) s = clt__step_read(loss_sum, &ignored, "clt_model_warmup (reading the loss)");
    clt_model_set_training(c, 0);
    clt__eval_sums sums = {.loss = loss_sum, .correct = correct, .mse = mse, .mae = mae};
    if (s == CLT_OK) s = clt__eval_step(c, loss, t.x, t.y, &sums);
    if (s == CLT_OK) s = clt__step_read(loss_sum, &ignored, "clt_model_warmup (reading the loss)");
    clt__step_tensors_release(&t);
    clt_tensor_release(loss_sum);
    clt_tensor_release(correct);
    clt_tensor_release(mse);
    clt_tensor_release(mae);
    clt_optimizer_free(opt);
    clt_model_free(c);
    return s;
}

clt_status clt_model_warmup(const clt_model *model, int64_t batch_size, clt_optimizer_kind optimizer,
                            double gradient_clip_val, int flags, clt_warmup_result *out)
{
    if (out) memset(out, 0, sizeof *out);
    const char *name;
    clt_tensor *param, *grad;
    if (!model) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_warmup: NULL model");
    if (clt_model_named_parameter(model, 0, &name, &param, &grad) != CLT_OK)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_warmup: the model has no parameters on a device "
                         "(clt_model_init first)");
    if (batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_warmup: batch_size is %lld; it must be at least 1",
                         (long long)batch_size);
    if (optimizer != CLT_OPTIMIZER_SGD && optimizer != CLT_OPTIMIZER_ADAM)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_warmup: unknown optimizer %d", (int)optimizer);
    double t0 = clt__now_seconds();
    clt__program_stats before, after;
    clt__program_get_stats(&before);
    int slot;
    CLT_TRY(clt__resolve(clt_model_device(model), &slot));
    int save = (flags & CLT_WARMUP_SAVE_BINARIES) != 0, all = (flags & CLT_WARMUP_ALL_PROGRAMS) != 0;
    /* The programs built before this call: the step below builds (and
     * saves) only the others, so these are saved apart, once. With
     * CLT_WARMUP_ALL_PROGRAMS the first loop saves every program. */
    int nprog = clt__program_count();
    char *built_before = save && !all ? calloc((size_t)nprog + 1, 1) : NULL;
    if (save && !all && !built_before) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_model_warmup: out of host memory");
    for (int i = 0; built_before && i < nprog; i++) built_before[i] = (char)clt__program_built(slot, clt__program_name(i));
    clt_status s = CLT_OK;
    clt__program_save_binaries(save);
    for (int i = 0; s == CLT_OK && all && i < nprog; i++) s = clt__program_prepare(slot, clt__program_name(i), save);
    int regress = (flags & CLT_WARMUP_REGRESSION) != 0;
    if (s == CLT_OK) s = warm_step(model, batch_size, optimizer, gradient_clip_val, regress);
    clt__program_save_binaries(0);
    /* Programs built earlier in the process without their binary: write
     * them too. One built by the step had its binary saved (or its failure
     * counted) as it was built, and is not tried, nor counted, twice. */
    for (int i = 0; s == CLT_OK && built_before && i < nprog; i++)
        if (built_before[i]) s = clt__program_prepare(slot, clt__program_name(i), 1);
    free(built_before);
    clt__program_get_stats(&after);
    if (out) {
        out->seconds = clt__now_seconds() - t0;
        out->build_seconds = after.build_seconds - before.build_seconds;
        out->save_seconds = after.save_seconds - before.save_seconds;
        out->programs_built = after.built - before.built;
        out->programs_loaded = after.loaded - before.loaded;
        out->binaries_saved = after.saved - before.saved;
        out->binaries_not_saved = after.not_saved - before.not_saved;
    }
    int missing = after.not_saved - before.not_saved;
    if (s == CLT_OK && save && missing > 0)
        s = clt__fail(CLT_ERR_IO, "clt_model_warmup: %d program binar%s not saved to the cache (%d saved); the last: %s",
                      missing, missing == 1 ? "y was" : "ies were", after.saved - before.saved, after.failure);
    return s;
}
