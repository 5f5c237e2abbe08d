/* Dense ops: GEMM, matmul and the linear layer's forward and backward.
 * Every product goes through dense_gemm, the one place that picks a
 * device's dense implementation (dense_impl): the register-tiled kernels of
 * cl/gemm_cpu.cl on CPU-class devices (clt__dense_cpu), with the tile the
 * tuning cache gives the shape (src/ops/tune.c); on GPU-class devices the
 * local-memory kernel of cl/gemm_gpu.cl for products of at most
 * CLT__GEMM_GPU_MAX_MNK multiply-adds (src/ops/gemm_gpu.c), CLBlast for
 * larger ones (its kernels are shaped for GPUs, its calls cost host time).
 * CLT_DENSE=cpu|clblast forces the CPU kernels or CLBlast. A product with
 * k = 0 runs no GEMM: c is filled or scaled (dense_gemm_fused). */
#include <clblast_c.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/env.h"
#include "../core/fault.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "clblast_params.h"
#include "gemm_gpu.h"
#include "ops_internal.h"
#include "tune.h"

static const char *clblast_name(CLBlastStatusCode c)
{
    switch (c) {
    case CLBlastNotImplemented: return "CLBlastNotImplemented";
    case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
    case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
    case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
    case CLBlastInvalidVectorX: return "CLBlastInvalidVectorX";
    case CLBlastInvalidVectorY: return "CLBlastInvalidVectorY";
    case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
    case CLBlastInvalidLeadDimA: return "CLBlastInvalidLeadDimA";
    case CLBlastInvalidLeadDimB: return "CLBlastInvalidLeadDimB";
    case CLBlastInvalidLeadDimC: return "CLBlastInvalidLeadDimC";
    case CLBlastInvalidIncrementX: return "CLBlastInvalidIncrementX";
    case CLBlastInvalidIncrementY: return "CLBlastInvalidIncrementY";
    case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
    case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
    case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
    case CLBlastInsufficientMemoryX: return "CLBlastInsufficientMemoryX";
    case CLBlastInsufficientMemoryY: return "CLBlastInsufficientMemoryY";
    case CLBlastInsufficientMemoryTemp: return "CLBlastInsufficientMemoryTemp";
    case CLBlastInvalidBatchCount: return "CLBlastInvalidBatchCount";
    case CLBlastInvalidOverrideKernel: return "CLBlastInvalidOverrideKernel";
    case CLBlastMissingOverrideParameter: return "CLBlastMissingOverrideParameter";
    case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
    case CLBlastNoHalfPrecision: return "CLBlastNoHalfPrecision";
    case CLBlastNoDoublePrecision: return "CLBlastNoDoublePrecision";
    case CLBlastInvalidVectorScalar: return "CLBlastInvalidVectorScalar";
    case CLBlastInsufficientMemoryScalar: return "CLBlastInsufficientMemoryScalar";
    case CLBlastDatabaseError: return "CLBlastDatabaseError";
    case CLBlastUnknownError: return "CLBlastUnknownError";
    case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
    default: return "unknown CLBlast status";
    }
}

/* CLBlast reuses OpenCL's (negative) codes; its own start at -1000. */
static clt_status clblast_fail(CLBlastStatusCode c, int slot, size_t m, size_t n, size_t k)
{
    const char *dev = clt__slot_get(slot)->name;
    if (c > -1000)
        return clt__cl_fail((cl_int)c, "CLBlastSgemm (m=%zu, n=%zu, k=%zu) on %s", m, n, k, dev);
    clt_status s = CLT_ERR_OPENCL;
    if (c == CLBlastNotImplemented || c == CLBlastInvalidLocalMemUsage || c == CLBlastDatabaseError)
        s = CLT_ERR_UNSUPPORTED;
    return clt__fail(s, "CLBlastSgemm (m=%zu, n=%zu, k=%zu) on %s failed: %s (%d)", m, n, k, dev,
                     clblast_name(c), (int)c);
}

