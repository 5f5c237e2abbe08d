/* The data set resident on a GPU-class device (resident.h). */
#include <stdlib.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "../device/device_internal.h"
#include "../kernels/program.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/memory.h"
#include "resident.h"

/* The copy is kept on the device when it takes at most this fraction of
 * the device's budget: the rest is the model's and the step's. */
#define RESIDENT_SHARE 16

/* Values of a row one work-item of cl/gather.cl writes. */
#define GATHER_RUN 16

struct clt__resident {
    clt_tensor *xs;    /* the examples: bytes packed in int32 words, or float32 features */
    clt_tensor *ys;    /* int32 class ids, or (n, outputs) float32 targets */
    int byte_pixels;   /* 1: xs holds bytes */
    int64_t pixels, width; /* values per example in xs and ys */
};

/* ceil(bytes / 4) words, or -1 past int64. */
static int64_t words(int64_t count, int64_t elem)
{
    int64_t bytes;
    if (clt__mul_i64(count, elem, &bytes) != 0 || bytes > INT64_MAX - 3) return -1;
    return (bytes + 3) / 4;
}

static int64_t pixels_of(const clt_dataset *ds) { return ds->rows * ds->cols; }
static int64_t width_of(const clt_dataset *ds) { return ds->task == CLT_TASK_REGRESS ? ds->outputs : 1; }

int64_t clt__resident_bytes(const clt_dataset *ds, int64_t n)
{
    int64_t values, x, y, total;
    if (clt__mul_i64(n, pixels_of(ds), &values) != 0) return -1;
    x = words(values, ds->images ? 1 : 4);
    y = words(n, 4 * width_of(ds));
    if (x < 0 || y < 0 || clt__add_i64(x, y, &total) != 0 || clt__mul_i64(total, 4, &total) != 0)
        return -1;
    return total;
}

/* The budget the rule judges by: the device's memory cap, else its global
 * memory. A planning twin judges by the device it plans for, so that a
 * plan decides as the run will (the cap a plan's search puts on the twin
 * is not the run's); a described device by its description. */
static clt_status budget_of(int slot, int64_t *out)
{
    const clt__slot *s = clt__slot_get(slot);
    if (s->described) {
        *out = s->described_cap ? s->described_cap : (int64_t)s->global_mem;
        return CLT_OK;
    }
    clt_memory_stats st;
    CLT_TRY(clt_memory_get_stats(clt__slot_device(s->plans_for >= 0 ? s->plans_for : slot), &st));
    *out = st.cap ? st.cap : (int64_t)s->global_mem;
    return CLT_OK;
}

/* Whether the copy of n examples is kept on dev (resident.h's rule). */
static clt_status wanted(const clt_dataset *ds, int64_t n, int world, clt_device dev, int *out)
{
    int slot, gpu;
    int64_t budget;
    *out = 0;
    CLT_TRY(clt__resolve(dev, &slot));
    CLT_TRY(clt__gpu_class(slot, &gpu));
    if (!gpu || world > 1 || n == 0) return CLT_OK;
    CLT_TRY(budget_of(slot, &budget));
    int64_t bytes = clt__resident_bytes(ds, n);
    *out = bytes >= 0 && bytes <= budget / RESIDENT_SHARE;
    return CLT_OK;
}

/* The labels as int32 (a byte label widened), on dev. */
static clt_status upload_labels(clt__resident *r, const clt_dataset *ds, int64_t n, clt_device dev)
{
    if (ds->task == CLT_TASK_REGRESS) {
        int64_t shape[2] = {n, ds->outputs};
        return clt_from_host(&r->ys, dev, CLT_FLOAT32, 2, shape, ds->values);
    }
    if (ds->classes) return clt_from_host(&r->ys, dev, CLT_INT32, 1, &n, ds->classes);
    int32_t *wide = malloc((size_t)n * sizeof *wide);
    if (!wide) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_loader_create: out of host memory for %lld labels",
                                (long long)n);
    for (int64_t i = 0; i < n; i++) wide[i] = ds->labels[i];
    clt_status s = clt_from_host(&r->ys, dev, CLT_INT32, 1, &n, wide);
    free(wide);
    return s;
}

/* The examples in their stored type: bytes in ceil(bytes / 4) int32 words. */
static clt_status upload_examples(clt__resident *r, const clt_dataset *ds, int64_t n, clt_device dev)
{
    int64_t values = n * r->pixels;
    if (!ds->images) {
        int64_t shape[2] = {n, r->pixels};
        return clt_from_host(&r->xs, dev, CLT_FLOAT32, 2, shape, ds->x);
    }
    int64_t w = words(values, 1);
    CLT_TRY(clt_empty(&r->xs, dev, CLT_INT32, 1, &w));
    return clt__write_host(r->xs, ds->images, (size_t)values);
}

