/* The caching allocator: one per device. Freed blocks go back to a cache and
 * serve later requests; the driver is asked only on a miss. Where a request
 * goes, and which segments go back when the cap is hit, is book.c's policy,
 * which a planning device (clt_plan_device) runs without a driver; this
 * file holds the driver's side. */
#include "allocator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/env.h"
#include "../core/fault.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "book.h"
#include "publish.h"

#define MIB (1024.0 * 1024.0)

/* A driver buffer the book holds as a segment. */
typedef struct driver_buf {
    cl_mem mem;
    void *host; /* pinned memory: the mapped address, else NULL */
    int slot;
} driver_buf;

typedef struct clt__allocator {
    pthread_mutex_t lock;
    int slot;
    clt__book book;
    clt_memory_stats stats;
    int64_t at_peak[CLT_MEM_CATEGORY_COUNT]; /* category_allocated when peak_allocated was reached */
    clt_memory_record *record; /* clt_memory_record_start's, else NULL */
    clt__alloc_sample_fn *sample; /* record.c's, called on record after every event */
    atomic_uint_least64_t refused; /* requests clt__alloc failed (clt__alloc_refusals) */
} clt__allocator;

static clt__allocator **allocators;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* CLT_MEMORY_CAP="512M" caps every device; "gpu:0=1G,cpu:0=0.5" each one
 * (core/env.c parses it; a malformed value is no cap, reported by
 * clt_check_environment before any allocator is made). */
static int64_t cap_from_env(const clt__slot *s)
{
    /* A planning device takes the cap of the device it stands for; a
     * described one its description's. */
    if (s->plans_for >= 0) s = clt__slot_get(s->plans_for);
    if (s->described) return s->described_cap;
    return clt__env_memory_cap(s->name, (int64_t)s->global_mem);
}

/* CLT_ALLOC_EXACT=1 gives every tensor a driver buffer of exactly its size,
 * freed with the tensor: slow, but a checker such as oclgrind then sees an
 * overrun past any tensor's end, not only past a cached segment's. */
int clt__alloc_exact(void)
{
    static atomic_int mode = -1;
    int m = atomic_load(&mode);
    if (m < 0) {
        m = clt__env_int(CLT__ENV_ALLOC_EXACT, 0);
        atomic_store(&mode, m);
    }
    return m;
}

static clt_status driver_alloc(void *allocator, size_t size, void **owner);
static void driver_release(void *allocator, void *owner);

/* A planning device's segments (clt_plan_device): no driver buffer, only
 * host memory behind pinned ones (the host writes them). */
static clt_status plan_alloc(void *allocator, size_t size, void **owner)
{
    clt__allocator *a = allocator;
    driver_buf *d = malloc(sizeof *d);
    void *host = d && clt__slot_is_pinned(a->slot) ? malloc(size) : NULL;
    if (!d || (clt__slot_is_pinned(a->slot) && !host)) {
        free(d);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for %zu bytes of planned pinned memory", size);
    }
    *d = (driver_buf){NULL, host, a->slot};
    *owner = d;
    return CLT_OK;
}

static void plan_release(void *allocator, void *owner)
{
    (void)allocator;
    driver_buf *d = owner;
    free(d->host);
    free(d);
}

