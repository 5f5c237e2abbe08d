/* Internal: layers of a model and the model itself. */
#ifndef CLT_NN_INTERNAL_H
#define CLT_NN_INTERNAL_H

#include "../core/error.h"
#include "../ops/ops_internal.h"
#include "cltensor/nn.h"

typedef enum clt__layer_kind {
    CLT__LINEAR,
    CLT__RELU,
    CLT__FLATTEN,
    CLT__RESIDUAL,
    CLT__CUSTOM
} clt__layer_kind;

#define CLT__NAME_MAX 96

typedef struct clt__layer {
    clt__layer_kind kind;
    char name[CLT__NAME_MAX]; /* "net.3.body.0", for messages and parameter names */
    /* Linear: weight (out,in) at element `offset` of the flat buffers, bias (out) after it. */
    int64_t in, out, offset;
    clt_tensor *w, *b, *dw, *db; /* views; dw and db NULL until gradients exist */
    /* Linear, float32 on CPU devices: w^T packed for the forward product,
     * kept until w changes (clt__linear_forward_packed). */
    clt__packed_weight packed;
    /* Residual: the body Linear, ReLU, Linear, ReLU. */
    struct clt__layer *body;
    int nbody;
    /* What backward needs: Linear its input, ReLU its output. */
    clt_tensor *saved;
    /* Recompute (activation checkpointing), top-level residual blocks
     * only: seg_pos is the 1-based position in the current forward's
     * segment (0: not in one); the segment's first layer holds its length
     * and its input, the only tensor a recomputed segment keeps. */
    int seg_pos, seg_len, seg_internal;
    clt_tensor *seg_input;
    /* Flatten: the input shape, to restore in backward. */
    int in_ndim;
    int64_t in_shape[CLT_MAX_DIMS];
    /* Custom (clt_model_add_layer): its functions; saved holds what its forward kept. */
    clt_layer_ops ops;
} clt__layer;

/* One named parameter tensor: a Linear's weight or bias. */
typedef struct clt__named {
    char name[CLT__NAME_MAX + 8];
    clt__layer *layer;
    int is_bias;
} clt__named;

struct clt_model {
    char prefix[32];
    clt__layer *layers;
    int nlayers, cap;
    int64_t features;       /* output width of the last layer added, -1 when unknown */
    int64_t nparams;
    int initialised;
    int training;
    int evaluating;         /* 1 after clt_model_set_training(m, 0): Linears keep w^T packed (kept_panels in
                               layers.c); not `training`, which a recomputed segment's forward also turns off */
    int drop_packed;        /* clt_model_set_keep_packed(m, 0): evaluation keeps no packed weights */
    int recompute_blocks;   /* blocks per recomputed segment; 0 off, CLT_RECOMPUTE_AUTO */
    int pending;            /* a training forward kept activations for backward */
    int out_ndim;           /* shape of the pending forward's output */
    int64_t out_shape[CLT_MAX_DIMS];
    clt_tensor *params;     /* flat (N), CLT_MEM_WEIGHTS */
    clt_tensor *grads;      /* flat (N), CLT_MEM_GRADIENTS, NULL before the first backward */
    clt__layer **linears;   /* every Linear, nested ones included, in state_dict order */
    int nlinears;
    clt__named *named;
    int nnamed;
    /* Loss scaling of a float16 model (docs/half.md): backward multiplies
     * dy by the scale; the optimizer divides it out, and when dynamic
     * halves it on overflow and doubles it after CLT__SCALE_GROWTH clean
     * steps, on the device: the scale and clean steps live in `scaler`
     * (src/ops/half.h's words, made by clt__model_scaler), and loss_scale
     * and clean_steps are the host's view of them, read back from the
     * device when asked after a step has run (scaler_ahead). */
    float loss_scale;
    int scale_dynamic;
    int64_t clean_steps;
    clt_tensor *scaler;     /* NULL until a float16 pass needs it */
    int scaler_ahead;       /* a step changed the device's scaler since the host last read it */
    uint64_t zero_version;  /* the gradients' storage version when last known zero (0: not known) */
    int64_t conversions;    /* dtype changes by clt_model_to_dtype (an optimizer built before one refuses to step) */
};

#define CLT__SCALE_GROWTH 2000

/* Layer passes (src/nn/layers.c). x is borrowed; `internal` says x was made
 * by this forward pass, so keeping it counts as an activation. *y is a new
 * reference and *y_internal says the same of it. */
clt_status clt__seq_forward(clt_model *m, clt__layer *layers, int n, clt_tensor *x, int internal,
                            clt_tensor **y, int *y_internal);
/* The model's own layers, recomputed in training mode when recompute_blocks
 * is not 0: runs of residual blocks go in segments keeping only their input. */
clt_status clt__model_run_forward(clt_model *m, clt_tensor *x, clt_tensor **y);
/* dy is borrowed; *dx (a new reference) is computed only when dx is not NULL.
 * A checkpointed segment is recomputed from its input (training mode, the
 * same kernels, so bit for bit), backpropagated and freed before the layers
 * below it run. */
clt_status clt__seq_backward(clt_model *m, clt__layer *layers, int n, clt_tensor *dy, clt_tensor **dx);
/* 1 unless CLT_FUSE=0: float32 layers fuse (src/nn/layers.c; the planner
 * follows). */
int clt__fuse_enabled(void);
/* Blocks per segment for a run of `run` residual blocks (size as set). */
int clt__segment_size(int size, int run);
/* Releases every kept tensor of the layers. */
void clt__seq_drop(clt__layer *layers, int n);

/* A new model with m's layers (kinds, sizes, names), prefix, recompute
 * setting and loss scaler, not initialised: clt_model_init places it on a
 * device of the caller's (the memory planner's planning device). Copies the
 * layer descriptions whatever their kind, so that a new layer needs nothing
 * here. */
clt_status clt__model_layout(clt_model **out, const clt_model *m);

/* *out = the device's loss scaler of m (borrowed), made from the host's
 * view on the parameters' device when missing or elsewhere. */
clt_status clt__model_scaler(clt_model *m, clt_tensor **out);
/* A step has changed the device's loss scaler: the host's view reads it
 * back when next asked (a synchronization point only then). */
void clt__model_scaler_stepped(clt_model *m);
/* The gradients are zero as of now: clt_model_zero_grad skips its fill
 * until something writes them (their storage's version changes). */
void clt__model_grads_zeroed(clt_model *m);

/* The argument check of the calls that need a built model: clt__need
 * (src/core/error.h) for NULL ("op: what is NULL"), then CLT_ERR_INVALID_ARGUMENT
 * unless clt_model_init has given it parameters. */
clt_status clt__need_model(const char *op, const char *what, const clt_model *m);

#endif
