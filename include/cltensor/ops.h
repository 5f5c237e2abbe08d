/* Operations on float32 tensors (float16 too where a function says so;
 * int32 labels and indices). Each runs as kernels on its operands' device
 * and only enqueues: nothing waits for the device.
 *
 * Conventions: a function that writes `clt_tensor **out` creates a new tensor
 * on the operands' device (the caller owns one reference). A name ending in
 * `_` updates its first argument in place. Operands on different devices
 * fail with CLT_ERR_DEVICE_MISMATCH; shapes that do not fit fail with
 * CLT_ERR_SHAPE, and operands said to share a shape must have exactly the
 * same shape (one-element tensors excepted); dtypes other than those documented fail with
 * CLT_ERR_UNSUPPORTED. Shapes are given as (rows, cols) for 2-D tensors. */
#ifndef CLTENSOR_OPS_H
#define CLTENSOR_OPS_H

#include "export.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* c = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T, row-major 2-D.
 * The device's dense implementation does the work. */
CLT_API clt_status clt_gemm_(int transpose_a, int transpose_b, float alpha, const clt_tensor *a, const clt_tensor *b,
                    float beta, clt_tensor *c);
/* out = a @ b; a is (M,K), b is (K,N). */
CLT_API clt_status clt_matmul(clt_tensor **out, const clt_tensor *a, const clt_tensor *b);

/* Dense layer. x is (B,C), w is (OC,C), b is (OC) or NULL; y is (B,OC):
 * y = x @ w^T + b. */
CLT_API clt_status clt_linear_forward(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b);
/* dy is (B,OC), x is (B,C), w is (OC,C). Accumulates dw += dy^T @ x (OC,C) and
 * db += sum over rows of dy (OC) (db may be NULL); when dx is not NULL
 * creates *dx = dy @ w (B,C). */
CLT_API clt_status clt_linear_backward_(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                               const clt_tensor *x, const clt_tensor *w);

/* Linear then ReLU in one call: y = max(x @ w^T + b, 0), shapes as
 * clt_linear_forward. Where the CPU kernels do the product (CPU-class
 * devices, docs/gpu.md, unless CLT_DENSE says otherwise) bias and ReLU run
 * in the product's store (one pass over y); after a CLBlast product one
 * bias + ReLU pass follows. Its
 * backward is clt_relu_backward_bias_ (with this y and the bias gradient)
 * then clt_linear_backward_ with db NULL. */
CLT_API clt_status clt_linear_relu_forward(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b);

/* y = max(x, 0), any shape; float32 or float16 (computed in float32, y
 * has x's dtype). */
CLT_API clt_status clt_relu(clt_tensor **y, const clt_tensor *x);
/* dx = dy where y > 0, else 0; y is the forward output (same shape as dy);
 * dy and y both float32 or both float16. */
CLT_API clt_status clt_relu_backward(clt_tensor **dx, const clt_tensor *dy, const clt_tensor *y);
/* clt_relu_backward fused with the bias gradient of the Linear before the
 * ReLU, in one pass: dy and y are (B,N), db is (N); creates *dx = dy where
 * y > 0, else 0, and accumulates db += sum over rows of dx, the same sums as
 * clt_linear_backward_'s db in the same order. */
CLT_API clt_status clt_relu_backward_bias_(clt_tensor **dx, clt_tensor *db, const clt_tensor *dy, const clt_tensor *y);

/* Uniform in [0, 1) and standard normal float32, from a counter-based
 * generator: the same seed gives clt_rand the same bits on every device;
 * clt_randn's go through log, sqrt and cos, which OpenCL bounds only in ulps,
 * so devices may differ in the last bits. */
CLT_API clt_status clt_rand(clt_tensor **out, clt_device dev, int ndim, const int64_t *shape, uint64_t seed);
CLT_API clt_status clt_randn(clt_tensor **out, clt_device dev, int ndim, const int64_t *shape, uint64_t seed);

/* out = a + b, elementwise, on their (common) device; a and b of the same
 * shape (else CLT_ERR_SHAPE; two one-element tensors match) and both float32
 * or both float16 (added in float32, out has their dtype), else
 * CLT_ERR_UNSUPPORTED. */
CLT_API clt_status clt_add(clt_tensor **out, const clt_tensor *a, const clt_tensor *b);

/* In-place elementwise updates. x must have exactly y's shape (equal
 * element counts are not enough: (2, 3) and (3, 2) fail with CLT_ERR_SHAPE
 * naming both); two one-element tensors match whatever their shapes, so a
 * loss of shape () adds into a (1) total. */
CLT_API clt_status clt_fill_(clt_tensor *t, double value);                   /* any dtype (int32: if it fits) */
CLT_API clt_status clt_scale_(clt_tensor *x, float alpha);                    /* x *= alpha */
CLT_API clt_status clt_axpy_(clt_tensor *y, float alpha, const clt_tensor *x); /* y += alpha * x */
CLT_API clt_status clt_add_(clt_tensor *y, const clt_tensor *x);              /* y += x */

