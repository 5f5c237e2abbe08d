/* clt_model_load: any saved model rebuilt from its file, with what it is
 * for (its description) and its standardizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "cltensor/io.h"
#include "cltensor/trainer.h"
#include "description.h"

void clt_model_description_free(clt_model_description *d)
{
    if (!d) return;
    for (int i = 0; d->class_names && i < d->num_classes; i++) free(d->class_names[i]);
    free(d->class_names);
    free(d->target);
    clt_standardizer_free(&d->standardizer);
    memset(d, 0, sizeof *d);
}

/* The 2-D tensor name's shape, each side 1..2^31-1, else CLT_ERR_FORMAT. */
static clt_status matrix_shape(const char *path, const clt_safetensors *f, const char *name, int64_t *rows,
                               int64_t *cols)
{
    int k = clt_safetensors_find(f, name);
    clt_safetensors_info fi;
    if (k < 0 || clt_safetensors_tensor_info(f, k, &fi) != CLT_OK || fi.ndim != 2 || fi.shape[0] < 1 ||
        fi.shape[0] > INT32_MAX || fi.shape[1] < 1 || fi.shape[1] > INT32_MAX)
        return clt__fail(CLT_ERR_FORMAT, "%s: not a ResMLP checkpoint (no 2-D tensor %s of sides 1..%d)", path, name,
                         INT32_MAX);
    *rows = fi.shape[0];
    *cols = fi.shape[1];
    return CLT_OK;
}

/* A file without a layer list: the chapter's ResMLPClassifier, its shape from
 * its tensors; its parameter count must be what the file holds. */
