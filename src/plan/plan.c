/* The memory planner: replays the model's creation and two training steps
 * on counted stand-ins for tensors, mirroring what src/nn/layers.c allocates, keeps and frees, in the
 * same order, so that the predicted peak is the allocator's. Keep the two in
 * step when a layer changes; a float16 step also mirrors the float16 forms of
 * the ops (src/ops/half.c), the model's conversions (src/nn/model.c) and the
 * optimizer's mixed-precision step (src/optim/optim.c). The stand-ins also
 * take blocks from the allocator's own placement policy (src/memory/book.c),
 * which gives its reserved memory and what fits under a cap. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../device/device_internal.h"
#include "../memory/allocator.h"
#include "../memory/book.h"
#include "../ops/ops_internal.h"
#include "../ops/tune.h"
#include "cltensor/memory.h"
#include "cltensor/plan.h"
#include "../nn/nn_internal.h"

/* The CPU GEMM kernels pack a transposed B, and a B as is (16 or more deep)
 * whose rows are a multiple of 2 KiB apart or whose panels are too deep for
 * L2 at their rows' stride, into panels of the tile's TN
 * columns for the call, an A (16 or more deep) whose rows are a multiple of
 * 4 KiB apart, or transposed and read by two or more column panels, into
 * panels of TM rows, and in blocked products A and B a block of depths at a
 * time (clt__cpu_gemm_pack_a_bytes, _b_bytes). The replay counts the
 * device's default tile (clt__cpu_tile_default, sim.tile), which is the
 * untuned products' own wherever they pack: a product's default has fewer
 * rows only where A is not packed (clt__gemm_tile_default), and the same TN,
 * so the same panels of B and the same blocks of depths. A tuned tile (`clt
 * tune`) can differ: its TN changes the panels of B by less than one tile
 * but can decide whether a transposed A is packed at all, and a blocked
 * product's blocks of depths and whether it blocks follow it too. */

typedef struct sim_layer {
    int saved, seg_input, seg_internal, seg_pos, seg_len, nbody;
    struct sim_layer *body;
} sim_layer;

/* The replay: tensors by id, their live bytes as the allocator counts them,
 * and their blocks in a counting book of the allocator's own policy, so
 * that reserved memory and the cap are replayed too. */
typedef struct sim {
    int64_t *bytes;
    int *refs;
    unsigned char *act;
    clt__block **blocks;
    int n, cap;
    int64_t live, act_live, peak, peak_act, act_at_peak;
    int64_t grad_live, grad_at_peak; /* float32 gradients made during the step */
    int64_t rows;
    int cpu, training, recompute_blocks, fuse, half, oom;
    clt__gemm_tile tile; /* the device's default GEMM tile */
    clt__book book;
    clt_memory_stats mem;
    int over; /* a request found no room under the cap */
} sim;

static void note(sim *s)
{
    if (s->live > s->peak) {
        s->peak = s->live;
        s->act_at_peak = s->act_live;
        s->grad_at_peak = s->grad_live;
    }
    if (s->act_live > s->peak_act) s->peak_act = s->act_live;
}

/* A block from the book; NULL once the cap has been passed. */
static clt__block *b_take(sim *s, int64_t bytes)
{
    clt__block *b = NULL;
    if (s->over || s->oom) return NULL;
    clt_status st = clt__book_take(&s->book, (size_t)bytes, &b);
    if (st == CLT_ERR_OUT_OF_MEMORY && s->mem.cap) s->over = 1;
    else if (st != CLT_OK) s->oom = 1;
    return b;
}

static void b_give(sim *s, clt__block *b)
{
    if (b) clt__book_give(&s->book, b);
}

static int t_new(sim *s, int64_t bytes)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        int64_t *b = realloc(s->bytes, (size_t)cap * sizeof *b);
        if (b) s->bytes = b;
        int *r = b ? realloc(s->refs, (size_t)cap * sizeof *r) : NULL;
        if (r) s->refs = r;
        clt__block **k = r ? realloc(s->blocks, (size_t)cap * sizeof *k) : NULL;
        if (k) s->blocks = k;
        unsigned char *a = k ? realloc(s->act, (size_t)cap) : NULL;
        if (!a) {
            s->oom = 1;
            return -1;
        }
        s->act = a;
        s->cap = cap;
    }
    int id = s->n++;
    s->bytes[id] = bytes;
    s->refs[id] = 1;
    s->act[id] = 0;
    s->blocks[id] = b_take(s, bytes);
    s->live += bytes;
    note(s);
    return id;
}

static int t_retain(sim *s, int id)
{
    if (id >= 0) s->refs[id]++;
    return id;
}

static void t_release(sim *s, int id)
{
    if (id < 0 || --s->refs[id] > 0) return;
    s->live -= s->bytes[id];
    b_give(s, s->blocks[id]);
    s->blocks[id] = NULL;
    if (s->act[id]) s->act_live -= s->bytes[id];
}

static void t_tag(sim *s, int id)
{
    if (id < 0 || s->act[id]) return;
    s->act[id] = 1;
    s->act_live += s->bytes[id];
    note(s);
}

