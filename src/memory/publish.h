/* Internal: publishes each device's memory counters in a small shared file
 * per process, so `clt smi` can list every process using a device. */
#ifndef CLT_MEMORY_PUBLISH_H
#define CLT_MEMORY_PUBLISH_H

#include <stddef.h>
#include <stdint.h>
#include "cltensor/memory.h"
#include "cltensor/smi.h"

/* Records the slot's counters; cheap (a few stores into a mapped file). The
 * file, <dir>/cltensor.<pid> with dir the first writable of /dev/shm,
 * $XDG_RUNTIME_DIR and /tmp, is made on the first call and removed at exit.
 * CLT_NO_PUBLISH=1 turns publication off. Failures are silent: publication
 * never makes an allocation fail. */
void clt__publish_update(int slot, const clt_memory_stats *s);

/* Path of this process's file, or NULL while it has none. */
const char *clt__publish_path(void);

/* What a record may claim, beyond which it is refused as malformed: byte
 * counters up to 2^52 (4 PiB; a sum of 2^11 - 1 of them still fits an int64),
 * platform and device indices up to 2^16. */
#define CLT__PUBLISH_MAX_BYTES (INT64_C(1) << 52)
#define CLT__PUBLISH_MAX_INDEX 65535

/* Parses len bytes of a published file as the record of the live process
 * pid started at start_time (field 22 of /proc/<pid>/stat). Every field is
 * checked: the magic, the device count (1..CLT_SMI_MAX_DEVICES) against
 * len, the pid, both start times (known and equal), each string terminated
 * in its field, each index and counter in range. Returns 1 with *p filled,
 * 0 for a record to skip (in the making or malformed; *p zeroed), -1 for a
 * stale one (an earlier process with this pid). Strings are copied as they
 * are: print them through clt_smi_escape. */
int clt__publish_parse(const void *buf, size_t len, int pid, uint64_t start_time, clt_smi_process *p);

/* Reads every live process's file into a new array sorted by pid (the caller
 * frees it) and removes the files of processes that have exited. A file is
 * listed only when clt__publish_parse accepts it and its owner is the
 * process's owner (a forged file is never listed under another's pid). Returns the
 * number of processes, or -1 when memory runs out. clt_smi_open is its
 * public face. */
int clt__publish_read(clt_smi_process **out);

#endif
