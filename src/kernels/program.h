/* Internal: compiled kernels per device, and launching them. */
#ifndef CLT_KERNELS_PROGRAM_H
#define CLT_KERNELS_PROGRAM_H

#include <stddef.h>
#include "../tensor/tensor_internal.h"

/* The kernel `name` of cl/<program>.cl on a slot's device. The program is
 * built once per device per process; its binary is cached on disk. */
clt_status clt__kernel(int slot, const char *program, const char *name, cl_kernel *out);

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
/* The common case: one dimension of n work-items. */
clt_status clt__launch1(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                        size_t n, clt_tensor *written);

#endif
