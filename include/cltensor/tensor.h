/* Tensors: reference-counted, contiguous, up to CLT_MAX_DIMS dimensions,
 * each living on one device. Several tensors may share one storage (views
 * made by clt_reshape and clt_narrow).
 *
 * Ownership: every function that writes a `clt_tensor **out` hands the caller
 * one reference, which the caller gives back with clt_tensor_release. On
 * failure *out is set to NULL and nothing is held. */
#ifndef CLTENSOR_TENSOR_H
#define CLTENSOR_TENSOR_H

#include "export.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "device.h"
#include "memory.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLT_MAX_DIMS 8

typedef enum clt_dtype {
    CLT_FLOAT32 = 0,
    CLT_INT32 = 1,
    CLT_FLOAT16 = 2 /* IEEE binary16 storage; kernels compute in float32 (docs/half.md) */
} clt_dtype;

/* "float32", "int32", "float16". */
CLT_API const char *clt_dtype_name(clt_dtype dt);
/* Bytes per element. */
CLT_API size_t clt_dtype_size(clt_dtype dt);

typedef struct clt_tensor clt_tensor;

/* Creation on a device. Shapes have 0..CLT_MAX_DIMS dimensions, each >= 0
 * (zero-size tensors are valid); ndim 0 is a scalar. New tensors count as
 * CLT_MEM_OTHER until clt_tensor_set_category says otherwise. */
CLT_API clt_status clt_empty(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape);
CLT_API clt_status clt_zeros(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape);
CLT_API clt_status clt_ones(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape);
CLT_API clt_status clt_full(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape,
                    double value);
/* Copies numel elements of `dt` from host memory (float16 as uint16_t bits). */
CLT_API clt_status clt_from_host(clt_tensor **out, clt_device dev, clt_dtype dt, int ndim, const int64_t *shape,
                         const void *data);

/* On the source tensor's device, with its dtype and shape (the article's new_*). */
CLT_API clt_status clt_empty_like(clt_tensor **out, const clt_tensor *src);
CLT_API clt_status clt_zeros_like(clt_tensor **out, const clt_tensor *src);
CLT_API clt_status clt_ones_like(clt_tensor **out, const clt_tensor *src);

/* Reference counting; clt_tensor_release(NULL) does nothing. */
CLT_API clt_tensor *clt_tensor_retain(clt_tensor *t);
CLT_API void clt_tensor_release(clt_tensor *t);

/* The accessors below take NULL too: clt_tensor_device(NULL) is clt_cpu(),
 * clt_tensor_dtype(NULL) CLT_FLOAT32, clt_tensor_category(NULL) CLT_MEM_OTHER
 * and the counts (ndim, dim, shape, numel, nbytes) are 0. */
CLT_API clt_device clt_tensor_device(const clt_tensor *t);
CLT_API clt_dtype clt_tensor_dtype(const clt_tensor *t);
CLT_API int clt_tensor_ndim(const clt_tensor *t);
/* Size of dimension i (negative i counts from the end). */
CLT_API int64_t clt_tensor_dim(const clt_tensor *t, int i);
/* Copies the shape into shape[0..ndim) and returns ndim. */
CLT_API int clt_tensor_shape(const clt_tensor *t, int64_t *shape);
CLT_API int64_t clt_tensor_numel(const clt_tensor *t);
CLT_API size_t clt_tensor_nbytes(const clt_tensor *t);

/* Retags the tensor's storage for the memory counters. */
CLT_API clt_status clt_tensor_set_category(clt_tensor *t, clt_memory_category c);
CLT_API clt_memory_category clt_tensor_category(const clt_tensor *t);

/* A view with another shape of the same number of elements; one dimension
 * may be -1 and is inferred. Shares storage. */
CLT_API clt_status clt_reshape(clt_tensor **out, clt_tensor *t, int ndim, const int64_t *shape);
/* Rows [start, start+length) along dimension 0, sharing storage. */
CLT_API clt_status clt_narrow(clt_tensor **out, clt_tensor *t, int64_t start, int64_t length);

/* Placement. clt_to returns t itself (one more reference, no copy) when it is
 * already on dev, else a copy; clt_copy_to always copies. Copies between
 * devices of one platform go device to device; others go through a pinned
 * staging buffer. Neither waits for the device: the copy is ordered after
 * t's producers by events. Only copies from or into pinned memory wait for
 * the transfer (clt_to_async in cltensor/async.h does not). */
CLT_API clt_status clt_to(clt_tensor **out, clt_tensor *t, clt_device dev);
CLT_API clt_status clt_copy_to(clt_tensor **out, clt_tensor *t, clt_device dev);
/* Copies src's elements into dst (same dtype and element count, same device);
 * CLT_ERR_INVALID_ARGUMENT when the two overlap in memory (clt_copy_(x, x)). */
CLT_API clt_status clt_copy_(clt_tensor *dst, const clt_tensor *src);

/* Reads the tensor into dst, which holds nbytes: at least
 * clt_tensor_nbytes(t), else CLT_ERR_INVALID_ARGUMENT (a synchronization
 * point: waits for the tensor's producers). */
CLT_API clt_status clt_to_host(const clt_tensor *t, void *dst, size_t nbytes);
/* The single element of a one-element tensor, as a double (a synchronization point). */
CLT_API clt_status clt_item(const clt_tensor *t, double *out);

/* Formats as the chapter prints: tensor([[1., 1., 1.]], device='gpu:0').
 * Long tensors are summarised with "...". Reads the values (a synchronization
 * point). Returns CLT_ERR_INVALID_ARGUMENT if buf is too small. */
CLT_API clt_status clt_tensor_format(const clt_tensor *t, char *buf, size_t len);
CLT_API clt_status clt_tensor_print(const clt_tensor *t, FILE *out);

/* Half precision (docs/half.md). A new tensor of dtype dt holding t's values
 * converted on t's device: float32 to float16 rounds to nearest even
 * (overflow gives inf, NaN stays NaN, small values become subnormals or
 * zero); float16 to float32 is exact. Returns t itself (one more reference)
 * when it already has dtype dt. CLT_ERR_UNSUPPORTED for int32 on either side. */
CLT_API clt_status clt_to_dtype(clt_tensor **out, clt_tensor *t, clt_dtype dt);


#ifdef __cplusplus
}
#endif
#endif
