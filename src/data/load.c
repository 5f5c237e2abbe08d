/* Datasets from files: CSV, NumPy .npy/.npz and IDX (clt_dataset_load,
 * clt_dataset_load_idx). The readers in src/io give fields or arrays; this
 * file turns them into features and targets, infers the task and maps class
 * labels to ids. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "../io/csv.h"
#include "../io/npy.h"
#include "../io/slurp.h"
#include "cltensor/data.h"
#include "cltensor/io.h"
#include "dataset.h"

/* Identity ids for integer labels 0..IDENTITY_MAX; others are mapped. */
#define IDENTITY_MAX 65535

clt_data_options clt_data_default_options(void)
{
    clt_data_options o = {.target = NULL, .delimiter = 0, .header = -1, .x_name = NULL, .y_name = NULL,
                          .labels_path = NULL, .task = -1, .max_classes = 0, .like = NULL, .no_target = 0};
    return o;
}

/* ---- targets, shared by every format ---- */

/* n labels of one target column: each a number (num, when is_num) and a text. */
typedef struct labels {
    int64_t n;
    double *num;
    char **text;     /* the key of each label: a canonical integer, else the text as written */
    char *is_num;
    const char *path;
    const int64_t *lines; /* CSV: the line of each label; NULL for arrays */
    int64_t col;          /* CSV: the column (1-based); 0 for arrays */
    int typed_integer;    /* an array of an integer or bool type */
} labels;

static void labels_free(labels *lb)
{
    if (lb->text)
        for (int64_t i = 0; i < lb->n; i++) free(lb->text[i]);
    free(lb->text);
    free(lb->num);
    free(lb->is_num);
}

/* Where label i is, for messages: "line 5, column 3" or "y[4]". */
static void where(char *buf, size_t len, const labels *lb, int64_t i)
{
    if (lb->lines)
        snprintf(buf, len, "line %lld, column %lld", (long long)lb->lines[i], (long long)lb->col);
    else
        snprintf(buf, len, "target %lld", (long long)i);
}

static int is_integer(double v) { return isfinite(v) && v == floor(v) && fabs(v) < 9e15; }

/* A field of the file as a message shows it: at most 40 bytes, a line break,
 * tab or other control byte escaped (\n, \r, \t, \xNN) so that the message
 * stays one line, "..." after a cut. Returns buf. */
static const char *shown(char *buf, size_t len, const char *field)
{
    size_t o = 0, i = 0;
    for (; field[i] && i < 40 && o + 8 < len; i++) {
        unsigned char c = (unsigned char)field[i];
        if (c == '\n') o += (size_t)snprintf(buf + o, len - o, "\\n");
        else if (c == '\r') o += (size_t)snprintf(buf + o, len - o, "\\r");
        else if (c == '\t') o += (size_t)snprintf(buf + o, len - o, "\\t");
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    if (field[i] && o + 4 <= len) o += (size_t)snprintf(buf + o, len - o, "...");
    buf[o < len ? o : len - 1] = '\0';
    return buf;
}

/* After "'1,5' is not a number": a hint when the field reads as a number with
 * its comma a decimal point (a decimal-comma locale's file). */
static const char *comma_hint(const char *field)
{
    const char *comma = strchr(field, ',');
    if (!comma || strchr(comma + 1, ',') || strlen(field) >= 64) return "";
    char dotted[64];
    snprintf(dotted, sizeof dotted, "%s", field);
    dotted[comma - field] = '.';
    double v;
    return clt__csv_number(dotted, &v) ? " (a decimal comma? numbers are read with a decimal point: 1.5, not 1,5)"
                                       : "";
}

static clt_status labels_init(labels *lb, int64_t n, const char *path, const int64_t *lines, int64_t col)
{
    memset(lb, 0, sizeof *lb);
    lb->n = n;
    lb->path = path;
    lb->lines = lines;
    lb->col = col;
    lb->num = calloc((size_t)n, sizeof *lb->num);
    lb->text = calloc((size_t)n, sizeof *lb->text);
    lb->is_num = calloc((size_t)n, 1);
    if (!lb->num || !lb->text || !lb->is_num) {
        labels_free(lb);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld labels", path, (long long)n);
    }
    return CLT_OK;
}

/* Sets label i from a number (text NULL) or a field's text. */
static clt_status labels_set(labels *lb, int64_t i, const char *text, double v)
{
    char buf[64];
    int num = text ? clt__csv_number(text, &v) : 1;
    if (num && is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)v);
        text = buf;
    } else if (!text) {
        snprintf(buf, sizeof buf, "%.17g", v);
        text = buf;
    }
    lb->is_num[i] = (char)num;
    lb->num[i] = num ? v : 0;
    lb->text[i] = strdup(text);
    if (!lb->text[i]) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
    return CLT_OK;
}

