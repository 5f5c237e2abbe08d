/* Internal: compiled kernels per device, and launching them. */
#ifndef CLT_KERNELS_PROGRAM_H
#define CLT_KERNELS_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "../device/replay.h"
#include "../tensor/tensor_internal.h"

/* The kernel `name` of cl/<program>.cl on a slot's device. The program is
 * built once per device per process; its binary is cached on disk (on pocl
 * only when asked: clt__program_prepare's save or clt__program_save_binaries).
 * Here and in the launches below, `name` may be any string, a buffer the
 * caller reuses too: the kernel table, traces and replay keep copies. */
clt_status clt__kernel(int slot, const char *program, const char *name, cl_kernel *out);
/* The same, from the program built with extra build options (such as
 * "-DTM=8 -DTN=16"; NULL or "" for none). Each option string is a program
 * of its own, built once per device per process and cached on disk. */
clt_status clt__kernel_opts(int slot, const char *program, const char *options, const char *name, cl_kernel *out);

/* The key of a cache entry (src/core/cache.h) made on a slot: a SHA-256 of
 * kind ("program", "tune"), the platform's name and version, the device's
 * name and version, the driver version, build options and source (NULL for
 * none), so a new driver or kernel starts afresh. */
void clt__cache_key(int slot, const char *kind, const char *options, const char *source, uint8_t key[32]);

/* For tests: the key and path of the cache entry of cl/<program>.cl built
 * with extra options (NULL for none) on a slot. Returns 1 when the cache
 * directory exists and is trusted, 0 when there is no cache, -1 when the
 * directory is not used. Creates nothing. */
int clt__program_cache_entry(int slot, const char *program, const char *extra, uint8_t key[32], char *path,
                             size_t len);

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
 * the seconds in clBuildProgram), loaded from the binary cache, binaries
 * written (and the seconds fetching and writing them), binaries that were
 * to be written and were not (failure: the last reason, naming the
 * program), and cache entries rejected (damaged, planted, not buildable or
 * lacking a kernel: reported by clt__warn, removed and built from source). */
typedef struct clt__program_stats {
    int built, loaded, saved, not_saved, rejected;
    double build_seconds, save_seconds;
    char failure[1200];
} clt__program_stats;
void clt__program_get_stats(clt__program_stats *out);

/* clt__arg and CLT_ARG, a kernel argument, are device/replay.h's. */

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
