/* Naming a low resource limit in messages (limits.h). */
#include "limits.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

clt__limit_kind clt__limit_named(int e, int kinds, char *buf, size_t len)
{
    static const struct {
        int resource;
        const char *what, *flag;
    } memory[] = {{RLIMIT_AS, "address-space", "ulimit -v"}, {RLIMIT_DATA, "data-segment", "ulimit -d"}};
    struct rlimit rl;
    if (len) buf[0] = '\0';
    if ((kinds & CLT__LIMIT_FILES) && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rl.rlim_cur < CLT__LOW_FILE_LIMIT || e == EMFILE)) {
        snprintf(buf, len, "the open-file limit of %llu (ulimit -n)", (unsigned long long)rl.rlim_cur);
        return CLT__LIMIT_FILES;
    }
    for (size_t i = 0; (kinds & CLT__LIMIT_MEMORY) && i < sizeof memory / sizeof memory[0]; i++) {
        if (getrlimit(memory[i].resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
        if (rl.rlim_cur < CLT__LOW_MEMORY_LIMIT || e == ENOMEM) {
            snprintf(buf, len, "the %s limit of %llu MiB (%s)", memory[i].what,
                     (unsigned long long)(rl.rlim_cur >> 20), memory[i].flag);
            return CLT__LIMIT_MEMORY;
        }
    }
    return CLT__LIMIT_NONE;
}
