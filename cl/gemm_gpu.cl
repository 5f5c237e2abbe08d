/* GEMM shaped for GPU-class devices, for products small enough that a
 * library call's host cost would dominate (src/ops/gemm_gpu.c): local-memory
 * tiles, with the layers' epilogues in the store.
 * C = alpha op(A) op(B) + beta C, row-major; op(A) is (M,K): A (M,K) read as
 * is, or A (K,M) transposed when ta; op(B) is (K,N): B (K,N), or B (N,K)
 * when tb; leading dimensions and offsets in elements. beta = 0 ignores C's
 * old contents (NaN included). With flags bit 16 (AMASK), A is read as 0
 * where amask (A's layout and leading dimension) is <= 0: a product of a
 * ReLU's input gradient without that ReLU's pass. Then, by the other bits:
 *   32 (ROUND) alpha op(A) op(B) is rounded to the storage type before
 *              beta C is added (with HALF_IO: the sum of a float16 product
 *              and C, as a separate float16 add makes it; float32: no-op);
 *   1 (BIAS)   + bias[j] on every row (bias is (N));
 *   2 (RELU)   ReLU, NaN passing through as in clt_relu;
 *   4 (MASK)   0 where mask[i * N + j] <= 0 (the kept output of a ReLU,
 *              shaped as C with ldc = N): that ReLU's backward;
 *   8 (ROWSUM) rowsum[i] += the sum of op(A)'s row i, unscaled, added in
 *              depth order (with ta: the column sums of A, a bias gradient);
 *   64 (RESID) besides C, sum[i * N + j] = C's stored value + res[i * N + j]
 *              (a residual block's output; sum and res shaped as C with
 *              ldc = N): C keeps the ReLU's output that backward needs.
 * A work-group of WGS x WGS work-items owns a BT x BT block of C, BT = 4
 * WGS; work-item (x, y) keeps the 4 x 4 values of rows y, y + WGS, ... and
 * columns x, x + WGS, ... in registers. Per BK depths the group stages
 * op(A)'s and op(B)'s slices in local memory, each read along its rows in
 * memory so that neighbouring work-items load neighbouring addresses, zero
 * past M, N and K. The row sums are made by the work-items of the first block column
 * with x = 0, from the staged slices of A. WGS (16 or 8) is a build option:
 * groups of 256 work-items and 64 x 64 blocks, or of 64 and 32 x 32 blocks
 * (where the device allows fewer work-items, or a small C would leave
 * compute units idle). HALF_IO is another: every matrix and vector is
 * float16 storage, read with vload_half and written with vstore_half (round
 * to nearest even, as cl/half.cl narrows), the arithmetic float32 as
 * without it, so a float16 result is the float32 kernel's on the widened
 * operands, rounded once. Portable OpenCL C 1.2, no cl_khr_fp16. */
#ifndef WGS
#define WGS 16
#endif
/* Each shape's kernel has a name of its own, so that a program of one shape
 * served for the other (a damaged cache entry) lacks the kernel asked of it
 * and is built again, instead of launched with groups it was not built for. */
#if WGS != 16 && WGS != 8
#error "WGS is 16 or 8"
#endif
#ifdef HALF_IO
#if WGS == 16
#define GEMM_GPU_KERNEL gemm_gpu_f16
#else
#define GEMM_GPU_KERNEL gemm_gpu_f16_wg8
#endif
#define T half
#define LD(p, i) vload_half((i), (p))
#define ST(v, i, p) vstore_half((v), (i), (p))
#else
#if WGS == 16
#define GEMM_GPU_KERNEL gemm_gpu_f32
#else
#define GEMM_GPU_KERNEL gemm_gpu_f32_wg8
#endif
#define T float
#define LD(p, i) ((p)[i])
#define ST(v, i, p) ((p)[i] = (v))
#endif
#define RT 4
#define BT (WGS * RT)
#define BK 16
#define ITEMS (WGS * WGS)

#define F_BIAS 1
#define F_RELU 2
#define F_MASK 4
#define F_ROWSUM 8
#define F_AMASK 16
#define F_ROUND 32
#define F_RESID 64

/* v as the storage type holds it: rounded to float16 (nearest even) with
 * HALF_IO, else v. */
