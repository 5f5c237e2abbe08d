/* Autotuning of the CPU GEMM kernels, the cudnn.benchmark of cltensor: for
 * each product shape the candidate tiles of cl/gemm_cpu.cl (12 x 32, and
 * 6 x 32 over an A in place, from the built-in program; any other a program
 * built with -DTM= -DTN=) are timed on scratch tensors and the fastest is
 * kept in a tuning cache, one cache entry per device and driver next to the
 * kernel cache ("tune-<hash>.txt": the header of src/core/cache.h, then one
 * "ta tb m n k tm tn" line per shape). A process reads the file once per
 * device, at its first tile lookup there (the first float32 or float16
 * product on a CPU-class device, clt_tune_gemm or clt_tune_lookup), and
 * uses the winners without timing; with CLT_TUNE=0 it never reads the
 * file and every shape takes its default. Tuning runs from `clt tune`
 * (clt_tune_gemm) or, with CLT_TUNE=1, on the first product of each shape;
 * otherwise shapes without an entry use the shape's default
 * (clt__gemm_tile_default). The file is read as untrusted input under the
 * rules of src/core/cache.h (trusted directory, owner, mode, header,
 * checksum) and a bound of CLT__TUNE_MAX_BYTES and CLT__TUNE_MAX_LINES; a
 * file that fails is reported (clt__warn) and removed, and bad lines are
 * ignored. Loading and lookups take linear and constant time: the entries
 * are a hash table. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cache.h"
#include "../core/clock.h"
#include "../core/env.h"
#include "../core/warning.h"
#include "../kernels/program.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "../core/file.h"
#include "ops_internal.h"
#include "tune.h"

typedef struct slot_tuning {
    int loaded;
    clt__tune_table table;
} slot_tuning;

static slot_tuning *tuning;
static int ntuning;
static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;

/* Timed after the shape's default (clt__gemm_tile_default), which is timed
 * first so that ties keep it, in this order; the default is not timed twice. */
static const clt__gemm_tile candidates[] = {{12, 32}, {8, 32}, {6, 32}, {12, 16}, {6, 16}, {4, 16}, {8, 8}, {6, 8}};

static int tile_valid(clt__gemm_tile t) { return clt__cpu_tile_valid(t.tm, t.tn); }

static int tile_eq(clt__gemm_tile a, clt__gemm_tile b) { return a.tm == b.tm && a.tn == b.tn; }

clt__gemm_tile clt__cpu_tile_default(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    if (s->tile_m) return (clt__gemm_tile){s->tile_m, s->tile_n}; /* a described device's own */
    switch (s->float_width) {
    case 16: return (clt__gemm_tile){12, 32};
    case 8: return (clt__gemm_tile){6, 16};
    case 4: return (clt__gemm_tile){6, 8};
    default: return (clt__gemm_tile){12, 16};
    }
}

clt__gemm_tile clt__gemm_tile_default(int slot, int transpose_a, size_t m, size_t n, size_t k, size_t lda, int half)
{
    clt__gemm_tile t = clt__cpu_tile_default(slot);
    if (!half && !transpose_a && t.tm > 6 && clt__cpu_gemm_pack_a_bytes(slot, 0, m, n, k, lda, t) == 0) t.tm = 6;
    return t;
}

/* ---- the table: open addressing, linear probing, at most half full ---- */

static uint64_t shape_hash(int ta, int tb, size_t m, size_t n, size_t k)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)(ta * 2 + tb);
    const uint64_t v[3] = {m, n, k};
    for (int i = 0; i < 3; i++) {
        h ^= v[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h;
}

static int same_shape(const clt__tune_entry *e, int ta, int tb, size_t m, size_t n, size_t k)
{
    return e->ta == ta && e->tb == tb && e->m == m && e->n == n && e->k == k;
}

static clt__tune_entry *probe(const clt__tune_table *t, int ta, int tb, size_t m, size_t n, size_t k)
{
    if (!t->cap) return NULL;
    for (size_t i = shape_hash(ta, tb, m, n, k) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        clt__tune_entry *e = &t->slots[i];
        if (!e->used || same_shape(e, ta, tb, m, n, k)) return e;
    }
}

const clt__tune_entry *clt__tune_table_find(const clt__tune_table *t, int ta, int tb, size_t m, size_t n, size_t k)
{
    const clt__tune_entry *e = probe(t, ta, tb, m, n, k);
    return e && e->used ? e : NULL;
}

int clt__tune_table_put(clt__tune_table *t, clt__tune_entry e)
{
    clt__tune_entry *at = probe(t, e.ta, e.tb, e.m, e.n, e.k);
    if (at && at->used) {
        at->tile = e.tile;
        return 1;
    }
    if (t->count >= CLT__TUNE_MAX_LINES) return 0;
    if (2 * (t->count + 1) > t->cap) {
        size_t ncap = t->cap ? 2 * t->cap : 32;
        clt__tune_table grown = {calloc(ncap, sizeof *grown.slots), ncap, 0};
        if (!grown.slots) return 0;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].used) {
                *probe(&grown, t->slots[i].ta, t->slots[i].tb, t->slots[i].m, t->slots[i].n, t->slots[i].k) =
                    t->slots[i];
                grown.count++;
            }
        free(t->slots);
        *t = grown;
        at = probe(t, e.ta, e.tb, e.m, e.n, e.k);
    }
    e.used = 1;
    *at = e;
    t->count++;
    return 1;
}

