/* The dependency cltensor's cross-context copy makes, in plain OpenCL: a
 * command on queue B waits for a user event that a callback sets when a
 * read on queue A completes. Without a flush of A (no argument) a
 * spec-strict driver never starts the read, and the wait never ends: under
 * strict_submit.c the watchdog reports it and exits with status 86. With
 * --flush, A is flushed after the callback is registered and the program
 * exits 0. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

static void CL_CALLBACK complete(cl_event ev, cl_int status, void *user)
{
    (void)ev;
    clSetUserEventStatus((cl_event)user, status < 0 ? status : CL_COMPLETE);
}

int main(int argc, char **argv)
{
    int flush = argc > 1 && strcmp(argv[1], "--flush") == 0;
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint np = 0;
    if (clGetPlatformIDs(1, &plat, &np) != CL_SUCCESS || np == 0 ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
        fprintf(stderr, "missing_flush: no OpenCL device\n");
        return 77;
    }
    cl_int err;
    cl_context a = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_context b = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue qa = clCreateCommandQueue(a, dev, 0, &err);
    cl_command_queue qb = clCreateCommandQueue(b, dev, 0, &err);
    cl_mem m = clCreateBuffer(a, CL_MEM_READ_WRITE, 64, NULL, &err);
    char host[64] = {0};
    cl_event read, bridge = clCreateUserEvent(b, &err), done;
    if (clEnqueueWriteBuffer(qa, m, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueReadBuffer(qa, m, CL_FALSE, 0, sizeof host, host, 0, NULL, &read) != CL_SUCCESS ||
        clSetEventCallback(read, CL_COMPLETE, complete, bridge) != CL_SUCCESS) {
        fprintf(stderr, "missing_flush: OpenCL setup failed\n");
        return 1;
    }
    if (flush) clFlush(qa);
    if (clEnqueueMarkerWithWaitList(qb, 1, &bridge, &done) != CL_SUCCESS) return 1;
    clWaitForEvents(1, &done);
    printf("missing_flush: the dependent command ran\n");
    return 0;
}