/* Reductions. x is (B,C): out is (C), the sum of the rows. */
CLT_API clt_status clt_sum_rows(clt_tensor **out, const clt_tensor *x);
/* out is a one-element tensor: the sum / mean of every element of x. */
CLT_API clt_status clt_sum(clt_tensor **out, const clt_tensor *x);
CLT_API clt_status clt_mean(clt_tensor **out, const clt_tensor *x);
/* x is (B,C) float32; out is (B) int32: the index of each row's largest
 * value (the first one on ties; a NaN counts as largest, as in PyTorch). */
CLT_API clt_status clt_argmax_rows(clt_tensor **out, const clt_tensor *x);
/* a and b are int32 of equal shape; out is a one-element float32 tensor
 * holding how many elements are equal. */
CLT_API clt_status clt_count_equal(clt_tensor **out, const clt_tensor *a, const clt_tensor *b);

/* Softmax with cross-entropy, fused and numerically stable. logits is (B,C),
 * labels is (B) int32 in [0, C). *loss is a one-element tensor, the mean
 * loss over the batch. When dlogits is not NULL, *dlogits (B,C) is
 * (softmax(logits) - onehot(labels)) / B, computed in the same pass. Labels
 * out of range give NaN loss rather than reading out of bounds. */
CLT_API clt_status clt_softmax_cross_entropy(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                     const clt_tensor *labels);

/* Mean squared error, fused with its gradient: pred is (B,K) float32 and
 * target (B,K) float32, or (B) when K is 1. *loss is a one-element tensor,
 * the mean of (pred - target)^2 over the B*K elements (PyTorch's MSELoss).
 * When dpred is not NULL, *dpred (B,K) is 2 (pred - target) / (B*K),
 * computed in the same pass. An empty batch gives NaN. */
CLT_API clt_status clt_mse_loss(clt_tensor **loss, clt_tensor **dpred, const clt_tensor *pred, const clt_tensor *target);
/* The mean squared and mean absolute errors of pred against target (shaped
 * as for clt_mse_loss), one pass: each a one-element tensor (either output
 * may be NULL, not both). With scale (K) float32 not NULL, column c's error
 * is multiplied by scale[c] first: a standardised prediction's errors in
 * its target's units. */
CLT_API clt_status clt_regression_errors(clt_tensor **mse, clt_tensor **mae, const clt_tensor *pred,
                                         const clt_tensor *target, const clt_tensor *scale);

/* Optimizer updates, one fused kernel over a parameter (or a flat buffer
 * of parameters). SGD as PyTorch: g = grad + weight_decay * param;
 * buf = momentum * buf + g (buf may be NULL when momentum is 0; on the
 * first step pass first_step = 1 so buf = g); param -= lr * buf (or g). */
CLT_API clt_status clt_sgd_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *momentum_buf, float lr,
                         float momentum, float weight_decay, int first_step);
/* Adam as PyTorch (bias-corrected, eps outside the square root). With
 * decoupled = 1 this is AdamW: param *= 1 - lr * weight_decay before the
 * update; otherwise weight_decay is added to the gradient. step counts from 1. */
CLT_API clt_status clt_adam_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *m, clt_tensor *v, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int decoupled, int64_t step);

/* Autotuning of the dense kernels on CPU-class devices, the cudnn.benchmark of
 * cltensor. Products op(a) (m,k) @ op(b) (k,n) run a register-tiled kernel
 * whose tile (tile_m rows by tile_n columns per work-item) is fixed when the
 * kernel is built. clt_tune_gemm times a small set of tiles for one shape
 * and transposition on dev and records the fastest in the tuning cache, a
 * file per device and driver next to the kernel cache ($CLT_CACHE_DIR, else
 * $XDG_CACHE_HOME/cltensor, else ~/.cache/cltensor); every later product of
 * that shape, in this process or another, uses it without timing. With
 * CLT_TUNE=1 the first product of each shape without an entry is tuned
 * first (a synchronization point); with CLT_TUNE=0 products and
 * clt_tune_lookup never read the tuning cache and use the defaults. The
 * file is a cache entry under the rules of docs/reliability.md ("Caches are
 * code"): one that is damaged, too large (1 MiB, 16384 shapes) or in a
 * directory that is not the user's own is ignored with a warning
 * (clt_set_warning_handler). `clt tune` tunes a model's shapes.
 * *tile_m and *tile_n (may be NULL) receive the winner. Fails with
 * CLT_ERR_UNSUPPORTED on GPU-class devices (GPUs, or any device under
 * CLT_DEVICE_CLASS=gpu: their products run on CLBlast), CLT_ERR_INVALID_ARGUMENT for sizes below 1, CLT_ERR_IO when
 * the cache cannot be written (the winner is still used in this process). */
CLT_API clt_status clt_tune_gemm(clt_device dev, int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                         int *tile_m, int *tile_n);
/* The tile float32 products of this shape use on dev (with A contiguous:
 * the default also depends on A's leading dimension and dtype); *tuned (may
 * be NULL) is 1 when it comes from the tuning cache, 0 when it is the
 * default. Errors as
 * clt_tune_gemm's, never CLT_ERR_IO (an unreadable cache reads as empty). */
CLT_API clt_status clt_tune_lookup(clt_device dev, int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                           int *tile_m, int *tile_n, int *tuned);
/* The path of dev's tuning cache file into buf (len bytes). CLT_ERR_IO when
 * caching is off (CLT_CACHE_DIR=off) or the path does not fit. */
CLT_API clt_status clt_tune_cache_path(clt_device dev, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
