/* Internal: a training step recorded once and replayed (replay.c), where
 * the driver has cl_khr_command_buffer. The engine (src/trainer/engine.c)
 * brackets each step of a one-device fit with clt__replay_step_begin and
 * clt__replay_step_end; in between, every kernel launch
 * (kernels/program.c), fill (tensor/tensor.c) and copy within a context
 * (tensor/copy.c) passes clt__replay_take before it is enqueued, and every
 * other command and host wait on the device passes the foreign-command hook
 * this file registers with sync.c (clt__sync_before_command).
 *
 * A step that is recorded runs as usual, and its commands are also
 * appended, in order, to a command buffer. It is kept only when every
 * command from its first launch, fill or copy to its end was one of those:
 * a transfer from the host, a CLBlast call, a host wait or a command that
 * waits for another queue in that span makes it not replayable. Commands
 * before the first one (the batch's upload) run as usual in every step.
 *
 * The next step's host code runs in full (allocations, optimizer counters,
 * everything the host keeps), but each command it would enqueue is compared
 * with the recording's command at the same place: kernel, argument bytes
 * (buffers, offsets, scalars such as the learning rate), sizes. While all
 * match nothing is enqueued; when the step ends with the same count, the
 * command buffer is enqueued in their place. At the first difference the
 * commands held back so far are enqueued one by one as they would have
 * been and the rest of the step is recorded afresh (at a foreign command
 * or a wait, they are enqueued and the step goes on as usual): a replayed
 * step computes exactly what the step it replaces would have. The last
 * four recordings are kept, as a step's buffers can alternate. */
#ifndef CLT_DEVICE_REPLAY_H
#define CLT_DEVICE_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include "../core/error.h"
#include "cltensor/async.h"

/* A kernel argument: size bytes at value (NULL for local memory). */
typedef struct clt__arg {
    size_t size;
    const void *value;
} clt__arg;

#define CLT_ARG(x) ((clt__arg){sizeof(x), &(x)})

typedef enum clt__command_kind { CLT__COMMAND_KERNEL, CLT__COMMAND_FILL, CLT__COMMAND_COPY } clt__command_kind;

/* A command as its choke point is about to enqueue it. */
typedef struct clt__command {
    clt__command_kind kind;
    const char *name; /* the kernel's, "fill", or a copy's direction */
    /* CLT__COMMAND_KERNEL */
    cl_kernel kernel;
    int nargs;
    const clt__arg *args;
    cl_uint dims;
    const size_t *global, *local; /* local NULL: the driver's choice */
    /* CLT__COMMAND_FILL (dst) and CLT__COMMAND_COPY (src to dst) */
    cl_mem dst, src;
    size_t dst_offset, src_offset, size;
    const void *pattern;
    size_t pattern_size;
} clt__command;

/* 1 when the slot's device has cl_khr_command_buffer in a version whose
 * entry points this build knows (0.9.0 to 0.9.4) and CLT_REPLAY is not
 * off; on a device the driver reports as a CPU (pocl), only when
 * CLT_REPLAY=1. */
int clt__replay_supported(int slot);

/* Starts a step on the slot (nothing where clt__replay_supported is 0, in
 * blocking mode, or after six steps in a row that did not replay): its
 * commands are compared with the recording when there is one and key (the
 * caller's fingerprint of what the recording's buffers depend on: the
 * allocator's driver buffers made and returned) is the one it ended with,
 * else recorded. */
void clt__replay_step_begin(int slot, const uint64_t key[2]);
/* Ends the step that s is the status of: enqueues the command buffer in
 * place of its commands when every one matched, else the ones held back;
 * keeps a new recording that can be replayed, made under key. Returns s,
 * else the failure of an enqueue. */
clt_status clt__replay_step_end(int slot, clt_status s, const uint64_t key[2]);
/* Forgets the slot's recording and its count of steps that did not replay
 * (the end of a fit). */
void clt__replay_reset(int slot);

/* The choke points' call before enqueueing c on the slot. *taken = 1: the
 * command is held back for the replay and must not be enqueued; *deferred
 * is the event the tensor it writes takes (owned by the replay: retain it
 * to keep it). *taken = 0: enqueue it as usual, with the queue
 * clt__slot_queue_replayable gives. waits: the command waits for another
 * queue's event, which makes it a foreign one. Fails only where enqueueing
 * commands held back fails. */
clt_status clt__replay_take(int slot, const clt__command *c, int waits, int *taken, cl_event *deferred);

/* Setting a kernel's arguments and enqueueing (or recording) it go
 * together under the slot's lock: threads launching the same kernel share
 * its cl_kernel, on which clSetKernelArg is not thread-safe. */
void clt__launch_lock(int slot);
void clt__launch_unlock(int slot);

/* Steps replayed in this process (every slot), for tests and benchmarks. */
uint64_t clt__replay_count(void);

#endif
