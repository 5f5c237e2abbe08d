/* GEMM shaped for CPU devices (pocl): no local memory, no barriers,
 * work-groups of one work-item. Each work-item owns a TM x TN tile of C in
 * registers (one floatTN accumulator per row) and streams the whole K loop
 * through it: per depth, one vector load of a row of B and TM broadcast fmas.
 * TM (rows) and TN (8 or 16 columns) are build options so that `clt tune`
 * can time other tiles; the defaults are 12 x 16.
 * C = alpha op(A) op(B) + beta C (+ bias on every row when flags bit 0 is
 * set; then ReLU when bit 1 is, NaN passing through as in clt_relu),
 * row-major; op(A) is (M,K), op(B) is (K,N), bias is (N).
 * Dimension 0 runs over row tiles, so consecutive work-items read the same
 * TN columns of B while they are in cache.
 *
 * B (K,N) is read in place; a transposed B, (N,K), whose TN columns would be
 * TN strided streams, is packed first by pack_bt_f32 into panels of TN
 * columns, (ceil(N/TN), K, TN) with zero columns past N. */

#ifndef TM
#define TM 12
#endif
#ifndef TN
#define TN 16
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define floatv CAT(float, TN)
#define vloadv CAT(vload, TN)
#define vstorev CAT(vstore, TN)

/* A is (M,K) (N) or (K,M) (T); arow[r] is the offset of the tile's row r.
 * Rows past M read row M-1 and are not stored. A packed (P) by pack_a_f32
 * is (ceil(M/TM), K, TM): the tile's TM values per depth are adjacent, and
 * lda is the panels' full depth. */
#define ROW_N(i) ((i) * lda)
#define ROW_T(i) (i)
#define ROW_P(i) 0
#define A_N(p, r) a[arow[r] + (p)]
#define A_T(p, r) a[(p) * lda + arow[r]]
#define A_P(p, r) a[(p) * TM + (r)]
#define A_ROWS ao
#define A_PANEL ao + get_global_id(0) * lda * TM

#define FMA_ROWS(AT)                                                                                            \
    _Pragma("unroll") for (int r = 0; r < TM; r++) acc[r] = fma((floatv)(AT(p, r)), bv, acc[r]);

/* B in place: the last, partial tile of columns goes through a zeroed copy. */
#define B_ROWS bp + bo + j0
#define K_LOOP_ROWS(AT)                                                                                         \
    if (j0 + TN <= n) {                                                                                         \
        for (ulong p = 0; p < k; p++) {                                                                         \
            floatv bv = vloadv(0, b + p * ldb);                                                                 \
            FMA_ROWS(AT)                                                                                        \
        }                                                                                                       \
    } else {                                                                                                    \
        float bt[TN];                                                                                           \
        for (int q = 0; q < TN; q++) bt[q] = 0.0f;                                                              \
        for (ulong p = 0; p < k; p++) {                                                                         \
            for (ulong q = 0; q < n - j0; q++) bt[q] = b[p * ldb + q];                                          \
            floatv bv = vloadv(0, bt);                                                                          \
            FMA_ROWS(AT)                                                                                        \
        }                                                                                                       \
    }

/* B packed: the tile's panel is contiguous and zero-padded; ldb is the
 * panels' full depth, of which this product (one K block) reads k rows. */
#define B_PANEL bp + bo + jp * ldb * TN
#define K_LOOP_PANEL(AT)                                                                                        \
    for (ulong p = 0; p < k; p++) {                                                                             \
        floatv bv = vloadv(p, b);                                                                               \
        FMA_ROWS(AT)                                                                                            \
    }

