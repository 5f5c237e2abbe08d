/* Internal: a model's description in a checkpoint's metadata (the layer
 * list, the prefix, the task, the class names, the example shape, the
 * target column) and the standardizer's preprocess.* tensors: written by
 * clt_checkpoint_save, checked by clt_checkpoint_load, read by
 * clt_model_load (description.c). The keys:
 *   cltensor.layers         [{"kind":"flatten"}, {"kind":"linear","in":784,"out":256}, {"kind":"relu"},
 *                            {"kind":"residual","width":256}, ...]
 *   cltensor.prefix         "net"
 *   cltensor.task           "classify" or "regress"
 *   cltensor.class_names    ["cat", "dog"]
 *   cltensor.example_shape  [8, 8]
 *   cltensor.target         "species" */
#ifndef CLT_TRAINER_DESCRIPTION_H
#define CLT_TRAINER_DESCRIPTION_H

#include "cltensor/io.h"
#include "cltensor/trainer.h"

#define CLT__PREPROCESS_PREFIX "preprocess."

/* One layer of a saved list: a Linear's in and out, a ResidualBlock's width
 * in both, 0 for ReLU, Flatten and a custom layer, whose name is `custom`. */
typedef struct clt__layer_spec {
    clt_layer_kind kind;
    int64_t in, out;
    char custom[32];
} clt__layer_spec;

/* What a file's metadata describes, checked. */
typedef struct clt__description {
    int has_layers;          /* 0: the file has no cltensor.layers */
    int nlayers;
    clt__layer_spec *layers;
    char prefix[32];
    int64_t num_inputs, num_outputs, num_params; /* from the layers (has_layers) */
    clt_task task;
    int num_classes;         /* names read, 0 when none */
    char **class_names;
    int example_ndim;        /* 0 when not recorded */
    int64_t example_shape[CLT_DATASET_MAX_DIMS];
    char *target;            /* NULL when not recorded */
} clt__description;

/* The metadata pairs that describe model with info (info may be NULL):
 * keys and values for clt_safetensors_save, in *n of the arrays given
 * (room for 6), values owned by *owned (free each of its *nowned). Checks
 * info against the model (CLT_ERR_INVALID_ARGUMENT naming the field). */
clt_status clt__description_format(const clt_model *model, const clt_checkpoint_info *info, const char **keys,
                                   const char **values, char **owned, int *n);

/* Reads and checks f's description (path names the file in messages):
 * CLT_ERR_FORMAT naming the key. The parameter count of the layers must
 * equal that of the file's parameter tensors (all but optimizer.* and
 * preprocess.*), so no model larger than the file is ever built. */
clt_status clt__description_read(clt__description *d, const char *path, const clt_safetensors *f);

/* The class names and example shape against a model of inputs and outputs
 * (CLT_ERR_FORMAT naming the key). */
clt_status clt__description_check(const clt__description *d, const char *path, int64_t inputs, int64_t outputs);

void clt__description_free(clt__description *d);

/* The standardizer's tensors of a save (view names and host-made tensors on
 * dev); *n of them (0, 2 or 4), released by the caller. */
clt_status clt__standardizer_tensors(const clt_standardizer *s, clt_device dev, const char **names,
                                     clt_tensor **tensors, int *n);

/* The file's preprocess.* tensors as a standardizer for a model of the given
 * width and outputs (a regression's targets; 0 for a classifier, whose file
 * may hold no y_ tensor), read through dev (*found 0 when the file has none;
 * then out is zeroed). CLT_ERR_FORMAT naming the tensor when one is
 * malformed, alone or a classifier's y_ tensor. */
clt_status clt__standardizer_read(clt_standardizer *out, int *found, const char *path, const clt_safetensors *f,
                                  clt_device dev, int64_t width, int64_t outputs);

#endif