/* Scratch alive for one call only: a, then b (0: none) beside it. */
static void t_transient2(sim *s, int64_t a, int64_t b)
{
    clt__block *ba = a ? b_take(s, a) : NULL, *bb = b ? b_take(s, b) : NULL;
    s->live += a + b;
    note(s);
    s->live -= a + b;
    b_give(s, ba);
    b_give(s, bb);
}

static void t_transient(sim *s, int64_t bytes) { t_transient2(s, bytes, 0); }

static int64_t t_bytes(const sim *s, int id) { return id < 0 ? 0 : s->bytes[id]; }

/* As drop() and keep() in layers.c. */
static void drop(sim *s, int *slot)
{
    int t = *slot;
    if (t < 0) return;
    *slot = -1;
    if (s->refs[t] > 1 && s->act[t]) {
        s->act[t] = 0;
        s->act_live -= s->bytes[t];
    }
    t_release(s, t);
}

static void keep(sim *s, int *slot, int t, int internal)
{
    t_retain(s, t);
    drop(s, slot);
    *slot = t;
    if (internal) t_tag(s, t);
}

static void seq_drop(sim *s, sim_layer *sl, int n)
{
    for (int i = 0; i < n; i++) {
        drop(s, &sl[i].saved);
        drop(s, &sl[i].seg_input);
        if (sl[i].body) seq_drop(s, sl[i].body, sl[i].nbody);
    }
}

static int seq_forward(sim *s, const clt__layer *l, sim_layer *sl, int n, int x, int internal, int *y_internal);

/* A Linear's product (also a fused Linear + ReLU's): y, and on CPU devices
 * the panels of x (maybe) and of w^T for the call, in that order. A float16
 * layer (clt__linear_forward_f16) reads its float16 operands directly on CPU
 * devices, packing w^T into float32 panels but never x; elsewhere it widens
 * x, w and b to float32 first, frees them after the product and narrows y. */
static int linear_product(sim *s, const clt__layer *l)
{
    size_t rows = (size_t)s->rows, out = (size_t)l->out, in = (size_t)l->in;
    int64_t panels = clt__cpu_gemm_pack_b_bytes(1, rows, out, in, in, s->tile);
    if (s->half && s->cpu) {
        /* Float16 products are never blocked: w^T is packed whole. */
        int y = t_new(s, s->rows * l->out * 2);
        int64_t tn = s->tile.tn;
        t_transient(s, (l->out + tn - 1) / tn * tn * l->in * 4);
        return y;
    }
    int x32 = -1, w32 = -1, b32 = -1;
    if (s->half) {
        x32 = t_new(s, s->rows * l->in * 4);
        w32 = t_new(s, l->out * l->in * 4);
        b32 = t_new(s, l->out * 4);
    }
    int y = t_new(s, s->rows * l->out * 4);
    if (s->cpu) t_transient2(s, clt__cpu_gemm_pack_a_bytes(0, rows, out, in, in, s->tile), panels);
    if (!s->half) return y;
    t_release(s, x32);
    t_release(s, w32);
    t_release(s, b32);
    int yh = t_new(s, s->rows * l->out * 2);
    t_release(s, y);
    return yh;
}

/* The panels of dy (and, in blocked products, of x or w) a Linear's
 * backward products pack on CPU devices: for dw = dy^T x, then for dx = dy w
 * when dx is wanted, one product at a time. */
static void linear_backward_packs(sim *s, const clt__layer *l, int want_dx)
{
    if (!s->cpu) return;
    size_t rows = (size_t)s->rows, out = (size_t)l->out, in = (size_t)l->in;
    t_transient2(s, clt__cpu_gemm_pack_a_bytes(1, out, in, rows, out, s->tile),
                 clt__cpu_gemm_pack_b_bytes(0, out, in, rows, in, s->tile));
    if (want_dx)
        t_transient2(s, clt__cpu_gemm_pack_a_bytes(0, rows, in, out, out, s->tile),
                     clt__cpu_gemm_pack_b_bytes(0, rows, in, out, in, s->tile));
}

/* A float16 Linear's backward (clt__linear_backward_f16): on CPU devices
 * only the float16 dx (dw and db accumulate in place, nothing is packed);
 * elsewhere float32 copies of dy, x and w, fresh float32 sums for dw and db,
 * the float32 product's dx, then dx narrowed once the rest is freed. */
static int linear_backward_half(sim *s, const clt__layer *l, int want_dx)
{
    if (s->cpu) return want_dx ? t_new(s, s->rows * l->in * 2) : -1;
    int64_t rows = s->rows, bytes[5] = {rows * l->out * 4, rows * l->in * 4, l->out * l->in * 4, l->out * l->in * 4,
                                        l->out * 4};
    int tmp[5];
    for (int i = 0; i < 5; i++) tmp[i] = t_new(s, bytes[i]);
    int dx32 = want_dx ? t_new(s, rows * l->in * 4) : -1;
    linear_backward_packs(s, l, want_dx);
    for (int i = 0; i < 5; i++) t_release(s, tmp[i]);
    if (!want_dx) return -1;
    int dx = t_new(s, rows * l->in * 2);
    t_release(s, dx32);
    return dx;
}

