/* The caching allocator: one per device. Freed blocks go back to a cache and
 * serve later requests; the driver is asked only on a miss. Sizes round up to
 * 512 bytes. Requests up to 1 MiB come from a small pool carved out of 2 MiB
 * buffers; larger ones from a large pool whose cached blocks are split when a
 * smaller request takes them. Free neighbours merge again. */
#include "allocator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/fault.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "publish.h"

#define ROUND 512u
#define SMALL_LIMIT (1u << 20)
#define SMALL_SEGMENT (2u << 20)
#define LARGE_SEGMENT (20u << 20)
#define LARGE_DIRECT (10u << 20)
#define MIB (1024.0 * 1024.0)

enum { POOL_SMALL, POOL_LARGE, POOL_COUNT };

typedef struct clt__segment clt__segment;

struct clt__block {
    clt__segment *seg;
    size_t offset, size;    /* within the segment; size is rounded */
    size_t requested;       /* bytes the tensor asked for (what stats count) */
    clt_category cat;
    int free;
    clt__block *prev, *next;           /* address-order neighbours in the segment */
    clt__block *free_prev, *free_next; /* the pool's free list, by size */
};

struct clt__segment {
    cl_mem mem;
    void *host; /* pinned memory: the mapped address, else NULL */
    size_t size;
    int pool;
    int slot;
    clt__segment *next;
};

typedef struct clt__allocator {
    pthread_mutex_t lock;
    int slot;
    clt__block *free_list[POOL_COUNT];
    clt__segment *segments;
    clt_memory_stats stats;
} clt__allocator;

static clt__allocator **allocators;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Parses "512M", "2G", "1048576" or a fraction such as "0.5" of `total`. */
static int parse_cap(const char *text, int64_t total, int64_t *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || v < 0) return 0;
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0; end++; break;
    case 'M': case 'm': mult = MIB; end++; break;
    case 'G': case 'g': mult = MIB * 1024.0; end++; break;
    default: break;
    }
    if (*end != '\0' && *end != ',') return 0;
    if (mult == 1 && v > 0 && v <= 1 && memchr(text, '.', (size_t)(end - text))) v *= (double)total;
    else v *= mult;
    *out = (int64_t)v;
    return 1;
}

/* CLT_MEMORY_CAP="512M" caps every device; "gpu:0=1G,cpu:0=0.5" each one. */
static int64_t cap_from_env(const clt__slot *s)
{
    const char *env = getenv("CLT_MEMORY_CAP");
    if (!env || !*env) return 0;
    int64_t cap = 0;
    if (!strchr(env, '=')) return parse_cap(env, (int64_t)s->global_mem, &cap) ? cap : 0;
    size_t nlen = strlen(s->name);
    for (const char *p = env; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, s->name, nlen) == 0 && p[nlen] == '=')
            return parse_cap(p + nlen + 1, (int64_t)s->global_mem, &cap) ? cap : 0;
    }
    return 0;
}

/* CLT_ALLOC_EXACT=1 gives every tensor a driver buffer of exactly its size,
 * freed with the tensor: slow, but a checker such as oclgrind then sees an
 * overrun past any tensor's end, not only past a cached segment's. */
static int exact_mode(void)
{
    static atomic_int mode = -1;
    int m = atomic_load(&mode);
    if (m < 0) {
        const char *env = getenv("CLT_ALLOC_EXACT");
        m = env && strcmp(env, "1") == 0;
        atomic_store(&mode, m);
    }
    return m;
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
            allocators[slot] = a;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return a;
}

static void free_list_remove(clt__allocator *a, clt__block *b)
{
    int pool = b->seg->pool;
    if (b->free_prev) b->free_prev->free_next = b->free_next;
    else a->free_list[pool] = b->free_next;
    if (b->free_next) b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = NULL;
    a->stats.cached_blocks--;
}

/* Keeps each pool's list sorted by size, then address, for best fit. */
static void free_list_insert(clt__allocator *a, clt__block *b)
{
    int pool = b->seg->pool;
    clt__block *prev = NULL, *cur = a->free_list[pool];
    while (cur && (cur->size < b->size || (cur->size == b->size && cur->offset < b->offset))) {
        prev = cur;
        cur = cur->free_next;
    }
    b->free_prev = prev;
    b->free_next = cur;
    if (prev) prev->free_next = b;
    else a->free_list[pool] = b;
    if (cur) cur->free_prev = b;
    a->stats.cached_blocks++;
}