static clt__allocator *get_allocator(int slot)
{
    int n = clt__slot_count();
    if (slot < 0 || slot >= n) return NULL;
    pthread_mutex_lock(&table_lock);
    if (!allocators) allocators = calloc((size_t)n, sizeof *allocators);
    clt__allocator *a = allocators ? allocators[slot] : NULL;
    if (allocators && !a) {
        a = calloc(1, sizeof *a);
        if (a) {
            pthread_mutex_init(&a->lock, NULL);
            a->slot = slot;
            a->stats.cap = cap_from_env(clt__slot_get(slot));
            clt__book_ops ops = clt__slot_plans(slot) ? (clt__book_ops){plan_alloc, plan_release, a}
                                                      : (clt__book_ops){driver_alloc, driver_release, a};
            clt__book_init(&a->book, ops, clt__slot_get(slot)->max_alloc, clt__alloc_exact(), &a->stats);
            allocators[slot] = a;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return a;
}

static void count_alloc(clt__allocator *a, clt__block *b)
{
    clt_memory_stats *s = &a->stats;
    s->allocated += (int64_t)b->requested;
    s->category_allocated[b->cat] += (int64_t)b->requested;
    if (s->allocated > s->peak_allocated) {
        s->peak_allocated = s->allocated;
        memcpy(a->at_peak, s->category_allocated, sizeof a->at_peak);
    }
    if (s->category_allocated[b->cat] > s->category_peak[b->cat])
        s->category_peak[b->cat] = s->category_allocated[b->cat];
}

static void driver_release(void *allocator, void *owner)
{
    clt__allocator *a = allocator;
    driver_buf *d = owner;
    cl_command_queue q;
    if (d->host && clt__side_queue(a->slot, &q) == CLT_OK)
        clEnqueueUnmapMemObject(q, d->mem, d->host, 0, NULL, NULL);
    clReleaseMemObject(d->mem);
    free(d);
}

/* Frees every segment that is one whole free block. Lock held. */
static void empty_cache_locked(clt__allocator *a)
{
    clt__book_empty(&a->book);
    if (a->record) a->sample(a->record, &a->stats);
    clt__publish_update(a->slot, &a->stats);
}

static clt_status oom(clt__allocator *a, size_t nbytes, const char *why)
{
    const clt__slot *s = clt__slot_get(a->slot);
    char devname[128] = "described";
    if (!s->described) clGetDeviceInfo(s->device, CL_DEVICE_NAME, sizeof devname, devname, NULL);
    devname[sizeof devname - 1] = '\0';
    char capmsg[64] = "";
    if (a->stats.cap) snprintf(capmsg, sizeof capmsg, " (capped at %.1f MiB)", (double)a->stats.cap / MIB);
    return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                     "out of memory: tried to allocate %.1f MiB on %s (%s): %s; device total %.1f MiB%s; "
                     "cltensor has %.1f MiB allocated and %.1f MiB reserved; try a smaller batch, "
                     "activation checkpointing, or half-precision storage",
                     (double)nbytes / MIB, s->name, devname, why, (double)s->global_mem / MIB, capmsg,
                     (double)a->stats.allocated / MIB, (double)a->stats.reserved / MIB);
}

/* Pinned memory is allocated for host access and mapped for good, on the
 * side queue (the host waits for the map: it needs the address). */
static clt_status map_pinned(clt__allocator *a, cl_mem m, size_t size, void **host)
{
    cl_command_queue q;
    CLT_TRY(clt__side_queue(a->slot, &q));
    cl_int err;
    cl_event ev;
    *host = clEnqueueMapBuffer(q, m, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, NULL, &ev, &err);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "mapping a new pinned buffer of %zu bytes on %s", size, clt__slot_get(a->slot)->name);
    clt_status st = clt__host_wait(a->slot, "mapping new pinned memory", ev);
    clReleaseEvent(ev);
    return st;
}

/* A new device buffer is zero-filled on the device's own in-order queue, so
 * that a lazily allocating driver has to back it: one that fails at the
 * enqueue fails this allocation; one that fails when the fill runs fails the
 * next synchronization point. The host does not wait for the fill, which
 * would drain the pipeline (pocl runs it only after the work queued ahead),
 * and the queue's order puts it before every later use of the memory. */
static clt_status touch_device(clt__allocator *a, cl_mem m, size_t size)
{
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(a->slot, &q));
    const cl_uchar zero = 0;
    cl_event ev;
    cl_int err = clEnqueueFillBuffer(q, m, &zero, 1, 0, size, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return clt__cl_fail(err, "touching a new buffer of %zu bytes on %s", size, clt__slot_get(a->slot)->name);
    /* Through the hook only in blocking mode: the enqueue includes the
     * driver's allocation, and as a trace's first command on the device it
     * would skew the mapping of device clocks (src/device/trace.c). */
    clt_status st = clt_launch_get_blocking() ? clt__after_enqueue(a->slot, ev, "touch new buffer") : CLT_OK;
    clReleaseEvent(ev);
    return st;
}

/* Gets a buffer from the driver: mapped (pinned memory) or touched. */
static clt_status driver_alloc(void *allocator, size_t size, void **owner)
{
    clt__allocator *a = allocator;
    const clt__slot *s = clt__slot_get(a->slot);
    if (clt__fault(CLT__FAULT_DRIVER))
        return clt__cl_fail(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer of %zu bytes on %s (injected by CLT_FAULT)",
                            size, s->name);
    cl_context ctx;
    CLT_TRY(clt__slot_context(a->slot, &ctx));
    int pinned = s->type == CLT_DEVICE_PINNED;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (pinned ? CL_MEM_ALLOC_HOST_PTR : 0), size, NULL, &err);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clCreateBuffer of %zu bytes on %s", size, s->name);
    void *p = NULL;
    clt_status st = pinned ? map_pinned(a, m, size, &p) : touch_device(a, m, size);
    if (st != CLT_OK) {
        clReleaseMemObject(m);
        return st;
    }
    driver_buf *d = malloc(sizeof *d);
    if (!d) {
        clReleaseMemObject(m);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    }
    *d = (driver_buf){m, p, a->slot};
    *owner = d;
    return CLT_OK;
}

