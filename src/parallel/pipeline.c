/* Model parallel: stages on different devices, activations copied forward
 * at each boundary and gradients copied back. With micro-batches, every
 * micro-batch's work is issued before any is waited on, so stage k works on
 * micro-batch i while stage k+1 works on micro-batch i-1 (GPipe's
 * schedule). A model keeps the activations of one forward only, so training
 * runs micro-batch j > 0 through a replica of each stage (parameters copied
 * from the stage at each forward, gradients added back in backward). */
#include <stdlib.h>

#include "../core/error.h"
#include "cltensor/ops.h"
#include "cltensor/parallel.h"

struct clt_pipeline {
    clt_model **stages;
    int n;
    int micro_batches;
    clt_model **replicas; /* [k * micro_batches + j], j >= 1; made at the first training forward */
    int pending_cols;     /* micro-batches of the pending training forward; 0: none */
    int64_t batch;        /* its batch size */
};

static clt_model *column(const clt_pipeline *p, int k, int j)
{
    return j == 0 ? p->stages[k] : p->replicas[k * p->micro_batches + j];
}

clt_status clt_pipeline_create(clt_pipeline **out, clt_model *const *stages, int num_stages, int micro_batches)
{
    const char *op = "clt_pipeline_create";
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (!stages || num_stages < 1 || micro_batches < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %d stages and %d micro-batches (need >= 1 of each)", op,
                         num_stages, micro_batches);
    for (int k = 0; k < num_stages; k++)
        if (!stages[k] || !clt_model_parameters(stages[k]))
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: stage %d is NULL or not initialised", op, k);
    clt_pipeline *p = calloc(1, sizeof *p);
    if (p) p->stages = malloc((size_t)num_stages * sizeof *p->stages);
    if (p && p->stages) p->replicas = calloc((size_t)num_stages * (size_t)micro_batches, sizeof *p->replicas);
    if (!p || !p->stages || !p->replicas) {
        if (p) free(p->stages);
        free(p);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    for (int k = 0; k < num_stages; k++) p->stages[k] = stages[k];
    p->n = num_stages;
    p->micro_batches = micro_batches;
    *out = p;
    return CLT_OK;
}

void clt_pipeline_free(clt_pipeline *p)
{
    if (!p) return;
    for (int i = 0; i < p->n * p->micro_batches; i++) clt_model_free(p->replicas[i]);
    free(p->replicas);
    free(p->stages);
    free(p);
}

/* x through column j of the stages, each input moved to its stage's device. */
static clt_status chain_forward(clt_pipeline *p, int j, clt_tensor *x, clt_tensor **y)
{
    clt_tensor *h = clt_tensor_retain(x);
    for (int k = 0; k < p->n; k++) {
        clt_model *m = column(p, k, j);
        clt_tensor *in = NULL, *next = NULL;
        clt_status s = clt_to(&in, h, clt_model_device(m));
        clt_tensor_release(h);
        if (s == CLT_OK) s = clt_model_forward(m, in, &next);
        clt_tensor_release(in);
        if (s != CLT_OK) return s;
        h = next;
    }
    *y = h;
    return CLT_OK;
}

/* Replicas of every stage for columns 1..cols-1, holding the stage's
 * current parameters, in training mode (called for training forwards only). */
static clt_status sync_replicas(clt_pipeline *p, int cols)
{
    for (int k = 0; k < p->n; k++)
        for (int j = 1; j < cols; j++) {
            clt_model **r = &p->replicas[k * p->micro_batches + j];
            if (!*r) CLT_TRY(clt_model_replicate(r, p->stages[k], clt_model_device(p->stages[k])));
            else CLT_TRY(clt_copy_(clt_model_parameters(*r), clt_model_parameters(p->stages[k])));
            clt_model_set_training(*r, 1);
        }
    return CLT_OK;
}

/* Micro-batch j of cols over batch rows: its first row *lo and its *len rows. */
static void rows(int64_t batch, int cols, int j, int64_t *lo, int64_t *len)
{
    *lo = batch * j / cols;
    *len = batch * (j + 1) / cols - *lo;
}

/* Micro-batches issued one after another, outputs copied into one tensor
 * on the last stage's device. */
static clt_status streamed_forward(clt_pipeline *p, clt_tensor *x, int64_t batch, int cols, int training,
                                   clt_tensor **y)
{
    if (training) CLT_TRY(sync_replicas(p, cols));
    clt_tensor *whole = NULL;
    clt_status s = CLT_OK;
    for (int j = 0; s == CLT_OK && j < cols; j++) {
        int64_t lo, len;
        rows(batch, cols, j, &lo, &len);
        clt_tensor *part = NULL, *out = NULL, *slot = NULL;
        s = clt_narrow(&part, x, lo, len);
        if (s == CLT_OK) s = chain_forward(p, training ? j : 0, part, &out);
        if (s == CLT_OK && !whole) {
            int64_t shape[CLT_MAX_DIMS];
            int nd = clt_tensor_shape(out, shape);
            shape[0] = batch;
            s = clt_empty(&whole, clt_tensor_device(out), CLT_FLOAT32, nd, shape);
        }
        if (s == CLT_OK) s = clt_narrow(&slot, whole, lo, len);
        if (s == CLT_OK) s = clt_copy_(slot, out);
        clt_tensor_release(part);
        clt_tensor_release(out);
        clt_tensor_release(slot);
    }
    if (s != CLT_OK) {
        clt_tensor_release(whole);
        return s;
    }
    *y = whole;
    return CLT_OK;
}

clt_status clt_pipeline_forward(clt_pipeline *p, clt_tensor *x, clt_tensor **y)
{
    const char *op = "clt_pipeline_forward";
    if (!y) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: y is NULL", op);
    *y = NULL;
    if (!p || !x) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    p->pending_cols = 0;
    int64_t batch = clt_tensor_ndim(x) > 0 ? clt_tensor_dim(x, 0) : 0;
    int training = 0;
    for (int k = 0; k < p->n; k++) training |= clt_model_training(p->stages[k]);
    int cols = p->micro_batches < batch ? p->micro_batches : (int)(batch > 0 ? batch : 1);
    CLT_TRY(cols == 1 ? chain_forward(p, 0, x, y) : streamed_forward(p, x, batch, cols, training, y));
    if (training) {
        p->pending_cols = cols;
        p->batch = batch;
    }
    return CLT_OK;
}

/* Gradient g0 back through column j; *dx (when dx) on the first stage's device. */
static clt_status chain_backward(clt_pipeline *p, int j, clt_tensor *g0, clt_tensor **dx)
{
    clt_tensor *g = clt_tensor_retain(g0);
    for (int k = p->n - 1; k >= 0; k--) {
        clt_model *m = column(p, k, j);
        clt_tensor *in = NULL, *prev = NULL;
        clt_status s = clt_to(&in, g, clt_model_device(m));
        clt_tensor_release(g);
        if (s == CLT_OK && j > 0) s = clt_model_zero_grad(m);
        if (s == CLT_OK) s = clt_model_backward(m, in, (k > 0 || dx) ? &prev : NULL);
        clt_tensor_release(in);
        if (s != CLT_OK) return s;
        g = prev;
    }
    if (dx) *dx = g;
    else clt_tensor_release(g);
    return CLT_OK;
}

clt_status clt_pipeline_backward(clt_pipeline *p, clt_tensor *dy, clt_tensor **dx)
{
    const char *op = "clt_pipeline_backward";
    if (dx) *dx = NULL;
    if (!p || !dy) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
    int cols = p->pending_cols;
    if (cols == 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: no training forward is pending (once per backward)", op);
    p->pending_cols = 0;
    if (cols == 1) return chain_backward(p, 0, dy, dx);
    if (clt_tensor_ndim(dy) < 1 || clt_tensor_dim(dy, 0) != p->batch)
        return clt__fail(CLT_ERR_SHAPE, "%s: dy has %lld rows, the forward's output %lld", op,
                         (long long)(clt_tensor_ndim(dy) ? clt_tensor_dim(dy, 0) : 0), (long long)p->batch);
    /* dy already holds each row's share of the batch loss: its rows split as they are. */
    clt_tensor *whole = NULL;
    clt_status s = CLT_OK;
    for (int j = 0; s == CLT_OK && j < cols; j++) {
        int64_t lo, len;
        rows(p->batch, cols, j, &lo, &len);
        clt_tensor *part = NULL, *d = NULL, *slot = NULL;
        s = clt_narrow(&part, dy, lo, len);
        if (s == CLT_OK) s = chain_backward(p, j, part, dx ? &d : NULL);
        if (s == CLT_OK && dx && !whole) {
            int64_t shape[CLT_MAX_DIMS];
            int nd = clt_tensor_shape(d, shape);
            shape[0] = p->batch;
            s = clt_empty(&whole, clt_tensor_device(d), CLT_FLOAT32, nd, shape);
        }
        if (s == CLT_OK && dx) s = clt_narrow(&slot, whole, lo, len);
        if (s == CLT_OK && dx) s = clt_copy_(slot, d);
        clt_tensor_release(part);
        clt_tensor_release(d);
        clt_tensor_release(slot);
    }
    for (int k = 0; s == CLT_OK && k < p->n; k++)
        for (int j = 1; s == CLT_OK && j < cols; j++) {
            clt_tensor *g = clt_model_gradients(column(p, k, j));
            if (g) s = clt_add_(clt_model_gradients(p->stages[k]), g);
        }
    if (s != CLT_OK) {
        clt_tensor_release(whole);
        return s;
    }
    if (dx) *dx = whole;
    return CLT_OK;
}
