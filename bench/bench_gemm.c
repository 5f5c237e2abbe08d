/* GEMM throughput of cltensor (its CPU kernels and CLBlast) against OpenBLAS
 * on the same machine, in one run, plus kernel launch overhead and the cost
 * of a synchronisation. Figures are medians of several repetitions.
 * Usage: bench_gemm [device] [reps]   (device as `clt devices` names it; default cpu:0) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cltensor.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        clt_status s_ = (expr);                                                              \
        if (s_ != CLT_OK) {                                                                  \
            fprintf(stderr, "bench_gemm: %s failed: %s\n", #expr, clt_last_error());     \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

typedef struct shape {
    const char *name;
    int ta, tb;
    int m, n, k;
} shape;

/* The capstone's linear layers at batch 256 (x is (B,C), w is (OC,C)):
 * forward y = x w^T, backward dw = dy^T x and dx = dy w. */
static const shape shapes[] = {
    {"square 1024^3 (NN)", 0, 0, 1024, 1024, 1024},
    {"fwd 256x784->256 x w^T (NT)", 0, 1, 256, 256, 784},
    {"bwd dw 256x784 dy^T x (TN)", 1, 0, 256, 784, 256},
    {"bwd dx 256x784 dy w (NN)", 0, 0, 256, 784, 256},
    {"fwd 256x256->256 x w^T (NT)", 0, 1, 256, 256, 256},
    {"bwd dw 256x256 dy^T x (TN)", 1, 0, 256, 256, 256},
    {"bwd dx 256x256 dy w (NN)", 0, 0, 256, 256, 256},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Repetitions of `iters` products each, so one repetition lasts ~0.1 s. */
static int iters_for(const shape *s)
{
    double flop = 2.0 * s->m * s->n * s->k;
    int it = (int)(1e9 / flop);
    return it < 1 ? 1 : it;
}

static double bench_clt(clt_device dev, const shape *s, const char *impl, int reps)
{
    setenv("CLT_DENSE", impl, 1);
    int64_t as[] = {s->ta ? s->k : s->m, s->ta ? s->m : s->k}, bs[] = {s->tb ? s->n : s->k, s->tb ? s->k : s->n};
    int64_t cs[] = {s->m, s->n};
    clt_tensor *a, *b, *c;
    CHECK(clt_rand(&a, dev, 2, as, 1));
    CHECK(clt_rand(&b, dev, 2, bs, 2));
    CHECK(clt_zeros(&c, dev, CLT_FLOAT32, 2, cs));
    CHECK(clt_gemm(s->ta, s->tb, 1.0f, a, b, 0.0f, c)); /* builds the kernels */
    CHECK(clt_synchronize(dev));
    int it = iters_for(s);
    double *g = malloc((size_t)reps * sizeof *g);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < it; i++) CHECK(clt_gemm(s->ta, s->tb, 1.0f, a, b, 0.0f, c));
        CHECK(clt_synchronize(dev));
        g[r] = 2.0 * s->m * s->n * s->k * it / (now() - t0) / 1e9;
    }
    double med = median(g, reps);
    free(g);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    unsetenv("CLT_DENSE");
    return med;
}

static double bench_openblas(const shape *s, int reps)
{
    size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = calloc(nc, sizeof *c);
    for (size_t i = 0; i < na; i++) a[i] = (float)(i % 17) / 17.0f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 13) / 13.0f;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    enum CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans, tb = s->tb ? CblasTrans : CblasNoTrans;
    cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, s->n);
    int it = iters_for(s);
    double *g = malloc((size_t)reps * sizeof *g);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < it; i++)
            cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, s->n);
        g[r] = 2.0 * s->m * s->n * s->k * it / (now() - t0) / 1e9;
    }
    double med = median(g, reps);
    free(g);
    free(a);
    free(b);
    free(c);
    return med;
}

/* Microseconds per launch of a one-element kernel, enqueued back to back,
 * and per launch followed by a synchronisation (the clFinish round trip). */
static void bench_launch(clt_device dev, int reps)
{
    int64_t one = 1;
    clt_tensor *x;
    CHECK(clt_ones(&x, dev, CLT_FLOAT32, 1, &one));
    CHECK(clt_scale_(x, 1.0f));
    CHECK(clt_synchronize(dev));
    enum { PIPELINED = 5000, SYNCED = 500 };
    double *p = malloc((size_t)reps * sizeof *p), *q = malloc((size_t)reps * sizeof *q);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < PIPELINED; i++) CHECK(clt_scale_(x, 1.0f));
        CHECK(clt_synchronize(dev));
        p[r] = (now() - t0) / PIPELINED * 1e6;
        t0 = now();
        for (int i = 0; i < SYNCED; i++) {
            CHECK(clt_scale_(x, 1.0f));
            CHECK(clt_synchronize(dev));
        }
        q[r] = (now() - t0) / SYNCED * 1e6;
    }
    double pm = median(p, reps), qm = median(q, reps);
    printf("\nlaunch overhead, pipelined:          %7.2f us per kernel (goal <= 3)\n", pm);
    printf("launch + synchronize (clFinish):     %7.2f us per round trip (sync cost ~%.2f us)\n", qm, qm - pm);
    free(p);
    free(q);
    clt_tensor_release(x);
}

int main(int argc, char **argv)
{
    clt_device dev = clt_cpu();
    if (argc > 1) CHECK(clt_device_parse(argv[1], &dev));
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    char name[64];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("cltensor GEMM vs OpenBLAS (%d threads) on %s, GFLOP/s, median of %d repetitions\n",
           openblas_get_num_threads(), name, reps);
    printf("%-30s %5s %5s %5s %9s %9s %9s %8s %8s\n", "shape", "M", "N", "K", "clt-cpu", "clblast", "openblas",
           "cpu/obl", "clb/obl");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        double cpu = bench_clt(dev, s, "cpu", reps), clb = bench_clt(dev, s, "clblast", reps);
        double obl = bench_openblas(s, reps);
        printf("%-30s %5d %5d %5d %9.1f %9.1f %9.1f %7.2fx %7.2fx\n", s->name, s->m, s->n, s->k, cpu, clb, obl,
               cpu / obl, clb / obl);
        fflush(stdout);
    }
    bench_launch(dev, reps);
    return 0;
}
