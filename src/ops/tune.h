/* Internal: the tile sizes of the CPU GEMM kernels (gemm_cpu.h), chosen
 * per device and product shape by the tuning cache (src/ops/tune.c). */
#ifndef CLT_OPS_TUNE_H
#define CLT_OPS_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include "../tensor/tensor_internal.h"
#include "gemm_cpu.h"

/* A slot's default tile: a described device's tile_m x tile_n when given
 * (clt_plan_device_describe), else from its native float vector width w
 * (CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT): two vectors of B per depth (tn =
 * 2w: 32 columns on AVX-512, 16 on AVX2, 8 with 4-float vectors) and as many
 * rows as leave room for them: 12 rows (24 accumulators) with w = 16, whose
 * instruction set has 32 vector registers, 6 rows (12 accumulators) with
 * w = 8 or 4 (AVX2 and SSE have 16; AArch64's NEON has 32, so 6 x 8 may be
 * short of its best there: not measured). Any other width (or none
 * reported) gets 12 x 16. */
clt__gemm_tile clt__cpu_tile_default(int slot);

/* The tile a product gets without a tuning entry: the slot's default, but
 * at most 6 rows when a float32 A (not half) is read in place as is: not
 * transposed, not packed (clt__cpu_gemm_pack_a_bytes with the leading
 * dimension lda). A tile's rows of such an A are separate streams, and 12
 * row offsets did not fit in the general registers beside the loop's own
 * (the compiler extracted them from vector registers at every depth): the
 * forward x w^T, 256 x 784 -> 256, ran 69-73 GFLOP/s with 12 x 32 and 91-94
 * with 6 x 32 (one thread, AVX-512). */
clt__gemm_tile clt__gemm_tile_default(int slot, int transpose_a, size_t m, size_t n, size_t k, size_t lda, int half);

/* The tuning cache's entries: a hash table of shapes (open addressing), so
 * that loading n lines takes linear time and a lookup constant time. */
typedef struct clt__tune_entry {
    int ta, tb;
    size_t m, n, k;
    clt__gemm_tile tile;
    int used; /* 1 for a slot of the table that holds an entry */
} clt__tune_entry;

typedef struct clt__tune_table {
    clt__tune_entry *slots;
    size_t cap, count;
} clt__tune_table;

/* The bounds on a tuning cache file's content: bytes, and lines (and so
 * shapes). A file beyond either is ignored whole. */
#define CLT__TUNE_MAX_BYTES ((size_t)1 << 20)
#define CLT__TUNE_MAX_LINES 16384

/* The entry of a shape, or NULL. */
const clt__tune_entry *clt__tune_table_find(const clt__tune_table *t, int ta, int tb, size_t m, size_t n, size_t k);
/* Adds or replaces a shape's entry; 0 when out of memory or at the bound. */
int clt__tune_table_put(clt__tune_table *t, clt__tune_entry e);
void clt__tune_table_free(clt__tune_table *t);
/* Reads the content of a tuning cache file (n bytes, any bytes: untrusted)
 * into t: lines "ta tb m n k tm tn" (decimal fields separated by spaces or
 * tabs) with ta and tb 0 or 1 and a valid tile; any other line is ignored,
 * and a later line of a shape replaces an earlier one. 0 with *why and t
 * emptied when the content is beyond CLT__TUNE_MAX_BYTES or
 * CLT__TUNE_MAX_LINES (or memory runs out), else 1. Linear in n. */
int clt__tune_parse(const char *text, size_t n, clt__tune_table *t, const char **why);
/* The tuning cache's loader: the cache entry at path (src/core/cache.h,
 * content at most CLT__TUNE_MAX_BYTES) made for key, read once and parsed
 * into t as clt__tune_parse does. 1 when read; 0 when no file is there; -1
 * with why (whylen bytes) saying what failed and t emptied when the entry
 * or its content fails a check. */
int clt__tune_read(const char *path, const uint8_t key[32], clt__tune_table *t, char *why, size_t whylen);

/* The tile for op(a) (m,k) times op(b) (k,n) on a slot, a's leading
 * dimension lda, half when the operands are float16: the tuning cache's
 * entry for the shape, else (when CLT_TUNE=1) the winner of timing the
 * candidates now, which is then cached, else clt__gemm_tile_default. */
clt_status clt__gemm_tile_for(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, size_t lda,
                              int half, clt__gemm_tile *out);

#endif
