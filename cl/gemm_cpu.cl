/* GEMM shaped for CPU devices (pocl): no local memory, no barriers,
 * work-groups of one work-item. Each work-item owns a TM x TN tile of C in
 * registers (NV accumulators of VW floats per row, VW = min(TN, 16), NV =
 * TN / VW) and streams the whole K loop through it: per depth, NV vector
 * loads of a row of B and TM x NV broadcast fmas. TM (rows) and TN (8, 16 or
 * 32 columns) are build options so that `clt tune` can time other tiles and
 * each device gets the default that fits its vector registers
 * (clt__cpu_tile_default); without options they are 12 x 32.
 * C = alpha op(A) op(B) + beta C (+ bias on every row when flags bit 0 is
 * set; then ReLU when bit 1 is, NaN passing through as in clt_relu),
 * row-major; op(A) is (M,K), op(B) is (K,N), bias is (N).
 * Dimension 0 runs over row tiles, so consecutive work-items read the same
 * TN columns of B while they are in cache. With rt 1 a work-item computes
 * row tile get_global_id(2) * get_global_size(0) + get_global_id(0). With
 * rt > 1 it computes the tiles of row block b, that index, in turn, all
 * against one panel of B, out of blocks = get_global_size(0) x
 * get_global_size(2) row blocks as even as the tiles allow (block b holds
 * tiles b tiles / blocks up to (b + 1) tiles / blocks, at most rt of
 * them). Large products (src/ops/gemm_cpu.c) run one launch per block of
 * depths with a range of (1, column panels, row blocks), so that a block's
 * A stays in L2 while it visits every column panel, and the panel of B in
 * L1 while a work-item walks down the block; smaller ones a range of (row
 * blocks, column panels), a work-item's tiles being few (a work-group
 * costs the driver the same whatever it computes).
 *
 * B (K,N) is read in place; a transposed B, (N,K), whose TN columns would be
 * TN strided streams, is packed first by pack_bt_f32 into panels of TN
 * columns, (ceil(N/TN), K, TN) with zero columns past N; pack_b_f32 packs a
 * B used as is into the same panels (large products).
 *
 * The _f16 kernels take float16 A, B, C and bias (B packed: float32 panels,
 * by pack_bt_f16): read with vload_half(N), written with vstore_half(N)
 * (round to nearest even, as f32_to_f16 in half.cl), with no arithmetic on
 * half, so without cl_khr_fp16. Accumulation is the float32 kernels' own, so
 * a result is the float32 kernel's on the widened operands, rounded once.
 * They are built only where GEMM_F16 is defined, which leaves out the
 * float32 ones: cl/gemm_cpu_f16.cl, a program of its own, defines it and
 * includes this file, so that a float32 model's step never compiles them. */

#ifndef TM
#define TM 12
#define TILE_BUILT_IN
#endif
#ifndef TN
#define TN 32
#endif
#if TN == 32
#define VW 16
#else
#define VW TN
#endif
#define NV (TN / VW)

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define floatv CAT(float, VW)
#define vloadv CAT(vload, VW)
#define vstorev CAT(vstore, VW)
#define vload_halfv CAT(vload_half, VW)
#define vstore_halfv CAT(vstore_half, VW)

/* Element access by storage type (float or half): one value, or VW. */
#define LD_float(p, i) (p)[i]
#define LD_half(p, i) vload_half(i, p)
#define LDV_float(p, i) vloadv(i, p)
#define LDV_half(p, i) vload_halfv(i, p)
#define ST_float(v, p, i) ((p)[i] = (v))
#define ST_half(v, p, i) vstore_half(v, i, p)
#define STV_float(v, p, i) vstorev(v, i, p)
#define STV_half(v, p, i) vstore_halfv(v, i, p)

/* A is (M,K) (N) or (K,M) (T); arow[r] is the offset of the tile's row r.
 * Rows past M read row M-1 and are not stored. A packed (P) by pack_a_f32
 * or pack_at_f32 is (ceil(M/TM), K, TM): the tile's TM values per depth are adjacent, and
 * lda is the panel's depth (the product's k). */
