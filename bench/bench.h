/* What the benchmark programs share: exiting on a failed call, a monotonic
 * clock, medians. Each program defines BENCH_NAME before including this. */
#ifndef CLT_BENCH_H
#define CLT_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cltensor.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        clt_status s_ = (expr);                                                              \
        if (s_ != CLT_OK) {                                                                  \
            fprintf(stderr, BENCH_NAME ": %s failed: %s\n", #expr, clt_last_error());        \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), which it sorts. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
