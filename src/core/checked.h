/* Internal: checked size arithmetic, the one way a byte or element count is
 * computed from outside input (shapes, model widths and depths, batch sizes,
 * planner inputs, file offsets). Each helper returns 0 and stores the result,
 * or returns -1 (and leaves *out alone) when an operand is negative or the
 * result does not fit an int64_t. docs/reliability.md states the limits. */
#ifndef CLT_CORE_CHECKED_H
#define CLT_CORE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int clt__mul_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return -1;
    *out = r;
    return 0;
}

static inline int clt__add_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return -1;
    *out = r;
    return 0;
}

/* *acc += a * b. */
static inline int clt__muladd_i64(int64_t *acc, int64_t a, int64_t b)
{
    int64_t p;
    return clt__mul_i64(a, b, &p) == 0 ? clt__add_i64(*acc, p, acc) : -1;
}

/* The element count of a shape and its byte count at elem_size bytes each:
 * every dimension is checked, also after a zero one (a (0, 2^62, 2^62) shape
 * is refused), so that no later product of dimensions can overflow. */
static inline int clt__shape_bytes(int ndim, const int64_t *shape, int64_t elem_size, int64_t *numel,
                                   int64_t *nbytes)
{
    int64_t n = 1, all = elem_size;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || clt__mul_i64(all, shape[i] ? shape[i] : 1, &all) != 0) return -1;
        n *= shape[i];
    }
    if (all < 0 || (uint64_t)all > SIZE_MAX) return -1;
    *numel = n;
    *nbytes = n * elem_size;
    return 0;
}

#endif
