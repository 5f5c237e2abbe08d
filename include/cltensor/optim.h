/* Optimizers over a model's flat parameter buffer: one fused kernel per step
 * updates every parameter. State (SGD momentum; Adam's two moments) is
 * created lazily at the first step that finds gradients, on the parameters'
 * device, tagged CLT_MEM_OPTIMIZER: the chapter's fourth plateau. */
#ifndef CLTENSOR_OPTIM_H
#define CLTENSOR_OPTIM_H

#include "export.h"
#include <stdint.h>
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which optimizer a trainer or a memory plan means. */
typedef enum clt_optimizer_kind {
    CLT_OPTIMIZER_SGD = 0,  /* plain SGD, the chapter's default */
    CLT_OPTIMIZER_ADAM = 1  /* Adam with PyTorch's betas and eps */
} clt_optimizer_kind;

typedef struct clt_optimizer clt_optimizer;

/* SGD as PyTorch's: g = grad + weight_decay * param; with momentum,
 * buf = momentum * buf + g (buf = g at the first step) and param -= lr * buf;
 * without, param -= lr * g and there is no state. The optimizer borrows the
 * model, which must outlive it. CLT_ERR_INVALID_ARGUMENT for a NULL or
 * uninitialised model, or lr, momentum or weight_decay negative or not
 * finite, or momentum >= 1. */
CLT_API clt_status clt_optimizer_create_sgd(clt_optimizer **out, clt_model *model, float lr, float momentum,
                                    float weight_decay);
/* Adam as PyTorch's (defaults lr 1e-3, betas 0.9 and 0.999, eps 1e-8),
 * bias-corrected. decoupled = 1 is AdamW (param *= 1 - lr * weight_decay);
 * otherwise weight_decay is added to the gradient. Betas must lie in [0, 1). */
CLT_API clt_status clt_optimizer_create_adam(clt_optimizer **out, clt_model *model, float lr, float beta1, float beta2,
                                     float eps, float weight_decay, int decoupled);
/* NULL is fine. */
CLT_API void clt_optimizer_free(clt_optimizer *opt);

/* One update of every parameter from the current gradients. For a float16
 * model (mixed precision, docs/half.md) the update runs on float32 master
 * weights (created from the parameters at the first step, tagged
 * CLT_MEM_OPTIMIZER) with the gradients divided by the model's loss scale,
 * and the parameters become the master weights rounded to float16. When
 * those gradients hold inf or NaN the update is skipped (parameters, state
 * and step count unchanged, CLT_OK) and a dynamic loss scale halves; the
 * device decides, so the step waits for nothing (clt_optimizer_steps and
 * clt_model_loss_scale read the outcome back). Adam's bias corrections of
 * a float16 model count the steps taken, on the device, in float32. The
 * gradients are left as they are. Before the first backward (no gradients
 * yet) it does nothing, as PyTorch skips parameters without gradients.
 * Creates the state at the first update (a float16 model's zeroed, and
 * kept when the device skips that update). State left on another device
 * (the model was moved after the first step) fails with
 * CLT_ERR_DEVICE_MISMATCH. A failed step leaves the step count, the loss
 * scale and its clean-step count as they were, and no state or master
 * weights it would have created; the parameters and existing state change
 * in one update kernel, except on a float16 model whose last launch (the
 * loss scaler's update) fails after that kernel (the master weights, state
 * and parameters then hold the update, the counters do not). */
CLT_API clt_status clt_optimizer_step(clt_optimizer *opt);

/* Learning rate, for schedules. */
CLT_API float clt_optimizer_lr(const clt_optimizer *opt);
CLT_API clt_status clt_optimizer_set_lr(clt_optimizer *opt, float lr);
/* Updates done so far (Adam's step t). set_steps restores it from a
 * checkpoint. A float16 model's steps are counted on the device: reading
 * the count after steps have run is a synchronization point. */
CLT_API int64_t clt_optimizer_steps(const clt_optimizer *opt);
CLT_API clt_status clt_optimizer_set_steps(clt_optimizer *opt, int64_t steps);

/* The state buffers, flat over the parameters in the model's layout:
 * Adam has "exp_avg" and "exp_avg_sq", SGD with momentum "momentum_buffer",
 * SGD without none (PyTorch's names); for a float16 model one more, last,
 * "master": the float32 master weights. *state is borrowed and NULL until
 * the first update (or clt_optimizer_init_state), and replaced by a
 * clt_checkpoint_load that loads state. */
CLT_API int clt_optimizer_num_states(const clt_optimizer *opt);
CLT_API clt_status clt_optimizer_state(const clt_optimizer *opt, int i, const char **name, clt_tensor **state);
/* Creates the state now on the parameters' device (for loading a checkpoint
 * into it): zeroed, the master weights a float32 copy of the parameters; a
 * no-op for what exists. On failure nothing it created is left. */
CLT_API clt_status clt_optimizer_init_state(clt_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
