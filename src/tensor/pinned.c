/* Pinned host tensors: their host address, the transfers in flight on them
 * (the copies of copy.c record theirs here), and the freeing of their
 * blocks. Nothing here waits unless the caller asked to (wait flags) or a
 * callback cannot be registered: a transfer's completion is tracked by its
 * event, and memory it uses is released by completion callbacks. */
#include "pinned.h"

#include <stdlib.h>
#include <string.h>

#include "../core/fault.h"
#include "../device/device_internal.h"
#include "../device/sync.h"

/* Transfers that read a pinned storage (its last_write covers the ones that
 * write it). */
struct clt__pinned_io {
    cl_event *reads;
    int n, cap;
};

int clt__is_pinned(const clt_tensor *t) { return clt__slot_is_pinned(t->st->slot); }

clt_device clt__pinned_beside(clt_device dev)
{
    return dev.type == CLT_DEVICE_PLAN ? clt_plan_device(clt_pinned()) : clt_pinned();
}

void *clt__pinned_ptr(const clt_tensor *t)
{
    return t->st->block ? (char *)clt__block_host(t->st->block) + t->offset : NULL;
}

/* Drops finished reads. */
static void prune(struct clt__pinned_io *io)
{
    if (!io) return;
    int k = 0;
    for (int i = 0; i < io->n; i++) {
        if (clt__event_done(io->reads[i])) clReleaseEvent(io->reads[i]);
        else io->reads[k++] = io->reads[i];
    }
    io->n = k;
}

clt_status clt__pinned_add_read(clt__storage *st, cl_event ev)
{
    if (!st->io && !(st->io = calloc(1, sizeof *st->io)))
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory tracking a transfer");
    struct clt__pinned_io *io = st->io;
    prune(io);
    if (io->n == io->cap) {
        int ncap = io->cap ? io->cap * 2 : 4;
        cl_event *grown = realloc(io->reads, (size_t)ncap * sizeof *grown);
        if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory tracking a transfer");
        io->reads = grown;
        io->cap = ncap;
    }
    clRetainEvent(ev);
    io->reads[io->n++] = ev;
    return CLT_OK;
}

static int writing(const clt__storage *st) { return st->last_write && !clt__event_done(st->last_write); }

static int reading(clt__storage *st)
{
    prune(st->io);
    return st->io && st->io->n > 0;
}

int clt_tensor_in_flight(const clt_tensor *t)
{
    if (!t || !clt__is_pinned(t)) return 0;
    clt__storage *st = t->st;
    return writing(st) || reading(st);
}

clt_status clt__pinned_writable(clt_tensor *t, int wait, const char *api)
{
    clt__storage *st = t->st;
    int w = writing(st), r = reading(st);
    if (!w && !r) return CLT_OK;
    if (!wait) {
        /* Only these two calls take a wait argument. */
        int offers_wait = strcmp(api, "clt_tensor_host_ptr") == 0 || strcmp(api, "clt_tensor_write") == 0;
        return clt__fail(CLT_ERR_BUSY, "%s: the pinned tensor is in flight (a non-blocking copy %s it); wait for "
                         "the copy's event with clt_event_wait first%s", api, w ? "writes" : "reads",
                         offers_wait ? ", or pass wait = 1" : "");
    }
    int n = (w ? 1 : 0) + (r ? st->io->n : 0);
    cl_event *evs = malloc((size_t)n * sizeof *evs);
    if (!evs) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory waiting for transfers");
    int k = 0;
    if (w) evs[k++] = st->last_write;
    for (int i = 0; r && i < st->io->n; i++) evs[k++] = st->io->reads[i];
    clt_status s = clt__sync_wait(st->slot, api, (cl_uint)n, evs);
    free(evs);
    prune(st->io);
    clt__pinned_reclaim();
    return s;
}

clt_status clt__pinned_readable(const clt_tensor *t, const char *api)
{
    if (!writing(t->st)) return CLT_OK;
    return clt__sync_wait(t->st->slot, api, 1, &t->st->last_write);
}

