/* Internal: pinned host tensors (mapped buffers allocated for host access).
 * Transfers use their mapped address as the host side of a read or write on
 * a device queue, so the pinned buffer itself never appears in a command. */
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

/* Copies src into dst (a new tensor, or clt_copy_'s pinned destination) when
 * either is pinned, or when they live in different contexts (through a pinned
 * staging buffer, which ignores blocking). Enqueues only, unless blocking and
 * dst or src is pinned (then waits, a sync point named `api`); a copy between
 * two pinned tensors is a host memmove done at once, after waiting for a
 * transfer that writes src (dst in flight: CLT_ERR_BUSY unless blocking).
 * *done (may be NULL) receives the final command. */
clt_status clt__copy_via_host(clt_tensor *dst, clt_tensor *src, int blocking, cl_event *done, const char *api);

#endif
