/* clt tune: the cudnn.benchmark of cltensor, ahead of time. Times the
 * candidate tiles of the CPU GEMM kernels for every product a model's
 * training step runs (forward x w^T, backward dy^T x and dy w of each
 * Linear) on one device and records the winners in the tuning cache; later
 * runs on that device and driver use them without timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"

typedef struct product {
    int ta, tb;
    int64_t m, n, k;
} product;

static int parse_size(const char *opt, const char *text, int64_t *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < 1 || v > (1 << 24)) {
        fprintf(stderr, "clt tune: %s '%s' is not a positive size\n", opt, text);
        return 0;
    }
    *out = v;
    return 1;
}

static void add(product *ps, int *n, product p)
{
    for (int i = 0; i < *n; i++)
        if (ps[i].ta == p.ta && ps[i].tb == p.tb && ps[i].m == p.m && ps[i].n == p.n && ps[i].k == p.k) return;
    ps[(*n)++] = p;
}

static void help(void)
{
    printf("usage: clt tune [--device D] [--batch B] [--inputs I] [--hidden H] [--blocks N] [--outputs O]\n\n"
           "Times a small set of tile sizes of the CPU GEMM kernels for every product of a\n"
           "training step of ResMLP(I, H, N blocks, O) at batch B (defaults: CLT_DEVICE, else cpu:0; 256, 784,\n"
           "256, 2, 10, the chapter's capstone) and records the fastest per shape in the\n"
           "tuning cache of the device and driver ($CLT_CACHE_DIR, else\n"
           "$XDG_CACHE_HOME/cltensor). Later runs use the winners without timing; CLT_TUNE=1\n"
           "instead tunes each new shape on its first use. CPU-class devices only: GPU-class\n"
           "devices (GPUs, or any device under CLT_DEVICE_CLASS=gpu) run CLBlast, which has\n"
           "its own tuner.\n");
}

/* What to tune: the device and the ResMLP's shape. */
typedef struct tune_args {
    const char *device;
    int64_t batch, inputs, hidden, blocks, outputs;
} tune_args;

/* Returns 0 to go on, -1 after --help, else the exit status (2). */
static int parse_args(int argc, char **argv, tune_args *t)
{
    const char *env = getenv("CLT_DEVICE"); /* the default device; --device wins */
    *t = (tune_args){env && env[0] ? env : "cpu:0", 256, 784, 256, 2, 10};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help();
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "clt tune: unexpected argument '%s' (see clt tune --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (strcmp(a, "--device") == 0) t->device = v;
        else if (strcmp(a, "--batch") == 0) ok = parse_size(a, v, &t->batch);
        else if (strcmp(a, "--inputs") == 0) ok = parse_size(a, v, &t->inputs);
        else if (strcmp(a, "--hidden") == 0) ok = parse_size(a, v, &t->hidden);
        else if (strcmp(a, "--blocks") == 0) ok = parse_size(a, v, &t->blocks);
        else if (strcmp(a, "--outputs") == 0) ok = parse_size(a, v, &t->outputs);
        else {
            fprintf(stderr, "clt tune: unknown option '%s' (see clt tune --help)\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (t->blocks > 64) {
        fprintf(stderr, "clt tune: --blocks %lld is more than 64\n", (long long)t->blocks);
        return 2;
    }
    return 0;
}

#define MAX_PRODUCTS (3 * (2 + 2 * 64))

/* The distinct products of one training step into ps; returns their count. */
static int step_products(const tune_args *t, product *ps)
{
    /* Linear layers (in, out): the first, the residual bodies', the last. */
    int64_t layers[2 + 2 * 64][2];
    int nl = 0, np = 0;
    layers[nl][0] = t->inputs, layers[nl++][1] = t->hidden;
    for (int64_t b = 0; b < 2 * t->blocks; b++) layers[nl][0] = t->hidden, layers[nl++][1] = t->hidden;
    layers[nl][0] = t->hidden, layers[nl++][1] = t->outputs;
    for (int l = 0; l < nl; l++) {
        int64_t in = layers[l][0], out = layers[l][1];
        add(ps, &np, (product){0, 1, t->batch, out, in});
        add(ps, &np, (product){1, 0, out, in, t->batch});
        if (l > 0) add(ps, &np, (product){0, 0, t->batch, in, out}); /* the model skips the input's gradient */
    }
    return np;
}

/* Tunes each product on dev, printing its winner; 0 or the exit status (1). */
static int tune_products(clt_device dev, const product *ps, int np)
{
    printf("%-28s %s\n", "product (m, n, k)", "tile (rows x columns)");
    for (int i = 0; i < np; i++) {
        int tm, tn;
        if (clt_tune_gemm(dev, ps[i].ta, ps[i].tb, ps[i].m, ps[i].n, ps[i].k, &tm, &tn) != CLT_OK) {
            fprintf(stderr, "clt tune: %s\n", clt_last_error());
            return 1;
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%s%s %lld, %lld, %lld", ps[i].ta ? "T" : "N", ps[i].tb ? "T" : "N",
                 (long long)ps[i].m, (long long)ps[i].n, (long long)ps[i].k);
        printf("%-28s %d x %d\n", shape, tm, tn);
        fflush(stdout);
    }
    return 0;
}

int clt_cmd_tune(int argc, char **argv)
{
    tune_args t;
    int rc = parse_args(argc, argv, &t);
    if (rc) return rc < 0 ? 0 : rc;
    clt_device dev;
    if (clt_device_parse(t.device, &dev) != CLT_OK) {
        fprintf(stderr, "clt tune: %s\n", clt_last_error());
        return 2;
    }
    product ps[MAX_PRODUCTS];
    int np = step_products(&t, ps);
    char path[1024];
    if (clt_tune_cache_path(dev, path, sizeof path) != CLT_OK) {
        fprintf(stderr, "clt tune: %s\n", clt_last_error());
        return 1;
    }
    rc = tune_products(dev, ps, np);
    if (rc == 0) printf("written to %s\n", path);
    return rc;
}
