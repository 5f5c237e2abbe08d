/* Status codes and error messages. Every fallible call returns a clt_status;
 * on failure clt_last_error() holds a message for the calling thread. */
#ifndef CLTENSOR_STATUS_H
#define CLTENSOR_STATUS_H

#include "export.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Grouped by cause: 1xx the caller's arguments, 2xx the device and its
 * resources, 3xx files and data, 4xx training. */
typedef enum clt_status {
    CLT_OK = 0,

    CLT_ERR_INVALID_ARGUMENT = 100, /* NULL, out-of-range or contradictory argument */
    CLT_ERR_SHAPE = 101,            /* shapes that do not fit the operation */
    CLT_ERR_DEVICE_MISMATCH = 102,  /* operands on different devices */
    CLT_ERR_BUSY = 103,             /* the tensor is in flight (a non-blocking copy reads it) */
    CLT_ERR_SYNC = 104,             /* a synchronization point was hit while CLT_SYNC_DEBUG=error */

    CLT_ERR_NO_DEVICE = 200,        /* the named device does not exist */
    CLT_ERR_OUT_OF_MEMORY = 201,    /* the device (or its memory cap) is full */
    CLT_ERR_OPENCL = 202,           /* the OpenCL runtime failed; the message names the call */
    CLT_ERR_UNSUPPORTED = 203,      /* the device or build lacks a feature */

    CLT_ERR_IO = 300,               /* a file could not be read or written */
    CLT_ERR_FORMAT = 301,           /* a file or data stream is malformed */

    CLT_ERR_DIVERGED = 400          /* training diverged: a non-finite loss, or every step skipped */
} clt_status;

/* A constant name such as "CLT_ERR_SHAPE"; "unknown status" for others. */
CLT_API const char *clt_status_string(clt_status s);

/* The calling thread's message for its last failed call ("" if none). The
 * pointer, to a per-thread buffer, stays valid while the thread lives; its
 * text is replaced by the thread's next failing cltensor call (and by
 * clt_set_error and clt_clear_error). */
CLT_API const char *clt_last_error(void);

/* Forgets the calling thread's last message. */
CLT_API void clt_clear_error(void);

/* Sets the calling thread's message (printf format) and returns s: for
 * callbacks cltensor calls, such as a clt_collective's allreduce_sum, whose
 * failure message the calling cltensor function then reports. */
CLT_API clt_status clt_set_error(clt_status s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Warnings: what cltensor works around and goes on with, such as a cache
 * directory it does not trust or a damaged cache entry it rebuilds. The
 * library never prints: each warning is one line of text (no newline)
 * passed to the handler set here, in the thread that met it, with `user`.
 * None is set at first, and warnings are then dropped; `clt` prints them on
 * stderr as "clt: warning: ...". NULL removes the handler. The handler must
 * not call back into cltensor. */
typedef void (*clt_warning_handler)(const char *message, void *user);
CLT_API void clt_set_warning_handler(clt_warning_handler handler, void *user);

#ifdef __cplusplus
}
#endif
#endif
