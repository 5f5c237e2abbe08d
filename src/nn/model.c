/* Models: building a Sequential, the flat parameter and gradient buffers and
 * their views, placement, and the forward/backward entry points. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/fault.h"
#include "../ops/half.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/async.h"
#include "cltensor/ops.h"
#include "nn_internal.h"

clt_status clt__need_model(const char *op, const char *what, const clt_model *m)
{
    CLT_TRY(clt__need(op, what, m));
    if (m->initialised) return CLT_OK;
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %s has no parameters yet; call clt_model_init", op, what);
}

static clt_status need_built(const char *op, const clt_model *m) { return clt__need_model(op, "the model", m); }

clt_status clt_model_create(clt_model **out, const char *prefix)
{
    CLT_TRY(clt__need("clt_model_create", "out", out));
    *out = NULL;
    if (!prefix) prefix = "";
    clt_model *m = calloc(1, sizeof *m);
    if (!m) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_model_create: out of host memory");
    if (strlen(prefix) >= sizeof m->prefix) {
        free(m);
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_create: prefix \"%s\" is longer than %zu characters",
                         prefix, sizeof m->prefix - 1);
    }
    strcpy(m->prefix, prefix);
    m->features = -1;
    m->training = 1;
    m->loss_scale = 65536.0f; /* PyTorch GradScaler's defaults */
    m->scale_dynamic = 1;
    *out = m;
    return CLT_OK;
}

static void layers_free(clt__layer *layers, int n)
{
    for (int i = 0; i < n; i++) {
        clt__layer *l = &layers[i];
        clt_tensor_release(l->w);
        clt_tensor_release(l->b);
        clt_tensor_release(l->dw);
        clt_tensor_release(l->db);
        clt_tensor_release(l->saved);
        clt_tensor_release(l->seg_input);
        clt__packed_weight_drop(&l->packed);
        if (l->body) layers_free(l->body, l->nbody);
        free(l->body);
    }
}

void clt_model_free(clt_model *m)
{
    if (!m) return;
    layers_free(m->layers, m->nlayers);
    free(m->layers);
    clt_tensor_release(m->params);
    clt_tensor_release(m->grads);
    clt_tensor_release(m->scaler);
    free(m->linears);
    free(m->named);
    free(m);
}

/* Copies of n layer descriptions, without their tensors; NULL when host
 * memory runs out. */
static clt__layer *layers_copy(const clt__layer *src, int n)
{
    clt__layer *l = calloc((size_t)(n > 0 ? n : 1), sizeof *l);
    for (int i = 0; l && i < n; i++) {
        l[i] = src[i];
        l[i].w = l[i].b = l[i].dw = l[i].db = l[i].saved = l[i].seg_input = NULL;
        memset(&l[i].packed, 0, sizeof l[i].packed);
        l[i].seg_pos = l[i].seg_len = l[i].seg_internal = 0;
        l[i].body = NULL;
        if (src[i].body && !(l[i].body = layers_copy(src[i].body, src[i].nbody))) {
            l[i].nbody = 0;
            layers_free(l, i + 1);
            free(l);
            return NULL;
        }
    }
    return l;
}

/* The host's view of the loss scaler: read back from the device when a step
 * has changed it since (a synchronization point, named after api). */
static clt_status scaler_view(const clt_model *cm, const char *api)
{
    clt_model *m = (clt_model *)cm; /* the view is a cache of the device's state */
    if (!m->scaler_ahead) return CLT_OK;
    int32_t w[CLT__SCALER_WORDS];
    CLT_TRY(clt__read_host(m->scaler, w, sizeof w, api));
    memcpy(&m->loss_scale, &w[CLT__SCALER_SCALE], sizeof m->loss_scale);
    m->clean_steps = w[CLT__SCALER_CLEAN];
    m->scaler_ahead = 0;
    return CLT_OK;
}

/* The device's scaler takes the host's view. */
static clt_status scaler_upload(clt_model *m)
{
    int32_t w[CLT__SCALER_WORDS];
    float inv = 1.0f / m->loss_scale;
    memcpy(&w[CLT__SCALER_SCALE], &m->loss_scale, sizeof(float));
    memcpy(&w[CLT__SCALER_INV], &inv, sizeof(float));
    w[CLT__SCALER_CLEAN] = (int32_t)m->clean_steps;
    return clt__write_host(m->scaler, w, sizeof w);
}

clt_status clt__model_scaler(clt_model *m, clt_tensor **out)
{
    *out = NULL;
    clt_device dev = clt_model_device(m);
    if (!m->scaler || !clt_device_equal(clt_tensor_device(m->scaler), dev)) {
        CLT_TRY(scaler_view(m, "clt_model_backward (reading the loss scaler on its old device)"));
        int64_t words = CLT__SCALER_WORDS;
        clt_tensor *t;
        CLT_TRY(clt_empty(&t, dev, CLT_INT32, 1, &words));
        clt_tensor_release(m->scaler);
        m->scaler = t;
        m->scaler_ahead = 0;
        clt_status s = scaler_upload(m);
        if (s != CLT_OK) {
            clt_tensor_release(m->scaler);
            m->scaler = NULL;
            return s;
        }
    }
    *out = m->scaler;
    return CLT_OK;
}

