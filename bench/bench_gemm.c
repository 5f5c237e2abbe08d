/* GEMM throughput of cltensor (its CPU kernels with the default and the
 * tuned tile, its GPU-class kernel cl/gemm_gpu.cl, and CLBlast) against
 * OpenBLAS
 * on the same machine, in one run, plus kernel launch overhead and the cost
 * of a synchronisation. Figures are medians of several repetitions.
 * Usage: bench_gemm [device] [reps] [launch | capstone]   (device as `clt
 * devices` names it; default cpu:0): `launch` times the launches alone,
 * `capstone` the capstone's six products only, then a step's products
 * against its arithmetic bound (step_bound). Built without OpenBLAS (when
 * CMake finds none) its columns and ratios read 0 and "-". */
#ifdef CLT_BENCH_OPENBLAS
#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_gemm"
#include "bench.h"
#include "../src/device/device_internal.h"
#include "../src/ops/tune.h"

typedef struct shape {
    const char *name;
    int ta, tb;
    int m, n, k;
    int step; /* how many a capstone training step runs at batch 256 */
} shape;

/* Square products from 256^3 (in cache) to 4096^3 (blocked), one with rows
 * not 4 KiB apart, the capstone's linear layers at batch 256 (x is (B,C),
 * w is (OC,C)): forward y = x w^T, backward dw = dy^T x and dx = dy w (a
 * step computes no dx for the first layer, whose input is the images); and
 * a wide 4096 x 4096 x 1024. */
static const shape shapes[] = {
    {"square 256^3 (NN)", 0, 0, 256, 256, 256, 0},
    {"square 512^3 (NN)", 0, 0, 512, 512, 512, 0},
    {"square 1024^3 (NN)", 0, 0, 1024, 1024, 1024, 0},
    {"square 1000^3 (NN)", 0, 0, 1000, 1000, 1000, 0},
    {"square 2048^3 (NN)", 0, 0, 2048, 2048, 2048, 0},
    {"square 4096^3 (NN)", 0, 0, 4096, 4096, 4096, 0},
    {"wide 4096x4096x1024 (NN)", 0, 0, 4096, 4096, 1024, 0},
    {"fwd 256x784->256 x w^T (NT)", 0, 1, 256, 256, 784, 1},
    {"bwd dw 256x784 dy^T x (TN)", 1, 0, 256, 784, 256, 1},
    {"bwd dx 256x784 dy w (NN)", 0, 0, 256, 784, 256, 0},
    {"fwd 256x256->256 x w^T (NT)", 0, 1, 256, 256, 256, 4},
    {"bwd dw 256x256 dy^T x (TN)", 1, 0, 256, 256, 256, 4},
    {"bwd dx 256x256 dy w (NN)", 0, 0, 256, 256, 256, 4},
};

/* Repetitions of `iters` products each, so one repetition lasts ~0.1 s. */
static int iters_for(const shape *s)
{
    double flop = 2.0 * s->m * s->n * s->k;
    int it = (int)(1e9 / flop);
    return it < 1 ? 1 : it;
}

/* impl: CLT_DENSE's value; NULL: the GPU class's own choice on any device
 * (CLT_DEVICE_CLASS=gpu), cl/gemm_gpu.cl up to 2^27 multiply-adds. */
static double bench_clt(clt_device dev, const shape *s, const char *impl, int reps)
{
    const char *was = getenv("CLT_DEVICE_CLASS");
    char *class = was ? strdup(was) : NULL;
    if (impl) setenv("CLT_DENSE", impl, 1);
    else setenv("CLT_DEVICE_CLASS", "gpu", 1);
    int64_t as[] = {s->ta ? s->k : s->m, s->ta ? s->m : s->k}, bs[] = {s->tb ? s->n : s->k, s->tb ? s->k : s->n};
    int64_t cs[] = {s->m, s->n};
    clt_tensor *a, *b, *c;
    CHECK(clt_rand(&a, dev, 2, as, 1));
    CHECK(clt_rand(&b, dev, 2, bs, 2));
    CHECK(clt_zeros(&c, dev, CLT_FLOAT32, 2, cs));
    CHECK(clt_gemm_(s->ta, s->tb, 1.0f, a, b, 0.0f, c)); /* builds the kernels */
    CHECK(clt_synchronize(dev));
    int it = iters_for(s);
    double *g = malloc((size_t)reps * sizeof *g);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < it; i++) CHECK(clt_gemm_(s->ta, s->tb, 1.0f, a, b, 0.0f, c));
        CHECK(clt_synchronize(dev));
        g[r] = 2.0 * s->m * s->n * s->k * it / (now() - t0) / 1e9;
    }
    double med = median(g, reps);
    free(g);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    unsetenv("CLT_DENSE");
    if (class) setenv("CLT_DEVICE_CLASS", class, 1);
    else unsetenv("CLT_DEVICE_CLASS");
    free(class);
    return med;
}

