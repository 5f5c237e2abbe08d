/* Internal: publishes each device's memory counters in a small shared file
 * per process, so `clt smi` can list every process using a device. */
#ifndef CLT_MEMORY_PUBLISH_H
#define CLT_MEMORY_PUBLISH_H

#include "cltensor/memory.h"

/* Records the slot's counters; cheap (a few stores into a mapped file). */
void clt__publish_update(int slot, const clt_memory_stats *s);

#endif
