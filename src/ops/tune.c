/* Autotuning of the CPU GEMM kernels, the cudnn.benchmark of cltensor: for
 * each product shape the candidate tiles of cl/gemm_cpu.cl (12 x 32, and
 * 6 x 32 over an A in place, from the built-in program; any other a program
 * built with -DTM= -DTN=) are timed on scratch tensors and the fastest is
 * kept in a tuning cache, one text file per device and driver next to the
 * kernel cache ("tune-<hash>.txt", one "ta tb m n k tm tn" line per shape).
 * Later processes read the file and use the winners without timing. Tuning
 * runs from `clt tune` (clt_tune_gemm) or, with CLT_TUNE=1, on the first
 * product of each shape; otherwise shapes without an entry use the shape's
 * default (clt__gemm_tile_default). The file is read as untrusted input: bad
 * lines are ignored. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/clock.h"
#include "../core/env.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "../core/file.h"
#include "ops_internal.h"
#include "tune.h"

typedef struct tune_entry {
    int ta, tb;
    size_t m, n, k;
    clt__gemm_tile tile;
} tune_entry;

typedef struct slot_tuning {
    int loaded;
    tune_entry *entries;
    int n, cap;
} slot_tuning;

static slot_tuning *tuning;
static int ntuning;
static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;

/* Timed after the shape's default (clt__gemm_tile_default), which is timed
 * first so that ties keep it, in this order; the default is not timed twice. */
static const clt__gemm_tile candidates[] = {{12, 32}, {8, 32}, {6, 32}, {12, 16}, {6, 16}, {4, 16}, {8, 8}, {6, 8}};

static int tile_valid(clt__gemm_tile t)
{
    return t.tm >= 1 && t.tm <= 32 && (t.tn == 8 || t.tn == 16 || t.tn == 32);
}

static int tile_eq(clt__gemm_tile a, clt__gemm_tile b) { return a.tm == b.tm && a.tn == b.tn; }

clt__gemm_tile clt__cpu_tile_default(int slot)
{
    switch (clt__slot_get(slot)->float_width) {
    case 16: return (clt__gemm_tile){12, 32};
    case 8: return (clt__gemm_tile){6, 16};
    case 4: return (clt__gemm_tile){6, 8};
    default: return (clt__gemm_tile){12, 16};
    }
}

clt__gemm_tile clt__gemm_tile_default(int slot, int transpose_a, size_t m, size_t n, size_t k, size_t lda, int half)
{
    clt__gemm_tile t = clt__cpu_tile_default(slot);
    if (!half && !transpose_a && t.tm > 6 && clt__cpu_gemm_pack_a_bytes(0, m, n, k, lda, t) == 0) t.tm = 6;
    return t;
}

/* One cache's size from sysfs ("48K", "1280K", "2M"), 0 when unreadable. */
static size_t sysfs_cache_size(int index, int *level, int *data)
{
    char path[96], buf[64];
    *level = 0;
    *data = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%d", level) != 1) *level = 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    f = fopen(path, "r");
    if (!f) return 0;
    *data = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    f = fopen(path, "r");
    if (!f) return 0;
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!ok) return 0;
    char *end;
    unsigned long v = strtoul(buf, &end, 10);
    unsigned long mul = *end == 'K' ? 1024ul : *end == 'M' ? 1024ul * 1024 : *end == '\n' || !*end ? 1 : 0;
    /* 1 KiB to 1 GiB, else not believed. */
    if (end == buf || mul == 0 || v == 0 || v > (1ul << 30) / mul || v * mul < 1024) return 0;
    return (size_t)(v * mul);
}

static size_t cache_l1 = 32 * 1024, cache_l2 = 1024 * 1024;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void read_caches(void)
{
    for (int i = 0; i < 8; i++) {
        int level, data;
        size_t size = sysfs_cache_size(i, &level, &data);
        if (!size || !data) continue;
        if (level == 1) cache_l1 = size;
        if (level == 2) cache_l2 = size;
    }
}

/* Set by tests only (clt__cpu_cache_sizes_override); 0 when unset. */
static _Atomic size_t forced_l1, forced_l2;

