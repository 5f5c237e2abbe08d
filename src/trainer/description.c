/* A model's description in a checkpoint's metadata, and its standardizer's
 * tensors (description.h). Every value read is hostile: bounded and
 * checked before anything is built from it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "description.h"

#define OPT_PREFIX "optimizer."
#define MAX_TARGET 4096 /* bytes of a recorded target column's name */

/* The messages below spell the limits out. */
_Static_assert(CLT_MODEL_MAX_LAYERS == 4096 && CLT_MODEL_MAX_CLASSES == 1048576 && CLT_DATASET_MAX_DIMS == 7,
               "the messages name these limits");

static const char *const kind_names[] = {[CLT_LAYER_LINEAR] = "linear", [CLT_LAYER_RELU] = "relu",
                                         [CLT_LAYER_FLATTEN] = "flatten", [CLT_LAYER_RESIDUAL] = "residual",
                                         [CLT_LAYER_CUSTOM] = "custom"};

void clt__description_free(clt__description *d)
{
    if (!d) return;
    free(d->layers);
    for (int i = 0; d->class_names && i < d->num_classes; i++) free(d->class_names[i]);
    free(d->class_names);
    free(d->target);
    memset(d, 0, sizeof *d);
}

/* ---- writing ---- */

static clt_status layers_json(const clt_model *m, char **out)
{
    json_t *list = json_array();
    clt_status s = list ? CLT_OK : clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    for (int i = 0; s == CLT_OK && i < clt_model_num_layers(m); i++) {
        clt_layer_info li;
        s = clt_model_layer(m, i, &li);
        json_t *o = s == CLT_OK ? json_object() : NULL;
        if (s == CLT_OK && (!o || json_array_append_new(list, o) != 0 ||
                            json_object_set_new(o, "kind", json_string(kind_names[li.kind])) != 0 ||
                            (li.kind == CLT_LAYER_LINEAR &&
                             (json_object_set_new(o, "in", json_integer(li.in_features)) != 0 ||
                              json_object_set_new(o, "out", json_integer(li.out_features)) != 0)) ||
                            (li.kind == CLT_LAYER_RESIDUAL &&
                             json_object_set_new(o, "width", json_integer(li.in_features)) != 0) ||
                            (li.kind == CLT_LAYER_CUSTOM && json_object_set_new(o, "name", json_string(li.custom)) != 0)))
            s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    }
    *out = s == CLT_OK ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    if (s == CLT_OK && !*out) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    return s;
}

static clt_status names_json(const clt_checkpoint_info *info, char **out)
{
    *out = NULL;
    json_t *list = json_array();
    if (!list) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    clt_status s = CLT_OK;
    for (int c = 0; s == CLT_OK && c < info->num_classes; c++) {
        const char *name = info->class_names[c];
        json_t *v = name ? json_string(name) : NULL;
        if (!v)
            s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_checkpoint_save: class name %d is %s", c,
                          name ? "not valid UTF-8" : "NULL");
        else if (json_array_append_new(list, v) != 0)
            s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    }
    if (s == CLT_OK && !(*out = json_dumps(list, JSON_COMPACT)))
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model");
    json_decref(list);
    return s;
}

static clt_status shape_json(const clt_checkpoint_info *info, int64_t width, char **out)
{
    *out = NULL;
    const char *op = "clt_checkpoint_save";
    if (info->example_ndim < 1 || info->example_ndim > CLT_DATASET_MAX_DIMS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: example_ndim %d (1..%d, or 0 for none)", op,
                         info->example_ndim, CLT_DATASET_MAX_DIMS);
    int64_t product = 1;
    for (int i = 0; i < info->example_ndim; i++)
        if (info->example_shape[i] < 1 || clt__mul_i64(product, info->example_shape[i], &product) != 0)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: example_shape[%d] is %lld", op, i,
                             (long long)info->example_shape[i]);
    if (product != width)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the example shape holds %lld values but the model takes %lld",
                         op, (long long)product, (long long)width);
    json_t *list = json_array();
    int bad = !list;
    for (int i = 0; !bad && i < info->example_ndim; i++) bad = json_array_append_new(list, json_integer(info->example_shape[i])) != 0;
    if (!bad) bad = !(*out = json_dumps(list, JSON_COMPACT));
    json_decref(list);
    return bad ? clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory describing the model") : CLT_OK;
}