/* A block to free when `left` callbacks have run. Callbacks run on the
 * runtime's threads, which must not take the allocator's lock (its holder
 * may be waiting for those threads), so a finished block only moves to the
 * `ready` list; clt__pinned_reclaim frees it on a caller's thread. */
typedef struct deferred_free {
    clt__block *block;
    atomic_int left;
    struct deferred_free *next;
} deferred_free;

static _Atomic(deferred_free *) ready;

static void CL_CALLBACK free_when_done(cl_event ev, cl_int status, void *data)
{
    (void)status;
    deferred_free *d = data;
    if (ev) clReleaseEvent(ev);
    if (atomic_fetch_sub(&d->left, 1) != 1) return;
    d->next = atomic_load(&ready);
    while (!atomic_compare_exchange_weak(&ready, &d->next, d)) {
    }
}

void clt__pinned_reclaim(void)
{
    deferred_free *d = atomic_exchange(&ready, NULL);
    while (d) {
        deferred_free *next = d->next;
        clt__free(d->block, NULL);
        free(d);
        d = next;
    }
}

#define RELEASE_WAIT "clt_tensor_release (pinned memory a transfer uses: no callback)"

/* No flush: nothing waits for the callback, and the queue's next flush or
 * wait starts the command (a flush here would block on implementations
 * whose clFlush runs the queue, like oclgrind's). */
void clt__pinned_free_after(int slot, clt__block *block, int n, const cl_event *evs)
{
    deferred_free *d = n > 0 ? malloc(sizeof *d) : NULL;
    if (!d) {
        for (int i = 0; i < n; i++) clt__sync_fallback(slot, RELEASE_WAIT, evs[i]);
        clt__free(block, NULL);
        return;
    }
    d->block = block;
    /* Waits elsewhere reclaim it too (the device layer cannot call up). */
    clt__sync_set_after_wait(clt__pinned_reclaim);
    /* One extra count held while callbacks are registered, so none frees early. */
    atomic_init(&d->left, n + 1);
    for (int i = 0; i < n; i++) {
        clRetainEvent(evs[i]);
        if (clt__fault(CLT__FAULT_CALLBACK) || clSetEventCallback(evs[i], CL_COMPLETE, free_when_done, d) != CL_SUCCESS) {
            clt__sync_fallback(slot, RELEASE_WAIT, evs[i]);
            free_when_done(evs[i], CL_COMPLETE, d);
        }
    }
    free_when_done(NULL, CL_COMPLETE, d);
}

void clt__pinned_free(clt__storage *st)
{
    clt__pinned_reclaim();
    struct clt__pinned_io *io = st->io;
    prune(io);
    /* Reads of pinned memory wait for its pending write, so when reads are
     * pending they finish last. */
    if (st->block) {
        if (io && io->n > 0) clt__pinned_free_after(st->slot, st->block, io->n, io->reads);
        else if (writing(st)) clt__pinned_free_after(st->slot, st->block, 1, &st->last_write);
        else clt__free(st->block, NULL);
    }
    if (io) {
        for (int i = 0; i < io->n; i++) clReleaseEvent(io->reads[i]);
        free(io->reads);
        free(io);
    }
    st->io = NULL;
}

clt_status clt_tensor_host_ptr(clt_tensor *t, int wait, void **out)
{
    CLT_TRY(clt__need("clt_tensor_host_ptr", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_tensor_host_ptr", "t", t));
    if (!clt__is_pinned(t))
        return clt__fail(CLT_ERR_UNSUPPORTED, "clt_tensor_host_ptr: the tensor lives on %s, not in pinned memory; "
                         "copy it with clt_to(..., clt_pinned())", clt__slot_get(t->st->slot)->name);
    CLT_TRY(clt__pinned_writable(t, wait, "clt_tensor_host_ptr"));
    *out = clt__pinned_ptr(t);
    return CLT_OK;
}
