/* Internal: copying a model's state between replicas, and, for tests, a
 * look at the replicas of clt_parallel_fit. */
#ifndef CLT_PARALLEL_INTERNAL_H
#define CLT_PARALLEL_INTERNAL_H

#include "cltensor/nn.h"

/* dst (same layers and dtype as src, any device) takes src's parameters
 * and loss scaler state. */
clt_status clt__model_copy_state(clt_model *dst, const clt_model *src);

/* Called after every data parallel step (parameters broadcast) with this
 * process's replicas, [0] the primary. One hook for the whole process; NULL
 * removes it. Not thread-safe: set it while no fit runs. */
typedef void (*clt__dp_step_hook)(clt_model *const *replicas, int k, void *ctx);
void clt__dp_set_step_hook(clt__dp_step_hook hook, void *ctx);

#endif
