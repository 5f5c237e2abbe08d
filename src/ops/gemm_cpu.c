/* The CPU GEMM kernels (cl/gemm_cpu.cl): their launches with a given tile,
 * the packing of A and B into panels, the packed weights a model keeps, the
 * cache blocking of large products, and the CPU cache sizes it follows.
 * Which tile a product gets is tune.c's; which kernels run it, dense.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "gemm_cpu.h"
#include "ops_internal.h"

/* One cache's size from sysfs ("48K", "1280K", "2M"), 0 when unreadable;
 * its associativity in *ways, 0 when unreadable. */
static size_t sysfs_cache_size(int index, int *level, int *data, int *ways)
{
    char path[96], buf[64];
    *level = 0;
    *data = 0;
    *ways = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/ways_of_associativity", index);
    FILE *w = fopen(path, "r");
    if (w) {
        if (fscanf(w, "%d", ways) != 1) *ways = 0;
        fclose(w);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%d", level) != 1) *level = 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    f = fopen(path, "r");
    if (!f) return 0;
    *data = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    f = fopen(path, "r");
    if (!f) return 0;
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!ok) return 0;
    char *end;
    unsigned long v = strtoul(buf, &end, 10);
    unsigned long mul = *end == 'K' ? 1024ul : *end == 'M' ? 1024ul * 1024 : *end == '\n' || !*end ? 1 : 0;
    /* CLT__CACHE_MIN_BYTES to CLT__CACHE_MAX_BYTES, else not believed. */
    if (end == buf || mul == 0 || v == 0 || v > CLT__CACHE_MAX_BYTES / mul || v * mul < CLT__CACHE_MIN_BYTES) return 0;
    return (size_t)(v * mul);
}

static size_t cache_l1, cache_l2, cache_l1_way = CLT__L1_WAY_DEFAULT;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* L1's way, size / ways, where that is a power of two from 64 bytes to the
 * size, else 0. */
static size_t way_bytes(size_t size, int ways)
{
    size_t way = ways > 0 && size % (size_t)ways == 0 ? size / (size_t)ways : 0;
    return way >= 64 && (way & (way - 1)) == 0 ? way : 0;
}

static void read_caches(void)
{
    clt_device_description d = clt_device_description_default(CLT_DEVICE_CPU);
    cache_l1 = (size_t)d.l1_cache_bytes;
    cache_l2 = (size_t)d.l2_cache_bytes;
    for (int i = 0; i < 8; i++) {
        int level, data, ways;
        size_t size = sysfs_cache_size(i, &level, &data, &ways);
        if (!size || !data) continue;
        if (level == 1) cache_l1 = size;
        if (level == 1 && way_bytes(size, ways)) cache_l1_way = way_bytes(size, ways);
        if (level == 2) cache_l2 = size;
    }
}

/* Set by tests only (clt__cpu_cache_sizes_override,
 * clt__cpu_l1_way_override); 0 when unset. */
static _Atomic size_t forced_l1, forced_l2, forced_way;

void clt__cpu_cache_sizes(int slot, size_t *l1, size_t *l2)
{
    const clt__slot *s = clt__slot_get(slot);
    if (s && s->cache_l1 && s->cache_l2) { /* a described device's */
        *l1 = s->cache_l1;
        *l2 = s->cache_l2;
        return;
    }
    pthread_once(&cache_once, read_caches);
    size_t f1 = forced_l1, f2 = forced_l2;
    *l1 = f1 && f2 ? f1 : cache_l1;
    *l2 = f1 && f2 ? f2 : cache_l2;
}

void clt__cpu_cache_sizes_override(size_t l1, size_t l2)
{
    forced_l1 = l1;
    forced_l2 = l2;
}

size_t clt__cpu_l1_way(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    if (s && s->cache_l1 && s->cache_l2) return CLT__L1_WAY_DEFAULT; /* a described device's */
    pthread_once(&cache_once, read_caches);
    size_t f = forced_way;
    return f ? f : cache_l1_way;
}

void clt__cpu_l1_way_override(size_t bytes) { forced_way = bytes; }

/* The program of the kernels on operands of dtype t: the float16 kernels
 * are a program of their own (cl/gemm_cpu_f16.cl). */
static const char *cpu_program(clt_dtype t) { return t == CLT_FLOAT16 ? "gemm_cpu_f16" : "gemm_cpu"; }