void clt__model_scaler_stepped(clt_model *m)
{
    /* A planning device runs nothing: the host's view stays right. */
    if (clt_model_device(m).type != CLT_DEVICE_PLAN) m->scaler_ahead = 1;
}

void clt__model_grads_zeroed(clt_model *m) { m->zero_version = m->grads ? clt__tensor_version(m->grads) : 0; }

clt_status clt__model_layout(clt_model **out, const clt_model *m)
{
    CLT_TRY(scaler_view(m, "copying a model's layout (reading its loss scaler)"));
    CLT_TRY(clt_model_create(out, m->prefix));
    clt_model *c = *out;
    c->layers = layers_copy(m->layers, m->nlayers);
    if (!c->layers) {
        clt_model_free(c);
        *out = NULL;
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "copying a model's layers: out of host memory");
    }
    c->nlayers = c->cap = m->nlayers;
    c->features = m->features;
    c->recompute_blocks = m->recompute_blocks;
    c->drop_packed = m->drop_packed;
    c->loss_scale = m->loss_scale;
    c->scale_dynamic = m->scale_dynamic;
    c->clean_steps = m->clean_steps;
    return CLT_OK;
}

/* Appends a layer named "<prefix>.<index>" (just "<index>" with an empty prefix) to the model. */
static clt_status add_layer(clt_model *m, const char *op, clt__layer_kind kind, clt__layer **out)
{
    CLT_TRY(clt__need(op, "model", m));
    if (m->initialised)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the model is initialised; add layers before clt_model_init",
                         op);
    if (m->nlayers == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        clt__layer *grown = realloc(m->layers, (size_t)cap * sizeof *grown);
        if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
        m->layers = grown;
        m->cap = cap;
    }
    clt__layer *l = &m->layers[m->nlayers];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s%s%d", m->prefix, m->prefix[0] ? "." : "", m->nlayers);
    m->nlayers++;
    *out = l;
    return CLT_OK;
}

static clt_status check_width(const clt_model *m, const char *op, int64_t in)
{
    if (m->features < 0 || m->features == in) return CLT_OK;
    return clt__fail(CLT_ERR_SHAPE, "%s: layer %d takes %lld features but the layer before gives %lld", op,
                     m->nlayers, (long long)in, (long long)m->features);
}

static clt_status check_positive(const char *op, const char *what, int64_t v)
{
    if (v > 0 && v <= INT32_MAX) return CLT_OK;
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %s is %lld (must be 1..%d)", op, what, (long long)v, INT32_MAX);
}

clt_status clt_model_add_linear(clt_model *m, int64_t in_features, int64_t out_features)
{
    const char *op = "clt_model_add_linear";
    CLT_TRY(clt__need(op, "model", m));
    CLT_TRY(check_positive(op, "in_features", in_features));
    CLT_TRY(check_positive(op, "out_features", out_features));
    CLT_TRY(check_width(m, op, in_features));
    clt__layer *l;
    CLT_TRY(add_layer(m, op, CLT__LINEAR, &l));
    l->in = in_features;
    l->out = out_features;
    m->features = out_features;
    return CLT_OK;
}

clt_status clt_model_add_relu(clt_model *m)
{
    clt__layer *l;
    return add_layer(m, "clt_model_add_relu", CLT__RELU, &l);
}

static int good_layer_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > 31) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", name[i])) return 0;
    return 1;
}

clt_status clt_model_add_layer(clt_model *m, const clt_layer_ops *ops)
{
    const char *op = "clt_model_add_layer";
    CLT_TRY(clt__need(op, "ops", ops));
    if (!ops->forward || !ops->backward)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the layer needs both a forward and a backward function", op);
    if (!good_layer_name(ops->name))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: layer name \"%.40s\" must be 1 to 31 letters, digits, '_' "
                         "or '-'", op, ops->name ? ops->name : "(null)");
    clt__layer *l;
    CLT_TRY(add_layer(m, op, CLT__CUSTOM, &l));
    l->ops = *ops;
    return CLT_OK;
}

clt_status clt_model_add_flatten(clt_model *m)
{
    clt__layer *l;
    CLT_TRY(add_layer(m, "clt_model_add_flatten", CLT__FLATTEN, &l));
    m->features = -1;
    return CLT_OK;
}

clt_status clt_model_add_residual(clt_model *m, int64_t num_hiddens)
{
    const char *op = "clt_model_add_residual";
    CLT_TRY(clt__need(op, "model", m));
    CLT_TRY(check_positive(op, "num_hiddens", num_hiddens));
    CLT_TRY(check_width(m, op, num_hiddens));
    clt__layer *body = calloc(4, sizeof *body);
    if (!body) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    clt__layer *l;
    clt_status s = add_layer(m, op, CLT__RESIDUAL, &l);
    if (s != CLT_OK) {
        free(body);
        return s;
    }
    for (int j = 0; j < 4; j++) {
        body[j].kind = j % 2 == 0 ? CLT__LINEAR : CLT__RELU;
        body[j].in = body[j].out = num_hiddens;
        snprintf(body[j].name, sizeof body[j].name, "%.80s.body.%d", l->name, j);
    }
    l->body = body;
    l->nbody = 4;
    m->features = num_hiddens;
    return CLT_OK;
}

