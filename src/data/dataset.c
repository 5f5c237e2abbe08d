#include "cltensor/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "dataset.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/io.h"

void clt_dataset_free(clt_dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds->x);
    free(ds->classes);
    free(ds->values);
    clt__names_free(ds->class_names, ds->num_classes);
    memset(ds, 0, sizeof *ds);
}

int64_t clt_dataset_width(const clt_dataset *ds) { return ds ? ds->rows * ds->cols : 0; }

int64_t clt_dataset_num_outputs(const clt_dataset *ds)
{
    if (!ds) return 0;
    return ds->task == CLT_TASK_REGRESS ? ds->outputs : ds->num_classes;
}

void clt__names_free(char **names, int n)
{
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

char **clt__names_copy(const char *const *names, int n)
{
    if (!names || n <= 0) return NULL;
    char **out = calloc((size_t)n, sizeof *out);
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        out[i] = strdup(names[i] ? names[i] : "");
        if (!out[i]) {
            clt__names_free(out, n);
            return NULL;
        }
    }
    return out;
}

int32_t clt__dataset_class(const clt_dataset *ds, int64_t i)
{
    return ds->classes ? ds->classes[i] : ds->labels ? ds->labels[i] : -1;
}

float clt__dataset_feature(const clt_dataset *ds, int64_t i, int64_t j)
{
    int64_t w = ds->rows * ds->cols;
    return ds->x ? ds->x[i * w + j] : (float)ds->images[i * w + j] / 255.0f;
}

clt_status clt_dataset_from_host(clt_dataset *out, int64_t n, int64_t width, const float *x, const int32_t *classes,
                                 int num_classes, const char *const *class_names, const float *values,
                                 int64_t outputs)
{
    const char *op = "clt_dataset_from_host";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "x", x));
    if (n < 1 || width < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld examples of width %lld (both must be at least 1)", op,
                         (long long)n, (long long)width);
    if (!classes == !values)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: give class ids (classes) or regression values (values), one "
                         "of them", op);
    if (values && outputs < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld outputs per example (at least 1)", op,
                         (long long)outputs);
    if (num_classes < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: num_classes %d", op, num_classes);
    int64_t numel, xbytes, ybytes;
    if (clt__shape_bytes(2, (int64_t[]){n, width}, 4, &numel, &xbytes) != 0 ||
        clt__shape_bytes(2, (int64_t[]){n, values ? outputs : 1}, 4, &numel, &ybytes) != 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld x %lld values overflow", op, (long long)n,
                         (long long)width);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j++)
            if (!isfinite(x[i * width + j]))
                return clt__fail(CLT_ERR_FORMAT, "%s: feature %lld of example %lld is %g (not a finite number)", op,
                                 (long long)j, (long long)i, (double)x[i * width + j]);
    if (classes) {
        int largest = -1;
        for (int64_t i = 0; i < n; i++) {
            if (classes[i] < 0 || (num_classes > 0 && classes[i] >= num_classes))
                return clt__fail(CLT_ERR_FORMAT, "%s: example %lld has class %d, outside 0..%d", op, (long long)i,
                                 (int)classes[i], num_classes > 0 ? num_classes - 1 : INT32_MAX - 1);
            if (classes[i] > largest) largest = classes[i];
        }
        if (largest == INT32_MAX)
            return clt__fail(CLT_ERR_FORMAT, "%s: class id %d is too large", op, largest);
        if (num_classes == 0) num_classes = largest + 1;
    } else {
        for (int64_t i = 0; i < n * outputs; i++)
            if (!isfinite(values[i]))
                return clt__fail(CLT_ERR_FORMAT, "%s: value %lld of example %lld is %g (not a finite number)", op,
                                 (long long)(i % outputs), (long long)(i / outputs), (double)values[i]);
    }
    out->n = n;
    out->rows = 1;
    out->cols = width;
    out->x = malloc((size_t)xbytes);
    int ok = out->x != NULL;
    if (ok) memcpy(out->x, x, (size_t)xbytes);
    if (classes) {
        out->task = CLT_TASK_CLASSIFY;
        out->num_classes = num_classes;
        out->classes = malloc((size_t)ybytes);
        ok = ok && out->classes;
        if (ok) memcpy(out->classes, classes, (size_t)ybytes);
        if (ok && class_names) {
            out->class_names = clt__names_copy(class_names, num_classes);
            ok = out->class_names != NULL;
        }
    } else {
        out->task = CLT_TASK_REGRESS;
        out->outputs = outputs;
        out->values = malloc((size_t)ybytes);
        ok = ok && out->values;
        if (ok) memcpy(out->values, values, (size_t)ybytes);
    }
    if (!ok) {
        clt_dataset_free(out);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld examples", op, (long long)n);
    }
    return CLT_OK;
}

