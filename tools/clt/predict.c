/* clt predict: a saved model's predictions for the rows of a data file, as CSV. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"
#include "train_options.h"

static const char *predict_usage =
    "usage: clt predict --load MODEL --input FILE [--output FILE] [--target COLUMN] [--device D]\n"
    "                   [--delimiter C] [--header yes|no|auto] [--x-name NAME]\n"
    "\n"
    "Writes a CSV of MODEL's predictions for each row of FILE (CSV, .npy, .npz or IDX):\n"
    "a header, then per row the predicted class (by its name in the training data)\n"
    "and each class's probability, or the predicted value(s) of a regression. The\n"
    "model's stored standardization is applied. FILE holds the features alone or\n"
    "the training file's layout, whose target column is then ignored.\n"
    "\n"
    "  --load MODEL     a model saved by clt train --save or clt_checkpoint_save\n"
    "  --input FILE     the rows to predict\n"
    "  --output FILE    where to write the CSV (default: standard output); refused before\n"
    "                   any work when it is MODEL or FILE or cannot be written\n"
    "  --target COLUMN  the target column of a file in the training layout, by name or\n"
    "                   index (default: the one the model records, else the last)\n"
    "  --delimiter C    CSV: the delimiter: , ; tab or space (default detected)\n"
    "  --header yes|no|auto  CSV: whether the first row names the columns (default auto)\n"
    "  --x-name NAME    .npz: the features' array (default x; a targets' array is not read)\n"
    "  --device D       cpu, gpu:i, or P:D from `clt devices` (default: CLT_DEVICE when set,\n"
    "                   else gpu:0 when there is one, else cpu)\n";

typedef struct predict_args {
    const char *load, *input, *output, *target, *x_name, *delimiter, *header;
    int have_device;
    clt_device device;
} predict_args;

/* 0 to go on, -1 after --help, else 2. */
static int parse(int argc, char **argv, predict_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(predict_usage, stdout);
            return -1;
        }
        const char **slot = strcmp(o, "--load") == 0     ? &a->load
                            : strcmp(o, "--input") == 0  ? &a->input
                            : strcmp(o, "--output") == 0 ? &a->output
                            : strcmp(o, "--target") == 0 ? &a->target
                            : strcmp(o, "--x-name") == 0 ? &a->x_name
                            : strcmp(o, "--delimiter") == 0 ? &a->delimiter
                            : strcmp(o, "--header") == 0 ? &a->header
                                                         : NULL;
        int device = strcmp(o, "--device") == 0;
        if (!slot && !device) {
            fprintf(stderr, "clt predict: unknown option '%s'\n%s", o, predict_usage);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "clt predict: %s needs a value\n%s", o, predict_usage);
            return 2;
        }
        const char *v = argv[++i];
        if (slot) {
            *slot = v;
        } else if (clt_device_parse(v, &a->device) != CLT_OK) {
            fprintf(stderr, "clt predict: --device: %s\n", clt_last_error());
            return 2;
        } else {
            a->have_device = 1;
        }
    }
    char delimiter;
    int header;
    if (a->delimiter && !clt_tool_parse_delimiter(a->delimiter, &delimiter)) {
        fprintf(stderr, "clt predict: --delimiter takes , ; tab or space, not '%s'\n", a->delimiter);
        return 2;
    }
    if (a->header && !clt_tool_parse_header(a->header, &header)) {
        fprintf(stderr, "clt predict: --header takes yes, no or auto, not '%s'\n", a->header);
        return 2;
    }
    if (!a->load || !a->input) {
        fprintf(stderr, "clt predict: --load MODEL and --input FILE are required\n%s", predict_usage);
        return 2;
    }
    const char *env = getenv("CLT_DEVICE");
    if (!a->have_device && env && env[0]) {
        if (clt_device_parse(env, &a->device) != CLT_OK) {
            fprintf(stderr, "clt predict: CLT_DEVICE=%s: %s\n", env, clt_last_error());
            return 2;
        }
        a->have_device = 1;
    }
    return 0;
}

/* The rows of path in the model's width: the features alone, else the
 * training layout less its target column. Returns 0, or 2 after a message. */
static int read_rows(const predict_args *a, const clt_model_description *d, clt_dataset *ds)
{
    clt_data_options o = clt_data_default_options();
    o.x_name = a->x_name;
    if (a->delimiter) clt_tool_parse_delimiter(a->delimiter, &o.delimiter);
    if (a->header) clt_tool_parse_header(a->header, &o.header);
    clt_data_options t = o; /* the training layout's, below */
    o.no_target = 1;
    clt_status s = clt_dataset_load(ds, a->input, &o);
    char first[1024];
    snprintf(first, sizeof first, "%s", s == CLT_OK ? "" : clt_last_error());
    int64_t got = s == CLT_OK ? clt_dataset_width(ds) : 0;
    if (s == CLT_OK && got == d->num_inputs) return 0;
    clt_dataset_free(ds);
    /* The training layout: the target column taken as labels of any text, then ignored. */
    t.target = a->target ? a->target : d->target;
    t.task = CLT_TASK_CLASSIFY;
    if (clt_dataset_load(ds, a->input, &t) == CLT_OK && clt_dataset_width(ds) == d->num_inputs) return 0;
    clt_dataset_free(ds);
    if (first[0]) fprintf(stderr, "clt predict: %s\n", first);
    else
        fprintf(stderr, "clt predict: %s: %lld features per row, but the model takes %lld (or %lld columns with the "
                        "target)\n", a->input, (long long)got, (long long)d->num_inputs, (long long)d->num_inputs + 1);
    return 2;
}

