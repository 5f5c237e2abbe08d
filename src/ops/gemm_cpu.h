/* Internal: the CPU GEMM kernels (cl/gemm_cpu.cl, src/ops/gemm_cpu.c): their
 * tile, cache blocking, packed panels and launches. */
#ifndef CLT_OPS_GEMM_CPU_H
#define CLT_OPS_GEMM_CPU_H

#include <stddef.h>
#include <stdint.h>
#include "../tensor/tensor_internal.h"
#include "ops_internal.h"

/* Rows (tm) and columns (tn: 8, 16 or 32) of C one work-item computes. */
typedef struct clt__gemm_tile {
    int tm, tn;
} clt__gemm_tile;

/* The tile cl/gemm_cpu.cl is built with when no -DTM= -DTN= is given. */
#define CLT__TILE_BUILT_IN ((clt__gemm_tile){12, 32})

/* The data cache sizes, in bytes, that the CPU products on a slot follow:
 * a described device's (clt_plan_device_describe), else those of the CPU
 * this process runs on, level 1 and level 2 of cpu0 as Linux lists them in
 * /sys/devices/system/cpu/cpu0/cache/ (read once), else
 * clt_device_description_default's (32 KiB and 1 MiB). */
void clt__cpu_cache_sizes(int slot, size_t *l1, size_t *l2);
/* For tests: makes clt__cpu_cache_sizes report l1 and l2 bytes (both
 * nonzero) for every slot but a described device's, or the sizes read from
 * sysfs again (0, 0). The GEMM's cache blocking (clt__cpu_gemm_blocking)
 * follows them from the next product. */
void clt__cpu_cache_sizes_override(size_t l1, size_t l2);
/* The bytes of one way of the L1 data cache (its size over its
 * associativity: addresses that many bytes apart share a set) that the
 * packing rules follow: cpu0's level 1 data entry in sysfs (size and
 * ways_of_associativity, read once) where that is a power of two, else, and
 * on a described device, CLT__L1_WAY_DEFAULT. */
#define CLT__L1_WAY_DEFAULT ((size_t)4096)
size_t clt__cpu_l1_way(int slot);
/* For tests: makes clt__cpu_l1_way report bytes for every slot but a
 * described device's, or the CPU's own again (0). */
void clt__cpu_l1_way_override(size_t bytes);

/* How the CPU kernels run a large product on a slot (op(a) (m,k) beyond
 * twice its L2, clt__cpu_cache_sizes,
 * n >= 512, k > kc): as launches over blocks of kc depths, each work-item
 * walking a row block's tiles against one panel of B (mtiles at most:
 * ceil(tiles / mtiles) blocks, which the kernel makes as even as the tiles
 * allow), A and B packed into panels. kc = 0: one launch over all of k. */
typedef struct clt__gemm_blocking {
    size_t kc, mtiles;
} clt__gemm_blocking;

clt__gemm_blocking clt__cpu_gemm_blocking(int slot, size_t m, size_t n, size_t k, clt__gemm_tile tile);

/* Row tiles (tile.tm rows each) a work-item computes in turn against one
 * column panel in an unblocked product of op(a) (m,k) and op(b) (k,n) on a
 * slot: enough for 2^16 fmas a work-item while the launch keeps 8
 * work-items for each compute unit the device reports (1 when it reports
 * none), 1 at least. */
size_t clt__cpu_gemm_row_tiles(int slot, size_t m, size_t n, size_t k, clt__gemm_tile tile);

/* Bytes of the row panels A is packed into for a product on the CPU kernels
 * (op(a) (m,k), a transposed when transpose_a, op(b) (k,n), leading
 * dimension of a lda), 0 when A is read in place: packing pays where rows a
 * multiple of L1's way apart (clt__cpu_l1_way) would evict each other from
 * the cache, for a transposed A that more than 8 column panels read, and in
 * blocked products. Likewise the column panels of B (leading dimension
 * ldb): a transposed B is always packed, a B as is when its rows are a
 * multiple of half L1's way apart or its panels too deep for L2 at their rows' stride (16 or
 * more deep) and in blocked products. The memory planner
 * counts the same bytes. */
int64_t clt__cpu_gemm_pack_a_bytes(int slot, int transpose_a, size_t m, size_t n, size_t k, size_t lda,
                                   clt__gemm_tile tile);
int64_t clt__cpu_gemm_pack_b_bytes(int slot, int transpose_b, size_t m, size_t n, size_t k, size_t ldb,
                                   clt__gemm_tile tile);

/* The CPU kernels with a given tile: c = alpha op(a) op(b) + beta c, plus
 * bias (n, may be NULL) on every row, then ReLU when relu. */
clt_status clt__cpu_gemm(int slot, clt__gemm_tile tile, int transpose_a, int transpose_b, size_t m, size_t n,
                         size_t k, float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb,
                         float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu);
/* clt__cpu_gemm with B's panels kept in pw (may be NULL) when b is a
 * transposed float32 weight, rows ldb = k apart: packed only when b
 * changed (the linear layer's product with a model's weights). */
clt_status clt__cpu_gemm_packed(int slot, clt__gemm_tile tile, int transpose_a, int transpose_b, size_t m,
                                size_t n, size_t k, float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b,
                                size_t ldb, float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu,
                                clt__packed_weight *pw);

#endif