clt_status clt_dataset_check(const clt_dataset *ds, const char *name)
{
    CLT_TRY(clt__need("clt_dataset_check", "ds", ds));
    if (!name) name = "the dataset";
    int64_t w = ds->rows * ds->cols;
    if (ds->n < 1 || ds->rows < 1 || ds->cols < 1)
        return clt__fail(CLT_ERR_FORMAT, "%s has no examples (%lld of width %lld): nothing to train on", name,
                         (long long)ds->n, (long long)w);
    if (!ds->images && !ds->x) return clt__fail(CLT_ERR_FORMAT, "%s has no features", name);
    if (ds->x)
        for (int64_t i = 0; i < ds->n * w; i++)
            if (!isfinite(ds->x[i]))
                return clt__fail(CLT_ERR_FORMAT, "%s: example %lld, feature %lld is %g (not a finite number)", name,
                                 (long long)(i / w), (long long)(i % w), (double)ds->x[i]);
    if (ds->task == CLT_TASK_REGRESS) {
        if (!ds->values || ds->outputs < 1) return clt__fail(CLT_ERR_FORMAT, "%s has no regression targets", name);
        for (int64_t i = 0; i < ds->n * ds->outputs; i++)
            if (!isfinite(ds->values[i]))
                return clt__fail(CLT_ERR_FORMAT, "%s: example %lld, target %lld is %g (not a finite number)", name,
                                 (long long)(i / ds->outputs), (long long)(i % ds->outputs), (double)ds->values[i]);
        return CLT_OK;
    }
    if (!ds->labels && !ds->classes) return clt__fail(CLT_ERR_FORMAT, "%s has no class labels", name);
    if (ds->task != CLT_TASK_CLASSIFY) return clt__fail(CLT_ERR_FORMAT, "%s: unknown task %d", name, (int)ds->task);
    int32_t first = clt__dataset_class(ds, 0);
    int two = 0;
    for (int64_t i = 0; i < ds->n; i++) {
        int32_t c = clt__dataset_class(ds, i);
        if (c < 0 || c >= ds->num_classes)
            return clt__fail(CLT_ERR_FORMAT, "%s: example %lld has class %d, outside 0..%d", name, (long long)i,
                             (int)c, ds->num_classes - 1);
        two |= c != first;
    }
    if (!two) {
        const char *label = ds->class_names && first < ds->num_classes ? ds->class_names[first] : NULL;
        char num[16];
        snprintf(num, sizeof num, "%d", (int)first);
        return clt__fail(CLT_ERR_FORMAT, "%s: every one of its %lld examples is of class %s: a classifier needs two "
                         "classes at least", name, (long long)ds->n, label ? label : num);
    }
    return CLT_OK;
}

clt_status clt_dataset_subset(clt_dataset *out, const clt_dataset *ds, const int64_t *idx, int64_t count)
{
    const char *op = "clt_dataset_subset";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "ds", ds));
    if (count < 0 || (count > 0 && !idx))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld indices", op, (long long)count);
    for (int64_t k = 0; k < count; k++)
        if (idx[k] < 0 || idx[k] >= ds->n)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: index %lld of a dataset of %lld examples", op,
                             (long long)idx[k], (long long)ds->n);
    *out = *ds;
    out->n = count;
    out->images = NULL;
    out->labels = NULL;
    out->x = NULL;
    out->classes = NULL;
    out->values = NULL;
    out->class_names = NULL;
    size_t w = (size_t)(ds->rows * ds->cols), k_out = (size_t)(ds->outputs > 0 ? ds->outputs : 1);
    size_t rows = (size_t)(count ? count : 1);
    int ok = 1;
    if (ds->images) ok &= (out->images = malloc(rows * w)) != NULL;
    if (ds->x) ok &= (out->x = malloc(rows * w * sizeof(float))) != NULL;
    if (ds->labels) ok &= (out->labels = malloc(rows)) != NULL;
    if (ds->classes) ok &= (out->classes = malloc(rows * sizeof(int32_t))) != NULL;
    if (ds->values) ok &= (out->values = malloc(rows * k_out * sizeof(float))) != NULL;
    if (ds->class_names) ok &= (out->class_names = clt__names_copy((const char *const *)ds->class_names,
                                                                  ds->num_classes)) != NULL;
    if (!ok) {
        clt_dataset_free(out);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld examples", op, (long long)count);
    }
    for (int64_t k = 0; k < count; k++) {
        size_t i = (size_t)idx[k];
        if (out->images) memcpy(out->images + k * w, ds->images + i * w, w);
        if (out->x) memcpy(out->x + k * w, ds->x + i * w, w * sizeof(float));
        if (out->labels) out->labels[k] = ds->labels[i];
        if (out->classes) out->classes[k] = ds->classes[i];
        if (out->values) memcpy(out->values + k * k_out, ds->values + i * k_out, k_out * sizeof(float));
    }
    return CLT_OK;
}