static int cmp_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static const labels *sort_ctx;
static int cmp_num_idx(const void *a, const void *b)
{
    double x = sort_ctx->num[*(const int64_t *)a], y = sort_ctx->num[*(const int64_t *)b];
    return (x > y) - (x < y);
}

/* Decides the task and fills out's targets from one column of labels. */
static clt_status set_targets(clt_dataset *out, labels *lb, const clt_data_options *opt)
{
    int64_t n = lb->n;
    int all_num = 1, all_int = 1;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        all_num &= lb->is_num[i];
        all_int &= lb->is_num[i] && is_integer(lb->num[i]);
        if (lb->is_num[i]) {
            lo = fmin(lo, lb->num[i]);
            hi = fmax(hi, lb->num[i]);
        }
    }
    /* Distinct keys. */
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
    memcpy(sorted, lb->text, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_text);
    int64_t distinct = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || strcmp(sorted[i], sorted[i - 1]) != 0) sorted[distinct++] = sorted[i];
    int task;
    if (opt->like)
        task = opt->like->task;
    else if (opt->task == CLT_TASK_CLASSIFY || opt->task == CLT_TASK_REGRESS)
        task = opt->task;
    else {
        int64_t most = opt->max_classes > 0 ? opt->max_classes : 50;
        task = !all_num || (all_int && distinct <= most && (lb->typed_integer || distinct <= 2 || distinct * 2 <= n))
                   ? CLT_TASK_CLASSIFY
                                                                                                : CLT_TASK_REGRESS;
    }
    clt_status s = CLT_OK;
    char at[96];
    if (task == CLT_TASK_REGRESS) {
        for (int64_t i = 0; i < n && s == CLT_OK; i++) {
            where(at, sizeof at, lb, i);
            char text[200];
            if (!lb->is_num[i])
                s = clt__fail(CLT_ERR_FORMAT, "%s: %s: '%s' is not a number (the target of a regression)%s", lb->path,
                              at, shown(text, sizeof text, lb->text[i]), comma_hint(lb->text[i]));
            else if (!isfinite(lb->num[i]) || !isfinite((float)lb->num[i]))
                s = clt__fail(CLT_ERR_FORMAT, "%s: %s: the target %g is not a finite float32 number", lb->path, at,
                              lb->num[i]);
        }
        if (s == CLT_OK && opt->like && opt->like->outputs != 1)
            s = clt__fail(CLT_ERR_FORMAT, "%s: one target per example, the training data has %lld", lb->path,
                          (long long)opt->like->outputs);
        if (s == CLT_OK) {
            out->values = malloc((size_t)n * sizeof(float));
            if (!out->values) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
        }
        for (int64_t i = 0; s == CLT_OK && i < n; i++) out->values[i] = (float)lb->num[i];
        out->task = CLT_TASK_REGRESS;
        out->outputs = 1;
        free(sorted);
        return s;
    }
    /* A class's name goes into a saved model's metadata, which is JSON: UTF-8 text only. */
    for (int64_t d = 0; d < distinct; d++) {
        json_t *valid = json_string(sorted[d]);
        json_decref(valid);
        if (valid) continue;
        int64_t i = 0;
        while (i < n - 1 && strcmp(lb->text[i], sorted[d]) != 0) i++;
        where(at, sizeof at, lb, i);
        free(sorted);
        return clt__fail(CLT_ERR_FORMAT, "%s: %s: the class label is not valid UTF-8 text", lb->path, at);
    }
    out->task = CLT_TASK_CLASSIFY;
    out->classes = malloc((size_t)n * sizeof(int32_t));
    if (!out->classes) {
        free(sorted);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
    }
    if (opt->like) {
        /* The training set's names, sorted with their ids, looked up by key. */
        const clt_dataset *like = opt->like;
        int k = like->num_classes;
        char **names = calloc((size_t)(k ? k : 1), sizeof *names);
        char **generated = calloc((size_t)(k ? k : 1), sizeof *generated);
        s = names && generated ? CLT_OK : clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
        for (int c = 0; s == CLT_OK && c < k; c++) {
            if (like->class_names) {
                names[c] = like->class_names[c];
            } else {
                char num[16];
                snprintf(num, sizeof num, "%d", c);
                generated[c] = names[c] = strdup(num);
                if (!names[c]) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
            }
        }
        for (int64_t i = 0; s == CLT_OK && i < n; i++) {
            int found = -1;
            for (int c = 0; c < k && found < 0; c++)
                if (strcmp(names[c], lb->text[i]) == 0) found = c;
            if (found < 0) {
                char text[200];
                where(at, sizeof at, lb, i);
                s = clt__fail(CLT_ERR_FORMAT, "%s: %s: class '%s' does not occur in the training data (%d classes)",
                              lb->path, at, shown(text, sizeof text, lb->text[i]), k);
            } else {
                out->classes[i] = found;
            }
        }
        for (int c = 0; generated && c < k; c++) free(generated[c]);
        free(generated);
        free(names);
        if (s == CLT_OK) {
            out->num_classes = k;
            if (like->class_names) {
                out->class_names = clt__names_copy((const char *const *)like->class_names, k);
                if (!out->class_names) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
            }
        }
        free(sorted);
        return s;
    }
    if (distinct > INT32_MAX / 2) {
        free(sorted);
        return clt__fail(CLT_ERR_FORMAT, "%s: %lld distinct class labels", lb->path, (long long)distinct);
    }
    int identity = all_int && lo >= 0 && hi <= IDENTITY_MAX;
    int k = identity ? (int)hi + 1 : (int)distinct;
    out->num_classes = k;
    out->class_names = calloc((size_t)k, sizeof *out->class_names);
    if (!out->class_names) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
    if (s == CLT_OK && identity) {
        for (int c = 0; c < k && s == CLT_OK; c++) {
            char num[16];
            snprintf(num, sizeof num, "%d", c);
            out->class_names[c] = strdup(num);
            if (!out->class_names[c]) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
        }
        for (int64_t i = 0; i < n; i++) out->classes[i] = (int32_t)lb->num[i];
    } else if (s == CLT_OK) {
        /* Sorted keys: by value when every label is a number, else byte-wise. */
        if (all_num) {
            int64_t *idx = malloc((size_t)distinct * sizeof *idx);
            if (!idx) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
            /* an index of a label holding each distinct key */
            for (int64_t d = 0, i = 0; s == CLT_OK && d < distinct; d++) {
                for (i = 0; i < n && strcmp(lb->text[i], sorted[d]) != 0; i++) continue;
                idx[d] = i;
            }
            if (s == CLT_OK) {
                sort_ctx = lb;
                qsort(idx, (size_t)distinct, sizeof *idx, cmp_num_idx);
                for (int64_t d = 0; d < distinct; d++) sorted[d] = lb->text[idx[d]];
            }
            free(idx);
        }
        for (int c = 0; c < k && s == CLT_OK; c++) {
            out->class_names[c] = strdup(sorted[c]);
            if (!out->class_names[c]) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", lb->path);
        }
        /* Each label's id: a binary search when byte-wise sorted, else a scan of the few classes. */
        for (int64_t i = 0; s == CLT_OK && i < n; i++) {
            int id = -1;
            if (!all_num) {
                char **hit = bsearch(&lb->text[i], out->class_names, (size_t)k, sizeof(char *), cmp_text);
                id = hit ? (int)(hit - out->class_names) : -1;
            } else {
                for (int c = 0; c < k && id < 0; c++)
                    if (strcmp(out->class_names[c], lb->text[i]) == 0) id = c;
            }
            out->classes[i] = id;
        }
    }
    free(sorted);
    return s;
}

