/* Will it fit? A memory planner: the peak of one training step of a model,
 * predicted before running it, by category, from the same accounting the
 * allocator reports (clt_memory_max_allocated): exact tensor sizes, the
 * trainer's order of operations, and what each layer keeps for backward.
 *
 * The step is the trainer's own, run on the planning device of o->device
 * (clt_plan_device): the batch (x and int32 labels, or a regression's float32
 * targets) on the device beside the trainer's running loss sum; zero_grad;
 * forward; softmax cross-entropy (or MSE); backward; optimizer step, with
 * gradients and optimizer state already created by an earlier step. With
 * whole_run, the batches come through the trainer's loader and an
 * evaluation follows, as `clt train --fit` runs them. One plan at a time per device: the planning
 * device must hold nothing (CLT_ERR_BUSY otherwise). In
 * float16 it is the mixed-precision step of `clt train --fp16`: float16
 * weights, gradients and activations, float32 master weights and optimizer
 * state, loss scaling, and the float32 scratch of each conversion. */
#ifndef CLTENSOR_PLAN_H
#define CLTENSOR_PLAN_H

#include "export.h"
#include <stdint.h>
#include <stdio.h>
#include "data.h"
#include "nn.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clt_plan_options {
    int64_t batch_size;            /* examples per step, >= 1 */
    clt_optimizer_kind optimizer;  /* Adam keeps 2 buffers of N, SGD 1 with momentum, else none */
    float momentum;                /* SGD only */
    clt_dtype dtype;               /* the model's precision: CLT_FLOAT32, or CLT_FLOAT16 (mixed precision) */
    int recompute_blocks;          /* recompute (activation checkpointing), residual blocks per segment,
                                      as clt_model_set_recompute: 0 off, CLT_RECOMPUTE_AUTO, S */
    clt_device device;             /* where the step runs: where the CPU kernels do the products (CPU-class
                                      devices, or CLT_DENSE=cpu) their GEMM packing workspace is added */
    int accumulate;                /* micro-batches per step (gradient accumulation, as the trainer's
                                      accumulate): the batch stays on the device whole, each micro-batch's
                                      forward and backward run on rows of it; 0 or 1: one pass */
    int whole_run;                 /* 1: the run as `clt train --fit` trains it: first the trainer's warm-up
                                      step (clt_model_warmup on a scratch copy of the model, at the
                                      micro-batch size), then the batches come through the trainer's
                                      loader, staged in pinned memory (counted on pinned memory's
                                      planning twin, under pinned memory's own cap when the plan has a
                                      budget), and after the two steps an evaluation of two batches of
                                      eval_batch_size runs in inference mode (clt_trainer_evaluate); one
                                      whole run at a time in a process, since pinned memory's planning twin
                                      is shared (CLT_ERR_BUSY otherwise); 0: the training step alone */
    int64_t eval_batch_size;       /* with whole_run, examples per evaluation batch; 0: the micro-batch size */
    clt_task task;                 /* CLT_TASK_CLASSIFY (0): int32 labels and the softmax cross-entropy;
                                      CLT_TASK_REGRESS: float32 targets, one per output, and the MSE */
    int drop_packed;               /* with whole_run, 1: evaluate as after clt_model_set_keep_packed(m, 0),
                                      whatever the model's own setting; 0: as the model says */
    int64_t train_examples;        /* with whole_run, the examples the training loader uses (after a
                                      limit): on a GPU-class device the loader may keep them resident
                                      (docs/data.md), and the plan then counts that copy as the run holds
                                      it; 0: a stand-in of max(batch_size, 2 x the evaluation's batch) */
    int train_value_bytes;         /* with whole_run, the training set's stored values: 1 (bytes, an
                                      image set's; also 0) or 4 (float32 features, a table's) */
} clt_plan_options;

/* Batch 256, SGD without momentum, float32, no recompute, try_gpu(0). */
CLT_API clt_plan_options clt_plan_default_options(void);

/* The predicted peak and what is alive at that moment, in bytes. */
typedef struct clt_plan {
    int64_t weights;        /* CLT_MEM_WEIGHTS: 4N (float16: 2N) */
    int64_t gradients;      /* CLT_MEM_GRADIENTS: 4N (float16: 2N, plus the optimizer's 4N float32
                               unscaled copy when the peak is in its step) */
    int64_t optimizer;      /* CLT_MEM_OPTIMIZER: 0, 4N or 8N of state, plus 4N of float32
                               master weights in float16 */
    int64_t batch;          /* x and labels */
    int64_t activations;    /* CLT_MEM_ACTIVATIONS alive at the peak */
    int64_t temporaries;    /* everything else alive at the peak: layer outputs being made, input
                               gradients, the loss, GEMM workspace, float16's float32 copies of a
                               product's operands and its overflow flag */
    int64_t peak;           /* the sum of the above: clt_memory_max_allocated over the step */
    int64_t peak_activations; /* clt_memory_max_allocated_category(CLT_MEM_ACTIVATIONS) */
    int64_t reserved;       /* clt_memory_max_reserved: the caching allocator's segments, from the
                               model's creation (and with whole_run the warm-up) through two steps (the
                               first makes the gradients and optimizer state) with no cap, as run on the
                               planning device; clt_plan_fit's: under the budget */
    int64_t input_features; /* per example, the first Linear's input width */
    int recompute_blocks;   /* residual blocks in the longest recomputed segment, 0 when off */
    /* With whole_run (else 0): */
    int64_t eval_peak;      /* the allocated peak over the evaluation, the model's parameters, gradients
                               and optimizer state included (clt_memory_max_allocated after a reset) */
    int64_t staging;        /* pinned memory's allocated peak over the run: the training loader's and
                               the evaluation loader's staging buffers */
    int64_t staging_reserved; /* pinned memory's reserved peak (its allocator's segments) */
} clt_plan;

