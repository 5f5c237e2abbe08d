#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../tensor/pinned.h"
#include "cltensor/async.h"
#include "cltensor/data.h"
#include "cltensor/memory.h"
#include "resident.h"

/* Batches are staged in pinned host buffers and copied to the device without
 * waiting. A buffer is reused once its copy has finished (asked without
 * waiting); while the oldest one's is in flight a new one joins the ring, so the
 * ring grows to as many batches as the host runs ahead of the device and the
 * host never waits for a copy. Past MAX_STAGING_BYTES of staging (the ring
 * keeps at least FIRST_STAGES buffers and grows to at most 4096) it waits for
 * the oldest copy instead (a synchronization point of clt_loader_next). It
 * does not grow at all while pinned memory has a cap (clt_memory_set_cap,
 * CLT_MEMORY_CAP), so that under a cap it holds what the memory planner
 * counts (FIRST_STAGES buffers), nor once a new buffer found no memory.
 * Where the data set is resident on the device (resident.h), a buffer holds
 * only the batch's int32 example indices, and one kernel there makes the
 * batch from them. */
#define FIRST_STAGES 2
#define MAX_STAGING_BYTES ((int64_t)256 << 20)

typedef struct staging {
    clt_tensor *x, *y; /* pinned: (most, pixels) float32 and (most) int32 or (most, outputs) float32; with
                          the set resident, x is (most) int32 example indices and y is NULL */
} staging;

struct clt_loader {
    const clt_dataset *ds;
    clt_device dev;
    clt_loader_options opt;
    int64_t n, num_batches, pixels;
    int64_t outputs;  /* regression targets per example; 0 for class ids */
    int64_t epoch, next_batch;
    int64_t *order;  /* example indices of the current epoch */
    staging *stage;  /* the ring: nstages buffers, the next one to try at next_stage */
    int nstages, max_stages;
    int next_stage;
    int64_t most;    /* rows of a staging buffer: the largest shard of a global batch (the batch itself
                        when world is 1) */
    clt__resident *resident; /* the set on the device (resident.h), or NULL: the host path */
};

/* A staging buffer's pinned tensors: the batch's indices with the set
 * resident, else its x and y. */
static clt_status stage_tensors(const clt_loader *l, staging *st)
{
    clt_device pinned = clt__pinned_beside(l->dev);
    if (l->resident) return clt_empty(&st->x, pinned, CLT_INT32, 1, &l->most);
    int64_t xshape[2] = {l->most, l->pixels}, yshape[2] = {l->most, l->outputs};
    CLT_TRY(clt_empty(&st->x, pinned, CLT_FLOAT32, 2, xshape));
    return l->outputs ? clt_empty(&st->y, pinned, CLT_FLOAT32, 2, yshape)
                      : clt_empty(&st->y, pinned, CLT_INT32, 1, yshape);
}

/* Appends a staging buffer to the ring, at next_stage (the next one used). */
static clt_status add_stage(clt_loader *l)
{
    staging *grown = realloc(l->stage, (size_t)(l->nstages + 1) * sizeof *grown);
    if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_loader_next: out of host memory for a staging buffer");
    l->stage = grown;
    staging st = {NULL, NULL};
    clt_status s = stage_tensors(l, &st);
    if (s != CLT_OK) {
        clt_tensor_release(st.x);
        clt_tensor_release(st.y);
        return s;
    }
    memmove(&l->stage[l->next_stage + 1], &l->stage[l->next_stage],
            (size_t)(l->nstages - l->next_stage) * sizeof *l->stage);
    l->stage[l->next_stage] = st;
    l->nstages++;
    return CLT_OK;
}

/* Whether the ring may take another buffer: not while pinned memory has a cap. */
static int may_grow(const clt_loader *l)
{
    clt_memory_stats st;
    return clt_memory_get_stats(clt__pinned_beside(l->dev), &st) == CLT_OK && st.cap == 0;
}

/* The staging buffer for the next batch, writable now: the one at
 * next_stage, the ring's oldest, when its copy has finished (asked without
 * waiting), else a new one, else (the ring at its largest) the oldest once
 * its copy is done. The device's queue runs the copies in order, so while
 * the oldest one's is in flight every other one's is too: the ring grows
 * without asking each buffer (a query per buffer and step, with up to
 * 4096 buffers when the host runs far ahead). */