static clt_status build_resmlp(clt_model **out, const char *path, const clt_safetensors *f, clt_device dev)
{
    int64_t h = 0, k = 0, in = 0, out_features = 0, rows = 0; /* set by the calls below (GCC -O2 cannot tell) */
    CLT_TRY(clt_checkpoint_resmlp_shape(path, &h, &k));
    CLT_TRY(matrix_shape(path, f, "net.1.weight", &rows, &in));
    char last[48];
    snprintf(last, sizeof last, "net.%lld.weight", (long long)(k + 3));
    CLT_TRY(matrix_shape(path, f, last, &out_features, &rows));
    int64_t want = 0, held = 0;
    if (clt__muladd_i64(&want, in + 1, h) || clt__muladd_i64(&want, 2 * k * (h + 1), h) ||
        clt__muladd_i64(&want, h + 1, out_features))
        return clt__fail(CLT_ERR_FORMAT, "%s: a ResMLP of %lld hiddens and %lld blocks has more parameters than fit",
                         path, (long long)h, (long long)k);
    for (int i = 0; i < clt_safetensors_num_tensors(f); i++) {
        clt_safetensors_info fi;
        CLT_TRY(clt_safetensors_tensor_info(f, i, &fi));
        if (strncmp(fi.name, "net.", 4) == 0 && clt__add_i64(held, fi.numel, &held) != 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: the tensors hold more elements than fit", path);
    }
    if (want != held)
        return clt__fail(CLT_ERR_FORMAT,
                         "%s: a ResMLP of %lld inputs, %lld hiddens, %lld blocks and %lld outputs has %lld parameters "
                         "but the file's net.* tensors hold %lld",
                         path, (long long)in, (long long)h, (long long)k, (long long)out_features, (long long)want,
                         (long long)held);
    return clt_model_create_resmlp(out, dev, in, h, (int)k, out_features, 0);
}

/* The model of a checked layer list (its parameters drawn, then replaced by the file's). */
static clt_status build_layers(clt_model **out, const char *path, const clt__description *d, clt_device dev)
{
    clt_model *m;
    CLT_TRY(clt_model_create(&m, d->prefix));
    clt_status s = CLT_OK;
    for (int i = 0; s == CLT_OK && i < d->nlayers; i++) {
        const clt__layer_spec *l = &d->layers[i];
        switch (l->kind) {
        case CLT_LAYER_LINEAR: s = clt_model_add_linear(m, l->in, l->out); break;
        case CLT_LAYER_RELU: s = clt_model_add_relu(m); break;
        case CLT_LAYER_FLATTEN: s = clt_model_add_flatten(m); break;
        case CLT_LAYER_RESIDUAL: s = clt_model_add_residual(m, l->in); break;
        case CLT_LAYER_CUSTOM:
            clt_model_free(m);
            return clt__fail(CLT_ERR_UNSUPPORTED,
                             "%s: layer %d is the custom layer \"%s\", which only the program that made it can "
                             "build: build the model there (clt_model_add_layer) and load the parameters with "
                             "clt_checkpoint_load", path, i, l->custom);
        }
        if (s != CLT_OK && s != CLT_ERR_OUT_OF_MEMORY)
            s = clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.layers: %s", path, clt_last_error());
    }
    if (s == CLT_OK) s = clt_model_init(m, dev, 0);
    if (s != CLT_OK) {
        clt_model_free(m);
        return s;
    }
    *out = m;
    return CLT_OK;
}

/* The description handed out: the file's, completed for what it does not record. */
static clt_status describe(clt_model_description *desc, clt__description *d, const clt_model *m,
                           const clt_checkpoint_info *info, clt_standardizer *st, int has_st)
{
    memset(desc, 0, sizeof *desc);
    desc->task = d->task;
    desc->num_inputs = clt_model_num_inputs(m);
    desc->num_outputs = clt_model_num_outputs(m);
    desc->info = *info;
    desc->example_ndim = d->example_ndim ? d->example_ndim : 1;
    if (d->example_ndim) memcpy(desc->example_shape, d->example_shape, sizeof desc->example_shape);
    else desc->example_shape[0] = desc->num_inputs;
    desc->target = d->target;
    d->target = NULL;
    if (has_st) {
        desc->standardizer = *st;
        memset(st, 0, sizeof *st);
        desc->has_standardizer = 1;
    }
    if (d->task == CLT_TASK_REGRESS) return CLT_OK;
    if (desc->num_outputs > CLT_MODEL_MAX_CLASSES)
        return clt__fail(CLT_ERR_FORMAT, "a classifier of %lld outputs (more than %d classes)",
                         (long long)desc->num_outputs, CLT_MODEL_MAX_CLASSES);
    desc->num_classes = (int)desc->num_outputs;
    if (d->num_classes) {
        desc->class_names = d->class_names;
        d->class_names = NULL;
        d->num_classes = 0;
        return CLT_OK;
    }
    desc->class_names = calloc((size_t)desc->num_classes, sizeof *desc->class_names);
    if (!desc->class_names) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory naming classes");
    for (int c = 0; c < desc->num_classes; c++) {
        char num[16];
        snprintf(num, sizeof num, "%d", c);
        if (!(desc->class_names[c] = strdup(num))) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory naming classes");
    }
    return CLT_OK;
}

clt_status clt_model_load(clt_model **out, const char *path, clt_device dev, clt_model_description *desc)
{
    if (desc) memset(desc, 0, sizeof *desc);
    CLT_TRY(clt__need("clt_model_load", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_model_load", "path", path));
    clt_safetensors *f;
    CLT_TRY(clt_safetensors_open(&f, path));
    clt__description d;
    clt_model *m = NULL;
    clt_standardizer st = {0};
    int has_st = 0;
    clt_checkpoint_info info = {0};
    clt_status s = clt__description_read(&d, path, f);
    if (s == CLT_OK) s = d.has_layers ? build_layers(&m, path, &d, dev) : build_resmlp(&m, path, f, dev);
    if (s == CLT_OK && !d.has_layers) s = clt__description_check(&d, path, clt_model_num_inputs(m), clt_model_num_outputs(m));
    if (s == CLT_OK)
        s = clt__standardizer_read(&st, &has_st, path, f, dev, clt_model_num_inputs(m),
                                   d.task == CLT_TASK_REGRESS ? clt_model_num_outputs(m) : 0);
    if (s == CLT_OK) s = clt_checkpoint_load(path, m, NULL, &info);
    if (s == CLT_OK && desc) s = describe(desc, &d, m, &info, &st, has_st);
    clt_standardizer_free(&st);
    clt__description_free(&d);
    clt_safetensors_free(f);
    if (s != CLT_OK) {
        if (desc) clt_model_description_free(desc);
        clt_model_free(m);
        return s;
    }
    clt_model_set_training(m, 0);
    *out = m;
    return CLT_OK;
}
