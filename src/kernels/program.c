/* Kernel programs: built from the embedded cl/ sources once per device per
 * process, with program binaries cached on disk so a second process starts
 * without compiling. The cache lives in $CLT_CACHE_DIR, else
 * $XDG_CACHE_HOME/cltensor, else ~/.cache/cltensor; CLT_CACHE_DIR=off
 * disables it, and a directory that is not the user's own is not used
 * (src/core/cache.h). Entries are keyed by a SHA-256 of the platform,
 * device, driver, build options and source, so a changed kernel or driver
 * never loads a stale binary. An entry that fails a check of
 * src/core/cache.h, that the driver refuses or does not build, or whose
 * program lacks a kernel asked of it, is reported (clt__warn), removed and
 * built from source; the run goes on. A program can also be built with
 * extra options (the tile sizes `clt tune` times): each option string is a
 * program of its own. On pocl a binary is written only when asked
 * (clt__program_prepare with save or clt__program_save_binaries, as `clt
 * warmup` does): fetching it is a compilation of its own (see
 * binary_is_a_build), and pocl's own cache serves the next process. */
#include "program.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/cache.h"
#include "../core/clock.h"
#include "../core/fault.h"
#include "../core/file.h"
#include "../core/limits.h"
#include "../core/sha256.h"
#include "../core/warning.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "sources.h"

#define BUILD_OPTIONS "-cl-std=CL1.2"

typedef struct cached_kernel {
    char *name;    /* the table's own copy */
    char *options; /* extra build options, NULL for none */
    cl_kernel kernel;
    size_t most;   /* CL_KERNEL_WORK_GROUP_SIZE on the slot's device */
} cached_kernel;

typedef struct program_variant {
    int index;
    char *options;
    cl_program program;
    int from_cache;
} program_variant;

typedef struct slot_programs {
    cl_program *programs; /* one per source, built on first use */
    char *from_cache;     /* per source: programs[i] came from the binary cache */
    cached_kernel *kernels;
    int nkernels, cap;
    program_variant *variants; /* built with extra options */
    int nvariants;
    pthread_mutex_t lock; /* the tables above */
} slot_programs;

static slot_programs *table;
static clt__program_stats stats; /* under lock */
static _Thread_local int save_all; /* clt__program_save_binaries */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* stats only: the tables lock per slot */

static void hash_text(clt__sha256 *c, const char *text)
{
    uint64_t n = text ? strlen(text) : 0;
    clt__sha256_update(c, &n, sizeof n);
    if (n) clt__sha256_update(c, text, n);
}

/* What a cache key holds of a slot's device: its platform, name, driver
 * and OpenCL version; of a described device, which has no driver to ask,
 * its name and description. */
static void device_identity(const clt__slot *s, char info[5][256])
{
    memset(info, 0, 5 * sizeof info[0]);
    if (s->described) {
        snprintf(info[2], sizeof info[2], "%s", s->name);
        snprintf(info[3], sizeof info[3], "described %d %llu %llu %zu %u %zu %zu %dx%d", (int)s->type,
                 (unsigned long long)s->global_mem, (unsigned long long)s->max_alloc, s->max_work_group,
                 (unsigned)s->float_width, s->cache_l1, s->cache_l2, s->tile_m, s->tile_n);
        return;
    }
    clGetPlatformInfo(s->platform, CL_PLATFORM_NAME, sizeof info[0] - 1, info[0], NULL);
    clGetPlatformInfo(s->platform, CL_PLATFORM_VERSION, sizeof info[1] - 1, info[1], NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_NAME, sizeof info[2] - 1, info[2], NULL);
    clGetDeviceInfo(s->device, CL_DRIVER_VERSION, sizeof info[3] - 1, info[3], NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_VERSION, sizeof info[4] - 1, info[4], NULL);
}

void clt__cache_key(int slot, const char *kind, const char *options, const char *source, uint8_t key[32])
{
    char info[5][256];
    device_identity(clt__slot_get(slot), info);
    clt__sha256 c;
    clt__sha256_init(&c);
    hash_text(&c, kind);
    for (int i = 0; i < 5; i++) hash_text(&c, info[i]);
    hash_text(&c, options);
    hash_text(&c, source);
    clt__sha256_final(&c, key);
}