/* Predicts one step of m (initialised; its parameters' device is not
 * touched) in o->dtype, whatever m's own dtype. Errors:
 * CLT_ERR_INVALID_ARGUMENT (NULL, batch < 1, a bad segment size, a model
 * without a Linear), CLT_ERR_UNSUPPORTED for a dtype other than float32 and
 * float16, CLT_ERR_NO_DEVICE when o->device does not exist. */
CLT_API clt_status clt_plan_step(const clt_model *m, const clt_plan_options *o, clt_plan *out);

/* The largest batch size that trains under a memory cap of budget bytes (0
 * when not even one example does), searched up to max_batch: the model's
 * creation and two steps run on the planning device (clt_plan_device)
 * capped at the budget, through the allocator's segments, pools and cache
 * releases, with none of its requests going past the cap. */
CLT_API clt_status clt_plan_max_batch(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch,
                              int64_t *batch);

/* What clt_plan_fit chose. */
typedef struct clt_plan_fit_result {
    int accumulate;          /* micro-batches per step (1: none) */
    int recompute_blocks;    /* recompute, residual blocks per segment: 0 off, else S */
    clt_dtype dtype;         /* CLT_FLOAT32, or CLT_FLOAT16 where allowed and needed */
    int keep_packed;         /* with whole_run: 0 when the evaluation fits only with no packed weights kept
                                (clt_model_set_keep_packed(m, 0) before training), else the model's setting */
    int64_t budget, margin;  /* the budget and the part of it kept free */
    clt_plan plan;           /* the chosen step's prediction, run under the budget */
    int64_t eval_batch_size; /* the evaluation's batch the plan ran: o's eval_batch_size, or when 0 the largest
                                micro-batch a device's step runs (clt_trainer_options' eval_batch_size) */
} clt_plan_fit_result;

/* Searches the configurations that keep o's batch and its result: the
 * micro-batch count N (1 to 64, then doubling, then the batch size: one
 * example each),
 * recompute (off, then 1 up to the model's blocks per segment), and, with allow_fp16, float16 after every float32 one
 * fails; o's own accumulate and recompute_blocks are ignored. The first
 * that fits wins, in this order: fewest micro-batches, then no
 * recompute, then the blocks per segment with the lowest predicted peak
 * (every recomputed block's forward runs twice, whatever the size). A
 * configuration fits when the run (clt_plan_max_batch's: creation and two
 * steps, reserved segments and cache releases) stays under the budget less
 * a margin of 2 MiB plus 1/32 of the budget, for what the run does not
 * hold (other tensors of the program, a driver's scratch), and under the
 * budget itself, the cap the training runs under, whose figures the
 * result's plan holds: the allocator takes a whole segment only where it
 * fits under the cap, so a run that fits under a cap need not under a
 * larger one.
 * With o->whole_run the run's evaluation (at the micro-batch size) must
 * stay under it too, and the loaders' staging under pinned memory's own cap
 * when it has one; a configuration whose steps fit but whose evaluation
 * does not is tried again without kept packed weights (keep_packed 0).
 * CLT_ERR_OUT_OF_MEMORY when none fits, its message giving the budget, the
 * margin, and what the weights, gradients, optimizer state and batch need;
 * with whole_run, before any search, when the loaders' staging alone (the
 * training batch's and an evaluation batch of one example's) is past
 * pinned memory's cap, its message naming pinned memory, its cap and the
 * staging's size. Only the planning device (or pinned memory's) running
 * out makes a configuration not fit: the host running out is
 * CLT_ERR_OUT_OF_MEMORY at once, with the host's message. */
CLT_API clt_status clt_plan_fit(const clt_model *m, const clt_plan_options *o, int64_t budget, int allow_fp16,
                        clt_plan_fit_result *out);

/* Writes the plan as a table plus, when budget > 0, whether it fits in it,
 * the largest batch that fits with and without recompute (up to
 * max_batch), and what to change when it does not fit. A batch that
 * stops with no cap (a tensor past the device's largest buffer) has no
 * table: the report names the request instead and, given a budget, says
 * that it does not fit. */
CLT_API clt_status clt_plan_report(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch,
                           FILE *out);

#ifdef __cplusplus
}
#endif
#endif
