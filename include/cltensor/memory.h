/* Device memory: a caching allocator per device and its counters, in the
 * three nested views of the chapter: allocated (live tensors) within reserved
 * (allocated plus the cache) within what the device has. */
#ifndef CLTENSOR_MEMORY_H
#define CLTENSOR_MEMORY_H

#include <stdint.h>
#include <stdio.h>
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a tensor's memory is for; lets a report show the four plateaus of
 * training memory. */
typedef enum clt_category {
    CLT_MEM_OTHER = 0,
    CLT_MEM_WEIGHTS = 1,
    CLT_MEM_ACTIVATIONS = 2,
    CLT_MEM_GRADIENTS = 3,
    CLT_MEM_OPTIMIZER = 4,
    CLT_MEM_CATEGORY_COUNT = 5
} clt_category;

const char *clt_category_name(clt_category c);

/* Bytes held by live tensors on the device (their exact sizes). */
int64_t clt_memory_allocated(clt_device dev);
/* Bytes the allocator holds from the driver: allocated plus the cache. */
int64_t clt_memory_reserved(clt_device dev);
/* Highest clt_memory_allocated since start or the last reset. */
int64_t clt_max_memory_allocated(clt_device dev);
/* Highest clt_memory_reserved since start or the last reset. */
int64_t clt_max_memory_reserved(clt_device dev);
/* Live bytes and peak of one category. */
int64_t clt_memory_allocated_category(clt_device dev, clt_category c);
int64_t clt_max_memory_allocated_category(clt_device dev, clt_category c);
/* Sets every peak to the current value. */
clt_status clt_reset_peak_memory_stats(clt_device dev);
/* Returns cached blocks that no tensor uses to the driver. */
clt_status clt_empty_cache(clt_device dev);

/* Device-wide memory: *total is the device's global memory; *free is what
 * the device reports free (AMD's free-memory query), for CPU-class devices
 * (see CLT_DEVICE_CLASS in docs/gpu.md) the host's MemAvailable capped at
 * *total (so often equal to *total, whatever is in use), or -1 when the
 * driver cannot tell. */
clt_status clt_mem_get_info(clt_device dev, int64_t *free_bytes, int64_t *total_bytes);

/* Counts of the allocator's work, for tests and tuning. */
typedef struct clt_memory_stats {
    int64_t allocated, reserved, peak_allocated, peak_reserved;
    int64_t category_allocated[CLT_MEM_CATEGORY_COUNT];
    int64_t category_peak[CLT_MEM_CATEGORY_COUNT];
    int64_t cap;              /* the memory cap in bytes, 0 when none */
    uint64_t driver_allocs;   /* buffers obtained from the driver */
    uint64_t driver_frees;    /* buffers returned to the driver */
    uint64_t cache_hits;      /* requests served from the cache */
    uint64_t splits;          /* cached blocks split to serve a smaller request */
    uint64_t oom_retries;     /* times the cache was emptied to retry a failed request */
    int64_t segments;         /* driver buffers held now */
    int64_t cached_blocks;    /* free blocks in the cache now */
} clt_memory_stats;

clt_status clt_memory_stats_get(clt_device dev, clt_memory_stats *out);

/* Writes a table of allocated / reserved / peak, overall and per category. */
clt_status clt_memory_report(clt_device dev, FILE *out);

/* Caps what the allocator may reserve on the device, in bytes (0 removes the
 * cap). Beyond it allocations fail exactly as if the device were that small.
 * The environment sets caps too: CLT_MEMORY_CAP=512M caps every device, and
 * CLT_MEMORY_CAP="gpu:0=1G,cpu:0=0.5" caps each (a fraction <= 1 is of the
 * device's global memory; suffixes K, M, G, T are powers of 1024, with an
 * optional B or iB; a malformed value fails clt_check_environment). */
clt_status clt_set_memory_cap(clt_device dev, int64_t bytes);
/* The same, as a fraction (0 < fraction <= 1) of the device's memory. */
clt_status clt_set_memory_fraction(clt_device dev, double fraction);

#ifdef __cplusplus
}
#endif
#endif
