/* The chapter's exercise 4 (section 5.7): 1000 products of 4096x4096
 * matrices on one device, then 500 on each of two devices issued from one
 * loop, and the speedup. Both devices get their work before the host waits
 * on either (operations only enqueue; clt_synchronize is the wait).
 *
 *   two_devices [--size N] [--count K]
 *
 * Defaults: the chapter's 4096 and 1000 on real GPUs; 512 and 64 on CPUs
 * (pocl, a few tenths of a second each part on two cores). With fewer than two GPUs
 * it runs the one-device part only and says how to get two. Under pocl the
 * two "GPUs" (POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1) share the
 * same cores, so expect a speedup near 1 there; on two GPUs, near 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

#include "example.h"

/* a (n,n) scaled so that products stay near 1, and c to write into. */
static void operands(clt_device dev, int64_t n, clt_tensor **a, clt_tensor **c)
{
    int64_t shape[] = {n, n};
    CHECK(clt_randn(a, dev, 2, shape, 0));
    CHECK(clt_scale_(*a, 1.0f / (float)n));
    CHECK(clt_empty(c, dev, CLT_FLOAT32, 2, shape));
    CHECK(clt_gemm_(0, 0, 1.0f, *a, *a, 0.0f, *c)); /* warm up: kernels built */
    CHECK(clt_synchronize(dev));
}

int main(int argc, char **argv)
{
    int64_t n = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            n = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            count = atoll(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--size N] [--count K]\n", argv[0]);
            return 2;
        }
    }
    int gpus = clt_num_gpus();
    clt_device d0 = clt_try_gpu(0), d1 = clt_try_gpu(1);
    int fast = real_gpu(d0);
    if (n <= 0) n = fast ? 4096 : 512;
    if (count <= 0) count = fast ? 1000 : 64;
    count += count % 2;
    char name0[32], name1[32];
    CHECK(clt_device_name(d0, name0, sizeof name0));
    CHECK(clt_device_name(d1, name1, sizeof name1));

    clt_tensor *a0, *c0, *a1 = NULL, *c1 = NULL;
    operands(d0, n, &a0, &c0);
    double t = now();
    for (int64_t i = 0; i < count; i++) CHECK(clt_gemm_(0, 0, 1.0f, a0, a0, 0.0f, c0));
    CHECK(clt_synchronize(d0));
    double one = now() - t;
    double gflops = 2.0 * (double)n * (double)n * (double)n * (double)count * 1e-9;
    printf("%lld products of %lldx%lld matrices on %s: %.3f sec (%.1f GFLOP/s)\n", (long long)count, (long long)n,
           (long long)n, name0, one, gflops / one);
    if (gpus < 2) {
        printf("two devices: skipped, %d GPU(s) here; on a CPU-only machine try POCL_DEVICES=\"pthread pthread\" "
               "CLT_CPU_AS_GPU=1\n", gpus);
        clt_tensor_release(a0);
        clt_tensor_release(c0);
        return 0;
    }

    operands(d1, n, &a1, &c1);
    t = now();
    for (int64_t i = 0; i < count / 2; i++) {
        CHECK(clt_gemm_(0, 0, 1.0f, a0, a0, 0.0f, c0));
        CHECK(clt_gemm_(0, 0, 1.0f, a1, a1, 0.0f, c1));
    }
    CHECK(clt_synchronize(d0));
    CHECK(clt_synchronize(d1));
    double two = now() - t;
    printf("%lld products on %s and %lld on %s, issued from one loop: %.3f sec (%.1f GFLOP/s)\n",
           (long long)(count / 2), name0, (long long)(count / 2), name1, two, gflops / two);
    printf("speedup: %.2fx (2.00x is perfect scaling)\n", one / two);

    /* Same inputs on both devices: the results agree. */
    float x0, x1;
    clt_tensor *e0, *e1;
    CHECK(clt_narrow(&e0, c0, n - 1, 1));
    CHECK(clt_narrow(&e1, c1, n - 1, 1));
    float *r0 = malloc((size_t)n * sizeof(float)), *r1 = malloc((size_t)n * sizeof(float));
    if (!r0 || !r1) return 1;
    CHECK(clt_to_host(e0, r0, (size_t)n * sizeof(float)));
    CHECK(clt_to_host(e1, r1, (size_t)n * sizeof(float)));
    x0 = r0[n - 1];
    x1 = r1[n - 1];
    printf("last element on %s and %s: %.6f %.6f\n", name0, name1, x0, x1);
    free(r0);
    free(r1);
    clt_tensor *list[] = {a0, c0, a1, c1, e0, e1};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) clt_tensor_release(list[i]);
    return 0;
}
