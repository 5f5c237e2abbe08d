/* Models: a Sequential of layers (Linear, ReLU, Flatten, ResidualBlock) with
 * explicit forward and backward passes, llm.c style, and the softmax
 * cross-entropy loss.
 *
 * Memory layout: all of a model's parameters are views into ONE flat float32
 * (or float16, see clt_model_to_dtype) tensor tagged CLT_MEM_WEIGHTS, in the order of PyTorch's state_dict (each
 * Linear's weight (out,in), then its bias (out)). Gradients are views into a
 * second flat tensor tagged CLT_MEM_GRADIENTS, created (zeroed) by the first
 * backward pass. Moving a model moves the flat tensors in one copy each, and
 * an optimizer updates every parameter with one kernel over the flat buffer.
 *
 * Training memory follows the chapter's four plateaus: weights from
 * clt_model_init; activations kept by a training forward (tagged
 * CLT_MEM_ACTIVATIONS) until backward consumes and frees them; gradients
 * from the first backward on; optimizer state from the first optimizer step. */
#ifndef CLTENSOR_NN_H
#define CLTENSOR_NN_H

#include "export.h"
#include <stdint.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clt_model clt_model;

/* ---- Building ---------------------------------------------------------
 * clt_model_create makes an empty Sequential; clt_model_add_* append layers;
 * clt_model_init allocates and initialises the parameters on a device, after
 * which the model is usable and no layer can be added. Parameter names are
 * "<prefix>.<i>.weight" ("<i>.weight" when prefix is "" or NULL), i being
 * the layer's index in the Sequential, as PyTorch names nn.Sequential
 * entries. Adding a layer whose input width contradicts the previous
 * layer's output width fails with CLT_ERR_SHAPE. */
CLT_API clt_status clt_model_create(clt_model **out, const char *prefix);
/* Linear(in, out): y = x @ weight^T + bias; x is (B,in), weight (out,in). */
CLT_API clt_status clt_model_add_linear(clt_model *m, int64_t in_features, int64_t out_features);
/* ReLU: y = max(x, 0), any shape. */
CLT_API clt_status clt_model_add_relu(clt_model *m);
/* Flatten: (B, d1, d2, ...) -> (B, d1*d2*...), a view of its input. */
CLT_API clt_status clt_model_add_flatten(clt_model *m);
/* ResidualBlock(h): y = x + body(x), body = Linear(h,h), ReLU, Linear(h,h),
 * ReLU; its parameters are named "<prefix>.<i>.body.0.weight",
 * "...body.0.bias", "...body.2.weight", "...body.2.bias". */
CLT_API clt_status clt_model_add_residual(clt_model *m, int64_t num_hiddens);
/* Allocates the flat parameter tensor on dev and initialises it as PyTorch
 * does by default: every Linear's weight and bias uniform in
 * [-1/sqrt(in), 1/sqrt(in)). The values come from a host generator seeded
 * by `seed`, so they are the same on every device. Training mode is on. */
CLT_API clt_status clt_model_init(clt_model *m, clt_device dev, uint64_t seed);

/* An initialised MLP named as nn.Sequential(...) itself ("0.weight",
 * "2.weight", ...): Linear(num_inputs, hiddens[0]), ReLU, ...,
 * Linear(hiddens[n-1], num_outputs); num_hidden_layers may be 0. */
CLT_API clt_status clt_model_create_mlp(clt_model **out, clt_device dev, int64_t num_inputs, int num_hidden_layers,
                                const int64_t *hiddens, int64_t num_outputs, uint64_t seed);
/* The chapter's ResMLPClassifier, initialised, with its state_dict names:
 * net = Sequential(Flatten, Linear(num_inputs, h), ReLU, ResidualBlock(h) x
 * num_blocks, Linear(h, num_outputs)), so for two blocks "net.1.weight",
 * "net.3.body.0.weight", ..., "net.5.bias". */
CLT_API clt_status clt_model_create_resmlp(clt_model **out, clt_device dev, int64_t num_inputs, int64_t num_hiddens,
                                   int num_blocks, int64_t num_outputs, uint64_t seed);

/* ---- Structure -------------------------------------------------------- */

typedef enum clt_layer_kind {
    CLT_LAYER_LINEAR,
    CLT_LAYER_RELU,
    CLT_LAYER_FLATTEN,
    CLT_LAYER_RESIDUAL,
    CLT_LAYER_CUSTOM   /* clt_model_add_layer */
} clt_layer_kind;