/* Rows per work-group of the gather: one local size for every batch, the
 * last partial one included, so that a driver that compiles a kernel for
 * each work-group size it meets (pocl) compiles it once. */
#define GATHER_ROWS 32

/* Enqueues gather_batch: rows [0, count) of x and y from the examples of
 * the count int32 indices ib, x (and y, which the same launch writes)
 * marked written by it when given. */
static clt_status launch_gather(const clt__resident *r, clt__buf ib, int64_t count, clt__buf xb, clt__buf yb,
                                clt_tensor *x)
{
    clt__buf xs = clt__tensor_buf(r->xs), ys = clt__tensor_buf(r->ys);
    cl_ulong xs_off = xs.off * 4, width = (cl_ulong)r->width, n = (cl_ulong)count, pixels = (cl_ulong)r->pixels;
    cl_int bytes = r->byte_pixels;
    clt__arg args[] = {CLT_ARG(xs.mem), CLT_ARG(xs_off), CLT_ARG(bytes), CLT_ARG(ys.mem), CLT_ARG(ys.off),
                       CLT_ARG(width),  CLT_ARG(ib.mem), CLT_ARG(ib.off), CLT_ARG(xb.mem), CLT_ARG(xb.off),
                       CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(n),     CLT_ARG(pixels)};
    /* Dimension 0: the examples, in whole work-groups (at least one; the
     * kernel checks count); dimension 1: a row's runs of GATHER_RUN values
     * and its y. */
    size_t groups = count > GATHER_ROWS ? (size_t)((count + GATHER_ROWS - 1) / GATHER_ROWS) : 1;
    size_t global[2] = {groups * GATHER_ROWS, (size_t)((r->pixels + GATHER_RUN - 1) / GATHER_RUN + 1)};
    size_t local[2] = {GATHER_ROWS, 1};
    return clt__launch(clt__tensor_slot(r->xs), "gather", "gather_batch", 14, args, 2, global, local, x);
}

clt_status clt__resident_create(clt__resident **out, const clt_dataset *ds, int64_t n, int world, clt_device dev)
{
    int keep;
    *out = NULL;
    CLT_TRY(wanted(ds, n, world, dev, &keep));
    if (!keep) return CLT_OK;
    clt__resident *r = calloc(1, sizeof *r);
    if (!r) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_loader_create: out of host memory");
    r->byte_pixels = ds->images != NULL;
    r->pixels = pixels_of(ds);
    r->width = width_of(ds);
    clt_status s = upload_examples(r, ds, n, dev);
    if (s == CLT_OK) s = upload_labels(r, ds, n, dev);
    /* The kernel built and compiled now, before a run's clock starts, as the
     * model's are (clt_model_warmup): a launch over no rows. */
    clt__buf ys = clt__tensor_buf(r->ys);
    if (s == CLT_OK) s = launch_gather(r, ys, 0, ys, ys, NULL);
    if (s != CLT_OK) {
        clt__resident_free(r);
        return s;
    }
    *out = r;
    return CLT_OK;
}

void clt__resident_free(clt__resident *r)
{
    if (!r) return;
    clt_tensor_release(r->xs);
    clt_tensor_release(r->ys);
    free(r);
}

clt_status clt__resident_gather(const clt__resident *r, const clt_tensor *idx, int64_t count, clt_tensor **x,
                                clt_tensor **y)
{
    clt_device dev = clt_tensor_device(r->xs);
    int64_t xshape[2] = {count, r->pixels}, yshape[2] = {count, r->width};
    int regress = clt_tensor_dtype(r->ys) == CLT_FLOAT32;
    CLT_TRY(clt_empty(x, dev, CLT_FLOAT32, 2, xshape));
    clt_status s = clt_empty(y, dev, clt_tensor_dtype(r->ys), regress ? 2 : 1, yshape);
    if (s == CLT_OK) s = launch_gather(r, clt__tensor_buf(idx), count, clt__tensor_buf(*x), clt__tensor_buf(*y), *x);
    if (s == CLT_OK) clt__tensor_set_write(*y, (*x)->st->last_write); /* the same launch wrote y */
    if (s != CLT_OK) {
        clt_tensor_release(*x);
        clt_tensor_release(*y);
        *x = *y = NULL;
    }
    return s;
}
