/* Tensors: creation, reference counting, views, and reading back. */
#include "tensor_internal.h"
#include "cltensor/half.h"

#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "../core/checked.h"
#include "../core/fault.h"
#include "../device/replay.h"
#include "../device/sync.h"
#include "pinned.h"

const char *clt_dtype_name(clt_dtype dt)
{
    switch (dt) {
    case CLT_FLOAT32: return "float32";
    case CLT_INT32: return "int32";
    case CLT_FLOAT16: return "float16";
    }
    return "unknown";
}

size_t clt_dtype_size(clt_dtype dt)
{
    switch (dt) {
    case CLT_FLOAT32:
    case CLT_INT32: return 4;
    case CLT_FLOAT16: return 2;
    }
    return 0;
}

clt_status clt__check_shape(int ndim, const int64_t *shape, clt_dtype dt, int64_t *numel, size_t *nbytes)
{
    if (ndim < 0 || ndim > CLT_MAX_DIMS)
        return clt__fail(CLT_ERR_SHAPE, "a tensor has 0 to %d dimensions, not %d", CLT_MAX_DIMS, ndim);
    if (ndim > 0 && !shape) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "shape is NULL for %d dimensions", ndim);
    size_t es = clt_dtype_size(dt);
    if (es == 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "unknown dtype %d", (int)dt);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return clt__fail(CLT_ERR_SHAPE, "dimension %d has negative size %lld", i, (long long)shape[i]);
    int64_t n = 1, bytes = (int64_t)es;
    /* Every dimension counts (a zero one as 1), so no product of some of
     * them overflows later; the message names the first one too many. */
    for (int i = 0; i < ndim; i++)
        if (clt__shape_bytes(i + 1, shape, (int64_t)es, &n, &bytes) != 0)
            return clt__fail(CLT_ERR_SHAPE, "shape overflows: dimension %d (%lld) makes more than %lld bytes", i,
                             (long long)shape[i], (long long)INT64_MAX);
    *numel = n;
    *nbytes = (size_t)bytes;
    return CLT_OK;
}

/* The clock of storage versions (clt__tensor_version). */
static atomic_uint_fast64_t version_clock;

static uint64_t version_tick(void) { return (uint64_t)atomic_fetch_add(&version_clock, 1) + 1; }

uint64_t clt__tensor_version(const clt_tensor *t) { return t->st->version; }

static void storage_release(clt__storage *st)
{
    if (!st || atomic_fetch_sub(&st->refs, 1) != 1) return;
    if (clt__slot_is_pinned(st->slot)) clt__pinned_free(st);
    else clt__free(st->block, st->foreign_read);
    if (st->last_write) clReleaseEvent(st->last_write);
    if (st->foreign_read) clReleaseEvent(st->foreign_read);
    free(st);
}

clt_status clt__tensor_new(clt_tensor **out, int slot, clt_dtype dt, int ndim, const int64_t *shape)
{
    *out = NULL;
    int64_t numel;
    size_t nbytes;
    CLT_TRY(clt__check_shape(ndim, shape, dt, &numel, &nbytes));
    clt_tensor *t = calloc(1, sizeof *t);
    clt__storage *st = calloc(1, sizeof *st);
    if (!t || !st) {
        free(t);
        free(st);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for a tensor header");
    }
    if (clt__slot_is_pinned(slot)) clt__pinned_reclaim();
    if (nbytes > 0) {
        clt_status s = clt__alloc(slot, nbytes, CLT_MEM_OTHER, &st->block);
        if (s != CLT_OK) {
            free(t);
            free(st);
            return s;
        }
    }
    atomic_init(&st->refs, 1);
    st->slot = slot;
    st->nbytes = nbytes;
    st->cat = CLT_MEM_OTHER;
    st->version = version_tick();
    atomic_init(&t->refs, 1);
    t->st = st;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    *out = t;
    return CLT_OK;
}

clt_status clt_empty(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape)
{
    CLT_TRY(clt__need("clt_empty", "out", out));
    *out = NULL;
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    return clt__tensor_new(out, slot, dt, ndim, shape);
}

