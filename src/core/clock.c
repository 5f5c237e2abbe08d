#include "clock.h"

#include <time.h>

uint64_t clt__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double clt__now_seconds(void) { return (double)clt__now_ns() * 1e-9; }