/* The cache entry of a program: its key and path. Returns clt__cache_dir's
 * answer (1: a trusted directory, created when create; 0: no cache; -1: a
 * directory not used), with dir holding the directory. */
static int entry_of(int slot, const char *options, const char *source, int create, uint8_t key[32], char *dir,
                    size_t dirlen, char *path, size_t len)
{
    clt__cache_key(slot, "program", options, source, key);
    return clt__cache_entry_path(key, "", ".bin", create, dir, dirlen, path, len);
}

int clt__program_cache_entry(int slot, const char *program, const char *extra, uint8_t key[32], char *path,
                             size_t len)
{
    int index = -1;
    for (int i = 0; i < clt__kernel_source_count; i++)
        if (strcmp(clt__kernel_sources[i].name, program) == 0) index = i;
    if (index < 0) return 0;
    char options[512], dir[900];
    snprintf(options, sizeof options, "%s%s%s", BUILD_OPTIONS, extra ? " " : "", extra ? extra : "");
    return entry_of(slot, options, clt__kernel_sources[index].source, 0, key, dir, sizeof dir, path, len);
}

/* An entry that cannot be used: told, counted and removed, so that the
 * program's binary (built from source now) takes its place. */
static void reject(const char *path, const char *program, const char *why)
{
    clt__warn("ignoring the kernel cache entry %s of cl/%s.cl: %s; building the program from source", path,
              program, why);
    clt__cache_entry_remove(path);
    pthread_mutex_lock(&lock);
    stats.rejected++;
    pthread_mutex_unlock(&lock);
}

/* 1 when asking the driver for a program's binary is a compilation of its
 * own. pocl then generates code for every kernel of the program for any
 * work-group size (measured for cl/gemm_cpu.cl: 7.5 to 13.7 s, four times
 * its clBuildProgram), which a run never needs: it compiles the variants it
 * launches when it launches them, and caches those itself (POCL_CACHE_DIR). */
static int binary_is_a_build(const clt__slot *s)
{
    char name[128] = "";
    clGetPlatformInfo(s->platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    return strstr(name, "Portable Computing Language") != NULL;
}

/* Writes program p's binary for device dev as a cache entry
 * (src/core/cache.h, through the safe writer), so a reader never sees half
 * a file. A program of a context with
 * several devices has one binary per device: CL_PROGRAM_BINARY_SIZES and
 * CL_PROGRAM_BINARIES are arrays of CL_PROGRAM_NUM_DEVICES entries, empty
 * for devices the program was not built for. dev's entry is the one at its
 * place in CL_PROGRAM_DEVICES; when that one is empty and exactly one entry
 * is not, that one (pocl 3.1 reports a program built for the second device
 * of two in the first entry). Every entry gets a buffer: pocl writes
 * through NULL entries rather than skip them. Returns 1 when the file was
 * written, else 0 with the reason as the thread's message. */
static int write_binary(const char *path, const uint8_t key[32], cl_program p, cl_device_id dev)
{
    cl_uint n = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0) return 0;
    cl_device_id *devs = calloc(n, sizeof *devs);
    size_t *sizes = calloc(n, sizeof *sizes);
    unsigned char **bins = calloc(n, sizeof *bins);
    int at = -1, nonempty = 0, last = -1, written = 0, ok = devs && sizes && bins;
    ok = ok && clGetProgramInfo(p, CL_PROGRAM_DEVICES, n * sizeof *devs, devs, NULL) == CL_SUCCESS &&
         clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, n * sizeof *sizes, sizes, NULL) == CL_SUCCESS;
    for (cl_uint i = 0; ok && i < n; i++) {
        if (sizes[i] > 0) nonempty++, last = (int)i;
        if (devs[i] == dev && sizes[i] > 0) at = (int)i;
        ok = (bins[i] = malloc(sizes[i] ? sizes[i] : 1)) != NULL;
    }
    if (ok && at < 0 && nonempty == 1) at = last;
    if (ok && at >= 0 && clGetProgramInfo(p, CL_PROGRAM_BINARIES, n * sizeof *bins, bins, NULL) == CL_SUCCESS)
        written = clt__cache_entry_write(path, key, bins[at], sizes[at]) == CLT_OK;
    else
        clt__fail(CLT_ERR_OPENCL, "the driver gave no binary for %s", path);
    for (cl_uint i = 0; bins && i < n; i++) free(bins[i]);
    free(bins);
    free(sizes);
    free(devs);
    return written;
}

