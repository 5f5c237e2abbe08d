/* Internal: NumPy .npy arrays and .npz archives of them (npy.c). */
#ifndef CLT_IO_NPY_H
#define CLT_IO_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "cltensor/status.h"

#define CLT__ARRAY_MAX_DIMS 8

/* An array in C order and host byte order. */
typedef struct clt__array {
    char kind;      /* 'f' float, 'i' signed, 'u' unsigned integer, 'b' bool */
    int itemsize;   /* 1, 2, 4 or 8 bytes ('f': 4 or 8) */
    int ndim;       /* 0 (a scalar) to CLT__ARRAY_MAX_DIMS */
    int64_t shape[CLT__ARRAY_MAX_DIMS];
    int64_t numel;
    void *data;     /* numel elements, owned unless borrowed */
    int borrowed;   /* 1: data belongs to someone else (not freed) */
} clt__array;

/* Whether the bytes start as a .npy file (\x93NUMPY) or a zip archive (PK\3\4). */
int clt__npy_is_npy(const uint8_t *data, size_t len);
int clt__npy_is_zip(const uint8_t *data, size_t len);

/* Parses a whole .npy file of len bytes (named name in messages): format
 * versions 1 to 3; little- or big-endian float32/64, int8-64, uint8-64 and
 * bool; C order, or Fortran order transposed into C order.
 * Errors: CLT_ERR_FORMAT (a bad magic, version, header, shape, or a data
 * length other than the shape's, named), CLT_ERR_UNSUPPORTED (another dtype,
 * such as float16, complex, strings or objects, named). */
clt_status clt__npy_parse(clt__array *out, const char *name, const uint8_t *data, size_t len);

/* The array called `array` (the member array.npy) of a .npz archive held in
 * memory, stored or deflated. Errors: CLT_ERR_FORMAT (a malformed archive,
 * or no such member: the message lists the arrays there), those of
 * clt__npy_parse. */
clt_status clt__npz_parse(clt__array *out, const char *path, const uint8_t *data, size_t len, const char *array);

/* Element i as a double. */
double clt__array_get(const clt__array *a, int64_t i);

void clt__array_free(clt__array *a);

#endif
