/* Internal: the optimizer kernels' options beyond the public clt_sgd_step_
 * and clt_adam_step_ (ops.h): the gradients zeroed by the update, and a
 * float16 model's step, which the device decides (cl/optim.cl). */
#ifndef CLT_OPS_OPTIM_STEP_H
#define CLT_OPS_OPTIM_STEP_H

#include <stdint.h>

#include "cltensor/tensor.h"

/* An optimizer's words of a float16 model's step on the device (int32): the
 * step's overflow flag, which clt__unscale_f16 sets, and the steps taken
 * since the host last set its count. */
enum { CLT__AMP_OVERFLOW, CLT__AMP_TAKEN, CLT__AMP_WORDS };

typedef struct clt__update {
    int zero_grad;    /* grad is zeroed once read, by the same launch */
    clt_tensor *amp;  /* a float16 model's step (NULL: none): an int32 tensor of CLT__AMP_WORDS words. The update is
                         skipped when its overflow word is set; Adam counts base + its taken word + 1 steps */
    clt_tensor *half; /* with amp: the float16 parameters, set to param narrowed by the same launch */
    int64_t base;     /* with amp: the steps the host counts */
} clt__update;

/* clt_sgd_step_ and clt_adam_step_ with u's options (NULL: none; grad is
 * then read only, as in the public calls). With u->amp, Adam's step argument
 * is not used. */
clt_status clt__sgd_step(clt_tensor *param, clt_tensor *grad, clt_tensor *momentum_buf, float lr, float momentum,
                         float weight_decay, int first_step, const clt__update *u);
clt_status clt__adam_step(clt_tensor *param, clt_tensor *grad, clt_tensor *m, clt_tensor *v, float lr, float beta1,
                          float beta2, float eps, float weight_decay, int decoupled, int64_t step,
                          const clt__update *u);

/* The end of a float16 model's step (cl/optim.cl's scaler_update, one
 * work-item): from amp's overflow word, scaler (src/ops/half.h) halves
 * (dynamic) or counts a clean step and doubles after growth of them in a
 * row (dynamic), amp's taken word counts a step taken, and the overflow
 * word is cleared. */
clt_status clt__scaler_update(clt_tensor *scaler, clt_tensor *amp, int dynamic, int growth);

#endif