static void count_alloc(clt__allocator *a, clt__block *b)
{
    clt_memory_stats *s = &a->stats;
    s->allocated += (int64_t)b->requested;
    if (s->allocated > s->peak_allocated) s->peak_allocated = s->allocated;
    s->category_allocated[b->cat] += (int64_t)b->requested;
    if (s->category_allocated[b->cat] > s->category_peak[b->cat])
        s->category_peak[b->cat] = s->category_allocated[b->cat];
}

static void release_segment(clt__allocator *a, clt__segment *seg)
{
    clt__segment **pp = &a->segments;
    while (*pp != seg) pp = &(*pp)->next;
    *pp = seg->next;
    cl_command_queue q;
    if (seg->host && clt__side_queue(a->slot, &q) == CLT_OK)
        clEnqueueUnmapMemObject(q, seg->mem, seg->host, 0, NULL, NULL);
    clReleaseMemObject(seg->mem);
    a->stats.reserved -= (int64_t)seg->size;
    a->stats.segments--;
    a->stats.driver_frees++;
    free(seg);
}

/* Frees every segment that is one whole free block. Lock held. */
static void empty_cache_locked(clt__allocator *a)
{
    for (int pool = 0; pool < POOL_COUNT; pool++) {
        clt__block *b = a->free_list[pool];
        while (b) {
            clt__block *next = b->free_next;
            if (!b->prev && !b->next) {
                clt__segment *seg = b->seg;
                free_list_remove(a, b);
                free(b);
                release_segment(a, seg);
            }
            b = next;
        }
    }
    clt__publish_update(a->slot, &a->stats);
}

static clt_status oom(clt__allocator *a, size_t nbytes, const char *why)
{
    const clt__slot *s = clt__slot_get(a->slot);
    char devname[128] = "";
    clGetDeviceInfo(s->device, CL_DEVICE_NAME, sizeof devname, devname, NULL);
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

/* Gets a buffer from the driver and touches it, so that a lazily allocating
 * driver reports out-of-memory here rather than at a later kernel launch.
 * The touch runs on a side queue: it does not wait behind queued work.
 * Pinned memory is allocated for host access and mapped for good instead. */
static clt_status driver_alloc(clt__allocator *a, size_t size, cl_mem *out, void **host)
{
    const clt__slot *s = clt__slot_get(a->slot);
    if (a->stats.cap && a->stats.reserved + (int64_t)size > a->stats.cap)
        return CLT_ERR_OUT_OF_MEMORY;
    if (clt__fault(CLT__FAULT_DRIVER))
        return clt__cl_fail(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer of %zu bytes on %s (injected by CLT_FAULT)",
                            size, s->name);
    cl_context ctx;
    cl_command_queue q;
    CLT_TRY(clt__slot_context(a->slot, &ctx));
    CLT_TRY(clt__side_queue(a->slot, &q));
    int pinned = s->type == CLT_DEVICE_PINNED;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (pinned ? CL_MEM_ALLOC_HOST_PTR : 0), size, NULL, &err);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clCreateBuffer of %zu bytes on %s", size, s->name);
    const cl_uchar zero = 0;
    cl_event ev;
    void *p = NULL;
    if (pinned)
        p = clEnqueueMapBuffer(q, m, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, NULL, &ev, &err);
    else
        err = clEnqueueFillBuffer(q, m, &zero, 1, 0, size, 0, NULL, &ev);
    clt_status st = CLT_OK;
    if (err == CL_SUCCESS) {
        st = clt__host_wait(a->slot, pinned ? "mapping new pinned memory" : "touching a new device buffer", ev);
        clReleaseEvent(ev);
    }
    if (err != CL_SUCCESS || st != CLT_OK) {
        clReleaseMemObject(m);
        if (st != CLT_OK) return st;
        return clt__cl_fail(err, "touching a new buffer of %zu bytes on %s", size, s->name);
    }
    *out = m;
    *host = p;
    return CLT_OK;
}

static clt__block *best_fit(clt__allocator *a, int pool, size_t size)
{
    for (clt__block *b = a->free_list[pool]; b; b = b->free_next)
        if (b->size >= size) return b;
    return NULL;
}

