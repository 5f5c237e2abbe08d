/* Optimizer steps (SGD, Adam/AdamW): one fused kernel per parameter. */
#include "optim_step.h"

#include <math.h>

#include "../device/device_internal.h"
#include "half.h"
#include "ops_internal.h"

/* The kernels' flags (cl/optim.cl). */
enum { ZERO_GRAD = 1, AMP = 2 };

/* A state tensor the step reads and writes alongside param. */
static clt_status check_state(const char *op, const char *what, const clt_tensor *param, clt_tensor *t)
{
    CLT_TRY(clt__need_f32(op, what, t));
    CLT_TRY(clt__same_device(op, param, t));
    CLT_TRY(clt__same_shape(op, param, t));
    return clt__wait_foreign_read(param->st->slot, t);
}

/* The kernel arguments of u's options; dummy stands in for what is not used. */
typedef struct update_args {
    clt__buf amp, half;
    cl_int flags;
    cl_ulong base;
} update_args;

/* Checks u (NULL: none) against param and grad and makes its arguments. */
static clt_status update_options(const char *op, const clt_tensor *param, clt_tensor *grad, const clt__update *u,
                                 update_args *a)
{
    clt__buf dummy = clt__tensor_buf(param);
    *a = (update_args){dummy, dummy, 0, 0};
    if (!u) return CLT_OK;
    if (u->zero_grad) {
        a->flags |= ZERO_GRAD;
        CLT_TRY(clt__wait_foreign_read(param->st->slot, grad));
    }
    if (!u->amp) return CLT_OK;
    CLT_TRY(clt__need_i32(op, "amp", u->amp));
    CLT_TRY(clt__need_f16(op, "half", u->half));
    CLT_TRY(clt__same_device(op, param, u->amp));
    CLT_TRY(clt__same_device(op, param, u->half));
    CLT_TRY(clt__same_shape(op, param, u->half));
    if (u->amp->numel != CLT__AMP_WORDS || u->base < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: amp has %lld words (must be %d) and base %lld", op,
                         (long long)u->amp->numel, CLT__AMP_WORDS, (long long)u->base);
    CLT_TRY(clt__wait_foreign_read(param->st->slot, u->half));
    a->flags |= AMP;
    a->amp = clt__tensor_buf(u->amp);
    a->half = clt__tensor_buf(u->half);
    a->base = (cl_ulong)u->base;
    return CLT_OK;
}

/* Records what the update wrote besides param. */
static void update_writes(const clt_tensor *param, clt_tensor *grad, const clt__update *u)
{
    if (u && u->zero_grad) clt__same_write(grad, param);
    if (u && u->amp) clt__same_write(u->half, param);
}

/* Elements per work-item of the CPU class's step kernels (cl/optim.cl's
 * _chunk_f32): sixteen at a time, with one work-item's bookkeeping per 512. */
#define CPU_PER_ITEM 512

/* Launches kernel `name` (args[0..nargs)) over the n elements of param:
 * one a work-item on a GPU-class device, else its _chunk_ form `chunked`,
 * which takes CPU_PER_ITEM as one argument more, args[nargs]. */
static clt_status launch_update(clt_tensor *param, const char *name, const char *chunked, int nargs, clt__arg *args,
                                cl_ulong n)
{
    int slot = param->st->slot, gpu;
    CLT_TRY(clt__gpu_class(slot, &gpu));
    if (gpu) return clt__launch1(slot, "optim", name, nargs, args, (size_t)n, param);
    static const cl_ulong per = CPU_PER_ITEM;
    args[nargs] = CLT_ARG(per);
    return clt__launch1(slot, "optim", chunked, nargs + 1, args, (size_t)((n + per - 1) / per), param);
}

clt_status clt_sgd_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *momentum_buf, float lr,
                         float momentum, float weight_decay, int first_step)
{
    /* grad is only read without options. */
    return clt__sgd_step(param, (clt_tensor *)grad, momentum_buf, lr, momentum, weight_decay, first_step, NULL);
}

clt_status clt__sgd_step(clt_tensor *param, clt_tensor *grad, clt_tensor *momentum_buf, float lr, float momentum,
                         float weight_decay, int first_step, const clt__update *u)
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
    update_args ua;
    CLT_TRY(update_options(op, param, grad, u, &ua));
    clt__buf pb = clt__tensor_buf(param), gb = clt__tensor_buf(grad);
    clt__buf bb = mode != 0 ? clt__tensor_buf(momentum_buf) : pb; /* not touched in mode 0 */
    cl_ulong n = (cl_ulong)param->numel;
    clt__arg args[] = {CLT_ARG(pb.mem),       CLT_ARG(pb.off),      CLT_ARG(gb.mem),       CLT_ARG(gb.off),
                       CLT_ARG(bb.mem),       CLT_ARG(bb.off),      CLT_ARG(n),            CLT_ARG(lr),
                       CLT_ARG(momentum),     CLT_ARG(weight_decay), CLT_ARG(mode),        CLT_ARG(ua.amp.mem),
                       CLT_ARG(ua.amp.off),   CLT_ARG(ua.half.mem), CLT_ARG(ua.half.off), CLT_ARG(ua.flags),
                       {0, NULL}};
    CLT_TRY(launch_update(param, "sgd_step_f32", "sgd_step_chunk_f32", 16, args, n));
    if (mode != 0) clt__same_write(momentum_buf, param);
    update_writes(param, grad, u);
    return CLT_OK;
}

