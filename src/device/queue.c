/* Queues: each device's in-order queue, made on its first use, with
 * profiling while a trace runs; the trace CLT_TRACE names starts at the
 * first queue, and one it could not start fails every queue's making. The
 * table of queues is device.c's. */
#include "device_internal.h"
#include "sync.h"
#include "trace.h"

static cl_command_queue_properties properties(void)
{
    clt__trace_from_env();
    return clt__trace_on() ? CL_QUEUE_PROFILING_ENABLE : 0;
}

clt_status clt__slot_queue(int slot, cl_command_queue *out)
{
    CLT_TRY(clt__sync_before_command(slot));
    return clt__slot_queue_replayable(slot, out);
}

clt_status clt__slot_queue_replayable(int slot, cl_command_queue *out)
{
    cl_command_queue made = clt__slot_queue_made(slot);
    if (made) {
        *out = made;
        return CLT_OK;
    }
    if (clt__slot_plans(slot))
        return clt__fail(CLT_ERR_UNSUPPORTED, "internal: %s is a planning device: it has no queue",
                         clt__slot_get(slot)->name);
    cl_context ctx;
    CLT_TRY(clt__slot_context(slot, &ctx));
    CLT_TRY(clt__trace_env_status());
    return clt__slot_queue_make(slot, ctx, properties(), out);
}
