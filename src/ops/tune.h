/* Internal: the tile sizes of the CPU GEMM kernels (cl/gemm_cpu.cl), chosen
 * per device and product shape by the tuning cache (src/ops/tune.c). */
#ifndef CLT_OPS_TUNE_H
#define CLT_OPS_TUNE_H

#include <stddef.h>
#include "../tensor/tensor_internal.h"

/* Rows (tm) and columns (tn: 8, 16 or 32) of C one work-item computes. */
typedef struct clt__gemm_tile {
    int tm, tn;
} clt__gemm_tile;

/* The tile cl/gemm_cpu.cl is built with when no -DTM= -DTN= is given. */
#define CLT__TILE_BUILT_IN ((clt__gemm_tile){12, 32})

/* A slot's default tile, from its native float vector width w
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

/* The tile for op(a) (m,k) times op(b) (k,n) on a slot, a's leading
 * dimension lda, half when the operands are float16: the tuning cache's
 * entry for the shape, else (when CLT_TUNE=1) the winner of timing the
 * candidates now, which is then cached, else clt__gemm_tile_default. */
clt_status clt__gemm_tile_for(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, size_t lda,
                              int half, clt__gemm_tile *out);

/* The data cache sizes, in bytes, of the CPU this process runs on: level 1
 * and level 2 of cpu0 as Linux lists them in /sys/devices/system/cpu/cpu0/
 * cache/ (read once), else 32 KiB and 1 MiB. */
void clt__cpu_cache_sizes(size_t *l1, size_t *l2);
/* For tests: makes clt__cpu_cache_sizes report l1 and l2 bytes (both
 * nonzero), or the sizes read from sysfs again (0, 0). The GEMM's cache
 * blocking (clt__cpu_gemm_blocking) follows them from the next product. */
void clt__cpu_cache_sizes_override(size_t l1, size_t l2);

/* How the CPU kernels run a large product (op(a) (m,k) beyond twice L2,
 * n >= 512, k > kc; src/ops/dense.c): as launches over blocks of kc depths,
 * each work-item walking a row block's tiles against one panel of B (mtiles
 * at most: ceil(tiles / mtiles) blocks, which the kernel makes as even as
 * the tiles allow), A and B packed into panels. kc = 0: one launch over all
 * of k. */
typedef struct clt__gemm_blocking {
    size_t kc, mtiles;
} clt__gemm_blocking;

clt__gemm_blocking clt__cpu_gemm_blocking(size_t m, size_t n, size_t k, clt__gemm_tile tile);

/* Bytes of the row panels A is packed into for a product on the CPU kernels
 * (op(a) (m,k), a transposed when transpose_a, op(b) (k,n), leading
 * dimension of a lda), 0 when A is read in place: packing pays where rows a
 * multiple of 4 KiB apart would evict each other from the cache, for a
 * transposed A that two or more column panels read, and in blocked
 * products. Likewise the column panels of B (leading dimension ldb): a
 * transposed B is always packed, a B as is when its rows are a multiple of
 * 2 KiB apart or its panels too deep for L2 at their rows' stride (16 or
 * more deep) and in blocked products. The memory planner
 * counts the same bytes. */
int64_t clt__cpu_gemm_pack_a_bytes(int transpose_a, size_t m, size_t n, size_t k, size_t lda, clt__gemm_tile tile);
int64_t clt__cpu_gemm_pack_b_bytes(int transpose_b, size_t m, size_t n, size_t k, size_t ldb, clt__gemm_tile tile);

/* The CPU kernels with a given tile (src/ops/dense.c): c = alpha op(a) op(b)
 * + beta c, plus bias (n, may be NULL) on every row, then ReLU when relu. */
clt_status clt__cpu_gemm(int slot, clt__gemm_tile tile, int transpose_a, int transpose_b, size_t m, size_t n,
                         size_t k, float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb,
                         float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu);

#endif