static int count_linears(const clt__layer *layers, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += layers[i].kind == CLT__LINEAR ? 1 : count_linears(layers[i].body, layers[i].nbody);
    return c;
}

static void collect_linears(clt_model *m, clt__layer *layers, int n)
{
    for (int i = 0; i < n; i++) {
        if (layers[i].kind == CLT__LINEAR) m->linears[m->nlinears++] = &layers[i];
        if (layers[i].body) collect_linears(m, layers[i].body, layers[i].nbody);
    }
}

/* Views of one Linear's weight (out,in) and bias (out) in a flat buffer. */
static clt_status linear_views(clt_tensor *flat, const clt__layer *l, clt_tensor **w, clt_tensor **b)
{
    clt_tensor *seg;
    CLT_TRY(clt_narrow(&seg, flat, l->offset, l->out * l->in));
    int64_t shape[2] = {l->out, l->in};
    clt_status s = clt_reshape(w, seg, 2, shape);
    clt_tensor_release(seg);
    if (s != CLT_OK) return s;
    s = clt_narrow(b, flat, l->offset + l->out * l->in, l->out);
    if (s != CLT_OK) {
        clt_tensor_release(*w);
        *w = NULL;
    }
    return s;
}

/* Every Linear's weight and bias views of a flat buffer, in a new array
 * (2 per Linear); nothing is changed. */
static clt_status make_views(const clt_model *m, clt_tensor *flat, clt_tensor ***out)
{
    *out = NULL;
    if (clt__fault(CLT__FAULT_HOST))
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory binding parameter views (injected by CLT_FAULT)");
    clt_tensor **v = calloc((size_t)m->nlinears * 2 + 1, sizeof *v);
    if (!v) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory binding parameter views");
    for (int k = 0; k < m->nlinears; k++) {
        clt_status s = linear_views(flat, m->linears[k], &v[2 * k], &v[2 * k + 1]);
        if (s != CLT_OK) {
            for (int j = 0; j < 2 * k; j++) clt_tensor_release(v[j]);
            free(v);
            return s;
        }
    }
    *out = v;
    return CLT_OK;
}

/* Points every Linear's parameter (or gradient) views at those of
 * make_views, which it takes; cannot fail. */
static void install_views(clt_model *m, clt_tensor **v, int grads)
{
    for (int k = 0; k < m->nlinears; k++) {
        clt__layer *l = m->linears[k];
        clt_tensor **w = grads ? &l->dw : &l->w, **b = grads ? &l->db : &l->b;
        clt_tensor_release(*w);
        clt_tensor_release(*b);
        *w = v[2 * k];
        *b = v[2 * k + 1];
    }
    free(v);
}

/* Points every Linear's parameter (or gradient) views at a flat buffer; the
 * model is unchanged on failure. */
