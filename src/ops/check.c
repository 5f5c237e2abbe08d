/* Helpers the ops share: a result handed out or released, and waits on
 * and records of other launches (the argument checks are src/tensor/check.c). */
#include <stdio.h>

#include "../device/device_internal.h"
#include "ops_internal.h"

clt_status clt__finish(clt_status s, clt_tensor *t, clt_tensor **out)
{
    if (s != CLT_OK) {
        clt_tensor_release(t);
        return s;
    }
    *out = t;
    return CLT_OK;
}

clt_status clt__wait_foreign_read(int slot, clt_tensor *t)
{
    cl_event wait = clt__tensor_take_foreign_read(t);
    if (!wait) return CLT_OK;
    cl_command_queue q;
    clt_status s = clt__slot_queue(slot, &q);
    cl_int err = s == CLT_OK ? clEnqueueBarrierWithWaitList(q, 1, &wait, NULL) : CL_SUCCESS;
    clReleaseEvent(wait);
    if (s != CLT_OK) return s;
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clEnqueueBarrierWithWaitList on %s", clt__slot_get(slot)->name);
    return CLT_OK;
}

void clt__same_write(clt_tensor *t, const clt_tensor *by)
{
    if (by->st->last_write) clt__tensor_set_write(t, by->st->last_write);
}
