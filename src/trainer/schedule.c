/* The learning rate of each optimizer step (schedule.h). */
#include "schedule.h"

#include <math.h>

#include "../core/error.h"

clt_status clt__schedule_check(const char *op, const clt_trainer_options *o)
{
    if (o->lr_schedule != CLT_LR_CONSTANT && o->lr_schedule != CLT_LR_STEP && o->lr_schedule != CLT_LR_COSINE)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: unknown lr_schedule %d", op, (int)o->lr_schedule);
    if (o->warmup_steps < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: warmup_steps is %lld; it must not be negative", op,
                         (long long)o->warmup_steps);
    if (o->lr_schedule == CLT_LR_STEP && o->lr_step_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: lr_step_size is %lld; the step schedule needs at least 1", op,
                         (long long)o->lr_step_size);
    if (o->lr_schedule == CLT_LR_STEP && !(o->lr_gamma >= 0 && o->lr_gamma <= 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: lr_gamma is %g; it must lie in (0, 1] (0: 0.1)", op,
                         o->lr_gamma);
    return CLT_OK;
}

int clt__schedule_active(const clt_trainer_options *o)
{
    return o->lr_schedule != CLT_LR_CONSTANT || o->warmup_steps > 0;
}

double clt__schedule_lr(const clt_trainer_options *o, int64_t t, int64_t total)
{
    double lr = o->lr;
    int64_t w = o->warmup_steps;
    if (t < w) return lr * (double)(t + 1) / (double)w;
    int64_t u = t - w;
    if (o->lr_schedule == CLT_LR_STEP) {
        double gamma = o->lr_gamma > 0 ? o->lr_gamma : 0.1;
        return lr * pow(gamma, (double)(u / o->lr_step_size));
    }
    if (o->lr_schedule == CLT_LR_COSINE) {
        int64_t span = total - w;
        if (span < 1) return lr;
        double frac = (double)(u < span ? u : span) / (double)span;
        return lr * 0.5 * (1.0 + cos(M_PI * frac));
    }
    return lr;
}
