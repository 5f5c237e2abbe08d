/* Internal: the one parser of the environment. Every CLT_* variable the
 * library reads is a row of env.c's table, read through these functions:
 *   bool   1/0, true/false, yes/no, on/off (any case)
 *   words  the variable's own words (any case), a bool's words too when the
 *          row says so
 *   size   bytes: digits with an optional fraction, an optional K/M/G/T
 *          (binary: 512M and 512MB and 512MiB are 512 MiB) and B; without
 *          a suffix a fraction in (0, 1] is of the device's memory
 *   text   anything (paths, lists the owner parses)
 * An unset or empty variable has its default. A malformed value gets the
 * default at the use and is reported by clt__env_check, which every call
 * that uses a device runs (clt__resolve), and by clt__env_get where a read
 * site returns a status: CLT_ERR_INVALID_ARGUMENT naming the variable, the
 * value and what it accepts. docs/reliability.md is the user's
 * version of this grammar. */
#ifndef CLT_CORE_ENV_H
#define CLT_CORE_ENV_H

#include <stdint.h>

#include "cltensor/status.h"

typedef enum clt__env_var {
    CLT__ENV_DEVICE,
    CLT__ENV_CPU_AS_GPU,
    CLT__ENV_MEMORY_CAP,
    CLT__ENV_SYNC_DEBUG,
    CLT__ENV_LAUNCH_BLOCKING,
    CLT__ENV_TRACE,
    CLT__ENV_DENSE,
    CLT__ENV_CLBLAST_PARAMS,
    CLT__ENV_FUSE,
    CLT__ENV_TUNE,
    CLT__ENV_CACHE_DIR,
    CLT__ENV_FAULT,
    CLT__ENV_ALLOC_EXACT,
    CLT__ENV_NO_PUBLISH,
    CLT__ENV_DEVICE_CLASS,
    CLT__ENV_REPLAY,
    CLT__ENV_COUNT
} clt__env_var;

/* The variable's name ("CLT_FUSE"). */
const char *clt__env_name(clt__env_var v);
/* The value, or NULL when unset or empty. */
const char *clt__env_text(clt__env_var v);
/* A bool's 0/1, or a words variable's value (its word's index in the row;
 * in a row that takes a bool's words too, those are 0/1 and its own words
 * count from 2); dflt when unset, empty or malformed. */
int clt__env_int(clt__env_var v, int dflt);

/* The same for a read site that can report: CLT_ERR_INVALID_ARGUMENT with
 * clt__env_check's message (and dflt in *out) when malformed, whatever the
 * first check found (the value may have changed since). */
clt_status clt__env_get(clt__env_var v, int dflt, int *out);

/* CLT_MEMORY_CAP for the device named name ("gpu:0") with total bytes of
 * memory: 0 (no cap) when unset, malformed or naming other devices only. */
int64_t clt__env_memory_cap(const char *name, int64_t total);

/* Checks every row once (the first call; later calls repeat its answer).
 * device_ok says whether a text names a device (CLT_DEVICE's grammar is the
 * device layer's). */
clt_status clt__env_check(int (*device_ok)(const char *text));
/* Forgets the answer, for tests that change the environment. */
void clt__env_forget(void);

/* The parsers, on text alone (the fuzz target's surface). Each returns 0
 * and stores the value, or -1 for a malformed text. */
int clt__parse_bool(const char *text, int *out);
int clt__parse_size(const char *text, int64_t total, int64_t *out);
/* Checks a whole CLT_MEMORY_CAP value; *cap is what it gives the device
 * named name (0 for none). */
int clt__parse_memory_cap(const char *text, const char *name, int64_t total, int64_t *cap);

#endif