static int layer_forward(sim *s, const clt__layer *l, sim_layer *sl, int x, int internal, int *y_internal)
{
    *y_internal = 1;
    int y = -1;
    switch (l->kind) {
    case CLT__LINEAR:
        y = linear_product(s, l);
        if (s->training) keep(s, &sl->saved, x, internal);
        break;
    case CLT__RELU:
        y = t_new(s, t_bytes(s, x));
        if (s->training) keep(s, &sl->saved, y, 1);
        break;
    case CLT__FLATTEN:
        *y_internal = internal;
        y = t_retain(s, x);
        break;
    case CLT__RESIDUAL: {
        int hi;
        int h = seq_forward(s, l->body, sl->body, l->nbody, x, internal, &hi);
        y = t_new(s, t_bytes(s, x));
        t_release(s, h);
        break;
    }
    }
    return y;
}

static int seq_forward(sim *s, const clt__layer *l, sim_layer *sl, int n, int x, int internal, int *y_internal)
{
    int cur = t_retain(s, x), ci = internal;
    for (int i = 0; i < n; i++) {
        int ni = 1, next;
        if (s->fuse && i + 1 < n && l[i].kind == CLT__LINEAR && l[i + 1].kind == CLT__RELU) {
            next = linear_product(s, &l[i]);
            if (s->training) {
                keep(s, &sl[i].saved, cur, ci);
                keep(s, &sl[i + 1].saved, next, 1);
            }
            i++;
        } else {
            next = layer_forward(s, &l[i], &sl[i], cur, ci, &ni);
        }
        t_release(s, cur);
        cur = next;
        ci = ni;
    }
    *y_internal = ci;
    return cur;
}

/* As clt__model_run_forward. */
static int model_forward(sim *s, const clt_model *m, sim_layer *sl, int x)
{
    const clt__layer *l = m->layers;
    int n = m->nlayers;
    for (int i = 0; i < n; i++) sl[i].seg_pos = sl[i].seg_len = 0;
    int cur = t_retain(s, x), ci = 0, size = 0, recompute = s->training && s->recompute_blocks != 0;
    for (int i = 0; i < n;) {
        int len = 1;
        if (recompute && l[i].kind == CLT__RESIDUAL) {
            int run = 0;
            while (i + run < n && l[i + run].kind == CLT__RESIDUAL) run++;
            if (i == 0 || l[i - 1].kind != CLT__RESIDUAL) size = clt__segment_size(s->recompute_blocks, run);
            len = size < run ? size : run;
            for (int k = 0; k < len; k++) sl[i + k].seg_pos = k + 1;
            sl[i].seg_len = len;
            sl[i].seg_internal = ci;
            keep(s, &sl[i].seg_input, cur, ci);
        } else {
            while (i + len < n && !(recompute && l[i + len].kind == CLT__RESIDUAL)) len++;
        }
        int training = s->training, ni;
        if (sl[i].seg_len) s->training = 0;
        int next = seq_forward(s, &l[i], &sl[i], len, cur, ci, &ni);
        s->training = training;
        t_release(s, cur);
        cur = next;
        ci = ni;
        i += len;
    }
    return cur;
}

/* As seq_backward in layers.c: dy is handed over; base (-1: none) is what
 * the first layer, a Linear, adds its input gradient to, in place or not. */
static int seq_backward(sim *s, const clt__layer *l, sim_layer *sl, int n, int top, int dy, int want_dx, int base,
                        int in_place);

static int layer_backward(sim *s, const clt__layer *l, sim_layer *sl, int dy, int want, int base, int in_place)
{
    int dx = -1;
    switch (l->kind) {
    case CLT__LINEAR:
        if (s->half) {
            dx = linear_backward_half(s, l, want);
        } else {
            if (want) dx = base >= 0 && in_place ? t_retain(s, base) : t_new(s, s->rows * l->in * 4);
            linear_backward_packs(s, l, want);
        }
        drop(s, &sl->saved);
        break;
    case CLT__RELU:
        if (want) dx = t_new(s, t_bytes(s, dy));
        drop(s, &sl->saved);
        break;
    case CLT__FLATTEN:
        if (want) dx = t_retain(s, dy);
        break;
    case CLT__RESIDUAL:
        if (!want) {
            seq_backward(s, l->body, sl->body, l->nbody, 0, t_retain(s, dy), 0, -1, 0);
        } else if (s->fuse) {
            dx = seq_backward(s, l->body, sl->body, l->nbody, 0, t_retain(s, dy), 1, dy, s->refs[dy] == 1);
        } else {
            int dh = seq_backward(s, l->body, sl->body, l->nbody, 0, t_retain(s, dy), 1, -1, 0);
            dx = t_new(s, t_bytes(s, dy));
            t_release(s, dh);
        }
        break;
    }
    return dx;
}

static int has_params(const clt__layer *l) { return l->kind == CLT__LINEAR || l->kind == CLT__RESIDUAL; }

