/* Internal: a memory record, the allocator's counters after every event
 * (allocation, free, retag, cache release) of one device between
 * clt_memory_record_start and clt_memory_record_stop, each sample labelled
 * with the phase marked last. The allocator appends under its lock, through
 * the sample function clt_memory_record_start registers with it. */
#ifndef CLT_MEMORY_RECORD_H
#define CLT_MEMORY_RECORD_H

#include "../core/error.h"
#include "cltensor/memory.h"

/* 1 while any device records: a phase mark is one atomic load otherwise. */
int clt__record_active(void);
/* Marks a minor phase ("forward net.3") on the device of slot, under the
 * current major phase (clt_memory_record_mark); a no-op when it does not
 * record. label is copied. */
void clt__record_minor(int slot, const char *label);

/* For the picture (src/io/memory_svg.c): phase i's major label and where
 * its first sample is, and whether it begins a major phase. */
int64_t clt__record_phase_start(const clt_memory_record *r, int i);
int clt__record_phase_is_major(const clt_memory_record *r, int i);
const char *clt__record_phase_major(const clt_memory_record *r, int i);

#endif
