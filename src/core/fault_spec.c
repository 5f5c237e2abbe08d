/* The grammar of a fault plan (CLT_FAULT, clt__fault_set), apart from the
 * injector (fault.c), so that the environment check (env.c) validates a plan
 * without calling the injector that reads the environment. */
#include "fault.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CLT__FAULT_KINDS] = {"alloc", "driver", "enqueue", "write", "host", "callback"};

/* Reads spec into new_at and new_sticky; 1 when it is well formed. */
int clt__fault_parse(const char *spec, long long *new_at, int *new_sticky)
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
    return clt__fault_parse(spec, new_at, new_sticky);
}
