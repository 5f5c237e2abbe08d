/* Copies of a model, whole (a replica per device for data parallel) or by
 * layer ranges (the stages of model parallel), rebuilt through nn.h's
 * builder from its description of each layer. */
#include "../core/error.h"
#include "../nn/nn_internal.h"
#include "cltensor/parallel.h"
#include "parallel_internal.h"

/* A new model on dev with layers [first, end) of src and src's prefix,
 * initialised (values overwritten by the caller). */
static clt_status build_range(clt_model **out, const clt_model *src, int first, int end, clt_device dev)
{
    clt_model *m;
    CLT_TRY(clt_model_create(&m, clt_model_prefix(src)));
    clt_status s = CLT_OK;
    for (int i = first; s == CLT_OK && i < end; i++) {
        clt_layer_info l;
        s = clt_model_layer(src, i, &l);
        if (s != CLT_OK) break;
        switch (l.kind) {
        case CLT_LAYER_LINEAR: s = clt_model_add_linear(m, l.in_features, l.out_features); break;
        case CLT_LAYER_RELU: s = clt_model_add_relu(m); break;
        case CLT_LAYER_FLATTEN: s = clt_model_add_flatten(m); break;
        case CLT_LAYER_RESIDUAL: s = clt_model_add_residual(m, l.in_features); break;
        case CLT_LAYER_CUSTOM: s = clt_model_add_layer(m, &src->layers[i].ops); break;
        }
    }
    if (s == CLT_OK) s = clt_model_init(m, dev, 0);
    if (s != CLT_OK) {
        clt_model_free(m);
        return s;
    }
    *out = m;
    return CLT_OK;
}

/* dst's parameters = src's flat parameters [offset, offset + dst's count). */
static clt_status copy_params(clt_model *dst, const clt_model *src, int64_t offset)
{
    int64_t n = clt_model_num_parameter_elements(dst);
    if (n == 0) return CLT_OK;
    clt_tensor *part = NULL, *moved = NULL;
    clt_status s = clt_narrow(&part, clt_model_parameters(src), offset, n);
    if (s == CLT_OK) s = clt_to(&moved, part, clt_model_device(dst));
    if (s == CLT_OK) s = clt_copy_(clt_model_parameters(dst), moved);
    clt_tensor_release(part);
    clt_tensor_release(moved);
    return s;
}

clt_status clt__model_copy_state(clt_model *dst, const clt_model *src)
{
    float scale;
    int dynamic;
    int64_t clean;
    CLT_TRY(clt_model_loss_scale_state(src, &scale, &dynamic, &clean));
    CLT_TRY(clt_model_set_loss_scale_state(dst, scale, dynamic, clean));
    return copy_params(dst, src, 0);
}

clt_status clt_model_replicate(clt_model **out, const clt_model *src, clt_device dev)
{
    const char *op = "clt_model_replicate";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need_model(op, "the source model", src));
    clt_model *m;
    CLT_TRY(build_range(&m, src, 0, clt_model_num_layers(src), dev));
    /* A float16 source gives a float16 replica with the same loss scaler, so
     * that its backward scales as the source's does. */
    clt_status s = clt_model_to_dtype(m, clt_model_dtype(src));
    if (s == CLT_OK) s = clt__model_copy_state(m, src);
    if (s != CLT_OK) {
        clt_model_free(m);
        return s;
    }
    *out = m;
    return CLT_OK;
}

clt_status clt_model_split(const clt_model *src, int num_stages, const int *first_layer, const clt_device *devices,
                           clt_model **stages)
{
    const char *op = "clt_model_split";
    CLT_TRY(clt__need(op, "stages", stages));
    CLT_TRY(clt__need(op, "first_layer", first_layer));
    CLT_TRY(clt__need(op, "devices", devices));
    if (num_stages < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %d stages (must be 1 or more)", op, num_stages);
    for (int k = 0; k < num_stages; k++) stages[k] = NULL;
    CLT_TRY(clt__need_model(op, "the source model", src));
    /* Each stage's optimizer would check its own gradients for overflow, so
     * one stage could skip a step that another takes. */
    if (clt_model_dtype(src) != CLT_FLOAT32)
        return clt__fail(CLT_ERR_UNSUPPORTED,
                         "%s: the model is %s; model parallel splits float32 models (each stage's optimizer would "
                         "skip overflowing steps on its own): split before clt_model_to_dtype, or train float16 "
                         "data parallel", op, clt_dtype_name(clt_model_dtype(src)));
    for (int k = 0; k < num_stages; k++) {
        int end = k + 1 < num_stages ? first_layer[k + 1] : clt_model_num_layers(src);
        if ((k == 0 && first_layer[0] != 0) || first_layer[k] >= end || end > clt_model_num_layers(src))
            return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                             "%s: stage %d covers layers [%d, %d) of a model with %d layers; stages must start "
                             "at 0, be non-empty and increase", op, k, first_layer[k], end, clt_model_num_layers(src));
    }
    clt_status s = CLT_OK;
    int64_t offset = 0;
    for (int k = 0; s == CLT_OK && k < num_stages; k++) {
        int end = k + 1 < num_stages ? first_layer[k + 1] : clt_model_num_layers(src);
        s = build_range(&stages[k], src, first_layer[k], end, devices[k]);
        if (s == CLT_OK) s = copy_params(stages[k], src, offset);
        offset += clt_model_num_parameter_elements(stages[k]);
    }
    if (s != CLT_OK)
        for (int k = 0; k < num_stages; k++) {
            clt_model_free(stages[k]);
            stages[k] = NULL;
        }
    return s;
}