static clt_status new_segment(clt__allocator *a, int pool, size_t size, clt__block **out)
{
    const clt__slot *s = clt__slot_get(a->slot);
    size_t seg_size = pool == POOL_SMALL ? SMALL_SEGMENT
                      : size < LARGE_DIRECT ? LARGE_SEGMENT
                                            : round_up(size, SMALL_SEGMENT);
    if (seg_size > s->max_alloc || exact_mode()) seg_size = size;
    cl_mem mem = NULL;
    void *host = NULL;
    clt_status st = driver_alloc(a, seg_size, &mem, &host);
    if (st == CLT_ERR_OUT_OF_MEMORY && seg_size > size) {
        seg_size = size;
        st = driver_alloc(a, seg_size, &mem, &host);
    }
    if (st != CLT_OK) return st;
    clt__segment *seg = calloc(1, sizeof *seg);
    clt__block *b = calloc(1, sizeof *b);
    if (!seg || !b) {
        free(seg);
        free(b);
        clReleaseMemObject(mem);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    }
    seg->mem = mem;
    seg->host = host;
    seg->size = seg_size;
    seg->pool = pool;
    seg->slot = a->slot;
    seg->next = a->segments;
    a->segments = seg;
    b->seg = seg;
    b->size = seg_size;
    b->free = 1;
    a->stats.reserved += (int64_t)seg_size;
    if (a->stats.reserved > a->stats.peak_reserved) a->stats.peak_reserved = a->stats.reserved;
    a->stats.segments++;
    a->stats.driver_allocs++;
    free_list_insert(a, b);
    *out = b;
    return CLT_OK;
}

/* Takes `size` bytes from the front of free block b, returning the rest to the cache. */
static clt_status take(clt__allocator *a, clt__block *b, size_t size)
{
    free_list_remove(a, b);
    size_t rest = b->size - size;
    size_t min_split = b->seg->pool == POOL_SMALL ? ROUND : SMALL_LIMIT;
    if (rest >= min_split) {
        clt__block *r = calloc(1, sizeof *r);
        if (!r) {
            free_list_insert(a, b);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
        }
        r->seg = b->seg;
        r->offset = b->offset + size;
        r->size = rest;
        r->free = 1;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        free_list_insert(a, r);
        a->stats.splits++;
    }
    b->free = 0;
    return CLT_OK;
}

clt_status clt__alloc(int slot, size_t nbytes, clt_category cat, clt__block **out)
{
    *out = NULL;
    clt__allocator *a = get_allocator(slot);
    if (!a) return clt__fail(CLT_ERR_NO_DEVICE, "internal: no allocator for device slot %d", slot);
    const clt__slot *s = clt__slot_get(slot);
    if (nbytes > s->max_alloc)
        return clt__fail(CLT_ERR_OUT_OF_MEMORY,
                         "tensor of %.1f MiB exceeds the largest single allocation of %s (%.1f MiB)",
                         (double)nbytes / MIB, s->name, (double)s->max_alloc / MIB);
    if (clt__fault(CLT__FAULT_ALLOC))
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes on %s (injected by CLT_FAULT)", nbytes,
                         s->name);
    int exact = exact_mode();
    size_t size = exact ? (nbytes ? nbytes : 1) : round_up(nbytes, ROUND);
    int pool = size <= SMALL_LIMIT ? POOL_SMALL : POOL_LARGE;
    pthread_mutex_lock(&a->lock);
    clt__block *b = exact ? NULL : best_fit(a, pool, size);
    clt_status st = CLT_OK;
    if (b) {
        a->stats.cache_hits++;
    } else {
        st = new_segment(a, pool, size, &b);
        if (st == CLT_ERR_OUT_OF_MEMORY) {
            /* Cached blocks of the wrong size may be what stands in the way. */
            a->stats.oom_retries++;
            empty_cache_locked(a);
            st = new_segment(a, pool, size, &b);
        }
        if (st == CLT_ERR_OUT_OF_MEMORY) {
            const char *why = clt_last_error();
            char reason[256];
            snprintf(reason, sizeof reason, "%s", a->stats.cap ? "over the memory cap" : why);
            st = oom(a, nbytes, reason);
        }
    }
    if (st == CLT_OK) st = take(a, b, size);
    if (st == CLT_OK) {
        b->requested = nbytes;
        b->cat = cat;
        count_alloc(a, b);
        clt__publish_update(slot, &a->stats);
        *out = b;
    }
    pthread_mutex_unlock(&a->lock);
    return st;
}

