/* Internal: the caching allocator's placement policy with no driver in it,
 * shared by device buffers and by a planning device's (clt_plan_device),
 * which the memory planner runs on.
 * Sizes round up to 512 bytes. Requests up to 1 MiB come from a small pool
 * carved out of 2 MiB segments; larger ones from a large pool of 20 MiB
 * segments (10 MiB and up get a segment of their own, rounded to 2 MiB).
 * Each pool serves best fit from its own free blocks, splitting them; free
 * neighbours merge again. A segment that does not fit (under the cap or on
 * the device) is asked for at the request's exact size instead; when that
 * fails too, the segments that hold nothing are released and the request
 * retried once. */
#ifndef CLT_MEMORY_BOOK_H
#define CLT_MEMORY_BOOK_H

#include <stddef.h>
#include "../core/error.h"
#include "cltensor/memory.h"

typedef struct clt__segment clt__segment;
typedef struct clt__block clt__block;

struct clt__segment {
    void *owner;        /* what acquire returned for it (the driver buffer) */
    size_t size;
    int pool;
    clt__block *first;  /* the block at offset 0: merges keep it */
    clt__segment *next;
};

struct clt__block {
    clt__segment *seg;
    size_t offset, size;    /* within the segment; size is rounded */
    size_t requested;       /* the owner's accounting: the book never reads these two */
    clt_memory_category cat;
    int free;
    clt__block *prev, *next;           /* address-order neighbours in the segment */
    clt__block *free_prev, *free_next; /* the pool's free list, by size */
};

/* Where segments come from. acquire returns CLT_ERR_OUT_OF_MEMORY when the
 * device has no room (the book then retries as above), another status on
 * other failures; NULL callbacks make a book that only counts. */
typedef struct clt__book_ops {
    clt_status (*acquire)(void *ctx, size_t size, void **owner);
    void (*release)(void *ctx, void *owner);
    void *ctx;
} clt__book_ops;

typedef struct clt__book {
    clt__book_ops ops;
    size_t max_alloc;           /* the device's largest buffer: no segment rounds up past it */
    int exact;                  /* CLT_ALLOC_EXACT: a segment of exactly each request, released with it */
    clt_memory_stats *stats;    /* the book keeps reserved, peak_reserved, segments, cached_blocks and the
                                   counts of driver allocs and frees, cache hits, splits and retries; it
                                   reads cap */
    clt__block *free_list[2];
    clt__segment *segments;
} clt__book;

void clt__book_init(clt__book *b, clt__book_ops ops, size_t max_alloc, int exact, clt_memory_stats *stats);
/* Places nbytes (> 0). CLT_ERR_OUT_OF_MEMORY when the cap or the device
 * has no room even after releasing the cache (no message set for the cap). */
clt_status clt__book_take(clt__book *b, size_t nbytes, clt__block **out);
/* Returns a taken block to its pool. */
void clt__book_give(clt__book *b, clt__block *blk);
/* Releases every segment that is one whole free block. */
void clt__book_empty(clt__book *b);
/* Forgets every block and segment without releasing them (a counting book's teardown). */
void clt__book_clear(clt__book *b);

#endif