static int seq_backward(sim *s, const clt__layer *l, sim_layer *sl, int n, int top, int dy, int want_dx, int base,
                        int in_place)
{
    int first = n;
    for (int i = 0; i < n && first == n; i++)
        if (has_params(&l[i])) first = i;
    int cur = dy;
    for (int i = n - 1; i >= 0 && cur >= 0;) {
        if (!want_dx && i < first) break;
        int seg = top && sl[i].seg_pos;
        int j = seg ? i - sl[i].seg_pos + 1 : i;
        int need = want_dx || j > first;
        int next;
        if (seg) {
            int oi;
            int out = seq_forward(s, &l[j], &sl[j], sl[j].seg_len, sl[j].seg_input, sl[j].seg_internal, &oi);
            t_release(s, out);
            next = seq_backward(s, &l[j], &sl[j], sl[j].seg_len, 0, cur, need, -1, 0);
            cur = -1;
        } else {
            next = layer_backward(s, &l[i], &sl[i], cur, need, i == 0 ? base : -1, in_place);
        }
        t_release(s, cur);
        cur = next;
        i = j - 1;
    }
    seq_drop(s, sl, n);
    if (!want_dx) {
        t_release(s, cur);
        return -1;
    }
    return cur;
}

static void sim_layers_free(sim_layer *sl, int n)
{
    for (int i = 0; sl && i < n; i++) sim_layers_free(sl[i].body, sl[i].nbody);
    free(sl);
}

static sim_layer *sim_layers_new(const clt__layer *l, int n)
{
    sim_layer *sl = calloc((size_t)n + 1, sizeof *sl);
    if (!sl) return NULL;
    for (int i = 0; i < n; i++) {
        sl[i].saved = sl[i].seg_input = -1;
        sl[i].nbody = l[i].nbody;
        if (l[i].body && !(sl[i].body = sim_layers_new(l[i].body, l[i].nbody))) {
            sim_layers_free(sl, i);
            return NULL;
        }
    }
    return sl;
}

/* What the replay needs of the device: whether it runs the CPU kernels and
 * with which default tile, and its largest buffer (a segment never rounds up
 * past it). */
typedef struct plan_device {
    int cpu;
    clt__gemm_tile tile;
    size_t max_alloc;
} plan_device;

static clt_status device_of(clt_device dev, plan_device *d)
{
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    d->max_alloc = clt__slot_get(slot)->max_alloc;
    d->tile = clt__cpu_tile_default(slot);
    return clt__dense_cpu(slot, &d->cpu);
}

clt_plan_options clt_plan_default_options(void)
{
    clt_plan_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = 256;
    o.optimizer = CLT_OPTIMIZER_SGD;
    o.dtype = CLT_FLOAT32;
    o.device = clt_try_gpu(0);
    return o;
}

static const clt__layer *first_linear(const clt__layer *l, int n)
{
    for (int i = 0; i < n; i++) {
        if (l[i].kind == CLT__LINEAR) return &l[i];
        if (l[i].body) return first_linear(l[i].body, l[i].nbody);
    }
    return NULL;
}

/* Examples in micro-batch k of `micro` over a batch of `batch`: the first
 * batch % micro get one more (clt__micro_rows, src/trainer/step.c, splits so). */
static int64_t micro_rows(int64_t batch, int micro, int k)
{
    return batch / micro + (k < batch % micro ? 1 : 0);
}

/* One micro-batch's forward, loss and backward; *out gets its logits, loss
 * and dlogits (-1 each once released). */
static void replay_pass(sim *s, const clt_model *m, sim_layer *sl, const clt__layer *fl, int x, int make_grads,
                        int out[3])
{
    int64_t n = m->nparams;
    /* A float16 model converts x on the way in (an activation) and its
     * output on the way out, for a float32 loss (clt_model_forward). */
    int in = x;
    if (s->half) {
        in = t_new(s, s->rows * fl->in * 2);
        t_tag(s, in);
    }
    int logits = model_forward(s, m, sl, in);
    if (s->half) {
        t_release(s, in);
        int wide = t_new(s, s->rows * m->features * 4);
        t_release(s, logits);
        logits = wide;
    }
    int loss = t_new(s, 4), per_row = t_new(s, s->rows * 4), dlogits = t_new(s, s->rows * m->features * 4);
    t_transient(s, (int64_t)clt__sum_parts(s->rows) * 4); /* the loss's partial sums */
    t_release(s, per_row);
    t_tag(s, dlogits);
    if (make_grads) t_new(s, (s->half ? 2 : 4) * n);
    /* Backward of a float16 model starts from dlogits scaled into float16. */
    int dy = s->half ? t_new(s, s->rows * m->features * 2) : dlogits;
    seq_backward(s, m->layers, sl, m->nlayers, 1, t_retain(s, dy), 0, -1, 0);
    if (s->half) t_release(s, dy);
    out[0] = logits;
    out[1] = loss;
    out[2] = dlogits;
}

