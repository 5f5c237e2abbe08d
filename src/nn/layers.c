/* Layer passes, llm.c style: each forward keeps exactly what its backward
 * needs (Linear its input, ReLU its output, Flatten only the input shape on
 * the host), and each backward consumes and frees it. Float32 layers fuse
 * (CLT_FUSE=0 turns it off): a Linear followed by a ReLU runs as one
 * product with bias and ReLU in its store, and a residual block's last
 * Linear and ReLU add the block's input there too; backward folds the ReLU
 * mask and the Linear's bias gradient into one pass, or, where the dense op
 * fuses them (GPU-class devices, clt__dense_fuses_backward), into the
 * products of the Linears next to the ReLU; a residual block's first Linear
 * accumulates its input gradient into the block's dy instead of adding the
 * two afterwards. Float16 layers fuse the same way where their products
 * take cl/gemm_gpu.cl, and make passes of their own elsewhere. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/env.h"
#include "../device/device_internal.h"
#include "../memory/record.h"
#include "../ops/linear_f16.h"
#include "../ops/ops_internal.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/ops.h"
#include "nn_internal.h"

/* Puts the layer's name in front of the message of a failed op. */
static clt_status layer_fail(const clt__layer *l, clt_status s)
{
    char msg[768];
    snprintf(msg, sizeof msg, "%s", clt_last_error());
    return clt__fail(s, "%s: %s", l->name, msg);
}

/* Lets go of a kept tensor. One still held elsewhere (by the caller, or by
 * another layer that drops it next) is no longer this layer's activation,
 * so the counters stop charging it as one. */
static void drop(clt_tensor **slot)
{
    clt_tensor *t = *slot;
    if (!t) return;
    *slot = NULL;
    int shared = atomic_load(&t->refs) > 1 || atomic_load(&t->st->refs) > 1;
    if (shared && clt_tensor_category(t) == CLT_MEM_ACTIVATIONS) clt_tensor_set_category(t, CLT_MEM_OTHER);
    clt_tensor_release(t);
}

/* Keeps t for backward; a tensor made by this forward counts as an activation
 * (the model's input is the caller's and keeps its category). */
static void keep(clt_tensor **slot, clt_tensor *t, int internal)
{
    clt_tensor_retain(t);
    drop(slot);
    *slot = t;
    if (internal) clt_tensor_set_category(t, CLT_MEM_ACTIVATIONS);
}

static int has_params(const clt__layer *l) { return l->kind == CLT__LINEAR || l->kind == CLT__RESIDUAL; }

int clt__fuse_enabled(void)
{
    return clt__env_int(CLT__ENV_FUSE, 1);
}

static int is_f32_linear(const clt__layer *l)
{
    return l->kind == CLT__LINEAR && clt_tensor_dtype(l->w) == CLT_FLOAT32;
}

/* 1 when the Linear l folds its neighbours' passes into its products for a
 * batch of rows: float32 (where cl/gemm_gpu.cl does not take them, the
 * dense op makes the passes), or float16 whose products take cl/gemm_gpu.cl
 * (clt__dense_fuses_backward). */
static int folds(const clt__layer *l, int64_t rows)
{
    int slot, fused = 0;
    if (l->kind != CLT__LINEAR || !l->w) return 0;
    if (clt_tensor_dtype(l->w) == CLT_FLOAT32) return 1;
    /* A failure here is the product's own to report. */
    if (clt__resolve(clt_tensor_device(l->w), &slot) != CLT_OK ||
        clt__dense_fuses_backward(slot, (size_t)rows, (size_t)l->out, (size_t)l->in, &fused) != CLT_OK)
        return 0;
    return fused;
}

/* Where a Linear's forward keeps w^T's panels: in evaluation mode only, and
 * not after clt_model_set_keep_packed(m, 0).
 * In training the optimizer rewrites w every step, so kept panels would be
 * packed again at each forward anyway; they would only add memory. */
static clt__packed_weight *kept_panels(const clt_model *m, clt__layer *l)
{
    return m->evaluating && !m->drop_packed ? &l->packed : NULL;
}

