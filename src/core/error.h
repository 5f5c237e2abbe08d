/* Internal: setting the per-thread error message. */
#ifndef CLT_CORE_ERROR_H
#define CLT_CORE_ERROR_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include "cltensor/status.h"

#if defined(__GNUC__)
#define CLT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLT_PRINTF(a, b)
#endif

/* Records the message for this thread and returns s. */
clt_status clt__fail(clt_status s, const char *fmt, ...) CLT_PRINTF(2, 3);
/* Records "<what>: <CL error name> (<code>)" and returns the matching status
 * (CLT_ERR_OUT_OF_MEMORY for the OpenCL out-of-memory codes, else CLT_ERR_OPENCL). */
clt_status clt__cl_fail(cl_int err, const char *fmt, ...) CLT_PRINTF(2, 3);
/* The argument check for NULL, shared by every layer: CLT_ERR_INVALID_ARGUMENT
 * with "op: what is NULL" when p is NULL (the tensor checks build on it:
 * src/tensor/check.h). */
clt_status clt__need(const char *op, const char *what, const void *p);
/* "CL_INVALID_VALUE" and friends. */
const char *clt__cl_error_name(cl_int err);

/* Returns early with the status of an expression that failed. */
#define CLT_TRY(expr)                                                                             \
    do {                                                                                          \
        clt_status clt_try_s_ = (expr);                                                           \
        if (clt_try_s_ != CLT_OK) return clt_try_s_;                                              \
    } while (0)

#endif
