/* The one parser of the environment (env.h). */
#include "env.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checked.h"
#include "error.h"
#include "fault.h"

typedef enum kind { BOOL, WORDS, SIZE_LIST, DEVICE, FAULT, TEXT } kind;

/* A row: the variable, its grammar, and (WORDS) its words, NULL-ended; a
 * WORDS row with bool set takes a bool's words too (as 0 and 1), its own
 * words then count from 2. */
typedef struct row {
    const char *name;
    kind kind;
    int bool_words;
    const char *const *words;
    const char *accepted; /* for the message */
} row;

static const char *const sync_words[] = {"off", "warn", "error", NULL};
static const char *const dense_words[] = {"cpu", "clblast", NULL};
static const char *const class_words[] = {"cpu", "gpu", NULL};
static const char *const only_words[] = {"only", NULL};

#define BOOL_ACCEPTED "a boolean: 1/0, true/false, yes/no or on/off (any case)"
#define SIZE_ACCEPTED                                                                                       \
    "a size (bytes such as 1048576, 512K, 512M, 2G or 1T, each optionally with B or iB: binary units; "  \
    "0 for no cap) or a fraction in (0, 1] of the device's memory such as 0.5; or NAME=SIZE,... per device " \
    "(cpu:0=1G,gpu:1=0.5)"

static const row rows[CLT__ENV_COUNT] = {
    [CLT__ENV_DEVICE] = {"CLT_DEVICE", DEVICE, 0, NULL, "a device: cpu, cpu:N, gpu, gpu:N, pinned or P:D"},
    [CLT__ENV_CPU_AS_GPU] = {"CLT_CPU_AS_GPU", WORDS, 1, only_words,
                             "a boolean (1/0, true/false, yes/no or on/off, any case) or only"},
    [CLT__ENV_MEMORY_CAP] = {"CLT_MEMORY_CAP", SIZE_LIST, 0, NULL, SIZE_ACCEPTED},
    [CLT__ENV_SYNC_DEBUG] = {"CLT_SYNC_DEBUG", WORDS, 0, sync_words, "off, warn or error (any case)"},
    [CLT__ENV_LAUNCH_BLOCKING] = {"CLT_LAUNCH_BLOCKING", BOOL, 0, NULL, BOOL_ACCEPTED},
    [CLT__ENV_TRACE] = {"CLT_TRACE", TEXT, 0, NULL, "a file path"},
    [CLT__ENV_DENSE] = {"CLT_DENSE", WORDS, 0, dense_words, "cpu or clblast (any case)"},
    [CLT__ENV_CLBLAST_PARAMS] = {"CLT_CLBLAST_PARAMS", TEXT, 0, NULL, "file paths separated by ':'"},
    [CLT__ENV_FUSE] = {"CLT_FUSE", BOOL, 0, NULL, BOOL_ACCEPTED},
    [CLT__ENV_TUNE] = {"CLT_TUNE", BOOL, 0, NULL, BOOL_ACCEPTED},
    [CLT__ENV_CACHE_DIR] = {"CLT_CACHE_DIR", TEXT, 0, NULL, "a directory, or off"},
    [CLT__ENV_FAULT] = {"CLT_FAULT", FAULT, 0, NULL,
                        "KIND:N or KIND:N+ separated by commas, KIND one of alloc, driver, enqueue, write, N >= 1"},
    [CLT__ENV_ALLOC_EXACT] = {"CLT_ALLOC_EXACT", BOOL, 0, NULL, BOOL_ACCEPTED},
    [CLT__ENV_NO_PUBLISH] = {"CLT_NO_PUBLISH", BOOL, 0, NULL, BOOL_ACCEPTED},
    [CLT__ENV_DEVICE_CLASS] = {"CLT_DEVICE_CLASS", WORDS, 0, class_words, "cpu or gpu (any case)"},
    [CLT__ENV_REPLAY] = {"CLT_REPLAY", BOOL, 0, NULL, BOOL_ACCEPTED},
};

