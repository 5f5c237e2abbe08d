/* Kernel programs: built from the embedded cl/ sources once per device per
 * process, with program binaries cached on disk so a second process starts
 * without compiling. The cache lives in $CLT_CACHE_DIR, else
 * $XDG_CACHE_HOME/cltensor, else ~/.cache/cltensor; CLT_CACHE_DIR=off
 * disables it. Entries are keyed by a hash of the platform, device, driver,
 * build options and source, so a changed kernel or driver never loads a
 * stale binary. A program can also be built with extra options (the tile
 * sizes `clt tune` times): each option string is a program of its own.
 * On pocl a binary is written only when asked (clt__program_prepare with
 * save or clt__program_save_binaries, as `clt warmup` does): fetching it is
 * a compilation of its own (see binary_is_a_build), and pocl's own cache
 * serves the next process. */
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

#include "../core/clock.h"
#include "../core/env.h"
#include "../core/fault.h"
#include "../core/file.h"
#include "../device/device_internal.h"
#include "../device/sync.h"
#include "sources.h"

#define BUILD_OPTIONS "-cl-std=CL1.2"

typedef struct cached_kernel {
    const char *name;
    char *options; /* extra build options, NULL for none */
    cl_kernel kernel;
    size_t most;   /* CL_KERNEL_WORK_GROUP_SIZE on the slot's device */
} cached_kernel;

typedef struct program_variant {
    int index;
    char *options;
    cl_program program;
} program_variant;

typedef struct slot_programs {
    cl_program *programs; /* one per source, built on first use */
    cached_kernel *kernels;
    int nkernels, cap;
    program_variant *variants; /* built with extra options */
    int nvariants;
    pthread_mutex_t lock;        /* the tables above */
    pthread_mutex_t launch_lock; /* setting a kernel's arguments and enqueueing it */
} slot_programs;

static slot_programs *table;
static clt__program_stats stats; /* under lock */
static _Thread_local int save_all; /* clt__program_save_binaries */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* stats only: the tables lock per slot */

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ 0xff;
}

static int cache_dir(char *buf, size_t len)
{
    const char *dir = clt__env_text(CLT__ENV_CACHE_DIR);
    if (dir && strcasecmp(dir, "off") == 0) return 0;
    int n;
    if (dir && *dir) n = snprintf(buf, len, "%s", dir);
    else if ((dir = getenv("XDG_CACHE_HOME")) && *dir) n = snprintf(buf, len, "%s/cltensor", dir);
    else if ((dir = getenv("HOME")) && *dir) n = snprintf(buf, len, "%s/.cache/cltensor", dir);
    else return 0;
    return n > 0 && (size_t)n < len;
}

int clt__cache_dir(char *buf, size_t len) { return cache_dir(buf, len); }

static void make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

uint64_t clt__device_key(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    char info[4][256];
    memset(info, 0, sizeof info);
    clGetPlatformInfo(s->platform, CL_PLATFORM_VERSION, sizeof info[0] - 1, info[0], NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_NAME, sizeof info[1] - 1, info[1], NULL);
    clGetDeviceInfo(s->device, CL_DRIVER_VERSION, sizeof info[2] - 1, info[2], NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_VERSION, sizeof info[3] - 1, info[3], NULL);
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i < 4; i++) h = fnv1a(h, info[i]);
    return h;
}

static int cache_path(int slot, const char *options, const char *source, char *buf, size_t len)
{
    char dir[900];
    if (!cache_dir(dir, sizeof dir)) return 0;
    uint64_t h = fnv1a(fnv1a(clt__device_key(slot), options), source);
    int n = snprintf(buf, len, "%s/%016llx.bin", dir, (unsigned long long)h);
    return n > 0 && (size_t)n < len;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = clt__file_open_read(path);
    if (!f) return NULL;
    unsigned char *data = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    *len = (size_t)n;
    return data;
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

/* Writes program p's binary for device dev through the safe writer
 * (src/core/file.h), so a reader never sees half a file and a link or
 * device planted at the cache path is left alone. A program of a context with
 * several devices has one binary per device: CL_PROGRAM_BINARY_SIZES and
 * CL_PROGRAM_BINARIES are arrays of CL_PROGRAM_NUM_DEVICES entries, empty
 * for devices the program was not built for. dev's entry is the one at its
 * place in CL_PROGRAM_DEVICES; when that one is empty and exactly one entry
 * is not, that one (pocl 3.1 reports a program built for the second device
 * of two in the first entry). Every entry gets a buffer: pocl writes
 * through NULL entries rather than skip them. Returns 1 when the file was
 * written. */
static int write_binary(const char *path, cl_program p, cl_device_id dev)
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
    if (ok && at >= 0 && clGetProgramInfo(p, CL_PROGRAM_BINARIES, n * sizeof *bins, bins, NULL) == CL_SUCCESS) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            make_dirs(dir);
        }
        /* A cache: a failure only means the next run compiles again, and
         * must not replace the caller's last error. */
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", clt_last_error());
        if (clt__file_write(path, bins[at], sizes[at]) == CLT_OK) written = 1;
        else clt__fail(CLT_OK, "%s", saved);
    }
    for (cl_uint i = 0; bins && i < n; i++) free(bins[i]);
    free(bins);
    free(sizes);
    free(devs);
    return written;
}

