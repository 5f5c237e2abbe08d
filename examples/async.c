/* The chapter's "Don't Break the Pipeline" cell (section 5.7.4): queue 32
 * matrix products, print how long queueing took and how long until they
 * all finished, keeping every product. Operations only enqueue (getting
 * new memory for the results included); clt_synchronize is the explicit
 * synchronization point that accurate timings need.
 *
 *   async [--size N] [--device NAME]
 *
 * The default size is 4096 on a real GPU (the chapter's) and 1536 on a CPU
 * (pocl), about a second of work on two cores. Set CLT_TRACE=async.json to
 * see the timeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

#include "example.h"

int main(int argc, char **argv)
{
    clt_device dev = clt_try_gpu(0);
    int64_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            n = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            CHECK(clt_device_parse(argv[++i], &dev));
        } else {
            fprintf(stderr, "usage: %s [--size N] [--device NAME]\n", argv[0]);
            return 2;
        }
    }
    if (n <= 0) n = real_gpu(dev) ? 4096 : 1536;
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("32 products of %lldx%lld matrices on %s\n", (long long)n, (long long)n, name);

    int64_t shape[] = {n, n};
    clt_tensor *a, *b;
    CHECK(clt_randn(&a, dev, 2, shape, 0));
    CHECK(clt_scale_(a, 1.0f / (float)n));
    CHECK(clt_matmul(&b, a, a)); /* warm up: kernels built, memory cached */
    clt_tensor_release(b);
    CHECK(clt_synchronize(dev));
    clt_sync_reset_count(dev);

    /* Every result is kept until the end, so the allocator asks the driver
     * for new memory while the products are queued: that does not wait. */
    clt_tensor *kept[32];
    double t = now();
    for (int i = 0; i < 32; i++) CHECK(clt_matmul(&kept[i], a, a));
    double queued = now() - t;
    unsigned long long syncs = (unsigned long long)clt_sync_count(dev);
    printf("time to queue 32 matrix products: %.4f sec\n", queued);
    CHECK(clt_synchronize(dev));
    double finished = now() - t;
    printf("time until they all finished:     %.4f sec\n", finished);
    printf("queueing took %.2f%% of the time; synchronization points while queueing: %llu\n",
           100.0 * queued / finished, syncs);
    for (int i = 0; i < 32; i++) clt_tensor_release(kept[i]);
    clt_tensor_release(a);
    return 0;
}