/* ---- CSV ---- */

static clt_status find_target(const clt__csv *c, const char *path, const char *target, int64_t *col)
{
    if (!target || !*target) {
        *col = c->ncols - 1;
        return CLT_OK;
    }
    if (c->has_header)
        for (int64_t j = 0; j < c->ncols; j++)
            if (strcmp(clt__csv_field(c, -1, j), target) == 0) {
                *col = j;
                return CLT_OK;
            }
    char *end;
    long long v = strtoll(target, &end, 10);
    if (*end == 0 && end != target && v >= -c->ncols && v < c->ncols) {
        *col = v < 0 ? c->ncols + v : v;
        return CLT_OK;
    }
    char names[400] = "", name[200], want[200];
    size_t used = 0;
    for (int64_t j = 0; c->has_header && j < c->ncols && used + 4 < sizeof names; j++) {
        size_t room = sizeof names - used;
        int n = snprintf(names + used, room, "%s'%s'", j ? ", " : "", shown(name, sizeof name, clt__csv_field(c, -1, j)));
        used += n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    }
    shown(want, sizeof want, target);
    if (c->has_header)
        return clt__fail(CLT_ERR_FORMAT, "%s: no target column '%s': the header names %s (or give an index 0..%lld)",
                         path, want, names, (long long)c->ncols - 1);
    return clt__fail(CLT_ERR_FORMAT, "%s: no target column '%s': the file has no header, so give an index 0..%lld "
                     "(-1 the last)", path, want, (long long)c->ncols - 1);
}