/* The program from its cache entry, built; NULL when there is none or it
 * is rejected (reject). Nothing reaches the driver before the entry's
 * checks pass. */
static cl_program from_binary(cl_context ctx, const clt__slot *s, const char *program, const char *options,
                              const char *path, const uint8_t key[32])
{
    uint8_t *file;
    const uint8_t *bin;
    size_t len;
    char why[256];
    int r = clt__cache_entry_read(path, key, CLT__CACHE_ENTRY_MAX, &file, &bin, &len, why, sizeof why);
    if (r < 0) reject(path, program, why);
    if (r != 1) return NULL;
    const unsigned char *bins[1] = {bin};
    cl_int status = CL_SUCCESS, err;
    cl_program p = clCreateProgramWithBinary(ctx, 1, &s->device, &len, bins, &status, &err);
    free(file);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        if (p) clReleaseProgram(p);
        snprintf(why, sizeof why, "the driver refused the binary (%s)",
                 clt__cl_error_name(err != CL_SUCCESS ? err : status));
        reject(path, program, why);
        return NULL;
    }
    err = clBuildProgram(p, 1, &s->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        clReleaseProgram(p);
        snprintf(why, sizeof why, "the binary did not build (%s)", clt__cl_error_name(err));
        reject(path, program, why);
        return NULL;
    }
    return p;
}

static clt_status from_source(cl_context ctx, const clt__slot *s, const clt__kernel_source *src, const char *options,
                              cl_program *out)
{
    cl_int err;
    const char *text[1] = {src->source};
    cl_program p = clCreateProgramWithSource(ctx, 1, text, NULL, &err);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "clCreateProgramWithSource for cl/%s.cl", src->name);
    err = clBuildProgram(p, 1, &s->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t len = 0;
        clGetProgramBuildInfo(p, s->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
        char *log = malloc(len + 1);
        if (log) {
            log[0] = '\0';
            clGetProgramBuildInfo(p, s->device, CL_PROGRAM_BUILD_LOG, len, log, NULL);
            log[len] = '\0';
        }
        /* Under a low address-space, data or open-file limit the compiler
         * (pocl's LLVM) most likely ran out: the message names the limit. */
        char limit[200], note[300] = "";
        if (clt__limit_named(0, CLT__LIMIT_FILES | CLT__LIMIT_MEMORY, limit, sizeof limit) != CLT__LIMIT_NONE)
            snprintf(note, sizeof note, " under %s, the likely cause: the OpenCL compiler needs more; raise the "
                     "limit. Build log", limit);
        clt_status st = clt__fail(CLT_ERR_OPENCL, "building cl/%s.cl (%s) for %s failed (%s)%s:\n%s", src->name,
                                  options, s->name, clt__cl_error_name(err), note, log ? log : "(no build log)");
        free(log);
        clReleaseProgram(p);
        return st;
    }
    *out = p;
    return CLT_OK;
}

static int find_source(const char *name)
{
    for (int i = 0; i < clt__kernel_source_count; i++)
        if (strcmp(clt__kernel_sources[i].name, name) == 0) return i;
    return -1;
}

