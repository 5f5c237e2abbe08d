#include "fault.h"

#include "env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CLT__FAULT_KINDS] = {"alloc", "driver", "enqueue", "write", "host", "callback"};

/* at[k] == 0: no fault of kind k; sticky[k]: every event from at[k] on fails. */
static atomic_llong counts[CLT__FAULT_KINDS], at[CLT__FAULT_KINDS];
static atomic_int sticky[CLT__FAULT_KINDS];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Reads spec into new_at and new_sticky; 1 when it is well formed. */
static int parse(const char *spec, long long *new_at, int *new_sticky)
{
    int ok = 1;
    for (const char *p = spec; p && *p && ok;) {
        const char *colon = strchr(p, ':');
        ok = 0;
        for (int k = 0; colon && k < CLT__FAULT_KINDS; k++) {
            if (strlen(kind_names[k]) != (size_t)(colon - p) || strncmp(p, kind_names[k], (size_t)(colon - p)))
                continue;
            char *end;
            long long n = strtoll(colon + 1, &end, 10);
            if (n < 1 || end == colon + 1) break;
            new_sticky[k] = *end == '+';
            end += new_sticky[k];
            if (*end != ',' && *end != '\0') break;
            new_at[k] = n;
            p = *end ? end + 1 : end;
            ok = *end == '\0' || *p != '\0';
            break;
        }
    }
    return ok;
}

int clt__fault_valid(const char *spec)
{
    long long new_at[CLT__FAULT_KINDS] = {0};
    int new_sticky[CLT__FAULT_KINDS] = {0};
    return parse(spec, new_at, new_sticky);
}

static int apply(const char *spec)
{
    long long new_at[CLT__FAULT_KINDS] = {0};
    int new_sticky[CLT__FAULT_KINDS] = {0}, ok = parse(spec, new_at, new_sticky);
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
