/* The chapter's pinned-memory cell (section 5.7.4): the time per copy of a
 * typical image batch (16x3x224x224 float32) to the device from ordinary
 * (pageable) host memory, and from pinned memory without blocking.
 *
 *   pinned [--copies N] [--device NAME]
 *
 * A pageable copy first moves the batch into a staging buffer; a pinned
 * tensor (device "pinned", MXNet's cpu_pinned()) is read by the transfer
 * directly, and clt_to_async returns at once. The source stays in flight
 * until the copy completes: writing it meanwhile fails with CLT_ERR_BUSY. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

#include "example.h"

static const int64_t shape[] = {16, 3, 224, 224};

/* Milliseconds per copy of host data to dev: pageable (from a malloc'd
 * array) when pinned is NULL, else from the pinned tensor without blocking. */
static double copy_time(clt_device dev, const float *pageable, clt_tensor *pinned, int n)
{
    CHECK(clt_synchronize_all());
    double t = now();
    for (int i = 0; i < n; i++) {
        clt_tensor *d;
        if (pinned) CHECK(clt_to_async(&d, pinned, dev, NULL));
        else CHECK(clt_from_host(&d, dev, CLT_FLOAT32, 4, shape, pageable));
        clt_tensor_release(d);
    }
    CHECK(clt_synchronize_all());
    return (now() - t) / n * 1e3;
}

int main(int argc, char **argv)
{
    clt_device dev = clt_try_gpu(0);
    int n = 100;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--copies") == 0 && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            CHECK(clt_device_parse(argv[++i], &dev));
        } else {
            fprintf(stderr, "usage: %s [--copies N] [--device NAME]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1) n = 1;
    size_t count = 16 * 3 * 224 * 224;
    float *x = malloc(count * sizeof *x);
    if (!x) return 1;
    for (size_t i = 0; i < count; i++) x[i] = (float)(i % 251) / 251.0f;
    clt_tensor *x_pinned;
    CHECK(clt_from_host(&x_pinned, clt_pinned(), CLT_FLOAT32, 4, shape, x));

    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("copies of a 16x3x224x224 float32 batch (%.1f MB) to %s, %d each\n", (double)count * 4 / 1e6, name, n);
    copy_time(dev, x, NULL, 2); /* warm up: device memory cached */
    copy_time(dev, NULL, x_pinned, 2);
    printf("pageable copy:              %.3f ms\n", copy_time(dev, x, NULL, n));
    printf("pinned, non-blocking copy:  %.3f ms\n", copy_time(dev, NULL, x_pinned, n));

    /* The chapter's warning, turned into an error: the source is in flight. */
    clt_tensor *d;
    CHECK(clt_to_async(&d, x_pinned, dev, NULL));
    clt_status s = clt_tensor_write(x_pinned, x, count * sizeof *x, 0);
    printf("writing the pinned source while its copy may run: %s\n",
           s == CLT_OK ? "CLT_OK (the copy had already finished)" : clt_status_string(s));
    clt_tensor_release(d);
    clt_tensor_release(x_pinned);
    free(x);
    return 0;
}