/* A layer of your own, without parameters, written with the library's
 * tensor ops (clt_add, clt_relu, ... : whatever runs on the model's
 * device and dtype). forward makes *y (a new tensor, as wide as x: the
 * builder checks the widths of the layers around it as if it were not
 * there) from x; when keep is not NULL (training)
 * it may set *keep to one tensor its backward needs (a reference the layer
 * then owns and releases after backward), else leaves it NULL. backward
 * makes *dx, the gradient for x, from dy (the gradient for y) and what
 * forward kept. ctx is passed to both and is shared by every copy of the
 * model (the memory planner's, the warm-up's, data parallel's replicas).
 * Since the layer runs through the ordinary calls, everything it allocates
 * is counted by the memory planner as it runs (docs/planner.md). A
 * checkpoint records such a layer by its name only: clt_model_load refuses
 * it, and the program that built the model loads its parameters with
 * clt_checkpoint_load. */
typedef struct clt_layer_ops {
    const char *name; /* clt_layer_info's `custom` and a checkpoint's record: 1 to 31 ASCII letters, digits,
                         '_' and '-' */
    clt_status (*forward)(void *ctx, clt_tensor *x, clt_tensor **y, clt_tensor **keep);
    clt_status (*backward)(void *ctx, clt_tensor *dy, clt_tensor *kept, clt_tensor **dx);
    void *ctx;
} clt_layer_ops;

/* Appends a custom layer (ops is copied; ops->name must stay valid as long
 * as the model and its copies). It keeps the width the layer before gives.
 * CLT_ERR_INVALID_ARGUMENT for NULL, a missing function or a bad name, or
 * an initialised model. */
CLT_API clt_status clt_model_add_layer(clt_model *m, const clt_layer_ops *ops);

/* One top-level layer, as added. name ("net.3") is the model's and lives as
 * long as it. in_features and out_features: a Linear's sizes, a
 * ResidualBlock's width (both), 0 for ReLU, Flatten and a custom layer.
 * custom: a custom layer's ops->name, else NULL. */
typedef struct clt_layer_info {
    clt_layer_kind kind;
    const char *name;
    int64_t in_features, out_features;
    const char *custom;
} clt_layer_info;

/* Top-level layers added so far (a ResidualBlock counts once); 0 for NULL. */
CLT_API int clt_model_num_layers(const clt_model *m);
/* Layer i, 0 <= i < clt_model_num_layers(m); CLT_ERR_INVALID_ARGUMENT for
 * NULL or an index out of range. Enough to rebuild the model's structure
 * through the builder calls above. */
CLT_API clt_status clt_model_layer(const clt_model *m, int i, clt_layer_info *out);
/* The parameter-name prefix given to clt_model_create ("" for none; NULL for
 * a NULL model). */
CLT_API const char *clt_model_prefix(const clt_model *m);
/* The input width: the first Linear's (or ResidualBlock's) inputs; the
 * outputs: the last one's outputs. 0 for NULL or a model without such a
 * layer. */
CLT_API int64_t clt_model_num_inputs(const clt_model *m);
CLT_API int64_t clt_model_num_outputs(const clt_model *m);

/* Releases the parameters, gradients and any kept activations. NULL is fine.
 * An optimizer built on the model must be freed first or not used again. */
CLT_API void clt_model_free(clt_model *m);

/* ---- Placement and mode ---------------------------------------------- */

/* Moves every parameter (and the gradients, if any) to dev: one copy of each
 * flat tensor; a no-op when already there. Activations kept by an unfinished
 * training forward are dropped. Views obtained earlier from
 * clt_model_named_parameter are invalid afterwards. Build optimizers after
 * moving (their state is created on the parameters' device). Pinned memory
 * is refused (CLT_ERR_UNSUPPORTED): kernels do not run there. */
CLT_API clt_status clt_model_to(clt_model *m, clt_device dev);
/* Where the parameters live. */
CLT_API clt_device clt_model_device(const clt_model *m);
/* Training on (1, the default): forward keeps what backward needs. Off: the
 * chapter's no_grad, forward keeps no activations; on CPU devices a float32
 * model's Linears then keep their weights packed for the forward product
 * (CLT_MEM_WEIGHTS), packed again after any write to the parameters and
 * freed when training is switched on. Switching drops kept activations. */
CLT_API void clt_model_set_training(clt_model *m, int on);
CLT_API int clt_model_training(const clt_model *m);
/* Whether, with training off, the Linears keep their packed weights between
 * forwards (1, the default: an evaluation over many batches packs each
 * weight once) or pack them into scratch at each product (0: about the
 * float32 weights' size less memory, at the cost of a pack per batch;
 * `clt train --fit` chooses 0 when only that makes its evaluation fit).
 * Turning it off frees the panels kept so far. */