static clt_status bind_views(clt_model *m, clt_tensor *flat, int grads)
{
    clt_tensor **v;
    CLT_TRY(make_views(m, flat, &v));
    install_views(m, v, grads);
    return CLT_OK;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* PyTorch's default Linear init, weight and bias uniform in
 * [-1/sqrt(in), 1/sqrt(in)), drawn in flat-buffer order. */
static void init_values(const clt_model *m, float *host, uint64_t seed)
{
    uint64_t state = seed;
    for (int k = 0; k < m->nlinears; k++) {
        const clt__layer *l = m->linears[k];
        double bound = 1.0 / sqrt((double)l->in);
        int64_t n = l->out * l->in + l->out;
        for (int64_t j = 0; j < n; j++) {
            double u = (double)(splitmix(&state) >> 11) / 9007199254740992.0;
            host[l->offset + j] = (float)(bound * (2.0 * u - 1.0));
        }
    }
}

static clt_status build_names(clt_model *m)
{
    m->named = calloc((size_t)m->nlinears * 2 + 1, sizeof *m->named);
    if (!m->named) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_model_init: out of host memory");
    for (int k = 0; k < m->nlinears; k++)
        for (int bias = 0; bias < 2; bias++) {
            clt__named *e = &m->named[2 * k + bias];
            snprintf(e->name, sizeof e->name, "%s.%s", m->linears[k]->name, bias ? "bias" : "weight");
            e->layer = m->linears[k];
            e->is_bias = bias;
        }
    m->nnamed = 2 * m->nlinears;
    return CLT_OK;
}

static void unbuild(clt_model *m)
{
    for (int k = 0; k < m->nlinears; k++) {
        clt__layer *l = m->linears[k];
        clt_tensor_release(l->w);
        clt_tensor_release(l->b);
        l->w = l->b = NULL;
        clt__packed_weight_drop(&l->packed);
    }
    clt_tensor_release(m->params);
    m->params = NULL;
    free(m->linears);
    m->linears = NULL;
    m->nlinears = 0;
    free(m->named);
    m->named = NULL;
    m->nnamed = 0;
    m->nparams = 0;
}

clt_status clt_model_init(clt_model *m, clt_device dev, uint64_t seed)
{
    CLT_TRY(clt__need("clt_model_init", "model", m));
    if (m->initialised) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_init: the model is initialised already");
    int n = count_linears(m->layers, m->nlayers);
    m->linears = calloc((size_t)n + 1, sizeof *m->linears);
    if (!m->linears) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_model_init: out of host memory");
    collect_linears(m, m->layers, m->nlayers);
    int64_t total = 0, bytes = 0;
    for (int k = 0; k < n; k++) {
        clt__layer *l = m->linears[k];
        l->offset = total;
        if (clt__muladd_i64(&total, l->out, l->in) != 0 || clt__add_i64(total, l->out, &total) != 0 ||
            clt__mul_i64(total, (int64_t)sizeof(float), &bytes) != 0 || (uint64_t)bytes >= SIZE_MAX) {
            unbuild(m);
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_init: %s (%lld x %lld) brings the model past %lld "
                             "parameters, whose bytes do not fit an int64_t", l->name, (long long)l->out,
                             (long long)l->in, (long long)(INT64_MAX / (int64_t)sizeof(float)));
        }
    }
    m->nparams = total;
    clt_status s = build_names(m);
    /* A planning device holds no values: no host copy to draw them in. */
    int plan = dev.type == CLT_DEVICE_PLAN;
    float *host = s == CLT_OK && !plan ? malloc((size_t)bytes + 1) : NULL;
    if (s == CLT_OK && !plan && !host)
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_model_init: out of host memory for %lld parameters",
                      (long long)total);
    if (s == CLT_OK && plan) {
        s = clt_empty(&m->params, dev, CLT_FLOAT32, 1, &total);
    } else if (s == CLT_OK) {
        init_values(m, host, seed);
        s = clt_from_host(&m->params, dev, CLT_FLOAT32, 1, &total, host);
    }
    free(host);
    if (s == CLT_OK) s = clt_tensor_set_category(m->params, CLT_MEM_WEIGHTS);
    if (s == CLT_OK) s = bind_views(m, m->params, 0);
    if (s != CLT_OK) {
        unbuild(m);
        return s;
    }
    m->initialised = 1;
    m->training = 1;
    return CLT_OK;
}

clt_status clt_model_create_mlp(clt_model **out, clt_device dev, int64_t num_inputs, int num_hidden_layers,
                                const int64_t *hiddens, int64_t num_outputs, uint64_t seed)
{
    CLT_TRY(clt__need("clt_model_create_mlp", "out", out));
    *out = NULL;
    if (num_hidden_layers < 0 || (num_hidden_layers > 0 && !hiddens))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_create_mlp: %d hidden layers with hiddens %s",
                         num_hidden_layers, hiddens ? "given" : "NULL");
    clt_model *m;
    CLT_TRY(clt_model_create(&m, ""));
    clt_status s = CLT_OK;
    int64_t width = num_inputs;
    for (int i = 0; i < num_hidden_layers && s == CLT_OK; i++) {
        s = clt_model_add_linear(m, width, hiddens[i]);
        if (s == CLT_OK) s = clt_model_add_relu(m);
        width = hiddens[i];
    }
    if (s == CLT_OK) s = clt_model_add_linear(m, width, num_outputs);
    if (s == CLT_OK) s = clt_model_init(m, dev, seed);
    if (s != CLT_OK) {
        clt_model_free(m);
        return s;
    }
    *out = m;
    return CLT_OK;
}

