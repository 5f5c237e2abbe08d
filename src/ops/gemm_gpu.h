/* Internal: the GPU-class devices' own GEMM (cl/gemm_gpu.cl,
 * src/ops/gemm_gpu.c) for products small enough that a CLBlast call's host
 * cost would dominate, with the layers' epilogues fused into its store. */
#ifndef CLT_OPS_GEMM_GPU_H
#define CLT_OPS_GEMM_GPU_H

#include <stddef.h>
#include "../tensor/tensor_internal.h"
#include "ops_internal.h"

/* Products of at most this many multiply-adds (m n k) take the kernel on
 * GPU-class devices; larger ones stay on CLBlast. 2^27 holds every product
 * of the capstone at batch 256 (the largest, 256 x 256 x 784, is 2^25.6). */
#define CLT__GEMM_GPU_MAX_MNK ((int64_t)1 << 27)

/* What a product fuses: a mask on a's reads, and what its store applies
 * after alpha op(a) op(b) + beta c, in this order. Its tensors have c's
 * dtype. */
typedef struct clt__gemm_fusion {
    const clt_tensor *a_mask; /* a's shape and leading dimension: a read as 0 where a_mask <= 0; NULL: none */
    int round;              /* alpha op(a) op(b) rounded to c's dtype before beta c is added (float16) */
    const clt_tensor *bias; /* (n), added to every row; NULL: none */
    int relu;               /* ReLU after the bias */
    const clt_tensor *mask; /* (m, n), c's shape (ldc = n): c = 0 where mask <= 0 (a ReLU's backward); NULL: none */
    clt_tensor *rowsum;     /* (m): += the row sums of op(a), unscaled (a bias gradient); NULL: none */
    const clt_tensor *residual; /* (m, n), as mask: sum = c's stored value + residual; NULL: none */
    clt_tensor *sum;            /* (m, n), as mask: written when residual is set */
} clt__gemm_fusion;

/* 1 when a product of m x n x k may take the kernel: m, n and k > 0, and
 * m n k at most CLT__GEMM_GPU_MAX_MNK. */
int clt__gemm_gpu_fits(size_t m, size_t n, size_t k);

/* The side of the kernel's square work-groups for an (m, n) C on slot: 16
 * (256 work-items, 64 x 64 blocks of C) where CL_DEVICE_MAX_WORK_GROUP_SIZE
 * allows and C has at least as many such blocks as the device has compute
 * units, else 8 (64 work-items, 32 x 32 blocks: four times the work-groups
 * for a small C); 0 where work-groups of 64 are too many. */
int clt__gemm_gpu_side(int slot, size_t m, size_t n);

/* c = alpha op(a) op(b) + beta c with ep (may be NULL), as
 * clt__dense_gemm, in one launch of gemm_gpu_f32 (gemm_gpu_f32_wg8 for side
 * 8), or for a float16 c of gemm_gpu_f16 (gemm_gpu_f16_wg8), every operand
 * then float16, with work-groups of side wgs (16 or 8; tests choose,
 * clt__gemm_gpu_side otherwise). Records the launch as c's, ep->rowsum's
 * and ep->sum's last write. */
clt_status clt__gemm_gpu(int slot, int wgs, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                         float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                         clt_tensor *c, size_t ldc, const clt__gemm_fusion *ep);

#endif