#define GEMM_KERNEL(name, ROW, AT, ASTART, BSTART, KLOOP)                                                       \
    __kernel void name(__global const float *a, ulong ao, ulong lda, __global const float *bp, ulong bo,        \
                       ulong ldb, __global float *c, ulong co, ulong ldc, ulong m, ulong n, ulong k,            \
                       float alpha, float beta, __global const float *bias, ulong biaso, uint flags)            \
    {                                                                                                           \
        ulong i0 = get_global_id(0) * TM, jp = get_global_id(1), j0 = jp * TN;                                  \
        if (i0 >= m || j0 >= n) return;                                                                         \
        a += ASTART;                                                                                            \
        __global const float *b = BSTART;                                                                       \
        ulong arow[TM];                                                                                         \
        _Pragma("unroll") for (int r = 0; r < TM; r++) arow[r] = ROW(min(i0 + r, m - 1));                       \
        floatv acc[TM];                                                                                         \
        _Pragma("unroll") for (int r = 0; r < TM; r++) acc[r] = (floatv)(0.0f);                                 \
        KLOOP(AT)                                                                                               \
        ulong mr = min((ulong)TM, m - i0), nc = min((ulong)TN, n - j0);                                         \
        c += co + i0 * ldc + j0;                                                                                \
        float bb[TN];                                                                                           \
        for (ulong q = 0; q < TN; q++) bb[q] = (flags & 1) && q < nc ? bias[biaso + j0 + q] : 0.0f;             \
        floatv bv = vloadv(0, bb);                                                                              \
        for (ulong r = 0; r < mr; r++, c += ldc) {                                                              \
            floatv v = fma((floatv)(alpha), acc[r], bv);                                                        \
            if (nc == TN) {                                                                                     \
                if (beta != 0.0f) v = fma((floatv)(beta), vloadv(0, c), v);                                     \
                if (flags & 2) v = select(v, (floatv)(0.0f), isless(v, (floatv)(0.0f)));                        \
                vstorev(v, 0, c);                                                                               \
            } else {                                                                                            \
                float vt[TN];                                                                                   \
                vstorev(v, 0, vt);                                                                              \
                for (ulong q = 0; q < nc; q++) {                                                                \
                    float x = beta != 0.0f ? fma(beta, c[q], vt[q]) : vt[q];                                    \
                    c[q] = (flags & 2) && x < 0.0f ? 0.0f : x;                                                  \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }

/* gemm_<A><B>_f32: A as is (n), transposed (t) or packed (p); B in place (n) or packed (p). */
GEMM_KERNEL(gemm_nn_f32, ROW_N, A_N, A_ROWS, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_tn_f32, ROW_T, A_T, A_ROWS, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_pn_f32, ROW_P, A_P, A_PANEL, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_np_f32, ROW_N, A_N, A_ROWS, B_PANEL, K_LOOP_PANEL)
GEMM_KERNEL(gemm_tp_f32, ROW_T, A_T, A_ROWS, B_PANEL, K_LOOP_PANEL)
GEMM_KERNEL(gemm_pp_f32, ROW_P, A_P, A_PANEL, B_PANEL, K_LOOP_PANEL)

/* Packs op(A) (M,K), A row-major with leading dimension lda and transposed
 * when trans is set, into panels of TM rows, (ceil(M/TM), K, TM), zero rows
 * past M; each work-item packs one panel, TM x 16 blocks through registers. */
__kernel void pack_a_f32(__global const float *a, ulong ao, ulong lda, uint trans, __global float *ap, ulong po,
                         ulong m, ulong k)
{
    ulong ip = get_global_id(0), i0 = ip * TM;
    if (i0 >= m) return;
    a += ao;
    __global float *dst = ap + po + ip * k * TM;
    ulong mr = min((ulong)TM, m - i0);
    float t[16][TM];
    for (ulong p0 = 0; p0 < k; p0 += 16) {
        ulong pc = min((ulong)16, k - p0);
        if (trans) {
            for (ulong p = 0; p < 16; p++)
                for (ulong r = 0; r < TM; r++) t[p][r] = r < mr && p < pc ? a[(p0 + p) * lda + i0 + r] : 0.0f;
        } else {
            for (ulong r = 0; r < TM; r++)
                for (ulong p = 0; p < 16; p++) t[p][r] = r < mr && p < pc ? a[(i0 + r) * lda + p0 + p] : 0.0f;
        }
        for (ulong p = 0; p < pc; p++)
            for (ulong r = 0; r < TM; r++) dst[(p0 + p) * TM + r] = t[p][r];
    }
}

/* Packs bt (N,K), leading dimension ldb, as B = bt^T in panels; each
 * work-item packs one panel, TN x TN blocks at a time through registers. */
__kernel void pack_bt_f32(__global const float *bt, ulong bo, ulong ldb, __global float *bp, ulong po, ulong n,
                          ulong k)
{
    ulong jp = get_global_id(0), j0 = jp * TN;
    if (j0 >= n) return;
    bt += bo + j0 * ldb;
    __global float *dst = bp + po + jp * k * TN;
    ulong nc = min((ulong)TN, n - j0);
    float t[TN][TN];
    for (ulong p0 = 0; p0 < k; p0 += TN) {
        ulong pc = min((ulong)TN, k - p0);
        for (ulong q = 0; q < TN; q++)
            for (ulong p = 0; p < TN; p++) t[p][q] = q < nc && p < pc ? bt[q * ldb + p0 + p] : 0.0f;
        for (ulong p = 0; p < pc; p++) vstorev(vloadv(0, t[p]), p0 + p, dst);
    }
}