clt_status clt_model_create_resmlp(clt_model **out, clt_device dev, int64_t num_inputs, int64_t num_hiddens,
                                   int num_blocks, int64_t num_outputs, uint64_t seed)
{
    CLT_TRY(clt__need("clt_model_create_resmlp", "out", out));
    *out = NULL;
    if (num_blocks < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_create_resmlp: %d blocks", num_blocks);
    clt_model *m;
    CLT_TRY(clt_model_create(&m, "net"));
    clt_status s = clt_model_add_flatten(m);
    if (s == CLT_OK) s = clt_model_add_linear(m, num_inputs, num_hiddens);
    if (s == CLT_OK) s = clt_model_add_relu(m);
    for (int i = 0; i < num_blocks && s == CLT_OK; i++) s = clt_model_add_residual(m, num_hiddens);
    if (s == CLT_OK) s = clt_model_add_linear(m, num_hiddens, num_outputs);
    if (s == CLT_OK) s = clt_model_init(m, dev, seed);
    if (s != CLT_OK) {
        clt_model_free(m);
        return s;
    }
    *out = m;
    return CLT_OK;
}

static void drop_activations(clt_model *m)
{
    clt__seq_drop(m->layers, m->nlayers);
    m->pending = 0;
}

/* Makes params (and grads, may be NULL) the model's flat buffers when s is
 * CLT_OK, pointing every parameter's views at them; otherwise, or when the
 * views cannot be made, releases them and leaves the model as it was. */
static clt_status adopt(clt_model *m, clt_status s, clt_tensor *params, clt_tensor *grads)
{
    /* Every view is made before any is installed, so a failure changes nothing. */
    clt_tensor **pv = NULL, **gv = NULL;
    /* The scaler is remade where and when a float16 pass needs it. */
    if (s == CLT_OK) s = scaler_view(m, "clt_model_to or clt_model_to_dtype (reading the loss scaler)");
    if (s == CLT_OK) s = make_views(m, params, &pv);
    if (s == CLT_OK && grads) s = make_views(m, grads, &gv);
    if (s != CLT_OK) {
        for (int j = 0; pv && j < 2 * m->nlinears; j++) clt_tensor_release(pv[j]);
        free(pv);
        clt_tensor_release(params);
        clt_tensor_release(grads);
        return s;
    }
    install_views(m, pv, 0);
    if (gv) install_views(m, gv, 1);
    drop_activations(m);
    /* The packed weights are of the old parameters (their storage version
     * would not match anyway); free them with the old parameters. */
    for (int k = 0; k < m->nlinears; k++) clt__packed_weight_drop(&m->linears[k]->packed);
    clt_tensor_release(m->params);
    clt_tensor_release(m->grads);
    clt_tensor_release(m->scaler);
    m->scaler = NULL;
    m->params = params;
    m->grads = grads;
    return CLT_OK;
}

clt_status clt_model_to(clt_model *m, clt_device dev)
{
    CLT_TRY(need_built("clt_model_to", m));
    if (clt_device_equal(dev, clt_pinned()))
        return clt__fail(CLT_ERR_UNSUPPORTED, "clt_model_to: pinned memory is host memory where kernels do not run; "
                         "move the model to a device");
    clt_tensor *params = NULL, *grads = NULL;
    CLT_TRY(clt_to(&params, m->params, dev));
    if (params == m->params) {
        clt_tensor_release(params);
        return CLT_OK;
    }
    clt_status s = m->grads ? clt_to(&grads, m->grads, dev) : CLT_OK;
    return adopt(m, s, params, grads);
}

clt_device clt_model_device(const clt_model *m)
{
    return m && m->params ? clt_tensor_device(m->params) : clt_cpu();
}

void clt_model_set_training(clt_model *m, int on)
{
    if (!m) return;
    if (m->training != (on != 0)) drop_activations(m);
    /* Training keeps no packed weights (src/nn/layers.c, kept_panels). */
    for (int k = 0; on && k < m->nlinears; k++) clt__packed_weight_drop(&m->linears[k]->packed);
    m->training = on != 0;
    m->evaluating = !on;
}

int clt_model_training(const clt_model *m) { return m ? m->training : 0; }

void clt_model_set_keep_packed(clt_model *m, int on)
{
    if (!m) return;
    m->drop_packed = !on;
    for (int k = 0; !on && k < m->nlinears; k++) clt__packed_weight_drop(&m->linears[k]->packed);
}

int clt_model_keep_packed(const clt_model *m) { return m ? !m->drop_packed : 0; }

clt_status clt_model_set_recompute(clt_model *m, int blocks_per_segment)
{
    CLT_TRY(clt__need("clt_model_set_recompute", "model", m));
    if (blocks_per_segment < 0 && blocks_per_segment != CLT_RECOMPUTE_AUTO)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "clt_model_set_recompute: %d blocks per segment (must be >= 0, or CLT_RECOMPUTE_AUTO)",
                         blocks_per_segment);
    if (blocks_per_segment != m->recompute_blocks) drop_activations(m);
    m->recompute_blocks = blocks_per_segment;
    return CLT_OK;
}

int clt_model_recompute(const clt_model *m) { return m ? m->recompute_blocks : 0; }

int clt_model_num_layers(const clt_model *m) { return m ? m->nlayers : 0; }

clt_status clt_model_layer(const clt_model *m, int i, clt_layer_info *out)
{
    CLT_TRY(clt__need("clt_model_layer", "model", m));
    CLT_TRY(clt__need("clt_model_layer", "out", out));
    if (i < 0 || i >= m->nlayers)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_layer: index %d outside the model's %d layers", i,
                         m->nlayers);
    const clt__layer *l = &m->layers[i];
    static const clt_layer_kind kinds[] = {[CLT__LINEAR] = CLT_LAYER_LINEAR, [CLT__RELU] = CLT_LAYER_RELU,
                                           [CLT__FLATTEN] = CLT_LAYER_FLATTEN, [CLT__RESIDUAL] = CLT_LAYER_RESIDUAL,
                                           [CLT__CUSTOM] = CLT_LAYER_CUSTOM};
    *out = (clt_layer_info){kinds[l->kind], l->name, 0, 0, l->kind == CLT__CUSTOM ? l->ops.name : NULL};
    if (l->kind == CLT__LINEAR) {
        out->in_features = l->in;
        out->out_features = l->out;
    } else if (l->kind == CLT__RESIDUAL) {
        out->in_features = out->out_features = l->body[0].in;
    }
    return CLT_OK;
}