void clt__cpu_cache_sizes(size_t *l1, size_t *l2)
{
    pthread_once(&cache_once, read_caches);
    size_t f1 = forced_l1, f2 = forced_l2;
    *l1 = f1 && f2 ? f1 : cache_l1;
    *l2 = f1 && f2 ? f2 : cache_l2;
}

void clt__cpu_cache_sizes_override(size_t l1, size_t l2)
{
    forced_l1 = l1;
    forced_l2 = l2;
}

static int tune_path(int slot, char *buf, size_t len)
{
    char dir[900];
    if (!clt__cache_dir(dir, sizeof dir)) return 0;
    int n = snprintf(buf, len, "%s/tune-%016" PRIx64 ".txt", dir, clt__device_key(slot));
    return n > 0 && (size_t)n < len;
}

/* Lock held. */
static slot_tuning *slot_table(int slot)
{
    if (!tuning) {
        int n = clt__slot_count();
        tuning = calloc((size_t)n, sizeof *tuning);
        if (!tuning) return NULL;
        ntuning = n;
    }
    return slot >= 0 && slot < ntuning ? &tuning[slot] : NULL;
}

static tune_entry *find(slot_tuning *t, int ta, int tb, size_t m, size_t n, size_t k)
{
    for (int i = 0; i < t->n; i++) {
        tune_entry *e = &t->entries[i];
        if (e->ta == ta && e->tb == tb && e->m == m && e->n == n && e->k == k) return e;
    }
    return NULL;
}

/* Adds or replaces a shape's entry. Lock held. */
static int put(slot_tuning *t, tune_entry e)
{
    tune_entry *old = find(t, e.ta, e.tb, e.m, e.n, e.k);
    if (old) {
        *old = e;
        return 1;
    }
    if (t->n == t->cap) {
        int ncap = t->cap ? 2 * t->cap : 16;
        tune_entry *grown = realloc(t->entries, (size_t)ncap * sizeof *grown);
        if (!grown) return 0;
        t->entries = grown;
        t->cap = ncap;
    }
    t->entries[t->n++] = e;
    return 1;
}

/* Reads the slot's file once; a missing or damaged file leaves what it could read. Lock held. */
static void load(int slot, slot_tuning *t)
{
    if (t->loaded) return;
    t->loaded = 1;
    char path[1024];
    if (!tune_path(slot, path, sizeof path)) return;
    FILE *f = clt__file_open_read(path);
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        tune_entry e;
        unsigned long long m, n, k;
        char extra;
        if (sscanf(line, "%d %d %llu %llu %llu %d %d %c", &e.ta, &e.tb, &m, &n, &k, &e.tile.tm, &e.tile.tn,
                   &extra) != 7)
            continue;
        e.m = (size_t)m;
        e.n = (size_t)n;
        e.k = (size_t)k;
        if ((e.ta != 0 && e.ta != 1) || (e.tb != 0 && e.tb != 1) || !tile_valid(e.tile)) continue;
        if (!put(t, e)) break;
    }
    fclose(f);
}

/* Rewrites the slot's file with every entry. Lock held. */
static clt_status save(int slot, const slot_tuning *t)
{
    char path[1024], dir[900];
    if (!tune_path(slot, path, sizeof path) || !clt__cache_dir(dir, sizeof dir))
        return clt__fail(CLT_ERR_IO, "the tuning cache is off (CLT_CACHE_DIR=off or no cache directory)");
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    mkdir(dir, 0755);
    clt__afile f;
    CLT_TRY(clt__afile_open(&f, path));
    clt_status st = CLT_OK;
    for (int i = 0; st == CLT_OK && i < t->n; i++) {
        const tune_entry *e = &t->entries[i];
        char line[160];
        int len = snprintf(line, sizeof line, "%d %d %zu %zu %zu %d %d\n", e->ta, e->tb, e->m, e->n, e->k, e->tile.tm,
                           e->tile.tn);
        st = clt__afile_write(&f, line, (size_t)len);
    }
    if (st != CLT_OK) {
        clt__afile_abort(&f);
        return st;
    }
    return clt__afile_commit(&f);
}

