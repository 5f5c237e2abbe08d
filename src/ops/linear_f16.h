/* Internal: the float16 Linear (src/ops/linear_f16.c) a half model's layers
 * call. */
#ifndef CLT_OPS_LINEAR_F16_H
#define CLT_OPS_LINEAR_F16_H

#include "cltensor/tensor.h"

/* The float16 forms of the linear layer's ops (clt_relu and clt_add take
 * float16 themselves); shapes as their float32 forms in cltensor/ops.h,
 * every tensor float16. On the CPU kernels the products read and write
 * float16 directly; elsewhere (CLBlast), and for an empty dimension, they
 * widen their operands into float32 scratch and narrow the result. */
clt_status clt__linear_forward_f16(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b);
clt_status clt__linear_backward_f16(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                                    const clt_tensor *x, const clt_tensor *w);

#endif
