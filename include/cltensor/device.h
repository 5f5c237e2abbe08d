/* Devices: small values, free to construct whether or not the hardware
 * exists. The check happens when data is placed on one. */
#ifndef CLTENSOR_DEVICE_H
#define CLTENSOR_DEVICE_H

#include "export.h"
#include <stddef.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clt_device_type {
    CLT_DEVICE_CPU = 0, /* index counts CPU OpenCL devices over all platforms */
    CLT_DEVICE_GPU = 1, /* index counts GPU and accelerator devices over all platforms */
    CLT_DEVICE_AT = 2,  /* platform and index name an OpenCL platform and its device */
    CLT_DEVICE_PINNED = 3, /* page-locked host memory ("pinned"; see cltensor/async.h) */
    CLT_DEVICE_PLAN = 4    /* a planning device (clt_plan_device): platform is the type of the device it
                              stands for, index that device's index; platform CLT_DEVICE_PLAN: a
                              described device (clt_plan_device_describe), index its number */
} clt_device_type;

typedef struct clt_device {
    clt_device_type type;
    int index;
    int platform; /* CLT_DEVICE_AT: the platform; CLT_DEVICE_PLAN: the type of the device planned for */
} clt_device;

/* The first CPU device ("cpu:0"). */
CLT_API clt_device clt_cpu(void);
/* The i-th GPU ("gpu:i"). */
CLT_API clt_device clt_gpu(int i);
/* Device `device_index` of OpenCL platform `platform_index`, as `clt devices`
 * lists them (P:D). */
CLT_API clt_device clt_device_at(int platform_index, int device_index);

/* Number of GPUs present (0 when there are none or OpenCL is unavailable).
 * With CLT_CPU_AS_GPU=1 (or =only, which adds no cpu:0) in the environment,
 * CPU OpenCL devices are presented as GPUs, so a CPU-only machine (pocl) can
 * run multi-GPU code paths. */
CLT_API int clt_num_gpus(void);
/* gpu(i) if it exists, else cpu(). */
CLT_API clt_device clt_try_gpu(int i);
/* Writes up to `max` devices: every GPU, or cpu() alone when there is none.
 * Returns how many there are (which may exceed max). */
CLT_API int clt_try_all_gpus(clt_device *out, int max);

/* The planning device of `of` ("plan:gpu:0"; "plan:pinned" for pinned
 * memory): a device with of's limits, class, GEMM tile and memory cap
 * (CLT_MEMORY_CAP's value for of, or clt_memory_set_cap on the planning
 * device itself), on which tensors are created, viewed, released and
 * counted by the allocator's own code and placement policy, with no driver
 * buffer behind them, and every kernel, fill and copy is skipped: a program
 * run there allocates what it would on `of` (clt_memory_get_stats) and
 * passes the same synchronization points (clt_sync_count), each waiting for
 * nothing. Data are never computed: reading a tensor back (clt_to_host,
 * clt_item) gives zeros, pinned memory on "plan:pinned" holds what the host
 * wrote to it, a copy from a real device to a planning one is skipped like
 * any other (clt_model_to a planning device) and one the other way is
 * refused. A device given by P:D is planned for under its name; one that
 * does not exist gives a planning device that does not exist either. */
CLT_API clt_device clt_plan_device(clt_device of);

/* A device described rather than present, to plan for (clt_plan_device_describe):
 * what the allocator, the placement policy and the class-dependent choices
 * read of a device, and nothing else. */
typedef struct clt_device_description {
    clt_device_type type;               /* CLT_DEVICE_CPU or CLT_DEVICE_GPU: the class of every choice that
                                           depends on the kind of device (CLT_DEVICE_CLASS does not change
                                           it; CLT_DENSE still picks the products' implementation) */
    unsigned long long global_mem_bytes; /* the device's memory, 1 MiB to CLT_PLAN_MAX_DESCRIBED_BYTES:
                                            the default budget */
    unsigned long long max_alloc_bytes;  /* the largest single buffer, 1 MiB to global_mem_bytes */
    unsigned long long max_work_group;   /* work-items per work-group, 1 to 65536 */
    unsigned float_width;                /* native float vector width: 0 (unknown), 1, 2, 4, 8 or 16; it
                                            picks the CPU products' default tile unless tile_m is given */
    long long cap_bytes;                 /* memory cap, 0 for none, at most global_mem_bytes (CLT_MEMORY_CAP
                                            does not apply) */
    unsigned long long l1_cache_bytes;   /* the level 1 data cache, 1 KiB to 1 GiB */
    unsigned long long l2_cache_bytes;   /* the level 2 data cache, 1 KiB to 1 GiB: the two caches the CPU
                                            products' cache blocking and packing follow, and so the size of
                                            their packed panels (this machine's devices follow its CPU's) */
    int tile_m, tile_n;                  /* the CPU products' default tile, rows and columns of the result
                                            one work-item computes: 1 to 32 rows by 8, 16 or 32 columns;
                                            0, 0 for the one float_width picks */
    char label[11];                      /* its name is "plan:" + label: up to 10 letters, digits, '-', '_'
                                            or '.', not pinned, cpu or gpu in any case (reserved: plan:pinned
                                            is pinned memory's planning device); "" for "plan:gpu(80G)", its
                                            type and memory (or "plan:gpu#N", its number N, where that is
                                            taken or too long) */
} clt_device_description;