const char *clt_model_prefix(const clt_model *m) { return m ? m->prefix : NULL; }

int clt_model_num_blocks(const clt_model *m)
{
    int n = 0;
    for (int i = 0; m && i < m->nlayers; i++) n += m->layers[i].kind == CLT__RESIDUAL;
    return n;
}

static clt_status same_device(const char *op, const clt_model *m, const clt_tensor *t, const char *what)
{
    return clt__need_device(op, what, t, clt_model_device(m), "the model's parameters are",
                            "clt_to or clt_model_to");
}

clt_status clt_model_forward(clt_model *m, clt_tensor *x, clt_tensor **y)
{
    const char *op = "clt_model_forward";
    CLT_TRY(clt__need(op, "y", y));
    *y = NULL;
    CLT_TRY(need_built(op, m));
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(same_device(op, m, x, "the input"));
    clt_dtype dt = clt_model_dtype(m);
    if (clt_tensor_dtype(x) != CLT_FLOAT32 && clt_tensor_dtype(x) != dt)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: the input is %s, the model takes float32%s", op,
                         clt_dtype_name(clt_tensor_dtype(x)), dt == CLT_FLOAT16 ? " or float16" : "");
    /* What an earlier forward kept goes first, so the two never coexist. */
    drop_activations(m);
    /* A float16 model converts its input on the way in (kept as an
     * activation) and its output on the way out, for a float32 loss. */
    clt_tensor *in, *out = NULL;
    CLT_TRY(clt_to_dtype(&in, x, dt));
    if (in != x) clt_tensor_set_category(in, CLT_MEM_ACTIVATIONS);
    clt_status s = clt__model_run_forward(m, in, &out);
    clt_tensor_release(in);
    if (s == CLT_OK && dt == CLT_FLOAT16) {
        clt_tensor *wide;
        s = clt_to_dtype(&wide, out, CLT_FLOAT32);
        clt_tensor_release(out);
        out = s == CLT_OK ? wide : NULL;
    }
    if (s != CLT_OK) {
        drop_activations(m);
        return s;
    }
    if (m->training) {
        m->pending = 1;
        m->out_ndim = clt_tensor_shape(out, m->out_shape);
    }
    *y = out;
    return CLT_OK;
}

static clt_status create_grads(clt_model *m)
{
    clt_tensor *g;
    CLT_TRY(clt_zeros_like(&g, m->params));
    clt_status s = clt_tensor_set_category(g, CLT_MEM_GRADIENTS);
    if (s == CLT_OK) s = bind_views(m, g, 1);
    if (s != CLT_OK) {
        clt_tensor_release(g);
        return s;
    }
    m->grads = g;
    clt__model_grads_zeroed(m); /* made zero */
    return CLT_OK;
}

/* A float32 dy goes in multiplied by the loss scale (a float16 dy as given, taken as already
 * scaled); dx comes out float32, unscaled. */
static clt_status half_backward(clt_model *m, clt_tensor *dy, clt_tensor **dx)
{
    /* The scale is read on the device, where the optimizer's steps keep it. */
    clt_tensor *dyh, *dxh = NULL, *scaler;
    CLT_TRY(clt__model_scaler(m, &scaler));
    if (clt_tensor_dtype(dy) == CLT_FLOAT16) dyh = clt_tensor_retain(dy);
    else CLT_TRY(clt__to_half_by(&dyh, dy, scaler));
    clt_status s = clt__seq_backward(m, m->layers, m->nlayers, dyh, dx ? &dxh : NULL);
    clt_tensor_release(dyh);
    if (s != CLT_OK || !dx) return s;
    int64_t shape[CLT_MAX_DIMS];
    int nd = clt_tensor_shape(dxh, shape);
    s = clt_empty(dx, clt_model_device(m), CLT_FLOAT32, nd, shape);
    if (s == CLT_OK) s = clt__unscale_f16(*dx, dxh, scaler, NULL, 0);
    clt_tensor_release(dxh);
    if (s != CLT_OK) {
        clt_tensor_release(*dx);
        *dx = NULL;
    }
    return s;
}