/* A cap set below what is reserved: the cached segments beyond it go back
 * to the driver, and a request the cache could still serve fails when the
 * tensors would then hold more than the cap, as on a device that small (the
 * book asks the driver only within the cap). Lock held. */
static int within_cap(clt__allocator *a, size_t nbytes)
{
    clt_memory_stats *s = &a->stats;
    if (!s->cap || s->reserved <= s->cap) return 1;
    clt__book_empty(&a->book);
    return s->allocated + (int64_t)nbytes <= s->cap;
}

clt_status clt__alloc(int slot, size_t nbytes, clt_memory_category cat, clt__block **out)
{
    *out = NULL;
    clt__allocator *a = get_allocator(slot);
    if (!a) return clt__fail(CLT_ERR_NO_DEVICE, "internal: no allocator for device slot %d", slot);
    const clt__slot *s = clt__slot_get(slot);
    if (nbytes > s->max_alloc) {
        atomic_fetch_add(&a->refused, 1);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                         "tensor of %.1f MiB exceeds the largest single allocation of %s (%.1f MiB)",
                         (double)nbytes / MIB, s->name, (double)s->max_alloc / MIB);
    }
    if (clt__fault(CLT__FAULT_ALLOC)) {
        atomic_fetch_add(&a->refused, 1);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes on %s (injected by CLT_FAULT)", nbytes,
                         s->name);
    }
    pthread_mutex_lock(&a->lock);
    clt__block *b;
    clt_status st = within_cap(a, nbytes) ? clt__book_take(&a->book, nbytes, &b) : CLT_ERR_OUT_OF_MEMORY;
    if (st == CLT_ERR_OUT_OF_MEMORY) {
        const char *why = clt_last_error();
        char reason[256];
        snprintf(reason, sizeof reason, "%s", a->stats.cap ? "over the memory cap" : why);
        st = oom(a, nbytes, reason);
    }
    if (st != CLT_OK) atomic_fetch_add(&a->refused, 1);
    if (st == CLT_OK) {
        b->requested = nbytes;
        b->cat = cat;
        count_alloc(a, b);
        *out = b;
    }
    /* Sampled and published after a failure too: the retry may have released
     * cached segments. */
    if (a->record) a->sample(a->record, &a->stats);
    clt__publish_update(slot, &a->stats);
    pthread_mutex_unlock(&a->lock);
    return st;
}

void clt__free(clt__block *b, cl_event pending)
{
    if (!b) return;
    clt__allocator *a = get_allocator(clt__block_slot(b));
    if (pending) {
        /* Later commands on this device's in-order queue must not overwrite
         * the block while another queue still reads it. */
        cl_command_queue q;
        if (clt__fault(CLT__FAULT_CALLBACK) || clt__slot_queue(a->slot, &q) != CLT_OK ||
            clEnqueueBarrierWithWaitList(q, 1, &pending, NULL) != CL_SUCCESS)
            clt__sync_fallback(a->slot, "clt_tensor_release (a block another device reads: no barrier)", pending);
    }
    pthread_mutex_lock(&a->lock);
    a->stats.allocated -= (int64_t)b->requested;
    a->stats.category_allocated[b->cat] -= (int64_t)b->requested;
    b->requested = 0;
    clt__book_give(&a->book, b);
    if (a->record) a->sample(a->record, &a->stats);
    clt__publish_update(a->slot, &a->stats);
    pthread_mutex_unlock(&a->lock);
}

void clt__block_set_category(clt__block *b, clt_memory_category cat)
{
    clt__allocator *a = get_allocator(clt__block_slot(b));
    pthread_mutex_lock(&a->lock);
    a->stats.category_allocated[b->cat] -= (int64_t)b->requested;
    b->cat = cat;
    a->stats.category_allocated[cat] += (int64_t)b->requested;
    if (a->stats.category_allocated[cat] > a->stats.category_peak[cat])
        a->stats.category_peak[cat] = a->stats.category_allocated[cat];
    /* Still at the peak (a block categorised as soon as it is made, the
     * last of the peak): the peak's categories are the new ones. */
    if (a->stats.allocated == a->stats.peak_allocated)
        memcpy(a->at_peak, a->stats.category_allocated, sizeof a->at_peak);
    if (a->record) a->sample(a->record, &a->stats);
    pthread_mutex_unlock(&a->lock);
}

