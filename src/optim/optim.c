/* SGD and Adam over a model's flat parameter buffer: one fused update kernel
 * call per step (a float16 model's step adds the gradients' unscale pass
 * before it and the loss scaler's update after it, all decided on the
 * device: no host wait), state created lazily on the parameters' device. */
#include <math.h>
#include <stdlib.h>

#include "../core/error.h"
#include "../nn/nn_internal.h"
#include "../ops/half.h"
#include "../ops/optim_step.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/ops.h"
#include "cltensor/optim.h"
#include "optim_internal.h"

typedef enum { OPT_SGD, OPT_ADAM } opt_kind;

struct clt_optimizer {
    opt_kind kind;
    clt_model *model;
    float lr, momentum, weight_decay, beta1, beta2, eps;
    int decoupled;
    int64_t steps;          /* counted on the host; a float16 model's step counts on the device (amp) */
    int nstate;             /* buffers this optimizer keeps: 0, 1 or 2 */
    clt_tensor *state[2];   /* flat (N), CLT_MEM_OPTIMIZER; NULL until created */
    clt_tensor *master;     /* float16 models: float32 master weights (N), CLT_MEM_OPTIMIZER */
    clt_tensor *amp;        /* float16 models: the step's words on the device (CLT__AMP_*), NULL until a step */
    int amp_ahead;          /* steps ran since the host last added amp's count to `steps` */
    int64_t conversions;    /* the model's clt_model_to_dtype count when this was built */
    clt_dtype dtype;        /* the model's dtype then */
};

static const char *state_name(const clt_optimizer *o, int i)
{
    if (i == o->nstate) return "master";
    if (o->kind == OPT_SGD) return "momentum_buffer";
    return i == 0 ? "exp_avg" : "exp_avg_sq";
}

/* A float16 model's optimizer also keeps float32 master weights. */
static int has_master(const clt_optimizer *o) { return clt_model_dtype(o->model) == CLT_FLOAT16; }

static clt_status check_hyper(const char *op, const char *what, float v, float below)
{
    if (isfinite(v) && v >= 0 && v < below) return CLT_OK;
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %s is %g (must be finite, >= 0 and < %g)", op, what, (double)v,
                     (double)below);
}

static clt_status create(clt_optimizer **out, const char *op, clt_model *model, clt_optimizer proto)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (!model) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: model is NULL", op);
    if (!clt_model_parameters(model))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the model has no parameters yet; call clt_model_init", op);
    clt_optimizer *o = malloc(sizeof *o);
    if (!o) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    *o = proto;
    o->model = model;
    o->conversions = model->conversions;
    o->dtype = clt_model_dtype(model);
    *out = o;
    return CLT_OK;
}

clt_status clt_optimizer_create_sgd(clt_optimizer **out, clt_model *model, float lr, float momentum,
                                    float weight_decay)
{
    const char *op = "clt_optimizer_create_sgd";
    if (out) *out = NULL;
    CLT_TRY(check_hyper(op, "lr", lr, INFINITY));
    CLT_TRY(check_hyper(op, "momentum", momentum, 1.0f));
    CLT_TRY(check_hyper(op, "weight_decay", weight_decay, INFINITY));
    clt_optimizer proto = {.kind = OPT_SGD, .lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                           .nstate = momentum > 0 ? 1 : 0};
    return create(out, op, model, proto);
}

clt_status clt_optimizer_create_adam(clt_optimizer **out, clt_model *model, float lr, float beta1, float beta2,
                                     float eps, float weight_decay, int decoupled)
{
    const char *op = "clt_optimizer_create_adam";
    if (out) *out = NULL;
    CLT_TRY(check_hyper(op, "lr", lr, INFINITY));
    CLT_TRY(check_hyper(op, "beta1", beta1, 1.0f));
    CLT_TRY(check_hyper(op, "beta2", beta2, 1.0f));
    CLT_TRY(check_hyper(op, "eps", eps, INFINITY));
    CLT_TRY(check_hyper(op, "weight_decay", weight_decay, INFINITY));
    clt_optimizer proto = {.kind = OPT_ADAM, .lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
                           .weight_decay = weight_decay, .decoupled = decoupled != 0, .nstate = 2};
    return create(out, op, model, proto);
}

