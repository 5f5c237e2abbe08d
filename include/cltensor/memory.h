/* Device memory: a caching allocator per device and its counters, in the
 * three nested views of the chapter: allocated (live tensors) within reserved
 * (allocated plus the cache) within what the device has. */
#ifndef CLTENSOR_MEMORY_H
#define CLTENSOR_MEMORY_H

#include "export.h"
#include <stdint.h>
#include <stdio.h>
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a tensor's memory is for; lets a report show the four plateaus of
 * training memory. */
typedef enum clt_memory_category {
    CLT_MEM_OTHER = 0,
    CLT_MEM_WEIGHTS = 1,
    CLT_MEM_ACTIVATIONS = 2,
    CLT_MEM_GRADIENTS = 3,
    CLT_MEM_OPTIMIZER = 4,
    CLT_MEM_CATEGORY_COUNT = 5
} clt_memory_category;

CLT_API const char *clt_memory_category_name(clt_memory_category c);

/* Bytes held by live tensors on the device (their exact sizes). */
CLT_API int64_t clt_memory_allocated(clt_device dev);
/* Bytes the allocator holds from the driver: allocated plus the cache. */
CLT_API int64_t clt_memory_reserved(clt_device dev);
/* Highest clt_memory_allocated since start or the last reset. */
CLT_API int64_t clt_memory_max_allocated(clt_device dev);
/* Highest clt_memory_reserved since start or the last reset. */
CLT_API int64_t clt_memory_max_reserved(clt_device dev);
/* Live bytes and peak of one category. */
CLT_API int64_t clt_memory_allocated_category(clt_device dev, clt_memory_category c);
CLT_API int64_t clt_memory_max_allocated_category(clt_device dev, clt_memory_category c);
/* Sets every peak to the current value. */
CLT_API clt_status clt_memory_reset_peak(clt_device dev);
/* Returns to the driver every cached segment that holds no tensor (a free
 * block inside a segment a tensor still uses stays cached). */
CLT_API clt_status clt_memory_empty_cache(clt_device dev);

/* Device-wide memory: *total is the device's global memory; *free is what
 * the device reports free (AMD's free-memory query), for CPU-class devices
 * (see CLT_DEVICE_CLASS in docs/gpu.md) the host's MemAvailable capped at
 * *total (so often equal to *total, whatever is in use), or -1 when the
 * driver cannot tell. */
CLT_API clt_status clt_memory_get_info(clt_device dev, int64_t *free_bytes, int64_t *total_bytes);

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

CLT_API clt_status clt_memory_get_stats(clt_device dev, clt_memory_stats *out);

/* Writes a table of allocated / reserved / peak, overall and per category. */
CLT_API clt_status clt_memory_report(clt_device dev, FILE *out);

/* Caps what the allocator may reserve on the device, in bytes (0 removes the
 * cap). Beyond it allocations fail exactly as if the device were that small.
 * The environment sets caps too: CLT_MEMORY_CAP=512M caps every device, and
 * CLT_MEMORY_CAP="gpu:0=1G,cpu:0=0.5" caps each (a fraction <= 1 is of the
 * device's global memory; suffixes K, M, G, T are powers of 1024, with an
 * optional B or iB; a malformed value fails clt_check_environment). */
CLT_API clt_status clt_memory_set_cap(clt_device dev, int64_t bytes);
/* The same, as a fraction (0 < fraction <= 1) of the device's memory. */
CLT_API clt_status clt_memory_set_fraction(clt_device dev, double fraction);
/* A byte count written as CLT_MEMORY_CAP writes one: digits with an
 * optional decimal fraction, then optionally K, M, G or T (powers of 1024)
 * with an optional B or iB, or a B alone ("80G", "1.5GiB", "4096",
 * "4096B"); no fraction of a device, no sign, no spaces. Anything else, or
 * a count past int64_t, is CLT_ERR_INVALID_ARGUMENT naming the text. */
CLT_API clt_status clt_size_parse(const char *text, int64_t *bytes);

/* ---- Recording: a picture of the step (docs/memory.md) ------------------
 * Between clt_memory_record_start and clt_memory_record_stop the allocator
 * of one device keeps a sample of its counters after every event (an
 * allocation, a free, a tensor retagged, cached segments released), plus
 * one at the start: allocated per category and reserved memory, as
 * clt_memory_get_stats would read them at that moment. Each sample carries
 * the phase marked last: clt_memory_record_mark names a major phase ("step
 * 1 backward"), and while a device records, a model marks each top-level
 * layer's forward and backward under it ("forward net.3", "backward net.3",
 * "recompute net.3-net.4" for a checkpointed segment). PyTorch's
 * torch.cuda.memory._record_memory_history, drawn without a browser by
 * clt_memory_record_write_svg. */
typedef struct clt_memory_record clt_memory_record;

typedef struct clt_memory_sample {
    int64_t category[CLT_MEM_CATEGORY_COUNT]; /* allocated bytes per category; they sum to allocated */
    int64_t allocated, reserved;
    int phase;                                /* index of the phase it is in, -1 before the first mark */
} clt_memory_sample;

/* Starts recording on dev. CLT_ERR_INVALID_ARGUMENT when dev records already. */
CLT_API clt_status clt_memory_record_start(clt_device dev);
/* Starts a major phase on dev's record (label copied, at most 127 bytes
 * kept); a no-op when dev does not record. */
CLT_API clt_status clt_memory_record_mark(clt_device dev, const char *label);
/* Stops recording on dev and hands the record over (free it with
 * clt_memory_record_free). CLT_ERR_INVALID_ARGUMENT when dev does not record. */
CLT_API clt_status clt_memory_record_stop(clt_device dev, clt_memory_record **out);
CLT_API void clt_memory_record_free(clt_memory_record *r);

/* Samples kept (at most CLT_MEMORY_RECORD_MAX; later events are counted in
 * clt_memory_record_dropped, not kept). */
#define CLT_MEMORY_RECORD_MAX 1000000
CLT_API int64_t clt_memory_record_num_samples(const clt_memory_record *r);
CLT_API int64_t clt_memory_record_dropped(const clt_memory_record *r);
/* Sample i, 0 <= i < count; CLT_ERR_INVALID_ARGUMENT otherwise. */
CLT_API clt_status clt_memory_record_sample(const clt_memory_record *r, int64_t i, clt_memory_sample *out);
/* Phases marked, and phase i's label: "major" or "major: minor" (the
 * record owns it; NULL out of range). */
CLT_API int clt_memory_record_num_phases(const clt_memory_record *r);
CLT_API const char *clt_memory_record_phase(const clt_memory_record *r, int i);
/* The sample with the highest allocated; of equal ones in a row (a tensor
 * made, then retagged), the last; -1 when empty. */
CLT_API int64_t clt_memory_record_peak(const clt_memory_record *r);
/* The device's memory cap when recording started (0: none), and its name. */
CLT_API int64_t clt_memory_record_cap(const clt_memory_record *r);
CLT_API const char *clt_memory_record_device(const clt_memory_record *r);

/* Draws the record as an SVG file: allocated memory stacked by category
 * against the event index (weights at the bottom, then optimizer state,
 * gradients, activations, other), reserved memory as a line, the cap as a
 * dashed line when there is one, the major phases as labelled bands, and
 * the peak marked and named with its phase. Written as every file the
 * library writes (atomically, the old file whole on failure; a link or a
 * non-regular target refused); CLT_ERR_IO naming the path. */
CLT_API clt_status clt_memory_record_write_svg(const clt_memory_record *r, const char *path);

#ifdef __cplusplus
}
#endif
#endif