CLT_API void clt_model_set_keep_packed(clt_model *m, int on);
CLT_API int clt_model_keep_packed(const clt_model *m);

/* ---- Recompute: activation checkpointing ----------------------------
 * Activation checkpointing, called recompute in cltensor's API (checkpoint
 * files are clt_checkpoint_save's). Trading compute for memory (Chen et al.
 * 2016; torch.utils.checkpoint with use_reentrant=False). With S > 0 blocks
 * per segment, a training forward runs
 * each run of consecutive ResidualBlocks in segments of S blocks (the last
 * may be shorter) that keep only their input; backward runs each segment's
 * forward again from that input, backpropagates through it and frees the
 * recomputed activations before moving to the segment below. Stored
 * activations drop from every block's to the segment inputs plus one
 * segment's; a step costs about one extra forward. Gradients are bit for bit
 * those without checkpointing: recomputation runs the same kernels on the
 * same inputs. No layer draws random numbers; one that does must take its
 * draws from a counter-based generator keyed on (seed, forward count,
 * layer), fixed when the training forward runs, so that recomputation
 * replays them (see docs/checkpointing.md). Layers outside runs of residual
 * blocks keep their activations as usual. Inference (training off) is
 * unaffected. */
#define CLT_RECOMPUTE_AUTO (-1) /* segments of about sqrt(blocks in the run) */
/* blocks_per_segment: residual blocks per segment, 0 turns recompute off
 * (the default), CLT_RECOMPUTE_AUTO picks round(sqrt(n)) for a run of n blocks. Changing it
 * drops kept activations. Fails with CLT_ERR_INVALID_ARGUMENT for other
 * negative sizes. */
CLT_API clt_status clt_model_set_recompute(clt_model *m, int blocks_per_segment);
/* The blocks per segment set (0 when off or m is NULL). */
CLT_API int clt_model_recompute(const clt_model *m);
/* Number of ResidualBlocks at the top level of the model (0 for NULL). */
CLT_API int clt_model_num_blocks(const clt_model *m);

/* ---- Half precision (docs/half.md) -------------------------------------
 * PyTorch's model.half() with mixed-precision training: a float16 model
 * stores parameters, gradients and kept activations in float16 (half the
 * bytes) and computes in float32 inside kernels, on every device. Forward
 * takes float32 or float16 input and returns float32 output (for a float32
 * loss). Backward multiplies a float32 dy by the loss scale before
 * converting it, so that small gradients survive float16; the gradients
 * hold scaled values, and dx (float32) is unscaled. An optimizer built on a
 * float16 model keeps float32 master weights, divides the scale out and
 * skips steps whose gradients overflowed (see cltensor/optim.h). */

/* Converts the parameters (and gradients, if any) to dt, CLT_FLOAT32 or
 * CLT_FLOAT16 (else CLT_ERR_UNSUPPORTED); float32 to float16 rounds to
 * nearest. A no-op when already dt. Drops kept activations; views from
 * clt_model_named_parameter are invalid afterwards. Convert before building
 * an optimizer: a step of an optimizer built before the conversion fails
 * with CLT_ERR_INVALID_ARGUMENT (its state and master weights do not fit).
 * A failed conversion leaves the model as it was (and its optimizers
 * usable). */
CLT_API clt_status clt_model_to_dtype(clt_model *m, clt_dtype dt);
/* The parameters' dtype (CLT_FLOAT32 for NULL or an uninitialised model). */
CLT_API clt_dtype clt_model_dtype(const clt_model *m);
/* Loss scaling of a float16 model (ignored by float32 ones): backward
 * multiplies dy by scale. Dynamic (the default, starting at 65536 as
 * PyTorch's GradScaler): the optimizer halves the scale at each step whose
 * gradients hold inf or NaN (and skips it) and doubles it after 2000 steps
 * without. Static: the scale stays. CLT_ERR_INVALID_ARGUMENT unless scale is
 * positive and finite. */
CLT_API clt_status clt_model_set_loss_scale(clt_model *m, float scale, int dynamic);
/* The current loss scale (0 for NULL). The optimizer's steps change it on
 * the device: reading it after steps have run is a synchronization point
 * (clt_model_loss_scale_state too). */
CLT_API float clt_model_loss_scale(const clt_model *m);
/* The whole scaler state, for checkpoints: the scale, whether it is dynamic,
 * and the clean steps counted towards the next doubling. NULL outputs are
 * skipped; CLT_ERR_INVALID_ARGUMENT for a NULL model. */
