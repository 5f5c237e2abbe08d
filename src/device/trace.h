/* Internal: the timeline of commands and host waits (src/device/trace.c),
 * written as Chrome trace-event JSON when CLT_TRACE or clt_trace_start asks.
 * The synchronization choke point (sync.c, below it) feeds it through the
 * recorder a trace registers there when it starts; queue.c starts the one
 * CLT_TRACE names and asks whether a trace runs (profiling). */
#ifndef CLT_DEVICE_TRACE_H
#define CLT_DEVICE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <CL/cl.h>
#include "cltensor/status.h"

int clt__trace_on(void);
/* Starts the trace named by CLT_TRACE, once (at the first queue creation, queue.c). */
void clt__trace_from_env(void);
/* CLT_OK, or the status and message of a CLT_TRACE that could not start
 * (checked before each queue is made). */
clt_status clt__trace_env_status(void);
/* A copy of the running trace's file name (free it), or NULL when none runs
 * (or out of memory): the trainer refuses an output that is the trace's. */
char *clt__trace_path(void);

#endif
