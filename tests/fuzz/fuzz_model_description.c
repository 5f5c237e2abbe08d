/* libFuzzer target: a self-describing model's metadata (the layer list,
 * prefix, task, class names, example shape, target; src/trainer/
 * description.c) and clt_model_load, which rebuilds the model from it.
 *
 * The input is either a whole safetensors file, or, when it starts with
 * '@', "@N" and then "key=value" lines (at most 16): the metadata of a file
 * holding the tensors of fixed model N (0: flatten, linear 6-4, relu,
 * residual 4, linear 4-3 with a feature standardizer; 1: a regression,
 * linear 3-5, relu, linear 5-2, standardized features and targets; 2: a
 * capstone ResMLP, 4 inputs, 3 hiddens, 1 block, 2 outputs), so that the
 * fuzzer mutates the metadata's text directly.
 *
 * clt__description_read either refuses with CLT_ERR_FORMAT and a message,
 * the description zeroed, or gives one within its documented bounds;
 * clt_model_load either refuses (*out NULL, the description zeroed) or
 * gives a model that agrees with the description and predicts a row; no
 * crash, no leak, no tensor left allocated. Tensors and models live on the
 * default device (clt_device_get_default), which every configuration has. */
#include <cltensor.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "trainer/description.h"

#define DESC_MAX_KEYS 16
#define DESC_MODELS 3

/* Fixed model i, saved once per process in the private directory. */
static const char *desc_base(int i)
{
    static char paths[DESC_MODELS][4200];
    if (paths[i][0]) return paths[i];
    char name[16];
    snprintf(name, sizeof name, "base-%d.st", i);
    fuzz_private_path(name, paths[i]);
    clt_device dev = clt_device_get_default();
    clt_model *m = NULL;
    clt_checkpoint_info info = {0};
    clt_standardizer st = {0};
    static const char *const names[] = {"cat", "dog", "eel"};
    if (i == 0) {
        FUZZ_REQUIRE(clt_model_create(&m, "net") == CLT_OK && clt_model_add_flatten(m) == CLT_OK &&
                     clt_model_add_linear(m, 6, 4) == CLT_OK && clt_model_add_relu(m) == CLT_OK &&
                     clt_model_add_residual(m, 4) == CLT_OK && clt_model_add_linear(m, 4, 3) == CLT_OK &&
                     clt_model_init(m, dev, 1) == CLT_OK);
        const float mean[6] = {0, 1, 2, 3, 4, 5}, sd[6] = {1, 2, 3, 4, 5, 6};
        FUZZ_REQUIRE(clt_standardizer_from_host(&st, 6, mean, sd, 0, NULL, NULL) == CLT_OK);
        info.num_classes = 3;
        info.class_names = names;
        info.example_ndim = 2;
        info.example_shape[0] = 2;
        info.example_shape[1] = 3;
        info.target = "kind";
        info.standardizer = &st;
    } else if (i == 1) {
        FUZZ_REQUIRE(clt_model_create(&m, "reg") == CLT_OK && clt_model_add_linear(m, 3, 5) == CLT_OK &&
                     clt_model_add_relu(m) == CLT_OK && clt_model_add_linear(m, 5, 2) == CLT_OK &&
                     clt_model_init(m, dev, 2) == CLT_OK);
        const float mean[3] = {1, 2, 3}, sd[3] = {0.5f, 1, 2}, ym[2] = {10, -10}, ys[2] = {3, 4};
        FUZZ_REQUIRE(clt_standardizer_from_host(&st, 3, mean, sd, 2, ym, ys) == CLT_OK);
        info.task = CLT_TASK_REGRESS;
        info.standardizer = &st;
    } else {
        FUZZ_REQUIRE(clt_model_create_resmlp(&m, dev, 4, 3, 1, 2, 3) == CLT_OK);
    }
    FUZZ_REQUIRE(clt_checkpoint_save(paths[i], m, NULL, &info) == CLT_OK);
    clt_standardizer_free(&st);
    clt_model_free(m);
    return paths[i];
}

/* The file of an '@' input: base model N's tensors and the lines' metadata,
 * or NULL when the writer refuses the metadata (not what is fuzzed here). */