/* Packs op(x) for the CPU kernels, k depths from element offset off of x
 * (x's own offset included), into packed, made when *packed is NULL:
 * pack_a_f32 (x is A as is) or pack_at_f32 (A transposed) into panels of
 * tile.tm rows; pack_bt_f32 or pack_bt_f16 (x is B transposed), or
 * pack_b_f32 (x is B as is), into float32 panels of tile.tn columns. */
static clt_status cpu_pack(int slot, const char *options, int is_a, int trans, size_t rows, size_t k, size_t width,
                           const clt_tensor *x, size_t off, size_t ldx, clt_tensor **packed)
{
    size_t panels = (rows + width - 1) / width, local[] = {1};
    int64_t shape[] = {(int64_t)(panels * k * width)};
    if (!*packed) CLT_TRY(clt__tensor_new(packed, slot, CLT_FLOAT32, 1, shape));
    clt__buf xb = clt__tensor_buf(x), pb = clt__tensor_buf(*packed);
    xb.off += off;
    cl_ulong lx = ldx, ur = rows, uk = k;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(lx), CLT_ARG(pb.mem),
                       CLT_ARG(pb.off), CLT_ARG(ur),     CLT_ARG(uk)};
    const char *name = is_a ? (trans ? "pack_at_f32" : "pack_a_f32")
                       : !trans ? "pack_b_f32"
                       : x->dtype == CLT_FLOAT16 ? "pack_bt_f16"
                                                 : "pack_bt_f32";
    return clt__launch_opts(slot, cpu_program(x->dtype), options, name, 7, args, 1, &panels, local, *packed);
}

/* Blocked when A is more than twice the size of L2, k spans more than one
 * block and there are at least BLOCK_MIN_N columns: then each tile would
 * stream its rows of A from L3 for each of at least 512 / TN column panels
 * (16 with 32-column tiles). Below twice L2 the packing passes cost more
 * than they save with every core at work: with two threads here, against
 * OpenBLAS in the same process, 512^3 ran at 0.73-0.77x unblocked and
 * 0.53-0.60x blocked, 640^3 0.99x and 0.58x, 768^3 0.87x and 0.82x, but
 * 1024^3 0.51-0.52x and 0.58-0.75x (with one thread 512^3 was at 0.85x
 * unblocked and 0.92x blocked; all with kc = 384), and a
 * capstone's forward at width 2048 (x w^T, 256 x 2048 x 2048) ran at
 * 0.85-0.86x OpenBLAS unblocked against 0.73-0.75x blocked. (With fewer
 * the extra launches and packing passes cost more than they save: the
 * capstone's forward 256 x 784 -> 256 measured 10% slower blocked.) A block
 * of depths is kc = L1 / (min(TN, 16) floats) deep: a tile's panel of B,
 * kc x TN floats, is then one L1 (16 columns) or two (32), read once per
 * row tile, and fewer blocks mean fewer packing launches and passes over C.
 * On this project's 48 KiB L1 with 12 x 32 tiles, alternating builds four
 * times (eight for 2048^3 and 4096 x 4096 x 1024 with one thread), kc 768
 * against 384 (half as deep) took 1024^3 from 0.68x to 0.80x OpenBLAS with
 * two threads, 2048^3 from 0.89x to 0.96x, 4096^3 from 0.91x to 0.97x,
 * 4096 x 4096 x 1024 from 0.88x to 0.95x (medians), and 1024^3 from 0.85x
 * to 0.96x with one thread, the others the same with one thread; 192 was
 * slower than 384. A block of rows keeps its A
 * (mtiles x tm x kc floats) in a quarter of L2 while it visits every
 * column panel, the rest of L2 holding the panel of B that streams through
 * it (kc x tn floats, one L1 or two) and the lines of C and of the next
 * block's A that the tiles touch: on a Zen 5 (1 MiB L2, 12 x 32 tiles, kc
 * 768) 2048^3 with one thread went from a median 0.92-0.96x OpenBLAS with
 * half of L2 (14 tiles) to 0.96-0.97x with a quarter (7), in three sets of
 * five or six alternating runs; 1024^3 and 4096 x 4096 x 1024 stayed
 * within the runs' spread. There are ceil(tiles / mtiles) row blocks,
 * which the kernel makes as even as the tiles allow (gemm_cpu.cl), so that
 * no last block of a tile or two idles a thread. */
