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
 * Rows past M read row M-1 and are not stored. */
#define ROW_N(i) ((i) * lda)
#define ROW_T(i) (i)
#define A_N(p, r) a[arow[r] + (p)]
#define A_T(p, r) a[(p) * lda + arow[r]]

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

/* B packed: the tile's panel is contiguous and zero-padded (ldb unused). */
#define B_PANEL bp + bo + jp * k * TN
#define K_LOOP_PANEL(AT)                                                                                        \
    for (ulong p = 0; p < k; p++) {                                                                             \
        floatv bv = vloadv(p, b);                                                                               \
        FMA_ROWS(AT)                                                                                            \
    }

#define GEMM_KERNEL(name, ROW, AT, BSTART, KLOOP)                                                               \
    __kernel void name(__global const float *a, ulong ao, ulong lda, __global const float *bp, ulong bo,        \
                       ulong ldb, __global float *c, ulong co, ulong ldc, ulong m, ulong n, ulong k,            \
                       float alpha, float beta, __global const float *bias, ulong biaso, uint flags)            \
    {                                                                                                           \
        ulong i0 = get_global_id(0) * TM, jp = get_global_id(1), j0 = jp * TN;                                  \
        if (i0 >= m || j0 >= n) return;                                                                         \
        a += ao;                                                                                                \
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

/* gemm_<A><B>_f32: A as is (n) or transposed (t); B in place (n) or packed (p). */
GEMM_KERNEL(gemm_nn_f32, ROW_N, A_N, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_tn_f32, ROW_T, A_T, B_ROWS, K_LOOP_ROWS)
GEMM_KERNEL(gemm_np_f32, ROW_N, A_N, B_PANEL, K_LOOP_PANEL)
GEMM_KERNEL(gemm_tp_f32, ROW_T, A_T, B_PANEL, K_LOOP_PANEL)

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