static clt_status take_stage(clt_loader *l, staging **out)
{
    staging *oldest = &l->stage[l->next_stage];
    if (!clt_tensor_in_flight(oldest->x) && !clt_tensor_in_flight(oldest->y)) {
        *out = oldest;
        return CLT_OK;
    }
    if (l->nstages < l->max_stages && may_grow(l)) {
        clt_status s = add_stage(l);
        if (s == CLT_OK) {
            *out = &l->stage[l->next_stage];
            return CLT_OK;
        }
        if (s != CLT_ERR_OUT_OF_MEMORY) return s;
        l->max_stages = l->nstages; /* pinned memory is full: wait for copies from now on */
    }
    staging *st = &l->stage[l->next_stage];
    const char *api = "clt_loader_next (every pinned staging buffer in flight)";
    CLT_TRY(clt__pinned_writable(st->x, 1, api));
    if (st->y) CLT_TRY(clt__pinned_writable(st->y, 1, api));
    *out = st;
    return CLT_OK;
}

clt_loader_options clt_loader_default_options(void)
{
    clt_loader_options o = {.batch_size = 256, .shuffle = 1, .seed = 0, .limit = 0, .rank = 0, .world = 1,
                            .flatten = 0, .resident = 1};
    return o;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias. */
static uint64_t below(uint64_t *s, uint64_t bound)
{
    uint64_t reject = (0 - bound) % bound; /* 2^64 mod bound */
    uint64_t r;
    do r = splitmix64(s);
    while (r < reject);
    return r % bound;
}

/* Fisher-Yates from a state that depends only on the seed and the epoch, so
 * every rank and every resumed run agrees on the order. */
static void make_order(clt_loader *l)
{
    for (int64_t i = 0; i < l->n; i++) l->order[i] = i;
    if (!l->opt.shuffle) return;
    uint64_t s = l->opt.seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(l->epoch + 1));
    for (int64_t i = l->n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&s, (uint64_t)i + 1);
        int64_t t = l->order[i];
        l->order[i] = l->order[j];
        l->order[j] = t;
    }
}

clt_status clt_loader_create(clt_loader **out, const clt_dataset *ds, clt_device dev, const clt_loader_options *opt)
{
    const char *op = "clt_loader_create";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need(op, "ds", ds));
    CLT_TRY(clt__need(op, "opt", opt));
    int regress = ds->task == CLT_TASK_REGRESS;
    int have_x = ds->images || ds->x, have_y = regress ? ds->values && ds->outputs >= 1 : ds->labels || ds->classes;
    if (ds->n < 0 || (ds->n > 0 && (!have_x || !have_y)) || ds->rows < 1 || ds->cols < 1 ||
        ds->rows > INT32_MAX / ds->cols || (regress && ds->outputs > INT32_MAX / 4) ||
        (ds->task != CLT_TASK_CLASSIFY && !regress))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the dataset is empty or malformed (%lld examples of %lldx%lld)",
                         op, (long long)ds->n, (long long)ds->rows, (long long)ds->cols);
    if (opt->batch_size < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: batch size %lld (must be >= 1)", op,
                         (long long)opt->batch_size);
    if (opt->limit < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: limit %lld (0 for all, else > 0)", op,
                         (long long)opt->limit);
    if (opt->world < 1 || opt->rank < 0 || opt->rank >= opt->world)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: rank %d of world %d", op, opt->rank, opt->world);
    clt_loader *l = calloc(1, sizeof *l);
    if (!l) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    l->ds = ds;
    l->dev = dev;
    l->opt = *opt;
    l->n = opt->limit > 0 && opt->limit < ds->n ? opt->limit : ds->n;
    /* Rounded up without n + batch_size - 1, which overflows for a batch
     * near INT64_MAX (a batch larger than the data is one batch of all). */
    l->num_batches = l->n / opt->batch_size + (l->n % opt->batch_size != 0);
    l->pixels = ds->rows * ds->cols;
    l->outputs = regress ? ds->outputs : 0;
    /* The largest shard of the largest batch: ceil(len / world) rows of a batch of len. */
    int64_t len = opt->batch_size < l->n ? opt->batch_size : l->n;
    int64_t most = len / opt->world + (len % opt->world != 0);
    l->order = malloc((size_t)(l->n ? l->n : 1) * sizeof *l->order);
    if (!l->order) {
        clt_loader_free(l);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld examples", op, (long long)l->n);
    }
    l->most = most;
    clt_status made = opt->resident ? clt__resident_create(&l->resident, ds, l->n, opt->world, dev) : CLT_OK;
    if (made != CLT_OK) {
        clt_loader_free(l);
        return made;
    }
    int64_t stage_bytes = l->resident ? most * 4 : most * (l->pixels + (l->outputs ? l->outputs : 1)) * 4;
    int64_t max_stages = MAX_STAGING_BYTES / (stage_bytes ? stage_bytes : 1);
    l->max_stages = max_stages < FIRST_STAGES ? FIRST_STAGES : max_stages > 4096 ? 4096 : (int)max_stages;
    for (int i = 0; i < FIRST_STAGES; i++) {
        clt_status s = add_stage(l);
        if (s != CLT_OK) {
            clt_loader_free(l);
            return s;
        }
    }
    make_order(l);
    *out = l;
    return CLT_OK;
}