/* CLBlast is not safe to call from several threads at once: its first
 * calls build per-device tables of kernel parameters (clblast::Database),
 * and two or three threads doing so, one per device, corrupted the heap (a
 * SIGSEGV in 4 of 30 runs of test_threads_on_every_device_from_cold with
 * CLT_DEVICE_CLASS=gpu beside another process: each of the three threads
 * making a product inside clblast::Database's constructor, the crashing
 * one copying a DatabaseEntry; CNugteren/CLBlast issue 486 reports multi-threaded
 * CLBlastSgemm on several GPUs as unreliable too; test_threads' "clblast"
 * entry makes such first calls in fresh processes). So
 * every call into CLBlast, the parameter overrides included, holds this
 * lock: calls from different threads take turns at enqueueing (a thread's
 * first call, which builds CLBlast's kernels for its device, keeps the
 * others waiting that long), and the kernels they enqueue still run side
 * by side. cltensor itself starts no threads. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

static clt_status clblast_gemm(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                               float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb,
                               float beta, clt_tensor *c, size_t ldc)
{
    if (clt__slot_plans(slot)) { /* a planning device: the product is skipped */
        clt__tensor_set_write(c, NULL);
        return CLT_OK;
    }
    pthread_mutex_lock(&clblast_lock);
    clt_status s = clt__clblast_params_apply(slot);
    pthread_mutex_unlock(&clblast_lock);
    CLT_TRY(s);
    /* CLBlast takes no wait list. */
    CLT_TRY(clt__wait_foreign_read(slot, c));
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(slot, &q));
    clt__buf ab = clt__tensor_buf(a), bb = clt__tensor_buf(b), cb = clt__tensor_buf(c);
    cl_event ev = NULL;
    if (clt__fault(CLT__FAULT_ENQUEUE))
        return clt__cl_fail(CL_OUT_OF_RESOURCES, "CLBlastSgemm (m=%zu, n=%zu, k=%zu) on %s (injected by CLT_FAULT)", m,
                            n, k, clt__slot_get(slot)->name);
    pthread_mutex_lock(&clblast_lock);
    CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, transpose_a ? CLBlastTransposeYes : CLBlastTransposeNo,
                                        transpose_b ? CLBlastTransposeYes : CLBlastTransposeNo, m, n, k, alpha,
                                        ab.mem, (size_t)ab.off, lda, bb.mem, (size_t)bb.off, ldb, beta, cb.mem,
                                        (size_t)cb.off, ldc, &q, &ev);
    pthread_mutex_unlock(&clblast_lock);
    if (st != CLBlastSuccess) return clblast_fail(st, slot, m, n, k);
    if (ev) {
        clt__tensor_set_write(c, ev);
        s = clt__after_enqueue(slot, ev, "CLBlastSgemm");
        clReleaseEvent(ev);
    }
    return s;
}

enum { DENSE_CPU, DENSE_GPU, DENSE_CLBLAST };

/* The implementation of an m x n x k product on slot: CLT_DENSE when set
 * (cpu, clblast), else by the device's class (clt__gpu_class:
 * CLT_DEVICE_CLASS, else a CPU, also when CLT_CPU_AS_GPU presents it as a
 * GPU, is CPU-class): the CPU kernels, or on GPU-class devices
 * cl/gemm_gpu.cl where clt__gemm_gpu_fits and the work-groups allow, else
 * CLBlast. */
static clt_status dense_impl(int slot, size_t m, size_t n, size_t k, int *out)
{
    /* The words cpu, clblast are 0, 1. */
    int forced, gpu;
    CLT_TRY(clt__env_get(CLT__ENV_DENSE, -1, &forced));
    if (forced >= 0) {
        *out = forced == 0 ? DENSE_CPU : DENSE_CLBLAST;
        return CLT_OK;
    }
    CLT_TRY(clt__gpu_class(slot, &gpu));
    if (!gpu) *out = DENSE_CPU;
    else *out = clt__gemm_gpu_fits(m, n, k) && clt__gemm_gpu_side(slot, m, n) ? DENSE_GPU : DENSE_CLBLAST;
    return CLT_OK;
}

clt_status clt__dense_cpu(int slot, int *out)
{
    int impl;
    CLT_TRY(dense_impl(slot, 0, 0, 0, &impl));
    *out = impl == DENSE_CPU;
    return CLT_OK;
}

clt_status clt__dense_fuses_backward(int slot, size_t m, size_t n, size_t k, int *out)
{
    int impl;
    CLT_TRY(dense_impl(slot, m, n, k, &impl));
    *out = impl == DENSE_GPU;
    return CLT_OK;
}

/* A product on the CPU kernels (cpu) or CLBlast with an optional bias (n)
 * added to every row of c, then ReLU when relu is set. The CPU kernels
 * apply both in their epilogue; after a CLBlast product one pass
 * (bias_relu_f32) applies them; for k = 0 the bias fills c and a ReLU pass
 * follows. */
