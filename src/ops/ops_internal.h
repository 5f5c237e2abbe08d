/* Internal: what the ops share (their argument checks are
 * src/tensor/check.h's), and the dense entry point. */
#ifndef CLT_OPS_INTERNAL_H
#define CLT_OPS_INTERNAL_H

#include <stdint.h>

#include "../kernels/program.h"
#include "../tensor/check.h"
#include "cltensor/ops.h"

/* The rows the GPU-class cross-entropy (softmax_xent_mean_wg_f32) takes in
 * its one work-group: cl/loss.cl's WG_ROWS, its reqd_work_group_size, which
 * is the source (test_loss's test_gpu_class_one_launch reads the compiled
 * kernel's and fails when the two differ). */
#define CLT__XENT_WG_ROWS 256

/* How many partial sums a whole-tensor sum of n elements makes (its scratch). */
cl_ulong clt__sum_parts(int64_t n);
/* *out = 1 when the slot's reductions take the work-group tree kernels (the
 * _wg kernels of cl/reduce.cl, cl/activation.cl and cl/half.cl): a
 * GPU-class device (clt__gpu_class) whose work-groups hold 256 work-items. */
clt_status clt__reduce_wg(int slot, int *out);
/* Launches a _wg column-sum kernel over cols columns (groups of 16 columns
 * by 16 lanes). */
clt_status clt__launch_cols_wg(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                               cl_ulong cols, clt_tensor *written);

/* Makes the slot's queue wait for a pending read of t by another queue
 * (a barrier, no host wait): for tensors a launch writes besides the one
 * clt__launch is told about. */
clt_status clt__wait_foreign_read(int slot, clt_tensor *t);
/* Records t's storage as written by the last write of `by` (the same launch). */
void clt__same_write(clt_tensor *t, const clt_tensor *by);

/* y = a + b into an existing y, all of one dtype (float32 or float16),
 * shape and device, as clt_add. */
clt_status clt__add_into(clt_tensor *y, const clt_tensor *a, const clt_tensor *b);
/* dx = dy where y > 0, else 0, into an existing dx (may be dy), as
 * clt_relu_backward. */
clt_status clt__relu_backward_into(clt_tensor *dx, const clt_tensor *dy, const clt_tensor *y);

/* Releases t and returns s when s is a failure, else stores t in *out. */
clt_status clt__finish(clt_status s, clt_tensor *t, clt_tensor **out);

/* c = alpha * op(a) @ op(b) + beta * c on a slot's device, row-major:
 * op(a) is (m,k), op(b) is (k,n), c is (m,n), leading dimensions in
 * elements. The one place that chooses the device's dense implementation.
 * Records the launch as c's last write. beta = 0 ignores c's contents. */
clt_status clt__dense_gemm(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float alpha,
                           const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                           clt_tensor *c, size_t ldc);

/* *out = 1 when clt__dense_gemm runs the CPU kernels of cl/gemm_cpu.cl on
 * slot (CLT_DENSE, else the device's class, clt__gpu_class), which also take
 * float16 (cl/gemm_cpu_f16.cl). */
clt_status clt__dense_cpu(int slot, int *out);
/* c (rows, cols) += bias (cols, per row; none when NULL), then ReLU when
 * relu: one pass (bias_relu_f32), the epilogue of a CLBlast product. */
clt_status clt__bias_relu_epilogue(int slot, clt_tensor *c, const clt_tensor *bias, size_t rows, size_t cols,
                                   int relu);

/* What a product fuses (src/ops/gemm_gpu.h). */
typedef struct clt__gemm_fusion clt__gemm_fusion;

/* clt__dense_gemm on float16 a, b and c with ep (may be NULL; its tensors
 * float16 too): float32 accumulation, c rounded once. On cl/gemm_gpu.cl
 * (clt__dense_fuses_backward) with all of ep; on the CPU kernels with its
 * bias only; for k > 0. Else CLT_ERR_UNSUPPORTED. */
