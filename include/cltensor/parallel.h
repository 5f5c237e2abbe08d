/* More than one device: data parallel training in one process (a replica of
 * the model per device, each global batch split across them), over several
 * processes (any transport that can sum a host buffer, e.g. MPI_Allreduce),
 * and model parallel (a Sequential split into stages on different devices).
 *
 * The library itself has no MPI dependency: a process group is described by
 * a clt_collective the caller fills (`clt train --distributed` fills one
 * with Open MPI). */
#ifndef CLTENSOR_PARALLEL_H
#define CLTENSOR_PARALLEL_H

#include "export.h"
#include <stdint.h>
#include "plan.h"
#include "trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A group of `world` processes of which this one is `rank`. allreduce_sum
 * replaces buf[0..n) on every rank by the elementwise sum over all ranks;
 * every rank calls it with the same n in the same order (it is collective).
 * It returns CLT_OK or an error status, with a message set by
 * clt_set_error (clt_parallel_fit's own message then ends with it). */
typedef struct clt_collective {
    int rank, world;
    clt_status (*allreduce_sum)(void *ctx, float *buf, int64_t n);
    void *ctx;
} clt_collective;

/* ---- Replicas ---------------------------------------------------------- */

/* *out is a new model with src's layers and prefix (so the same parameter
 * names) and a copy of src's parameters (in src's dtype, with src's loss
 * scaler state), on dev, in training mode, without gradients. src must be
 * initialised. */
CLT_API clt_status clt_model_replicate(clt_model **out, const clt_model *src, clt_device dev);

/* ---- Data parallel ----------------------------------------------------- */

/* Trains `model` as clt_trainer_fit does, on several devices at once: the
 * same engine, so the same per-epoch checkpoint (save_path), stop on
 * clt_trainer_request_stop, resume (resume_path, loaded by every rank),
 * metrics, plot and divergence checks.
 *
 * Devices: devices[0..num_devices) when devices is not NULL; otherwise the
 * first num_devices of clt_try_all_gpus (all of them when num_devices is 0
 * or more than there are); at most 64 in this process.
 * The model moves to the first device (the primary) and replicas are made
 * on the others. opt->num_gpus, use_device and device are not used.
 *
 * Each step splits the global batch (opt->batch_size examples, over every
 * device of every rank) into contiguous shards, shard s of S = world *
 * num_devices going to device s % num_devices of rank s / num_devices. The
 * host issues forward, loss and backward to every device before waiting on
 * any; each device computes its own loss and the mean gradient g_s over its
 * n_s examples. Only gradients are combined, weighted by shard size: the
 * primary's gradient becomes sum_s (n_s / N) g_s, the global batch's mean
 * gradient, so uneven splits are exact. With comm, that sum crosses
 * processes through comm->allreduce_sum on a host staging buffer. The
 * primary clips (opt->gradient_clip_val) and steps; its parameters are then
 * copied to every replica, so replicas stay identical and only the primary
 * holds optimizer state. The result equals clt_trainer_fit on one device up
 * to float rounding.
 *
 * opt->fp16: the model becomes float16 before the replicas are made. The
 * gradients (scaled float16) are summed in float32 on the primary, and over
 * processes through comm, then rounded back; the primary's optimizer skips
 * the step when the sum holds inf or NaN (any replica overflowed) and
 * adjusts the loss scale, which the replicas then copy with the parameters.
 * The result equals clt_trainer_fit with fp16 up to float16 rounding.
 *
 * With comm (NULL: one process): every rank must start from the same
 * parameters (same seed, or the same checkpoint loaded on every rank) and
 * call this with the same options; only rank 0 evaluates on val, logs,
 * writes metrics, plot and checkpoint. With comm, a stop request on any
 * rank stops every rank after the same step (it rides on the gradient
 * allreduce), and each epoch's end is one verdict for all: rank 0's
 * evaluation, divergence check and files, and any rank's failure there, go
 * through one more allreduce_sum (of 3 floats), so that when rank 0 finds
 * the model diverged every rank returns CLT_ERR_DIVERGED instead of
 * waiting in the next epoch's collectives. out (may be NULL) receives on every
 * rank the global train loss; val figures on rank 0 only (NaN elsewhere);
 * out->device names the primary, with "+k" for k more devices in this
 * process.
 * Errors: those of clt_trainer_fit; CLT_ERR_INVALID_ARGUMENT for a bad
 * device list or comm (rank outside [0, world), no allreduce_sum);
 * CLT_ERR_NO_DEVICE when a listed device does not exist; what
 * allreduce_sum returns. */
CLT_API clt_status clt_parallel_fit(clt_model *model, const clt_dataset *train, const clt_dataset *val,
                            const clt_trainer_options *opt, const clt_device *devices, int num_devices,
                            const clt_collective *comm, clt_trainer_result *out);

/* What data parallel training of m on devices[0..num_devices) (1 to 64, the
 * first the primary; a device listed twice holds two replicas) holds on
 * each device, planned as clt_plan_step plans one
 * device: clt_parallel_fit's own code (the replicas, each loader's shard of
 * every global batch of o->batch_size in o->accumulate micro-batches, the
 * gradients combined on the primary, its optimizer step in o->dtype, the
 * parameters broadcast back) runs two steps on the planning devices of the
 * devices (clt_plan_device), where no kernel runs and the allocator counts
 * every tensor, with no memory cap. peaks[i] is devices[i]'s allocated
 * peak over the second step (the first makes the gradients and the
 * optimizer's state). o->device,
 * whole_run, eval_batch_size and drop_packed are not used. m is not touched.
 * Errors: CLT_ERR_INVALID_ARGUMENT (NULL, a bad count or options, as
 * clt_plan_step), CLT_ERR_NO_DEVICE naming a device that does not exist,
 * CLT_ERR_BUSY when a planning device holds another plan's memory. */
CLT_API clt_status clt_parallel_plan(const clt_model *m, const clt_plan_options *o, const clt_device *devices,
                                     int num_devices, int64_t *peaks);

/* clt_plan_fit for data parallel on devices[0..num_devices) (as
 * clt_parallel_plan), device i within budgets[i] bytes: the same search
 * (micro-batches per shard, recompute, float16 with allow_fp16, kept packed
 * weights; clt_plan_fit's order and margin, each device keeping its own
 * margin of 2 MiB plus 1/32 of its budget), where a configuration fits
 * when clt_parallel_fit's own two steps on the planning devices (with
 * o->whole_run after the trainer's warm-up on the primary), each capped
 * at its budget less its margin and then at its budget, never run out, and with
 * o->whole_run the primary's evaluation after them (in batches of
 * out->eval_batch_size: the largest shard's micro-batch, unless
 * o->eval_batch_size says) and the loaders' staging under pinned memory's
 * own cap. peaks[i] is device i's predicted allocated peak over the chosen
 * configuration's second step, as clt_parallel_plan's; out->plan is the
 * primary's under its budget (its eval_peak and staging with whole_run), out->budget and
 * margin the primary's. Errors: clt_parallel_plan's, CLT_ERR_INVALID_ARGUMENT
 * for a budget <= 0, and clt_plan_fit's CLT_ERR_OUT_OF_MEMORY when nothing
 * fits, its message naming each device's budget. Only a planning device
 * running out makes a configuration not fit: the host running out is
 * CLT_ERR_OUT_OF_MEMORY at once, with the host's message. */
CLT_API clt_status clt_parallel_plan_fit(const clt_model *m, const clt_plan_options *o, const clt_device *devices,
                                         int num_devices, const int64_t *budgets, int allow_fp16,
                                         clt_plan_fit_result *out, int64_t *peaks);

/* ---- Model parallel ---------------------------------------------------- */

/* Splits src into num_stages new models: stage k holds src's layers
 * [first_layer[k], first_layer[k+1]) (the last up to the end), lives on
 * devices[k] and starts with a copy of src's parameters for those layers.
 * first_layer[0] must be 0 and the indices increasing. A stage's parameter
 * names count its layers from 0 under src's prefix ("net.0.weight" in stage
 * 1 is src's "net.<first_layer[1]>.weight"). stages[0..num_stages) receive
 * the models (the caller frees each); on failure none is left.
 * Errors: CLT_ERR_INVALID_ARGUMENT for bad ranges; CLT_ERR_UNSUPPORTED for a
 * float16 model (each stage's optimizer would skip overflowing steps on its
 * own); device errors. */
CLT_API clt_status clt_model_split(const clt_model *src, int num_stages, const int *first_layer, const clt_device *devices,
                           clt_model **stages);

/* A chain of stages on (usually) different devices: the article's
 * sub_network1.cuda(0), sub_network2.cuda(1). Activations are copied to the
 * next stage's device at each boundary in forward, and gradients back to
 * the previous stage's device in backward. */
typedef struct clt_pipeline clt_pipeline;

/* The pipeline borrows stages[0..num_stages), each initialised on its
 * device; they must outlive it. micro_batches >= 1 (at most the batch's
 * rows are used): forward and backward split the batch into that many
 * micro-batches and issue every one, stage after stage, before waiting on
 * any, so stage k works on micro-batch i while stage k+1 works on i-1
 * (GPipe's schedule). A model keeps one forward's activations, so in
 * training micro-batch j > 0 runs through a replica of each stage (made on
 * the stage's device at the first training forward: micro_batches - 1
 * extra copies of the parameters), refreshed from the stage at each
 * forward; backward adds the replicas' gradients into the stages', which
 * then hold the whole batch's gradient, as without micro-batches. Step the
 * stages' own optimizers. */
CLT_API clt_status clt_pipeline_create(clt_pipeline **out, clt_model *const *stages, int num_stages, int micro_batches);
/* NULL is fine. */
CLT_API void clt_pipeline_free(clt_pipeline *p);
/* x is (B, ...) on any device (copied to the first stage's if elsewhere);
 * *y is a new tensor on the last stage's device. */
CLT_API clt_status clt_pipeline_forward(clt_pipeline *p, clt_tensor *x, clt_tensor **y);
/* dy is the gradient of the loss with respect to the last forward's output,
 * on any device. Accumulates every stage's gradients (+=); when dx is not
 * NULL, *dx is the gradient with respect to x, on the first stage's device.
 * Fails with CLT_ERR_INVALID_ARGUMENT when no training forward is pending. */
CLT_API clt_status clt_pipeline_backward(clt_pipeline *p, clt_tensor *dy, clt_tensor **dx);

#ifdef __cplusplus
}
#endif
#endif