clt_status clt_model_backward(clt_model *m, clt_tensor *dy, clt_tensor **dx)
{
    const char *op = "clt_model_backward";
    if (dx) *dx = NULL;
    CLT_TRY(need_built(op, m));
    if (!m->pending)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: no activations are kept; run clt_model_forward in training mode first (once per "
                         "backward)", op);
    clt_status s = clt__need(op, "dy", dy);
    if (s == CLT_OK) s = same_device(op, m, dy, "dy");
    if (s == CLT_OK) {
        int64_t shape[CLT_MAX_DIMS];
        int nd = clt_tensor_shape(dy, shape);
        int same = nd == m->out_ndim;
        for (int i = 0; same && i < nd; i++) same = shape[i] == m->out_shape[i];
        if (!same)
            s = clt__fail(CLT_ERR_SHAPE, "%s: dy has %d dimensions (%lld x ...) but the forward output has %d "
                          "(%lld x ...)", op, nd, (long long)(nd ? shape[0] : 0), m->out_ndim,
                          (long long)(m->out_ndim ? m->out_shape[0] : 0));
    }
    if (s == CLT_OK && !m->grads) s = create_grads(m);
    if (s == CLT_OK && clt_model_dtype(m) == CLT_FLOAT16) s = half_backward(m, dy, dx);
    else if (s == CLT_OK) s = clt__seq_backward(m, m->layers, m->nlayers, dy, dx);
    drop_activations(m);
    return s;
}

clt_status clt_model_zero_grad(clt_model *m)
{
    CLT_TRY(need_built("clt_model_zero_grad", m));
    /* Known zero since no write: nothing to do (the trainer's optimizer
     * step zeroes them as it reads them, clt__optimizer_step_zero). */
    if (!m->grads || m->zero_version == clt__tensor_version(m->grads)) return CLT_OK;
    CLT_TRY(clt_fill_(m->grads, 0.0));
    clt__model_grads_zeroed(m);
    return CLT_OK;
}

clt_status clt_model_clip_grad_norm(clt_model *m, double max_norm, double *total_norm)
{
    const char *op = "clt_model_clip_grad_norm";
    if (total_norm) *total_norm = 0;
    CLT_TRY(need_built(op, m));
    if (!(max_norm > 0) || isinf(max_norm))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: max_norm is %g (must be positive and finite)", op, max_norm);
    if (!m->grads || m->nparams == 0) return CLT_OK;
    /* The squared norm as a (1,N) x (N,1) product; float16 gradients are
     * widened and unscaled first. */
    int half = clt_model_dtype(m) == CLT_FLOAT16;
    int64_t row[2] = {1, m->nparams}, one[2] = {1, 1};
    clt_tensor *g = NULL, *sq = NULL, *wide = NULL, *scaler = NULL;
    clt_status s = half ? clt__model_scaler(m, &scaler) : CLT_OK;
    if (s == CLT_OK && half) s = clt_empty(&wide, clt_model_device(m), CLT_FLOAT32, 1, &m->nparams);
    if (s == CLT_OK && half) s = clt__unscale_f16(wide, m->grads, scaler, NULL, 0);
    if (s == CLT_OK) s = clt_reshape(&g, half ? wide : m->grads, 2, row);
    if (s == CLT_OK) s = clt_zeros(&sq, clt_model_device(m), CLT_FLOAT32, 2, one);
    if (s == CLT_OK) s = clt_gemm_(0, 1, 1.0f, g, g, 0.0f, sq);
    float norm2 = 0; /* the sync point is this call's, reading the norm */
    if (s == CLT_OK) s = clt__read_host(sq, &norm2, sizeof norm2, "clt_model_clip_grad_norm (reading the norm)");
    clt_tensor_release(g);
    clt_tensor_release(sq);
    if (s != CLT_OK) {
        clt_tensor_release(wide);
        return s;
    }
    double norm = sqrt(norm2);
    if (total_norm) *total_norm = norm;
    double coef = max_norm / (norm + 1e-6);
    if (half) {
        /* Scaled again, as the optimizer expects them. */
        s = coef < 1.0 ? clt__convert_to_half_by(m->grads, wide, scaler, (float)coef) : CLT_OK;
        clt_tensor_release(wide);
        return s;
    }
    return coef < 1.0 ? clt_scale_(m->grads, (float)coef) : CLT_OK;
}

clt_status clt_model_to_dtype(clt_model *m, clt_dtype dt)
{
    const char *op = "clt_model_to_dtype";
    CLT_TRY(need_built(op, m));
    if (dt != CLT_FLOAT32 && dt != CLT_FLOAT16)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: a model is float32 or float16, not %s", op, clt_dtype_name(dt));
    if (dt == clt_model_dtype(m)) return CLT_OK;
    clt_tensor *params = NULL, *grads = NULL;
    clt_status s = clt_to_dtype(&params, m->params, dt);
    if (s == CLT_OK) s = clt_tensor_set_category(params, CLT_MEM_WEIGHTS);
    if (s == CLT_OK && m->grads) s = clt_to_dtype(&grads, m->grads, dt);
    if (s == CLT_OK && grads) s = clt_tensor_set_category(grads, CLT_MEM_GRADIENTS);
    /* Counted only once the model holds the new buffers: a failed
     * conversion leaves the model, and its optimizers, as they were. */
    CLT_TRY(adopt(m, s, params, grads));
    m->conversions++;
    return CLT_OK;
}

clt_dtype clt_model_dtype(const clt_model *m)
{
    return m && m->params ? clt_tensor_dtype(m->params) : CLT_FLOAT32;
}

