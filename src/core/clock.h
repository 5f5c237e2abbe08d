/* Internal: the one monotonic clock (CLOCK_MONOTONIC), for the trace,
 * synchronization timings, progress and benchmarks of the library. */
#ifndef CLT_CORE_CLOCK_H
#define CLT_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point. */
uint64_t clt__now_ns(void);
/* The same clock in seconds. */
double clt__now_seconds(void);

#endif
