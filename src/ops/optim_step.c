/* Optimizer steps (SGD, Adam/AdamW): one fused kernel per parameter. */
#include <math.h>

#include "ops_internal.h"

/* A state tensor the step reads and writes alongside param. */
static clt_status check_state(const char *op, const char *what, const clt_tensor *param, clt_tensor *t)
{
    CLT_TRY(clt__need_f32(op, what, t));
    CLT_TRY(clt__same_device(op, param, t));
    CLT_TRY(clt__same_shape(op, param, t));
    return clt__wait_foreign_read(param->st->slot, t);
}

clt_status clt_sgd_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *momentum_buf, float lr,
                         float momentum, float weight_decay, int first_step)
{
    const char *op = "clt_sgd_step_";
    CLT_TRY(clt__need_f32(op, "param", param));
    CLT_TRY(clt__need_f32(op, "grad", grad));
    CLT_TRY(clt__same_device(op, param, grad));
    CLT_TRY(clt__same_shape(op, param, grad));
    if (!(lr >= 0.0f) || !(momentum >= 0.0f) || !(weight_decay >= 0.0f))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: lr %g, momentum %g and weight_decay %g must be >= 0", op,
                         (double)lr, (double)momentum, (double)weight_decay);
    cl_int mode = momentum == 0.0f ? 0 : first_step ? 1 : 2;
    if (mode != 0) {
        if (!momentum_buf)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: momentum %g needs a momentum buffer", op, (double)momentum);
        CLT_TRY(check_state(op, "momentum_buf", param, momentum_buf));
    }
    clt__buf pb = clt__tensor_buf(param), gb = clt__tensor_buf(grad);
    clt__buf bb = mode != 0 ? clt__tensor_buf(momentum_buf) : pb; /* not touched in mode 0 */
    cl_ulong n = (cl_ulong)param->numel;
    clt__arg args[] = {CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(gb.mem),     CLT_ARG(gb.off),
                       CLT_ARG(bb.mem), CLT_ARG(bb.off), CLT_ARG(n),          CLT_ARG(lr),
                       CLT_ARG(momentum), CLT_ARG(weight_decay), CLT_ARG(mode)};
    CLT_TRY(clt__launch1(param->st->slot, "optim", "sgd_step_f32", 11, args, (size_t)n, param));
    if (mode != 0) clt__same_write(momentum_buf, param);
    return CLT_OK;
}

clt_status clt_adam_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *m, clt_tensor *v, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int decoupled, int64_t step)
{
    const char *op = "clt_adam_step_";
    CLT_TRY(clt__need_f32(op, "param", param));
    CLT_TRY(clt__need_f32(op, "grad", grad));
    CLT_TRY(clt__same_device(op, param, grad));
    CLT_TRY(clt__same_shape(op, param, grad));
    if (step < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: step counts from 1, got %lld", op, (long long)step);
    if (!(lr >= 0.0f) || !(eps >= 0.0f) || !(weight_decay >= 0.0f) || !(beta1 >= 0.0f && beta1 < 1.0f) ||
        !(beta2 >= 0.0f && beta2 < 1.0f))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: needs lr, eps, weight_decay >= 0 and betas in [0, 1) (lr %g, betas %g %g, eps %g, "
                         "weight_decay %g)",
                         op, (double)lr, (double)beta1, (double)beta2, (double)eps, (double)weight_decay);
    CLT_TRY(check_state(op, "m", param, m));
    CLT_TRY(check_state(op, "v", param, v));
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)step)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    float l2 = decoupled ? 0.0f : weight_decay;
    float decay = decoupled ? 1.0f - lr * weight_decay : 1.0f;
    clt__buf pb = clt__tensor_buf(param), gb = clt__tensor_buf(grad), mb = clt__tensor_buf(m), vb = clt__tensor_buf(v);
    cl_ulong n = (cl_ulong)param->numel;
    clt__arg args[] = {CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(gb.mem),    CLT_ARG(gb.off),
                       CLT_ARG(mb.mem), CLT_ARG(mb.off), CLT_ARG(vb.mem),    CLT_ARG(vb.off),
                       CLT_ARG(n),      CLT_ARG(beta1),  CLT_ARG(beta2),     CLT_ARG(eps),
                       CLT_ARG(l2),     CLT_ARG(decay),  CLT_ARG(step_size), CLT_ARG(bc2_sqrt)};
    CLT_TRY(clt__launch1(param->st->slot, "optim", "adam_step_f32", 16, args, (size_t)n, param));
    clt__same_write(m, param);
    clt__same_write(v, param);
    return CLT_OK;
}
