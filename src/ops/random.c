/* Seeded random tensors, drawn on the device. */
#include "../device/device_internal.h"
#include "../kernels/program.h"
#include "cltensor/ops.h"

static clt_status random_tensor(clt_tensor **out, clt_device dev, int ndim, const int64_t *shape, uint64_t seed,
                                const char *kernel, const char *op)
{
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, slot, CLT_FLOAT32, ndim, shape));
    clt__buf yb = clt__tensor_buf(y);
    cl_ulong s64 = seed, n = (cl_ulong)y->numel;
    clt__arg args[] = {CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(s64), CLT_ARG(n)};
    clt_status s = clt__launch1(slot, "random", kernel, 4, args, (size_t)n, y);
    if (s != CLT_OK) {
        clt_tensor_release(y);
        return s;
    }
    *out = y;
    return CLT_OK;
}

clt_status clt_rand(clt_tensor **out, clt_device dev, int ndim, const int64_t *shape, uint64_t seed)
{
    return random_tensor(out, dev, ndim, shape, seed, "rand_uniform_f32", "clt_rand");
}

clt_status clt_randn(clt_tensor **out, clt_device dev, int ndim, const int64_t *shape, uint64_t seed)
{
    return random_tensor(out, dev, ndim, shape, seed, "rand_normal_f32", "clt_randn");
}