static int same_options(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/* A binary that was to be saved and was not: counted, with the reason. */
static void not_saved(const char *program, const char *why)
{
    pthread_mutex_lock(&lock);
    stats.not_saved++;
    snprintf(stats.failure, sizeof stats.failure, "cl/%s.cl: %s", program, why);
    pthread_mutex_unlock(&lock);
}

/* Fetches and writes a program's binary to its cache entry, timed; with
 * caching off, nothing. A failure is counted (not_saved) and leaves the
 * caller's last error as it was: a cache that cannot be written only means
 * the next run compiles again. The slot's lock held (the stats lock, `lock`,
 * is taken here). */
static void save_binary(int slot, const char *program, const char *options, const char *source, cl_program p)
{
    uint8_t key[32];
    char dir[900], path[1024];
    int r = entry_of(slot, options, source, 1, key, dir, sizeof dir, path, sizeof path);
    if (r == 0) return;
    if (r < 0) {
        char why[1100];
        snprintf(why, sizeof why, "the cache directory %s is not used (not this user's own, or writable by others)",
                 dir);
        not_saved(program, why);
        return;
    }
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", clt_last_error());
    double t0 = clt__now_seconds();
    int written = write_binary(path, key, p, clt__slot_get(slot)->device);
    if (!written) not_saved(program, clt_last_error());
    clt__fail(CLT_OK, "%s", saved);
    pthread_mutex_lock(&lock);
    if (written) stats.saved++;
    stats.save_seconds += clt__now_seconds() - t0;
    pthread_mutex_unlock(&lock);
}

/* The program of source `index` already built with extra options (NULL for
 * none), or NULL. The slot's lock held. */
static cl_program built_program(const slot_programs *sp, int index, const char *extra)
{
    if (!extra) return sp->programs[index];
    for (int i = 0; i < sp->nvariants; i++)
        if (sp->variants[i].index == index && strcmp(sp->variants[i].options, extra) == 0)
            return sp->variants[i].program;
    return NULL;
}

/* Loads source `index`'s program from the binary cache (unless
 * use_cache is 0), else builds it from source (and saves its binary where
 * that is cheap or asked for), counted and timed in the stats; *cached: 1
 * when it came from the cache. */
static clt_status load_or_build(int slot, int index, const char *options, int save, int use_cache, cl_program *out,
                                int *cached)
{
    const clt__slot *s = clt__slot_get(slot);
    const clt__kernel_source *src = &clt__kernel_sources[index];
    cl_context ctx;
    *cached = 0;
    CLT_TRY(clt__slot_context(slot, &ctx));
    uint8_t key[32];
    char dir[900], path[1024];
    int have = use_cache && entry_of(slot, options, src->source, 0, key, dir, sizeof dir, path, sizeof path) == 1;
    cl_program p = have ? from_binary(ctx, s, src->name, options, path, key) : NULL;
    if (p) {
        pthread_mutex_lock(&lock);
        stats.loaded++;
        pthread_mutex_unlock(&lock);
        *out = p;
        *cached = 1;
        return CLT_OK;
    }
    double t0 = clt__now_seconds();
    clt_status st = from_source(ctx, s, src, options, &p);
    pthread_mutex_lock(&lock);
    stats.build_seconds += clt__now_seconds() - t0;
    if (st == CLT_OK) stats.built++;
    pthread_mutex_unlock(&lock);
    if (st != CLT_OK) return st;
    if (save || save_all || !binary_is_a_build(s)) save_binary(slot, src->name, options, src->source, p);
    *out = p;
    return CLT_OK;
}

/* The program of source `index` built with extra options (NULL for none);
 * save: write its binary to the cache even where that costs a compilation
 * (binary_is_a_build). The slot's lock (sp->lock) held. */
static clt_status get_program(int slot, int index, const char *extra, int save, cl_program *out)
{
    slot_programs *sp = &table[slot];
    if (!sp->programs) {
        sp->programs = calloc((size_t)clt__kernel_source_count, sizeof *sp->programs);
        sp->from_cache = calloc((size_t)clt__kernel_source_count, 1);
        if (!sp->programs || !sp->from_cache) {
            free(sp->programs);
            free(sp->from_cache);
            sp->programs = NULL;
            sp->from_cache = NULL;
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel programs");
        }
    }
    if ((*out = built_program(sp, index, extra)) != NULL) return CLT_OK;
    char options[512];
    if (snprintf(options, sizeof options, "%s%s%s", BUILD_OPTIONS, extra ? " " : "", extra ? extra : "") >=
        (int)sizeof options)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "internal: build options \"%s\" too long", extra);
    char *copy = NULL;
    if (extra) {
        program_variant *grown = realloc(sp->variants, (size_t)(sp->nvariants + 1) * sizeof *grown);
        if (grown) sp->variants = grown;
        copy = strdup(extra);
        if (!grown || !copy) {
            free(copy);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel programs");
        }
    }
    cl_program p = NULL;
    int cached;
    clt_status st = load_or_build(slot, index, options, save, 1, &p, &cached);
    if (st != CLT_OK) {
        free(copy);
        return st;
    }
    if (extra) sp->variants[sp->nvariants++] = (program_variant){index, copy, p, cached};
    else {
        sp->programs[index] = p;
        sp->from_cache[index] = (char)cached;
    }
    *out = p;
    return CLT_OK;
}

