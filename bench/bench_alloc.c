/* The caching allocator's hot path: nanoseconds per cached allocation plus
 * free, through the public API (clt_empty + clt_tensor_release of a small
 * tensor: header, storage and allocator) and through the allocator alone
 * (clt__alloc + clt__free), with a few other blocks live in the pool as in
 * a training step. Medians of several repetitions.
 * Usage: bench_alloc [device] [reps]   (default cpu:0, 9) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_alloc"
#include "bench.h"
#include "../src/device/device_internal.h"
#include "../src/memory/allocator.h"

enum { ITERS = 200000, LIVE = 48 };

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "cpu:0";
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (reps < 1) reps = 1;
    clt_device dev;
    CHECK(clt_device_parse(name, &dev));
    int slot;
    CHECK(clt__resolve(dev, &slot));

    /* Live blocks of assorted sizes, as a model's activations, so the free
     * lists are not trivially short. */
    clt_tensor *live[LIVE];
    for (int i = 0; i < LIVE; i++) {
        int64_t shape[] = {(int64_t)(1 + i * 997 % 50000)};
        CHECK(clt_empty(&live[i], dev, CLT_FLOAT32, 1, shape));
    }
    clt_tensor *t;
    int64_t small[] = {64, 64}, big[] = {256, 2048};
    CHECK(clt_empty(&t, dev, CLT_FLOAT32, 2, big));
    clt_tensor_release(t);

    double *v = malloc((size_t)reps * sizeof *v);
    if (!v) return 1;
    clt_memory_stats before, after;
    CHECK(clt_memory_get_stats(dev, &before));
    const struct { const char *what; const int64_t *shape; } cases[] = {
        {"clt_empty + release, 64x64 float (16 KiB, small pool)", small},
        {"clt_empty + release, 256x2048 float (2 MiB, large pool)", big},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int i = 0; i < ITERS; i++) {
                CHECK(clt_empty(&t, dev, CLT_FLOAT32, 2, cases[c].shape));
                clt_tensor_release(t);
            }
            v[r] = (now() - t0) / ITERS * 1e9;
        }
        printf("%-58s %7.1f ns\n", cases[c].what, median(v, reps));
    }
    const size_t sizes[] = {16384, 2u << 20};
    for (size_t c = 0; c < 2; c++) {
        for (int r = 0; r < reps; r++) {
            clt__block *b;
            double t0 = now();
            for (int i = 0; i < ITERS; i++) {
                CHECK(clt__alloc(slot, sizes[c], CLT_MEM_OTHER, &b));
                clt__free(b, NULL);
            }
            v[r] = (now() - t0) / ITERS * 1e9;
        }
        printf("clt__alloc + clt__free, %-7s (allocator alone)           %7.1f ns\n", c ? "2 MiB" : "16 KiB",
               median(v, reps));
    }
    CHECK(clt_memory_get_stats(dev, &after));
    printf("driver allocations during the loops: %llu (goal 0)\n",
           (unsigned long long)(after.driver_allocs - before.driver_allocs));
    for (int i = 0; i < LIVE; i++) clt_tensor_release(live[i]);
    free(v);
    return 0;
}