/* The trainer's step on a batch (float32 x) already on the device, in
 * `micro` micro-batches (row views of it) whose tensors go after each
 * backward, or as one pass whose tensors go after the optimizer; the first
 * step creates the gradients (at backward) and the optimizer state (at its
 * step), as clt_model_backward and clt_optimizer_step do. */
static void replay_step(sim *s, const clt_model *m, sim_layer *sl, const clt__layer *fl, int first, int nbuf,
                        int64_t batch, int micro)
{
    int64_t n = m->nparams;
    s->rows = batch;
    int x = t_new(s, batch * fl->in * 4), labels = t_new(s, batch * 4), kept[3] = {-1, -1, -1};
    for (int k = 0; k < micro; k++) {
        s->rows = micro_rows(batch, micro, k);
        if (s->rows == 0) break;
        replay_pass(s, m, sl, fl, x, first && k == 0, kept);
        if (micro == 1) break;
        for (int i = 0; i < 3; i++) t_release(s, kept[i]);
        kept[0] = kept[1] = kept[2] = -1;
    }
    for (int i = 0; first && i < nbuf + s->half; i++) t_new(s, 4 * n); /* state, then master weights */
    if (s->half) {
        /* The optimizer's step: the gradients widened and unscaled into
         * float32 scratch (a gradient) and the int32 overflow flag. */
        s->grad_live = 4 * n;
        int g = t_new(s, 4 * n), flag = t_new(s, 4);
        t_release(s, flag);
        t_release(s, g);
        s->grad_live = 0;
    }
    /* In the order of the trainer's step_release. */
    t_release(s, x);
    t_release(s, labels);
    for (int i = 0; i < 3; i++) t_release(s, kept[i]);
}

/* Layers (nested ones too) and their widest Linear side. */
static void extent(const clt__layer *l, int n, int64_t *layers, int64_t *widest)
{
    for (int i = 0; i < n; i++) {
        (*layers)++;
        if (l[i].kind == CLT__LINEAR && l[i].in > *widest) *widest = l[i].in;
        if (l[i].kind == CLT__LINEAR && l[i].out > *widest) *widest = l[i].out;
        if (l[i].body) extent(l[i].body, l[i].nbody, layers, widest);
    }
}

/* 0 when no byte count of a step at this batch can overflow: each layer's
 * replay holds a few tensors of (rows, width) float32 values, the step a
 * few of the parameters' size. Bounded generously (64 bytes per row, width
 * plus the widest tile's 32 columns, and layer; 32 per parameter) and
 * checked, so that no sum below wraps. */
static int step_bound(const clt_model *m, int64_t rows)
{
    int64_t layers = 4, widest = m->features > 1 ? m->features : 1, rows1, per_row, all, params;
    extent(m->layers, m->nlayers, &layers, &widest);
    return clt__add_i64(rows, 1, &rows1) != 0 || clt__mul_i64(rows1, widest + 32, &per_row) != 0 || clt__mul_i64(per_row, layers, &all) != 0 ||
           clt__mul_i64(all, 64, &all) != 0 || clt__mul_i64(m->nparams + 32 * (widest + 1), 32, &params) != 0 ||
           clt__add_i64(all, params, &all) != 0;
}

/* Replays the model's creation and two training steps, the second the
 * steady state the allocated peak is of; cap (0: none) bounds reserved
 * memory as clt_memory_set_cap does, and *fits says whether every request
 * found room under it. */