#define BLOCK_MIN_N 512
clt__gemm_blocking clt__cpu_gemm_blocking(int slot, size_t m, size_t n, size_t k, clt__gemm_tile tile)
{
    clt__gemm_blocking bl = {0, 0};
    size_t l1, l2;
    clt__cpu_cache_sizes(slot, &l1, &l2);
    size_t tn = tile.tn < 16 ? (size_t)tile.tn : 16, kc = l1 / (tn * sizeof(float)) / 16 * 16;
    if (kc < 64) kc = 64;
    if (k <= kc || n < BLOCK_MIN_N || m > SIZE_MAX / k / sizeof(float) || m * k * sizeof(float) <= 2 * l2) return bl;
    bl.kc = kc;
    bl.mtiles = l2 / 4 / (kc * sizeof(float)) / (size_t)tile.tm;
    if (bl.mtiles < 1) bl.mtiles = 1;
    return bl;
}

#define AT_IN_PLACE_PANELS 8
int64_t clt__cpu_gemm_pack_a_bytes(int slot, int transpose_a, size_t m, size_t n, size_t k, size_t lda,
                                   clt__gemm_tile tile)
{
    size_t tm = (size_t)tile.tm, kc = clt__cpu_gemm_blocking(slot, m, n, k, tile).kc;
    if (kc) return (int64_t)((m + tm - 1) / tm * tm * kc * sizeof(float));
    if (k < 16) return 0;
    /* Rows a multiple of L1's way apart (clt__cpu_l1_way: 4 KiB on the
     * CPUs measured): a tile's rows fall into the same cache sets and evict
     * each other. A transposed A read by more than AT_IN_PLACE_PANELS
     * column panels: each depth's tm values sit lda apart from the last
     * depth's, one or two cache lines a depth where a packed panel's
     * depths are adjacent: a saving each panel's pass makes again, while
     * the packing pass and its launch are paid once. A capstone's dw = dy^T x
     * (256 x 784 x 256, lda = 256 floats, 25 panels) ran 0.75x OpenBLAS in
     * place against 0.82-0.85x packed on an Ice Lake, and the same on a
     * Zen 5 (0.94x and 0.955x, one thread); 256 x 512 x 256 (16 panels)
     * 0.90x and 0.92x; but 256^3 (8 panels) 0.99-1.02x in place against
     * 0.92-0.93x packed (medians of 5 to 7 alternating runs, one thread),
     * and again 0.97x in place against 0.92x packed (per CPU second, one
     * thread, medians of 6 alternating runs at load 2-3).
     * A as is measured no faster packed (the forward x w^T lost what the
     * pass cost). */
    int far = lda % (clt__cpu_l1_way(slot) / sizeof(float)) == 0;
    if (!far && !(transpose_a && n > AT_IN_PLACE_PANELS * (size_t)tile.tn)) return 0;
    return (int64_t)((m + tm - 1) / tm * tm * k * sizeof(float));
}

/* A work-item of an unblocked product computes enough of its column
 * panel's row tiles for ITEM_MIN_FMAS fmas, as long as the launch keeps
 * ITEMS_PER_UNIT work-items for each compute unit the device reports: a
 * work-group costs the driver the same whatever it computes, and the order
 * in which a thread meets the tiles stays the same (row tiles of one panel
 * in turn). pocl on a Zen 5 (per CPU second, one thread, medians of 5
 * alternating runs): dW = dh^T x of a 784-64-10 MLP at batch 32 (64 x 784
 * x 32, 150 work-items of 12 x 32 x 32 fmas) ran at 0.67x OpenBLAS with a
 * tile a work-item and 0.75x with its 6 tiles in one; 256^3 (49,152 fmas
 * a 6 x 32 tile) showed no difference beyond the runs' spread. With 8 work-
 * items a unit, one more on a thread is an eighth of its share at most. */