/* Replaces a program that came from the binary cache and lacks a kernel
 * asked of it: its entry is rejected and the program built from source
 * (kernels made from the old one keep it alive). 1 with *out when that
 * happened, 0 when the program did not come from the cache. The slot's
 * lock held. */
static int rebuild_cached(int slot, slot_programs *sp, int index, const char *extra, const char *kernel,
                          const char *failure, cl_program *out, clt_status *st)
{
    int at = -1;
    for (int i = 0; extra && i < sp->nvariants; i++)
        if (sp->variants[i].index == index && strcmp(sp->variants[i].options, extra) == 0) at = i;
    if (extra ? at < 0 || !sp->variants[at].from_cache : !sp->from_cache[index]) return 0;
    char options[512];
    snprintf(options, sizeof options, "%s%s%s", BUILD_OPTIONS, extra ? " " : "", extra ? extra : "");
    const clt__kernel_source *src = &clt__kernel_sources[index];
    uint8_t key[32];
    char dir[900], path[1024], why[1200];
    if (entry_of(slot, options, src->source, 0, key, dir, sizeof dir, path, sizeof path) == 1) {
        snprintf(why, sizeof why, "its program gives no kernel %s (%s)", kernel, failure);
        reject(path, src->name, why);
    }
    int cached;
    cl_program p = NULL;
    *st = load_or_build(slot, index, options, 0, 0, &p, &cached);
    if (*st != CLT_OK) return 1;
    cl_program *slotp = extra ? &sp->variants[at].program : &sp->programs[index];
    clReleaseProgram(*slotp);
    *slotp = p;
    if (extra) sp->variants[at].from_cache = 0;
    else sp->from_cache[index] = 0;
    *out = p;
    return 1;
}

/* The table, one entry per slot with its own locks (threads driving two
 * devices never contend), created once. */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    int n = clt__slot_count();
    table = calloc((size_t)(n ? n : 1), sizeof *table);
    for (int i = 0; table && i < n; i++) pthread_mutex_init(&table[i].lock, NULL);
}

/* The slot's entry, or NULL with a message. */
static slot_programs *programs_of(int slot)
{
    pthread_once(&table_once, make_table);
    if (!table) clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel tables");
    return table ? &table[slot] : NULL;
}

clt_status clt__program_prepare(int slot, const char *program, int save)
{
    if (slot < 0 || slot >= clt__slot_count() || clt__slot_is_pinned(slot))
        return clt__fail(CLT_ERR_NO_DEVICE, "internal: bad slot %d for kernel programs", slot);
    if (clt__slot_plans(slot)) return CLT_OK; /* a planning device builds nothing */
    int index = find_source(program);
    if (index < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "internal: no kernel source cl/%s.cl", program);
    slot_programs *sp = programs_of(slot);
    if (!sp) return CLT_ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sp->lock);
    /* Whether the program was there before this call: one built (or loaded)
     * now has had its binary saved, or its failed save counted, by
     * load_or_build, and is not saved (nor counted) a second time. */
    int had = sp->programs && sp->programs[index];
    cl_program p = NULL;
    clt_status st = get_program(slot, index, NULL, save, &p);
    char path[1024];
    const clt__kernel_source *src = &clt__kernel_sources[index];
    char options[] = BUILD_OPTIONS;
    /* Built (or loaded) before without a binary in the cache: write it now. */
    uint8_t key[32];
    char dir[900];
    if (st == CLT_OK && save && had &&
        entry_of(slot, options, src->source, 0, key, dir, sizeof dir, path, sizeof path) == 1 &&
        access(path, F_OK) != 0)
        save_binary(slot, src->name, options, src->source, p);
    pthread_mutex_unlock(&sp->lock);
    return st;
}

int clt__program_built(int slot, const char *program)
{
    int index = find_source(program), built = 0;
    slot_programs *sp = index >= 0 && slot >= 0 && slot < clt__slot_count() ? programs_of(slot) : NULL;
    if (!sp) return 0;
    pthread_mutex_lock(&sp->lock);
    if (sp->programs) built = sp->programs[index] != NULL;
    pthread_mutex_unlock(&sp->lock);
    return built;
}

void clt__program_save_binaries(int on) { save_all = on; }

int clt__program_count(void) { return clt__kernel_source_count; }