static clt_status check_standardizer(const clt_standardizer *st, const clt_model *m, clt_task task)
{
    const char *op = "clt_checkpoint_save";
    if (st->width != clt_model_num_inputs(m) || !st->x_mean || !st->x_std)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the standardizer has %lld features, the model takes %lld", op,
                         (long long)st->width, (long long)clt_model_num_inputs(m));
    if (st->outputs && (task != CLT_TASK_REGRESS || st->outputs != clt_model_num_outputs(m) || !st->y_mean ||
                        !st->y_std))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: the standardizer has %lld targets; a regression model of %lld outputs takes as many", op,
                         (long long)st->outputs, (long long)clt_model_num_outputs(m));
    return CLT_OK;
}

clt_status clt__description_format(const clt_model *model, const clt_checkpoint_info *info, const char **keys,
                                   const char **values, char **owned, int *n)
{
    static const clt_checkpoint_info none = {0};
    const char *op = "clt_checkpoint_save";
    if (!info) info = &none;
    *n = 0;
    int nowned = 0;
    if (info->task != CLT_TASK_CLASSIFY && info->task != CLT_TASK_REGRESS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: task %d", op, (int)info->task);
    if (info->num_classes < 0 || info->num_classes > CLT_MODEL_MAX_CLASSES ||
        (info->num_classes > 0 && (!info->class_names || info->task == CLT_TASK_REGRESS ||
                                   info->num_classes != clt_model_num_outputs(model))))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "%s: %d class names for a %s model of %lld outputs (a classifier names one per output)", op,
                         info->num_classes, info->task == CLT_TASK_REGRESS ? "regression" : "classification",
                         (long long)clt_model_num_outputs(model));
    if (info->standardizer) CLT_TRY(check_standardizer(info->standardizer, model, info->task));
    if (info->target && strlen(info->target) > MAX_TARGET)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the target's name is longer than %d bytes", op, MAX_TARGET);
    clt_status s = layers_json(model, &owned[nowned]);
    if (s == CLT_OK) {
        keys[*n] = "cltensor.layers";
        values[(*n)++] = owned[nowned++];
        keys[*n] = "cltensor.prefix";
        values[(*n)++] = clt_model_prefix(model);
        keys[*n] = "cltensor.task";
        values[(*n)++] = info->task == CLT_TASK_REGRESS ? "regress" : "classify";
    }
    if (s == CLT_OK && info->num_classes > 0 && (s = names_json(info, &owned[nowned])) == CLT_OK) {
        keys[*n] = "cltensor.class_names";
        values[(*n)++] = owned[nowned++];
    }
    if (s == CLT_OK && info->example_ndim != 0 &&
        (s = shape_json(info, clt_model_num_inputs(model), &owned[nowned])) == CLT_OK) {
        keys[*n] = "cltensor.example_shape";
        values[(*n)++] = owned[nowned++];
    }
    if (s == CLT_OK && info->target) {
        keys[*n] = "cltensor.target";
        values[(*n)++] = info->target;
    }
    if (s != CLT_OK) {
        for (int i = 0; i < nowned; i++) free(owned[i]);
        nowned = 0;
        *n = 0;
    }
    owned[nowned] = NULL;
    return s;
}

/* ---- reading ---- */

static clt_status bad_key(const char *path, const char *key, const char *problem)
{
    return clt__fail(CLT_ERR_FORMAT, "%s: metadata %s %s", path, key, problem);
}

/* The JSON value of key, parsed (NULL and CLT_OK when absent). */
static clt_status parse_json(const char *path, const clt_safetensors *f, const char *key, json_t **out)
{
    *out = NULL;
    const char *v = clt_safetensors_metadata(f, key);
    if (!v) return CLT_OK;
    json_error_t err;
    *out = json_loads(v, JSON_REJECT_DUPLICATES, &err);
    if (!*out)
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata %s is not JSON (%.80s at character %d)", path, key, err.text,
                         err.position);
    return CLT_OK;
}

/* A JSON integer in 1..INT32_MAX. */
static int get_size(json_t *o, const char *field, int64_t *out)
{
    json_t *v = json_object_get(o, field);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX) return 0;
    *out = (int64_t)json_integer_value(v);
    return 1;
}

static clt_status bad_layer(const char *path, int i, const char *problem)
{
    return clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.layers: layer %d %s", path, i, problem);
}