/* Seconds for `reps` products with a tile. */
static clt_status time_tile(int slot, clt__gemm_tile tile, int ta, int tb, size_t m, size_t n, size_t k, int reps,
                            clt_tensor *a, clt_tensor *b, clt_tensor *c, double *out)
{
    size_t lda = ta ? m : k, ldb = tb ? k : n;
    double t0 = clt__now_seconds();
    for (int r = 0; r < reps; r++)
        CLT_TRY(clt__cpu_gemm(slot, tile, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n, NULL, 0));
    /* A counted synchronization point: CLT_TUNE=1 adds it to a first step. */
    CLT_TRY(clt__sync_queue(slot, "GEMM autotuning (clt_tune_gemm, CLT_TUNE=1)"));
    *out = clt__now_seconds() - t0;
    return CLT_OK;
}

#define NCAND (sizeof candidates / sizeof candidates[0] + 1)
#define ROUNDS 5

/* The tiles to time, the shape's default first; returns how many. */
static size_t shape_candidates(clt__gemm_tile first, clt__gemm_tile out[NCAND])
{
    size_t n = 0;
    out[n++] = first;
    for (size_t i = 0; i + 1 < NCAND; i++)
        if (!tile_eq(candidates[i], out[0])) out[n++] = candidates[i];
    return n;
}

/* Times every candidate for the shape, in rounds that visit each candidate
 * in turn (so a burst of other load hits them alike), each timing about
 * 5 ms of products (1 to 64 of them, as many as the time of dflt, the
 * shape's default, fits); the best round of each counts. Lock held. */
static clt_status tune_shape(int slot, int ta, int tb, size_t m, size_t n, size_t k, clt__gemm_tile dflt,
                             clt__gemm_tile *out)
{
    int64_t sa[] = {(int64_t)(ta ? k : m), (int64_t)(ta ? m : k)}, sb[] = {(int64_t)(tb ? n : k), (int64_t)(tb ? k : n)},
            sc[] = {(int64_t)m, (int64_t)n};
    clt_tensor *a = NULL, *b = NULL, *c = NULL;
    clt_status st = clt__tensor_new(&a, slot, CLT_FLOAT32, 2, sa);
    if (st == CLT_OK) st = clt__tensor_new(&b, slot, CLT_FLOAT32, 2, sb);
    if (st == CLT_OK) st = clt__tensor_new(&c, slot, CLT_FLOAT32, 2, sc);
    if (st == CLT_OK) st = clt_fill_(a, 0.5);
    if (st == CLT_OK) st = clt_fill_(b, 0.25);
    clt__gemm_tile cand[NCAND];
    size_t nc = shape_candidates(dflt, cand);
    double best[NCAND], first = 1e30;
    /* One product each builds (or loads) the programs; the default's time sets the batch. */
    for (size_t i = 0; st == CLT_OK && i < nc; i++) {
        best[i] = 1e30;
        double t;
        st = time_tile(slot, cand[i], ta, tb, m, n, k, 1, a, b, c, &t);
        if (st == CLT_OK && i == 0) st = time_tile(slot, cand[0], ta, tb, m, n, k, 1, a, b, c, &first);
    }
    int reps = first > 0.005 ? 1 : first < 0.005 / 64 ? 64 : (int)(0.005 / first);
    for (int round = 0; st == CLT_OK && round < ROUNDS; round++)
        for (size_t i = 0; st == CLT_OK && i < nc; i++) {
            double t;
            st = time_tile(slot, cand[i], ta, tb, m, n, k, reps, a, b, c, &t);
            if (st == CLT_OK && t < best[i]) best[i] = t;
        }
    *out = cand[0];
    /* Another tile must beat the default by 3% to displace it: noise should not. */
    double win = st == CLT_OK ? best[0] * 0.97 : 0;
    for (size_t i = 1; st == CLT_OK && i < nc; i++)
        if (best[i] < win) {
            win = best[i];
            *out = cand[i];
        }
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    return st;
}

static int tune_env(void)
{
    return clt__env_int(CLT__ENV_TUNE, 0);
}

clt_status clt__gemm_tile_for(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, size_t lda,
                              int half, clt__gemm_tile *out)
{
    *out = clt__gemm_tile_default(slot, transpose_a, m, n, k, lda, half);
    int ta = transpose_a != 0, tb = transpose_b != 0;
    pthread_mutex_lock(&tune_lock);
    slot_tuning *t = slot_table(slot);
    clt_status st = CLT_OK;
    if (t) {
        load(slot, t);
        tune_entry *e = find(t, ta, tb, m, n, k);
        if (e) *out = e->tile;
        else if (tune_env()) {
            tune_entry ne = {ta, tb, m, n, k, *out};
            st = tune_shape(slot, ta, tb, m, n, k, *out, &ne.tile);
            if (st == CLT_OK && put(t, ne)) {
                *out = ne.tile;
                /* An unwritable cache only costs the next process a new tuning. */
                save(slot, t);
                clt_clear_error();
            }
        }
    }
    pthread_mutex_unlock(&tune_lock);
    return st;
}