static const char *desc_meta_file(const uint8_t *data, size_t size)
{
    if (size < 2 || data[1] < '0' || data[1] >= '0' + DESC_MODELS) return NULL;
    char *text = malloc(size + 1);
    FUZZ_REQUIRE(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    const char *keys[DESC_MAX_KEYS], *values[DESC_MAX_KEYS];
    int nmeta = 0;
    char *line = strchr(text, '\n');
    while (line && nmeta < DESC_MAX_KEYS) {
        *line++ = '\0';
        char *next = strchr(line, '\n');
        if (next) *next = '\0';
        char *eq = strchr(line, '=');
        if (eq) {
            *eq = '\0';
            keys[nmeta] = line;
            values[nmeta++] = eq + 1;
        }
        if (next) *next = '\n';
        line = next;
    }
    clt_safetensors *base;
    FUZZ_REQUIRE(clt_safetensors_open(&base, desc_base(data[1] - '0')) == CLT_OK);
    int n = clt_safetensors_num_tensors(base);
    const char *names[16];
    clt_tensor *tensors[16];
    FUZZ_REQUIRE(n <= 16);
    for (int i = 0; i < n; i++) {
        clt_safetensors_info fi;
        FUZZ_REQUIRE(clt_safetensors_tensor_info(base, i, &fi) == CLT_OK);
        names[i] = fi.name;
        FUZZ_REQUIRE(clt_safetensors_read(base, fi.name, clt_device_get_default(), &tensors[i]) == CLT_OK);
    }
    static char path[4200];
    fuzz_private_path("model.st", path);
    clt_status s = clt_safetensors_save(path, n, names, tensors, nmeta, keys, values);
    for (int i = 0; i < n; i++) clt_tensor_release(tensors[i]);
    clt_safetensors_free(base);
    free(text);
    if (s != CLT_OK) {
        FUZZ_REQUIRE(s == CLT_ERR_INVALID_ARGUMENT && clt_last_error()[0] != '\0');
        return NULL;
    }
    return path;
}

static int64_t desc_product(int ndim, const int64_t *shape)
{
    int64_t p = 1;
    for (int i = 0; i < ndim; i++) p *= shape[i];
    return p;
}

static void desc_check_loaded(clt_model *m, const clt_model_description *md, const clt__description *d, int have_d)
{
    int64_t in = clt_model_num_inputs(m), out = clt_model_num_outputs(m);
    FUZZ_REQUIRE(in >= 1 && out >= 1 && md->num_inputs == in && md->num_outputs == out);
    FUZZ_REQUIRE(md->task == CLT_TASK_CLASSIFY || md->task == CLT_TASK_REGRESS);
    if (md->task == CLT_TASK_CLASSIFY) {
        FUZZ_REQUIRE(md->num_classes == out && md->class_names != NULL);
        for (int c = 0; c < md->num_classes; c++) FUZZ_REQUIRE(md->class_names[c] != NULL);
    } else {
        FUZZ_REQUIRE(md->num_classes == 0 && md->class_names == NULL);
    }
    FUZZ_REQUIRE(md->example_ndim >= 1 && md->example_ndim <= CLT_DATASET_MAX_DIMS);
    FUZZ_REQUIRE(desc_product(md->example_ndim, md->example_shape) == in);
    if (md->has_standardizer) {
        FUZZ_REQUIRE(md->standardizer.width == in);
        FUZZ_REQUIRE(md->standardizer.outputs == 0 || (md->task == CLT_TASK_REGRESS && md->standardizer.outputs == out));
    }
    if (have_d && d->has_layers) {
        FUZZ_REQUIRE(in == d->num_inputs && out == d->num_outputs);
        FUZZ_REQUIRE(clt_model_num_parameter_elements(m) == d->num_params);
        FUZZ_REQUIRE(clt_model_num_layers(m) == d->nlayers);
    }
    /* One row through the loaded model, as clt predict runs it. */
    if (in <= 4096 && out <= 4096) {
        float *x = calloc((size_t)in, sizeof *x), *y = calloc((size_t)out, sizeof *y);
        int32_t cls = -1;
        FUZZ_REQUIRE(x && y);
        FUZZ_REQUIRE(clt_model_predict(m, md, x, 1, in, y, &cls) == CLT_OK);
        if (md->task == CLT_TASK_CLASSIFY) FUZZ_REQUIRE(cls >= 0 && cls < out);
        free(x);
        free(y);
    }
}

static int fuzz_model_description(const uint8_t *data, size_t size)
{
    const char *path = size > 0 && data[0] == '@' ? desc_meta_file(data, size) : fuzz_file(data, size);
    if (!path) return 0;
    int64_t before = clt_memory_allocated(clt_device_get_default());
    clt_safetensors *f = NULL;
    clt_status s = clt_safetensors_open(&f, path);
    if (s != CLT_OK) {
        FUZZ_REQUIRE(s == CLT_ERR_FORMAT && clt_last_error()[0] != '\0' && f == NULL);
        return 0;
    }
    clt__description d;
    s = clt__description_read(&d, path, f);
    int have_d = s == CLT_OK;
    if (s != CLT_OK) {
        static const clt__description zero;
        FUZZ_REQUIRE((s == CLT_ERR_FORMAT || s == CLT_ERR_OUT_OF_MEMORY) && clt_last_error()[0] != '\0');
        FUZZ_REQUIRE(memcmp(&d, &zero, sizeof d) == 0);
    } else {
        FUZZ_REQUIRE(strlen(d.prefix) < sizeof d.prefix);
        FUZZ_REQUIRE(d.task == CLT_TASK_CLASSIFY || d.task == CLT_TASK_REGRESS);
        FUZZ_REQUIRE(d.num_classes >= 0 && d.num_classes <= CLT_MODEL_MAX_CLASSES);
        for (int c = 0; c < d.num_classes; c++) FUZZ_REQUIRE(d.class_names[c] != NULL);
        FUZZ_REQUIRE(d.num_classes == 0 || d.task == CLT_TASK_CLASSIFY);
        FUZZ_REQUIRE(d.example_ndim >= 0 && d.example_ndim <= CLT_DATASET_MAX_DIMS);
        for (int i = 0; i < d.example_ndim; i++) FUZZ_REQUIRE(d.example_shape[i] >= 1 && d.example_shape[i] <= INT32_MAX);
        if (d.has_layers) {
            FUZZ_REQUIRE(d.nlayers >= 1 && d.nlayers <= CLT_MODEL_MAX_LAYERS && d.layers != NULL);
            FUZZ_REQUIRE(d.num_inputs >= 1 && d.num_inputs <= INT32_MAX && d.num_outputs >= 1 &&
                         d.num_outputs <= INT32_MAX && d.num_params >= 1);
            FUZZ_REQUIRE(d.num_classes == 0 || d.num_classes == d.num_outputs);
            FUZZ_REQUIRE(d.example_ndim == 0 || desc_product(d.example_ndim, d.example_shape) == d.num_inputs);
        } else {
            FUZZ_REQUIRE(d.nlayers == 0 && d.layers == NULL);
        }
    }
    clt_safetensors_free(f);

    static char unset;
    clt_model *m = (clt_model *)(void *)&unset; /* the load must set it */
    clt_model_description md;
    s = clt_model_load(&m, path, clt_device_get_default(), &md);
    if (s != CLT_OK) {
        static const clt_model_description zero;
        FUZZ_REQUIRE(m == NULL && clt_last_error()[0] != '\0');
        FUZZ_REQUIRE(memcmp(&md, &zero, sizeof md) == 0);
        /* A file whose description reads cannot fail the load over it. */
        FUZZ_REQUIRE(s != CLT_ERR_INVALID_ARGUMENT);
    } else {
        FUZZ_REQUIRE(m != NULL);
        desc_check_loaded(m, &md, &d, have_d);
        clt_model_free(m);
    }
    clt_model_description_free(&md);
    if (have_d) clt__description_free(&d);
    FUZZ_REQUIRE(clt_memory_allocated(clt_device_get_default()) == before);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_model_description(data, size); }
#endif
