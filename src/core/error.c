#include "error.h"
#include "limits.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CLT_MESSAGE_MAX 1024

static _Thread_local char last_message[CLT_MESSAGE_MAX];

const char *clt_status_string(clt_status s)
{
    switch (s) {
    case CLT_OK: return "CLT_OK";
    case CLT_ERR_INVALID_ARGUMENT: return "CLT_ERR_INVALID_ARGUMENT";
    case CLT_ERR_SHAPE: return "CLT_ERR_SHAPE";
    case CLT_ERR_DEVICE_MISMATCH: return "CLT_ERR_DEVICE_MISMATCH";
    case CLT_ERR_BUSY: return "CLT_ERR_BUSY";
    case CLT_ERR_SYNC: return "CLT_ERR_SYNC";
    case CLT_ERR_NO_DEVICE: return "CLT_ERR_NO_DEVICE";
    case CLT_ERR_OUT_OF_MEMORY: return "CLT_ERR_OUT_OF_MEMORY";
    case CLT_ERR_OPENCL: return "CLT_ERR_OPENCL";
    case CLT_ERR_UNSUPPORTED: return "CLT_ERR_UNSUPPORTED";
    case CLT_ERR_IO: return "CLT_ERR_IO";
    case CLT_ERR_FORMAT: return "CLT_ERR_FORMAT";
    case CLT_ERR_DIVERGED: return "CLT_ERR_DIVERGED";
    }
    return "unknown status";
}

const char *clt_last_error(void) { return last_message; }

void clt_clear_error(void) { last_message[0] = '\0'; }

clt_status clt_set_error(clt_status s, const char *fmt, ...)
{
    if (!fmt) {
        last_message[0] = '\0';
        return s;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return s;
}

/* Out of memory under a low address-space or data limit (core/limits.h):
 * the message names the limit, once. */
static void name_memory_limit(void)
{
    char limit[160];
    if (strstr(last_message, "(ulimit -")) return;
    if (clt__limit_named(0, CLT__LIMIT_MEMORY, limit, sizeof limit) == CLT__LIMIT_NONE) return;
    size_t n = strlen(last_message);
    snprintf(last_message + n, sizeof last_message - n, " (the process runs under %s: raise the limit)", limit);
}

clt_status clt__fail(clt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    if (s == CLT_ERR_OUT_OF_MEMORY) name_memory_limit();
    return s;
}

clt_status clt__need(const char *op, const char *what, const void *p)
{
    if (p) return CLT_OK;
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", op, what);
}

clt_status clt__cl_fail(cl_int err, const char *fmt, ...)
{
    char what[CLT_MESSAGE_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int oom = err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
              err == CL_OUT_OF_HOST_MEMORY;
    return clt__fail(oom ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_OPENCL, "%s: %s (%d)", what,
                     clt__cl_error_name(err), (int)err);
}

const char *clt__cl_error_name(cl_int err)
{
    switch (err) {
#define N(x) case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE) N(CL_COMPILER_NOT_AVAILABLE)
    N(CL_MEM_OBJECT_ALLOCATION_FAILURE) N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_PROFILING_INFO_NOT_AVAILABLE) N(CL_MEM_COPY_OVERLAP) N(CL_IMAGE_FORMAT_MISMATCH)
    N(CL_IMAGE_FORMAT_NOT_SUPPORTED) N(CL_BUILD_PROGRAM_FAILURE) N(CL_MAP_FAILURE)
    N(CL_MISALIGNED_SUB_BUFFER_OFFSET) N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    N(CL_COMPILE_PROGRAM_FAILURE) N(CL_LINKER_NOT_AVAILABLE) N(CL_LINK_PROGRAM_FAILURE)
    N(CL_DEVICE_PARTITION_FAILED) N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) N(CL_INVALID_VALUE)
    N(CL_INVALID_DEVICE_TYPE) N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT)
    N(CL_INVALID_QUEUE_PROPERTIES) N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_HOST_PTR)
    N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) N(CL_INVALID_IMAGE_SIZE)
    N(CL_INVALID_SAMPLER) N(CL_INVALID_BINARY) N(CL_INVALID_BUILD_OPTIONS) N(CL_INVALID_PROGRAM)
    N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME) N(CL_INVALID_KERNEL_DEFINITION)
    N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX) N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE)
    N(CL_INVALID_KERNEL_ARGS) N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE)
    N(CL_INVALID_WORK_ITEM_SIZE) N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST)
    N(CL_INVALID_EVENT) N(CL_INVALID_OPERATION) N(CL_INVALID_GL_OBJECT) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_MIP_LEVEL) N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_INVALID_IMAGE_DESCRIPTOR) N(CL_INVALID_COMPILER_OPTIONS) N(CL_INVALID_LINKER_OPTIONS)
    N(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "unknown OpenCL error";
}