/* The default tile of a float32 product whose A has its natural leading
 * dimension (clt_tune_gemm's scratch tensors, a contiguous tensor). */
static clt__gemm_tile natural_default(int slot, int transpose_a, int64_t m, int64_t n, int64_t k)
{
    return clt__gemm_tile_default(slot, transpose_a, (size_t)m, (size_t)n, (size_t)k,
                                  (size_t)(transpose_a ? m : k), 0);
}

static clt_status cpu_slot(const char *op, clt_device dev, int *slot)
{
    CLT_TRY(clt__resolve(dev, slot));
    int gpu;
    CLT_TRY(clt__gpu_class(*slot, &gpu));
    if (gpu)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: %s is a GPU-class device; its products run on CLBlast, which has "
                         "its own tuner", op, clt__slot_get(*slot)->name);
    return CLT_OK;
}

static clt_status check_shape(const char *op, int64_t m, int64_t n, int64_t k)
{
    if (m < 1 || n < 1 || k < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: sizes m=%" PRId64 ", n=%" PRId64 ", k=%" PRId64
                         " must be positive", op, m, n, k);
    return CLT_OK;
}

clt_status clt_tune_gemm(clt_device dev, int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                         int *tile_m, int *tile_n)
{
    const char *op = "clt_tune_gemm";
    int slot;
    CLT_TRY(check_shape(op, m, n, k));
    CLT_TRY(cpu_slot(op, dev, &slot));
    tune_entry e = {transpose_a != 0, transpose_b != 0, (size_t)m, (size_t)n, (size_t)k,
                    natural_default(slot, transpose_a, m, n, k)};
    pthread_mutex_lock(&tune_lock);
    slot_tuning *t = slot_table(slot);
    clt_status st = t ? CLT_OK : clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if (st == CLT_OK) {
        load(slot, t);
        st = tune_shape(slot, e.ta, e.tb, e.m, e.n, e.k, e.tile, &e.tile);
    }
    if (st == CLT_OK && !put(t, e)) st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if (st == CLT_OK) st = save(slot, t);
    pthread_mutex_unlock(&tune_lock);
    if (st == CLT_OK) {
        if (tile_m) *tile_m = e.tile.tm;
        if (tile_n) *tile_n = e.tile.tn;
    }
    return st;
}

clt_status clt_tune_lookup(clt_device dev, int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                           int *tile_m, int *tile_n, int *tuned)
{
    const char *op = "clt_tune_lookup";
    int slot;
    CLT_TRY(check_shape(op, m, n, k));
    CLT_TRY(cpu_slot(op, dev, &slot));
    clt__gemm_tile tile = natural_default(slot, transpose_a, m, n, k);
    pthread_mutex_lock(&tune_lock);
    slot_tuning *t = slot_table(slot);
    tune_entry *e = NULL;
    if (t) {
        load(slot, t);
        e = find(t, transpose_a != 0, transpose_b != 0, (size_t)m, (size_t)n, (size_t)k);
        if (e) tile = e->tile;
    }
    pthread_mutex_unlock(&tune_lock);
    if (tile_m) *tile_m = tile.tm;
    if (tile_n) *tile_n = tile.tn;
    if (tuned) *tuned = e != NULL;
    return CLT_OK;
}

clt_status clt_tune_cache_path(clt_device dev, char *buf, size_t len)
{
    int slot;
    if (!buf || len == 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_tune_cache_path: no buffer");
    buf[0] = '\0';
    CLT_TRY(clt__resolve(dev, &slot));
    if (!tune_path(slot, buf, len))
        return clt__fail(CLT_ERR_IO, "clt_tune_cache_path: the cache is off (CLT_CACHE_DIR=off) or the path does not "
                         "fit in %zu bytes", len);
    return CLT_OK;
}
