/* Internal: SHA-256 (FIPS 180-4), for the keys and checksums of cltensor's
 * cache entries (src/core/cache.c). */
#ifndef CLT_CORE_SHA256_H
#define CLT_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct clt__sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t used;
} clt__sha256;

void clt__sha256_init(clt__sha256 *c);
void clt__sha256_update(clt__sha256 *c, const void *data, size_t n);
void clt__sha256_final(clt__sha256 *c, uint8_t out[32]);
/* The digest of n bytes in one call. */
void clt__sha256_of(const void *data, size_t n, uint8_t out[32]);

#endif
