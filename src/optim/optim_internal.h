/* Internal: what a checkpoint load needs to replace an optimizer's state
 * all at once (src/trainer/checkpoint.c), so that a failed load leaves the
 * old state untouched. */
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

#endif