static clt_status from_csv(clt_dataset *out, const char *path, const uint8_t *data, size_t len,
                           const clt_data_options *opt)
{
    clt__csv c;
    CLT_TRY(clt__csv_parse(&c, path, data, len, opt->delimiter, opt->header));
    int64_t target = -1;
    clt_status s = opt->no_target ? CLT_OK : find_target(&c, path, opt->target, &target);
    int64_t width = opt->no_target ? c.ncols : c.ncols - 1;
    if (s == CLT_OK && width < 1)
        s = clt__fail(CLT_ERR_FORMAT, "%s: one column, the target: no feature columns", path);
    /* A test file of another width is that, before any field or class of it is read. */
    if (s == CLT_OK && opt->like && width != opt->like->rows * opt->like->cols)
        s = clt__fail(CLT_ERR_FORMAT, "%s: %lld features per example, the training data has %lld", path,
                      (long long)width, (long long)(opt->like->rows * opt->like->cols));
    int64_t numel = 0, bytes = 0;
    if (s == CLT_OK && clt__shape_bytes(2, (int64_t[]){c.nrows, width}, 4, &numel, &bytes) != 0)
        s = clt__fail(CLT_ERR_FORMAT, "%s: too many values", path);
    if (s == CLT_OK) {
        out->n = c.nrows;
        out->rows = 1;
        out->cols = width;
        out->x = malloc(bytes ? (size_t)bytes : 1);
        if (!out->x) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    }
    for (int64_t i = 0; s == CLT_OK && i < c.nrows; i++) {
        int64_t k = 0;
        for (int64_t j = 0; j < c.ncols && s == CLT_OK; j++) {
            if (j == target) continue;
            const char *f = clt__csv_field(&c, i, j);
            double v;
            char col[260], name[200], text[200];
            if (c.has_header)
                snprintf(col, sizeof col, "column %lld (%s)", (long long)j + 1,
                         shown(name, sizeof name, clt__csv_field(&c, -1, j)));
            else
                snprintf(col, sizeof col, "column %lld", (long long)j + 1);
            if (!*f)
                s = clt__fail(CLT_ERR_FORMAT, "%s: line %lld, %s: an empty field (missing values are not read)", path,
                              (long long)c.lines[i], col);
            else if (!clt__csv_number(f, &v))
                s = clt__fail(CLT_ERR_FORMAT, "%s: line %lld, %s: '%s' is not a number%s", path,
                              (long long)c.lines[i], col, shown(text, sizeof text, f), comma_hint(f));
            else if (!isfinite(v) || !isfinite((float)v))
                s = clt__fail(CLT_ERR_FORMAT, "%s: line %lld, %s: %s is not a finite float32 number", path,
                              (long long)c.lines[i], col, shown(text, sizeof text, f));
            else
                out->x[i * width + k++] = (float)v;
        }
    }
    if (s == CLT_OK && target >= 0) {
        labels lb;
        s = labels_init(&lb, c.nrows, path, c.lines, target + 1);
        for (int64_t i = 0; s == CLT_OK && i < c.nrows; i++) {
            const char *f = clt__csv_field(&c, i, target);
            if (!*f)
                s = clt__fail(CLT_ERR_FORMAT, "%s: line %lld, column %lld: an empty target", path,
                              (long long)c.lines[i], (long long)target + 1);
            else
                s = labels_set(&lb, i, f, 0);
        }
        if (s == CLT_OK) s = set_targets(out, &lb, opt);
        if (lb.n) labels_free(&lb);
    }
    clt__csv_free(&c);
    return s;
}

