/* Internal: the one monotonic clock (CLOCK_MONOTONIC), for the trace,
 * synchronization and kernel build timings, progress, tile tuning, warm-up
 * and the temporary file names' fallback entropy. clock.c is the only file
 * of src/ that reads the system's clock this way (tests/layers/check-layers
 * fails on another); bench/, examples/ and tests/ keep their own timers. */
#ifndef CLT_CORE_CLOCK_H
#define CLT_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point. */
uint64_t clt__now_ns(void);
/* The same clock in seconds. */
double clt__now_seconds(void);

#endif
