/* GEMM shaped for GPU-class devices, for products small enough that a
 * library call's host cost would dominate (src/ops/gemm_gpu.c): local-memory
 * tiles, with the layers' epilogues in the store.
 * C = alpha op(A) op(B) + beta C, row-major; op(A) is (M,K): A (M,K) read as
 * is, or A (K,M) transposed when ta; op(B) is (K,N): B (K,N), or B (N,K)
 * when tb; leading dimensions and offsets in elements. beta = 0 ignores C's
 * old contents (NaN included). With flags bit 16 (AMASK), A is read as 0
 * where amask (A's layout and leading dimension) is <= 0: a product of a
 * ReLU's input gradient without that ReLU's pass. Then, by the other bits:
 *   1 (BIAS)   + bias[j] on every row (bias is (N));
 *   2 (RELU)   ReLU, NaN passing through as in clt_relu;
 *   4 (MASK)   0 where mask[i * N + j] <= 0 (the kept output of a ReLU,
 *              shaped as C with ldc = N): that ReLU's backward;
 *   8 (ROWSUM) rowsum[i] += the sum of op(A)'s row i, unscaled, added in
 *              depth order (with ta: the column sums of A, a bias gradient).
 * A work-group of WGS x WGS work-items owns a BT x BT block of C, BT = 4
 * WGS; work-item (x, y) keeps the 4 x 4 values of rows y, y + WGS, ... and
 * columns x, x + WGS, ... in registers. Per BK depths the group stages
 * op(A)'s and op(B)'s slices in local memory, each read along its rows in
 * memory so that neighbouring work-items load neighbouring addresses, zero
 * past M, N and K. The row sums are made by the work-items of the first block column
 * with x = 0, from the staged slices of A. WGS (16 or 8) is a build option:
 * groups of 256 work-items and 64 x 64 blocks, or of 64 and 32 x 32 blocks
 * (where the device allows fewer work-items, or a small C would leave
 * compute units idle). Float32 throughout; portable OpenCL C 1.2. */
#ifndef WGS
#define WGS 16
#endif
/* Each shape's kernel has a name of its own, so that a program of one shape
 * served for the other (a damaged cache entry) lacks the kernel asked of it
 * and is built again, instead of launched with groups it was not built for. */
#if WGS == 16
#define GEMM_GPU_KERNEL gemm_gpu_f32
#elif WGS == 8
#define GEMM_GPU_KERNEL gemm_gpu_f32_wg8
#else
#error "WGS is 16 or 8"
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

/* Stages op(A)[row0.., p0..] as as[p][i] and op(B)[p0.., col0..] as bs[p][j]. */
static void stage(__local float (*as)[BT + 1], __local float (*bs)[BT + 1], int ta, int tb, ulong m, ulong n,
                  ulong k, ulong row0, ulong col0, ulong p0, __global const float *a, __global const float *amask,
                  ulong lda, __global const float *b, ulong ldb, int lid)
{
    for (int e = lid; e < BK * BT; e += ITEMS) {
        int i = ta ? e % BT : e / BK, p = ta ? e / BT : e % BK;
        ulong gi = row0 + i, gp = p0 + p, ai = ta ? gp * lda + gi : gi * lda + gp;
        float av = gi < m && gp < k ? a[ai] : 0.0f;
        as[p][i] = amask && gi < m && gp < k && !(amask[ai] > 0.0f) ? 0.0f : av;
        int j = tb ? e / BK : e % BT, q = tb ? e % BK : e / BT;
        ulong gj = col0 + j, gq = p0 + q;
        bs[q][j] = gj < n && gq < k ? b[tb ? gj * ldb + gq : gq * ldb + gj] : 0.0f;
    }
}

__kernel __attribute__((reqd_work_group_size(WGS, WGS, 1))) void
GEMM_GPU_KERNEL(int ta, int tb, ulong m, ulong n, ulong k, float alpha, __global const float *a, ulong ao, ulong lda,
             __global const float *b, ulong bo, ulong ldb, float beta, __global float *c, ulong co, ulong ldc,
             int flags, __global const float *bias, ulong biaso, __global const float *mask, ulong masko,
             __global float *rowsum, ulong rso, __global const float *amask, ulong amasko)
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
        if (sums) rowsum[rso + i] += rs[r];
        for (int s = 0; s < RT; s++) {
            ulong j = col0 + x + s * WGS;
            if (j >= n) continue;
            float v = alpha * acc[r][s];
            if (beta != 0.0f) v += beta * c[co + i * ldc + j];
            if (flags & F_BIAS) v += bias[biaso + j];
            if ((flags & F_RELU) && v < 0.0f) v = 0.0f;
            if ((flags & F_MASK) && !(mask[masko + i * n + j] > 0.0f)) v = 0.0f;
            c[co + i * ldc + j] = v;
        }
    }
}