// x is (B,in), w is (out,in), b is (out); y is (B,out)
static clt_status linear_forward(clt_model *m, clt__layer *l, clt_tensor *x, int internal, clt_tensor **y)
{
    int half = clt_tensor_dtype(l->w) == CLT_FLOAT16;
    clt_status s = half ? clt__linear_forward_f16(y, x, l->w, l->b)
                        : clt__linear_forward_packed(y, x, l->w, l->b, 0, kept_panels(m, l));
    if (s != CLT_OK) return layer_fail(l, s);
    if (m->training) keep(&l->saved, x, internal);
    return CLT_OK;
}

// Linear then ReLU in one product, and with res (not NULL) y = ReLU's
// output + res in it too; each keeps what its own backward needs
static clt_status linear_relu_forward(clt_model *m, clt__layer *lin, clt__layer *relu, clt_tensor *x, int internal,
                                      const clt_tensor *res, clt_tensor **y)
{
    clt_tensor *r = NULL, *sum = NULL;
    clt_status s;
    if (clt_tensor_dtype(lin->w) == CLT_FLOAT16) s = clt__linear_relu_forward_f16(&r, &sum, x, lin->w, lin->b, res);
    else if (res) s = clt__linear_relu_residual_forward(&r, &sum, x, lin->w, lin->b, res, kept_panels(m, lin));
    else s = clt__linear_forward_packed(&r, x, lin->w, lin->b, 1, kept_panels(m, lin));
    if (s != CLT_OK) return layer_fail(lin, s);
    if (m->training) {
        keep(&lin->saved, x, internal);
        keep(&relu->saved, r, 1);
    }
    if (!res) {
        *y = r;
        return CLT_OK;
    }
    clt_tensor_release(r);
    *y = sum;
    return CLT_OK;
}

// x and y are any shape, the same
static clt_status relu_forward(clt_model *m, clt__layer *l, clt_tensor *x, clt_tensor **y)
{
    clt_status s = clt_relu(y, x);
    if (s != CLT_OK) return layer_fail(l, s);
    if (m->training) keep(&l->saved, *y, 1);
    return CLT_OK;
}

