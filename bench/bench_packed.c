/* Persistent packed weights: the capstone's forward products (ResMLP
 * 784-256-3x2x256-10: a fused Linear + ReLU 784 -> 256, six fused 256 -> 256,
 * a Linear 256 -> 10) through w^T panels packed for each call (as a
 * training step's forward, or inference before the kept panels) against
 * panels kept between forwards (an evaluating model's, clt__packed_weight),
 * timed alternately in one process so that both see the same load. Prints
 * the medians in microseconds per forward, their ratio, and what packing
 * costs a forward (the difference) at each batch size.
 * Usage: bench_packed [reps] [device] [batch...]   (reps default 7; batches 1 32 256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_packed"
#include "bench.h"
#include "../src/device/device_internal.h"
#include "../src/ops/ops_internal.h"

enum { LAYERS = 8, CALLS = 20 };
static const int64_t ins[LAYERS] = {784, 256, 256, 256, 256, 256, 256, 256};
static const int64_t outs[LAYERS] = {256, 256, 256, 256, 256, 256, 256, 10};

static clt_tensor *uniform(clt_device dev, int ndim, const int64_t *shape, uint64_t seed)
{
    clt_tensor *t;
    CHECK(clt_rand(&t, dev, ndim, shape, seed));
    return t;
}

/* One forward: every product, through pws (NULL: packed for the call). */
static void forward(clt_tensor *x, clt_tensor **w, clt_tensor **b, clt__packed_weight *pws)
{
    clt_tensor *cur = clt_tensor_retain(x);
    for (int l = 0; l < LAYERS; l++) {
        clt_tensor *next;
        CHECK(clt__linear_forward_packed(&next, cur, w[l], b[l], l + 1 < LAYERS, pws ? &pws[l] : NULL));
        clt_tensor_release(cur);
        cur = next;
    }
    clt_tensor_release(cur);
}

/* Microseconds per forward over CALLS forwards. */
static double time_forwards(clt_device dev, clt_tensor *x, clt_tensor **w, clt_tensor **b, clt__packed_weight *pws)
{
    CHECK(clt_synchronize(dev));
    double t0 = now();
    for (int i = 0; i < CALLS; i++) forward(x, w, b, pws);
    CHECK(clt_synchronize(dev));
    return (now() - t0) / CALLS * 1e6;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    clt_device dev = clt_cpu();
    if (argc > 2) CHECK(clt_device_parse(argv[2], &dev));
    if (reps < 1) {
        fprintf(stderr, "bench_packed: reps must be positive\n");
        return 2;
    }
    int slot, cpu = 0;
    CHECK(clt__resolve(dev, &slot));
    CHECK(clt__dense_cpu(slot, &cpu));
    if (!cpu) {
        fprintf(stderr, "bench_packed: %s does not run the CPU kernels; nothing is packed there\n", argv[2]);
        return 2;
    }
    clt_tensor *w[LAYERS], *b[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        int64_t ws[] = {outs[l], ins[l]}, bs[] = {outs[l]};
        w[l] = uniform(dev, 2, ws, 1 + (uint64_t)l);
        b[l] = uniform(dev, 1, bs, 100 + (uint64_t)l);
    }
    static const int64_t default_batches[] = {1, 32, 256};
    int nb = argc > 3 ? argc - 3 : 3;
    printf("%-6s %14s %14s %8s %16s\n", "batch", "per call (us)", "kept (us)", "ratio", "packing (us)");
    for (int bi = 0; bi < nb; bi++) {
        int64_t batch = argc > 3 ? atol(argv[3 + bi]) : default_batches[bi];
        if (batch < 1) {
            fprintf(stderr, "bench_packed: batch sizes must be positive\n");
            return 2;
        }
        int64_t xs[] = {batch, ins[0]};
        clt_tensor *x = uniform(dev, 2, xs, 7);
        clt__packed_weight pws[LAYERS];
        memset(pws, 0, sizeof pws);
        /* Warm-up: programs built, panels made, the allocator's cache filled. */
        forward(x, w, b, NULL);
        forward(x, w, b, pws);
        double *a = malloc((size_t)reps * sizeof *a), *k = malloc((size_t)reps * sizeof *k);
        if (!a || !k) return 1;
        for (int r = 0; r < reps; r++) {
            a[r] = time_forwards(dev, x, w, b, NULL);
            k[r] = time_forwards(dev, x, w, b, pws);
        }
        double ma = median(a, reps), mk = median(k, reps);
        printf("%-6lld %14.1f %14.1f %7.3fx %16.1f\n", (long long)batch, ma, mk, ma / mk, ma - mk);
        for (int l = 0; l < LAYERS; l++) {
            if (pws[l].packs != 1) {
                fprintf(stderr, "bench_packed: layer %d packed %lld times\n", l, (long long)pws[l].packs);
                return 1;
            }
            clt__packed_weight_drop(&pws[l]);
        }
        free(a);
        free(k);
        clt_tensor_release(x);
    }
    for (int l = 0; l < LAYERS; l++) {
        clt_tensor_release(w[l]);
        clt_tensor_release(b[l]);
    }
    return 0;
}
