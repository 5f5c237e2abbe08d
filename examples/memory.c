/* The chapter's memory cells (section 5.7.3) in C: a gibibyte of zeros,
 * then allocated (live tensors) and reserved (allocated plus the cache)
 * after creating it, deleting it and emptying the cache, and the device-wide
 * view of clt_memory_get_info. Uses CLT_DEVICE when set, else try_gpu(). */
#include <stdio.h>
#include <stdlib.h>

#include <cltensor.h>

#include "example.h"

#define MIB (1024.0 * 1024.0)

static void report(clt_device dev, const char *tag)
{
    printf("%s: %7.1f MiB allocated, %7.1f MiB reserved\n", tag, clt_memory_allocated(dev) / MIB,
           clt_memory_reserved(dev) / MIB);
}

/* The outermost view, device-wide as nvidia-smi sees it. For a CPU device
 * (pocl) free memory is the host's available memory, capped at the device
 * total, so it moves only when the host runs short. */
static void device_report(clt_device dev, const char *tag)
{
    int64_t free_bytes, total;
    CHECK(clt_memory_get_info(dev, &free_bytes, &total));
    if (free_bytes < 0)
        printf("%s: device free memory unknown (the driver cannot tell), %.1f MiB total\n", tag, total / MIB);
    else
        printf("%s: device has %.1f MiB free of %.1f MiB total\n", tag, free_bytes / MIB, total / MIB);
}

int main(void)
{
    clt_device dev = getenv("CLT_DEVICE") ? clt_device_get_default() : clt_try_gpu(0);
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("device %s\n", name);

    device_report(dev, "baseline          ");
    clt_tensor *big;
    int64_t shape[] = {256, 1024, 1024}; /* 1 GiB of float32 */
    CHECK(clt_zeros(&big, dev, CLT_FLOAT32, 3, shape));
    CHECK(clt_synchronize(dev));
    report(dev, "after creating big");
    clt_tensor_release(big);
    report(dev, "after deleting it ");
    CHECK(clt_memory_empty_cache(dev));
    report(dev, "after empty_cache ");
    device_report(dev, "after empty_cache ");
    printf("peak allocated: %.1f MiB\n\n", clt_memory_max_allocated(dev) / MIB);
    CHECK(clt_memory_report(dev, stdout));
    return 0;
}