// x is (B, d1, d2, ...), y is (B, d1*d2*...) sharing x's storage
static clt_status flatten_forward(clt__layer *l, clt_tensor *x, clt_tensor **y)
{
    int nd = clt_tensor_ndim(x);
    if (nd < 1) return clt__fail(CLT_ERR_SHAPE, "%s: Flatten needs a batch dimension, got a scalar", l->name);
    int64_t shape[2] = {clt_tensor_dim(x, 0), 1};
    l->in_ndim = clt_tensor_shape(x, l->in_shape);
    for (int i = 1; i < nd; i++) shape[1] *= l->in_shape[i];
    clt_status s = clt_reshape(y, x, 2, shape);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// x and y are (B,h); a body that ends in a Linear and a ReLU that fold adds
// x in their product's store
static clt_status residual_forward(clt_model *m, clt__layer *l, clt_tensor *x, int internal, clt_tensor **y)
{
    clt_tensor *h;
    int h_internal, n = l->nbody;
    int fold = clt__fuse_enabled() && n >= 2 && l->body[n - 1].kind == CLT__RELU &&
               folds(&l->body[n - 2], clt_tensor_dim(x, 0));
    CLT_TRY(clt__seq_forward(m, l->body, fold ? n - 2 : n, x, internal, &h, &h_internal));
    clt_status s;
    if (fold) {
        s = linear_relu_forward(m, &l->body[n - 2], &l->body[n - 1], h, h_internal, x, y);
        clt_tensor_release(h);
        return s;
    }
    s = clt_add(y, x, h);
    clt_tensor_release(h);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// x is what the layer before gives; y is what the custom forward makes
static clt_status custom_forward(clt_model *m, clt__layer *l, clt_tensor *x, int internal, clt_tensor **y)
{
    clt_tensor *kept = NULL;
    clt_clear_error(); /* a failure the user's function does not name is not taken for an older one */
    clt_status s = l->ops.forward(l->ops.ctx, x, y, m->training ? &kept : NULL);
    if (s == CLT_OK && !*y)
        s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "custom layer \"%s\": forward made no output", l->ops.name);
    if (s != CLT_OK) {
        clt_tensor_release(kept);
        clt_tensor_release(*y);
        *y = NULL;
        return layer_fail(l, s);
    }
    if (kept) {
        /* What it keeps of x itself (x or a view of it) stays the caller's, as x's own category says. */
        keep(&l->saved, kept, kept->st == x->st ? internal : 1);
        clt_tensor_release(kept); /* keep took its own reference */
    }
    return CLT_OK;
}

static clt_status layer_forward(clt_model *m, clt__layer *l, clt_tensor *x, int internal, clt_tensor **y,
                                int *y_internal)
{
    *y_internal = 1;
    switch (l->kind) {
    case CLT__LINEAR: return linear_forward(m, l, x, internal, y);
    case CLT__RELU: return relu_forward(m, l, x, y);
    case CLT__FLATTEN:
        *y_internal = internal;
        return flatten_forward(l, x, y);
    case CLT__RESIDUAL: return residual_forward(m, l, x, internal, y);
    case CLT__CUSTOM: return custom_forward(m, l, x, internal, y);
    }
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: unknown layer kind %d", l->name, (int)l->kind);
}

/* While the model's device records memory (clt_memory_record_start), a
 * top-level layer's forward, backward or recomputation marks its phase:
 * "forward net.3", "backward net.3", "recompute net.3-net.4". */
static _Thread_local int recomputing;

static void mark_layers(const clt_model *m, const char *what, const clt__layer *a, const clt__layer *b)
{
    int slot;
    /* The parameters' device (the model's, read here: model.c is above this file). */
    if (!clt__record_active() || !m || !m->params || clt__resolve(clt_tensor_device(m->params), &slot) != CLT_OK)
        return;
    char label[2 * CLT__NAME_MAX + 16];
    if (a == b) snprintf(label, sizeof label, "%s %s", what, a->name);
    else snprintf(label, sizeof label, "%s %s-%s", what, a->name, b->name);
    clt__record_minor(slot, label);
}

static int top_level(const clt_model *m, const clt__layer *l)
{
    if (!m) return 0;
    uintptr_t p = (uintptr_t)l, lo = (uintptr_t)m->layers, hi = (uintptr_t)(m->layers + m->nlayers);
    return p >= lo && p < hi;
}

clt_status clt__seq_forward(clt_model *m, clt__layer *layers, int n, clt_tensor *x, int internal,
                            clt_tensor **y, int *y_internal)
{
    *y = NULL;
    int fuse = clt__fuse_enabled();
    clt_tensor *cur = clt_tensor_retain(x);
    int cur_internal = internal;
    for (int i = 0; i < n; i++) {
        clt_tensor *next = NULL;
        int next_internal = 1;
        clt_status s;
        if (!recomputing && clt__record_active() && top_level(m, &layers[i]))
            mark_layers(m, "forward", &layers[i], &layers[i]);
        if (fuse && i + 1 < n && layers[i + 1].kind == CLT__RELU && folds(&layers[i], clt_tensor_dim(cur, 0))) {
            s = linear_relu_forward(m, &layers[i], &layers[i + 1], cur, cur_internal, NULL, &next);
            i++;
        } else {
            s = layer_forward(m, &layers[i], cur, cur_internal, &next, &next_internal);
        }
        clt_tensor_release(cur);
        if (s != CLT_OK) return s;
        cur = next;
        cur_internal = next_internal;
    }
    *y = cur;
    *y_internal = cur_internal;
    return CLT_OK;
}

static clt_status missing(const clt__layer *l)
{
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: backward without a kept forward", l->name);
}

/* What a layer's backward folds in with its neighbours' (float32, and
 * float16 where folds says so). */
typedef struct fold {
    int fuse;              /* CLT_FUSE is not 0 */
    int bias_done;         /* Linear: the ReLU above it accumulated its bias gradient */
    clt__linear_fold lin;  /* Linear: base (*dx is base + its input gradient, accumulated into base
                            * itself when in_place) and the masks of the ReLUs above and below */
} fold;

static clt_status seq_backward(clt_model *m, clt__layer *layers, int n, clt_tensor *dy, clt_tensor **dx,
                               clt_tensor *base, int in_place);

// dy is (B,out), x (kept) is (B,in); accumulates dw (out,in) and db (out); dx is (B,in)
static clt_status linear_backward(clt__layer *l, clt_tensor *dy, clt_tensor **dx, const fold *f)
{
    if (!l->saved) return missing(l);
    clt_tensor *db = f->bias_done ? NULL : l->db;
    clt__linear_fold lin = f->lin;
    if (!dx) lin.base = NULL, lin.dx_mask = NULL;
    clt_status s = clt_tensor_dtype(l->w) == CLT_FLOAT16
                       ? clt__linear_backward_fold_f16(dx, &lin, l->dw, db, dy, l->saved, l->w)
                       : clt__linear_backward_fold(dx, &lin, l->dw, db, dy, l->saved, l->w);
    drop(&l->saved);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// dy, y (kept) and dx have the layer's shape
static clt_status relu_backward(clt__layer *l, clt_tensor *dy, clt_tensor **dx)
{
    if (!l->saved) return missing(l);
    clt_status s = dx ? clt_relu_backward(dx, dy, l->saved) : CLT_OK;
    drop(&l->saved);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// dy, y (kept) and dx are (B,out) of lin, the Linear below: the mask and
// lin's bias gradient in one pass
static clt_status relu_bias_backward(clt__layer *l, clt__layer *lin, clt_tensor *dy, clt_tensor **dx)
{
    if (!l->saved) return missing(l);
    clt_status s = clt_relu_backward_bias_(dx, lin->db, dy, l->saved);
    drop(&l->saved);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// dy is (B,h): dx = dy + body's input gradient, fused: without an add pass
static clt_status residual_backward(clt__layer *l, clt_tensor *dy, clt_tensor **dx, const fold *f)
{
    if (!dx) return seq_backward(NULL, l->body, l->nbody, clt_tensor_retain(dy), NULL, NULL, 0);
    if (f->fuse && folds(&l->body[0], clt_tensor_dim(dy, 0))) {
        /* The body's first product adds into dy itself when the caller's
         * reference is the only one, so nothing reads it later. */
        int in_place = atomic_load(&dy->refs) == 1 && atomic_load(&dy->st->refs) == 1;
        return seq_backward(NULL, l->body, l->nbody, clt_tensor_retain(dy), dx, dy, in_place);
    }
    clt_tensor *dh;
    CLT_TRY(seq_backward(NULL, l->body, l->nbody, clt_tensor_retain(dy), &dh, NULL, 0));
    clt_status s = clt_add(dx, dy, dh);
    clt_tensor_release(dh);
    return s == CLT_OK ? s : layer_fail(l, s);
}

// dy has the shape of the custom forward's y; dx that of its x (none asked: nothing to do, no parameters)
static clt_status custom_backward(clt__layer *l, clt_tensor *dy, clt_tensor **dx)
{
    clt_status s = CLT_OK;
    clt_clear_error();
    if (dx) s = l->ops.backward(l->ops.ctx, dy, l->saved, dx);
    if (s == CLT_OK && dx && !*dx)
        s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "custom layer \"%s\": backward made no input gradient", l->ops.name);
    if (s != CLT_OK && dx) {
        clt_tensor_release(*dx);
        *dx = NULL;
    }
    drop(&l->saved);
    return s == CLT_OK ? s : layer_fail(l, s);
}

static clt_status layer_backward(clt__layer *l, clt_tensor *dy, clt_tensor **dx, const fold *f)
{
    switch (l->kind) {
    case CLT__LINEAR: return linear_backward(l, dy, dx, f);
    case CLT__RELU: return relu_backward(l, dy, dx);
    case CLT__FLATTEN: {
        if (!dx) return CLT_OK;
        clt_status s = clt_reshape(dx, dy, l->in_ndim, l->in_shape);
        return s == CLT_OK ? s : layer_fail(l, s);
    }
    case CLT__RESIDUAL: return residual_backward(l, dy, dx, f);
    case CLT__CUSTOM: return custom_backward(l, dy, dx);
    }
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: unknown layer kind %d", l->name, (int)l->kind);
}

int clt__segment_size(int size, int run)
{
    if (size != CLT_RECOMPUTE_AUTO) return size;
    int k = (int)lround(sqrt((double)run));
    return k < 1 ? 1 : k;
}

clt_status clt__model_run_forward(clt_model *m, clt_tensor *x, clt_tensor **y)
{
    *y = NULL;
    clt__layer *layers = m->layers;
    int n = m->nlayers;
    for (int i = 0; i < n; i++) layers[i].seg_pos = layers[i].seg_len = 0;
    clt_tensor *cur = clt_tensor_retain(x);
    int cur_internal = 0, size = 0;
    int recompute = m->training && m->recompute_blocks != 0;
    for (int i = 0; i < n;) {
        int len = 1;
        if (recompute && layers[i].kind == CLT__RESIDUAL) {
            int run = 0;
            while (i + run < n && layers[i + run].kind == CLT__RESIDUAL) run++;
            /* The size is fixed at the start of a run so that every segment
             * of it has the same (the last may be shorter). */
            if (i == 0 || layers[i - 1].kind != CLT__RESIDUAL) size = clt__segment_size(m->recompute_blocks, run);
            len = size < run ? size : run;
            for (int k = 0; k < len; k++) layers[i + k].seg_pos = k + 1;
            layers[i].seg_len = len;
            layers[i].seg_internal = cur_internal;
            keep(&layers[i].seg_input, cur, cur_internal);
        } else {
            /* Layers outside segments run together, so that pairs fuse. */
            while (i + len < n && !(recompute && layers[i + len].kind == CLT__RESIDUAL)) len++;
        }
        clt_tensor *next = NULL;
        int next_internal;
        /* A segment runs as inference: its layers keep nothing. */
        int training = m->training;
        if (layers[i].seg_len) m->training = 0;
        clt_status s = clt__seq_forward(m, &layers[i], len, cur, cur_internal, &next, &next_internal);
        m->training = training;
        clt_tensor_release(cur);
        if (s != CLT_OK) return s;
        cur = next;
        cur_internal = next_internal;
        i += len;
    }
    *y = cur;
    return CLT_OK;
}

/* Backward through layers[j..j+len) of a checkpointed segment: forward again
 * from the kept input, keeping activations this time, then backward, which
 * frees them. dy is handed over. */
static clt_status segment_backward(clt_model *m, clt__layer *layers, int j, clt_tensor *dy, clt_tensor **dx)
{
    clt__layer *first = &layers[j];
    if (!first->seg_input) {
        clt_tensor_release(dy);
        return missing(first);
    }
    clt_tensor *out;
    int out_internal;
    mark_layers(m, "recompute", first, first + first->seg_len - 1);
    recomputing = 1;
    clt_status s = clt__seq_forward(m, first, first->seg_len, first->seg_input, first->seg_internal, &out,
                                    &out_internal);
    recomputing = 0;
    mark_layers(m, "backward", first, first + first->seg_len - 1);
    clt_tensor_release(out);
    if (s != CLT_OK) {
        clt_tensor_release(dy);
        return s;
    }
    /* The input goes with the segment's other activations, at the end. */
    return seq_backward(NULL, first, first->seg_len, dy, dx, NULL, 0);
}

/* 1 when the products of the Linear l's backward, for dy, take the dense
 * op's fused kernel (clt__dense_fuses_backward), so that a ReLU's mask
 * costs no pass of its own there. */
static int products_fuse(const clt__layer *l, const clt_tensor *dy, const fold *f)
{
    int slot, fused = 0;
    if (!f->fuse || l->kind != CLT__LINEAR || !l->saved) return 0;
    size_t rows = (size_t)clt_tensor_dim(dy, 0), in = (size_t)clt_tensor_dim(l->saved, 1);
    /* A failure here is the product's own to report. */
    if (clt__resolve(clt_tensor_device(dy), &slot) != CLT_OK ||
        clt__dense_fuses_backward(slot, rows, in, (size_t)clt_tensor_dim(dy, 1), &fused) != CLT_OK)
        return 0;
    return fused;
}

/* The kept output of the ReLU at i when the Linear at i - 1 can read its dy
 * through it (instead of the ReLU's pass), else NULL. */
static const clt_tensor *mask_above(const clt__layer *layers, int i, const clt_tensor *dy, const fold *f)
{
    if (i < 1 || layers[i].kind != CLT__RELU || !layers[i].saved) return NULL;
    return products_fuse(&layers[i - 1], dy, f) ? layers[i].saved : NULL;
}

/* The kept output of the ReLU at lin - 1 when the Linear at lin can apply
 * it to its input gradient in the product's store and the Linear at
 * lin - 2 sum its bias gradient in its weight gradient's product (instead
 * of relu_bias_backward), else NULL. */
static const clt_tensor *mask_below(const clt__layer *layers, int lin, const clt_tensor *dy, const fold *f)
{
    if (lin < 2 || layers[lin - 1].kind != CLT__RELU || !layers[lin - 1].saved || layers[lin - 2].kind != CLT__LINEAR ||
        !layers[lin - 2].db)
        return NULL;
    return products_fuse(&layers[lin], dy, f) ? layers[lin - 1].saved : NULL;
}

/* Backward of the Linear at lin with f->lin.dy_mask (the ReLU at
 * lin + 1, or none) and the ReLU below folded into its products where
 * mask_below allows; *low is the lowest layer done. */
static clt_status fused_linear_backward(clt__layer *layers, int lin, clt_tensor *dy, clt_tensor **dx, fold *f,
                                        int *low)
{
    f->lin.dx_mask = dx ? mask_below(layers, lin, dy, f) : NULL;
    if (f->lin.dy_mask) f->bias_done = 0;
    clt_status s = linear_backward(&layers[lin], dy, dx, f);
    if (f->lin.dy_mask) drop(&layers[lin + 1].saved);
    if (f->lin.dx_mask) drop(&layers[lin - 1].saved);
    *low = f->lin.dx_mask ? lin - 1 : lin;
    f->lin.dy_mask = f->lin.dx_mask = NULL;
    f->bias_done = 0;
    return s;
}

/* As clt__seq_backward with dy handed over (so that a residual block can
 * tell when it holds the only reference); base and in_place go to the first
 * layer, a float32 Linear when base is not NULL (see fold). */
static clt_status seq_backward(clt_model *m, clt__layer *layers, int n, clt_tensor *dy, clt_tensor **dx,
                               clt_tensor *base, int in_place)
{
    if (dx) *dx = NULL;
    /* Below the first layer with parameters, input gradients are only
     * worth computing when the caller asked for dx. */
    int first = n;
    for (int i = 0; i < n && first == n; i++)
        if (has_params(&layers[i])) first = i;
    fold f = {.fuse = clt__fuse_enabled(), .lin = {.in_place = in_place}};
    clt_tensor *cur = dy;
    clt_status s = CLT_OK;
    for (int i = n - 1; i >= 0 && cur;) {
        if (!dx && i < first) break;
        int seg = m && layers[i].seg_pos;
        int j = seg ? i - layers[i].seg_pos + 1 : i;
        int need = dx || j > first;
        clt__layer *l = &layers[i];
        clt_tensor *next = NULL;
        f.lin.base = i == 0 ? base : NULL;
        if (m && !seg) mark_layers(m, "backward", l, l);
        if (!seg && need && (f.lin.dy_mask = mask_above(layers, i, cur, &f))) {
            /* The ReLU's mask in the products of the Linear below it. */
            f.lin.base = i - 1 == 0 ? base : NULL;
            s = fused_linear_backward(layers, i - 1, cur, dx || i - 1 > first ? &next : NULL, &f, &j);
        } else if (!seg && need && mask_below(layers, i, cur, &f)) {
            s = fused_linear_backward(layers, i, cur, &next, &f, &j);
        } else if (seg) {
            s = segment_backward(m, layers, j, cur, need ? &next : NULL);
            cur = NULL;
        } else if (f.fuse && need && l->kind == CLT__RELU && i > 0 && is_f32_linear(&layers[i - 1]) &&
                   layers[i - 1].db) {
            s = relu_bias_backward(l, &layers[i - 1], cur, &next);
            f.bias_done = 1;
        } else {
            s = layer_backward(l, cur, need ? &next : NULL, &f);
            f.bias_done = 0;
        }
        clt_tensor_release(cur);
        cur = next;
        if (s != CLT_OK) break;
        i = j - 1;
    }
    clt__seq_drop(layers, n);
    if (s != CLT_OK || !dx) {
        clt_tensor_release(cur);
        return s;
    }
    *dx = cur;
    return CLT_OK;
}

clt_status clt__seq_backward(clt_model *m, clt__layer *layers, int n, clt_tensor *dy, clt_tensor **dx)
{
    return seq_backward(m, layers, n, clt_tensor_retain(dy), dx, NULL, 0);
}

void clt__seq_drop(clt__layer *layers, int n)
{
    for (int i = 0; i < n; i++) {
        drop(&layers[i].saved);
        drop(&layers[i].seg_input);
        if (layers[i].body) clt__seq_drop(layers[i].body, layers[i].nbody);
    }
}
