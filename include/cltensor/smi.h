/* The memory records cltensor processes publish, as `clt smi` reads them.
 *
 * Each process that allocates device memory publishes its counters per
 * device in a small file, <dir>/cltensor.<pid> with dir the first writable of
 * /dev/shm, $XDG_RUNTIME_DIR and /tmp (CLT_NO_PUBLISH=1 turns that off).
 * These directories are writable by every local user, so the reader treats
 * each file as hostile: a record is listed only when every field checks out
 * (its pid is alive and started when the record says, each name is
 * terminated, each index and counter is in range) and the file's owner is
 * the process's owner. Names are copied as they are: print them through
 * clt_smi_escape. */
#ifndef CLTENSOR_SMI_H
#define CLTENSOR_SMI_H

#include "export.h"
#include <stddef.h>
#include <stdint.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most devices one record holds. */
#define CLT_SMI_MAX_DEVICES 32

/* One device as a process published it; byte counters are 0..2^52. */
typedef struct clt_smi_device {
    char name[16];                    /* the process's cltensor name, "gpu:0" */
    int platform_index, device_index; /* -1:-1 for pinned host memory */
    char device_name[128];
    int64_t allocated, reserved, peak_allocated;
} clt_smi_device;

/* One process and the devices it has used. */
typedef struct clt_smi_process {
    int pid;
    char command[256];
    int ndevices; /* 1..CLT_SMI_MAX_DEVICES */
    clt_smi_device devices[CLT_SMI_MAX_DEVICES];
} clt_smi_process;

/* A snapshot of every live process's record. */
typedef struct clt_smi clt_smi;

/* Reads every live process's record into a new snapshot, sorted by pid, and
 * removes the files of processes that have exited. A record that does not
 * check out is left out, never an error. Errors: CLT_ERR_INVALID_ARGUMENT
 * (out is NULL), CLT_ERR_OUT_OF_MEMORY; on failure *out is NULL. */
CLT_API clt_status clt_smi_open(clt_smi **out);

/* The number of processes in the snapshot; 0 for NULL. */
CLT_API int clt_smi_num_processes(const clt_smi *s);

/* Process i (0 <= i < clt_smi_num_processes(s)) of the snapshot, valid until it is
 * closed; NULL for another i or a NULL s. */
CLT_API const clt_smi_process *clt_smi_process_at(const clt_smi *s, int i);

/* Frees the snapshot; NULL does nothing. */
CLT_API void clt_smi_close(clt_smi *s);

/* Copies in to out (always terminated, truncated to fit), writing each byte
 * outside printable ASCII, and the backslash, as \xHH: a command name cannot
 * move the cursor or recolour a terminal. A NULL in is copied as "", and a
 * NULL out or an outlen of 0 writes nothing. */
CLT_API void clt_smi_escape(const char *in, char *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif
