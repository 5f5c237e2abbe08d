/* Internal: the one place where the host waits for a device, and the hook enqueued
 * kernels and transfers pass through (trace, blocking mode; the commands that
 * do not are listed at clt__after_enqueue). */
#ifndef CLT_DEVICE_SYNC_H
#define CLT_DEVICE_SYNC_H

#include <stddef.h>
#include <stdint.h>
#include "../core/error.h"
#include "cltensor/async.h"

/* A host synchronization point on a slot's device caused by the public call
 * `api`: counted, reported (CLT_SYNC_DEBUG=warn) or refused with
 * CLT_ERR_SYNC (error mode). Does not wait; callers use the helpers below. */
clt_status clt__sync_point(int slot, const char *api);
/* clt__sync_point, then waits for the events and reports a failed one. */
clt_status clt__sync_wait(int slot, const char *api, cl_uint n, const cl_event *evs);
/* The wait of a sync point already passed through clt__sync_point. */
clt_status clt__sync_wait_only(int slot, const char *api, cl_uint n, const cl_event *evs);
/* clt__sync_point, then waits for everything queued on the slot (nothing
 * when no queue has been made for it: a planning slot, or a device not yet
 * used). */
clt_status clt__sync_queue(int slot, const char *api);

/* A function the layer above registers to run on the waiting thread after
 * each synchronization point (the tensor layer frees pinned blocks whose
 * transfers have finished). NULL removes it. */
typedef void (*clt__after_wait_hook)(void);
void clt__sync_set_after_wait(clt__after_wait_hook hook);

/* The trace's recorder (trace.c registers it when a trace starts; NULL
 * removes it): every command passing clt__after_enqueue or clt__after_copy
 * goes to command ("kernel" or "copy", bytes for a copy), and every host
 * wait to host (cat "sync" for a synchronization point, "wait" for
 * clt__host_wait), from start_ns to end_ns. */
typedef struct clt__sync_tracer {
    void (*command)(int slot, cl_event ev, const char *name, const char *cat, size_t bytes);
    void (*host)(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns);
} clt__sync_tracer;
void clt__sync_set_tracer(const clt__sync_tracer *t);

/* The replay's hook (replay.c registers it when a step first runs under
 * it): called with the slot before every host wait on it (clt__sync_point,
 * clt__sync_fallback) and before every command enqueued on its queue
 * that does not pass clt__replay_take (clt__slot_queue calls it; the choke
 * points that pass clt__replay_take take clt__slot_queue_replayable's
 * queue). A failure is that of enqueueing the commands it held back. */
typedef clt_status (*clt__command_hook)(int slot);
void clt__sync_set_command_hook(clt__command_hook hook);
clt_status clt__sync_before_command(int slot);

/* The fallback where a completion callback or barrier cannot be queued
 * (freeing staging or pinned memory, a block another device reads): the
 * host waits for ev, and so for the queue's work before it. A
 * synchronization point named `api`: counted, reported (warn) and traced,
 * but never refused, as its caller is freeing memory a command uses and
 * cannot fail. */
clt_status clt__sync_fallback(int slot, const char *api, cl_event ev);

/* A host wait that is not a synchronization point: traced, not counted,
 * never reported or refused. Used only for the side queue's map of new
 * pinned memory, a short command that waits for nothing queued, and where
 * a replayed step's event cannot take a completion callback (replay.c). */
clt_status clt__host_wait(int slot, const char *why, cl_event ev);

/* Every kernel, fill and transfer enqueued on a device queue passes its
 * event here right after the enqueue (the caller keeps its reference): the
 * trace records it, and blocking mode waits for it and returns its failure.
 * `name` is the kernel or command name. Barriers and markers (they carry no
 * work; clt__sync_queue waits for its marker itself), the side queue's map
 * and unmap of pinned memory, and the allocator's touch of a new buffer
 * outside blocking mode do not pass it. */
clt_status clt__after_enqueue(int slot, cl_event ev, const char *name);
/* The same for a transfer: `what` names the direction ("gpu:0->gpu:1"). */
clt_status clt__after_copy(int slot, cl_event ev, const char *what, size_t bytes);

/* A second queue on the slot's device, for short commands that must not
 * wait behind the pipeline (mapping and unmapping pinned memory). */
clt_status clt__side_queue(int slot, cl_command_queue *out);

/* An event of context ctx that completes with ev (ev itself when it belongs
 * to ctx, else a user event set by ev's completion). *out is NULL when ev is
 * NULL; the caller releases it. */
clt_status clt__bridge_event(cl_event ev, cl_context ctx, cl_event *out);

/* Sets user's status when ev's command ends (complete, or its failure);
 * the caller keeps its own reference to user. */
cl_int clt__event_chain(cl_event ev, cl_event user);

/* Flushes the queue of ev's command (nothing for a user event or NULL): a
 * command on another queue, a host callback or a polling wait that depends
 * on ev may otherwise wait forever on a spec-strict driver, which need not
 * start commands that were never flushed. */
void clt__flush_event_queue(cl_event ev);

/* Whether ev's command has ended, without waiting: complete, or failed (a
 * negative status). A status that cannot be read counts as not ended, so a
 * caller never frees what the command may still be using. */
int clt__event_done(cl_event ev);

/* A public handle on ev (retained); *out is NULL when ev is NULL. */
clt_status clt__event_new(cl_event ev, int slot, clt_event **out);

#endif
