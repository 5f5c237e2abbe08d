/* Internal: the one place that knows how to name a resource limit in a
 * message. When the OpenCL loader, its compiler or a host allocation fails
 * under a low `ulimit`, the limit (not a missing driver or a broken kernel)
 * is the likely cause, and the message says which limit and its value. */
#ifndef CLT_CORE_LIMITS_H
#define CLT_CORE_LIMITS_H

#include <stddef.h>

/* Below these a limit counts as low: the ICD loader and pocl map large
 * libraries (its LLVM compiler: about 500 MiB of address space) and open
 * files of their own. */
#define CLT__LOW_MEMORY_LIMIT (4ull << 30)
#define CLT__LOW_FILE_LIMIT 64

typedef enum clt__limit_kind {
    CLT__LIMIT_NONE = 0,
    CLT__LIMIT_FILES = 1, /* RLIMIT_NOFILE, ulimit -n */
    CLT__LIMIT_MEMORY = 2 /* RLIMIT_AS (ulimit -v) or RLIMIT_DATA (ulimit -d) */
} clt__limit_kind;

/* The resource limit most likely behind a failure, among the kinds in
 * `kinds` (a mask of clt__limit_kind): the open-file limit when set and
 * below CLT__LOW_FILE_LIMIT, or set at all when e is EMFILE; else the
 * address-space, then the data-segment limit when set and below
 * CLT__LOW_MEMORY_LIMIT, or set at all when e is ENOMEM. Writes its name
 * and value to buf ("the address-space limit of 195 MiB (ulimit -v)", "the
 * open-file limit of 3 (ulimit -n)") and returns its kind; with none,
 * writes "" and returns CLT__LIMIT_NONE. e: an errno, or 0. */
clt__limit_kind clt__limit_named(int e, int kinds, char *buf, size_t len);

#endif