static clt_status plan_with(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t cap,
                            clt_plan *p, int *fits)
{
    const char *op = "clt_plan_step";
    memset(p, 0, sizeof *p);
    const clt__layer *fl = first_linear(m->layers, m->nlayers);
    if (!m->initialised || !fl || m->features < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the model must be initialised and have a Linear", op);
    if (o->batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch size %lld (must be >= 1)", op, (long long)o->batch_size);
    if (step_bound(m, o->batch_size))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch size %lld is too large to plan: a step's byte counts "
                         "for this model would overflow an int64_t", op, (long long)o->batch_size);
    if (o->recompute_blocks < 0 && o->recompute_blocks != CLT_RECOMPUTE_AUTO)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: segment size %d", op, o->recompute_blocks);
    if (o->accumulate < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: accumulate %d (micro-batches per step; 0 or 1: none)", op,
                         o->accumulate);
    if (o->dtype != CLT_FLOAT32 && o->dtype != CLT_FLOAT16)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: a model is float32 or float16, not %s", op,
                         clt_dtype_name(o->dtype));
    int half = o->dtype == CLT_FLOAT16;
    int64_t n = m->nparams, es = half ? 2 : 4;
    int nbuf = o->optimizer == CLT_OPTIMIZER_ADAM ? 2 : o->momentum > 0 ? 1 : 0;
    p->weights = es * n;
    /* Optimizer state is float32 whatever the model's dtype; a float16
     * model's optimizer also keeps float32 master weights. */
    p->optimizer = 4 * n * (nbuf + half);
    p->input_features = fl->in;
    p->batch = o->batch_size * (fl->in + 1) * 4;
    /* Fused epilogues are float32 only: a float16 model runs unfused. */
    sim s = {.rows = o->batch_size,
             .cpu = d->cpu,
             .tile = d->tile,
             .training = 1,
             .recompute_blocks = o->recompute_blocks,
             .fuse = !half && clt__fuse_enabled(),
             .half = half,
             .mem = {.cap = cap}};
    clt__book_init(&s.book, (clt__book_ops){0}, d->max_alloc, clt__alloc_exact(), &s.mem);
    sim_layer *sl = sim_layers_new(m->layers, m->nlayers);
    if (!sl) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    /* The weights at the model's creation, float32 until clt_model_to_dtype. */
    int w = t_new(&s, 4 * n);
    if (half) {
        t_new(&s, 2 * n);
        t_release(&s, w);
    }
    int micro = o->accumulate > 1 ? o->accumulate : 1;
    replay_step(&s, m, sl, fl, 1, nbuf, o->batch_size, micro);
    s.peak = s.live;
    s.peak_act = s.act_at_peak = s.act_live;
    s.grad_at_peak = 0;
    replay_step(&s, m, sl, fl, 0, nbuf, o->batch_size, micro);
    for (int i = 0; i < m->nlayers; i++)
        if (sl[i].seg_len && sl[i].seg_len > p->recompute_blocks) p->recompute_blocks = sl[i].seg_len;
    sim_layers_free(sl, m->nlayers);
    clt__book_clear(&s.book);
    free(s.bytes);
    free(s.refs);
    free(s.blocks);
    free(s.act);
    if (s.oom) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    p->gradients = es * n + s.grad_at_peak;
    p->activations = s.act_at_peak;
    p->peak_activations = s.peak_act;
    p->peak = s.peak;
    p->temporaries = p->peak - p->weights - p->gradients - p->optimizer - p->batch - p->activations;
    p->reserved = s.mem.peak_reserved;
    if (fits) *fits = !s.over;
    return CLT_OK;
}

clt_status clt_plan_step(const clt_model *m, const clt_plan_options *o, clt_plan *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_step: NULL argument");
    plan_device d;
    CLT_TRY(device_of(o->device, &d));
    return plan_with(m, o, &d, 0, out, NULL);
}

/* A batch fits when the replay under the budget as a cap never runs out. */
static clt_status max_batch(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t budget,
                            int64_t hi, int64_t *batch)
{
    clt_plan_options q = *o;
    clt_plan p;
    int64_t lo = 0; /* the largest known to fit */
    /* Batches too large to plan (step_bound) do not fit any budget. */
    while (hi > 0 && step_bound(m, hi)) hi /= 2;
    while (lo < hi) {
        q.batch_size = lo + (hi - lo + 1) / 2;
        int fits;
        CLT_TRY(plan_with(m, &q, d, budget, &p, &fits));
        if (fits) lo = q.batch_size;
        else hi = q.batch_size - 1;
    }
    *batch = lo;
    return CLT_OK;
}