void clt_optimizer_free(clt_optimizer *opt)
{
    if (!opt) return;
    for (int i = 0; i < 2; i++) clt_tensor_release(opt->state[i]);
    clt_tensor_release(opt->master);
    clt_tensor_release(opt->amp);
    free(opt);
}

/* Creates missing state buffers next to the parameters; `zero` says whether
 * their first contents matter (SGD's first step overwrites its buffer).
 * *created has bit i set for each buffer i made; on failure none is left. */
static clt_status make_state(clt_optimizer *o, int zero, int *created)
{
    *created = 0;
    clt_tensor *params = clt_model_parameters(o->model), *made[2] = {NULL, NULL};
    clt_device dev = clt_tensor_device(params);
    int64_t n = clt_tensor_numel(params);
    clt_status s = CLT_OK;
    for (int i = 0; i < o->nstate && s == CLT_OK; i++) {
        if (o->state[i]) continue;
        /* float32 whatever the parameters' dtype (mixed precision). */
        s = zero ? clt_zeros(&made[i], dev, CLT_FLOAT32, 1, &n) : clt_empty(&made[i], dev, CLT_FLOAT32, 1, &n);
        if (s == CLT_OK) s = clt_tensor_set_category(made[i], CLT_MEM_OPTIMIZER);
    }
    for (int i = 0; i < o->nstate; i++) {
        if (s != CLT_OK) {
            clt_tensor_release(made[i]);
        } else if (made[i]) {
            o->state[i] = made[i];
            *created |= 1 << i;
        }
    }
    return s;
}

/* State must live where the parameters do. */
static clt_status check_state_device(const clt_optimizer *o, const char *op)
{
    clt_device pd = clt_model_device(o->model);
    for (int i = 0; i < o->nstate; i++) {
        if (!o->state[i] || clt_device_equal(clt_tensor_device(o->state[i]), pd)) continue;
        char a[32], b[32];
        clt_device_name(clt_tensor_device(o->state[i]), a, sizeof a);
        clt_device_name(pd, b, sizeof b);
        return clt__fail(CLT_ERR_DEVICE_MISMATCH,
                         "%s: the optimizer's %s is on %s but the parameters are on %s; build the optimizer after "
                         "clt_model_to", op, state_name(o, i), a, b);
    }
    return CLT_OK;
}

/* State born in a failed or skipped step holds nothing valid (created as
 * make_state's). */
static void drop_new_state(clt_optimizer *o, int created)
{
    for (int i = 0; i < o->nstate; i++) {
        if (!(created & (1 << i))) continue;
        clt_tensor_release(o->state[i]);
        o->state[i] = NULL;
    }
}

/* The float32 master weights, from the float16 parameters the first time. */
static clt_status make_master(clt_optimizer *o)
{
    if (o->master) return CLT_OK;
    CLT_TRY(clt_to_dtype(&o->master, clt_model_parameters(o->model), CLT_FLOAT32));
    return clt_tensor_set_category(o->master, CLT_MEM_OPTIMIZER);
}

/* Adds the steps a float16 model's device counted to the host's count (a
 * synchronization point, only when steps ran since the last time). */
static clt_status steps_view(const clt_optimizer *co)
{
    clt_optimizer *o = (clt_optimizer *)co; /* `steps` caches the device's count */
    if (!o->amp_ahead) return CLT_OK;
    int32_t w[CLT__AMP_WORDS], zero[CLT__AMP_WORDS] = {0};
    CLT_TRY(clt__read_host(o->amp, w, sizeof w, "clt_optimizer_steps (reading the float16 steps taken)"));
    CLT_TRY(clt__write_host(o->amp, zero, sizeof zero));
    o->steps += (uint32_t)w[CLT__AMP_TAKEN];
    o->amp_ahead = 0;
    return CLT_OK;
}

/* The step's words on the model's device, zero when made (a flag clear, no
 * step taken). */
static clt_status make_amp(clt_optimizer *o)
{
    clt_device dev = clt_model_device(o->model);
    if (o->amp && clt_device_equal(clt_tensor_device(o->amp), dev)) return CLT_OK;
    CLT_TRY(steps_view(o));
    int64_t words = CLT__AMP_WORDS;
    clt_tensor *t;
    CLT_TRY(clt_zeros(&t, dev, CLT_INT32, 1, &words));
    clt_tensor_release(o->amp);
    o->amp = t;
    return CLT_OK;
}