void clt__tune_table_free(clt__tune_table *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* One line ("ta tb m n k tm tn", single spaces or tabs between, nothing
 * else); 1 with *e when it holds a valid entry. */
static int parse_line(const char *p, size_t len, clt__tune_entry *e)
{
    unsigned long long v[7];
    size_t at = 0;
    for (int f = 0; f < 7; f++) {
        while (at < len && (p[at] == ' ' || p[at] == '\t')) at++;
        size_t digits = 0;
        unsigned long long x = 0;
        while (at < len && p[at] >= '0' && p[at] <= '9') {
            if (++digits > 19) return 0;
            x = x * 10 + (unsigned long long)(p[at++] - '0');
        }
        if (!digits) return 0;
        v[f] = x;
    }
    while (at < len && (p[at] == ' ' || p[at] == '\t' || p[at] == '\r')) at++;
    if (at != len) return 0;
    if (v[0] > 1 || v[1] > 1 || v[5] > 1024 || v[6] > 1024) return 0;
    *e = (clt__tune_entry){(int)v[0], (int)v[1], (size_t)v[2], (size_t)v[3], (size_t)v[4], {(int)v[5], (int)v[6]}, 1};
    return tile_valid(e->tile);
}

int clt__tune_parse(const char *text, size_t n, clt__tune_table *t, const char **why)
{
    *why = NULL;
    if (n > CLT__TUNE_MAX_BYTES) {
        clt__tune_table_free(t);
        *why = "larger than the bound of 1 MiB";
        return 0;
    }
    size_t lines = 0;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(text + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (text + at)) : n - at;
        if (++lines > CLT__TUNE_MAX_LINES) {
            clt__tune_table_free(t);
            *why = "more lines than the bound of 16384";
            return 0;
        }
        clt__tune_entry e;
        if (parse_line(text + at, len, &e) && !clt__tune_table_put(t, e)) {
            clt__tune_table_free(t);
            *why = "out of host memory";
            return 0;
        }
        at += len + 1;
    }
    return 1;
}

/* ---- the file ---- */

/* A tuning cache file's name in the cache directory: tune-<16 hex digits>.txt. */
#define TUNE_PREFIX "tune-"
#define TUNE_SUFFIX ".txt"

/* The file's key and, when the cache directory is trusted (created first
 * when create), its path. clt__cache_dir's answer; dir holds the directory. */
