/* Internal: tensor and storage layout, and what kernels need of a tensor. */
#ifndef CLT_TENSOR_INTERNAL_H
#define CLT_TENSOR_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include "../memory/allocator.h"
#include "cltensor/tensor.h"
#include "check.h"

/* Device memory shared by a tensor and its views. */
typedef struct clt__storage {
    atomic_int refs;
    int slot;
    clt__block *block;     /* NULL when nbytes is 0 */
    size_t nbytes;
    clt_memory_category cat;
    cl_event last_write;   /* the last command that wrote it, or NULL */
    cl_event foreign_read; /* the last command on another queue that read it, or NULL */
    struct clt__pinned_io *io; /* pinned memory: transfers in flight (see pinned.h), or NULL */
    uint64_t version;      /* a tick of one process-wide clock, new at creation and at every recorded write */
} clt__storage;

struct clt_tensor {
    atomic_int refs;
    clt__storage *st;
    size_t offset; /* bytes into the storage */
    clt_dtype dtype;
    int ndim;
    int64_t shape[CLT_MAX_DIMS];
    int64_t numel;
};

/* A tensor as a kernel argument pair: buffer and element offset. */
typedef struct clt__buf {
    cl_mem mem;
    cl_ulong off;
} clt__buf;

clt__buf clt__tensor_buf(const clt_tensor *t);
/* Byte offset of the tensor's first element in its buffer. */
size_t clt__tensor_byte_offset(const clt_tensor *t);
int clt__tensor_slot(const clt_tensor *t);

/* Replaces the storage's last-write event (the storage retains ev; the caller keeps its own reference;
 * NULL on a planning device, where nothing ran) and gives the storage a new version. */
void clt__tensor_set_write(clt_tensor *t, cl_event ev);
/* The version of t's storage: it changes with every command recorded as
 * writing it (clt__tensor_set_write, which every device write goes through)
 * and no two storages ever share one, so a copy derived from t is current
 * while the version it was made from is. Pinned storage, which the host
 * writes directly, is not versioned this way. */
uint64_t clt__tensor_version(const clt_tensor *t);

/* Hands over the storage's pending read by another queue (NULL if none):
 * a command about to overwrite the tensor must wait for it. */
cl_event clt__tensor_take_foreign_read(clt_tensor *t);

/* Fills t with pattern, clt_dtype_size(t's dtype) bytes, by
 * clEnqueueFillBuffer after any pending read of t by another queue;
 * asynchronous. Pinned storage the host writes at once: only for a new
 * tensor there. */
clt_status clt__tensor_fill(clt_tensor *t, const void *pattern);

/* Copies host bytes into t (nbytes = its size) without waiting. */
clt_status clt__write_host(clt_tensor *t, const void *src, size_t nbytes);
/* clt_to_host on behalf of the public call `api` (named at the sync point). */
clt_status clt__read_host(const clt_tensor *t, void *dst, size_t nbytes, const char *api);

/* Checks the shape (count, sizes, overflow) and computes element count and bytes. */
clt_status clt__check_shape(int ndim, const int64_t *shape, clt_dtype dt, int64_t *numel, size_t *nbytes);
/* A new, uninitialised tensor on a slot. */
clt_status clt__tensor_new(clt_tensor **out, int slot, clt_dtype dt, int ndim, const int64_t *shape);

#endif