static clt_status dense_gemm_fused(int slot, int cpu, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                                   float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb,
                                   float beta, clt_tensor *c, size_t ldc, const clt_tensor *bias, int relu,
                                   clt__packed_weight *pw)
{
    if (cpu && k > 0) {
        clt__gemm_tile tile;
        CLT_TRY(clt__gemm_tile_for(slot, transpose_a, transpose_b, m, n, k, lda, 0, &tile));
        return clt__cpu_gemm_packed(slot, tile, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                    ldc, bias, relu, pw);
    }
    if (k > 0 && (bias || relu)) {
        CLT_TRY(clblast_gemm(slot, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
        return clt__bias_relu_epilogue(slot, c, bias, m, n, relu);
    }
    if (bias) {
        clt__buf ob = clt__tensor_buf(c), bb = clt__tensor_buf(bias);
        cl_ulong rows = m, cols = n;
        clt__arg args[] = {CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(bb.mem), CLT_ARG(bb.off), CLT_ARG(rows),
                           CLT_ARG(cols)};
        size_t global[] = {n, m};
        CLT_TRY(clt__launch(slot, "dense", "bias_rows_f32", 6, args, 2, global, NULL, c));
        beta = 1.0f;
    }
    if (k == 0) CLT_TRY(beta == 0.0f ? clt_fill_(c, 0.0) : beta == 1.0f ? CLT_OK : clt_scale_(c, beta));
    else CLT_TRY(clblast_gemm(slot, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
    if (!relu) return CLT_OK;
    clt__buf cb = clt__tensor_buf(c);
    cl_ulong count = (cl_ulong)(m * n);
    clt__arg rargs[] = {CLT_ARG(cb.mem), CLT_ARG(cb.off), CLT_ARG(cb.mem), CLT_ARG(cb.off), CLT_ARG(count)};
    return clt__launch1(slot, "activation", "relu_f32", 5, rargs, (size_t)count, c);
}

/* What the store leaves to passes of their own on the CPU kernels and
 * CLBlast: the row sums of op(a) (a is (k, m), transposed), the mask and
 * the residual sum. */
static clt_status epilogue_passes(const clt_tensor *a, clt_tensor *c, size_t m, size_t n, size_t k,
                                  const clt__gemm_fusion *ep)
{
    if (ep->rowsum && m > 0 && k > 0) CLT_TRY(clt__sum_rows_into(ep->rowsum, a, 1));
    if (m == 0 || n == 0) return CLT_OK;
    if (ep->mask) CLT_TRY(clt__relu_backward_into(c, c, ep->mask));
    return ep->residual ? clt__add_into(ep->sum, c, ep->residual) : CLT_OK;
}

/* clt__dense_gemm with ep (may be NULL; see clt__gemm_fusion: a bias or
 * ReLU needs beta = 0 and ldc = n, a mask or a residual ldc = n, row sums
 * transpose_a with a of shape (k, m), a mask on a an a that is its whole
 * tensor; round is for float16).
 * cl/gemm_gpu.cl fuses all of it; elsewhere a masked copy of a is made
 * first, dense_gemm_fused takes the bias and ReLU and epilogue_passes the
 * rest. */
static clt_status dense_gemm(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float alpha,
                             const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                             clt_tensor *c, size_t ldc, const clt__gemm_fusion *ep, clt__packed_weight *pw)
{
    static const clt__gemm_fusion none = {0};
    if (!ep) ep = &none;
    int impl = DENSE_CPU;
    CLT_TRY(dense_impl(slot, m, n, k, &impl));
    if (impl == DENSE_GPU)
        return clt__gemm_gpu(slot, clt__gemm_gpu_side(slot, m, n), transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb,
                             beta, c, ldc, ep);
    if (ep->a_mask) {
        clt_tensor *masked;
        CLT_TRY(clt__tensor_new(&masked, slot, CLT_FLOAT32, a->ndim, a->shape));
        clt__gemm_fusion rest = *ep;
        rest.a_mask = NULL;
        clt_status s = clt__relu_backward_into(masked, a, ep->a_mask);
        if (s == CLT_OK)
            s = dense_gemm(slot, transpose_a, transpose_b, m, n, k, alpha, masked, lda, b, ldb, beta, c, ldc, &rest, pw);
        clt_tensor_release(masked);
        return s;
    }
    if (m > 0 && n > 0)
        CLT_TRY(dense_gemm_fused(slot, impl == DENSE_CPU, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb,
                                 beta, c, ldc, ep->bias, ep->relu, pw));
    return epilogue_passes(a, c, m, n, k, ep);
}

clt_status clt__dense_gemm_f16(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float alpha,
                               const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                               clt_tensor *c, size_t ldc, const clt__gemm_fusion *ep)
{
    static const clt__gemm_fusion none = {0};
    if (!ep) ep = &none;
    int impl;
    CLT_TRY(dense_impl(slot, m, n, k, &impl));
    int cpu_can = impl == DENSE_CPU && !ep->a_mask && !ep->relu && !ep->mask && !ep->rowsum && !ep->residual;
    if (k == 0 || (impl != DENSE_GPU && !cpu_can))
        return clt__fail(CLT_ERR_UNSUPPORTED,
                         "float16 GEMM (m=%zu, n=%zu, k=%zu) on %s: needs k > 0 and cl/gemm_gpu.cl, or the CPU "
                         "kernels with at most a bias fused", m, n, k, clt__slot_get(slot)->name);
    if (m == 0 || n == 0) return CLT_OK;
    if (impl == DENSE_GPU)
        return clt__gemm_gpu(slot, clt__gemm_gpu_side(slot, m, n), transpose_a, transpose_b, m, n, k, alpha, a, lda,
                             b, ldb, beta, c, ldc, ep);
    clt__gemm_tile tile;
    CLT_TRY(clt__gemm_tile_for(slot, transpose_a, transpose_b, m, n, k, lda, 1, &tile));
    return clt__cpu_gemm(slot, tile, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep->bias,
                         0);
}

clt_status clt__dense_gemm(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float alpha,
                           const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                           clt_tensor *c, size_t ldc)
{
    return dense_gemm(slot, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL, NULL);
}

static clt_status shape_fail(const char *op, const char *what, const clt_tensor *a, const clt_tensor *b,
                             const clt_tensor *c)
{
    char sa[128], sb[128], sc[128] = "";
    if (c) clt__shape_str(c, sc, sizeof sc);
    return clt__fail(CLT_ERR_SHAPE, "%s: %s (shapes %s, %s%s%s)", op, what, clt__shape_str(a, sa, sizeof sa),
                     clt__shape_str(b, sb, sizeof sb), c ? ", " : "", sc);
}

clt_status clt_gemm_(int transpose_a, int transpose_b, float alpha, const clt_tensor *a, const clt_tensor *b,
                    float beta, clt_tensor *c)
{
    const char *op = "clt_gemm_";
    CLT_TRY(clt__need_f32(op, "a", a));
    CLT_TRY(clt__need_f32(op, "b", b));
    CLT_TRY(clt__need_f32(op, "c", c));
    CLT_TRY(clt__same_device(op, a, b));
    CLT_TRY(clt__same_device(op, a, c));
    CLT_TRY(clt__need_2d(op, "a", a));
    CLT_TRY(clt__need_2d(op, "b", b));
    CLT_TRY(clt__need_2d(op, "c", c));
    int64_t m = a->shape[transpose_a ? 1 : 0], k = a->shape[transpose_a ? 0 : 1];
    int64_t kb = b->shape[transpose_b ? 1 : 0], n = b->shape[transpose_b ? 0 : 1];
    if (k != kb) return shape_fail(op, "inner dimensions of op(a) and op(b) differ", a, b, c);
    if (c->shape[0] != m || c->shape[1] != n) return shape_fail(op, "c is not (rows of op(a), cols of op(b))", a, b, c);
    return clt__dense_gemm(a->st->slot, transpose_a, transpose_b, (size_t)m, (size_t)n, (size_t)k, alpha, a,
                           (size_t)a->shape[1], b, (size_t)b->shape[1], beta, c, (size_t)c->shape[1]);
}

clt_status clt_matmul(clt_tensor **out, const clt_tensor *a, const clt_tensor *b)
{
    const char *op = "clt_matmul";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need_f32(op, "a", a));
    CLT_TRY(clt__need_f32(op, "b", b));
    CLT_TRY(clt__same_device(op, a, b));
    CLT_TRY(clt__need_2d(op, "a", a));
    CLT_TRY(clt__need_2d(op, "b", b));
    if (a->shape[1] != b->shape[0]) return shape_fail(op, "a is (M,K) and b must be (K,N)", a, b, NULL);
    int64_t shape[] = {a->shape[0], b->shape[1]};
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, a->st->slot, CLT_FLOAT32, 2, shape));
    clt_status s = clt__dense_gemm(a->st->slot, 0, 0, (size_t)shape[0], (size_t)shape[1], (size_t)a->shape[1], 1.0f,
                                   a, (size_t)a->shape[1], b, (size_t)b->shape[1], 0.0f, y, (size_t)shape[1]);
    return clt__finish(s, y, out);
}

/* y = x w^T + b (ReLU when relu); with res (y's shape) also *sum = y + res. */
static clt_status linear_forward(const char *op, clt_tensor **y, const clt_tensor *x, const clt_tensor *w,
                                 const clt_tensor *b, int relu, clt__packed_weight *pw, const clt_tensor *res,
                                 clt_tensor **sum)
{
    CLT_TRY(clt__need(op, "y", y));
    *y = NULL;
    CLT_TRY(clt__need_f32(op, "x", x));
    CLT_TRY(clt__need_f32(op, "w", w));
    if (b) CLT_TRY(clt__need_f32(op, "b", b));
    CLT_TRY(clt__same_device(op, x, w));
    if (b) CLT_TRY(clt__same_device(op, x, b));
    CLT_TRY(clt__need_2d(op, "x", x));
    CLT_TRY(clt__need_2d(op, "w", w));
    if (x->shape[1] != w->shape[1]) return shape_fail(op, "x is (B,C) and w must be (OC,C)", x, w, b);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return shape_fail(op, "w is (OC,C) and b must be (OC)", x, w, b);
    int slot = x->st->slot;
    cl_ulong rows = (cl_ulong)x->shape[0], cols = (cl_ulong)w->shape[0];
    int64_t shape[] = {x->shape[0], w->shape[0]};
    if (res) {
        CLT_TRY(clt__need_f32(op, "res", res));
        CLT_TRY(clt__same_device(op, x, res));
        if (res->ndim != 2 || res->shape[0] != shape[0] || res->shape[1] != shape[1])
            return shape_fail(op, "res must be (B,OC) for x (B,C) and w (OC,C)", res, x, w);
        CLT_TRY(clt__tensor_new(sum, slot, CLT_FLOAT32, 2, shape));
    }
    clt_tensor *out = NULL;
    clt_status s = clt__tensor_new(&out, slot, CLT_FLOAT32, 2, shape);
    clt__gemm_fusion ep = {.bias = b, .relu = relu, .residual = res, .sum = res ? *sum : NULL};
    if (s == CLT_OK)
        s = dense_gemm(slot, 0, 1, (size_t)rows, (size_t)cols, (size_t)x->shape[1], 1.0f, x, (size_t)x->shape[1], w,
                       (size_t)w->shape[1], 0.0f, out, (size_t)cols, &ep, pw);
    if (s != CLT_OK && res) {
        clt_tensor_release(*sum);
        *sum = NULL;
    }
    return clt__finish(s, out, y);
}

clt_status clt_linear_forward(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b)
{
    return linear_forward("clt_linear_forward", y, x, w, b, 0, NULL, NULL, NULL);
}

clt_status clt_linear_relu_forward(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b)
{
    return linear_forward("clt_linear_relu_forward", y, x, w, b, 1, NULL, NULL, NULL);
}

clt_status clt__linear_forward_packed(clt_tensor **y, const clt_tensor *x, const clt_tensor *w, const clt_tensor *b,
                                      int relu, clt__packed_weight *pw)
{
    return linear_forward(relu ? "clt_linear_relu_forward" : "clt_linear_forward", y, x, w, b, relu, pw, NULL, NULL);
}

clt_status clt__linear_relu_residual_forward(clt_tensor **y, clt_tensor **sum, const clt_tensor *x,
                                             const clt_tensor *w, const clt_tensor *b, const clt_tensor *res,
                                             clt__packed_weight *pw)
{
    const char *op = "clt__linear_relu_residual_forward";
    CLT_TRY(clt__need(op, "sum", sum));
    *sum = NULL;
    CLT_TRY(clt__need(op, "res", res));
    return linear_forward(op, y, x, w, b, 1, pw, res, sum);
}

/* A fold's mask (may be NULL): float32, like's shape, on dy's device. */
static clt_status check_mask(const char *op, const clt_tensor *mask, const char *what, const clt_tensor *like,
                             const clt_tensor *dy)
{
    if (!mask) return CLT_OK;
    CLT_TRY(clt__need_f32(op, "mask", mask));
    CLT_TRY(clt__same_device(op, dy, mask));
    if (mask->ndim != 2 || mask->shape[0] != like->shape[0] || mask->shape[1] != like->shape[1])
        return shape_fail(op, what, mask, like, NULL);
    return CLT_OK;
}

/* clt_linear_backward_ with what f folds in (NULL: nothing). */
static clt_status linear_backward(const char *op, clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw,
                                  clt_tensor *db, const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w)
{
    static const clt__linear_fold none = {0};
    if (!f) f = &none;
    clt_tensor *base = f->base;
    if (dx) *dx = NULL;
    CLT_TRY(clt__need_f32(op, "dw", dw));
    if (db) CLT_TRY(clt__need_f32(op, "db", db));
    CLT_TRY(clt__need_f32(op, "dy", dy));
    CLT_TRY(clt__need_f32(op, "x", x));
    CLT_TRY(clt__need_f32(op, "w", w));
    CLT_TRY(clt__same_device(op, dy, x));
    CLT_TRY(clt__same_device(op, dy, w));
    CLT_TRY(clt__same_device(op, dy, dw));
    if (db) CLT_TRY(clt__same_device(op, dy, db));
    CLT_TRY(clt__need_2d(op, "dy", dy));
    CLT_TRY(clt__need_2d(op, "x", x));
    CLT_TRY(clt__need_2d(op, "w", w));
    CLT_TRY(clt__need_2d(op, "dw", dw));
    int64_t B = x->shape[0], C = x->shape[1], OC = w->shape[0];
    if (dy->shape[0] != B || dy->shape[1] != OC || w->shape[1] != C)
        return shape_fail(op, "dy must be (B,OC) for x (B,C) and w (OC,C)", dy, x, w);
    if (dw->shape[0] != OC || dw->shape[1] != C) return shape_fail(op, "dw must have w's shape", dw, w, NULL);
    if (db && (db->ndim != 1 || db->shape[0] != OC)) return shape_fail(op, "db must be (OC) for w (OC,C)", db, w, NULL);
    if (base) {
        CLT_TRY(clt__need_f32(op, "base", base));
        CLT_TRY(clt__same_device(op, dy, base));
        if (base->ndim != 2 || base->shape[0] != B || base->shape[1] != C)
            return shape_fail(op, "base must have x's shape", base, x, NULL);
    }
    CLT_TRY(check_mask(op, f->dx_mask, "dx_mask must have x's shape", x, dy));
    CLT_TRY(check_mask(op, f->dy_mask, "dy_mask must have dy's shape", dy, dy));
    int slot = dy->st->slot;
    clt_tensor *g = NULL;
    clt_status s = CLT_OK;
    if (dx && base && f->in_place) g = clt_tensor_retain(base);
    else if (dx) CLT_TRY(clt__tensor_new(&g, slot, CLT_FLOAT32, 2, x->shape));
    if (dx && base && !f->in_place) s = clt_copy_(g, base);
    clt__gemm_fusion dw_ep = {.a_mask = f->dy_mask, .rowsum = db}, dx_ep = {.a_mask = f->dy_mask, .mask = f->dx_mask};
    if (s == CLT_OK)
        s = dense_gemm(slot, 1, 0, (size_t)OC, (size_t)C, (size_t)B, 1.0f, dy, (size_t)OC, x, (size_t)C, 1.0f, dw,
                       (size_t)C, &dw_ep, NULL);
    if (s == CLT_OK && dx)
        s = dense_gemm(slot, 0, 0, (size_t)B, (size_t)C, (size_t)OC, 1.0f, dy, (size_t)OC, w, (size_t)C,
                       base ? 1.0f : 0.0f, g, (size_t)C, &dx_ep, NULL);
    if (!dx) return s;
    return clt__finish(s, g, dx);
}

clt_status clt_linear_backward_(clt_tensor **dx, clt_tensor *dw, clt_tensor *db, const clt_tensor *dy,
                               const clt_tensor *x, const clt_tensor *w)
{
    return linear_backward("clt_linear_backward_", dx, NULL, dw, db, dy, x, w);
}

clt_status clt__linear_backward_fold(clt_tensor **dx, const clt__linear_fold *f, clt_tensor *dw, clt_tensor *db,
                                     const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w)
{
    const char *op = "clt__linear_backward_fold";
    CLT_TRY(clt__need(op, "fold", f));
    if (f->base) CLT_TRY(clt__need(op, "dx", dx));
    return linear_backward(op, dx, f, dw, db, dy, x, w);
}
