/* Printing in the chapter's style: tensor([[1., 1., 1.]], device='gpu:0'). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "tensor_internal.h"
#include "cltensor/half.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE 3

typedef struct out_buf {
    char *p;
    size_t len, used;
    int overflow;
} out_buf;

static void put(out_buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->used < o->len ? o->len - o->used : 0;
    int n = vsnprintf(o->p + (o->used < o->len ? o->used : o->len - 1), room ? room : 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) o->overflow = 1;
    else o->used += (size_t)n;
}

typedef struct fmt_ctx {
    const clt_tensor *t;
    const void *data;
    int integral; /* every float is a whole number: print "1." */
    int summarise;
} fmt_ctx;

static void put_value(out_buf *o, const fmt_ctx *c, int64_t i)
{
    if (c->t->dtype == CLT_INT32) {
        put(o, "%d", ((const int32_t *)c->data)[i]);
        return;
    }
    float v = ((const float *)c->data)[i];
    if (isnan(v)) put(o, "nan");
    else if (isinf(v)) put(o, v < 0 ? "-inf" : "inf");
    else if (c->integral) put(o, "%.0f.", v);
    else put(o, "%.4f", v);
}

static void put_dim(out_buf *o, const fmt_ctx *c, int dim, int64_t base, int indent)
{
    const clt_tensor *t = c->t;
    int64_t n = t->shape[dim], stride = 1;
    for (int d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
    /* As PyTorch: blocks of three or more dimensions are set apart by blank lines. */
    int blank = t->ndim - dim - 2;
    put(o, "[");
    for (int64_t i = 0; i < n && !o->overflow; i++) {
        if (c->summarise && n > 2 * EDGE && i == EDGE) {
            put(o, "...,");
            if (dim == t->ndim - 1) put(o, " ");
            else put(o, "\n%.*s%*s", blank, "\n\n\n\n\n\n\n", indent + 1, "");
            i = n - EDGE;
        }
        if (dim == t->ndim - 1) put_value(o, c, base + i);
        else put_dim(o, c, dim + 1, base + i * stride, indent + 1);
        if (i + 1 < n) {
            if (dim == t->ndim - 1) put(o, ", ");
            else put(o, ",\n%.*s%*s", blank, "\n\n\n\n\n\n\n", indent + 1, "");
        }
    }
    put(o, "]");
}

clt_status clt_tensor_format(const clt_tensor *t, char *buf, size_t len)
{
    CLT_TRY(clt__need("clt_tensor_format", "t", t));
    if (!buf || len == 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tensor_format: buf is NULL or empty");
    size_t nbytes = clt_tensor_nbytes(t);
    void *data = malloc(nbytes ? nbytes : 1);
    if (!data) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory reading a tensor to print");
    clt_status s = clt__read_host(t, data, nbytes, "clt_tensor_format");
    if (s != CLT_OK) {
        free(data);
        return s;
    }
    if (t->dtype == CLT_FLOAT16) {
        /* Printed as the float32 values they widen to. */
        float *w = malloc((size_t)t->numel * sizeof(float) + 1);
        if (!w) {
            free(data);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory reading a tensor to print");
        }
        for (int64_t i = 0; i < t->numel; i++) w[i] = clt_half_to_float(((const uint16_t *)data)[i]);
        free(data);
        data = w;
    }
    /* Long dimensions are summarised even when empty: a (2^60, 0) tensor
     * prints six rows, not 2^60. */
    fmt_ctx c = {t, data, t->dtype != CLT_INT32, t->numel > SUMMARY_THRESHOLD};
    for (int d = 0; d < t->ndim; d++) c.summarise |= t->shape[d] > SUMMARY_THRESHOLD;
    for (int64_t i = 0; c.integral && i < t->numel; i++) {
        float v = ((const float *)data)[i];
        c.integral = isfinite(v) && v == floorf(v) && fabsf(v) < 1e8f;
    }
    out_buf o = {buf, len, 0, 0};
    put(&o, "tensor(");
    if (t->ndim == 0) put_value(&o, &c, 0);
    else put_dim(&o, &c, 0, 0, 7);
    put(&o, ", device='%s'", clt__slot_get(t->st->slot)->name);
    if (t->dtype != CLT_FLOAT32) put(&o, ", dtype=%s", clt_dtype_name(t->dtype));
    put(&o, ")");
    free(data);
    if (o.overflow)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tensor_format: buffer of %zu bytes is too small", len);
    return CLT_OK;
}

clt_status clt_tensor_print(const clt_tensor *t, FILE *out)
{
    CLT_TRY(clt__need("clt_tensor_print", "out", out));
    size_t len = 4096;
    for (;;) {
        char *buf = malloc(len);
        if (!buf) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory printing a tensor");
        clt_status s = clt_tensor_format(t, buf, len);
        if (s == CLT_OK) fprintf(out, "%s\n", buf);
        free(buf);
        if (s != CLT_ERR_INVALID_ARGUMENT || !t || len > (64u << 20)) return s;
        len *= 4;
    }
}