/* The update kernel of the optimizer's kind over params and grads. */
static clt_status update(clt_optimizer *o, clt_tensor *params, clt_tensor *grads, int created, const clt__update *u)
{
    if (o->kind == OPT_SGD)
        return clt__sgd_step(params, grads, o->state[0], o->lr, o->momentum, o->weight_decay, created != 0, u);
    return clt__adam_step(params, grads, o->state[0], o->state[1], o->lr, o->beta1, o->beta2, o->eps,
                          o->weight_decay, o->decoupled, o->steps + 1, u);
}

/* Mixed precision: the step updates the float32 master weights from the
 * gradients unscaled into float32, and narrows them into the float16
 * parameters, unless the gradients overflowed: then the step is skipped,
 * and a dynamic scale halves. The device decides (cl/optim.cl): the unscale
 * sets the overflow flag, the update reads it, and the scaler's update
 * after it counts the step and clears the flag, so the host never waits;
 * it reads the outcome only when asked (clt_model_loss_scale,
 * clt_optimizer_steps). zero: the unscale zeroes the float16 gradients as
 * it reads them. */
static clt_status half_step(clt_optimizer *o, int created, int zero)
{
    clt_model *m = o->model;
    if (o->master && !clt_device_equal(clt_tensor_device(o->master), clt_model_device(m)))
        return clt__fail(CLT_ERR_DEVICE_MISMATCH,
                         "clt_optimizer_step: the master weights are on another device than the parameters; build "
                         "the optimizer after clt_model_to");
    CLT_TRY(make_master(o));
    CLT_TRY(make_amp(o));
    clt_tensor *scaler, *g = NULL;
    CLT_TRY(clt__model_scaler(m, &scaler));
    clt_status s = clt_empty(&g, clt_model_device(m), CLT_FLOAT32, 1, &m->nparams);
    if (s == CLT_OK) s = clt_tensor_set_category(g, CLT_MEM_GRADIENTS);
    if (s == CLT_OK) s = clt__unscale_f16(g, m->grads, scaler, o->amp, zero);
    clt__update u = {.amp = o->amp, .half = m->params, .base = o->steps};
    if (s == CLT_OK) s = update(o, o->master, g, created, &u);
    clt_tensor_release(g);
    if (s == CLT_OK) s = clt__scaler_update(scaler, o->amp, m->scale_dynamic, CLT__SCALE_GROWTH);
    if (s != CLT_OK) return s;
    clt__model_scaler_stepped(m);
    /* A planning device runs nothing: the host counts. */
    if (clt_model_device(m).type == CLT_DEVICE_PLAN) o->steps++;
    else o->amp_ahead = 1;
    return CLT_OK;
}

/* clt_optimizer_step; zero: the update zeroes the gradients as it reads them
 * (clt__optimizer_step_zero). */
static clt_status step(clt_optimizer *opt, int zero)
{
    const char *op = "clt_optimizer_step";
    if (!opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: optimizer is NULL", op);
    if (opt->model->conversions != opt->conversions)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: the model was converted (clt_model_to_dtype, now %s) after this optimizer was built on "
                         "its %s parameters, so its state and master weights do not fit; convert before building an "
                         "optimizer",
                         op, clt_dtype_name(clt_model_dtype(opt->model)), clt_dtype_name(opt->dtype));
    clt_tensor *params = clt_model_parameters(opt->model), *grads = clt_model_gradients(opt->model);
    if (!grads) return CLT_OK;
    CLT_TRY(check_state_device(opt, op));
    int half = clt_tensor_dtype(params) == CLT_FLOAT16, new_master = half && !opt->master, new_amp = !opt->amp;
    int created;
    /* A float16 step the device skips leaves a new buffer as made: zeroed,
     * so that a momentum buffer's next step (mode 2) starts from nothing. */
    CLT_TRY(make_state(opt, opt->kind == OPT_ADAM || half, &created));
    clt__update u = {.zero_grad = zero};
    clt_status s = half ? half_step(opt, created, zero) : update(opt, params, grads, created, &u);
    if (s != CLT_OK) {
        drop_new_state(opt, created);
        if (new_master) {
            clt_tensor_release(opt->master);
            opt->master = NULL;
        }
        if (new_amp) {
            clt_tensor_release(opt->amp);
            opt->amp = NULL;
        }
        return s;
    }
    if (!half) opt->steps++;
    if (zero) clt__model_grads_zeroed(opt->model);
    return CLT_OK;
}