CLT_API clt_status clt_model_loss_scale_state(const clt_model *m, float *scale, int *dynamic, int64_t *clean_steps);
/* Restores what clt_model_loss_scale_state read: as clt_model_set_loss_scale,
 * and clean_steps (0 <= clean_steps < 2000) continues the count. */
CLT_API clt_status clt_model_set_loss_scale_state(clt_model *m, float scale, int dynamic, int64_t clean_steps);

/* ---- Forward and backward -------------------------------------------- */

/* x is (B, ...) on the model's device (else CLT_ERR_DEVICE_MISMATCH); *y is
 * a new tensor (B, out) on that device. In training mode every layer keeps
 * what its backward needs, replacing what an earlier forward kept. The model
 * keeps references to x (not copies), so x must not be modified before
 * backward. Layer shape errors name the layer ("net.3.body.0: ..."). */
CLT_API clt_status clt_model_forward(clt_model *m, clt_tensor *x, clt_tensor **y);
/* dy is the gradient of the loss with respect to the last forward's output
 * (same shape). Creates the gradients at the first call (zeroed), then
 * ACCUMULATES every parameter's gradient (+=), and frees the kept
 * activations. When dx is not NULL, *dx is a new tensor, the gradient with
 * respect to x (shaped as x). Fails with CLT_ERR_INVALID_ARGUMENT when no
 * training forward is pending; on any failure the kept activations are
 * dropped. */
CLT_API clt_status clt_model_backward(clt_model *m, clt_tensor *dy, clt_tensor **dx);
/* Sets every gradient to zero with one fill of the flat gradient tensor,
 * or none when they are known zero (just created or zeroed, with nothing
 * written to them since). Before the first backward there are no gradients
 * and nothing is allocated (they are implicitly zero), as PyTorch's
 * zero_grad(set_to_none=True). */
CLT_API clt_status clt_model_zero_grad(clt_model *m);
/* Scales the gradients so that their global L2 norm is at most max_norm
 * (PyTorch's clip_grad_norm_, with its 1e-6 guard); *total_norm (may be
 * NULL) receives the norm before clipping. Reads the norm back, so it is a
 * synchronization point. Nothing happens before the first backward. */
CLT_API clt_status clt_model_clip_grad_norm(clt_model *m, double max_norm, double *total_norm);

/* Softmax cross-entropy loss layer: the loss and, in the same fused pass,
 * its gradient. logits is (B,C), labels (B) int32.
 * *loss is a one-element tensor, the mean loss. When dlogits is not NULL,
 * *dlogits is what clt_model_backward takes, (softmax - onehot) / B, tagged
 * CLT_MEM_ACTIVATIONS (the loss's kept state); pass NULL in inference. */
CLT_API clt_status clt_cross_entropy_loss_grad(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                       const clt_tensor *labels);

/* Mean squared error loss layer (PyTorch's MSELoss): pred (B,K), target
 * (B,K) float32 or (B) when K is 1; *loss the mean over the B*K elements
 * and, in the same fused pass, *dpred = 2 (pred - target) / (B*K) when
 * dpred is not NULL, tagged CLT_MEM_ACTIVATIONS. See clt_mse_loss. */
CLT_API clt_status clt_mse_loss_grad(clt_tensor **loss, clt_tensor **dpred, const clt_tensor *pred,
                                     const clt_tensor *target);

/* ---- Parameters ------------------------------------------------------- */

/* Number of parameter elements N, all tensors together (4N bytes of weights
 * in float32, 2N in float16). 0 for NULL. */
CLT_API int64_t clt_model_num_parameter_elements(const clt_model *m);
/* Number of parameter tensors, each named (two per Linear): the i of
 * clt_model_named_parameter runs below it. 0 for NULL. */
CLT_API int clt_model_num_parameter_tensors(const clt_model *m);
/* The i-th named parameter, in state_dict order. Each output may be NULL.
 * *param and *grad are borrowed views owned by the model (valid until
 * clt_model_to, clt_model_to_dtype or clt_model_free); *grad is NULL before
 * the first backward. */
CLT_API clt_status clt_model_named_parameter(const clt_model *m, int i, const char **name, clt_tensor **param,
                                     clt_tensor **grad);
/* Index of the parameter with that name, or -1. */
CLT_API int clt_model_find_parameter(const clt_model *m, const char *name);
/* The flat tensors (N) behind every parameter and gradient: borrowed;
 * gradients are NULL before the first backward. */
CLT_API clt_tensor *clt_model_parameters(const clt_model *m);
CLT_API clt_tensor *clt_model_gradients(const clt_model *m);

#ifdef __cplusplus
}
#endif
#endif
