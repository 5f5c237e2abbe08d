/* The host's scalar float32 <-> float16 conversions (IEEE 754 binary16,
 * round to nearest even), below every layer that reads or writes float16
 * values on the host (tensors, formatting, checkpoints). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cltensor/half.h"

uint16_t clt_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0)); /* inf; NaN stays quiet */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    uint32_t bits, shift;
    if (e <= 0) {
        /* Subnormal: the value is bits * 2^-24; below 2^-25 it rounds to zero. */
        if (e < -10) return sign;
        man |= 0x800000;
        shift = (uint32_t)(14 - e);
        bits = man >> shift;
    } else {
        shift = 13;
        bits = ((uint32_t)e << 10) | (man >> 13);
    }
    /* Round to nearest even; a carry into the exponent is still right (up to inf). */
    uint32_t rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (bits & 1))) bits++;
    return (uint16_t)(sign | bits);
}

float clt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0x1f) x = sign | 0x7f800000 | (m << 13);
    else if (e) x = sign | ((e + 112) << 23) | (m << 13);
    else {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