const char *clt__program_name(int i)
{
    return i >= 0 && i < clt__kernel_source_count ? clt__kernel_sources[i].name : NULL;
}

void clt__program_get_stats(clt__program_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

clt_status clt__kernel(int slot, const char *program, const char *name, cl_kernel *out)
{
    return clt__kernel_opts(slot, program, NULL, name, out);
}

/* A slot kernels can run on, else a message naming the kernel. */
static clt_status check_kernel_slot(int slot, const char *name)
{
    if (slot < 0 || slot >= clt__slot_count()) return clt__fail(CLT_ERR_NO_DEVICE, "internal: bad slot %d", slot);
    if (clt__slot_is_pinned(slot))
        return clt__fail(CLT_ERR_UNSUPPORTED, "kernel %s: pinned tensors hold host memory and kernels do not run "
                         "on them; move the tensor to a device with clt_to first", name);
    return CLT_OK;
}

/* The cached kernel `name` built with `options`, or NULL. The slot's lock held. */
static const cached_kernel *find_kernel(const slot_programs *sp, const char *name, const char *options)
{
    for (int i = 0; i < sp->nkernels; i++)
        if (strcmp(sp->kernels[i].name, name) == 0 && same_options(sp->kernels[i].options, options))
            return &sp->kernels[i];
    return NULL;
}

/* Room for one more kernel in the slot's table. The slot's lock held. */
static clt_status reserve_kernel(slot_programs *sp)
{
    if (sp->nkernels < sp->cap) return CLT_OK;
    int ncap = sp->cap ? sp->cap * 2 : 16;
    cached_kernel *grown = realloc(sp->kernels, (size_t)ncap * sizeof *grown);
    if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel tables");
    sp->kernels = grown;
    sp->cap = ncap;
    return CLT_OK;
}

/* Creates kernel `name` of program p (from cl/<program>.cl) and queries its
 * largest work-group size on the slot's device; out owns copies of name and
 * options, so a caller's name may be a buffer it reuses. */
static clt_status create_kernel(int slot, cl_program p, const char *program, const char *name, const char *options,
                                cached_kernel *out)
{
    char *own = strdup(name), *copy = options ? strdup(options) : NULL;
    if (!own || (options && !copy)) {
        free(own);
        free(copy);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel tables");
    }
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(p, name, &err);
    size_t wg = 0;
    clt_status st = err == CL_SUCCESS ? CLT_OK : clt__cl_fail(err, "clCreateKernel %s from cl/%s.cl", name, program);
    if (st == CLT_OK) {
        err = clGetKernelWorkGroupInfo(k, clt__slot_get(slot)->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg,
                                       NULL);
        if (err != CL_SUCCESS) {
            clReleaseKernel(k);
            st = clt__cl_fail(err, "querying the work-group size of kernel %s", name);
        }
    }
    if (st != CLT_OK) {
        free(own);
        free(copy);
        return st;
    }
    *out = (cached_kernel){own, copy, k, wg};
    return CLT_OK;
}

/* Builds (or loads) the program and adds kernel `name` to the slot's table.
 * The slot's lock held. */
static clt_status add_kernel(int slot, slot_programs *sp, const char *program, const char *options, const char *name,
                             const cached_kernel **out)
{
    int index = find_source(program);
    if (index < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "internal: no kernel source cl/%s.cl", program);
    cl_program p = NULL;
    CLT_TRY(get_program(slot, index, options, 0, &p));
    CLT_TRY(reserve_kernel(sp));
    clt_status st = create_kernel(slot, p, program, name, options, &sp->kernels[sp->nkernels]);
    if (st != CLT_OK) {
        char failure[512];
        snprintf(failure, sizeof failure, "%s", clt_last_error());
        if (rebuild_cached(slot, sp, index, options, name, failure, &p, &st) && st == CLT_OK)
            st = create_kernel(slot, p, program, name, options, &sp->kernels[sp->nkernels]);
    }
    CLT_TRY(st);
    *out = &sp->kernels[sp->nkernels++];
    return CLT_OK;
}

/* The kernel and its largest work-group size, built and queried once. */
static clt_status kernel_lookup(int slot, const char *program, const char *options, const char *name, cl_kernel *out,
                                size_t *most)
{
    if (options && !*options) options = NULL;
    CLT_TRY(check_kernel_slot(slot, name));
    slot_programs *sp = programs_of(slot);
    if (!sp) return CLT_ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sp->lock);
    const cached_kernel *ck = find_kernel(sp, name, options);
    clt_status st = ck ? CLT_OK : add_kernel(slot, sp, program, options, name, &ck);
    if (st == CLT_OK) {
        *out = ck->kernel;
        *most = ck->most;
    }
    pthread_mutex_unlock(&sp->lock);
    return st;
}