/* Sets the scaler's state, checked, on the host and the device. */
static clt_status set_scaler(clt_model *m, const char *op, float scale, int dynamic, int64_t clean_steps)
{
    CLT_TRY(clt__need(op, "model", m));
    if (!(scale > 0) || isinf(scale))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: scale is %g (must be positive and finite)", op,
                         (double)scale);
    if (clean_steps < 0 || clean_steps >= CLT__SCALE_GROWTH)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: clean_steps is %lld (must be 0 to %d)", op,
                         (long long)clean_steps, CLT__SCALE_GROWTH - 1);
    m->loss_scale = scale;
    m->scale_dynamic = dynamic != 0;
    m->clean_steps = clean_steps;
    /* Cannot fail: the device's scaler is made again from these when next
     * needed (clt__model_scaler). */
    clt_tensor_release(m->scaler);
    m->scaler = NULL;
    m->scaler_ahead = 0;
    return CLT_OK;
}

clt_status clt_model_set_loss_scale(clt_model *m, float scale, int dynamic)
{
    return set_scaler(m, "clt_model_set_loss_scale", scale, dynamic, 0);
}

float clt_model_loss_scale(const clt_model *m)
{
    if (!m) return 0.0f;
    (void)scaler_view(m, "clt_model_loss_scale (reading the loss scaler)"); /* else the host's view */
    return m->loss_scale;
}

clt_status clt_model_loss_scale_state(const clt_model *m, float *scale, int *dynamic, int64_t *clean_steps)
{
    CLT_TRY(clt__need("clt_model_loss_scale_state", "model", m));
    CLT_TRY(scaler_view(m, "clt_model_loss_scale_state (reading the loss scaler)"));
    if (scale) *scale = m->loss_scale;
    if (dynamic) *dynamic = m->scale_dynamic;
    if (clean_steps) *clean_steps = m->clean_steps;
    return CLT_OK;
}

clt_status clt_model_set_loss_scale_state(clt_model *m, float scale, int dynamic, int64_t clean_steps)
{
    return set_scaler(m, "clt_model_set_loss_scale_state", scale, dynamic, clean_steps);
}

clt_status clt_cross_entropy_loss_grad(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                       const clt_tensor *labels)
{
    CLT_TRY(clt_softmax_cross_entropy(loss, dlogits, logits, labels));
    if (dlogits) clt_tensor_set_category(*dlogits, CLT_MEM_ACTIVATIONS);
    return CLT_OK;
}

clt_status clt_mse_loss_grad(clt_tensor **loss, clt_tensor **dpred, const clt_tensor *pred, const clt_tensor *target)
{
    CLT_TRY(clt_mse_loss(loss, dpred, pred, target));
    if (dpred) clt_tensor_set_category(*dpred, CLT_MEM_ACTIVATIONS);
    return CLT_OK;
}

int64_t clt_model_num_parameter_elements(const clt_model *m) { return m ? m->nparams : 0; }

int clt_model_num_parameter_tensors(const clt_model *m) { return m ? m->nnamed : 0; }

clt_status clt_model_named_parameter(const clt_model *m, int i, const char **name, clt_tensor **param,
                                     clt_tensor **grad)
{
    CLT_TRY(need_built("clt_model_named_parameter", m));
    if (i < 0 || i >= m->nnamed)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_model_named_parameter: index %d outside 0..%d", i,
                         m->nnamed - 1);
    const clt__named *e = &m->named[i];
    if (name) *name = e->name;
    if (param) *param = e->is_bias ? e->layer->b : e->layer->w;
    if (grad) *grad = e->is_bias ? e->layer->db : e->layer->dw;
    return CLT_OK;
}

int clt_model_find_parameter(const clt_model *m, const char *name)
{
    if (!m || !name) return -1;
    for (int i = 0; i < m->nnamed; i++)
        if (strcmp(m->named[i].name, name) == 0) return i;
    return -1;
}

clt_tensor *clt_model_parameters(const clt_model *m) { return m ? m->params : NULL; }
clt_tensor *clt_model_gradients(const clt_model *m) { return m ? m->grads : NULL; }

/* The first (last) layer with sizes: a Linear or a ResidualBlock. */
static const clt__layer *sized_layer(const clt_model *m, int last)
{
    for (int k = 0; m && k < m->nlayers; k++) {
        const clt__layer *l = &m->layers[last ? m->nlayers - 1 - k : k];
        if (l->kind == CLT__LINEAR || l->kind == CLT__RESIDUAL) return l;
    }
    return NULL;
}

int64_t clt_model_num_inputs(const clt_model *m)
{
    const clt__layer *l = sized_layer(m, 0);
    return !l ? 0 : l->kind == CLT__LINEAR ? l->in : l->body[0].in;
}

int64_t clt_model_num_outputs(const clt_model *m)
{
    const clt__layer *l = sized_layer(m, 1);
    return !l ? 0 : l->kind == CLT__LINEAR ? l->out : l->body[0].in;
}
