/* Internal: pinned host tensors (mapped buffers allocated for host access):
 * their host address, the transfers in flight on them, and the deferred
 * freeing of their blocks. Transfers (copy.c) use the mapped address as the
 * host side of a read or write on a device queue, so the pinned buffer
 * itself never appears in a command. */
#ifndef CLT_TENSOR_PINNED_H
#define CLT_TENSOR_PINNED_H

#include "tensor_internal.h"

int clt__is_pinned(const clt_tensor *t);
/* The pinned memory that stages transfers to dev: "plan:pinned" for a
 * planning device, else clt_pinned(). */
clt_device clt__pinned_beside(clt_device dev);
/* Host address of the tensor's first element. */
void *clt__pinned_ptr(const clt_tensor *t);

/* Before the host writes a pinned tensor: CLT_ERR_BUSY while a transfer
 * reads or writes it, unless wait (then a sync point named `api`). */
clt_status clt__pinned_writable(clt_tensor *t, int wait, const char *api);
/* Before the host reads it: waits for a transfer writing it (then a sync
 * point named `api`; reading settled pinned memory waits for nothing). */
clt_status clt__pinned_readable(const clt_tensor *t, const char *api);

/* Gives a pinned storage's block back once its transfers have finished,
 * without waiting. */
void clt__pinned_free(clt__storage *st);
/* Frees the blocks whose transfers have finished since the last call (the
 * completion callbacks only queue them). Called after each synchronization
 * point, before a pinned tensor is allocated, and at each copy through host
 * memory and each free of pinned storage. */
void clt__pinned_reclaim(void);

/* Records ev, a transfer that reads st (pinned), so that writes and frees
 * of st wait for it. */
clt_status clt__pinned_add_read(clt__storage *st, cl_event ev);
/* Gives block (pinned memory of slot) back once every one of the n events
 * has completed, without waiting unless the runtime refuses a callback. */
void clt__pinned_free_after(int slot, clt__block *block, int n, const cl_event *evs);

#endif