/* The most described devices a process holds (clt_plan_device_describe). */
#define CLT_PLAN_MAX_DESCRIBED 8
/* The most memory a described device has: 1 PiB. */
#define CLT_PLAN_MAX_DESCRIBED_BYTES (1ull << 50)

/* A described device of `type` (CLT_DEVICE_CPU, else CLT_DEVICE_GPU): 16 GiB
 * (a GPU) or 8 GiB (a CPU) of memory, a quarter of it the largest buffer,
 * 1024 (GPU) or 4096 (CPU) work-items per group, float width 1 (GPU) or 8
 * (CPU), no cap, 32 KiB of L1 and 1 MiB of L2 cache, the tile its float
 * width picks, no label. */
CLT_API clt_device_description clt_device_description_default(clt_device_type type);

/* *out = a planning device (as clt_plan_device gives) for hardware that
 * need not be present: its limits, class, memory and cap are d's, and no
 * OpenCL driver is asked anything about it, so it works on a machine with
 * no OpenCL platform at all. Tensors placed on it are counted by the
 * allocator's own code; kernels are skipped, so its figures are memory and
 * synchronization points, never speed. clt_plan_device(*out) is *out. The
 * same description again gives the same device; a process holds at most
 * CLT_PLAN_MAX_DESCRIBED different ones (CLT_ERR_UNSUPPORTED after that).
 * CLT_ERR_INVALID_ARGUMENT, naming the field, for a value out of range, or
 * a label already naming another description. */
CLT_API clt_status clt_plan_device_describe(const clt_device_description *d, clt_device *out);

/* 1 if the device exists on this machine. */
CLT_API int clt_device_exists(clt_device dev);
/* 1 if a and b name the same device (gpu:0 and its P:D are equal). */
CLT_API int clt_device_equal(clt_device a, clt_device b);

/* "cpu:0", "gpu:1"; a device given by P:D is named by what it is. A device
 * that does not exist is still named ("gpu:7"). Returns CLT_ERR_INVALID_ARGUMENT
 * when buf is NULL or too small. */
CLT_API clt_status clt_device_name(clt_device dev, char *buf, size_t len);

/* Parses "cpu", "cpu:0", "gpu", "gpu:1", "pinned" or "P:D" (lower case,
 * indices of at most 9 digits). */
CLT_API clt_status clt_device_parse(const char *text, clt_device *out);

/* The default device of the calling thread: set by clt_device_set_default,
 * else CLT_DEVICE=P:D (or a name) from the environment, else cpu(), or the
 * first device listed when there is no cpu:0 (CLT_CPU_AS_GPU=only); the
 * same when CLT_DEVICE is malformed, which clt_check_environment reports. */
CLT_API clt_device clt_device_get_default(void);
CLT_API void clt_device_set_default(clt_device dev);

/* Checks every CLT_* environment variable the library reads (the README's
 * table; docs/reliability.md has the grammar). The first call decides and
 * later calls repeat its answer; every call that uses a device makes it
 * first, so a malformed value fails that call. CLT_ERR_INVALID_ARGUMENT
 * naming the variable, its value and what it accepts. */
CLT_API clt_status clt_check_environment(void);

/* What `clt devices` prints about one device. */
typedef struct clt_device_info {
    int platform_index, device_index;
    char name[64];          /* cltensor name, e.g. "gpu:0" */
    char type[16];          /* "cpu", "gpu", "accelerator" */
    char vendor[128];
    char device_name[128];
    char platform_name[128];
    char opencl_version[128];
    char driver_version[64];
    unsigned compute_units;
    unsigned long long global_mem_bytes;
    unsigned long long max_alloc_bytes;
    int has_fp16, has_fp64;
    int presented_as_gpu;   /* a CPU device shown as a GPU by CLT_CPU_AS_GPU */
} clt_device_info;

/* The device list (what `clt devices` prints): its number of entries, every
 * device cltensor sees on every platform, plus cpu:0 again with
 * CLT_CPU_AS_GPU=1 ("pinned" is not listed). */
CLT_API int clt_device_list_num_entries(void);
/* Information on the i-th entry of that list. */
CLT_API clt_status clt_device_list_info(int i, clt_device_info *out);
/* The device value for the i-th entry. */
CLT_API clt_status clt_device_list_entry(int i, clt_device *out);

/* Waits until every command queued on the device has finished (a
 * synchronization point, see cltensor/async.h). A device never used is
 * already idle. */
CLT_API clt_status clt_synchronize(clt_device dev);
/* clt_synchronize on every device in use. */
CLT_API clt_status clt_synchronize_all(void);

#ifdef __cplusplus
}
#endif
#endif