/* The CPU kernels with the shape's default tile (clt__gemm_tile_default: 12 x 32 or 6 x 32 on AVX-512) and with the tile the
 * tuning cache gives the shape (`clt tune`; the default when it has none),
 * timed alternately in each repetition so that both see the same load. */
static void bench_tiles(clt_device dev, const shape *s, int reps, double *def, double *tuned, int *tm, int *tn)
{
    int slot;
    CHECK(clt__resolve(dev, &slot));
    int64_t as[] = {s->ta ? s->k : s->m, s->ta ? s->m : s->k}, bs[] = {s->tb ? s->n : s->k, s->tb ? s->k : s->n};
    int64_t cs[] = {s->m, s->n};
    size_t lda = (size_t)as[1], ldb = (size_t)bs[1];
    clt__gemm_tile d = clt__gemm_tile_default(slot, s->ta, (size_t)s->m, (size_t)s->n, (size_t)s->k, lda, 0);
    clt__gemm_tile tiles[2] = {d, d};
    /* Devices that are not CPUs have no tuning cache: both columns use the default. */
    if (clt_tune_lookup(dev, s->ta, s->tb, s->m, s->n, s->k, &tiles[1].tm, &tiles[1].tn, NULL) != CLT_OK)
        tiles[1] = tiles[0];
    *tm = tiles[1].tm;
    *tn = tiles[1].tn;
    clt_tensor *a, *b, *c;
    CHECK(clt_rand(&a, dev, 2, as, 1));
    CHECK(clt_rand(&b, dev, 2, bs, 2));
    CHECK(clt_zeros(&c, dev, CLT_FLOAT32, 2, cs));
    int it = iters_for(s);
    double *g[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    for (int r = -1; r < reps; r++) /* r = -1 builds the kernels */
        for (int t = 0; t < 2; t++) {
            double t0 = now();
            for (int i = 0; i < it; i++)
                CHECK(clt__cpu_gemm(slot, tiles[t], s->ta, s->tb, (size_t)s->m, (size_t)s->n, (size_t)s->k, 1.0f, a,
                                    lda, b, ldb, 0.0f, c, (size_t)s->n, NULL, 0));
            CHECK(clt_synchronize(dev));
            if (r >= 0) g[t][r] = 2.0 * s->m * s->n * s->k * it / (now() - t0) / 1e9;
        }
    *def = median(g[0], reps);
    *tuned = median(g[1], reps);
    free(g[0]);
    free(g[1]);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
}

#ifdef CLT_BENCH_OPENBLAS
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
#else
/* Built without OpenBLAS (CMake found none: scripts/gpu-check's machine): no peer. */
static double bench_openblas(const shape *s, int reps)
{
    (void)s;
    (void)reps;
    return 0.0;
}
static int openblas_get_num_threads(void) { return 0; }
#endif

/* The capstone step's products at batch 256 (a shape's `step` of each; the
 * 10-wide output layer's three, 0.6% of the FLOPs, left out) against its
 * arithmetic bound: the step's 2.39 MFLOP an image (performance.md's cost
 * curves) at OpenBLAS's rate at 1024^3. OpenBLAS's own fraction is the most
 * a step whose products ran at OpenBLAS's speed, and nothing else, reaches. */
static void step_bound(int reps, double step_clt, double step_obl)
{
    const shape peak_shape = {"square 1024^3 (NN)", 0, 0, 1024, 1024, 1024, 0};
    double peak = bench_openblas(&peak_shape, reps), w = 256.0;
    double flop = 256.0 * 2 * (2 * (784 * w + 4 * w * w + 10 * w) + 4 * w * w + 10 * w);
    if (peak <= 0) return;
    double bound = flop / (peak * 1e9);
    printf("capstone step's products, batch 256: cltensor %.2f ms, OpenBLAS %.2f ms; the bound (%.0f MFLOP at "
           "OpenBLAS's %.1f GFLOP/s at 1024^3) %.2f ms: %.2f and %.2f of it\n",
           1e3 * step_clt, 1e3 * step_obl, flop / 1e6, peak, 1e3 * bound, bound / step_clt, bound / step_obl);
}

/* Microseconds per forward of a Linear then ReLU at the capstone's shapes
 * (batch 256), as two ops (clt_linear_forward, clt_relu: a second pass over
 * y) and fused (clt_linear_relu_forward: ReLU in the product's store). */
static void bench_fused(clt_device dev, int reps)
{
    const int dims[][2] = {{784, 256}, {256, 256}};
    printf("\nlinear + ReLU forward, batch 256    %9s %9s %8s\n", "separate", "fused", "sep/fused");
    for (int d = 0; d < 2; d++) {
        int64_t xs[] = {256, dims[d][0]}, ws[] = {dims[d][1], dims[d][0]}, bs[] = {dims[d][1]};
        clt_tensor *x, *w, *b, *y, *z;
        CHECK(clt_rand(&x, dev, 2, xs, 1));
        CHECK(clt_rand(&w, dev, 2, ws, 2));
        CHECK(clt_rand(&b, dev, 1, bs, 3));
        double *sep = malloc((size_t)reps * sizeof *sep), *fus = malloc((size_t)reps * sizeof *fus);
        enum { IT = 200 };
        for (int r = -1; r < reps; r++) { /* r = -1 builds the kernels */
            double t0 = now();
            for (int i = 0; i < IT; i++) {
                CHECK(clt_linear_forward(&y, x, w, b));
                CHECK(clt_relu(&z, y));
                clt_tensor_release(y);
                clt_tensor_release(z);
            }
            CHECK(clt_synchronize(dev));
            double t1 = now();
            for (int i = 0; i < IT; i++) {
                CHECK(clt_linear_relu_forward(&y, x, w, b));
                clt_tensor_release(y);
            }
            CHECK(clt_synchronize(dev));
            if (r >= 0) {
                sep[r] = (t1 - t0) / IT * 1e6;
                fus[r] = (now() - t1) / IT * 1e6;
            }
        }
        double sm = median(sep, reps), fm = median(fus, reps);
        char label[48];
        snprintf(label, sizeof label, "256x%d -> %d", dims[d][0], dims[d][1]);
        printf("  %-33s %6.1f us %6.1f us %7.2fx\n", label, sm, fm, sm / fm);
        free(sep);
        free(fus);
        clt_tensor_release(x);
        clt_tensor_release(w);
        clt_tensor_release(b);
    }
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

/* "0.97x", or "-" without the peer (no OpenBLAS, or no CLBlast figure). */
static const char *ratio(char *buf, size_t len, double a, double b)
{
    if (a > 0 && b > 0) snprintf(buf, len, "%.2fx", a / b);
    else snprintf(buf, len, "-");
    return buf;
}

int main(int argc, char **argv)
{
    clt_device dev = clt_cpu();
    if (argc > 1) CHECK(clt_device_parse(argv[1], &dev));
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    /* bench_gemm DEVICE REPS launch: the launch overhead alone. */
    if (argc > 3 && strcmp(argv[3], "launch") == 0) {
        bench_launch(dev, reps);
        return 0;
    }
    /* bench_gemm DEVICE REPS capstone: the capstone's six products only. */
    int capstone = argc > 3 && strcmp(argv[3], "capstone") == 0;
    double step_clt = 0.0, step_obl = 0.0; /* seconds of a step's products */
    char name[64];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("cltensor GEMM vs OpenBLAS (%d threads) on %s, GFLOP/s, median of %d repetitions\n",
           openblas_get_num_threads(), name, reps);
    printf("%-30s %5s %5s %5s %9s %9s %9s %9s %9s %9s %8s %9s %8s %8s %8s\n", "shape", "M", "N", "K", "clt-cpu",
           "tuned", "(tile)", "gemm-gpu", "clblast", "openblas", "cpu/obl", "tuned/obl", "clb/obl", "cpu/clb",
           "gpu/clb");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        if (capstone && strncmp(s->name, "fwd", 3) != 0 && strncmp(s->name, "bwd", 3) != 0) continue;
        /* CLBlast runs about 0.1x OpenBLAS here: past 1024^3 it would take minutes. */
        double flop = 2.0 * s->m * s->n * s->k, cpu, tuned;
        double clb = flop <= 2.2e9 ? bench_clt(dev, s, "clblast", reps) : 0.0;
        double gpu = flop <= 2.0 * 134217728 ? bench_clt(dev, s, NULL, reps) : 0.0; /* 2 x 2^27 */
        int tm, tn;
        bench_tiles(dev, s, reps, &cpu, &tuned, &tm, &tn);
        char tile[16], cl[16] = "-", gg[16] = "-", r[5][16];
        snprintf(tile, sizeof tile, "%dx%d", tm, tn);
        double obl = bench_openblas(s, reps);
        if (clb > 0) snprintf(cl, sizeof cl, "%.1f", clb);
        if (gpu > 0) snprintf(gg, sizeof gg, "%.1f", gpu);
        printf("%-30s %5d %5d %5d %9.1f %9.1f %9s %9s %9s %9.1f %8s %9s %8s %8s %8s\n", s->name, s->m, s->n, s->k, cpu,
               tuned, tile, gg, cl, obl, ratio(r[0], 16, cpu, obl), ratio(r[1], 16, tuned, obl),
               ratio(r[2], 16, clb, obl), ratio(r[3], 16, cpu, clb), ratio(r[4], 16, gpu, clb));
        fflush(stdout);
        step_clt += s->step * flop / (cpu * 1e9);
        step_obl += obl > 0 ? s->step * flop / (obl * 1e9) : 0.0;
    }
    if (capstone) step_bound(reps, step_clt, step_obl);
    bench_fused(dev, reps);
    bench_launch(dev, reps);
    return 0;
}