const char *clt__env_name(clt__env_var v) { return v >= 0 && v < CLT__ENV_COUNT ? rows[v].name : "?"; }

const char *clt__env_text(clt__env_var v)
{
    if (v < 0 || v >= CLT__ENV_COUNT) return NULL;
    const char *s = getenv(rows[v].name);
    return s && *s ? s : NULL;
}

int clt__parse_bool(const char *text, int *out)
{
    static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(text, on[i]) == 0 || strcasecmp(text, off[i]) == 0) {
            *out = strcasecmp(text, on[i]) == 0;
            return 0;
        }
    }
    return -1;
}

static int parse_words(const row *r, const char *text, int *out)
{
    int base = 0;
    if (r->bool_words || r->kind == BOOL) {
        if (clt__parse_bool(text, out) == 0) return 0;
        base = 2;
    }
    for (int i = 0; r->words && r->words[i]; i++) {
        if (strcasecmp(text, r->words[i]) == 0) {
            *out = base + i;
            return 0;
        }
    }
    return -1;
}

int clt__env_int(clt__env_var v, int dflt)
{
    const char *text = clt__env_text(v);
    int out;
    if (!text || (rows[v].kind != BOOL && rows[v].kind != WORDS) || parse_words(&rows[v], text, &out) != 0)
        return dflt;
    return out;
}

static int digits(const char **p, int64_t *whole, int64_t *frac, int64_t *scale)
{
    if (!isdigit((unsigned char)**p)) return -1;
    for (; isdigit((unsigned char)**p); (*p)++)
        if (clt__mul_i64(*whole, 10, whole) != 0 || clt__add_i64(*whole, **p - '0', whole) != 0) return -1;
    if (**p != '.') return 0;
    (*p)++;
    if (!isdigit((unsigned char)**p)) return -1;
    for (; isdigit((unsigned char)**p); (*p)++) {
        if (*scale >= INT64_C(100000000000000000)) continue; /* digits past 1e-17 do not matter */
        *frac = *frac * 10 + (**p - '0');
        *scale *= 10;
    }
    return 0;
}

int clt__parse_size(const char *text, int64_t total, int64_t *out)
{
    const char *p = text;
    int64_t whole = 0, frac = 0, scale = 1, mult = 1;
    if (!text || digits(&p, &whole, &frac, &scale) != 0) return -1;
    int point = scale > 1;
    const char *units = "kmgt";
    const char *u = *p ? strchr(units, tolower((unsigned char)*p)) : NULL;
    if (u) {
        mult = INT64_C(1) << (10 * (u - units + 1));
        p++;
        if (*p == 'i' || *p == 'I') {
            p++;
            if (*p != 'b' && *p != 'B') return -1;
        }
    }
    int bytes = *p == 'b' || *p == 'B';
    p += bytes;
    if (*p != '\0') return -1;
    if (point && !u) {
        /* A fraction of the device: 0 < f <= 1, and never "bytes". */
        if (bytes || whole > 1 || (whole == 1 && frac > 0) || (whole == 0 && frac == 0) || total < 1) return -1;
        *out = whole ? total : (int64_t)((long double)total * (long double)frac / (long double)scale);
        if (*out == 0) *out = 1; /* a cap, however small, never "no cap" */
        return 0;
    }
    int64_t v;
    if (clt__mul_i64(whole, mult, &v) != 0) return -1;
    if (point && clt__add_i64(v, (int64_t)((long double)frac / (long double)scale * (long double)mult), &v) != 0)
        return -1;
    *out = v;
    return 0;
}

/* cpu:N, gpu:N or pinned: the names the allocator knows devices by. */
static int cap_name_ok(const char *name, size_t len)
{
    if (len == 6 && strncmp(name, "pinned", 6) == 0) return 1;
    if (len < 5 || (strncmp(name, "cpu:", 4) != 0 && strncmp(name, "gpu:", 4) != 0)) return 0;
    if (len > 4 + 9) return 0;
    for (size_t i = 4; i < len; i++)
        if (!isdigit((unsigned char)name[i])) return 0;
    return 1;
}

