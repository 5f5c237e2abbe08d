/* Internal: compiled kernels per device, and launching them. */
#ifndef CLT_KERNELS_PROGRAM_H
#define CLT_KERNELS_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "../tensor/tensor_internal.h"

/* The kernel `name` of cl/<program>.cl on a slot's device. The program is
 * built once per device per process; its binary is cached on disk (on pocl
 * only when asked: clt__program_prepare's save or clt__program_save_binaries). */
clt_status clt__kernel(int slot, const char *program, const char *name, cl_kernel *out);
/* The same, from the program built with extra build options (such as
 * "-DTM=8 -DTN=16"; NULL or "" for none). Each option string is a program
 * of its own, built once per device per process and cached on disk. */
clt_status clt__kernel_opts(int slot, const char *program, const char *options, const char *name, cl_kernel *out);

/* The on-disk cache directory ($CLT_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
 * else ~/.cache/cltensor) into buf; 0 when caching is off (CLT_CACHE_DIR=off),
 * none of those is set (no HOME either) or it does not fit. */
int clt__cache_dir(char *buf, size_t len);

/* A hash of what makes a slot's compiled code and timings its own: platform
 * version, device name, driver and device versions. Cache files are keyed
 * by it (program binaries, tuned tiles), so a new driver starts afresh. */
uint64_t clt__device_key(int slot);

/* Builds (or loads) program cl/<program>.cl on a slot now rather than at
 * its first launch. save: also write its binary to the on-disk cache if it
 * is not there, even on drivers where fetching a binary compiles every
 * kernel of the program again (pocl; otherwise binaries are written as
 * programs are built). */
clt_status clt__program_prepare(int slot, const char *program, int save);
/* on: every program this thread builds from now on (variants with extra
 * options too) has its binary written as with clt__program_prepare's save;
 * 0 restores the default. */
void clt__program_save_binaries(int on);
/* 1 when program cl/<program>.cl (without extra options) is built on the slot. */
int clt__program_built(int slot, const char *program);
/* The kernel programs (cl/ sources) and their names, i in [0, count). */
int clt__program_count(void);
const char *clt__program_name(int i);

/* Process-wide counts since the start: programs compiled from source (and
 * the seconds in clBuildProgram), loaded from the binary cache, and
 * binaries written (and the seconds fetching and writing them). */
typedef struct clt__program_stats {
    int built, loaded, saved;
    double build_seconds, save_seconds;
} clt__program_stats;
void clt__program_get_stats(clt__program_stats *out);

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