clt_status clt_optimizer_step(clt_optimizer *opt) { return step(opt, 0); }

clt_status clt__optimizer_step_zero(clt_optimizer *opt) { return step(opt, 1); }

float clt_optimizer_lr(const clt_optimizer *opt) { return opt ? opt->lr : 0.0f; }

clt_status clt_optimizer_set_lr(clt_optimizer *opt, float lr)
{
    if (!opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_set_lr: optimizer is NULL");
    CLT_TRY(check_hyper("clt_optimizer_set_lr", "lr", lr, INFINITY));
    opt->lr = lr;
    return CLT_OK;
}

int64_t clt_optimizer_steps(const clt_optimizer *opt)
{
    if (!opt) return 0;
    (void)steps_view(opt); /* else the host's count */
    return opt->steps;
}

clt_status clt_optimizer_set_steps(clt_optimizer *opt, int64_t steps)
{
    if (!opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_set_steps: optimizer is NULL");
    if (steps < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_set_steps: steps is %lld", (long long)steps);
    /* Cannot fail: the device's count is dropped, its words made again,
     * zero, by the next step. */
    clt_tensor_release(opt->amp);
    opt->amp = NULL;
    opt->amp_ahead = 0;
    opt->steps = steps;
    return CLT_OK;
}

int clt_optimizer_num_states(const clt_optimizer *opt) { return opt ? opt->nstate + has_master(opt) : 0; }

clt_status clt_optimizer_state(const clt_optimizer *opt, int i, const char **name, clt_tensor **state)
{
    if (!opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_state: optimizer is NULL");
    int n = clt_optimizer_num_states(opt);
    if (i < 0 || i >= n)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_state: index %d, the optimizer has %d buffers", i,
                         n);
    if (name) *name = state_name(opt, i);
    if (state) *state = i == opt->nstate ? opt->master : opt->state[i];
    return CLT_OK;
}

clt_status clt_optimizer_init_state(clt_optimizer *opt)
{
    if (!opt) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_optimizer_init_state: optimizer is NULL");
    CLT_TRY(check_state_device(opt, "clt_optimizer_init_state"));
    int created;
    CLT_TRY(make_state(opt, 1, &created));
    clt_status s = has_master(opt) ? make_master(opt) : CLT_OK;
    if (s != CLT_OK) drop_new_state(opt, created); /* as it was */
    return s;
}

clt_status clt__optimizer_stage_state(const clt_optimizer *opt, clt_tensor **out)
{
    const char *op = "clt_checkpoint_load";
    int n = clt_optimizer_num_states(opt);
    for (int i = 0; i < n; i++) out[i] = NULL;
    CLT_TRY(check_state_device(opt, op));
    clt_tensor *params = clt_model_parameters(opt->model);
    clt_device dev = clt_tensor_device(params);
    int64_t numel = clt_tensor_numel(params);
    clt_status s = CLT_OK;
    for (int i = 0; i < n && s == CLT_OK; i++) {
        s = clt_empty(&out[i], dev, CLT_FLOAT32, 1, &numel);
        if (s == CLT_OK) s = clt_tensor_set_category(out[i], CLT_MEM_OPTIMIZER);
    }
    if (s != CLT_OK)
        for (int i = 0; i < n; i++) {
            clt_tensor_release(out[i]);
            out[i] = NULL;
        }
    return s;
}

void clt__optimizer_adopt_state(clt_optimizer *opt, clt_tensor **staged)
{
    for (int i = 0; i < opt->nstate; i++) {
        clt_tensor_release(opt->state[i]);
        opt->state[i] = staged[i];
    }
    if (has_master(opt)) {
        clt_tensor_release(opt->master);
        opt->master = staged[opt->nstate];
    }
}
