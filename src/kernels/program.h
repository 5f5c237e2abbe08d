/* Internal: compiled kernels per device, and launching them. */
#ifndef CLT_KERNELS_PROGRAM_H
#define CLT_KERNELS_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "../tensor/tensor_internal.h"

/* The kernel `name` of cl/<program>.cl on a slot's device. The program is
 * built once per device per process; its binary is cached on disk. */
clt_status clt__kernel(int slot, const char *program, const char *name, cl_kernel *out);
/* The same, from the program built with extra build options (such as
 * "-DTM=8 -DTN=16"; NULL or "" for none). Each option string is a program
 * of its own, built once per device per process and cached on disk. */
clt_status clt__kernel_opts(int slot, const char *program, const char *options, const char *name, cl_kernel *out);

/* The on-disk cache directory ($CLT_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
 * else ~/.cache/cltensor) into buf; 0 when caching is off or it does not fit. */
int clt__cache_dir(char *buf, size_t len);

/* A hash of what makes a slot's compiled code and timings its own: platform
 * version, device name, driver and device versions. Cache files are keyed
 * by it (program binaries, tuned tiles), so a new driver starts afresh. */
uint64_t clt__device_key(int slot);

typedef struct clt__arg {
    size_t size;
    const void *value;
} clt__arg;

#define CLT_ARG(x) ((clt__arg){sizeof(x), &(x)})

/* Sets the arguments and enqueues kernel `name` of cl/<program>.cl over a
 * `dims`-dimensional range (`local` NULL lets the driver choose). The
 * written tensor (may be NULL) records the launch as its last write. */
clt_status clt__launch(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                       int dims, const size_t *global, const size_t *local, clt_tensor *written);
/* clt__launch of a kernel built with extra build options (see clt__kernel_opts). */
clt_status clt__launch_opts(int slot, const char *program, const char *options, const char *name, int nargs,
                            const clt__arg *args, int dims, const size_t *global, const size_t *local,
                            clt_tensor *written);
/* The common case: one dimension of n work-items, rounded up to whole
 * work-groups of up to 256, so the kernel checks its bound. */
clt_status clt__launch1(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                        size_t n, clt_tensor *written);

#endif