#define ITEM_MIN_FMAS ((size_t)1 << 16)
#define ITEMS_PER_UNIT 8
size_t clt__cpu_gemm_row_tiles(int slot, size_t m, size_t n, size_t k, clt__gemm_tile tile)
{
    const clt__slot *s = clt__slot_get(slot);
    cl_uint units = s && s->compute_units ? s->compute_units : 1;
    size_t tm = (size_t)tile.tm, tn = (size_t)tile.tn, tiles = (m + tm - 1) / tm, panels = (n + tn - 1) / tn;
    /* tm x tn <= 32 x 32 and k capped: no overflow. */
    size_t tile_fmas = tm * tn * (k < ITEM_MIN_FMAS ? k : ITEM_MIN_FMAS);
    if (tile_fmas == 0 || panels == 0) return 1;
    size_t want = (ITEM_MIN_FMAS + tile_fmas - 1) / tile_fmas;
    size_t blocks = ((size_t)units * ITEMS_PER_UNIT + panels - 1) / panels, most = (tiles + blocks - 1) / blocks;
    size_t rt = want < most ? want : most;
    return rt > 1 ? rt : 1;
}

int64_t clt__cpu_gemm_pack_b_bytes(int slot, int transpose_b, size_t m, size_t n, size_t k, size_t ldb,
                                   clt__gemm_tile tile)
{
    size_t tn = (size_t)tile.tn, kc = clt__cpu_gemm_blocking(slot, m, n, k, tile).kc;
    if (kc) return (int64_t)((n + tn - 1) / tn * tn * kc * sizeof(float));
    /* A B used as is whose rows are a multiple of half L1's way apart: a
     * panel's depths fall into two cache sets and evict each other (in a
     * 4 KiB way, 64 sets of 64 bytes, rows 2 KiB apart use 2 of them). 512^3 ran at
     * 0.59-0.66x OpenBLAS in place with one thread, 0.81-1.08x packed.
     * Likewise in L2 for a deep panel: rows whose stride has p bytes as its
     * largest power-of-two factor use at most 64/p of L2's sets of 64-byte
     * lines, which hold L2 / p of them, so a panel's k rows stay in L2 only
     * while k p <= L2. The capstone's dw at
     * batch 2048 (dy^T h, 256 x 256 x 2048, rows of h 1 KiB apart) went
     * from a median 0.57x OpenBLAS to 0.79x with two threads and from
     * 0.56x to 0.77x with one, packed (8 alternating runs each). */
    size_t l1, l2;
    clt__cpu_cache_sizes(slot, &l1, &l2);
    size_t pow2 = (ldb * sizeof(float)) & (~(ldb * sizeof(float)) + 1);
    int far = ldb % (clt__cpu_l1_way(slot) / 2 / sizeof(float)) == 0 || (k > 0 && pow2 > l2 / k);
    if (k == 0 || (!transpose_b && (!far || k < 16))) return 0;
    return (int64_t)((n + tn - 1) / tn * tn * k * sizeof(float));
}

/* One launch of the product kernel over kb depths: A from ab, B from bb
 * (element offsets already at the first depth), rt row tiles a work-item
 * when rt > 1, in a range of (1, column panels, row blocks), or (row
 * blocks, column panels, 1) when down. */
typedef struct gemm_launch {
    clt__buf ab, bb;
    cl_ulong lda, ldb, kb, rt;
    float beta;
    cl_uint flags;
    int down; /* row blocks in dimension 0: consecutive work-items go down one panel of B */
} gemm_launch;

static clt_status cpu_gemm_launch(int slot, const char *options, clt__gemm_tile tile, const char *name, size_t m,
                                  size_t n, float alpha, clt_tensor *c, size_t ldc, const clt_tensor *bias,
                                  gemm_launch g)
{
    clt__buf cb = clt__tensor_buf(c), biasb = bias ? clt__tensor_buf(bias) : cb;
    cl_ulong lc = ldc, um = m, un = n;
    clt__arg args[] = {CLT_ARG(g.ab.mem),  CLT_ARG(g.ab.off), CLT_ARG(g.lda),  CLT_ARG(g.bb.mem), CLT_ARG(g.bb.off),
                       CLT_ARG(g.ldb),     CLT_ARG(cb.mem),   CLT_ARG(cb.off), CLT_ARG(lc),       CLT_ARG(um),
                       CLT_ARG(un),        CLT_ARG(g.kb),     CLT_ARG(alpha),  CLT_ARG(g.beta),   CLT_ARG(biasb.mem),
                       CLT_ARG(biasb.off), CLT_ARG(g.flags),  CLT_ARG(g.rt)};
    size_t tiles = (m + (size_t)tile.tm - 1) / (size_t)tile.tm, rt = (size_t)g.rt, blocks = (tiles + rt - 1) / rt;
    size_t global[] = {rt > 1 && !g.down ? 1 : blocks, (n + (size_t)tile.tn - 1) / (size_t)tile.tn,
                       rt > 1 && !g.down ? blocks : 1};
    size_t local[] = {1, 1, 1};
    return clt__launch_opts(slot, cpu_program(c->dtype), options, name, 18, args, rt > 1 ? 3 : 2, global, local, c);
}