static cl_program from_binary(cl_context ctx, const clt__slot *s, const char *options, const char *path)
{
    size_t len = 0;
    unsigned char *bin = read_file(path, &len);
    if (!bin) return NULL;
    const unsigned char *bins[1] = {bin};
    cl_int status, err;
    cl_program p = clCreateProgramWithBinary(ctx, 1, &s->device, &len, bins, &status, &err);
    free(bin);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        if (p) clReleaseProgram(p);
        return NULL;
    }
    if (clBuildProgram(p, 1, &s->device, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p);
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
        clt_status st = clt__fail(CLT_ERR_OPENCL, "building cl/%s.cl (%s) for %s failed (%s):\n%s", src->name, options,
                                  s->name, clt__cl_error_name(err), log ? log : "(no build log)");
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

/* Fetches and writes a program's binary, timed. The slot's lock held (the
 * stats lock, `lock`, is taken here). */
static void save_binary(const clt__slot *s, const char *path, cl_program p)
{
    double t0 = clt__now_seconds();
    int saved = write_binary(path, p, s->device);
    pthread_mutex_lock(&lock);
    if (saved) stats.saved++;
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

/* Loads source `index`'s program from the binary cache, else builds it from
 * source (and saves its binary where that is cheap or asked for), counted
 * and timed in the stats. */
static clt_status load_or_build(int slot, int index, const char *options, int save, cl_program *out)
{
    const clt__slot *s = clt__slot_get(slot);
    const clt__kernel_source *src = &clt__kernel_sources[index];
    cl_context ctx;
    CLT_TRY(clt__slot_context(slot, &ctx));
    char path[1024];
    int cached = cache_path(slot, options, src->source, path, sizeof path);
    cl_program p = cached ? from_binary(ctx, s, options, path) : NULL;
    if (p) {
        pthread_mutex_lock(&lock);
        stats.loaded++;
        pthread_mutex_unlock(&lock);
        *out = p;
        return CLT_OK;
    }
    double t0 = clt__now_seconds();
    clt_status st = from_source(ctx, s, src, options, &p);
    pthread_mutex_lock(&lock);
    stats.build_seconds += clt__now_seconds() - t0;
    if (st == CLT_OK) stats.built++;
    pthread_mutex_unlock(&lock);
    if (st != CLT_OK) return st;
    if (cached && (save || save_all || !binary_is_a_build(s))) save_binary(s, path, p);
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
        if (!sp->programs) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel programs");
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
    clt_status st = load_or_build(slot, index, options, save, &p);
    if (st != CLT_OK) {
        free(copy);
        return st;
    }
    if (extra) sp->variants[sp->nvariants++] = (program_variant){index, copy, p};
    else sp->programs[index] = p;
    *out = p;
    return CLT_OK;
}

/* The table, one entry per slot with its own locks (threads driving two
 * devices never contend), created once. */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    int n = clt__slot_count();
    table = calloc((size_t)(n ? n : 1), sizeof *table);
    for (int i = 0; table && i < n; i++) {
        pthread_mutex_init(&table[i].lock, NULL);
        pthread_mutex_init(&table[i].launch_lock, NULL);
    }
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
    cl_program p = NULL;
    clt_status st = get_program(slot, index, NULL, save, &p);
    char path[1024];
    const clt__kernel_source *src = &clt__kernel_sources[index];
    char options[] = BUILD_OPTIONS;
    /* Built (or loaded) before without a binary in the cache: write it now. */
    if (st == CLT_OK && save && cache_path(slot, options, src->source, path, sizeof path) && access(path, F_OK) != 0)
        save_binary(clt__slot_get(slot), path, p);
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
 * largest work-group size on the slot's device; out owns a copy of options. */
static clt_status create_kernel(int slot, cl_program p, const char *program, const char *name, const char *options,
                                cached_kernel *out)
{
    char *copy = options ? strdup(options) : NULL;
    if (options && !copy) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for kernel tables");
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(p, name, &err);
    if (err != CL_SUCCESS) {
        free(copy);
        return clt__cl_fail(err, "clCreateKernel %s from cl/%s.cl", name, program);
    }
    size_t wg = 0;
    err = clGetKernelWorkGroupInfo(k, clt__slot_get(slot)->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    if (err != CL_SUCCESS) {
        clReleaseKernel(k);
        free(copy);
        return clt__cl_fail(err, "querying the work-group size of kernel %s", name);
    }
    *out = (cached_kernel){name, copy, k, wg};
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
    CLT_TRY(create_kernel(slot, p, program, name, options, &sp->kernels[sp->nkernels]));
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
    cl_command_queue q;
    CLT_TRY(clt__slot_queue(slot, &q));
    if (clt__fault(CLT__FAULT_ENQUEUE))
        return clt__cl_fail(CL_OUT_OF_RESOURCES, "enqueueing kernel %s on %s (injected by CLT_FAULT)", name,
                            clt__slot_get(slot)->name);
    cl_event wait = written ? clt__tensor_take_foreign_read(written) : NULL;
    cl_event ev;
    /* Threads launching the same kernel share its cl_kernel, on which
     * clSetKernelArg is not thread-safe: arguments and the enqueue that
     * captures them go together under the slot's lock (kernels are per slot). */
    slot_programs *sp = &table[slot]; /* made by the lookup above */
    pthread_mutex_lock(&sp->launch_lock);
    cl_int err = CL_SUCCESS;
    int bad_arg = -1;
    for (int i = 0; i < nargs && err == CL_SUCCESS; i++) {
        err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) bad_arg = i;
    }
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, k, (cl_uint)dims, NULL, global, local, wait ? 1 : 0, wait ? &wait : NULL,
                                     &ev);
    pthread_mutex_unlock(&sp->launch_lock);
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
