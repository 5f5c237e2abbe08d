/* Internal: the caching allocator. A block is a range of a driver buffer
 * (a segment); tensors address it as (segment buffer, byte offset). */
#ifndef CLT_MEMORY_ALLOCATOR_H
#define CLT_MEMORY_ALLOCATOR_H

#include <stddef.h>
#include "../core/error.h"
#include "cltensor/memory.h"

typedef struct clt__block clt__block;

/* Takes nbytes (> 0) on a slot's device for a category. */
clt_status clt__alloc(int slot, size_t nbytes, clt_memory_category cat, clt__block **out);
/* Gives a block back to its device's cache. `pending` (may be NULL) is an
 * event of another queue that still reads the block: later work on the
 * owning queue waits for it before the memory is reused. */
void clt__free(clt__block *b, cl_event pending);
/* Moves a block's bytes from one category's counters to another's. */
void clt__block_set_category(clt__block *b, clt_memory_category cat);

cl_mem clt__block_mem(const clt__block *b);
size_t clt__block_offset(const clt__block *b);
/* The host address of a pinned block (NULL on other devices). */
void *clt__block_host(const clt__block *b);
int clt__block_slot(const clt__block *b);

/* Recording (record.c, a file above this one, registers itself here):
 * installs rec as the slot's record (NULL: none) with sample, the function
 * that appends the counters s to it, and samples them at once; *old
 * receives the record it replaces. A record is not replaced by another:
 * CLT_ERR_INVALID_ARGUMENT. While one is installed every event calls
 * sample(rec, counters) under the allocator's lock. */
typedef void clt__alloc_sample_fn(clt_memory_record *rec, const clt_memory_stats *s);
clt_status clt__alloc_set_record(int slot, clt_memory_record *rec, clt__alloc_sample_fn *sample, clt_memory_record **old);
/* Runs fn on the slot's record and counters under the allocator's lock
 * (nothing when it does not record). */
void clt__alloc_with_record(int slot, void (*fn)(clt_memory_record *, const clt_memory_stats *, void *), void *arg);

/* bytes[CLT_MEM_CATEGORY_COUNT] = what each category held when the
 * device's allocated peak (clt_memory_max_allocated, since the last
 * clt_memory_reset_peak) was reached. */
clt_status clt__memory_at_peak(clt_device dev, int64_t *bytes);
/* The requests clt__alloc has failed on dev's allocator so far, for any reason
 * (over its cap, past its largest buffer, CLT_FAULT=alloc, the driver's or
 * the host's memory for a segment); 0 for a device that has none. */
uint64_t clt__alloc_refusals(clt_device dev);

/* 1 under CLT_ALLOC_EXACT=1: every tensor its own driver buffer of exactly its size. */
int clt__alloc_exact(void);

#endif
