/* Internal: the float16 Linear (src/ops/linear_f16.c) a half model's layers
 * call. */
#ifndef CLT_OPS_LINEAR_F16_H
#define CLT_OPS_LINEAR_F16_H

#include "cltensor/tensor.h"
#include "ops_internal.h"

/* The float16 forms of the linear layer's ops (clt_relu and clt_add take
 * float16 themselves); shapes as their float32 forms in cltensor/ops.h,
 * every tensor float16. On GPU-class devices where cl/gemm_gpu.cl takes
 * the products (clt__dense_fuses_backward) and on the CPU kernels the
 * products read and write float16 directly; elsewhere (CLBlast), and for an
 * empty dimension, they widen their operands into float32 scratch and
 * narrow the result. */
clt_status clt__linear_forward_f16(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b);
clt_status clt__linear_backward_f16(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                                    const clt_tensor *x, const clt_tensor *w);
/* *y = ReLU(x w^T + b) and, when res (y's shape) is not NULL, *sum = *y +
 * res, each rounded to float16 as the ReLU's and the add's passes would
 * (a residual block's last Linear and ReLU): in the product's store on
 * cl/gemm_gpu.cl, else passes of their own (relu_f16, add_f16). */
clt_status clt__linear_relu_forward_f16(clt_tensor **y, clt_tensor **sum, const clt_tensor *x, const clt_tensor *w,
                                        const clt_tensor *b, const clt_tensor *res);
/* clt__linear_backward_fold on float16 (f may be NULL): on cl/gemm_gpu.cl
 * the masks, the bias gradient and base + dx (the product rounded to
 * float16 first, as add_f16 of the two) in the products' loads and stores;
 * elsewhere passes of their own (relu_backward_f16, add_f16). */
clt_status clt__linear_backward_fold_f16(clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw, clt_tensor *db,
                                         const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w);

#endif