clt_status clt__tensor_fill(clt_tensor *t, const void *pattern)
{
    size_t es = clt_dtype_size(t->dtype);
    if (t->numel == 0) return CLT_OK;
    if (clt__is_pinned(t)) {
        /* A new tensor: no transfer can be using it yet. */
        char *p = clt__pinned_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) memcpy(p + es * i, pattern, es);
        return CLT_OK;
    }
    if (clt__slot_plans(t->st->slot)) { /* a planning device: the fill is skipped */
        clt__tensor_set_write(t, NULL);
        return CLT_OK;
    }
    int taken = 0;
    cl_event ev;
    clt__command c = {.kind = CLT__COMMAND_FILL, .name = "fill", .dst = clt__tensor_buf(t).mem,
                      .dst_offset = clt__tensor_byte_offset(t), .size = clt_tensor_nbytes(t), .pattern = pattern,
                      .pattern_size = es};
    CLT_TRY(clt__replay_take(t->st->slot, &c, t->st->foreign_read != NULL, &taken, &ev));
    if (taken) { /* held back for a replay of the step */
        clt__tensor_set_write(t, ev);
        return CLT_OK;
    }
    cl_command_queue q;
    CLT_TRY(clt__slot_queue_replayable(t->st->slot, &q));
    cl_event wait = clt__tensor_take_foreign_read(t);
    cl_int err = clEnqueueFillBuffer(q, c.dst, pattern, es, c.dst_offset, c.size, wait ? 1 : 0, wait ? &wait : NULL,
                                     &ev);
    if (wait) clReleaseEvent(wait);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clEnqueueFillBuffer");
    clt__tensor_set_write(t, ev);
    clt_status s = clt__after_enqueue(t->st->slot, ev, "fill");
    clReleaseEvent(ev);
    return s;
}