#define ROW_N(i) ((i) * lda)
#define ROW_T(i) (i)
#define ROW_P(i) 0
#define A_N(p, r) a[arow[r] + (p)]
#define A_T(p, r) a[(p) * lda + arow[r]]
#define A_P(p, r) a[(p) * TM + (r)]
#define A_ROWS ao
#define A_PANEL ao + it * lda * TM

/* acc[r][v] += a(p, r) * bv[v]: the tile's TM x NV fmas of one depth. */
#define FMA_ONE(AV, r)                                                                                          \
    {                                                                                                           \
        floatv av_ = (floatv)(AV);                                                                              \
        _Pragma("unroll") for (int v = 0; v < NV; v++) acc[r][v] = fma(av_, bv[v], acc[r][v]);                  \
    }
#define FMA_ROWS(AT) _Pragma("unroll") for (int r = 0; r < TM; r++) FMA_ONE(AT(p, r), r)

/* BV(TB) makes depth p's row of B, bv[NV]. B in place (ROWS): the last, partial
 * tile of columns loads its whole vectors as they are and the rest through
 * bt, a zeroed copy. B packed (PANEL): the
 * tile's panel is contiguous and zero-padded, ldb (the product's k) deep. */
#define B_ROWS bp + bo + j0
#define B_PANEL bp + bo + jp * ldb * TN
#define BV_ROWS(TB)                                                                                             \
    floatv bv[NV];                                                                                              \
    _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = LDV_##TB(b + p * ldb, v);
#define BV_ROWS_PART(TB)                                                                                        \
    floatv bv[NV];                                                                                              \
    _Pragma("unroll") for (int v = 0; v < NV; v++) {                                                            \
        if ((ulong)(v + 1) * VW <= n - j0) {                                                                    \
            bv[v] = LDV_##TB(b + p * ldb, v);                                                                   \
        } else {                                                                                                \
            for (ulong q = (ulong)v * VW; q < n - j0; q++) bt[q] = LD_##TB(b, p * ldb + q);                     \
            bv[v] = vloadv(v, bt);                                                                              \
        }                                                                                                       \
    }
#define BV_PANEL(TB)                                                                                            \
    floatv bv[NV];                                                                                              \
    _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = vloadv(p * NV + v, b);

/* The K loops of the float32 kernels. */
#define K_LOOP_ROWS(AT, TB)                                                                                     \
    if (j0 + TN <= n) {                                                                                         \
        for (ulong p = 0; p < k; p++) {                                                                         \
            BV_ROWS(TB)                                                                                         \
            FMA_ROWS(AT)                                                                                        \
        }                                                                                                       \
    } else {                                                                                                    \
        float bt[TN];                                                                                           \
        for (int q = 0; q < TN; q++) bt[q] = 0.0f;                                                              \
        for (ulong p = 0; p < k; p++) {                                                                         \
            BV_ROWS_PART(TB)                                                                                    \
            FMA_ROWS(AT)                                                                                        \
        }                                                                                                       \
    }
#define K_LOOP_PANEL(AT, TB)                                                                                    \
    for (ulong p = 0; p < k; p++) {                                                                             \
        BV_PANEL(TB)                                                                                            \
        FMA_ROWS(AT)                                                                                            \
    }

/* Float16 A: pocl's scalar vload_half is a software conversion and its
 * vector forms one instruction, so A is converted in vectors, into floats
 * the depth loop then reads; the fmas and their order are the float32
 * kernels'. */

/* A as is: 8 depths of each row at a time through vload_half8 (the last,
 * partial block one by one). */