static clt_status read_layer(const char *path, json_t *o, int i, clt__layer_spec *l)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    if (!json_is_object(o) || !kind) return bad_layer(path, i, "is not an object with a \"kind\" string");
    size_t fields = 1;
    if (strcmp(kind, "linear") == 0) {
        l->kind = CLT_LAYER_LINEAR;
        if (!get_size(o, "in", &l->in) || !get_size(o, "out", &l->out))
            return bad_layer(path, i, "(linear) needs \"in\" and \"out\", integers in 1..2147483647");
        fields = 3;
    } else if (strcmp(kind, "residual") == 0) {
        l->kind = CLT_LAYER_RESIDUAL;
        if (!get_size(o, "width", &l->in)) return bad_layer(path, i, "(residual) needs \"width\", an integer in 1..2147483647");
        l->out = l->in;
        fields = 2;
    } else if (strcmp(kind, "relu") == 0) {
        l->kind = CLT_LAYER_RELU;
    } else if (strcmp(kind, "flatten") == 0) {
        l->kind = CLT_LAYER_FLATTEN;
    } else if (strcmp(kind, "custom") == 0) {
        l->kind = CLT_LAYER_CUSTOM;
        const char *name = json_string_value(json_object_get(o, "name"));
        size_t len = name ? strlen(name) : 0;
        if (len < 1 || len >= sizeof l->custom || len != json_string_length(json_object_get(o, "name")) ||
            strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
            return bad_layer(path, i, "(custom) needs \"name\", 1 to 31 letters, digits, '_' or '-'");
        memcpy(l->custom, name, len + 1);
        fields = 2;
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "has the unknown kind \"%.40s\" (linear, relu, flatten, residual, custom)", kind);
        return bad_layer(path, i, msg);
    }
    if (json_object_size(o) != fields) return bad_layer(path, i, "has fields its kind does not take");
    return CLT_OK;
}

/* The layers, their widths chained, and the parameter count. */
static clt_status read_layers(clt__description *d, const char *path, json_t *list)
{
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n < 1 || n > CLT_MODEL_MAX_LAYERS)
        return bad_key(path, "cltensor.layers", "must be an array of 1 to 4096 layers");
    d->layers = calloc(n, sizeof *d->layers);
    if (!d->layers) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    d->nlayers = (int)n;
    int64_t width = -1, params = 0;
    for (int i = 0; i < d->nlayers; i++) {
        clt__layer_spec *l = &d->layers[i];
        CLT_TRY(read_layer(path, json_array_get(list, (size_t)i), i, l));
        if (l->kind == CLT_LAYER_RELU || l->kind == CLT_LAYER_FLATTEN || l->kind == CLT_LAYER_CUSTOM) continue;
        if (width >= 0 && l->in != width) {
            char msg[128];
            snprintf(msg, sizeof msg, "takes %lld features but the layer before gives %lld", (long long)l->in,
                     (long long)width);
            return bad_layer(path, i, msg);
        }
        if (width < 0) d->num_inputs = l->in;
        width = l->out;
        int bad = l->kind == CLT_LAYER_LINEAR ? clt__muladd_i64(&params, l->in + 1, l->out)
                                              : clt__muladd_i64(&params, 2 * (l->in + 1), l->in);
        if (bad || params > INT64_MAX / 8) return bad_key(path, "cltensor.layers", "holds more parameters than fit");
    }
    if (width < 0) return bad_key(path, "cltensor.layers", "has no linear or residual layer");
    d->num_outputs = width;
    d->num_params = params;
    d->has_layers = 1;
    return CLT_OK;
}

static clt_status read_names(clt__description *d, const char *path, json_t *list)
{
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n < 1 || n > CLT_MODEL_MAX_CLASSES)
        return bad_key(path, "cltensor.class_names", "must be an array of 1 to 1048576 strings");
    d->class_names = calloc(n, sizeof *d->class_names);
    if (!d->class_names) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_string(v)) return bad_key(path, "cltensor.class_names", "holds something other than a string");
        /* A name holds no NUL (C strings end there). */
        if (strlen(json_string_value(v)) != json_string_length(v))
            return bad_key(path, "cltensor.class_names", "holds a name with a NUL character");
        if (!(d->class_names[i] = strdup(json_string_value(v))))
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        d->num_classes = (int)i + 1;
    }
    return CLT_OK;
}

static clt_status read_shape(clt__description *d, const char *path, json_t *list)
{
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n < 1 || n > CLT_DATASET_MAX_DIMS)
        return bad_key(path, "cltensor.example_shape", "must be an array of 1 to 7 sizes");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
            return bad_key(path, "cltensor.example_shape", "holds a size outside 1..2147483647");
        d->example_shape[i] = (int64_t)json_integer_value(v);
    }
    d->example_ndim = (int)n;
    return CLT_OK;
}