/* A growing text buffer; `failed` once an allocation failed. */
typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !t->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
        } else if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        } else {
            size_t cap = (t->cap + (size_t)n + 1) * 2;
            char *grown = realloc(t->s, cap);
            if (!grown) t->failed = 1;
            else {
                t->s = grown;
                t->cap = cap;
            }
        }
    }
}

/* A CSV field: quoted (quotes doubled) when it holds a delimiter, a quote, a line break or edge blanks. */
static void put_field(text *t, const char *prefix, const char *v)
{
    size_t n = strlen(v);
    int quote = strpbrk(v, ",;\t\"\r\n") != NULL || (n && (v[0] == ' ' || v[n - 1] == ' '));
    if (!quote) {
        put(t, "%s%s", prefix, v);
        return;
    }
    put(t, "\"%s", prefix);
    for (const char *p = v; *p; p++) {
        if (*p == '"') put(t, "\"\"");
        else put(t, "%c", *p);
    }
    put(t, "\"");
}

static void write_csv(text *t, const clt_model_description *d, int64_t n, const float *out, const int32_t *classes)
{
    int64_t k = d->num_outputs;
    if (d->task == CLT_TASK_CLASSIFY) {
        put(t, "predicted");
        for (int c = 0; c < d->num_classes; c++) {
            put(t, ",");
            put_field(t, "p_", d->class_names[c]);
        }
    } else if (k == 1) {
        put(t, "predicted");
    } else {
        for (int64_t j = 0; j < k; j++) put(t, "%spredicted_%lld", j ? "," : "", (long long)j);
    }
    put(t, "\n");
    for (int64_t i = 0; i < n && !t->failed; i++) {
        if (d->task == CLT_TASK_CLASSIFY) put_field(t, "", d->class_names[classes[i]]);
        for (int64_t j = 0; j < k; j++)
            put(t, "%s%.9g", d->task == CLT_TASK_CLASSIFY || j ? "," : "", (double)out[i * k + j]);
        put(t, "\n");
    }
}

/* --output checked before any work, as clt train checks its files: it can
 * be written (the directory is writable, the temporary name fits NAME_MAX)
 * and is neither the --load model nor the --input file, however spelled.
 * Returns 0 or the exit status after the message (2 for a clash, 1 for an
 * unwritable path). */
static int check_files(const predict_args *a)
{
    const clt_file_use uses[] = {
        {"--output", a->output, CLT_FILE_OUTPUT},
        {"--load", a->load, CLT_FILE_INPUT},
        {"--input", a->input, CLT_FILE_INPUT},
    };
    clt_status s = clt_file_check_uses(uses, sizeof uses / sizeof uses[0]);
    if (s == CLT_OK) return 0;
    fprintf(stderr, "clt predict: checking the output file: %s\n", clt_last_error());
    return s == CLT_ERR_INVALID_ARGUMENT ? 2 : 1;
}

int clt_cmd_predict(int argc, char **argv)
{
    predict_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = check_files(&a)) != 0) return rc;
    clt_device dev = a.have_device ? a.device : clt_try_gpu(0);
    clt_model *m = NULL;
    clt_model_description d;
    if (clt_model_load(&m, a.load, dev, &d) != CLT_OK) {
        fprintf(stderr, "clt predict: loading the model: %s\n", clt_last_error());
        return 1;
    }
    clt_dataset ds = {0};
    rc = read_rows(&a, &d, &ds);
    float *x = NULL, *out = NULL;
    int32_t *classes = NULL;
    int64_t n = ds.n, w = d.num_inputs;
    if (rc == 0) {
        x = ds.x;
        if (!x) { /* bytes, scaled as the loader scales them for training */
            x = malloc((size_t)(n * w) * sizeof *x);
            for (int64_t i = 0; x && i < n * w; i++) x[i] = ds.images[i] / 255.0f;
        }
        out = malloc((size_t)(n * d.num_outputs) * sizeof *out);
        classes = malloc((size_t)n * sizeof *classes);
        if (!x || !out || !classes) {
            fprintf(stderr, "clt predict: out of memory for %lld rows\n", (long long)n);
            rc = 1;
        }
    }
    if (rc == 0 && clt_model_predict(m, &d, x, n, w, out, classes) != CLT_OK) {
        fprintf(stderr, "clt predict: predicting: %s\n", clt_last_error());
        rc = 1;
    }
    text t = {0};
    if (rc == 0) write_csv(&t, &d, n, out, classes);
    if (rc == 0 && t.failed) {
        fprintf(stderr, "clt predict: out of memory writing %lld rows\n", (long long)n);
        rc = 1;
    }
    if (rc == 0 && a.output && clt_file_write(a.output, t.s, t.len) != CLT_OK) {
        fprintf(stderr, "clt predict: writing %s: %s\n", a.output, clt_last_error());
        rc = 1;
    }
    if (rc == 0 && !a.output && (fwrite(t.s, 1, t.len, stdout) != t.len || fflush(stdout) != 0)) {
        fprintf(stderr, "clt predict: writing the predictions to standard output failed\n");
        rc = 1;
    }
    free(t.s);
    if (x != ds.x) free(x);
    free(out);
    free(classes);
    clt_dataset_free(&ds);
    clt_model_description_free(&d);
    clt_model_free(m);
    return rc;
}