clt_status clt__alloc_set_record(int slot, clt_memory_record *rec, clt__alloc_sample_fn *sample, clt_memory_record **old)
{
    clt__allocator *a = get_allocator(slot);
    if (!a) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    pthread_mutex_lock(&a->lock);
    *old = a->record;
    int busy = rec && a->record;
    if (!busy) {
        a->record = rec;
        a->sample = sample;
    }
    if (rec && !busy) sample(rec, &a->stats);
    pthread_mutex_unlock(&a->lock);
    return busy ? clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s records already", clt__slot_get(slot)->name) : CLT_OK;
}

void clt__alloc_with_record(int slot, void (*fn)(clt_memory_record *, const clt_memory_stats *, void *), void *arg)
{
    clt__allocator *a = get_allocator(slot);
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    if (a->record) fn(a->record, &a->stats, arg);
    pthread_mutex_unlock(&a->lock);
}

static const driver_buf *buf_of(const clt__block *b) { return b->seg->owner; }

cl_mem clt__block_mem(const clt__block *b) { return buf_of(b)->mem; }
size_t clt__block_offset(const clt__block *b) { return b->offset; }
void *clt__block_host(const clt__block *b) { return buf_of(b)->host ? (char *)buf_of(b)->host + b->offset : NULL; }
int clt__block_slot(const clt__block *b) { return buf_of(b)->slot; }

/* Public counters. A device never used reads zero everywhere but the cap
 * (CLT_MEMORY_CAP's, set when the allocator is made). */

static clt__allocator *allocator_for(clt_device dev, clt_status *st)
{
    int slot;
    *st = clt__resolve(dev, &slot);
    if (*st != CLT_OK) return NULL;
    clt__allocator *a = get_allocator(slot);
    if (!a) *st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    return a;
}

clt_status clt_memory_get_stats(clt_device dev, clt_memory_stats *out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_get_stats: out is NULL");
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) {
        memset(out, 0, sizeof *out);
        return st;
    }
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt__memory_at_peak(clt_device dev, int64_t *bytes)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    memcpy(bytes, a->at_peak, sizeof a->at_peak);
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

uint64_t clt__alloc_refusals(clt_device dev)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    return a ? atomic_load(&a->refused) : 0;
}

static clt_memory_stats stats_of(clt_device dev)
{
    clt_memory_stats s;
    clt_memory_get_stats(dev, &s);
    return s;
}

int64_t clt_memory_allocated(clt_device dev) { return stats_of(dev).allocated; }
int64_t clt_memory_reserved(clt_device dev) { return stats_of(dev).reserved; }
int64_t clt_memory_max_allocated(clt_device dev) { return stats_of(dev).peak_allocated; }
int64_t clt_memory_max_reserved(clt_device dev) { return stats_of(dev).peak_reserved; }

int64_t clt_memory_allocated_category(clt_device dev, clt_memory_category c)
{
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? stats_of(dev).category_allocated[c] : 0;
}

int64_t clt_memory_max_allocated_category(clt_device dev, clt_memory_category c)
{
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? stats_of(dev).category_peak[c] : 0;
}

clt_status clt_memory_reset_peak(clt_device dev)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    a->stats.peak_allocated = a->stats.allocated;
    memcpy(a->at_peak, a->stats.category_allocated, sizeof a->at_peak);
    a->stats.peak_reserved = a->stats.reserved;
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) a->stats.category_peak[c] = a->stats.category_allocated[c];
    clt__publish_update(a->slot, &a->stats);
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt_memory_empty_cache(clt_device dev)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    empty_cache_locked(a);
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt_memory_set_cap(clt_device dev, int64_t bytes)
{
    if (bytes < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "memory cap of %lld bytes is negative", (long long)bytes);
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    a->stats.cap = bytes;
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt_memory_set_fraction(clt_device dev, double fraction)
{
    if (!(fraction > 0 && fraction <= 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "memory fraction %g is not in (0, 1]", fraction);
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    return clt_memory_set_cap(dev, (int64_t)(fraction * (double)clt__slot_get(slot)->global_mem));
}

const char *clt_memory_category_name(clt_memory_category c)
{
    static const char *names[CLT_MEM_CATEGORY_COUNT] = {"other", "weights", "activations", "gradients",
                                                         "optimizer state"};
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? names[c] : "unknown";
}
