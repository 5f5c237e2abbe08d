/* Per-feature (and per-target) standardisation fitted on a training set
 * (clt_standardizer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "cltensor/data.h"
#include "dataset.h"

void clt_standardizer_free(clt_standardizer *s)
{
    if (!s) return;
    free(s->x_mean);
    free(s->x_std);
    free(s->y_mean);
    free(s->y_std);
    memset(s, 0, sizeof *s);
}

/* Mean and population std of column j of an n x k row-major table read by get. */
static void moments(int64_t n, int64_t j, double (*get)(const void *, int64_t, int64_t), const void *src, float *mean,
                    float *std)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += get(src, i, j);
    double m = sum / (double)n, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = get(src, i, j) - m;
        sq += d * d;
    }
    double sd = sqrt(sq / (double)n);
    *mean = (float)m;
    /* A constant column (or one too small to tell from it) maps to 0. */
    *std = sd > 1e-12 * (fabs(m) > 1 ? fabs(m) : 1) && isfinite(sd) ? (float)sd : 1.0f;
    if (!(*std > 0)) *std = 1.0f;
}

static double feature_of(const void *ds, int64_t i, int64_t j) { return clt__dataset_feature(ds, i, j); }

static double target_of(const void *ds, int64_t i, int64_t j)
{
    const clt_dataset *d = ds;
    return d->values[i * d->outputs + j];
}

clt_status clt_standardizer_fit(clt_standardizer *out, const clt_dataset *ds)
{
    const char *op = "clt_standardizer_fit";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "ds", ds));
    int64_t w = ds->rows * ds->cols;
    if (ds->n < 1 || w < 1 || (!ds->x && !ds->images))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: the dataset has no examples to fit on", op);
    int64_t k = ds->task == CLT_TASK_REGRESS && ds->values ? ds->outputs : 0;
    out->width = w;
    out->outputs = k;
    out->x_mean = malloc((size_t)w * sizeof(float));
    out->x_std = malloc((size_t)w * sizeof(float));
    if (k) {
        out->y_mean = malloc((size_t)k * sizeof(float));
        out->y_std = malloc((size_t)k * sizeof(float));
    }
    if (!out->x_mean || !out->x_std || (k && (!out->y_mean || !out->y_std))) {
        clt_standardizer_free(out);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    for (int64_t j = 0; j < w; j++) moments(ds->n, j, feature_of, ds, &out->x_mean[j], &out->x_std[j]);
    for (int64_t j = 0; j < k; j++) moments(ds->n, j, target_of, ds, &out->y_mean[j], &out->y_std[j]);
    return CLT_OK;
}

static int positive(const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(a[i] > 0) || !isfinite(a[i])) return 0;
    return 1;
}

static int all_finite(const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

clt_status clt_standardizer_from_host(clt_standardizer *out, int64_t width, const float *x_mean, const float *x_std,
                                      int64_t outputs, const float *y_mean, const float *y_std)
{
    const char *op = "clt_standardizer_from_host";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "x_mean", x_mean));
    CLT_TRY(clt__need(op, "x_std", x_std));
    if (width < 1 || outputs < 0 || (outputs > 0 && (!y_mean || !y_std)))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: width %lld, outputs %lld (and their arrays)", op,
                         (long long)width, (long long)outputs);
    if (!all_finite(x_mean, width) || !positive(x_std, width) || (outputs && (!all_finite(y_mean, outputs) ||
                                                                          !positive(y_std, outputs))))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: a mean that is not finite or a std that is not a positive "
                         "finite number", op);
    out->width = width;
    out->outputs = outputs;
    out->x_mean = malloc((size_t)width * sizeof(float));
    out->x_std = malloc((size_t)width * sizeof(float));
    if (outputs) {
        out->y_mean = malloc((size_t)outputs * sizeof(float));
        out->y_std = malloc((size_t)outputs * sizeof(float));
    }
    if (!out->x_mean || !out->x_std || (outputs && (!out->y_mean || !out->y_std))) {
        clt_standardizer_free(out);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    memcpy(out->x_mean, x_mean, (size_t)width * sizeof(float));
    memcpy(out->x_std, x_std, (size_t)width * sizeof(float));
    if (outputs) {
        memcpy(out->y_mean, y_mean, (size_t)outputs * sizeof(float));
        memcpy(out->y_std, y_std, (size_t)outputs * sizeof(float));
    }
    return CLT_OK;
}

clt_status clt_standardizer_apply_rows(const clt_standardizer *s, float *x, int64_t n, int64_t width)
{
    const char *op = "clt_standardizer_apply_rows";
    CLT_TRY(clt__need(op, "s", s));
    if (n > 0) CLT_TRY(clt__need(op, "x", x));
    if (width != s->width)
        return clt__fail(CLT_ERR_SHAPE, "%s: rows of %lld features, the standardizer was fitted on %lld", op,
                         (long long)width, (long long)s->width);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j++) x[i * width + j] = (x[i * width + j] - s->x_mean[j]) / s->x_std[j];
    return CLT_OK;
}

clt_status clt_standardizer_invert_targets(const clt_standardizer *s, float *y, int64_t n, int64_t outputs)
{
    const char *op = "clt_standardizer_invert_targets";
    CLT_TRY(clt__need(op, "s", s));
    if (s->outputs == 0) return CLT_OK;
    if (n > 0) CLT_TRY(clt__need(op, "y", y));
    if (outputs != s->outputs)
        return clt__fail(CLT_ERR_SHAPE, "%s: %lld outputs per row, the standardizer has %lld targets", op,
                         (long long)outputs, (long long)s->outputs);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < outputs; j++) y[i * outputs + j] = y[i * outputs + j] * s->y_std[j] + s->y_mean[j];
    return CLT_OK;
}

clt_status clt_standardizer_apply(const clt_standardizer *s, clt_dataset *ds)
{
    const char *op = "clt_standardizer_apply";
    CLT_TRY(clt__need(op, "s", s));
    CLT_TRY(clt__need(op, "ds", ds));
    int64_t w = ds->rows * ds->cols;
    if (w != s->width)
        return clt__fail(CLT_ERR_SHAPE, "%s: the dataset has %lld features per example, the standardizer %lld", op,
                         (long long)w, (long long)s->width);
    int targets = s->outputs > 0 && ds->task == CLT_TASK_REGRESS && ds->values;
    if (targets && ds->outputs != s->outputs)
        return clt__fail(CLT_ERR_SHAPE, "%s: the dataset has %lld targets per example, the standardizer %lld", op,
                         (long long)ds->outputs, (long long)s->outputs);
    if (!ds->x && ds->images) {
        float *x = malloc((size_t)(ds->n ? ds->n : 1) * (size_t)w * sizeof(float));
        if (!x) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld examples", op,
                                 (long long)ds->n);
        for (int64_t i = 0; i < ds->n; i++)
            for (int64_t j = 0; j < w; j++) x[i * w + j] = clt__dataset_feature(ds, i, j);
        free(ds->images);
        ds->images = NULL;
        ds->x = x;
    }
    if (ds->x) CLT_TRY(clt_standardizer_apply_rows(s, ds->x, ds->n, w));
    if (targets)
        for (int64_t i = 0; i < ds->n; i++)
            for (int64_t j = 0; j < s->outputs; j++)
                ds->values[i * s->outputs + j] = (ds->values[i * s->outputs + j] - s->y_mean[j]) / s->y_std[j];
    return CLT_OK;
}