/* ---- arrays (.npy, .npz, IDX) ---- */

static clt_status features_from_array(clt_dataset *out, const char *path, const clt__array *x)
{
    if (x->ndim < 1 || x->shape[0] < 1)
        return clt__fail(CLT_ERR_FORMAT, "%s: the features' array has no examples (shape of %d dimensions, first %lld)",
                         path, x->ndim, x->ndim ? (long long)x->shape[0] : 0LL);
    int64_t n = x->shape[0], w = x->numel / n;
    if (w < 1) return clt__fail(CLT_ERR_FORMAT, "%s: examples of no values", path);
    out->n = n;
    out->rows = x->ndim >= 3 ? x->shape[1] : 1;
    out->cols = x->ndim >= 3 ? w / x->shape[1] : w;
    if (x->ndim > 3 && x->ndim - 1 <= CLT_DATASET_MAX_DIMS) {
        out->example_ndim = x->ndim - 1;
        memcpy(out->example_shape, x->shape + 1, (size_t)(x->ndim - 1) * sizeof(int64_t));
    }
    if (x->kind == 'u' && x->itemsize == 1) {
        out->images = malloc((size_t)x->numel);
        if (!out->images) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        memcpy(out->images, x->data, (size_t)x->numel);
        return CLT_OK;
    }
    out->x = malloc((size_t)x->numel * sizeof(float));
    if (!out->x) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    for (int64_t i = 0; i < x->numel; i++) {
        double v = clt__array_get(x, i);
        if (!isfinite(v) || !isfinite((float)v))
            return clt__fail(CLT_ERR_FORMAT, "%s: example %lld, feature %lld is %g (not a finite float32 number)", path,
                             (long long)(i / w), (long long)(i % w), v);
        out->x[i] = (float)v;
    }
    return CLT_OK;
}

static clt_status targets_from_array(clt_dataset *out, const char *path, const clt__array *y,
                                     const clt_data_options *opt)
{
    if (y->ndim < 1 || y->ndim > 2 || y->shape[0] != out->n)
        return clt__fail(CLT_ERR_FORMAT, "%s: targets of shape (%lld%s) for %lld examples; (n) or (n, K) is read", path,
                         y->ndim ? (long long)y->shape[0] : 0LL, y->ndim == 2 ? ", ..." : y->ndim > 2 ? ", ..., ..." : "",
                         (long long)out->n);
    int64_t k = y->ndim == 2 ? y->shape[1] : 1;
    if (k < 1) return clt__fail(CLT_ERR_FORMAT, "%s: targets with no values", path);
    int force_regress = opt->like ? opt->like->task == CLT_TASK_REGRESS : opt->task == CLT_TASK_REGRESS;
    if (k > 1 || force_regress) {
        if (opt->like && opt->like->task != CLT_TASK_REGRESS)
            return clt__fail(CLT_ERR_FORMAT, "%s: %lld targets per example, the training data has class labels", path,
                             (long long)k);
        if (opt->task == CLT_TASK_CLASSIFY && !opt->like)
            return clt__fail(CLT_ERR_FORMAT, "%s: %lld targets per example cannot be class labels", path,
                             (long long)k);
        if (opt->like && opt->like->outputs != k)
            return clt__fail(CLT_ERR_FORMAT, "%s: %lld targets per example, the training data has %lld", path,
                             (long long)k, (long long)opt->like->outputs);
        out->values = malloc((size_t)y->numel * sizeof(float));
        if (!out->values) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        for (int64_t i = 0; i < y->numel; i++) {
            double v = clt__array_get(y, i);
            if (!isfinite(v) || !isfinite((float)v))
                return clt__fail(CLT_ERR_FORMAT, "%s: example %lld, target %lld is %g (not a finite float32 number)",
                                 path, (long long)(i / k), (long long)(i % k), v);
            out->values[i] = (float)v;
        }
        out->task = CLT_TASK_REGRESS;
        out->outputs = k;
        return CLT_OK;
    }
    labels lb;
    CLT_TRY(labels_init(&lb, out->n, path, NULL, 0));
    lb.typed_integer = y->kind != 'f';
    clt_status s = CLT_OK;
    for (int64_t i = 0; s == CLT_OK && i < out->n; i++) {
        double v = clt__array_get(y, i);
        if (!isfinite(v))
            s = clt__fail(CLT_ERR_FORMAT, "%s: target %lld is %g (not a finite number)", path, (long long)i, v);
        else
            s = labels_set(&lb, i, NULL, v);
    }
    if (s == CLT_OK) s = set_targets(out, &lb, opt);
    labels_free(&lb);
    return s;
}