void clt__packed_weight_drop(clt__packed_weight *pw)
{
    if (!pw) return;
    clt_tensor_release(pw->panels);
    memset(pw, 0, sizeof *pw);
}

static int packed_current(const clt__packed_weight *pw, const clt_tensor *w, size_t n, size_t k, size_t tn)
{
    return pw->panels && pw->version == clt__tensor_version(w) && pw->offset == w->offset && pw->n == n &&
           pw->k == k && pw->tn == (int)tn;
}

/* w^T's panels (w is (n, k), rows k apart) in pw: packed again unless
 * packed_current, into the same buffer when it has the size and device. */
static clt_status packed_weight(int slot, const char *options, size_t tn, const clt_tensor *w, size_t n, size_t k,
                                clt__packed_weight *pw)
{
    if (packed_current(pw, w, n, k, tn)) return CLT_OK;
    size_t need = (n + tn - 1) / tn * tn * k;
    if (pw->panels && ((size_t)pw->panels->numel != need || pw->panels->st->slot != slot)) {
        clt_tensor_release(pw->panels);
        pw->panels = NULL;
    }
    pw->version = 0;
    if (!pw->panels) {
        int64_t shape[] = {(int64_t)need};
        CLT_TRY(clt__tensor_new(&pw->panels, slot, CLT_FLOAT32, 1, shape));
        clt_status s = clt_tensor_set_category(pw->panels, CLT_MEM_WEIGHTS);
        if (s != CLT_OK) {
            clt__packed_weight_drop(pw);
            return s;
        }
    }
    CLT_TRY(cpu_pack(slot, options, 0, 1, n, k, tn, w, 0, k, &pw->panels));
    pw->version = clt__tensor_version(w);
    pw->offset = w->offset;
    pw->n = n;
    pw->k = k;
    pw->tn = (int)tn;
    pw->packs++;
    return CLT_OK;
}

/* The register-tiled kernels; a transposed B is packed into panels first,
 * and so is a float32 B as is, k at least 16, when its rows are a multiple
 * of half L1's way apart or a panel's k rows would not stay in L2 for their stride
 * (clt__cpu_gemm_pack_b_bytes), and a float32 A, k at least
 * 16, when its rows are a multiple of L1's way apart or it is transposed and
 * read by more than 8 column panels (clt__cpu_gemm_pack_a_bytes). A large float32
 * product (clt__cpu_gemm_blocking) runs one launch per block of kc depths,
 * each after packing that block of A and of B (buffers of kc depths, reused
 * block after block: the queue runs in order), the first with the caller's
 * beta and the bias, the rest adding to c (beta 1), the ReLU in the last.
 * bias (n), when not NULL, is added to every row, then ReLU when relu is set.
 * Float16 operands (all of a, b, c and bias) take the _f16 kernels,
 * unblocked. A tile other than the built-in 12 x 32 is a program built with
 * its own -DTM= -DTN=, except 6 x 32 over a float32 A read in place as is,
 * whose kernels the built-in program holds (gemm_nn6_f32, gemm_np6_f32).
 * With pw (float32, b transposed and rows ldb = k apart), B's
 * panels are pw's, whole depth, packed only when b changed (packed_weight);
 * a blocked product reads each block of depths from them in place. */
