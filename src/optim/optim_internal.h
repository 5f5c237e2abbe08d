/* Internal: what a checkpoint load needs to replace an optimizer's state
 * all at once (src/trainer/checkpoint.c), so that a failed load leaves the
 * old state untouched, and the trainer's step. */
#ifndef CLT_OPTIM_INTERNAL_H
#define CLT_OPTIM_INTERNAL_H

#include "cltensor/optim.h"

/* New, unfilled float32 buffers, one per clt_optimizer_state index (out[i]
 * for i < clt_optimizer_num_states, at most 3), each with as many elements
 * as the model has parameters, on the parameters' device. The optimizer is
 * not changed; on failure none is left. */
clt_status clt__optimizer_stage_state(const clt_optimizer *opt, clt_tensor **out);

/* Makes the buffers of clt__optimizer_stage_state the optimizer's state
 * (taking them) and releases the old ones. Cannot fail. */
void clt__optimizer_adopt_state(clt_optimizer *opt, clt_tensor **staged);

/* clt_optimizer_step that also zeroes the model's gradients as its update
 * reads them (a float16 model's as its unscale does, skipped step or not),
 * so that the next clt_model_zero_grad launches nothing: the trainer's step
 * (src/trainer/step.c). clt_optimizer_step leaves them readable. */
clt_status clt__optimizer_step_zero(clt_optimizer *opt);

#endif