/* The parameter count of the file's parameter tensors. */
static clt_status file_params(const char *path, const clt_safetensors *f, int64_t *out)
{
    *out = 0;
    for (int k = 0; k < clt_safetensors_num_tensors(f); k++) {
        clt_safetensors_info fi;
        CLT_TRY(clt_safetensors_tensor_info(f, k, &fi));
        if (strncmp(fi.name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0 ||
            strncmp(fi.name, CLT__PREPROCESS_PREFIX, strlen(CLT__PREPROCESS_PREFIX)) == 0)
            continue;
        if (clt__add_i64(*out, fi.numel, out) != 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: the tensors hold more elements than fit", path);
    }
    return CLT_OK;
}

clt_status clt__description_check(const clt__description *d, const char *path, int64_t inputs, int64_t outputs)
{
    if (d->num_classes > 0 && (d->task != CLT_TASK_CLASSIFY || d->num_classes != outputs)) {
        char msg[160];
        snprintf(msg, sizeof msg, "names %d classes but the model is a %s of %lld outputs", d->num_classes,
                 d->task == CLT_TASK_REGRESS ? "regression" : "classifier", (long long)outputs);
        return bad_key(path, "cltensor.class_names", msg);
    }
    int64_t product = 1;
    int wraps = 0;
    for (int i = 0; i < d->example_ndim && !wraps; i++) wraps = clt__mul_i64(product, d->example_shape[i], &product) != 0;
    if (d->example_ndim && (wraps || product != inputs)) {
        char msg[160];
        snprintf(msg, sizeof msg, "does not hold the model's %lld inputs", (long long)inputs);
        return bad_key(path, "cltensor.example_shape", msg);
    }
    return CLT_OK;
}

clt_status clt__description_read(clt__description *d, const char *path, const clt_safetensors *f)
{
    memset(d, 0, sizeof *d);
    json_t *layers = NULL, *names = NULL, *shape = NULL;
    clt_status s = parse_json(path, f, "cltensor.layers", &layers);
    if (s == CLT_OK) s = parse_json(path, f, "cltensor.class_names", &names);
    if (s == CLT_OK) s = parse_json(path, f, "cltensor.example_shape", &shape);
    if (s == CLT_OK && layers) s = read_layers(d, path, layers);
    if (s == CLT_OK && names) s = read_names(d, path, names);
    if (s == CLT_OK && shape) s = read_shape(d, path, shape);
    json_decref(layers);
    json_decref(names);
    json_decref(shape);
    const char *prefix = clt_safetensors_metadata(f, "cltensor.prefix");
    if (s == CLT_OK && prefix && strlen(prefix) >= sizeof d->prefix)
        s = bad_key(path, "cltensor.prefix", "is longer than 31 bytes");
    if (s == CLT_OK && prefix) strcpy(d->prefix, prefix);
    const char *task = clt_safetensors_metadata(f, "cltensor.task");
    if (s == CLT_OK && task && strcmp(task, "classify") && strcmp(task, "regress"))
        s = bad_key(path, "cltensor.task", "must be \"classify\" or \"regress\"");
    if (s == CLT_OK) d->task = task && strcmp(task, "regress") == 0 ? CLT_TASK_REGRESS : CLT_TASK_CLASSIFY;
    const char *target = clt_safetensors_metadata(f, "cltensor.target");
    if (s == CLT_OK && target && strlen(target) > MAX_TARGET)
        s = bad_key(path, "cltensor.target", "is longer than 4096 bytes");
    if (s == CLT_OK && target && !(d->target = strdup(target)))
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    if (s == CLT_OK && d->num_classes && d->task == CLT_TASK_REGRESS)
        s = bad_key(path, "cltensor.class_names", "names classes of a regression");
    int64_t in_file = 0;
    if (s == CLT_OK && d->has_layers) s = file_params(path, f, &in_file);
    if (s == CLT_OK && d->has_layers && in_file != d->num_params)
        s = clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.layers has %lld parameters but the file's tensors hold %lld",
                      path, (long long)d->num_params, (long long)in_file);
    if (s == CLT_OK && d->has_layers) s = clt__description_check(d, path, d->num_inputs, d->num_outputs);
    if (s != CLT_OK) clt__description_free(d);
    return s;
}

/* ---- the standardizer's tensors ---- */

static const char *const pre_names[4] = {CLT__PREPROCESS_PREFIX "x_mean", CLT__PREPROCESS_PREFIX "x_std",
                                         CLT__PREPROCESS_PREFIX "y_mean", CLT__PREPROCESS_PREFIX "y_std"};

clt_status clt__standardizer_tensors(const clt_standardizer *s, clt_device dev, const char **names,
                                     clt_tensor **tensors, int *n)
{
    *n = 0;
    if (!s) return CLT_OK;
    const float *arrays[4] = {s->x_mean, s->x_std, s->y_mean, s->y_std};
    int count = s->outputs > 0 ? 4 : 2;
    for (int i = 0; i < count; i++) {
        int64_t len = i < 2 ? s->width : s->outputs;
        clt_status st = clt_from_host(&tensors[i], dev, CLT_FLOAT32, 1, &len, arrays[i]);
        if (st != CLT_OK) {
            for (int j = 0; j < i; j++) clt_tensor_release(tensors[j]);
            return st;
        }
        names[i] = pre_names[i];
    }
    *n = count;
    return CLT_OK;
}

/* Tensor name (F32, 1-D of len) read into a new host array; NULL and CLT_OK when absent. */
static clt_status read_vector(const char *path, const clt_safetensors *f, clt_device dev, const char *name,
                              int64_t len, float **out)
{
    *out = NULL;
    int k = clt_safetensors_find(f, name);
    if (k < 0) return CLT_OK;
    clt_safetensors_info fi;
    CLT_TRY(clt_safetensors_tensor_info(f, k, &fi));
    if (strcmp(fi.dtype, "F32") != 0 || fi.ndim != 1 || fi.shape[0] != len)
        return clt__fail(CLT_ERR_FORMAT, "%s: tensor %s must be F32 of shape (%lld), the model's %s", path, name,
                         (long long)len, strstr(name, "x_") ? "inputs" : "outputs");
    float *host = malloc((size_t)len * sizeof *host);
    if (!host) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    clt_tensor *t = NULL;
    clt_status s = clt_safetensors_read(f, name, dev, &t);
    if (s == CLT_OK) s = clt_to_host(t, host, (size_t)len * sizeof *host);
    clt_tensor_release(t);
    for (int64_t i = 0; s == CLT_OK && i < len; i++)
        if (!isfinite(host[i]) || (strstr(name, "_std") && !(host[i] > 0)))
            s = clt__fail(CLT_ERR_FORMAT, "%s: tensor %s holds %g at %lld, not a %s", path, name, (double)host[i],
                          (long long)i, strstr(name, "_std") ? "positive finite deviation" : "finite mean");
    if (s != CLT_OK) {
        free(host);
        return s;
    }
    *out = host;
    return CLT_OK;
}

clt_status clt__standardizer_read(clt_standardizer *out, int *found, const char *path, const clt_safetensors *f,
                                  clt_device dev, int64_t width, int64_t outputs)
{
    memset(out, 0, sizeof *out);
    *found = 0;
    for (int k = 0; k < clt_safetensors_num_tensors(f); k++) {
        clt_safetensors_info fi;
        CLT_TRY(clt_safetensors_tensor_info(f, k, &fi));
        if (strncmp(fi.name, CLT__PREPROCESS_PREFIX, strlen(CLT__PREPROCESS_PREFIX)) != 0) continue;
        int known = 0;
        for (int i = 0; i < 4; i++) known |= strcmp(fi.name, pre_names[i]) == 0;
        if (!known)
            return clt__fail(CLT_ERR_FORMAT, "%s: tensor %.80s is not one of preprocess.x_mean, x_std, y_mean, y_std",
                             path, fi.name);
        if (outputs == 0 && strncmp(fi.name, CLT__PREPROCESS_PREFIX "y_", strlen(CLT__PREPROCESS_PREFIX "y_")) == 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: tensor %s standardizes a regression's targets, but the model is a "
                             "classifier (cltensor.task)", path, fi.name);
    }
    float *v[4] = {NULL, NULL, NULL, NULL};
    clt_status s = CLT_OK;
    for (int i = 0; i < 4 && s == CLT_OK; i++) s = read_vector(path, f, dev, pre_names[i], i < 2 ? width : outputs, &v[i]);
    if (s == CLT_OK && (!v[0] != !v[1] || !v[2] != !v[3] || (v[2] && !v[0])))
        s = clt__fail(CLT_ERR_FORMAT, "%s: the preprocess tensors come in pairs, x_mean with x_std and y_mean with y_std, "
                      "the features' first", path);
    if (s == CLT_OK && v[0]) {
        s = clt_standardizer_from_host(out, width, v[0], v[1], v[2] ? outputs : 0, v[2], v[3]);
        if (s != CLT_OK) s = clt__fail(CLT_ERR_FORMAT, "%s: the preprocess tensors: %s", path, clt_last_error());
        *found = s == CLT_OK;
    }
    for (int i = 0; i < 4; i++) free(v[i]);
    return s;
}
