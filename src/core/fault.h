/* Internal: fault injection, for tests of the error paths. The environment
 * variable CLT_FAULT (read at the first hook; a malformed one is no plan,
 * and clt__env_check reports it) or clt__fault_set takes a
 * comma-separated list of KIND:N (the N-th event of that kind fails, counted
 * from 1) or KIND:N+ (the N-th and every later one fail), e.g.
 * CLT_FAULT=alloc:3,write:1+. Kinds:
 *   alloc    a tensor's memory from the caching allocator (fails as out of
 *            memory)
 *   driver   a buffer from the OpenCL driver, on a miss of that cache (which
 *            then retries as on a real out-of-memory)
 *   enqueue  a kernel launch or GEMM call
 *   write    a file write or the final flush of an atomic file
 *   host     a host allocation after device work that the caller must undo
 *            (binding a model's parameter views to new buffers)
 *   callback a completion callback or barrier that defers a free (the
 *            caller then falls back to a counted host wait)
 * Unset, each hook costs one relaxed atomic increment. */
#ifndef CLT_CORE_FAULT_H
#define CLT_CORE_FAULT_H

#include <stdint.h>

typedef enum clt__fault_kind {
    CLT__FAULT_ALLOC,
    CLT__FAULT_DRIVER,
    CLT__FAULT_ENQUEUE,
    CLT__FAULT_WRITE,
    CLT__FAULT_HOST,
    CLT__FAULT_CALLBACK,
    CLT__FAULT_KINDS
} clt__fault_kind;

/* Counts one event of kind; returns 1 when it must fail. */
int clt__fault(clt__fault_kind kind);

/* Replaces the plan (NULL or "" for none) and zeroes the counters. Returns
 * 0, or -1 for a malformed spec (which leaves no plan). */
int clt__fault_set(const char *spec);

/* 1 when spec is a well-formed plan (CLT_FAULT's grammar; fault_spec.c). */
int clt__fault_valid(const char *spec);

/* Reads spec into new_at and new_sticky (CLT__FAULT_KINDS each: the event
 * that fails first, 0 for none, and whether every later one fails too); 1
 * when it is well formed. */
int clt__fault_parse(const char *spec, long long *new_at, int *new_sticky);

/* Events of kind counted since the last clt__fault_set. */
int64_t clt__fault_count(clt__fault_kind kind);

#endif
