/* Internal: what a planning run needs beyond the public plan.h, for the
 * layer above (data parallel's plan, src/parallel/data_parallel.c). */
#ifndef CLT_PLAN_INTERNAL_H
#define CLT_PLAN_INTERNAL_H

#include "cltensor/data.h"
#include "cltensor/plan.h"
#include "cltensor/trainer.h"

/* *ds: max(o->batch_size, 2 * eval) examples of `in` zero bytes each (a
 * planning device's loader writes no values: only the shapes count), with
 * o->task's targets for `outputs` outputs; clt_dataset_free releases it.
 * CLT_ERR_INVALID_ARGUMENT when the sizes overflow, CLT_ERR_OUT_OF_MEMORY. */
clt_status clt__plan_dataset(clt_dataset *ds, const clt_plan_options *o, int64_t eval, int64_t in, int64_t outputs);

/* CLT_OK when the planning device dev holds nothing (one plan at a time per
 * device), else CLT_ERR_BUSY naming it (CLT_ERR_NO_DEVICE when it does not
 * exist). */
clt_status clt__plan_idle(clt_device dev);

/* The trainer's options a plan's step stands for (its batch, micro-batches,
 * optimizer, precision and recompute), from which the planning runs make
 * the trainer's loader and optimizer as the trainer makes them. */
clt_trainer_options clt__plan_trainer_options(const clt_plan_options *o);

#endif