void clt_loader_free(clt_loader *l)
{
    if (!l) return;
    free(l->order);
    for (int i = 0; i < l->nstages; i++) {
        clt_tensor_release(l->stage[i].x);
        clt_tensor_release(l->stage[i].y);
    }
    free(l->stage);
    clt__resident_free(l->resident);
    free(l);
}

int64_t clt_loader_num_examples(const clt_loader *l) { return l ? l->n : 0; }
int64_t clt_loader_num_batches(const clt_loader *l) { return l ? l->num_batches : 0; }
int64_t clt_loader_epoch(const clt_loader *l) { return l ? l->epoch : 0; }

clt_status clt_loader_set_epoch(clt_loader *l, int64_t epoch)
{
    CLT_TRY(clt__need("clt_loader_set_epoch", "l", l));
    if (epoch < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_loader_set_epoch: epoch %lld", (long long)epoch);
    l->epoch = epoch;
    l->next_batch = 0;
    make_order(l);
    return CLT_OK;
}

clt_status clt_loader_set_position(clt_loader *l, int64_t epoch, int64_t batch)
{
    CLT_TRY(clt_loader_set_epoch(l, epoch));
    if (batch < 0 || batch > l->num_batches)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_loader_set_position: batch %lld of an epoch of %lld batches",
                         (long long)batch, (long long)l->num_batches);
    l->next_batch = batch;
    return CLT_OK;
}

/* This rank's share of global batch b: positions [*lo, *hi) of the epoch's order. */
static void shard(const clt_loader *l, int64_t b, int64_t *lo, int64_t *hi)
{
    int64_t start = b * l->opt.batch_size;
    int64_t len = l->n - start < l->opt.batch_size ? l->n - start : l->opt.batch_size;
    *lo = start + len * l->opt.rank / l->opt.world;
    *hi = start + len * (l->opt.rank + 1) / l->opt.world;
}

/* Pixels as float32 v / 255, the quotient rounded once, by division: runs
 * of 16 compile to vector divisions (at -O2 too), where a table of the 256
 * quotients costs a load per pixel. */
static void to_unit(float *restrict dst, const uint8_t *restrict src, int64_t n)
{
    int64_t p = 0;
    for (; p + 16 <= n; p += 16)
        for (int j = 0; j < 16; j++) dst[p + j] = (float)src[p + j] / 255.0f;
    for (; p < n; p++) dst[p] = (float)src[p] / 255.0f;
}

/* Fills xs/ys with this rank's share of global batch b and returns its
 * size. Reads only the loader's fixed state and the epoch's order. */
static int64_t prepare(const clt_loader *l, int64_t b, float *xs, void *ys)
{
    const clt_dataset *ds = l->ds;
    int64_t lo, hi;
    shard(l, b, &lo, &hi);
    /* A planning device's staging has no storage, and no kernel reads values there. */
    if (l->dev.type == CLT_DEVICE_PLAN) return hi - lo;
    for (int64_t k = lo; k < hi; k++) {
        int64_t idx = l->order[k];
        float *dst = xs + (k - lo) * l->pixels;
        if (ds->images) {
            to_unit(dst, ds->images + idx * l->pixels, l->pixels);
        } else {
            memcpy(dst, ds->x + idx * l->pixels, (size_t)l->pixels * sizeof *dst);
        }
        if (l->outputs)
            memcpy((float *)ys + (k - lo) * l->outputs, ds->values + idx * l->outputs,
                   (size_t)l->outputs * sizeof(float));
        else
            ((int32_t *)ys)[k - lo] = ds->labels ? ds->labels[idx] : ds->classes[idx];
    }
    return hi - lo;
}

