/* Half precision on the host (the core layer's, src/core/half.c): float32
 * to and from IEEE float16 bits, as clt_to_dtype converts on a device. */
#ifndef CLTENSOR_HALF_H
#define CLTENSOR_HALF_H

#include "export.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* clt_to_dtype's conversions (tensor.h) on the host, bit for bit those of
 * the kernels (NaN payloads aside): rounding to nearest even, overflow to
 * inf, NaN kept, small values to subnormals or zero; float16 to float32 is
 * exact. */
CLT_API uint16_t clt_float_to_half(float f);
CLT_API float clt_half_to_float(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