static int tune_entry_of(int slot, int create, uint8_t key[32], char *dir, size_t dirlen, char *path, size_t len)
{
    clt__cache_key(slot, "tune", NULL, NULL, key);
    return clt__cache_entry_path(key, TUNE_PREFIX, TUNE_SUFFIX, create, dir, dirlen, path, len);
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

static const clt__tune_entry *find(slot_tuning *t, int ta, int tb, size_t m, size_t n, size_t k)
{
    return clt__tune_table_find(&t->table, ta, tb, m, n, k);
}

/* Adds or replaces a shape's entry. Lock held. */
static int put(slot_tuning *t, clt__tune_entry e) { return clt__tune_table_put(&t->table, e); }

int clt__tune_read(const char *path, const uint8_t key[32], clt__tune_table *t, char *why, size_t whylen)
{
    uint8_t *file;
    const uint8_t *text;
    size_t len;
    int r = clt__cache_entry_read(path, key, CLT__TUNE_MAX_BYTES, &file, &text, &len, why, whylen);
    if (r < 0) clt__tune_table_free(t);
    if (r != 1) return r;
    const char *bad = NULL;
    if (!clt__tune_parse((const char *)text, len, t, &bad)) {
        snprintf(why, whylen, "%s", bad);
        r = -1;
    }
    free(file);
    return r;
}

/* Reads the slot's file once; a file that fails a check is reported and
 * removed, and reads as empty. Lock held. */
static void load(int slot, slot_tuning *t)
{
    if (t->loaded) return;
    t->loaded = 1;
    uint8_t key[32];
    char dir[900], path[1024], why[256];
    if (tune_entry_of(slot, 0, key, dir, sizeof dir, path, sizeof path) != 1) return;
    int r = clt__tune_read(path, key, &t->table, why, sizeof why);
    if (r < 0) {
        clt__warn("ignoring the tuning cache %s: %s; shapes use their default tiles until tuned again", path, why);
        clt__cache_entry_remove(path);
    }
}

/* Rewrites the slot's file with every entry. Lock held. */
static clt_status save(int slot, const slot_tuning *t)
{
    uint8_t key[32];
    char path[1024], dir[900];
    int r = tune_entry_of(slot, 1, key, dir, sizeof dir, path, sizeof path);
    if (r == 0) return clt__fail(CLT_ERR_IO, "the tuning cache is off (CLT_CACHE_DIR=off or no cache directory)");
    if (r < 0)
        return clt__fail(CLT_ERR_IO, "the tuning cache is not written: the cache directory %s is not used (not "
                         "this user's own, or writable by others)", dir);
    size_t cap = t->table.count * 80 + 1, used = 0;
    char *text = malloc(cap);
    if (!text) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory writing %s", path);
    for (size_t i = 0; i < t->table.cap; i++) {
        const clt__tune_entry *e = &t->table.slots[i];
        if (!e->used) continue;
        int len = snprintf(text + used, cap - used, "%d %d %zu %zu %zu %d %d\n", e->ta, e->tb, e->m, e->n, e->k,
                           e->tile.tm, e->tile.tn);
        if (len > 0 && (size_t)len < cap - used) used += (size_t)len;
    }
    clt_status st = clt__cache_entry_write(path, key, text, used);
    free(text);
    return st;
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

/* CLT_TUNE: 1 tunes new shapes, 0 turns the tuning cache off (not read,
 * every shape its default), -1 (unset) reads it without tuning. */
static int tune_env(void)
{
    return clt__env_int(CLT__ENV_TUNE, -1);
}

clt_status clt__gemm_tile_for(int slot, int transpose_a, int transpose_b, size_t m, size_t n, size_t k, size_t lda,
                              int half, clt__gemm_tile *out)
{
    *out = clt__gemm_tile_default(slot, transpose_a, m, n, k, lda, half);
    int ta = transpose_a != 0, tb = transpose_b != 0;
    pthread_mutex_lock(&tune_lock);
    slot_tuning *t = slot_table(slot);
    clt_status st = CLT_OK;
    int mode = tune_env();
    if (t && mode != 0) {
        load(slot, t);
        const clt__tune_entry *e = find(t, ta, tb, m, n, k);
        if (e) *out = e->tile;
        else if (mode == 1) {
            clt__tune_entry ne = {ta, tb, m, n, k, *out, 1};
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
    clt__tune_entry e = {transpose_a != 0, transpose_b != 0, (size_t)m, (size_t)n, (size_t)k,
                         natural_default(slot, transpose_a, m, n, k), 1};
    pthread_mutex_lock(&tune_lock);
    slot_tuning *t = slot_table(slot);
    clt_status st = t ? CLT_OK : clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if (st == CLT_OK) {
        load(slot, t);
        st = tune_shape(slot, e.ta, e.tb, e.m, e.n, e.k, e.tile, &e.tile);
    }
    if (st == CLT_OK && !put(t, e))
        st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory, or the tuning cache holds its bound of %d shapes",
                       op, CLT__TUNE_MAX_LINES);
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
    const clt__tune_entry *e = NULL;
    if (t && tune_env() != 0) {
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
    uint8_t key[32];
    char dir[900];
    clt__cache_key(slot, "tune", NULL, NULL, key);
    if (!clt__cache_dir_path(dir, sizeof dir) || !clt__cache_entry_name(dir, key, TUNE_PREFIX, TUNE_SUFFIX, buf, len)) {
        buf[0] = '\0';
        return clt__fail(CLT_ERR_IO, "clt_tune_cache_path: the cache is off (CLT_CACHE_DIR=off) or the path does "
                         "not fit in %zu bytes", len);
    }
    return CLT_OK;
}