static float stored(float v)
{
#ifdef HALF_IO
    ushort h;
    vstore_half(v, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
#else
    return v;
#endif
}

/* Stages op(A)[row0.., p0..] as as[p][i] and op(B)[p0.., col0..] as bs[p][j]. */
static void stage(__local float (*as)[BT + 1], __local float (*bs)[BT + 1], int ta, int tb, ulong m, ulong n,
                  ulong k, ulong row0, ulong col0, ulong p0, __global const T *a, __global const T *amask,
                  ulong lda, __global const T *b, ulong ldb, int lid)
{
    for (int e = lid; e < BK * BT; e += ITEMS) {
        int i = ta ? e % BT : e / BK, p = ta ? e / BT : e % BK;
        ulong gi = row0 + i, gp = p0 + p, ai = ta ? gp * lda + gi : gi * lda + gp;
        float av = gi < m && gp < k ? LD(a, ai) : 0.0f;
        as[p][i] = amask && gi < m && gp < k && !(LD(amask, ai) > 0.0f) ? 0.0f : av;
        int j = tb ? e / BK : e % BT, q = tb ? e % BK : e / BT;
        ulong gj = col0 + j, gq = p0 + q;
        bs[q][j] = gj < n && gq < k ? LD(b, tb ? gj * ldb + gq : gq * ldb + gj) : 0.0f;
    }
}

/* The store of c[i][j] = v (alpha op(A) op(B) of the work-item's
 * accumulator) with the epilogue of flags. */
static void store(float v, ulong i, ulong j, ulong n, float beta, __global T *c, ulong ldc, int flags,
                  __global const T *bias, __global const T *mask, __global const T *res, __global T *sum)
{
    if (flags & F_ROUND) v = stored(v);
    if (beta != 0.0f) v += beta * LD(c, i * ldc + j);
    if (flags & F_BIAS) v += LD(bias, j);
    if ((flags & F_RELU) && v < 0.0f) v = 0.0f;
    if ((flags & F_MASK) && !(LD(mask, i * n + j) > 0.0f)) v = 0.0f;
    ST(v, i * ldc + j, c);
    if (flags & F_RESID) ST(stored(v) + LD(res, i * n + j), i * n + j, sum);
}

__kernel __attribute__((reqd_work_group_size(WGS, WGS, 1))) void
GEMM_GPU_KERNEL(int ta, int tb, ulong m, ulong n, ulong k, float alpha, __global const T *a, ulong ao, ulong lda,
                __global const T *b, ulong bo, ulong ldb, float beta, __global T *c, ulong co, ulong ldc, int flags,
                __global const T *bias, ulong biaso, __global const T *mask, ulong masko, __global T *rowsum,
                ulong rso, __global const T *amask, ulong amasko, __global const T *res, ulong reso,
                __global T *sum, ulong sumo)
{
    __local float as[BK][BT + 1];
    __local float bs[BK][BT + 1];
    int x = (int)get_local_id(0), y = (int)get_local_id(1), lid = y * WGS + x;
    ulong col0 = get_group_id(0) * BT, row0 = get_group_id(1) * BT;
    int sums = (flags & F_ROWSUM) && get_group_id(0) == 0 && x == 0;
    float acc[RT][RT], rs[RT];
    for (int r = 0; r < RT; r++) {
        rs[r] = 0.0f;
        for (int s = 0; s < RT; s++) acc[r][s] = 0.0f;
    }
    for (ulong p0 = 0; p0 < k; p0 += BK) {
        stage(as, bs, ta, tb, m, n, k, row0, col0, p0, a + ao, flags & F_AMASK ? amask + amasko : 0, lda, b + bo,
              ldb, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < BK; p++) {
            float av[RT], bv[RT];
            for (int r = 0; r < RT; r++) av[r] = as[p][y + r * WGS];
            for (int s = 0; s < RT; s++) bv[s] = bs[p][x + s * WGS];
            for (int r = 0; r < RT; r++)
                for (int s = 0; s < RT; s++) acc[r][s] = fma(av[r], bv[s], acc[r][s]);
        }
        if (sums)
            for (int p = 0; p < BK; p++)
                for (int r = 0; r < RT; r++) rs[r] += as[p][y + r * WGS];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int r = 0; r < RT; r++) {
        ulong i = row0 + y + r * WGS;
        if (i >= m) continue;
        if (sums) ST(LD(rowsum, rso + i) + rs[r], rso + i, rowsum);
        for (int s = 0; s < RT; s++) {
            ulong j = col0 + x + s * WGS;
            if (j < n)
                store(alpha * acc[r][s], i, j, n, beta, c + co, ldc, flags, bias + biaso, mask + masko, res + reso,
                      sum + sumo);
        }
    }
}
