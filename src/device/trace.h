/* Internal: the timeline of commands and host waits (src/device/trace.c),
 * written as Chrome trace-event JSON when CLT_TRACE or clt_trace_start asks.
 * The synchronization choke point (sync.c) feeds it; nothing below the
 * device layer calls it. */
#ifndef CLT_DEVICE_TRACE_H
#define CLT_DEVICE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <CL/cl.h>
#include "cltensor/status.h"

void clt__trace_command(int slot, cl_event ev, const char *name, const char *cat, size_t bytes);
/* cat: "sync" for a counted synchronization point, "wait" for other host waits. */
void clt__trace_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns);
int clt__trace_on(void);
/* Starts the trace named by CLT_TRACE, once (at the first queue creation). */
void clt__trace_from_env(void);
/* CLT_OK, or the status and message of a CLT_TRACE that could not start
 * (checked before each queue is made). */
clt_status clt__trace_env_status(void);
/* A copy of the running trace's file name (free it), or NULL when none runs
 * (or out of memory): the trainer refuses an output that is the trace's. */
char *clt__trace_path(void);

#endif
