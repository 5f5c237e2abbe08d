#include "fault.h"

#include "env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* at[k] == 0: no fault of kind k; sticky[k]: every event from at[k] on fails. */
static atomic_llong counts[CLT__FAULT_KINDS], at[CLT__FAULT_KINDS];
static atomic_int sticky[CLT__FAULT_KINDS];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static int apply(const char *spec)
{
    long long new_at[CLT__FAULT_KINDS] = {0};
    int new_sticky[CLT__FAULT_KINDS] = {0}, ok = clt__fault_parse(spec, new_at, new_sticky);
    for (int k = 0; k < CLT__FAULT_KINDS; k++) {
        atomic_store(&at[k], ok ? new_at[k] : 0);
        atomic_store(&sticky[k], ok ? new_sticky[k] : 0);
        atomic_store(&counts[k], 0);
    }
    return ok ? 0 : -1;
}

static void read_env(void) { apply(clt__env_text(CLT__ENV_FAULT)); }

int clt__fault_set(const char *spec)
{
    /* The environment is read first, so that it cannot override spec later. */
    pthread_once(&env_once, read_env);
    return apply(spec);
}

int clt__fault(clt__fault_kind kind)
{
    pthread_once(&env_once, read_env);
    long long n = atomic_fetch_add_explicit(&counts[kind], 1, memory_order_relaxed) + 1;
    long long target = atomic_load_explicit(&at[kind], memory_order_relaxed);
    if (target == 0) return 0;
    return n == target || (n > target && atomic_load_explicit(&sticky[kind], memory_order_relaxed));
}

int64_t clt__fault_count(clt__fault_kind kind)
{
    pthread_once(&env_once, read_env);
    return atomic_load(&counts[kind]);
}