clt_status clt_adam_step_(clt_tensor *param, const clt_tensor *grad, clt_tensor *m, clt_tensor *v, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int decoupled, int64_t step)
{
    /* grad is only read without options. */
    return clt__adam_step(param, (clt_tensor *)grad, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step,
                          NULL);
}

clt_status clt__adam_step(clt_tensor *param, clt_tensor *grad, clt_tensor *m, clt_tensor *v, float lr, float beta1,
                          float beta2, float eps, float weight_decay, int decoupled, int64_t step,
                          const clt__update *u)
{
    const char *op = "clt_adam_step_";
    CLT_TRY(clt__need_f32(op, "param", param));
    CLT_TRY(clt__need_f32(op, "grad", grad));
    CLT_TRY(clt__same_device(op, param, grad));
    CLT_TRY(clt__same_shape(op, param, grad));
    if (u && u->amp) step = 1; /* counted on the device */
    if (step < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: step counts from 1, got %lld", op, (long long)step);
    if (!(lr >= 0.0f) || !(eps >= 0.0f) || !(weight_decay >= 0.0f) || !(beta1 >= 0.0f && beta1 < 1.0f) ||
        !(beta2 >= 0.0f && beta2 < 1.0f))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: needs lr, eps, weight_decay >= 0 and betas in [0, 1) (lr %g, betas %g %g, eps %g, "
                         "weight_decay %g)",
                         op, (double)lr, (double)beta1, (double)beta2, (double)eps, (double)weight_decay);
    CLT_TRY(check_state(op, "m", param, m));
    CLT_TRY(check_state(op, "v", param, v));
    update_args ua;
    CLT_TRY(update_options(op, param, grad, u, &ua));
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)step)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    float l2 = decoupled ? 0.0f : weight_decay;
    float decay = decoupled ? 1.0f - lr * weight_decay : 1.0f;
    clt__buf pb = clt__tensor_buf(param), gb = clt__tensor_buf(grad), mb = clt__tensor_buf(m), vb = clt__tensor_buf(v);
    cl_ulong n = (cl_ulong)param->numel;
    clt__arg args[] = {CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(gb.mem),    CLT_ARG(gb.off),
                       CLT_ARG(mb.mem), CLT_ARG(mb.off), CLT_ARG(vb.mem),    CLT_ARG(vb.off),
                       CLT_ARG(n),      CLT_ARG(beta1),  CLT_ARG(beta2),     CLT_ARG(eps),
                       CLT_ARG(l2),     CLT_ARG(decay),  CLT_ARG(step_size), CLT_ARG(bc2_sqrt),
                       CLT_ARG(ua.amp.mem), CLT_ARG(ua.amp.off), CLT_ARG(ua.half.mem), CLT_ARG(ua.half.off),
                       CLT_ARG(ua.flags), CLT_ARG(lr), CLT_ARG(ua.base), {0, NULL}};
    CLT_TRY(launch_update(param, "adam_step_f32", "adam_step_chunk_f32", 23, args, n));
    clt__same_write(m, param);
    clt__same_write(v, param);
    update_writes(param, grad, u);
    return CLT_OK;
}

clt_status clt__scaler_update(clt_tensor *scaler, clt_tensor *amp, int dynamic, int growth)
{
    const char *op = "clt_optimizer_step (the loss scaler)";
    CLT_TRY(clt__need_i32(op, "scaler", scaler));
    CLT_TRY(clt__need_i32(op, "amp", amp));
    CLT_TRY(clt__same_device(op, scaler, amp));
    if (scaler->numel != CLT__SCALER_WORDS || amp->numel != CLT__AMP_WORDS)
        return clt__fail(CLT_ERR_SHAPE, "%s: %lld scaler and %lld amp words (must be %d and %d)", op,
                         (long long)scaler->numel, (long long)amp->numel, CLT__SCALER_WORDS, CLT__AMP_WORDS);
    CLT_TRY(clt__wait_foreign_read(scaler->st->slot, amp));
    clt__buf sb = clt__tensor_buf(scaler), ab = clt__tensor_buf(amp);
    cl_int dyn = dynamic != 0, grow = growth;
    clt__arg args[] = {CLT_ARG(sb.mem), CLT_ARG(sb.off), CLT_ARG(ab.mem), CLT_ARG(ab.off), CLT_ARG(dyn),
                       CLT_ARG(grow)};
    CLT_TRY(clt__launch1(scaler->st->slot, "optim", "scaler_update", 6, args, 1, scaler));
    clt__same_write(amp, scaler);
    return CLT_OK;
}
