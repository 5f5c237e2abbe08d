/* One product shape, cltensor's public clt_gemm_ against OpenBLAS
 * cblas_sgemm in the same process, timed alternately (cltensor, OpenBLAS,
 * cltensor, ...) so that both see the same load; prints GFLOP/s medians and
 * their ratio; then the same per CPU second (cltensor: of pocl's worker
 * threads, not of the thread that waits for them; OpenBLAS: of the process),
 * which a loaded machine moves less, when both run one thread
 * (POCL_MAX_PTHREAD_COUNT=1 OPENBLAS_NUM_THREADS=1).
 * Usage: bench_shape ta tb m n k [reps] [device]   (reps default 5)
 *        bench_shape --openblas-core   prints the kernels OpenBLAS chose */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_shape"
#include "bench.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the process's threads other than this one (pocl's workers). */
static double workers_now(void)
{
    return clock_s(CLOCK_PROCESS_CPUTIME_ID) - clock_s(CLOCK_THREAD_CPUTIME_ID);
}

char *openblas_get_corename(void); /* OpenBLAS's own, not in cblas.h */

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--openblas-core") == 0) {
        puts(openblas_get_corename());
        return 0;
    }
    if (argc < 6) {
        fprintf(stderr, "usage: bench_shape ta tb m n k [reps] [device]\n");
        return 2;
    }
    int ta = atoi(argv[1]) != 0, tb = atoi(argv[2]) != 0;
    long m = atol(argv[3]), n = atol(argv[4]), k = atol(argv[5]);
    int reps = argc > 6 ? atoi(argv[6]) : 5;
    if (m < 1 || n < 1 || k < 1 || reps < 1) {
        fprintf(stderr, "bench_shape: sizes and reps must be positive\n");
        return 2;
    }
    clt_device dev = clt_cpu();
    if (argc > 7) CHECK(clt_device_parse(argv[7], &dev));
    int64_t as[] = {ta ? k : m, ta ? m : k}, bs[] = {tb ? n : k, tb ? k : n}, cs[] = {m, n};
    clt_tensor *a, *b, *c;
    CHECK(clt_rand(&a, dev, 2, as, 1));
    CHECK(clt_rand(&b, dev, 2, bs, 2));
    CHECK(clt_zeros(&c, dev, CLT_FLOAT32, 2, cs));
    size_t na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
    float *ha = malloc(na * sizeof *ha), *hb = malloc(nb * sizeof *hb), *hc = calloc(nc, sizeof *hc);
    if (!ha || !hb || !hc) return 1;
    for (size_t i = 0; i < na; i++) ha[i] = (float)(i % 17) / 17.0f;
    for (size_t i = 0; i < nb; i++) hb[i] = (float)(i % 13) / 13.0f;
    enum CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans, ctb = tb ? CblasTrans : CblasNoTrans;
    double flop = 2.0 * (double)m * (double)n * (double)k;
    /* About 0.2 s of work per timing at 200 GFLOP/s. */
    int it = (int)(4e10 / flop);
    if (it < 1) it = 1;
    double *g[4];
    for (int i = 0; i < 4; i++) g[i] = malloc((size_t)reps * sizeof(double));
    for (int r = -1; r < reps; r++) { /* r = -1 builds the kernels and warms both */
        double t0 = now(), u0 = workers_now();
        for (int i = 0; i < it; i++) CHECK(clt_gemm_(ta, tb, 1.0f, a, b, 0.0f, c));
        CHECK(clt_synchronize(dev));
        double t1 = now(), w1 = workers_now(), u1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < it; i++)
            cblas_sgemm(CblasRowMajor, cta, ctb, (int)m, (int)n, (int)k, 1.0f, ha, (int)as[1], hb, (int)bs[1], 0.0f,
                        hc, (int)n);
        double t2 = now(), u2 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (r >= 0) {
            g[0][r] = flop * it / (t1 - t0) / 1e9;
            g[1][r] = flop * it / (t2 - t1) / 1e9;
            g[2][r] = flop * it / (w1 - u0) / 1e9;
            g[3][r] = flop * it / (u2 - u1) / 1e9;
        }
    }
    double cm = median(g[0], reps), om = median(g[1], reps), cu = median(g[2], reps), ou = median(g[3], reps);
    printf("%d %d %ld %ld %ld clt %.1f openblas %.1f ratio %.3f cpu-time: clt %.1f openblas %.1f ratio %.3f\n", ta,
           tb, m, n, k, cm, om, cm / om, cu, ou, cu / ou);
    for (int i = 0; i < 4; i++) free(g[i]);
    free(ha);
    free(hb);
    free(hc);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    return 0;
}