clt_status clt_plan_max_batch(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch_size,
                              int64_t *batch)
{
    if (!m || !o || !batch) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_max_batch: NULL argument");
    *batch = 0;
    if (max_batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_max_batch: max_batch %lld", (long long)max_batch_size);
    if (budget <= 0) return CLT_OK;
    plan_device d;
    CLT_TRY(device_of(o->device, &d));
    return max_batch(m, o, &d, budget, max_batch_size, batch);
}

#define MIB (1024.0 * 1024.0)

/* The micro-batch counts clt_plan_fit tries, in order: 1 to 64, then
 * doubling, then the batch size itself (micro-batches of one example), none
 * past the batch size or 2^30; 0 after the last. */
static int next_micro(int n, int64_t batch)
{
    int64_t cap = batch < (1 << 30) ? batch : (1 << 30);
    int64_t next = n < 64 ? n + 1 : 2 * (int64_t)n;
    if (next > cap) next = n < cap ? cap : 0;
    return (int)next;
}

/* The segment size with the lowest predicted peak that fits (0: none). */
static clt_status best_segments(const clt_model *m, clt_plan_options *q, const plan_device *d, int64_t limit,
                                clt_plan *best)
{
    int blocks = clt_model_num_blocks(m), found = 0;
    for (int seg = 1; seg <= blocks; seg++) {
        clt_plan p;
        int fits;
        q->recompute_blocks = seg;
        CLT_TRY(plan_with(m, q, d, limit, &p, &fits));
        if (fits && (!found || p.peak < best->peak)) {
            *best = p;
            found = seg;
        }
    }
    q->recompute_blocks = found;
    return CLT_OK;
}

/* The first configuration of one dtype that fits, in clt_plan_fit's order. */
static clt_status fit_dtype(const clt_model *m, clt_plan_options q, const plan_device *d, int64_t limit,
                            clt_plan_fit_result *out, int *found)
{
    *found = 0;
    for (int n = 1; n; n = next_micro(n, q.batch_size)) {
        q.accumulate = n;
        q.recompute_blocks = 0;
        int fits;
        CLT_TRY(plan_with(m, &q, d, limit, &out->plan, &fits));
        if (!fits) CLT_TRY(best_segments(m, &q, d, limit, &out->plan));
        if (fits || q.recompute_blocks) {
            out->accumulate = n;
            out->recompute_blocks = q.recompute_blocks;
            out->dtype = q.dtype;
            *found = 1;
            return CLT_OK;
        }
    }
    return CLT_OK;
}

clt_status clt_plan_fit(const clt_model *m, const clt_plan_options *o, int64_t budget, int allow_fp16,
                        clt_plan_fit_result *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_fit: NULL argument");
    memset(out, 0, sizeof *out);
    if (budget <= 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_fit: budget %lld", (long long)budget);
    plan_device d;
    CLT_TRY(device_of(o->device, &d));
    out->budget = budget;
    out->margin = 2 * 1024 * 1024 + budget / 32;
    int64_t limit = budget - out->margin;
    int found = 0;
    clt_plan_options q = *o;
    if (limit > 0) CLT_TRY(fit_dtype(m, q, &d, limit, out, &found));
    if (!found && allow_fp16 && o->dtype != CLT_FLOAT16 && limit > 0) {
        q.dtype = CLT_FLOAT16;
        CLT_TRY(fit_dtype(m, q, &d, limit, out, &found));
    }
    if (found) return CLT_OK;
    clt_plan p;
    q = *o;
    q.accumulate = q.recompute_blocks = 0;
    CLT_TRY(plan_with(m, &q, &d, 0, &p, NULL));
    char dev[32] = "";
    clt_device_name(o->device, dev, sizeof dev);
    return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                     "no configuration of a %s%s step at batch %lld fits %.1f MiB on %s (less a margin of %.1f MiB): "
                     "the %s weights, gradients and optimizer state alone need %.1f MiB and the batch %.1f MiB, "
                     "beside the allocator's segments; use a smaller model or batch%s, or a larger device",
                     clt_dtype_name(o->dtype), allow_fp16 && o->dtype != CLT_FLOAT16 ? " or float16" : "",
                     (long long)o->batch_size, budget / MIB, dev, out->margin / MIB,
                     clt_dtype_name(o->dtype), (p.weights + p.gradients + p.optimizer) / MIB, p.batch / MIB,
                     allow_fp16 || o->dtype == CLT_FLOAT16 ? "" : ", or allow float16 (--fit=any)");
}

/* The allocated peak at batch b of o with segment size seg (0: off). */
static clt_status peak_at(const clt_model *m, const clt_plan_options *o, const plan_device *d, int seg, int64_t b,
                          int64_t *peak)
{
    clt_plan_options q = *o;
    q.batch_size = b;
    q.recompute_blocks = seg;
    clt_plan p;
    CLT_TRY(plan_with(m, &q, d, 0, &p, NULL));
    *peak = p.peak;
    return CLT_OK;
}

/* Exercise 2's "why": what a step holds per example with and without
 * checkpointing (the slope of the allocated peak from batch 1 to the
 * largest that fits) beside what does not grow with the batch. */
static clt_status why_further(const clt_model *m, const clt_plan_options *o, const plan_device *d, int64_t b_plain,
                              int64_t b_recompute, FILE *out)
{
    int seg = o->recompute_blocks ? o->recompute_blocks : CLT_RECOMPUTE_AUTO;
    int64_t p1, pb, c1, cb;
    CLT_TRY(peak_at(m, o, d, 0, 1, &p1));
    CLT_TRY(peak_at(m, o, d, 0, b_plain + 1, &pb));
    CLT_TRY(peak_at(m, o, d, seg, 1, &c1));
    CLT_TRY(peak_at(m, o, d, seg, b_recompute + 1, &cb));
    double per_plain = (double)(pb - p1) / (double)b_plain, per_recompute = (double)(cb - c1) / (double)b_recompute;
    fprintf(out, "checkpointing goes %.2fx as far: per example a step holds %.1f KiB without checkpointing, %.1f KiB "
                 "with (%.2fx less); %.1f MiB does not grow with the batch\n",
            (double)b_recompute / (double)b_plain, per_plain / 1024, per_recompute / 1024, per_plain / per_recompute,
            (double)(p1 - (int64_t)per_plain) / MIB);
    return CLT_OK;
}

clt_status clt_plan_report(const clt_model *m, const clt_plan_options *o, int64_t budget, int64_t max_batch_size,
                           FILE *out)
{
    if (!m || !o || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_report: NULL argument");
    plan_device d;
    CLT_TRY(device_of(o->device, &d));
    clt_plan p;
    CLT_TRY(plan_with(m, o, &d, 0, &p, NULL));
    char dev[32];
    CLT_TRY(clt_device_name(o->device, dev, sizeof dev));
    int half = o->dtype == CLT_FLOAT16;
    char micro[48] = "";
    if (o->accumulate > 1) snprintf(micro, sizeof micro, " in %d micro-batches", o->accumulate);
    fprintf(out, "predicted peak of one %s training step at batch %lld%s on %s%s:\n",
            half ? "float16 (mixed-precision)" : "float32", (long long)o->batch_size, micro, dev,
            p.recompute_blocks ? "" : ", no checkpointing");
    if (p.recompute_blocks)
        fprintf(out, "  (activation checkpointing: segments of %d block%s%s)\n", p.recompute_blocks,
                p.recompute_blocks == 1 ? "" : "s",
                o->recompute_blocks == CLT_RECOMPUTE_AUTO ? ", chosen by auto as about sqrt(blocks)" : "");
    fprintf(out, "  weights      %10.1f MiB\n  gradients    %10.1f MiB\n  optimizer    %10.1f MiB\n", p.weights / MIB,
            p.gradients / MIB, p.optimizer / MIB);
    fprintf(out, "  batch        %10.1f MiB\n  activations  %10.1f MiB (peak %.1f MiB)\n  temporaries  %10.1f MiB\n",
            p.batch / MIB, p.activations / MIB, p.peak_activations / MIB, p.temporaries / MIB);
    fprintf(out, "  total        %10.1f MiB\n", p.peak / MIB);
    if (budget <= 0) {
        fprintf(out, "  reserved     %10.1f MiB (the allocator's segments, from the model's creation on)\n",
                p.reserved / MIB);
        return CLT_OK;
    }
    /* Under the cap the allocator releases its cache on a miss: what it
     * reserves there is what counts, and what the table shows. */
    clt_plan capped;
    int fits;
    CLT_TRY(plan_with(m, o, &d, budget, &capped, &fits));
    if (fits)
        fprintf(out, "  reserved     %10.1f MiB (the allocator's segments under the %.1f MiB cap, from the model's "
                "creation on)\n", capped.reserved / MIB, budget / MIB);
    else
        fprintf(out, "  reserved     %10.1f MiB (the allocator's segments with no cap; under %.1f MiB a request "
                "fails)\n", p.reserved / MIB, budget / MIB);
    fprintf(out, "%s: %.1f MiB available (tensors %.0f%%, reserved %.0f%%)\n", fits ? "fits" : "DOES NOT FIT",
            budget / MIB, 100.0 * (double)p.peak / (double)budget,
            100.0 * (double)(fits ? capped.reserved : p.reserved) / (double)budget);
    clt_plan_options plain = *o, recompute = *o;
    plain.recompute_blocks = 0;
    if (!recompute.recompute_blocks) recompute.recompute_blocks = CLT_RECOMPUTE_AUTO;
    int64_t b_plain, b_recompute;
    CLT_TRY(max_batch(m, &plain, &d, budget, max_batch_size, &b_plain));
    CLT_TRY(max_batch(m, &recompute, &d, budget, max_batch_size, &b_recompute));
    const char *more = " (or more)";
    fprintf(out, "largest batch that fits: %lld without checkpointing%s, %lld with%s\n", (long long)b_plain,
            b_plain == max_batch_size ? more : "", (long long)b_recompute, b_recompute == max_batch_size ? more : "");
    if (b_plain > 0 && b_recompute > b_plain && b_recompute < max_batch_size)
        CLT_TRY(why_further(m, o, &d, b_plain, b_recompute, out));
    if (fits) return CLT_OK;
    fprintf(out, "to fit:\n");
    clt_plan_fit_result fit;
    if (o->batch_size > 1 && clt_plan_fit(m, o, budget, 0, &fit) == CLT_OK && fit.accumulate > 1) {
        fprintf(out, "  - keep the batch of %lld (--fit): %d micro-batches", (long long)o->batch_size, fit.accumulate);
        if (fit.recompute_blocks) fprintf(out, ", checkpointed segments of %d blocks", fit.recompute_blocks);
        fprintf(out, ", predicted peak %.1f MiB\n", fit.plan.peak / MIB);
    }
    if (b_plain > 0) fprintf(out, "  - lower the batch size to %lld\n", (long long)b_plain);
    if (b_recompute >= o->batch_size && m->nlayers > 0 && clt_model_num_blocks(m) > 0)
        fprintf(out, "  - recompute activations (--recompute auto)\n");
    else if (b_recompute > b_plain)
        fprintf(out, "  - recompute activations (--recompute auto) and lower the batch size to %lld\n",
                (long long)b_recompute);
    /* Of a float16 step's optimizer memory, the master weights (twice the
     * float16 weights) stay whatever the optimizer. */
    int64_t state = half ? p.optimizer - 2 * p.weights : p.optimizer;
    if (state > 0) fprintf(out, "  - SGD without momentum keeps no optimizer state: %.1f MiB less\n", state / MIB);
    if (!half) {
        clt_plan_options h = *o;
        h.dtype = CLT_FLOAT16;
        clt_plan ph;
        CLT_TRY(plan_with(m, &h, &d, 0, &ph, NULL));
        if (ph.peak < p.peak) fprintf(out, "  - train in float16 (--fp16): predicted peak %.1f MiB\n", ph.peak / MIB);
    }
    if (b_plain == 0 && b_recompute == 0)
        fprintf(out, "  - the weights, gradients and optimizer state alone need %.1f MiB: use a smaller model or a "
                     "larger device\n", (p.weights + p.gradients + p.optimizer) / MIB);
    return CLT_OK;
}
