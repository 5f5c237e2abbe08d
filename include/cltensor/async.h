/* Asynchronous dispatch: every operation only enqueues work on its device's
 * in-order queue and returns. The host waits only at synchronization points:
 * clt_to_host, clt_item, clt_tensor_format / clt_tensor_print,
 * clt_synchronize, clt_synchronize_all, clt_event_wait, a blocking clt_to
 * from or into pinned memory, and clt_tensor_host_ptr / clt_tensor_write
 * asked to wait for an in-flight pinned tensor (reading a pinned tensor
 * waits only while a copy into it is pending), and the calls that say they
 * wait through one of these (e.g. clt_model_clip_grad_norm, a float16 model's
 * clt_optimizer_step, clt_loader_next with its staging ring full, GEMM
 * tuning, clt_trainer_evaluate, saving a file, clt_trace_stop), and, where the
 * driver refuses a completion callback, freeing memory a command still
 * uses. Copies between devices wait
 * on events, never on the host. Each sync point is counted per device (waits
 * for a pinned tensor's transfers count on "pinned"), can be reported or
 * refused (CLT_SYNC_DEBUG), and appears on the trace (CLT_TRACE). See
 * docs/async.md. */
#ifndef CLTENSOR_ASYNC_H
#define CLTENSOR_ASYNC_H

#include "export.h"
#include <stdint.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Synchronization points counted on a device since the start (or the last
 * reset). 0 for a device that does not exist. */
CLT_API uint64_t clt_sync_count(clt_device dev);
/* Sets the device's counter back to 0 (nothing happens for a device that
 * does not exist). */
CLT_API void clt_sync_reset_count(clt_device dev);

typedef enum clt_sync_debug {
    CLT_SYNC_DEBUG_OFF = 0,   /* count only */
    CLT_SYNC_DEBUG_WARN = 1,  /* also print one line per sync point on stderr */
    CLT_SYNC_DEBUG_ERROR = 2  /* refuse: the call fails with CLT_ERR_SYNC */
} clt_sync_debug;

/* The process-wide mode; starts from CLT_SYNC_DEBUG=warn|error (else off). */
CLT_API void clt_sync_set_debug(clt_sync_debug mode);
CLT_API clt_sync_debug clt_sync_get_debug(void);

/* Blocking mode (CUDA_LAUNCH_BLOCKING's equivalent): every enqueued command
 * is waited for at once, so a device error fails the call that caused it.
 * Starts from CLT_LAUNCH_BLOCKING=1. These waits are not counted. */
CLT_API void clt_launch_set_blocking(int on);
CLT_API int clt_launch_get_blocking(void);

/* A handle on one enqueued command (a non-blocking copy). */
typedef struct clt_event clt_event;

/* Waits for the command (a synchronization point on its device) and reports
 * its failure, if any. */
CLT_API clt_status clt_event_wait(clt_event *ev);
/* *done = 1 when the command has finished; never waits. */
CLT_API clt_status clt_event_query(const clt_event *ev, int *done);
/* Frees the handle (the command itself runs on); NULL does nothing. */
CLT_API void clt_event_free(clt_event *ev);

/* Pinned (page-locked) host memory as a device ("pinned"), MXNet's
 * cpu_pinned(). Its buffers are allocated for host access in the context
 * of the first GPU (or of the first device when there is no GPU) and stay
 * mapped; kernels never run on it (CLT_ERR_UNSUPPORTED): move a tensor to a
 * device to compute. It is not listed by clt_device_list_num_entries, and
 * clt_synchronize(clt_pinned()) has nothing to wait for: wait on a copy's
 * event, or synchronize the device side. */
CLT_API clt_device clt_pinned(void);

/* clt_to without waiting: *out is a promise whose value is correct for
 * every later command and read. From a pinned tensor the transfer reads its
 * memory directly and the source stays in flight until it completes (writes
 * through the API fail with CLT_ERR_BUSY meanwhile). Into pinned memory the
 * data may be read only after clt_event_wait on *done (or a waiting
 * clt_tensor_host_ptr). done may be NULL; otherwise the caller releases
 * *done (NULL when no command was needed). Plain clt_to waits for
 * transfers from or into pinned memory (a synchronization point). */
CLT_API clt_status clt_to_async(clt_tensor **out, clt_tensor *t, clt_device dev, clt_event **done);

/* 1 while a transfer reads or writes the pinned tensor's memory. 0 for
 * other tensors. Never waits. */
CLT_API int clt_tensor_in_flight(const clt_tensor *t);

/* The host address of a pinned tensor's first element. It fails with
 * CLT_ERR_BUSY while the tensor is in flight, unless wait is 1 (then it
 * waits: a synchronization point). CLT_ERR_UNSUPPORTED for tensors on other
 * devices. The pointer is valid while the tensor lives and is not in flight:
 * nothing guards writes through it, so writing through a pointer taken
 * before a non-blocking copy while that copy runs corrupts the copy
 * silently (take the pointer again after each copy). */
CLT_API clt_status clt_tensor_host_ptr(clt_tensor *t, int wait, void **out);

/* Copies nbytes (the tensor's size) of host data into t. On a device this
 * enqueues and returns (the bytes are staged first). Into a pinned tensor in
 * flight it fails with CLT_ERR_BUSY, unless wait is 1. */
CLT_API clt_status clt_tensor_write(clt_tensor *t, const void *src, size_t nbytes, int wait);

/* Timeline. Records every command (kernel, copy, with OpenCL profiling times)
 * and every synchronization point, and writes Chrome trace-event JSON
 * (chrome://tracing, ui.perfetto.dev) to path when tracing stops or the
 * process exits. CLT_TRACE=path starts it at the first device use. Queues
 * record device times only when created while tracing is on (start before
 * using a device, or set CLT_TRACE); later queues' commands show host times.
 * CLT_ERR_INVALID_ARGUMENT when a trace is already running; CLT_ERR_IO
 * naming path when it could not be written (its directory is missing or
 * not writable, or path is not a regular file), checked now rather than
 * when the trace is written. A CLT_TRACE path that fails this check makes
 * every device's first use fail with that status and a message naming
 * CLT_TRACE. */
CLT_API clt_status clt_trace_start(const char *path);
/* Waits for the recorded commands, a synchronization point named
 * "clt_trace_stop" on each device that has unfinished ones (counted,
 * reported; refused under CLT_SYNC_DEBUG=error with CLT_ERR_SYNC, and the
 * trace keeps running), writes the file (a temporary name renamed into
 * place) and stops. CLT_OK when no trace runs; CLT_ERR_IO when the file
 * cannot be written; a recorded command's failure after the file is
 * written. */
CLT_API clt_status clt_trace_stop(void);

#ifdef __cplusplus
}
#endif
#endif
