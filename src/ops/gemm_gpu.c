/* The GPU-class devices' own GEMM: one launch of cl/gemm_gpu.cl's
 * gemm_gpu_f32 (gemm_gpu_f16 for float16 storage) per product, what it
 * fuses (a ReLU's mask on a's reads; bias, ReLU, a ReLU's backward mask, a
 * bias gradient, a residual sum in its store) in the same launch. src/ops/dense.c chooses it
 * (clt__gemm_gpu_fits) for the products whose CLBlast call would cost more
 * host time than the device spends on them. */
#include <stdio.h>

#include "../core/checked.h"
#include "../device/device_internal.h"
#include "gemm_gpu.h"

/* Must match cl/gemm_gpu.cl: a work-group of side wgs owns a block of C of side RT wgs. */
#define RT 4
#define F_BIAS 1
#define F_RELU 2
#define F_MASK 4
#define F_ROWSUM 8
#define F_AMASK 16
#define F_ROUND 32
#define F_RESID 64

int clt__gemm_gpu_fits(size_t m, size_t n, size_t k)
{
    int64_t mn, mnk;
    if (m == 0 || n == 0 || k == 0 || clt__mul_i64((int64_t)m, (int64_t)n, &mn) || clt__mul_i64(mn, (int64_t)k, &mnk))
        return 0;
    return mnk <= CLT__GEMM_GPU_MAX_MNK;
}

int clt__gemm_gpu_side(int slot, size_t m, size_t n)
{
    const clt__slot *s = clt__slot_get(slot);
    if (s->max_work_group < 64) return 0;
    if (s->max_work_group < 256) return 8;
    cl_uint units = s->compute_units; /* 0, none known (a described device): the large blocks */
    size_t blocks = (m + 16 * RT - 1) / (16 * RT) * ((n + 16 * RT - 1) / (16 * RT));
    return blocks < units ? 8 : 16;
}

static int epilogue_flags(const clt__gemm_fusion *ep)
{
    if (!ep) return 0;
    return (ep->bias ? F_BIAS : 0) | (ep->relu ? F_RELU : 0) | (ep->mask ? F_MASK : 0) |
           (ep->rowsum ? F_ROWSUM : 0) | (ep->a_mask ? F_AMASK : 0) | (ep->round ? F_ROUND : 0) |
           (ep->residual ? F_RESID : 0);
}

/* The kernel's name and build options for c's dtype and side wgs. */
static void kernel_for(const clt_tensor *c, int wgs, const char **name, const char **opts)
{
    int half = c->dtype == CLT_FLOAT16;
    if (wgs == 16) {
        *name = half ? "gemm_gpu_f16" : "gemm_gpu_f32";
        *opts = half ? "-DHALF_IO" : NULL;
    } else {
        *name = half ? "gemm_gpu_f16_wg8" : "gemm_gpu_f32_wg8";
        *opts = half ? "-DHALF_IO -DWGS=8" : "-DWGS=8";
    }
}

clt_status clt__gemm_gpu(int slot, int wgs, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                         float alpha, const clt_tensor *a, size_t lda, const clt_tensor *b, size_t ldb, float beta,
                         clt_tensor *c, size_t ldc, const clt__gemm_fusion *ep)
{
    const char *name, *opts;
    kernel_for(c, wgs, &name, &opts);
    if (wgs != 16 && wgs != 8)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s (m=%zu, n=%zu, k=%zu) on %s: work-groups of side %d, not 16 or 8",
                         name, m, n, k, clt__slot_get(slot)->name, wgs);
    clt__buf ab = clt__tensor_buf(a), bb = clt__tensor_buf(b), cb = clt__tensor_buf(c);
    clt__buf biasb = ep && ep->bias ? clt__tensor_buf(ep->bias) : cb;
    clt__buf maskb = ep && ep->mask ? clt__tensor_buf(ep->mask) : cb;
    clt__buf rsb = ep && ep->rowsum ? clt__tensor_buf(ep->rowsum) : cb;
    clt__buf amb = ep && ep->a_mask ? clt__tensor_buf(ep->a_mask) : cb;
    clt__buf resb = ep && ep->residual ? clt__tensor_buf(ep->residual) : cb;
    clt__buf sumb = ep && ep->residual ? clt__tensor_buf(ep->sum) : cb;
    /* The launch writes rowsum and sum besides c. */
    if (ep && ep->rowsum) CLT_TRY(clt__wait_foreign_read(slot, ep->rowsum));
    if (ep && ep->residual) CLT_TRY(clt__wait_foreign_read(slot, ep->sum));
    cl_int ta = transpose_a != 0, tb = transpose_b != 0, flags = epilogue_flags(ep);
    cl_ulong um = m, un = n, uk = k, ulda = lda, uldb = ldb, uldc = ldc;
    clt__arg args[] = {CLT_ARG(ta),        CLT_ARG(tb),        CLT_ARG(um),       CLT_ARG(un),       CLT_ARG(uk),
                       CLT_ARG(alpha),     CLT_ARG(ab.mem),    CLT_ARG(ab.off),   CLT_ARG(ulda),     CLT_ARG(bb.mem),
                       CLT_ARG(bb.off),    CLT_ARG(uldb),      CLT_ARG(beta),     CLT_ARG(cb.mem),   CLT_ARG(cb.off),
                       CLT_ARG(uldc),      CLT_ARG(flags),     CLT_ARG(biasb.mem), CLT_ARG(biasb.off),
                       CLT_ARG(maskb.mem), CLT_ARG(maskb.off), CLT_ARG(rsb.mem),  CLT_ARG(rsb.off),
                       CLT_ARG(amb.mem),   CLT_ARG(amb.off),   CLT_ARG(resb.mem), CLT_ARG(resb.off),
                       CLT_ARG(sumb.mem),  CLT_ARG(sumb.off)};
    int nargs = (int)(sizeof args / sizeof args[0]);
    size_t bt = RT * (size_t)wgs;
    size_t global[] = {(n + bt - 1) / bt * (size_t)wgs, (m + bt - 1) / bt * (size_t)wgs};
    size_t local[] = {(size_t)wgs, (size_t)wgs};
    clt_status s = opts ? clt__launch_opts(slot, "gemm_gpu", opts, name, nargs, args, 2, global, local, c)
                        : clt__launch(slot, "gemm_gpu", name, nargs, args, 2, global, local, c);
    if (s == CLT_OK && ep && ep->rowsum) clt__same_write(ep->rowsum, c);
    if (s == CLT_OK && ep && ep->residual) clt__same_write(ep->sum, c);
    return s;
}
