/* clt_model_predict: batched inference with the model's preprocessing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "cltensor/trainer.h"

#define PREDICT_BATCH 1024

/* Softmax of each of the rows of k values, in place (in double, shifted by the row's largest). */
static void softmax_rows(float *y, int64_t rows, int64_t k)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = y + i * k;
        double top = r[0], sum = 0;
        for (int64_t j = 1; j < k; j++) top = fmax(top, r[j]);
        for (int64_t j = 0; j < k; j++) sum += exp((double)r[j] - top);
        for (int64_t j = 0; j < k; j++) r[j] = (float)(exp((double)r[j] - top) / sum);
    }
}

static void argmax_rows(const float *y, int64_t rows, int64_t k, int32_t *classes)
{
    for (int64_t i = 0; i < rows; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (y[i * k + j] > y[i * k + best]) best = j;
        classes[i] = (int32_t)best;
    }
}

/* One batch of b rows at x: standardised into buf, forward, outputs into out. */
static clt_status predict_batch(clt_model *m, const clt_standardizer *st, const float *x, int64_t b, int64_t width,
                                float *buf, float *out, int64_t k)
{
    memcpy(buf, x, (size_t)(b * width) * sizeof *buf);
    if (st) CLT_TRY(clt_standardizer_apply_rows(st, buf, b, width));
    int64_t shape[2] = {b, width};
    clt_tensor *xt = NULL, *y = NULL;
    clt_status s = clt_from_host(&xt, clt_model_device(m), CLT_FLOAT32, 2, shape, buf);
    if (s == CLT_OK) s = clt_model_forward(m, xt, &y);
    if (s == CLT_OK) s = clt_to_host(y, out, (size_t)(b * k) * sizeof *out);
    clt_tensor_release(y);
    clt_tensor_release(xt);
    return s;
}

clt_status clt_model_predict(clt_model *model, const clt_model_description *d, const float *x, int64_t n,
                             int64_t width, float *out, int32_t *classes)
{
    const char *op = "clt_model_predict";
    CLT_TRY(clt__need(op, "model", model));
    CLT_TRY(clt__need(op, "x", x));
    CLT_TRY(clt__need(op, "out", out));
    if (n < 1) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld rows (at least 1)", op, (long long)n);
    int64_t want = clt_model_num_inputs(model), k = clt_model_num_outputs(model), total;
    if (width != want)
        return clt__fail(CLT_ERR_SHAPE, "%s: the input has %lld features per row but the model takes %lld", op,
                         (long long)width, (long long)want);
    if (clt__mul_i64(n, width, &total) != 0 || clt__mul_i64(n, k, &total) != 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld rows of %lld values overflow", op, (long long)n,
                         (long long)width);
    const clt_standardizer *st = d && d->has_standardizer ? &d->standardizer : NULL;
    int64_t rows = n < PREDICT_BATCH ? n : PREDICT_BATCH;
    float *buf = malloc((size_t)(rows * width) * sizeof *buf);
    if (!buf) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld rows", op, (long long)rows);
    int was_training = clt_model_training(model);
    clt_model_set_training(model, 0);
    clt_status s = CLT_OK;
    for (int64_t i = 0; s == CLT_OK && i < n; i += rows) {
        int64_t b = n - i < rows ? n - i : rows;
        s = predict_batch(model, st, x + i * width, b, width, buf, out + i * k, k);
    }
    clt_model_set_training(model, was_training);
    free(buf);
    if (s != CLT_OK) return s;
    if (!d || d->task == CLT_TASK_CLASSIFY) {
        if (d) softmax_rows(out, n, k);
        if (classes) argmax_rows(out, n, k, classes);
    } else if (st) {
        s = clt_standardizer_invert_targets(st, out, n, k);
    }
    return s;
}
