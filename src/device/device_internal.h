/* Internal: the table of devices ("slots") behind clt_device values, with
 * their lazily created OpenCL contexts and in-order queues. The table is
 * made once (clt__slot_count) and its fields never change after, except
 * the description's fields of a described device's slot, written once by
 * clt_plan_device_describe before the slot is published: a loop over every
 * slot reads them only where clt__slot_in_use (or a device value that
 * resolves) says the slot is published. */
#ifndef CLT_DEVICE_INTERNAL_H
#define CLT_DEVICE_INTERNAL_H

#include "../core/error.h"
#include "cltensor/device.h"

typedef struct clt__slot {
    cl_platform_id platform;
    cl_device_id device;
    int platform_index, device_index; /* P:D as `clt devices` lists them */
    clt_device_type type;             /* CLT_DEVICE_CPU, CLT_DEVICE_GPU as presented, or CLT_DEVICE_PINNED */
    int type_index;                   /* i in cpu:i / gpu:i */
    int presented_as_gpu;
    int cpu_type;                     /* OpenCL reports CL_DEVICE_TYPE_CPU (whatever it is presented as) */
    int context_group;                /* slots of one group share one context */
    cl_ulong max_alloc, global_mem, base_align_bytes;
    size_t max_work_group;            /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_uint float_width;              /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, 0 when unknown */
    cl_uint compute_units;            /* CL_DEVICE_MAX_COMPUTE_UNITS, 0 when unknown (a described device) */
    char name[16];                    /* "gpu:1", "plan:gpu:1", "plan:gpu(80G)" */
    int plans_for;                    /* a planning device: the slot it stands for (itself when described);
                                         -1 on a real one */
    int described;                    /* a described device (clt_plan_device_describe), or the planning
                                         pinned memory of a machine without one: platform and device are
                                         NULL, and nothing asks the driver about it */
    int64_t described_cap;            /* a described device's cap (0: none), in place of CLT_MEMORY_CAP */
    size_t cache_l1, cache_l2;        /* a described device's data caches; 0 on the others, whose CPU
                                         products follow this machine's (ops/gemm_cpu.c) */
    int tile_m, tile_n;               /* a described device's default CPU tile; 0 when its float width picks it */
} clt__slot;

/* The data cache sizes that are believed, of this machine's CPU or of a
 * described device: 1 KiB to 1 GiB. */
#define CLT__CACHE_MIN_BYTES ((size_t)1024)
#define CLT__CACHE_MAX_BYTES ((size_t)1 << 30)

/* 1 when cl/gemm_cpu.cl builds with tm x tn (rows x columns of the result
 * one work-item computes): 1 to 32 rows, 8, 16 or 32 columns. */
int clt__cpu_tile_valid(int tm, int tn);

/* Number of slots (enumerates on first use; 0 when OpenCL has no platform). */
int clt__slot_count(void);
const clt__slot *clt__slot_get(int slot);

/* Finds the slot a device names; CLT_ERR_NO_DEVICE with a message otherwise. */
clt_status clt__resolve(clt_device dev, int *slot);
/* The device value that names a slot in its own type (gpu:i, cpu:i). */
clt_device clt__slot_device(int slot);

/* The slot's context and queue, created on first use (the queue by
 * queue.c, with profiling while a trace runs). */
clt_status clt__slot_context(int slot, cl_context *out);
clt_status clt__slot_queue(int slot, cl_command_queue *out);
/* The slot's queue for a command that has passed clt__replay_take
 * (replay.h); clt__slot_queue first tells the replay of a command it does
 * not see (clt__sync_before_command). */
clt_status clt__slot_queue_replayable(int slot, cl_command_queue *out);
/* The table of queues (device.c) that clt__slot_queue fills: the slot's
 * queue, or NULL while none has been made (a planning slot never has one);
 * and the making of it, with props in context ctx, unless another thread
 * made it first (*out is the slot's queue either way). */
cl_command_queue clt__slot_queue_made(int slot);
clt_status clt__slot_queue_make(int slot, cl_context ctx, cl_command_queue_properties props, cl_command_queue *out);
/* 1 when the slot's queue exists already (the device has been used). */
int clt__slot_in_use(int slot);
/* 1 when two slots share a context, so buffers of one are valid on the other's queue. */
int clt__same_context(int a, int b);

/* *out = 1 when the slot's device takes the GPU-class branch of every
 * decision that depends on the kind of device (dense implementation,
 * reductions, float16 path, tuning, free-memory source): a described
 * device's type, else CLT_DEVICE_CLASS=gpu or cpu when set, else whether
 * OpenCL reports a type other than CPU (a CPU presented as a GPU by
 * CLT_CPU_AS_GPU is still CPU-class). CLT_DENSE, when
 * set, overrides it for the dense implementation and the float16 path
 * (clt__dense_cpu). A malformed CLT_DEVICE_CLASS counts as unset here;
 * clt__resolve reports it. */
clt_status clt__gpu_class(int slot, int *out);

/* The slot of pinned host memory ("pinned"), or -1 when there is no device. */
int clt__pinned_slot(void);
/* The pinned memory beside a slot: the planning twin of "pinned" for a
 * planning device, else clt__pinned_slot(). */
int clt__pinned_slot_of(int slot);
/* 1 when the slot holds pinned host memory (the real one or its planning twin). */
int clt__slot_is_pinned(int slot);

/* Planning devices (clt_plan_device): every slot, pinned memory included,
 * has a twin with its limits, class and cap, on which tensors are placed
 * and counted by the allocator's own policy with no driver buffer, and
 * every kernel, fill and transfer is skipped at the point that would enqueue
 * it (kernels/program.c, tensor/tensor.c, copy.c, ops/dense.c,
 * ops/check.c); synchronization points are counted as on the device and
 * wait for nothing; a read back gives zeros. A planning slot has no context
 * and no queue: clt__slot_context and clt__slot_queue refuse it, so a
 * command that missed its check fails instead of running. */
int clt__slot_plans(int slot);

#endif
