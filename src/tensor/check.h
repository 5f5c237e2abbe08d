/* Internal: the argument checks every layer from the tensors up shares, so
 * that a NULL argument, a tensor on the wrong device, of the wrong dtype or
 * shape fails the same way everywhere: a status and a message that starts
 * with the public call (`op`) and names the argument (`what`), its device,
 * dtype or shape. The NULL check itself, clt__need, is core's
 * (src/core/error.h), so the layers below the tensors share it too. */
#ifndef CLT_TENSOR_CHECK_H
#define CLT_TENSOR_CHECK_H

#include <stddef.h>
#include "../core/error.h"
#include "cltensor/tensor.h"

/* CLT_ERR_INVALID_ARGUMENT when t is NULL, CLT_ERR_UNSUPPORTED naming both
 * dtypes unless t is of dtype dt. */
clt_status clt__need_dtype(const char *op, const char *what, const clt_tensor *t, clt_dtype dt);
/* clt__need_dtype for float32, int32 and float16. */
clt_status clt__need_f32(const char *op, const char *what, const clt_tensor *t);
clt_status clt__need_i32(const char *op, const char *what, const clt_tensor *t);
clt_status clt__need_f16(const char *op, const char *what, const clt_tensor *t);
/* CLT_ERR_INVALID_ARGUMENT when either is NULL, CLT_ERR_UNSUPPORTED unless a
 * and b are both float32 or both float16. */
clt_status clt__need_float_pair(const char *op, const char *what_a, const clt_tensor *a, const char *what_b,
                                const clt_tensor *b);

/* "(2, 3)" into buf; returns buf. */
const char *clt__shape_str(const clt_tensor *t, char *buf, size_t len);
/* CLT_ERR_SHAPE unless t has two dimensions. */
clt_status clt__need_2d(const char *op, const char *what, const clt_tensor *t);
/* CLT_ERR_SHAPE naming both shapes unless a and b have exactly the same
 * shape (equal element counts are not enough) or are both one element (a
 * loss of shape () adds into a (1) total). */
clt_status clt__same_shape(const char *op, const clt_tensor *a, const clt_tensor *b);

/* CLT_ERR_DEVICE_MISMATCH naming both devices unless a and b share a device. */
clt_status clt__same_device(const char *op, const clt_tensor *a, const clt_tensor *b);
/* CLT_ERR_DEVICE_MISMATCH unless t is on dev: "op: what is on D1 but held
 * on D2; move one with mover", as in "the model's parameters are" and
 * "clt_to or clt_model_to". */
clt_status clt__need_device(const char *op, const char *what, const clt_tensor *t, clt_device dev, const char *held,
                            const char *mover);

#endif