clt_status clt__cpu_gemm_packed(int slot, clt__gemm_tile tile, int transpose_a, int transpose_b, size_t m,
                                size_t n, size_t k, float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b,
                                size_t ldb, float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu,
                                clt__packed_weight *pw)
{
    int half = a->dtype == CLT_FLOAT16;
    if (half || !transpose_b || ldb != k) pw = NULL;
    clt__gemm_blocking bl = {0, 0};
    if (!half) bl = clt__cpu_gemm_blocking(slot, m, n, k, tile);
    /* names[set][A as is, transposed, packed][B in place, packed]: set 0
     * float32, 1 float16, 2 the built-in program's 6-row float32 kernels. */
    static const char *const names[3][3][2] = {
        {{"gemm_nn_f32", "gemm_np_f32"}, {"gemm_tn_f32", "gemm_tp_f32"}, {"gemm_pn_f32", "gemm_pp_f32"}},
        {{"gemm_nn_f16", "gemm_np_f16"}, {"gemm_tn_f16", "gemm_tp_f16"}},
        {{"gemm_nn6_f32", "gemm_np6_f32"}}};
    /* Blocked products always pack A, so a_bytes == 0 means A is read in place. */
    int64_t a_bytes = half ? 0 : clt__cpu_gemm_pack_a_bytes(slot, transpose_a, m, n, k, lda, tile);
    int in_place = !half && !transpose_a && a_bytes == 0;
    int set = half, built_in = tile.tm == CLT__TILE_BUILT_IN.tm && tile.tn == CLT__TILE_BUILT_IN.tn;
    if (in_place && tile.tm == 6 && tile.tn == CLT__TILE_BUILT_IN.tn) set = 2, built_in = 1;
    char opts[48];
    const char *options = NULL;
    if (!built_in) {
        snprintf(opts, sizeof opts, "-DTM=%d -DTN=%d", tile.tm, tile.tn);
        options = opts;
    }
    clt_tensor *pa = NULL, *pb = NULL;
    clt_status s = CLT_OK;
    if (pw) {
        CLT_TRY(packed_weight(slot, options, (size_t)tile.tn, b, n, k, pw));
        pb = clt_tensor_retain(pw->panels);
    }
    if (bl.kc) {
        size_t tm = (size_t)tile.tm, tn = (size_t)tile.tn;
        for (size_t p0 = 0; s == CLT_OK && p0 < k; p0 += bl.kc) {
            size_t kb = k - p0 < bl.kc ? k - p0 : bl.kc;
            s = cpu_pack(slot, options, 1, transpose_a, m, kb, tm, a, transpose_a ? p0 * lda : p0, lda, &pa);
            if (s == CLT_OK && !pw)
                s = cpu_pack(slot, options, 0, transpose_b, n, kb, tn, b, transpose_b ? p0 : p0 * ldb, ldb, &pb);
            if (s != CLT_OK) break;
            /* The panels are kb deep, their leading dimension; pw's are k
             * deep, the block starting p0 depths in. */
            clt__buf bb = clt__tensor_buf(pb);
            if (pw) bb.off += p0 * tn;
            gemm_launch g = {clt__tensor_buf(pa), bb, kb, pw ? k : kb, kb, bl.mtiles, p0 == 0 ? beta : 1.0f,
                             (bias != NULL && p0 == 0) | (relu && p0 + kb == k ? 2u : 0u), 0};
            s = cpu_gemm_launch(slot, options, tile, names[0][2][1], m, n, alpha, c, ldc, bias, g);
        }
    } else {
        if (a_bytes > 0)
            s = cpu_pack(slot, options, 1, transpose_a, m, k, (size_t)tile.tm, a, 0, lda, &pa);
        int pack_b = half ? transpose_b : clt__cpu_gemm_pack_b_bytes(slot, transpose_b, m, n, k, ldb, tile) > 0;
        if (s == CLT_OK && !pw && pack_b)
            s = cpu_pack(slot, options, 0, transpose_b, n, k, (size_t)tile.tn, b, 0, ldb, &pb);
        /* A packed panel's leading dimension is its depth. */
        gemm_launch g = {clt__tensor_buf(pa ? pa : a),
                         clt__tensor_buf(pb ? pb : b),
                         pa ? k : lda,
                         pb ? k : ldb,
                         k,
                         clt__cpu_gemm_row_tiles(slot, m, n, k, tile),
                         beta,
                         (bias != NULL) | (relu ? 2u : 0u),
                         1};
        if (s == CLT_OK)
            s = cpu_gemm_launch(slot, options, tile, names[set][pa ? 2 : transpose_a != 0][pb != NULL], m, n, alpha, c,
                                ldc, bias, g);
    }
    /* The allocator reuses packed memory only after the queue's pending work. */
    clt_tensor_release(pa);
    clt_tensor_release(pb);
    return s;
}

clt_status clt__cpu_gemm(int slot, clt__gemm_tile tile, int transpose_a, int transpose_b, size_t m, size_t n,
                         size_t k, float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb,
                         float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu)
{
    return clt__cpu_gemm_packed(slot, tile, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                bias, relu, NULL);
}
