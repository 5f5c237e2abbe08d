/* The caching allocator's placement policy (see book.h). */
#include "book.h"

#include <stdlib.h>

#define ROUND 512u
#define SMALL_LIMIT (1u << 20)
#define SMALL_SEGMENT (2u << 20)
#define LARGE_SEGMENT (20u << 20)
#define LARGE_DIRECT (10u << 20)

enum { POOL_SMALL, POOL_LARGE };

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

void clt__book_init(clt__book *b, clt__book_ops ops, size_t max_alloc, int exact, clt_memory_stats *stats)
{
    *b = (clt__book){.ops = ops, .max_alloc = max_alloc, .exact = exact, .stats = stats};
}

static void free_list_remove(clt__book *bk, clt__block *b)
{
    int pool = b->seg->pool;
    if (b->free_prev) b->free_prev->free_next = b->free_next;
    else bk->free_list[pool] = b->free_next;
    if (b->free_next) b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = NULL;
    bk->stats->cached_blocks--;
}

/* Keeps each pool's list sorted by size, then address, for best fit. */
static void free_list_insert(clt__book *bk, clt__block *b)
{
    int pool = b->seg->pool;
    clt__block *prev = NULL, *cur = bk->free_list[pool];
    while (cur && (cur->size < b->size || (cur->size == b->size && cur->offset < b->offset))) {
        prev = cur;
        cur = cur->free_next;
    }
    b->free_prev = prev;
    b->free_next = cur;
    if (prev) prev->free_next = b;
    else bk->free_list[pool] = b;
    if (cur) cur->free_prev = b;
    bk->stats->cached_blocks++;
}

static void release_segment(clt__book *bk, clt__segment *seg)
{
    clt__segment **pp = &bk->segments;
    while (*pp != seg) pp = &(*pp)->next;
    *pp = seg->next;
    if (bk->ops.release) bk->ops.release(bk->ops.ctx, seg->owner);
    bk->stats->reserved -= (int64_t)seg->size;
    bk->stats->segments--;
    bk->stats->driver_frees++;
    free(seg);
}

void clt__book_empty(clt__book *bk)
{
    for (int pool = POOL_SMALL; pool <= POOL_LARGE; pool++) {
        clt__block *b = bk->free_list[pool];
        while (b) {
            clt__block *next = b->free_next;
            if (!b->prev && !b->next) {
                clt__segment *seg = b->seg;
                free_list_remove(bk, b);
                free(b);
                release_segment(bk, seg);
            }
            b = next;
        }
    }
}

void clt__book_clear(clt__book *bk)
{
    while (bk->segments) {
        clt__segment *seg = bk->segments;
        bk->segments = seg->next;
        for (clt__block *b = seg->first; b;) {
            clt__block *next = b->next;
            free(b);
            b = next;
        }
        free(seg);
    }
    bk->free_list[POOL_SMALL] = bk->free_list[POOL_LARGE] = NULL;
}

/* The cap is the book's to enforce: the device is asked only within it. */
static clt_status acquire(clt__book *bk, size_t size, void **owner)
{
    *owner = NULL;
    if (bk->stats->cap && bk->stats->reserved + (int64_t)size > bk->stats->cap) return CLT_ERR_OUT_OF_MEMORY;
    return bk->ops.acquire ? bk->ops.acquire(bk->ops.ctx, size, owner) : CLT_OK;
}

static clt_status new_segment(clt__book *bk, int pool, size_t size, clt__block **out)
{
    size_t seg_size = pool == POOL_SMALL ? SMALL_SEGMENT
                      : size < LARGE_DIRECT ? LARGE_SEGMENT
                                            : round_up(size, SMALL_SEGMENT);
    if (seg_size > bk->max_alloc || bk->exact) seg_size = size;
    void *owner;
    clt_status st = acquire(bk, seg_size, &owner);
    if (st == CLT_ERR_OUT_OF_MEMORY && seg_size > size) {
        seg_size = size;
        st = acquire(bk, seg_size, &owner);
    }
    if (st != CLT_OK) return st;
    clt__segment *seg = calloc(1, sizeof *seg);
    clt__block *b = calloc(1, sizeof *b);
    if (!seg || !b) {
        free(seg);
        free(b);
        if (bk->ops.release) bk->ops.release(bk->ops.ctx, owner);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for allocator bookkeeping");
    }
    seg->owner = owner;
    seg->size = seg_size;
    seg->pool = pool;
    seg->first = b;
    seg->next = bk->segments;
    bk->segments = seg;
    b->seg = seg;
    b->size = seg_size;
    b->free = 1;
    clt_memory_stats *s = bk->stats;
    s->reserved += (int64_t)seg_size;
    if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
    s->segments++;
    s->driver_allocs++;
    free_list_insert(bk, b);
    *out = b;
    return CLT_OK;
}

/* Takes `size` bytes from the front of free block b, returning the rest to the cache. */
static clt_status split_take(clt__book *bk, clt__block *b, size_t size)
{
    free_list_remove(bk, b);
    size_t rest = b->size - size;
    size_t min_split = b->seg->pool == POOL_SMALL ? ROUND : SMALL_LIMIT;
    if (rest >= min_split) {
        clt__block *r = calloc(1, sizeof *r);
        if (!r) {
            free_list_insert(bk, b);
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
        free_list_insert(bk, r);
        bk->stats->splits++;
    }
    b->free = 0;
    return CLT_OK;
}

clt_status clt__book_take(clt__book *bk, size_t nbytes, clt__block **out)
{
    *out = NULL;
    size_t size = bk->exact ? (nbytes ? nbytes : 1) : round_up(nbytes, ROUND);
    int pool = size <= SMALL_LIMIT ? POOL_SMALL : POOL_LARGE;
    clt__block *b = NULL;
    for (clt__block *c = bk->exact ? NULL : bk->free_list[pool]; c && !b; c = c->free_next)
        if (c->size >= size) b = c;
    if (b) {
        bk->stats->cache_hits++;
    } else {
        clt_status st = new_segment(bk, pool, size, &b);
        if (st == CLT_ERR_OUT_OF_MEMORY) {
            /* Cached blocks of the wrong size may be what stands in the way. */
            bk->stats->oom_retries++;
            clt__book_empty(bk);
            st = new_segment(bk, pool, size, &b);
        }
        if (st != CLT_OK) return st;
    }
    CLT_TRY(split_take(bk, b, size));
    *out = b;
    return CLT_OK;
}

void clt__book_give(clt__book *bk, clt__block *b)
{
    b->free = 1;
    if (b->prev && b->prev->free) {
        clt__block *p = b->prev;
        free_list_remove(bk, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b);
        b = p;
    }
    if (b->next && b->next->free) {
        clt__block *n = b->next;
        free_list_remove(bk, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n);
    }
    free_list_insert(bk, b);
    if (bk->exact) clt__book_empty(bk);
}