clt_status clt__kernel_opts(int slot, const char *program, const char *options, const char *name, cl_kernel *out)
{
    size_t most;
    return kernel_lookup(slot, program, options, name, out, &most);
}

clt_status clt__launch(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                       int dims, const size_t *global, const size_t *local, clt_tensor *written)
{
    return clt__launch_opts(slot, program, NULL, name, nargs, args, dims, global, local, written);
}

clt_status clt__launch_opts(int slot, const char *program, const char *options, const char *name, int nargs,
                            const clt__arg *args, int dims, const size_t *global, const size_t *local,
                            clt_tensor *written)
{
    for (int d = 0; d < dims; d++)
        if (global[d] == 0) return CLT_OK;
    CLT_TRY(check_kernel_slot(slot, name));
    if (clt__slot_plans(slot)) { /* a planning device: the kernel is skipped */
        if (written) clt__tensor_set_write(written, NULL);
        return CLT_OK;
    }
    cl_kernel k;
    CLT_TRY(clt__kernel_opts(slot, program, options, name, &k));
    if (clt__fault(CLT__FAULT_ENQUEUE))
        return clt__cl_fail(CL_OUT_OF_RESOURCES, "enqueueing kernel %s on %s (injected by CLT_FAULT)", name,
                            clt__slot_get(slot)->name);
    int taken = 0;
    cl_event ev;
    clt__command c = {.kind = CLT__COMMAND_KERNEL, .name = name, .kernel = k, .nargs = nargs, .args = args,
                      .dims = (cl_uint)dims, .global = global, .local = local};
    CLT_TRY(clt__replay_take(slot, &c, written && written->st->foreign_read, &taken, &ev));
    if (taken) { /* held back for a replay of the step */
        if (written) clt__tensor_set_write(written, ev);
        return CLT_OK;
    }
    cl_command_queue q;
    CLT_TRY(clt__slot_queue_replayable(slot, &q));
    cl_event wait = written ? clt__tensor_take_foreign_read(written) : NULL;
    /* Arguments and the enqueue that captures them go together under the
     * slot's launch lock (replay.h). */
    clt__launch_lock(slot);
    cl_int err = CL_SUCCESS;
    int bad_arg = -1;
    for (int i = 0; i < nargs && err == CL_SUCCESS; i++) {
        err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) bad_arg = i;
    }
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, k, (cl_uint)dims, NULL, global, local, wait ? 1 : 0, wait ? &wait : NULL,
                                     &ev);
    clt__launch_unlock(slot);
    if (wait) clReleaseEvent(wait);
    if (bad_arg >= 0) return clt__cl_fail(err, "setting argument %d of kernel %s", bad_arg, name);
    if (err != CL_SUCCESS) return clt__cl_fail(err, "enqueueing kernel %s on %s", name, clt__slot_get(slot)->name);
    if (written) clt__tensor_set_write(written, ev);
    clt_status s = clt__after_enqueue(slot, ev, name);
    clReleaseEvent(ev);
    return s;
}

/* Work-groups of up to 256 over a global size rounded up to a multiple of
 * it (the kernels check their bounds): left to choose, pocl takes a local
 * size that divides the global one, for a prime-rich n a handful of
 * work-items per group, and runs 10 to 40 times slower. */
clt_status clt__launch1(int slot, const char *program, const char *name, int nargs, const clt__arg *args,
                        size_t n, clt_tensor *written)
{
    cl_kernel k;
    size_t most = 256;
    if (!clt__slot_plans(slot)) CLT_TRY(kernel_lookup(slot, program, NULL, name, &k, &most));
    size_t local = most < 256 ? most : 256, global = (n + local - 1) / local * local;
    return clt__launch(slot, program, name, nargs, args, 1, &global, local ? &local : NULL, written);
}
