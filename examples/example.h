/* What every example shares: stop on the first failed call, naming it and
 * cltensor's message; a monotonic clock; and telling real GPUs from CPUs. */
#ifndef CLT_EXAMPLE_H
#define CLT_EXAMPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

/* An example's way out; a library never does this. */
#define CHECK(expr)                                                                               \
    do {                                                                                          \
        clt_status s_ = (expr);                                                                   \
        if (s_ != CLT_OK) {                                                                       \
            fprintf(stderr, "%s failed: %s: %s\n", #expr, clt_status_string(s_), clt_last_error()); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when dev is a GPU in its own right (not a CPU shown as one), for
 * choosing problem sizes. */
static inline int real_gpu(clt_device dev)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        clt_device_info info;
        CHECK(clt_device_list_entry(i, &d));
        CHECK(clt_device_list_info(i, &info));
        if (clt_device_equal(d, dev)) return strcmp(info.type, "gpu") == 0;
    }
    return 0;
}

#endif