/* With the set resident: the example indices of this rank's share of
 * global batch b into idx; returns its size. */
static int64_t prepare_indices(const clt_loader *l, int64_t b, int32_t *idx)
{
    int64_t lo, hi;
    shard(l, b, &lo, &hi);
    if (l->dev.type != CLT_DEVICE_PLAN)
        for (int64_t k = lo; k < hi; k++) idx[k - lo] = (int32_t)l->order[k];
    return hi - lo;
}

/* Moves the first `count` rows of a pinned staging tensor to the device as
 * a tensor of the given shape, without waiting. */
static clt_status send(clt_tensor *pinned, int64_t count, int ndim, const int64_t *shape, clt_device dev,
                       clt_tensor **out)
{
    clt_tensor *rows = NULL, *shaped = NULL;
    clt_status s = clt_narrow(&rows, pinned, 0, count);
    if (s == CLT_OK) s = clt_reshape(&shaped, rows, ndim, shape);
    if (s == CLT_OK) s = clt_to_async(out, shaped, dev, NULL);
    clt_tensor_release(shaped);
    clt_tensor_release(rows);
    return s;
}

/* With the set resident: the count indices staged in idx go to the device
 * without waiting, and one kernel there makes the batch, x in xshape. */
static clt_status gather(const clt_loader *l, clt_tensor *idx, int64_t count, int xdims, const int64_t *xshape,
                         clt_tensor **x, clt_tensor **y)
{
    clt_tensor *on_dev = NULL, *rows = NULL;
    clt_status s = send(idx, count, 1, &count, l->dev, &on_dev);
    if (s == CLT_OK) s = clt__resident_gather(l->resident, on_dev, count, &rows, y);
    if (s == CLT_OK) s = clt_reshape(x, rows, xdims, xshape);
    clt_tensor_release(rows);
    clt_tensor_release(on_dev);
    return s;
}

clt_status clt_loader_next(clt_loader *l, clt_tensor **x, clt_tensor **y)
{
    const char *op = "clt_loader_next";
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "y", y));
    *x = *y = NULL;
    CLT_TRY(clt__need(op, "l", l));
    if (l->next_batch >= l->num_batches) return clt_loader_set_epoch(l, l->epoch + 1);
    staging *st;
    CLT_TRY(take_stage(l, &st));
    int64_t count = l->resident ? prepare_indices(l, l->next_batch, clt__pinned_ptr(st->x))
                                : prepare(l, l->next_batch, clt__pinned_ptr(st->x), clt__pinned_ptr(st->y));
    int64_t xshape[1 + CLT_DATASET_MAX_DIMS] = {count, 1, l->ds->rows, l->ds->cols}, flat[2] = {count, l->pixels};
    int xdims = 4;
    if (l->ds->example_ndim > 2 && l->ds->example_ndim <= CLT_DATASET_MAX_DIMS) {
        xdims = 1 + l->ds->example_ndim;
        memcpy(xshape + 1, l->ds->example_shape, (size_t)l->ds->example_ndim * sizeof *xshape);
    }
    int64_t yshape[2] = {count, l->outputs};
    clt_status s = l->resident ? gather(l, st->x, count, l->opt.flatten ? 2 : xdims, l->opt.flatten ? flat : xshape,
                                        x, y)
                   : l->opt.flatten ? send(st->x, count, 2, flat, l->dev, x)
                                    : send(st->x, count, xdims, xshape, l->dev, x);
    if (s == CLT_OK && !l->resident) s = send(st->y, count, l->outputs ? 2 : 1, yshape, l->dev, y);
    if (s != CLT_OK) {
        clt_tensor_release(*x);
        clt_tensor_release(*y);
        *x = *y = NULL;
        return s;
    }
    l->next_stage = (l->next_stage + 1) % l->nstages;
    l->next_batch++;
    return CLT_OK;
}