#define HK_N(BV, TB)                                                                                            \
    for (ulong p0 = 0; p0 < k; p0 += 8) {                                                                       \
        ulong pc = min((ulong)8, k - p0);                                                                       \
        float at[TM][8];                                                                                        \
        if (pc == 8) {                                                                                          \
            _Pragma("unroll") for (int r = 0; r < TM; r++) vstore8(vload_half8(0, a + arow[r] + p0), 0, at[r]); \
        } else {                                                                                                \
            for (int r = 0; r < TM; r++)                                                                        \
                for (ulong q = 0; q < pc; q++) at[r][q] = vload_half(arow[r] + p0 + q, a);                      \
        }                                                                                                       \
        for (ulong q = 0; q < pc; q++) {                                                                        \
            ulong p = p0 + q;                                                                                   \
            BV(TB)                                                                                              \
            _Pragma("unroll") for (int r = 0; r < TM; r++) FMA_ONE(at[r][q], r)                                 \
        }                                                                                                       \
    }

/* A transposed: per depth the tile's TM rows are adjacent, read through one
 * vload_half16 (rows past the tile unused) where TM <= 16 and those 16 rows
 * exist, else one by one. */
#define HK_T(BV, TB)                                                                                            \
    if (TM <= 16 && i0 + 16 <= m) {                                                                             \
        for (ulong p = 0; p < k; p++) {                                                                         \
            float av[16];                                                                                       \
            vstore16(vload_half16(0, a + p * lda + i0), 0, av);                                                 \
            BV(TB)                                                                                              \
            _Pragma("unroll") for (int r = 0; r < TM; r++) FMA_ONE(av[r], r)                                    \
        }                                                                                                       \
    } else {                                                                                                    \
        for (ulong p = 0; p < k; p++) {                                                                         \
            BV(TB)                                                                                              \
            _Pragma("unroll") for (int r = 0; r < TM; r++) FMA_ONE(vload_half(p * lda + arow[r], a), r)         \
        }                                                                                                       \
    }

/* The K loops of the float16 kernels, HK one of the above. */
#define K_LOOP_ROWS_H(HK, TB)                                                                                   \
    if (j0 + TN <= n) {                                                                                         \
        HK(BV_ROWS, TB)                                                                                         \
    } else {                                                                                                    \
        float bt[TN];                                                                                           \
        for (int q = 0; q < TN; q++) bt[q] = 0.0f;                                                              \
        HK(BV_ROWS_PART, TB)                                                                                    \
    }
#define K_LOOP_PANEL_H(HK, TB) HK(BV_PANEL, TB)

