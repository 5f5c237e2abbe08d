/* Internal: publishes each device's memory counters in a small shared file
 * per process, so `clt smi` can list every process using a device. */
#ifndef CLT_MEMORY_PUBLISH_H
#define CLT_MEMORY_PUBLISH_H

#include <stdint.h>
#include "cltensor/memory.h"

/* Records the slot's counters; cheap (a few stores into a mapped file). The
 * file, <dir>/cltensor.<pid> with dir the first writable of /dev/shm,
 * $XDG_RUNTIME_DIR and /tmp, is made on the first call and removed at exit.
 * CLT_NO_PUBLISH=1 turns publication off. Failures are silent: publication
 * never makes an allocation fail. */
void clt__publish_update(int slot, const clt_memory_stats *s);

/* Path of this process's file, or NULL while it has none. */
const char *clt__publish_path(void);

#define CLT__PUBLISH_MAX_DEVICES 32

/* One device as a process published it. */
typedef struct clt__published_device {
    char name[16];                 /* the process's cltensor name, "gpu:0" */
    int platform_index, device_index; /* -1:-1 for pinned host memory */
    char device_name[128];
    int64_t allocated, reserved, peak_allocated;
} clt__published_device;

/* One process and the devices it has used. */
typedef struct clt__published_process {
    int pid;
    char command[256];
    int ndevices;
    clt__published_device devices[CLT__PUBLISH_MAX_DEVICES];
} clt__published_process;

/* Reads every live process's file into a new array sorted by pid (the caller
 * frees it) and removes the files of processes that have exited. Returns the
 * number of processes, or -1 when memory runs out. */
int clt__publish_read(clt__published_process **out);

#endif