clt_status clt_full(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape, double value)
{
    /* Converting an out-of-range double to int32 is undefined behaviour. */
    if (dt == CLT_INT32 && !(value >= INT32_MIN && value <= INT32_MAX)) {
        if (out) *out = NULL;
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_full: %g does not fit int32", value);
    }
    CLT_TRY(clt_empty(out, dev, dt, ndim, shape));
    float f = (float)value;
    int32_t i = (int32_t)value;
    uint16_t h = clt_float_to_half(f);
    clt_status s = clt__tensor_fill(*out, dt == CLT_FLOAT32   ? (const void *)&f
                              : dt == CLT_FLOAT16 ? (const void *)&h
                                                  : (const void *)&i);
    if (s != CLT_OK) {
        clt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

clt_status clt_zeros(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape)
{
    return clt_full(out, dev, dt, ndim, shape, 0.0);
}

clt_status clt_ones(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape)
{
    return clt_full(out, dev, dt, ndim, shape, 1.0);
}

static void CL_CALLBACK free_staging(cl_event ev, cl_int status, void *data)
{
    (void)ev;
    (void)status;
    free(data);
}

/* Writes host bytes into t without waiting: the bytes are copied to a
 * staging buffer that is freed when the write completes. A pinned tensor
 * (checked by the caller) is simply written. */
clt_status clt__write_host(clt_tensor *t, const void *src, size_t nbytes)
{
    if (nbytes == 0) return CLT_OK;
    if (clt__is_pinned(t)) {
        memcpy(clt__pinned_ptr(t), src, nbytes);
        return CLT_OK;
    }
    if (clt__slot_plans(t->st->slot)) { /* a planning device: the write is skipped */
        clt__tensor_set_write(t, NULL);
        return CLT_OK;
    }
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(t->st->slot, &q));
    void *staging = malloc(nbytes);
    if (!staging) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory staging %zu bytes", nbytes);
    memcpy(staging, src, nbytes);
    cl_event ev;
    cl_event wait = clt__tensor_take_foreign_read(t);
    cl_int err = clEnqueueWriteBuffer(q, clt__tensor_buf(t).mem, CL_FALSE, clt__tensor_byte_offset(t), nbytes,
                                      staging, wait ? 1 : 0, wait ? &wait : NULL, &ev);
    if (wait) clReleaseEvent(wait);
    if (err != CL_SUCCESS) {
        free(staging);
        return clt__cl_fail(err, "clEnqueueWriteBuffer of %zu bytes", nbytes);
    }
    err = clt__fault(CLT__FAULT_CALLBACK) ? CL_OUT_OF_HOST_MEMORY
                                          : clSetEventCallback(ev, CL_COMPLETE, free_staging, staging);
    if (err != CL_SUCCESS) {
        clt__sync_fallback(t->st->slot, "a host-to-device write (freeing its staging copy: no callback)", ev);
        free(staging);
    }
    clt__tensor_set_write(t, ev);
    char name[32];
    snprintf(name, sizeof name, "host->%s", clt__slot_get(t->st->slot)->name);
    clt_status s = clt__after_copy(t->st->slot, ev, name, nbytes);
    clReleaseEvent(ev);
    return s;
}

clt_status clt_from_host(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape,
                         const void *data)
{
    CLT_TRY(clt_empty(out, dev, dt, ndim, shape));
    if ((*out)->numel > 0 && !data) {
        clt_tensor_release(*out);
        *out = NULL;
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_from_host: data is NULL");
    }
    clt_status s = clt__write_host(*out, data, clt_tensor_nbytes(*out));
    if (s != CLT_OK) {
        clt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

clt_status clt_tensor_write(clt_tensor *t, const void *src, size_t nbytes, int wait)
{
    CLT_TRY(clt__need("clt_tensor_write", "t", t));
    if (nbytes != clt_tensor_nbytes(t))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tensor_write: %zu bytes for a tensor of %zu bytes", nbytes,
                         clt_tensor_nbytes(t));
    if (nbytes == 0) return CLT_OK;
    CLT_TRY(clt__need("clt_tensor_write", "src", src));
    if (clt__is_pinned(t)) {
        CLT_TRY(clt__pinned_writable(t, wait, "clt_tensor_write"));
        memcpy(clt__pinned_ptr(t), src, nbytes);
        return CLT_OK;
    }
    return clt__write_host(t, src, nbytes);
}

static clt_status like(clt_tensor **out, const clt_tensor *src, const char *op)
{
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need(op, "src", src));
    return clt__tensor_new(out, src->st->slot, src->dtype, src->ndim, src->shape);
}

clt_status clt_empty_like(clt_tensor **out, const clt_tensor *src) { return like(out, src, "clt_empty_like"); }

static clt_status fill_like(clt_tensor **out, const clt_tensor *src, const char *op, float value)
{
    CLT_TRY(like(out, src, op));
    int32_t i = (int32_t)value;
    uint16_t h = clt_float_to_half(value);
    clt_status s = clt__tensor_fill(*out, src->dtype == CLT_FLOAT32   ? (const void *)&value
                              : src->dtype == CLT_FLOAT16 ? (const void *)&h
                                                          : (const void *)&i);
    if (s != CLT_OK) {
        clt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

clt_status clt_zeros_like(clt_tensor **out, const clt_tensor *src) { return fill_like(out, src, "clt_zeros_like", 0); }
clt_status clt_ones_like(clt_tensor **out, const clt_tensor *src) { return fill_like(out, src, "clt_ones_like", 1); }

clt_tensor *clt_tensor_retain(clt_tensor *t)
{
    if (t) atomic_fetch_add(&t->refs, 1);
    return t;
}

void clt_tensor_release(clt_tensor *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    storage_release(t->st);
    free(t);
}

clt_device clt_tensor_device(const clt_tensor *t) { return t ? clt__slot_device(t->st->slot) : clt_cpu(); }
clt_dtype clt_tensor_dtype(const clt_tensor *t) { return t ? t->dtype : CLT_FLOAT32; }
int clt_tensor_ndim(const clt_tensor *t) { return t ? t->ndim : 0; }

int64_t clt_tensor_dim(const clt_tensor *t, int i)
{
    if (!t) return 0;
    if (i < 0) i += t->ndim;
    return i >= 0 && i < t->ndim ? t->shape[i] : 0;
}

int clt_tensor_shape(const clt_tensor *t, int64_t *shape)
{
    if (!t) return 0;
    for (int i = 0; i < t->ndim && shape; i++) shape[i] = t->shape[i];
    return t->ndim;
}

int64_t clt_tensor_numel(const clt_tensor *t) { return t ? t->numel : 0; }
size_t clt_tensor_nbytes(const clt_tensor *t) { return t ? (size_t)t->numel * clt_dtype_size(t->dtype) : 0; }

clt_status clt_tensor_set_category(clt_tensor *t, clt_memory_category c)
{
    CLT_TRY(clt__need("clt_tensor_set_category", "t", t));
    if (c < 0 || c >= CLT_MEM_CATEGORY_COUNT)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tensor_set_category: unknown category %d", (int)c);
    t->st->cat = c;
    if (t->st->block) clt__block_set_category(t->st->block, c);
    return CLT_OK;
}

clt_memory_category clt_tensor_category(const clt_tensor *t) { return t ? t->st->cat : CLT_MEM_OTHER; }

static clt_status view(clt_tensor **out, clt_tensor *t, size_t offset, int ndim, const int64_t *shape, int64_t numel)
{
    clt_tensor *v = calloc(1, sizeof *v);
    if (!v) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for a tensor header");
    atomic_init(&v->refs, 1);
    atomic_fetch_add(&t->st->refs, 1);
    v->st = t->st;
    v->offset = offset;
    v->dtype = t->dtype;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
    v->numel = numel;
    *out = v;
    return CLT_OK;
}

clt_status clt_reshape(clt_tensor **out, clt_tensor *t, int ndim, const int64_t *shape)
{
    CLT_TRY(clt__need("clt_reshape", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_reshape", "t", t));
    if (ndim < 0 || ndim > CLT_MAX_DIMS)
        return clt__fail(CLT_ERR_SHAPE, "clt_reshape: %d dimensions (at most %d)", ndim, CLT_MAX_DIMS);
    if (ndim > 0 && !shape) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_reshape: shape is NULL");
    int64_t s[CLT_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (s[i] < 0) return clt__fail(CLT_ERR_SHAPE, "clt_reshape: dimension %d is %lld", i, (long long)s[i]);
        if (s[i] > 0 && known > INT64_MAX / s[i])
            return clt__fail(CLT_ERR_SHAPE, "clt_reshape: shape overflows at dimension %d", i);
        known *= s[i];
    }
    if (infer >= 0) {
        if (known == 0 || t->numel % known != 0)
            return clt__fail(CLT_ERR_SHAPE, "clt_reshape: cannot infer dimension %d for %lld elements", infer,
                             (long long)t->numel);
        s[infer] = t->numel / known;
        known *= s[infer];
    }
    if (known != t->numel)
        return clt__fail(CLT_ERR_SHAPE, "clt_reshape: %lld elements do not fit a shape of %lld",
                         (long long)t->numel, (long long)known);
    return view(out, t, t->offset, ndim, s, known);
}

/* The message's own arithmetic is checked too: start + length may overflow. */
static clt_status narrow_fail(int64_t start, int64_t length, int64_t rows)
{
    int64_t end;
    if (clt__add_i64(start, length, &end) != 0)
        return clt__fail(CLT_ERR_SHAPE, "clt_narrow: %lld rows from row %lld are outside 0..%lld", (long long)length,
                         (long long)start, (long long)rows);
    return clt__fail(CLT_ERR_SHAPE, "clt_narrow: rows [%lld, %lld) outside 0..%lld", (long long)start,
                     (long long)end, (long long)rows);
}

clt_status clt_narrow(clt_tensor **out, clt_tensor *t, int64_t start, int64_t length)
{
    CLT_TRY(clt__need("clt_narrow", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_narrow", "t", t));
    if (t->ndim == 0) return clt__fail(CLT_ERR_SHAPE, "clt_narrow: a scalar has no rows");
    if (start < 0 || length < 0 || start > t->shape[0] || length > t->shape[0] - start)
        return narrow_fail(start, length, t->shape[0]);
    int64_t row = t->shape[0] ? t->numel / t->shape[0] : 0;
    int64_t shape[CLT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    shape[0] = length;
    size_t offset = t->offset + (size_t)(start * row) * clt_dtype_size(t->dtype);
    return view(out, t, offset, t->ndim, shape, length * row);
}

clt__buf clt__tensor_buf(const clt_tensor *t)
{
    clt__buf b = {NULL, 0};
    if (t->st->block) {
        b.mem = clt__block_mem(t->st->block);
        b.off = clt__tensor_byte_offset(t) / clt_dtype_size(t->dtype);
    }
    return b;
}

size_t clt__tensor_byte_offset(const clt_tensor *t)
{
    return (t->st->block ? clt__block_offset(t->st->block) : 0) + t->offset;
}

int clt__tensor_slot(const clt_tensor *t) { return t->st->slot; }

void clt__tensor_set_write(clt_tensor *t, cl_event ev)
{
    if (ev) clRetainEvent(ev);
    if (t->st->last_write) clReleaseEvent(t->st->last_write);
    t->st->last_write = ev;
    t->st->version = version_tick();
}

cl_event clt__tensor_take_foreign_read(clt_tensor *t)
{
    cl_event ev = t->st->foreign_read;
    t->st->foreign_read = NULL;
    return ev;
}

clt_status clt__read_host(const clt_tensor *t, void *dst, size_t nbytes, const char *api)
{
    CLT_TRY(clt__need(api, "t", t));
    size_t need = clt_tensor_nbytes(t);
    if (need == 0) return CLT_OK;
    CLT_TRY(clt__need(api, "dst", dst));
    if (nbytes < need)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: destination holds %zu bytes, tensor has %zu", api, nbytes,
                         need);
    if (clt__is_pinned(t)) {
        CLT_TRY(clt__pinned_readable(t, api));
        memcpy(dst, clt__pinned_ptr(t), need);
        return CLT_OK;
    }
    int slot = t->st->slot;
    if (clt__slot_plans(slot)) { /* a planning device: a synchronization point that reads zeros */
        CLT_TRY(clt__sync_point(slot, api));
        memset(dst, 0, need);
        return clt__sync_wait_only(slot, api, 0, NULL);
    }
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(slot, &q));
    /* Refused up front in CLT_SYNC_DEBUG=error mode, before anything is enqueued. */
    CLT_TRY(clt__sync_point(slot, api));
    cl_event ev;
    cl_int err = clEnqueueReadBuffer(q, clt__tensor_buf(t).mem, CL_FALSE, clt__tensor_byte_offset(t), need, dst,
                                     0, NULL, &ev);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "clEnqueueReadBuffer of %zu bytes from %s", need, clt__slot_get(slot)->name);
    char name[32];
    snprintf(name, sizeof name, "%s->host", clt__slot_get(slot)->name);
    clt_status s = clt__after_copy(slot, ev, name, need);
    if (s == CLT_OK) s = clt__sync_wait_only(slot, api, 1, &ev);
    clReleaseEvent(ev);
    return s;
}

clt_status clt_to_host(const clt_tensor *t, void *dst, size_t nbytes)
{
    return clt__read_host(t, dst, nbytes, "clt_to_host");
}

clt_status clt_item(const clt_tensor *t, double *out)
{
    CLT_TRY(clt__need("clt_item", "t", t));
    CLT_TRY(clt__need("clt_item", "out", out));
    if (t->numel != 1)
        return clt__fail(CLT_ERR_SHAPE, "clt_item: tensor has %lld elements, not 1", (long long)t->numel);
    union {
        float f;
        int32_t i;
        uint16_t h;
    } v;
    CLT_TRY(clt__read_host(t, &v, clt_dtype_size(t->dtype), "clt_item"));
    *out = t->dtype == CLT_FLOAT32   ? (double)v.f
           : t->dtype == CLT_FLOAT16 ? (double)clt_half_to_float(v.h)
                                     : (double)v.i;
    return CLT_OK;
}