int clt__parse_memory_cap(const char *text, const char *name, int64_t total, int64_t *cap)
{
    *cap = 0;
    if (!strchr(text, '=')) return clt__parse_size(text, total, cap);
    int found = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || (size_t)(eq - p) >= len || !cap_name_ok(p, (size_t)(eq - p))) return -1;
        char value[64];
        size_t vlen = len - (size_t)(eq - p) - 1;
        if (vlen == 0 || vlen >= sizeof value) return -1;
        memcpy(value, eq + 1, vlen);
        value[vlen] = '\0';
        int64_t v;
        if (clt__parse_size(value, total, &v) != 0) return -1;
        if (!found && name && strlen(name) == (size_t)(eq - p) && strncmp(p, name, (size_t)(eq - p)) == 0) {
            *cap = v;
            found = 1;
        }
        if (!comma) return 0;
        p = comma + 1;
    }
}

int64_t clt__env_memory_cap(const char *name, int64_t total)
{
    const char *text = clt__env_text(CLT__ENV_MEMORY_CAP);
    int64_t cap = 0;
    if (!text || clt__parse_memory_cap(text, name, total, &cap) != 0) return 0;
    return cap;
}

/* The value as the message shows it: printable bytes, at most 64 of them. */
static void shown(const char *text, char *buf, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && o + 5 < len; p++) {
        if (p - (const unsigned char *)text >= 64) {
            o += (size_t)snprintf(buf + o, len - o, "...");
            break;
        }
        if (isprint(*p) && *p != '"' && *p != '\\') buf[o++] = (char)*p;
        else o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *p);
    }
    buf[o < len ? o : len - 1] = '\0';
}

static int row_ok(const row *r, const char *text, int (*device_ok)(const char *))
{
    int i;
    int64_t cap;
    switch (r->kind) {
    case BOOL:
    case WORDS: return parse_words(r, text, &i) == 0;
    case SIZE_LIST: return clt__parse_memory_cap(text, NULL, INT64_C(1) << 40, &cap) == 0;
    case DEVICE: return !device_ok || device_ok(text);
    case FAULT: return clt__fault_valid(text);
    case TEXT: return 1;
    }
    return 0;
}

/* Records the message about a malformed value of row v. */
static void describe(char *buf, size_t len, int v, const char *text)
{
    char value[300];
    shown(text, value, sizeof value);
    snprintf(buf, len, "environment variable %s=\"%s\" is not valid: expected %s", rows[v].name, value,
             rows[v].accepted);
}

clt_status clt__env_get(clt__env_var v, int dflt, int *out)
{
    *out = dflt;
    const char *text = clt__env_text(v);
    if (!text || (rows[v].kind != BOOL && rows[v].kind != WORDS)) return CLT_OK;
    if (parse_words(&rows[v], text, out) == 0) return CLT_OK;
    *out = dflt;
    char msg[512];
    describe(msg, sizeof msg, v, text);
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s", msg);
}

static atomic_int checked; /* 0 not yet, 1 fine, 2 failed (message below) */
static char failure[512];
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

clt_status clt__env_check(int (*device_ok)(const char *text))
{
    int c = atomic_load_explicit(&checked, memory_order_acquire);
    if (c == 1) return CLT_OK;
    if (c == 0) {
        pthread_mutex_lock(&check_lock);
        if (atomic_load(&checked) == 0) {
            int bad = 0;
            for (int v = 0; v < CLT__ENV_COUNT && !bad; v++) {
                const char *text = clt__env_text((clt__env_var)v);
                if (!text || row_ok(&rows[v], text, device_ok)) continue;
                describe(failure, sizeof failure, v, text);
                bad = 1;
            }
            atomic_store_explicit(&checked, bad ? 2 : 1, memory_order_release);
        }
        pthread_mutex_unlock(&check_lock);
        if (atomic_load(&checked) == 1) return CLT_OK;
    }
    return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s", failure);
}

void clt__env_forget(void) { atomic_store(&checked, 0); }