/* TA, TB, TC: the storage types of A, B (float when packed), and C and bias. */
#define GEMM_KERNEL(name, TA, TB, TC, ROW, AT, ASTART, BSTART, KLOOP)                                           \
    __kernel void name(__global const TA *a0, ulong ao, ulong lda, __global const TB *bp, ulong bo, ulong ldb,  \
                       __global TC *c0, ulong co, ulong ldc, ulong m, ulong n, ulong k, float alpha,            \
                       float beta, __global const TC *bias, ulong biaso, uint flags, ulong rt)                  \
    {                                                                                                           \
        ulong jp = get_global_id(1), j0 = jp * TN;                                                              \
        ulong g = get_global_id(2) * get_global_size(0) + get_global_id(0), tiles = (m + TM - 1) / TM;           \
        ulong nb = get_global_size(0) * get_global_size(2);                                                     \
        ulong it0 = rt > 1 ? g * tiles / nb : g, it1 = rt > 1 ? (g + 1) * tiles / nb : g + 1;                   \
        if (j0 >= n) return;                                                                                    \
        for (ulong it = it0; it < it1; it++) {                                                                  \
            ulong i0 = it * TM;                                                                                 \
            if (i0 >= m) return;                                                                                \
            __global const TA *a = a0 + ASTART;                                                                 \
            __global const TB *b = BSTART;                                                                      \
            ulong arow[TM];                                                                                     \
            _Pragma("unroll") for (int r = 0; r < TM; r++) arow[r] = ROW(min(i0 + r, m - 1));                   \
            floatv acc[TM][NV];                                                                                 \
            _Pragma("unroll") for (int r = 0; r < TM; r++)                                                      \
                _Pragma("unroll") for (int v = 0; v < NV; v++) acc[r][v] = (floatv)(0.0f);                      \
            KLOOP(AT, TB)                                                                                       \
            ulong mr = min((ulong)TM, m - i0), nc = min((ulong)TN, n - j0);                                     \
            __global TC *c = c0 + co + i0 * ldc + j0;                                                           \
            float bb[TN];                                                                                       \
            for (ulong q = 0; q < TN; q++)                                                                      \
                bb[q] = (flags & 1) && q < nc ? LD_##TC(bias, biaso + j0 + q) : 0.0f;                           \
            for (ulong r = 0; r < mr; r++, c += ldc) {                                                          \
                if (nc == TN) {                                                                                 \
                    _Pragma("unroll") for (int w = 0; w < NV; w++) {                                            \
                        floatv v = fma((floatv)(alpha), acc[r][w], vloadv(w, bb));                              \
                        if (beta != 0.0f) v = fma((floatv)(beta), LDV_##TC(c, w), v);                           \
                        if (flags & 2) v = select(v, (floatv)(0.0f), isless(v, (floatv)(0.0f)));                \
                        STV_##TC(v, c, w);                                                                      \
                    }                                                                                           \
                } else {                                                                                        \
                    float vt[TN];                                                                               \
                    _Pragma("unroll") for (int w = 0; w < NV; w++)                                              \
                        vstorev(fma((floatv)(alpha), acc[r][w], vloadv(w, bb)), w, vt);                         \
                    for (ulong q = 0; q < nc; q++) {                                                            \
                        float x = beta != 0.0f ? fma(beta, LD_##TC(c, q), vt[q]) : vt[q];                       \
                        ST_##TC((flags & 2) && x < 0.0f ? 0.0f : x, c, q);                                      \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }

#ifndef GEMM_F16
/* gemm_<A><B>_f32: A as is (n), transposed (t) or packed (p); B in place (n) or packed (p). */
GEMM_KERNEL(gemm_nn_f32, float, float, float, ROW_N, A_N, A_ROWS, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_tn_f32, float, float, float, ROW_T, A_T, A_ROWS, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_pn_f32, float, float, float, ROW_P, A_P, A_PANEL, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_np_f32, float, float, float, ROW_N, A_N, A_ROWS, B_PANEL, K_LOOP_PANEL)
GEMM_KERNEL(gemm_tp_f32, float, float, float, ROW_T, A_T, A_ROWS, B_PANEL, K_LOOP_PANEL)
GEMM_KERNEL(gemm_pp_f32, float, float, float, ROW_P, A_P, A_PANEL, B_PANEL, K_LOOP_PANEL)

/* Without -DTM=, the program also holds 6-row kernels for a float32 A read
 * in place as is (gemm_nn6_f32, gemm_np6_f32: the default tile of such
 * products where the device's default is 12 x 32, clt__gemm_tile_default),
 * so that a step using both heights builds one program. The macros above
 * read TM where a kernel expands them. */
#ifdef TILE_BUILT_IN
#undef TM
#define TM 6
GEMM_KERNEL(gemm_nn6_f32, float, float, float, ROW_N, A_N, A_ROWS, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_np6_f32, float, float, float, ROW_N, A_N, A_ROWS, B_PANEL, K_LOOP_PANEL)
#undef TM
#define TM 12
#endif
#else
/* gemm_<A><B>_f16: A is never packed (no A panels in float16). */
GEMM_KERNEL(gemm_nn_f16, half, half, half, ROW_N, HK_N, A_ROWS, B_ROWS, K_LOOP_ROWS_H)
GEMM_KERNEL(gemm_tn_f16, half, half, half, ROW_T, HK_T, A_ROWS, B_ROWS, K_LOOP_ROWS_H)
GEMM_KERNEL(gemm_np_f16, half, float, half, ROW_N, HK_N, A_ROWS, B_PANEL, K_LOOP_PANEL_H)
GEMM_KERNEL(gemm_tp_f16, half, float, half, ROW_T, HK_T, A_ROWS, B_PANEL, K_LOOP_PANEL_H)
#endif

/* TRANSPOSE_W transposes the W x W block x (row r: W values along K, of
 * vector type T) in place, so that x[p] holds the block's column p:
 * ROUNDS = log2(W) rounds, each taking row h of the result from the even
 * values of rows 2h and 2h + 1 and row h + W/2 from their odd values
 * (rotating each value's index, row then column bits, right by one bit),
 * whose swizzles are two-vector shuffles. TRANSPOSE_VW: W = VW. */
#if VW == 16
#define VW_ROUNDS 4
#else
#define VW_ROUNDS 3
#endif
#define TRANSPOSE_VW(x) TRANSPOSE_W(x, floatv, VW, VW_ROUNDS)
#define TRANSPOSE_W(x, T, W, ROUNDS)                                                                            \
    _Pragma("unroll") for (int s_ = 0; s_ < ROUNDS; s_++) {                                                     \
        T y_[W];                                                                                                \
        _Pragma("unroll") for (int h = 0; h < W / 2; h++) {                                                     \
            y_[h] = (T)(x[2 * h].even, x[2 * h + 1].even);                                                      \
            y_[h + W / 2] = (T)(x[2 * h].odd, x[2 * h + 1].odd);                                                \
        }                                                                                                       \
        _Pragma("unroll") for (int h = 0; h < W; h++) x[h] = y_[h];                                             \
    }

/* A packing work-item's panel: ip, its first row i0 (none past M: it
 * returns), dst, where the panel goes, and mr, the rows of A it holds. */
#define A_PANEL_BEGIN                                                                                           \
    ulong ip = get_global_id(0), i0 = ip * TM;                                                                  \
    if (i0 >= m) return;                                                                                        \
    a += ao;                                                                                                    \
    __global float *dst = ap + po + ip * k * TM;                                                                \
    ulong mr = min((ulong)TM, m - i0)

#ifndef GEMM_F16
/* Packs op(A) (M,K), A row-major with leading dimension lda, into panels
 * of TM rows, (ceil(M/TM), K, TM), zero rows past M; each work-item packs
 * one panel. pack_at_f32 packs A transposed, (K,M): a panel's TM values of
 * a depth are adjacent in A too, copied. pack_a_f32 packs A as is: where
 * TM <= VW, blocks of VW depths go through registers (TM vector loads along
 * K, TRANSPOSE_VW, the rows past TM zero and not stored); otherwise TM x 16
 * blocks through a private array. Two kernels, not one with a flag: pocl
 * compiles a kernel at its first launch, and the transposed form alone
 * (what a Linear's weight gradient dy^T x packs) compiles in a quarter to a
 * third of the time one kernel with both forms took. */
__kernel void pack_at_f32(__global const float *a, ulong ao, ulong lda, __global float *ap, ulong po, ulong m,
                          ulong k)
{
    A_PANEL_BEGIN;
    if (mr == TM) {
        for (ulong p = 0; p < k; p++)
            _Pragma("unroll") for (int r = 0; r < TM; r++) dst[p * TM + r] = a[p * lda + i0 + r];
        return;
    }
    for (ulong p = 0; p < k; p++)
        for (ulong r = 0; r < TM; r++) dst[p * TM + r] = r < mr ? a[p * lda + i0 + r] : 0.0f;
}

__kernel void pack_a_f32(__global const float *a, ulong ao, ulong lda, __global float *ap, ulong po, ulong m,
                         ulong k)
{
    A_PANEL_BEGIN;
    ulong kv = 0;
#if TM <= VW
    if (mr == TM) kv = k / VW * VW;
    for (ulong p0 = 0; p0 < kv; p0 += VW) {
        floatv x[VW];
        _Pragma("unroll") for (int r = 0; r < VW; r++)
            x[r] = r < TM ? vloadv(0, a + (i0 + r) * lda + p0) : (floatv)(0.0f);
        TRANSPOSE_VW(x)
        _Pragma("unroll") for (int p = 0; p < VW; p++) {
            float t[VW];
            vstorev(x[p], 0, t);
            _Pragma("unroll") for (int r = 0; r < TM; r++) dst[(p0 + p) * TM + r] = t[r];
        }
    }
#endif
    float t[16][TM];
    for (ulong p0 = kv; p0 < k; p0 += 16) {
        ulong pc = min((ulong)16, k - p0);
        for (ulong r = 0; r < TM; r++)
            for (ulong p = 0; p < 16; p++) t[p][r] = r < mr && p < pc ? a[(i0 + r) * lda + p0 + p] : 0.0f;
        for (ulong p = 0; p < pc; p++)
            for (ulong r = 0; r < TM; r++) dst[(p0 + p) * TM + r] = t[p][r];
    }
}

/* Packs b (K,N), leading dimension ldb, into float32 panels of TN columns,
 * (ceil(N/TN), K, TN), zero columns past N; each work-item packs one panel. */
__kernel void pack_b_f32(__global const float *b, ulong bo, ulong ldb, __global float *bp, ulong po, ulong n, ulong k)
{
    ulong jp = get_global_id(0), j0 = jp * TN;
    if (j0 >= n) return;
    b += bo + j0;
    __global float *dst = bp + po + jp * k * TN;
    ulong nc = min((ulong)TN, n - j0);
    if (nc == TN) {
        for (ulong p = 0; p < k; p++)
            for (int v = 0; v < NV; v++) vstorev(vloadv(v, b + p * ldb), p * NV + v, dst);
        return;
    }
    for (ulong p = 0; p < k; p++)
        for (ulong q = 0; q < TN; q++) dst[p * TN + q] = q < nc ? b[p * ldb + q] : 0.0f;
}

#endif

/* Packs bt (N,K), leading dimension ldb, as B = bt^T in float32 panels;
 * each work-item packs one panel. Whole 8 x 8 blocks (8 columns, 8 depths)
 * go through registers: 8 vector loads along K, a transpose in 3 rounds, 8
 * vector stores; the rest (a last panel with columns past N, whole; the
 * last k mod 8 depths of the others) one value at a time, zero past N.
 * Blocks of 8, not VW: pocl compiles a 16 x 16 transpose's shuffles at the
 * kernel's first launch in several times the time. */
#define LD8_float(p) vload8(0, p)
#define LD8_half(p) vload_half8(0, p)
#define PACK_BT(name, TB)                                                                                       \
    __kernel void name(__global const TB *bt, ulong bo, ulong ldb, __global float *bp, ulong po, ulong n,       \
                       ulong k)                                                                                 \
    {                                                                                                           \
        ulong jp = get_global_id(0), j0 = jp * TN;                                                              \
        if (j0 >= n) return;                                                                                    \
        bt += bo + j0 * ldb;                                                                                    \
        __global float *dst = bp + po + jp * k * TN;                                                            \
        ulong nc = min((ulong)TN, n - j0), kv = nc == TN ? k / 8 * 8 : 0;                                       \
        for (ulong p0 = 0; p0 < kv; p0 += 8) {                                                                  \
            _Pragma("unroll") for (int v = 0; v < TN / 8; v++) {                                                \
                float8 x[8];                                                                                    \
                _Pragma("unroll") for (int r = 0; r < 8; r++) x[r] = LD8_##TB(bt + (v * 8 + r) * ldb + p0);     \
                TRANSPOSE_W(x, float8, 8, 3)                                                                    \
                _Pragma("unroll") for (int p = 0; p < 8; p++) vstore8(x[p], (p0 + p) * (TN / 8) + v, dst);      \
            }                                                                                                   \
        }                                                                                                       \
        for (ulong p = kv; p < k; p++)                                                                          \
            for (ulong q = 0; q < TN; q++) dst[p * TN + q] = q < nc ? LD_##TB(bt, q * ldb + p) : 0.0f;          \
    }

#ifndef GEMM_F16
PACK_BT(pack_bt_f32, float)
#else
PACK_BT(pack_bt_f16, half)
#endif