clt_status clt__dense_gemm_f16(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float alpha,
                               const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                               clt_tensor *c, size_t ldc, const clt__gemm_fusion *ep);

/* What clt__linear_backward_fold folds into a Linear's backward. */
typedef struct clt__linear_fold {
    /* *dx = base + dy @ w when base is not NULL (base shaped as x): the
     * product accumulates into base itself when in_place (the caller's
     * word that nothing reads base's old values later; *dx is then a new
     * reference to base), else into a copy of base; base is none of the
     * other operands. Saves the pass that would add them. */
    clt_tensor *base;
    int in_place;
    /* dy's shape: the products read dy as 0 where dy_mask <= 0 (the ReLU
     * above, whose kept output it is: dw, db and dx of the masked dy). */
    const clt_tensor *dy_mask;
    /* x's shape: *dx = 0 where dx_mask <= 0 (the ReLU below, whose kept
     * output it is). */
    const clt_tensor *dx_mask;
} clt__linear_fold;

/* clt_linear_backward_ with f (dx may be NULL unless f->base is set). The
 * masks take no pass of their own where clt__dense_fuses_backward says so
 * (in the products' loads and store), else a pass each. */
clt_status clt__linear_backward_fold(clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw, clt_tensor *db,
                                     const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w);
/* *out = 1 when an m x n x k product on slot takes cl/gemm_gpu.cl, which
 * reads its a through a ReLU's mask, applies one in its store and sums a
 * bias gradient (src/ops/gemm_gpu.h), so that no pass of their own runs. */
clt_status clt__dense_fuses_backward(int slot, size_t m, size_t n, size_t k, int *out);

/* A float32 weight w (n, k) packed as B = w^T into the CPU kernels' panels
 * (pack_bt_f32, panels of the tile's tn columns, k deep), kept between
 * forward products so that w is packed once per change of w rather than
 * once per product. The panels are current while w's storage version
 * (clt__tensor_version) is the one they were made from; any recorded write
 * to w's storage (an optimizer step, a copy, a load, a fill) changes it, and
 * the next product packs again, into the same buffer when its size and
 * device still fit. Zero-initialise; clt__packed_weight_drop frees it. */
typedef struct clt__packed_weight {
    clt_tensor *panels; /* NULL until a CPU product made them; CLT_MEM_WEIGHTS */
    uint64_t version;   /* w's storage version they were packed from; 0: none */
    size_t offset, n, k; /* w's byte offset in its storage, and its shape */
    int tn;
    int64_t packs;      /* times packed (tests) */
} clt__packed_weight;

void clt__packed_weight_drop(clt__packed_weight *pw);
/* clt_linear_forward (clt_linear_relu_forward when relu) with w^T's panels
 * kept in pw on CPU devices (pw unused elsewhere). */
clt_status clt__linear_forward_packed(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b,
                                      int relu, clt__packed_weight *pw);
/* clt_linear_relu_forward with a residual: *y = ReLU(x w^T + b) (kept for
 * the ReLU's backward) and *sum = *y + res (res (B,OC), float32), in the
 * product's store on cl/gemm_gpu.cl, else with one add pass (add_f32);
 * w^T's panels kept in pw as clt__linear_forward_packed. */
clt_status clt__linear_relu_residual_forward(clt_tensor **y, clt_tensor **sum, const clt_tensor *x,
                                             const clt_tensor *w, const clt_tensor *b, const clt_tensor *res,
                                             clt__packed_weight *pw);

/* out[0] = (sum of x's n float32 elements) / divisor, on x's device, in
 * two passes (partial sums, then one work-item over the partials, or one
 * work-group of 256 where clt__reduce_wg takes the _wg kernels). */
clt_status clt__reduce_sum(clt_tensor *out, const clt_tensor *x, float divisor);

/* x is (rows, cols) float32, out (cols): out = (accumulate ? out : 0) + sum of x's rows. */
clt_status clt__sum_rows_into(clt_tensor *out, const clt_tensor *x, int accumulate);

#endif