/* An IDX file's contents seen as an array (borrowing its data). */
static clt__array idx_view(const clt_idx *idx)
{
    clt__array a;
    memset(&a, 0, sizeof a);
    a.kind = idx->type == CLT_IDX_UBYTE ? 'u' : idx->type == CLT_IDX_FLOAT || idx->type == CLT_IDX_DOUBLE ? 'f' : 'i';
    a.itemsize = idx->elem_size;
    a.ndim = idx->ndim;
    memcpy(a.shape, idx->dims, sizeof idx->dims);
    a.numel = idx->elem_size ? (int64_t)(idx->nbytes / (size_t)idx->elem_size) : 0;
    a.data = idx->data;
    a.borrowed = 1;
    return a;
}

/* Checks a test set's (or prediction input's) width against its training set. */
static clt_status like_width(const clt_dataset *out, const char *path, const clt_data_options *opt)
{
    if (!opt->like) return CLT_OK;
    int64_t w = out->rows * out->cols, want = opt->like->rows * opt->like->cols;
    if (w != want)
        return clt__fail(CLT_ERR_FORMAT, "%s: %lld features per example, the training data has %lld", path,
                         (long long)w, (long long)want);
    return CLT_OK;
}

static clt_status load_idx(clt_dataset *out, const char *images_path, const char *labels_path,
                           const clt_data_options *opt)
{
    clt_idx im, lb;
    memset(&lb, 0, sizeof lb);
    CLT_TRY(clt_idx_read(images_path, &im));
    clt_status s = labels_path ? clt_idx_read(labels_path, &lb) : CLT_OK;
    if (s != CLT_OK) {
        clt_idx_free(&im);
        return s;
    }
    if (im.ndim < 2)
        s = clt__fail(CLT_ERR_FORMAT, "%s: an example file has 2 dimensions or more (n, ...), this one %d",
                      images_path, im.ndim);
    else if (labels_path && lb.ndim > 2)
        s = clt__fail(CLT_ERR_FORMAT, "%s: a label file has 1 dimension (or 2 for regression targets), this one %d",
                      labels_path, lb.ndim);
    else if (labels_path && im.dims[0] != lb.dims[0])
        s = clt__fail(CLT_ERR_FORMAT, "%s has %lld images but %s has %lld labels", images_path,
                      (long long)im.dims[0], labels_path, (long long)lb.dims[0]);
    clt__array xa = idx_view(&im), ya = idx_view(&lb);
    if (s == CLT_OK) s = features_from_array(out, images_path, &xa);
    if (s == CLT_OK) s = like_width(out, images_path, opt);
    if (s == CLT_OK && labels_path) {
        if (lb.type == CLT_IDX_UBYTE && lb.ndim == 1 && !opt->like && opt->task != CLT_TASK_REGRESS) {
            /* Byte labels are class ids as they are (Fashion-MNIST). */
            out->labels = lb.data;
            lb.data = NULL;
            for (int64_t i = 0; i < out->n; i++)
                if (out->labels[i] + 1 > out->num_classes) out->num_classes = out->labels[i] + 1;
        } else {
            s = targets_from_array(out, labels_path, &ya, opt);
        }
    }
    clt_idx_free(&im);
    clt_idx_free(&lb);
    return s;
}

clt_status clt_dataset_load_idx(clt_dataset *out, const char *images_path, const char *labels_path)
{
    const char *op = "clt_dataset_load_idx";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "images_path", images_path));
    CLT_TRY(clt__need(op, "labels_path", labels_path));
    clt_data_options o = clt_data_default_options();
    clt_status s = load_idx(out, images_path, labels_path, &o);
    if (s != CLT_OK) clt_dataset_free(out);
    return s;
}

