/* Internal: what a planning run needs beyond the public plan.h, for the
 * layer above (data parallel's plan, src/parallel/data_parallel.c). */
#ifndef CLT_PLAN_INTERNAL_H
#define CLT_PLAN_INTERNAL_H

#include "cltensor/data.h"
#include "cltensor/plan.h"
#include "cltensor/trainer.h"

/* *ds: max(o->batch_size, 2 * eval, o->train_examples) examples of `in`
 * zero values each, bytes or with o->train_value_bytes 4 float32 (a
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

/* p's peak and what each category held at it, from dev's allocator since
 * its last peak reset; batch: the step's batch bytes; reserved: the
 * reserved peak before that reset (the larger is p's). */
clt_status clt__plan_read(clt_device dev, int64_t batch, int64_t reserved, clt_plan *p);

/* The trainer's warm-up before a whole run's first step (clt__fit_run):
 * clt_model_warmup of c at its largest micro-batch, micro rows, or the
 * training loader's examples when fewer, on a scratch copy of c beside
 * what the run holds by then, as the trainer's engine calls it. */
clt_status clt__plan_warmup(const clt_model *c, const clt_plan_options *o, int64_t micro, int64_t examples);

/* The evaluation after the steps, as clt_trainer_fit evaluates after an
 * epoch: two batches of eval examples of ds on c's (planning) device dev,
 * beside the training loaders' staging in pinned's; its peaks into p
 * (eval_peak, staging, staging_reserved, and reserved when larger). */
clt_status clt__plan_evaluate(clt_model *c, const clt_dataset *ds, int64_t eval, clt_device dev, clt_device pinned,
                              clt_plan *p);

/* Pinned memory's own cap (CLT_MEMORY_CAP's pinned=), which a whole run's
 * staging plans under: 0 on a machine without pinned memory (no OpenCL
 * platform), where described devices (clt_plan_device_describe) still plan. */
clt_status clt__plan_pinned_cap(int64_t *cap);

/* A planning run under caps ends out of memory for one of two reasons: one
 * of its planning devices ran out (the configuration does not fit) or the
 * host did (an error). clt__plan_refusals: the requests the allocators of
 * devs[0..n) (which exist) have refused so far; clt__plan_ran_out: 1 when s
 * is CLT_ERR_OUT_OF_MEMORY and they refused one since `before` was read,
 * else 0. */
uint64_t clt__plan_refusals(const clt_device *devs, int n);
int clt__plan_ran_out(clt_status s, const clt_device *devs, int n, uint64_t before);

/* The part of a budget clt_plan_fit keeps free: 2 MiB plus 1/32 of it. */
int64_t clt__plan_margin(int64_t budget);

/* How a configuration is run: with no cap, under the budget less its
 * margin, or under the budget itself, the cap the trained run has. */
enum { CLT__PLAN_UNCAPPED, CLT__PLAN_MARGIN, CLT__PLAN_BUDGET };

/* One configuration q (its accumulate, recompute_blocks, dtype and
 * drop_packed chosen by the search), run as capped says (CLT__PLAN_*).
 * *fits as for a capped run: 1, 0, or -1 when the steps fit but the
 * evaluation after them does not; an uncapped run's out of memory is an
 * error. */
typedef clt_status (*clt__plan_try)(void *ctx, const clt_plan_options *q, int capped, clt_plan *p, int *fits);

/* clt_plan_fit's search, over whatever try plans (one device, or data
 * parallel's devices): the order, the float16 fallback, the evaluation
 * without kept packed weights, and the failures: pinned staging past
 * pinned memory's cap before any search, and none fitting, whose message
 * says it fits no `where` ("32.0 MiB on cpu:0 (less a margin of 3.0 MiB)").
 * Fills out's accumulate, recompute_blocks, dtype, keep_packed, plan and
 * eval_batch_size (micro: the largest micro-batch's rows a device runs in q's
 * micro-batches). */
clt_status clt__plan_search(const clt_model *m, const clt_plan_options *o, int allow_fp16, clt__plan_try try_plan,
                            void *ctx, int64_t (*micro)(void *ctx, const clt_plan_options *q), const char *where,
                            clt_plan_fit_result *out);

#endif