void clt__free(clt__block *b, cl_event pending)
{
    if (!b) return;
    clt__allocator *a = get_allocator(b->seg->slot);
    if (pending) {
        /* Later commands on this device's in-order queue must not overwrite
         * the block while another queue still reads it. */
        cl_command_queue q;
        if (clt__slot_queue(a->slot, &q) != CLT_OK || clEnqueueBarrierWithWaitList(q, 1, &pending, NULL) != CL_SUCCESS)
            clt__host_wait(a->slot, "freeing a block another device reads", pending);
    }
    pthread_mutex_lock(&a->lock);
    a->stats.allocated -= (int64_t)b->requested;
    a->stats.category_allocated[b->cat] -= (int64_t)b->requested;
    b->free = 1;
    b->requested = 0;
    if (b->prev && b->prev->free) {
        clt__block *p = b->prev;
        free_list_remove(a, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b);
        b = p;
    }
    if (b->next && b->next->free) {
        clt__block *n = b->next;
        free_list_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n);
    }
    free_list_insert(a, b);
    if (exact_mode())
        empty_cache_locked(a);
    else
        clt__publish_update(a->slot, &a->stats);
    pthread_mutex_unlock(&a->lock);
}

void clt__block_set_category(clt__block *b, clt_category cat)
{
    clt__allocator *a = get_allocator(b->seg->slot);
    pthread_mutex_lock(&a->lock);
    a->stats.category_allocated[b->cat] -= (int64_t)b->requested;
    b->cat = cat;
    a->stats.category_allocated[cat] += (int64_t)b->requested;
    if (a->stats.category_allocated[cat] > a->stats.category_peak[cat])
        a->stats.category_peak[cat] = a->stats.category_allocated[cat];
    pthread_mutex_unlock(&a->lock);
}

cl_mem clt__block_mem(const clt__block *b) { return b->seg->mem; }
size_t clt__block_offset(const clt__block *b) { return b->offset; }
void *clt__block_host(const clt__block *b) { return b->seg->host ? (char *)b->seg->host + b->offset : NULL; }
int clt__block_slot(const clt__block *b) { return b->seg->slot; }

/* Public counters. A device never used reads zero everywhere. */

static clt__allocator *allocator_for(clt_device dev, clt_status *st)
{
    int slot;
    *st = clt__resolve(dev, &slot);
    if (*st != CLT_OK) return NULL;
    clt__allocator *a = get_allocator(slot);
    if (!a) *st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    return a;
}

clt_status clt_memory_stats_get(clt_device dev, clt_memory_stats *out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_stats_get: out is NULL");
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

static clt_memory_stats stats_of(clt_device dev)
{
    clt_memory_stats s;
    clt_memory_stats_get(dev, &s);
    return s;
}

int64_t clt_memory_allocated(clt_device dev) { return stats_of(dev).allocated; }
int64_t clt_memory_reserved(clt_device dev) { return stats_of(dev).reserved; }
int64_t clt_max_memory_allocated(clt_device dev) { return stats_of(dev).peak_allocated; }
int64_t clt_max_memory_reserved(clt_device dev) { return stats_of(dev).peak_reserved; }

int64_t clt_memory_allocated_category(clt_device dev, clt_category c)
{
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? stats_of(dev).category_allocated[c] : 0;
}

int64_t clt_max_memory_allocated_category(clt_device dev, clt_category c)
{
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? stats_of(dev).category_peak[c] : 0;
}

clt_status clt_reset_peak_memory_stats(clt_device dev)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    a->stats.peak_allocated = a->stats.allocated;
    a->stats.peak_reserved = a->stats.reserved;
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) a->stats.category_peak[c] = a->stats.category_allocated[c];
    clt__publish_update(a->slot, &a->stats);
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt_empty_cache(clt_device dev)
{
    clt_status st;
    clt__allocator *a = allocator_for(dev, &st);
    if (!a) return st;
    pthread_mutex_lock(&a->lock);
    empty_cache_locked(a);
    pthread_mutex_unlock(&a->lock);
    return CLT_OK;
}

clt_status clt_set_memory_cap(clt_device dev, int64_t bytes)
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

clt_status clt_set_memory_fraction(clt_device dev, double fraction)
{
    if (!(fraction > 0 && fraction <= 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "memory fraction %g is not in (0, 1]", fraction);
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    return clt_set_memory_cap(dev, (int64_t)(fraction * (double)clt__slot_get(slot)->global_mem));
}

const char *clt_category_name(clt_category c)
{
    static const char *names[CLT_MEM_CATEGORY_COUNT] = {"other", "weights", "activations", "gradients",
                                                         "optimizer state"};
    return c >= 0 && c < CLT_MEM_CATEGORY_COUNT ? names[c] : "unknown";
}