static clt_status from_arrays(clt_dataset *out, const char *xpath, const clt__array *x, const char *ypath,
                              const clt__array *y, const clt_data_options *opt)
{
    CLT_TRY(features_from_array(out, xpath, x));
    CLT_TRY(like_width(out, xpath, opt));
    if (y) CLT_TRY(targets_from_array(out, ypath, y, opt));
    return CLT_OK;
}

static int looks_idx(const uint8_t *d, size_t len)
{
    static const uint8_t types[] = {0x08, 0x09, 0x0b, 0x0c, 0x0d, 0x0e};
    return len >= 4 && d[0] == 0 && d[1] == 0 && memchr(types, d[2], sizeof types) && d[3] >= 1 &&
           d[3] <= CLT_IDX_MAX_DIMS;
}

static clt_status load_any(clt_dataset *out, const char *path, const clt_data_options *opt)
{
    uint8_t *data;
    size_t len;
    CLT_TRY(clt__slurp(path, 1, &data, &len));
    clt_status s;
    if (clt__npy_is_npy(data, len)) {
        clt__array x, y;
        memset(&y, 0, sizeof y);
        s = clt__npy_parse(&x, path, data, len);
        free(data);
        data = NULL;
        int want_y = !opt->no_target && opt->labels_path;
        if (s == CLT_OK && !opt->no_target && !opt->labels_path)
            s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: a .npy file holds the features alone; use a .npz of x and "
                          "y, or give the targets' file too (labels_path)", path);
        if (s == CLT_OK && want_y) {
            uint8_t *yd;
            size_t ylen;
            s = clt__slurp(opt->labels_path, 1, &yd, &ylen);
            if (s == CLT_OK) {
                s = clt__npy_parse(&y, opt->labels_path, yd, ylen);
                free(yd);
            }
        }
        if (s == CLT_OK) s = from_arrays(out, path, &x, opt->labels_path, want_y ? &y : NULL, opt);
        clt__array_free(&x);
        clt__array_free(&y);
    } else if (clt__npy_is_zip(data, len)) {
        const char *xn = opt->x_name ? opt->x_name : "x", *yn = opt->y_name ? opt->y_name : "y";
        clt__array x, y;
        memset(&y, 0, sizeof y);
        s = clt__npz_parse(&x, path, data, len, xn);
        if (s == CLT_OK && !opt->no_target) s = clt__npz_parse(&y, path, data, len, yn);
        free(data);
        data = NULL;
        char ylabel[600];
        snprintf(ylabel, sizeof ylabel, "%s (array %s)", path, yn);
        if (s == CLT_OK) s = from_arrays(out, path, &x, ylabel, opt->no_target ? NULL : &y, opt);
        clt__array_free(&x);
        clt__array_free(&y);
    } else if (looks_idx(data, len)) {
        free(data);
        data = NULL;
        if (!opt->no_target && !opt->labels_path)
            s = clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: an IDX file holds the examples; give the labels' IDX file "
                          "too (labels_path)", path);
        else
            s = load_idx(out, path, opt->no_target ? NULL : opt->labels_path, opt);
    } else {
        if (len == 0) s = clt__fail(CLT_ERR_FORMAT, "%s: an empty file", path);
        else s = from_csv(out, path, data, len, opt);
    }
    if (s == CLT_OK && out->x == NULL && out->images == NULL) s = clt__fail(CLT_ERR_FORMAT, "%s: no features", path);
    if (s == CLT_OK) s = like_width(out, path, opt);
    free(data);
    return s;
}

clt_status clt_dataset_load(clt_dataset *out, const char *path, const clt_data_options *opt)
{
    const char *op = "clt_dataset_load";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "path", path));
    clt_data_options def = clt_data_default_options();
    if (!opt) opt = &def;
    if (opt->task < -1 || opt->task > CLT_TASK_REGRESS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: task %d (-1 to infer, CLT_TASK_CLASSIFY or CLT_TASK_REGRESS)",
                         op, opt->task);
    clt_status s = load_any(out, path, opt);
    if (s != CLT_OK) clt_dataset_free(out);
    return s;
}
