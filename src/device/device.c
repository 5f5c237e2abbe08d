/* Devices: enumeration of every OpenCL platform and device, naming, the
 * contexts, created once per device when first used, and the table of
 * in-order queues (queue.c makes each). */
#include "device_internal.h"
#include "../core/env.h"
#include "../core/limits.h"
#include "cltensor/async.h" /* clt_pinned */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct clt__context_group {
    cl_context context;
    pthread_mutex_t lock; /* creating the context */
} clt__context_group;

static clt__slot *slots;
static int slot_count;
static clt__context_group *groups;
static int group_count;
static cl_command_queue *queues;     /* read without a lock once set (atomically) */
static pthread_mutex_t *queue_locks; /* one per slot: creating its queue */
static int pinned_slot = -1;
static int real_count;   /* the slots of devices and pinned memory; their planning twins follow */
static pthread_once_t enumerate_once = PTHREAD_ONCE_INIT;
static int plan_pinned_slot = -1; /* pinned memory's planning slot: its twin, or one of its own */
static int described_base = -1;   /* the first of CLT_PLAN_MAX_DESCRIBED described slots; -1: none */
/* A described slot is filled under described_lock, then marked (release);
 * it is found only once marked (acquire), and never changes after. */
static atomic_int described_set[CLT_PLAN_MAX_DESCRIBED];
static clt_device_description descriptions[CLT_PLAN_MAX_DESCRIBED];
static pthread_mutex_t described_lock = PTHREAD_MUTEX_INITIALIZER;


static int is_cpu(cl_device_id d)
{
    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    return (t & CL_DEVICE_TYPE_CPU) != 0;
}

static void fill_limits(clt__slot *s)
{
    cl_uint align_bits = 0;
    clGetDeviceInfo(s->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof s->max_alloc, &s->max_alloc, NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof s->global_mem, &s->global_mem, NULL);
    clGetDeviceInfo(s->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    s->base_align_bytes = align_bits / 8 ? align_bits / 8 : 128;
    if (clGetDeviceInfo(s->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof s->max_work_group, &s->max_work_group,
                        NULL) != CL_SUCCESS)
        s->max_work_group = 1;
    if (clGetDeviceInfo(s->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof s->float_width, &s->float_width,
                        NULL) != CL_SUCCESS)
        s->float_width = 0;
    if (clGetDeviceInfo(s->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof s->compute_units, &s->compute_units, NULL) !=
        CL_SUCCESS)
        s->compute_units = 0;
}

/* The slot table being built: tab[0..n), room for cap. */
typedef struct slot_table {
    clt__slot *tab;
    int n, cap;
    int ncpu, ngpu;  /* type indices handed out so far */
    int first_cpu;   /* the first CPU device's slot, -1 for none */
    int cpu_as_gpu;  /* CLT_CPU_AS_GPU: 0 off, 1 on, 2 "only" (no cpu:0 is added) */
} slot_table;

/* Room for `need` more slots; 0 when host memory ran out. */
static int reserve_slots(slot_table *t, int need)
{
    if (t->n + need <= t->cap) return 1;
    int ncap = t->cap ? t->cap * 2 : 8;
    if (ncap < t->n + need) ncap = t->n + need;
    clt__slot *grown = realloc(t->tab, (size_t)ncap * sizeof *grown);
    if (!grown) return 0;
    t->tab = grown;
    t->cap = ncap;
    return 1;
}

/* Adds device d of platform p, typed and named: a CPU is cpu:N unless
 * CLT_CPU_AS_GPU presents it as a GPU. The caller reserved the room. */
static void add_device(slot_table *t, cl_platform_id platform, cl_uint p, cl_device_id dev, cl_uint d)
{
    clt__slot *s = &t->tab[t->n];
    memset(s, 0, sizeof *s);
    s->platform = platform;
    s->device = dev;
    s->platform_index = (int)p;
    s->device_index = (int)d;
    s->context_group = (int)p;
    s->plans_for = -1;
    int cpu = is_cpu(dev);
    s->cpu_type = cpu;
    if (cpu && t->first_cpu < 0) t->first_cpu = t->n;
    if (cpu && !t->cpu_as_gpu) {
        s->type = CLT_DEVICE_CPU;
        s->type_index = t->ncpu++;
    } else {
        s->type = CLT_DEVICE_GPU;
        s->type_index = t->ngpu++;
        s->presented_as_gpu = cpu;
    }
    fill_limits(s);
    snprintf(s->name, sizeof s->name, "%s:%d", s->type == CLT_DEVICE_CPU ? "cpu" : "gpu", s->type_index);
    t->n++;
}

/* Adds every device of platform p (none where the driver fails). */
static void add_platform(slot_table *t, cl_platform_id platform, cl_uint p)
{
    cl_uint nd = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) return;
    cl_device_id *devs = calloc(nd, sizeof *devs);
    if (!devs) return;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, nd, devs, NULL) != CL_SUCCESS) nd = 0;
    for (cl_uint d = 0; d < nd && reserve_slots(t, 1); d++) add_device(t, platform, p, devs[d], d);
    free(devs);
}

/* Adds a slot copying slot `from`, of type `type` and index 0, named `name`. */
static clt__slot *add_copy(slot_table *t, int from, clt_device_type type, const char *name)
{
    clt__slot *s = &t->tab[t->n++];
    *s = t->tab[from];
    s->type = type;
    s->type_index = 0;
    s->presented_as_gpu = 0;
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

/* The extra cpu:0 of CLT_CPU_AS_GPU=1, over the first CPU, in a context of
 * its own (group np + its platform). */
static void add_extra_cpu(slot_table *t, cl_uint np)
{
    if (t->cpu_as_gpu != 1 || t->first_cpu < 0 || !reserve_slots(t, 1)) return;
    clt__slot *s = add_copy(t, t->first_cpu, CLT_DEVICE_CPU, "cpu:0");
    s->context_group = (int)np + s->platform_index;
}

/* Pinned host memory lives in the context of the first GPU (else of the
 * first device): the device it is most likely copied to. */
static void add_pinned(slot_table *t)
{
    if (t->n == 0 || !reserve_slots(t, 1)) return;
    int base = 0;
    for (int i = 0; i < t->n; i++)
        if (t->tab[i].type == CLT_DEVICE_GPU) {
            base = i;
            break;
        }
    add_copy(t, base, CLT_DEVICE_PINNED, "pinned");
    pinned_slot = t->n - 1;
}

/* A planning twin of every slot so far (clt_plan_device), after them:
 * slot real_count + i plans for slot i. */
static void add_twins(slot_table *t)
{
    int n = t->n;
    if (!reserve_slots(t, n)) return;
    for (int i = 0; i < n; i++) {
        clt__slot *s = &t->tab[t->n++];
        *s = t->tab[i];
        s->plans_for = i;
        char real[sizeof s->name];
        memcpy(real, t->tab[i].name, sizeof real);
        snprintf(s->name, sizeof s->name, "plan:%.*s", (int)sizeof s->name - 6, real);
    }
}

/* A described device's slot, at enumeration only: no OpenCL device, its
 * own planning slot. These fields never change after; describe_slot writes
 * only the description's. */
static void init_described(clt__slot *s, int self, clt_device_type type, int index)
{
    memset(s, 0, sizeof *s);
    s->type = type;
    s->type_index = index;
    s->plans_for = self;
    s->described = 1;
    s->context_group = -1 - self; /* shares a context with no other slot */
}

/* Pinned memory's planning slot on a machine without pinned memory (no
 * OpenCL device): as much as the host has, so described devices plan whole
 * runs there too. */
static void add_plan_pinned(slot_table *t)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    clt__slot *s = &t->tab[t->n];
    init_described(s, t->n, CLT_DEVICE_PINNED, 0);
    s->global_mem = s->max_alloc = pages > 0 && page > 0 ? (cl_ulong)pages * (cl_ulong)page : (cl_ulong)1 << 30;
    snprintf(s->name, sizeof s->name, "plan:pinned");
    plan_pinned_slot = t->n++;
}

/* Room for CLT_PLAN_MAX_DESCRIBED described devices, after every other
 * slot, and pinned memory's planning slot when there is no twin of it. */
static void add_described(slot_table *t)
{
    if (!reserve_slots(t, CLT_PLAN_MAX_DESCRIBED + 1)) return;
    if (pinned_slot >= 0 && t->n == 2 * real_count) plan_pinned_slot = real_count + pinned_slot;
    else add_plan_pinned(t);
    described_base = t->n;
    for (int i = 0; i < CLT_PLAN_MAX_DESCRIBED; i++, t->n++) init_described(&t->tab[t->n], t->n, CLT_DEVICE_GPU, i);
}

/* Publishes the table with its context groups (two per platform: its own
 * and the extra cpu:0's) and per-slot queue locks; on running out of host
 * memory no device exists. */
static void install(slot_table *t, cl_uint np)
{
    int n = t->n, ngroups = 2 * (int)np;
    groups = calloc((size_t)(ngroups ? ngroups : 1), sizeof *groups);
    queues = calloc((size_t)(n ? n : 1), sizeof *queues);
    queue_locks = calloc((size_t)(n ? n : 1), sizeof *queue_locks);
    if (!groups || !queues || !queue_locks) {
        free(groups);
        free(queues);
        free(queue_locks);
        free(t->tab);
        groups = NULL;
        queues = NULL;
        queue_locks = NULL;
        pinned_slot = -1;
        return;
    }
    for (int i = 0; i < ngroups; i++) pthread_mutex_init(&groups[i].lock, NULL);
    for (int i = 0; i < n; i++) pthread_mutex_init(&queue_locks[i], NULL);
    group_count = ngroups;
    slots = t->tab;
    slot_count = n;
}

static int discovery_errno; /* errno after the ICD loader's discovery, for no_platform_reason */

/* Adds every device of every platform; returns the number of platforms (0
 * when OpenCL has none). */
static cl_uint add_platforms(slot_table *t)
{
    cl_uint np = 0;
    errno = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    discovery_errno = errno;
    if (err != CL_SUCCESS || np == 0) return 0;
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats || clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
        if (!plats) discovery_errno = ENOMEM;
        free(plats);
        return 0;
    }
    for (cl_uint p = 0; p < np; p++) add_platform(t, plats[p], p);
    free(plats);
    return np;
}

/* Builds the slot table. Without CLT_CPU_AS_GPU every device appears once,
 * named by its type. With it, CPU devices are listed as GPUs and cpu:0 is
 * added as a separate device over the first CPU, in a context of its own;
 * with CLT_CPU_AS_GPU=only it is not, so no CPU device exists (as on a GPU
 * machine without pocl). The
 * described devices' slots follow, empty until described. */
static void enumerate(void)
{
    slot_table t = {.first_cpu = -1, .cpu_as_gpu = clt__env_int(CLT__ENV_CPU_AS_GPU, 0)};
    cl_uint np = add_platforms(&t);
    add_extra_cpu(&t, np);
    add_pinned(&t);
    real_count = t.n;
    add_twins(&t);
    if (t.n != 2 * real_count) t.n = real_count; /* no room for the twins: no planning devices */
    add_described(&t);
    install(&t, np);
}

int clt__slot_count(void)
{
    pthread_once(&enumerate_once, enumerate);
    return slot_count;
}

const clt__slot *clt__slot_get(int slot)
{
    if (slot < 0 || slot >= clt__slot_count()) return NULL;
    return &slots[slot];
}

/* Why no OpenCL device exists, for messages: the address-space, data or
 * open-file limit when one is set and low, or loading failed for lack of
 * memory or descriptors under one (core/limits.h), else the missing ICD. */
static void no_platform_reason(char *buf, size_t len)
{
    int e = discovery_errno;
    char limit[200];
    switch (clt__limit_named(e, CLT__LIMIT_FILES | CLT__LIMIT_MEMORY, limit, sizeof limit)) {
    case CLT__LIMIT_FILES:
        snprintf(buf, len, "no OpenCL platform could be loaded under %s: the ICD loader and its driver open files "
                 "of their own; raise the limit", limit);
        return;
    case CLT__LIMIT_MEMORY:
        snprintf(buf, len, "no OpenCL platform could be loaded under %s: the ICD loader and its driver need more "
                 "(pocl maps its LLVM compiler); raise the limit", limit);
        return;
    case CLT__LIMIT_NONE: break;
    }
    if (e == ENFILE) {
        snprintf(buf, len, "no OpenCL platform could be loaded: the system's open-file table is full (ENFILE)");
        return;
    }
    snprintf(buf, len, "no OpenCL platform was found (is an ICD such as pocl-opencl-icd installed?)");
}

static int find_real(clt_device dev);

/* The slot of described device i once described, else -1. */
static int find_described(int i)
{
    if (clt__slot_count() == 0 || described_base < 0 || i < 0 || i >= CLT_PLAN_MAX_DESCRIBED) return -1;
    return atomic_load_explicit(&described_set[i], memory_order_acquire) ? described_base + i : -1;
}

/* The twin of the slot a planning device value names (pinned memory's
 * planning slot for plan:pinned), or the described slot; -1 for none. */
static int find_twin(clt_device dev)
{
    if (dev.platform == CLT_DEVICE_PLAN) return find_described(dev.index);
    if (dev.platform == CLT_DEVICE_AT) return -1;
    if (dev.platform == CLT_DEVICE_PINNED && dev.index == 0 && clt__slot_count() > 0) return plan_pinned_slot;
    int real = find_real((clt_device){(clt_device_type)dev.platform, dev.index, 0});
    return real >= 0 && real_count + real < slot_count ? real_count + real : -1;
}

static int find_slot(clt_device dev)
{
    return dev.type == CLT_DEVICE_PLAN ? find_twin(dev) : find_real(dev);
}

static int find_real(clt_device dev)
{
    int n = clt__slot_count() < real_count ? clt__slot_count() : real_count;
    for (int i = 0; i < n; i++) {
        const clt__slot *s = &slots[i];
        if (dev.type == CLT_DEVICE_AT) {
            /* The natural slot of P:D: not the extra cpu:0 made by CLT_CPU_AS_GPU. */
            if (s->platform_index == dev.platform && s->device_index == dev.index &&
                s->context_group == s->platform_index && s->type != CLT_DEVICE_PINNED)
                return i;
        } else if (s->type == dev.type && s->type_index == dev.index) {
            return i;
        }
    }
    return -1;
}

static int count_type(clt_device_type t)
{
    int n = clt__slot_count() < real_count ? clt__slot_count() : real_count, c = 0;
    for (int i = 0; i < n; i++) c += slots[i].type == t;
    return c;
}

static int device_parse(const char *text, clt_device *out);

static int device_text_ok(const char *text)
{
    clt_device d;
    return device_parse(text, &d);
}

clt_status clt_check_environment(void) { return clt__env_check(device_text_ok); }

clt_status clt__resolve(clt_device dev, int *slot)
{
    CLT_TRY(clt_check_environment());
    int i = find_slot(dev);
    if (i >= 0) {
        *slot = i;
        return CLT_OK;
    }
    char name[32];
    clt_device_name(dev, name, sizeof name);
    if (real_count == 0 && dev.type != CLT_DEVICE_PLAN) {
        char why[400];
        no_platform_reason(why, sizeof why);
        return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: %s", name, why);
    }
    if (dev.type == CLT_DEVICE_PINNED)
        return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: pinned memory has one device, \"pinned\"", name);
    if (dev.type == CLT_DEVICE_PLAN && dev.platform == CLT_DEVICE_PLAN)
        return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: no device was described as number %d "
                         "(clt_plan_device_describe)", name, dev.index);
    if (dev.type == CLT_DEVICE_PLAN)
        return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: it plans for a device this machine does not have "
                         "(see `clt devices`)", name);
    if (dev.type == CLT_DEVICE_AT)
        return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: no OpenCL platform %d with a device %d "
                         "(see `clt devices`)", name, dev.platform, dev.index);
    return clt__fail(CLT_ERR_NO_DEVICE, "no such device %s: this machine has %d %s device(s)", name,
                     count_type(dev.type), dev.type == CLT_DEVICE_GPU ? "GPU" : "CPU");
}

clt_device clt__slot_device(int slot)
{
    if (slots[slot].described && slots[slot].type != CLT_DEVICE_PINNED)
        return (clt_device){CLT_DEVICE_PLAN, slots[slot].type_index, CLT_DEVICE_PLAN};
    if (slots[slot].plans_for >= 0)
        return (clt_device){CLT_DEVICE_PLAN, slots[slot].type_index, (int)slots[slot].type};
    clt_device d = {slots[slot].type, slots[slot].type_index, 0};
    return d;
}

clt_device clt_plan_device(clt_device of)
{
    if (of.type == CLT_DEVICE_PLAN) return of;
    int real = find_real(of);
    if (real >= 0) of = clt__slot_device(real);
    return (clt_device){CLT_DEVICE_PLAN, of.index, (int)of.type};
}

int clt__slot_plans(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    return s && s->plans_for >= 0;
}

int clt__slot_is_pinned(int slot)
{
    const clt__slot *s = clt__slot_get(slot);
    return s && s->type == CLT_DEVICE_PINNED;
}

int clt__pinned_slot_of(int slot)
{
    int p = clt__pinned_slot();
    return clt__slot_plans(slot) ? plan_pinned_slot : p;
}

clt_device clt_cpu(void) { return (clt_device){CLT_DEVICE_CPU, 0, 0}; }
clt_device clt_pinned(void) { return (clt_device){CLT_DEVICE_PINNED, 0, 0}; }
clt_device clt_gpu(int i) { return (clt_device){CLT_DEVICE_GPU, i, 0}; }
clt_device clt_device_at(int platform_index, int device_index)
{
    return (clt_device){CLT_DEVICE_AT, device_index, platform_index};
}

int clt_num_gpus(void) { return count_type(CLT_DEVICE_GPU); }

clt_device clt_try_gpu(int i) { return i >= 0 && i < clt_num_gpus() ? clt_gpu(i) : clt_cpu(); }

int clt_try_all_gpus(clt_device *out, int max)
{
    int n = clt_num_gpus();
    if (n == 0) {
        if (out && max > 0) out[0] = clt_cpu();
        return 1;
    }
    for (int i = 0; i < n && i < max && out; i++) out[i] = clt_gpu(i);
    return n;
}

int clt_device_exists(clt_device dev) { return find_slot(dev) >= 0; }

int clt_device_equal(clt_device a, clt_device b)
{
    int sa = find_slot(a), sb = find_slot(b);
    if (sa >= 0 || sb >= 0) return sa == sb;
    return a.type == b.type && a.index == b.index && (a.type != CLT_DEVICE_AT || a.platform == b.platform);
}

clt_status clt_device_name(clt_device dev, char *buf, size_t len)
{
    if (!buf || len == 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_device_name: buf is NULL or empty");
    int slot = find_slot(dev);
    int n;
    if (slot >= 0)
        n = snprintf(buf, len, "%s", slots[slot].name);
    else if (dev.type == CLT_DEVICE_AT)
        n = snprintf(buf, len, "%d:%d", dev.platform, dev.index);
    else if (dev.type == CLT_DEVICE_PLAN)
        n = dev.platform == CLT_DEVICE_PINNED  ? snprintf(buf, len, "plan:pinned")
            : dev.platform == CLT_DEVICE_PLAN ? snprintf(buf, len, "plan:described:%d", dev.index)
            : dev.platform == CLT_DEVICE_CPU || dev.platform == CLT_DEVICE_GPU
                ? snprintf(buf, len, "plan:%s:%d", dev.platform == CLT_DEVICE_CPU ? "cpu" : "gpu", dev.index)
                : snprintf(buf, len, "plan:?");
    else if (dev.type == CLT_DEVICE_PINNED)
        n = dev.index == 0 ? snprintf(buf, len, "pinned") : snprintf(buf, len, "pinned:%d", dev.index);
    else
        n = snprintf(buf, len, "%s:%d", dev.type == CLT_DEVICE_CPU ? "cpu" : "gpu", dev.index);
    if (n < 0 || (size_t)n >= len)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_device_name: buffer of %zu bytes is too small", len);
    return CLT_OK;
}

/* A decimal index of at most 9 digits (no sign, no space) ending at *end. */
static int index_at(const char *p, const char **end, int *out)
{
    int n = 0, v = 0;
    for (; *p >= '0' && *p <= '9' && n < 9; p++, n++) v = v * 10 + (*p - '0');
    *end = p;
    *out = v;
    return n > 0;
}

/* cpu or gpu, each optionally with :N, pinned (or pinned:0), or P:D; 1 when
 * text is one of them. */
static int device_parse(const char *text, clt_device *out)
{
    static const struct { const char *word; clt_device_type type; } words[] = {
        {"cpu", CLT_DEVICE_CPU}, {"gpu", CLT_DEVICE_GPU}, {"pinned", CLT_DEVICE_PINNED}};
    const char *p;
    int a, b;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t n = strlen(words[w].word);
        if (strncmp(text, words[w].word, n) != 0) continue;
        if (text[n] == '\0') a = 0;
        else if (text[n] != ':' || !index_at(text + n + 1, &p, &a) || *p != '\0') return 0;
        if (words[w].type == CLT_DEVICE_PINNED && a != 0) return 0;
        *out = (clt_device){words[w].type, a, 0};
        return 1;
    }
    if (!index_at(text, &p, &a) || *p != ':' || !index_at(p + 1, &p, &b) || *p != '\0') return 0;
    *out = clt_device_at(a, b);
    return 1;
}

clt_status clt_device_parse(const char *text, clt_device *out)
{
    if (!text || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_device_parse: NULL argument");
    if (device_parse(text, out)) return CLT_OK;
    return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                     "cannot parse device \"%s\": expected cpu, cpu:N, gpu, gpu:N, pinned or P:D", text);
}

static _Thread_local int default_set;
static _Thread_local clt_device default_device;

/* cpu:0 when it exists, else the first device listed (gpu:0 on a machine
 * with GPUs only). */
static clt_device first_device(void)
{
    if (find_slot(clt_cpu()) >= 0 || clt_device_list_num_entries() == 0) return clt_cpu();
    return clt__slot_device(0);
}

clt_device clt_device_get_default(void)
{
    if (default_set) return default_device;
    clt_device d = first_device();
    const char *env = clt__env_text(CLT__ENV_DEVICE);
    clt_device parsed;
    /* A malformed value gives the first device; clt_check_environment reports it. */
    if (env && device_parse(env, &parsed)) d = parsed;
    return d;
}

void clt_device_set_default(clt_device dev)
{
    default_device = dev;
    default_set = 1;
}

/* The pinned slot, last in the table, is not an OpenCL device of its own. */
int clt_device_list_num_entries(void)
{
    clt__slot_count();
    return real_count - (pinned_slot >= 0);
}

int clt__pinned_slot(void)
{
    clt__slot_count();
    return pinned_slot;
}

clt_status clt_device_list_entry(int i, clt_device *out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_device_list_entry: out is NULL");
    if (i < 0 || i >= clt_device_list_num_entries())
        return clt__fail(CLT_ERR_NO_DEVICE, "device list index %d out of range (%d devices)", i,
                         clt_device_list_num_entries());
    *out = clt__slot_device(i);
    return CLT_OK;
}

static void info_string(cl_device_id d, cl_device_info what, char *buf, size_t len)
{
    buf[0] = '\0';
    if (clGetDeviceInfo(d, what, len, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    buf[len - 1] = '\0';
}

clt_status clt_device_list_info(int i, clt_device_info *out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_device_list_info: out is NULL");
    const clt__slot *s = i < clt_device_list_num_entries() ? clt__slot_get(i) : NULL;
    if (!s && clt_device_list_num_entries() == 0) {
        char why[400];
        no_platform_reason(why, sizeof why);
        return clt__fail(CLT_ERR_NO_DEVICE, "no OpenCL device: %s", why);
    }
    if (!s)
        return clt__fail(CLT_ERR_NO_DEVICE, "device list index %d out of range (%d devices)", i,
                         clt_device_list_num_entries());
    memset(out, 0, sizeof *out);
    out->platform_index = s->platform_index;
    out->device_index = s->device_index;
    snprintf(out->name, sizeof out->name, "%s", s->name);
    cl_device_type t = 0;
    clGetDeviceInfo(s->device, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    snprintf(out->type, sizeof out->type, "%s",
             (t & CL_DEVICE_TYPE_CPU) ? "cpu" : (t & CL_DEVICE_TYPE_GPU) ? "gpu" : "accelerator");
    info_string(s->device, CL_DEVICE_VENDOR, out->vendor, sizeof out->vendor);
    info_string(s->device, CL_DEVICE_NAME, out->device_name, sizeof out->device_name);
    info_string(s->device, CL_DEVICE_VERSION, out->opencl_version, sizeof out->opencl_version);
    info_string(s->device, CL_DRIVER_VERSION, out->driver_version, sizeof out->driver_version);
    if (clGetPlatformInfo(s->platform, CL_PLATFORM_NAME, sizeof out->platform_name, out->platform_name,
                          NULL) != CL_SUCCESS)
        out->platform_name[0] = '\0';
    out->platform_name[sizeof out->platform_name - 1] = '\0';
    out->compute_units = s->compute_units;
    out->global_mem_bytes = s->global_mem;
    out->max_alloc_bytes = s->max_alloc;
    char ext[4096];
    info_string(s->device, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    out->has_fp16 = strstr(ext, "cl_khr_fp16") != NULL;
    out->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    out->presented_as_gpu = s->presented_as_gpu;
    return CLT_OK;
}

clt_status clt__slot_context(int slot, cl_context *out)
{
    const clt__slot *s = clt__slot_get(slot);
    if (!s) return clt__fail(CLT_ERR_NO_DEVICE, "internal: bad device slot %d", slot);
    if (s->plans_for >= 0)
        return clt__fail(CLT_ERR_UNSUPPORTED, "internal: %s is a planning device: it has no OpenCL context", s->name);
    clt__context_group *g = &groups[s->context_group];
    pthread_mutex_lock(&g->lock);
    clt_status st = CLT_OK;
    if (!g->context) {
        /* One context over every device of the group, so buffers move
         * between them with clEnqueueCopyBuffer. */
        cl_device_id *devs = calloc((size_t)slot_count, sizeof *devs);
        cl_uint nd = 0;
        if (!devs) {
            st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory creating a context for %s", s->name);
        } else {
            for (int i = 0; i < slot_count; i++) {
                if (slots[i].context_group != s->context_group) continue;
                /* The pinned slot repeats a device: OpenCL wants each once. */
                int listed = 0;
                for (cl_uint j = 0; j < nd; j++) listed |= devs[j] == slots[i].device;
                if (!listed) devs[nd++] = slots[i].device;
            }
            cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)s->platform, 0};
            cl_int err;
            g->context = clCreateContext(props, nd, devs, NULL, NULL, &err);
            if (err != CL_SUCCESS) {
                g->context = NULL;
                st = clt__cl_fail(err, "clCreateContext for %s", s->name);
            }
            free(devs);
        }
    }
    *out = g->context;
    pthread_mutex_unlock(&g->lock);
    return st;
}

cl_command_queue clt__slot_queue_made(int slot)
{
    return slot >= 0 && slot < clt__slot_count() ? __atomic_load_n(&queues[slot], __ATOMIC_ACQUIRE) : NULL;
}

clt_status clt__slot_queue_make(int slot, cl_context ctx, cl_command_queue_properties props, cl_command_queue *out)
{
    pthread_mutex_lock(&queue_locks[slot]);
    clt_status st = CLT_OK;
    if (!queues[slot]) {
        cl_int err;
        cl_command_queue q = clCreateCommandQueue(ctx, slots[slot].device, props, &err);
        if (err != CL_SUCCESS) st = clt__cl_fail(err, "clCreateCommandQueue for %s", slots[slot].name);
        else __atomic_store_n(&queues[slot], q, __ATOMIC_RELEASE);
    }
    *out = queues[slot];
    pthread_mutex_unlock(&queue_locks[slot]);
    return st;
}

/* 1 unless the slot is a described device's not yet described. */
static int slot_defined(int slot)
{
    int i = slot - described_base;
    return described_base < 0 || i < 0 || i >= CLT_PLAN_MAX_DESCRIBED || find_described(i) >= 0;
}

int clt__slot_in_use(int slot)
{
    /* The published flag first (acquire): an undescribed slot's fields are
     * being written by clt_plan_device_describe. */
    if (!slot_defined(slot)) return 0;
    if (clt__slot_plans(slot)) return 1; /* no queue, always ready to be synchronized (for nothing) */
    return clt__slot_queue_made(slot) != NULL;
}

int clt__same_context(int a, int b) { return slots[a].context_group == slots[b].context_group; }

clt_status clt__gpu_class(int slot, int *out)
{
    *out = 0;
    const clt__slot *s = clt__slot_get(slot);
    if (!s) return clt__fail(CLT_ERR_NO_DEVICE, "internal: bad device slot %d", slot);
    if (s->described) { /* its description's class */
        *out = s->type == CLT_DEVICE_GPU;
        return CLT_OK;
    }
    /* The words cpu, gpu are 0, 1; a malformed value fails clt__resolve first. */
    int forced = clt__env_int(CLT__ENV_DEVICE_CLASS, -1);
    *out = forced >= 0 ? forced : !s->cpu_type;
    return CLT_OK;
}

/* ---- described devices (clt_plan_device_describe) ---- */

#define MIB_BYTES (1024ull * 1024)

clt_device_description clt_device_description_default(clt_device_type type)
{
    int gpu = type != CLT_DEVICE_CPU;
    clt_device_description d;
    memset(&d, 0, sizeof d);
    d.type = gpu ? CLT_DEVICE_GPU : CLT_DEVICE_CPU;
    d.global_mem_bytes = (gpu ? 16ull : 8ull) << 30;
    d.max_alloc_bytes = d.global_mem_bytes / 4;
    d.max_work_group = gpu ? 1024 : 4096;
    d.float_width = gpu ? 1 : 8;
    d.l1_cache_bytes = 32ull << 10;
    d.l2_cache_bytes = 1ull << 20;
    return d;
}

int clt__cpu_tile_valid(int tm, int tn)
{
    return tm >= 1 && tm <= 32 && (tn == 8 || tn == 16 || tn == 32);
}

/* CLT_OK, or CLT_ERR_INVALID_ARGUMENT naming the first of the fields the
 * CPU products read that is out of range. */
static clt_status description_check_cpu(const clt_device_description *d, const char *pre)
{
    const unsigned long long c[2] = {d->l1_cache_bytes, d->l2_cache_bytes};
    for (int i = 0; i < 2; i++)
        if (c[i] < CLT__CACHE_MIN_BYTES || c[i] > CLT__CACHE_MAX_BYTES)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: l%d_cache_bytes %llu is not between 1 KiB and 1 GiB",
                             pre, i + 1, c[i]);
    if ((d->tile_m || d->tile_n) && !clt__cpu_tile_valid(d->tile_m, d->tile_n))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tile_m x tile_n %d x %d is neither 0 x 0 nor 1 to 32 rows "
                         "by 8, 16 or 32 columns", pre, d->tile_m, d->tile_n);
    return CLT_OK;
}

/* 1 when "plan:" + label would read as a built-in device's planning twin:
 * "pinned" (plan:pinned), "cpu" or "gpu" (which name cpu:0 and gpu:0, as
 * clt_device_parse reads them), in any case. The twins' other names have a
 * ':' and the unlabelled described ones a '(' or '#', which no label has. */
static int label_reserved(const char *label)
{
    static const char *const words[] = {"pinned", "cpu", "gpu"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (strcasecmp(label, words[w]) == 0) return 1;
    return 0;
}

static int label_ok(const char *label, size_t size)
{
    size_t n = strnlen(label, size);
    if (n == size) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = label[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return 0;
    }
    return 1;
}

/* CLT_OK, or CLT_ERR_INVALID_ARGUMENT naming the first field out of range. */
static clt_status description_check(const clt_device_description *d)
{
    const char *pre = "clt_plan_device_describe";
    unsigned w = d->float_width;
    if (d->type != CLT_DEVICE_CPU && d->type != CLT_DEVICE_GPU)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: type %d is neither CLT_DEVICE_CPU nor CLT_DEVICE_GPU", pre,
                         (int)d->type);
    if (d->global_mem_bytes < MIB_BYTES || d->global_mem_bytes > CLT_PLAN_MAX_DESCRIBED_BYTES)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: global_mem_bytes %llu is not between 1 MiB and 1 PiB", pre,
                         d->global_mem_bytes);
    if (d->max_alloc_bytes < MIB_BYTES || d->max_alloc_bytes > d->global_mem_bytes)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: max_alloc_bytes %llu is not between 1 MiB and "
                         "global_mem_bytes (%llu)", pre, d->max_alloc_bytes, d->global_mem_bytes);
    if (d->max_work_group < 1 || d->max_work_group > 65536)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: max_work_group %llu is not between 1 and 65536", pre,
                         d->max_work_group);
    if (w > 16 || (w & (w - 1)) != 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: float_width %u is not 0, 1, 2, 4, 8 or 16", pre, w);
    if (d->cap_bytes < 0 || (unsigned long long)d->cap_bytes > d->global_mem_bytes)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: cap_bytes %lld is not between 0 (none) and "
                         "global_mem_bytes (%llu)", pre, d->cap_bytes, d->global_mem_bytes);
    CLT_TRY(description_check_cpu(d, pre));
    if (!label_ok(d->label, sizeof d->label))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: label \"%.*s\" is not up to %zu letters, digits, '-', '_' "
                         "or '.'", pre, (int)strnlen(d->label, sizeof d->label), d->label, sizeof d->label - 1);
    if (label_reserved(d->label))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: label \"%s\" is reserved: plan:%s reads as the planning "
                         "device of the built-in %s", pre, d->label, d->label, d->label);
    return CLT_OK;
}

/* "gpu(80G)": the type and the memory in its largest whole unit. */
static void memory_name(const clt_device_description *d, char *buf, size_t len)
{
    static const char units[] = "BKMGT";
    unsigned long long v = d->global_mem_bytes;
    int u = 0;
    while (u < 4 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%s(%llu%c)", d->type == CLT_DEVICE_CPU ? "cpu" : "gpu", v, units[u]);
}

static int same_description(const clt_device_description *a, const clt_device_description *b)
{
    return a->type == b->type && a->global_mem_bytes == b->global_mem_bytes &&
           a->max_alloc_bytes == b->max_alloc_bytes && a->max_work_group == b->max_work_group && a->float_width == b->float_width &&
           a->cap_bytes == b->cap_bytes && a->l1_cache_bytes == b->l1_cache_bytes &&
           a->l2_cache_bytes == b->l2_cache_bytes && a->tile_m == b->tile_m && a->tile_n == b->tile_n &&
           strncmp(a->label, b->label, sizeof a->label) == 0;
}

/* 1 when a described device is named name. */
static int name_taken(const char *name)
{
    for (int i = 0; i < CLT_PLAN_MAX_DESCRIBED; i++)
        if (find_described(i) >= 0 && strcmp(slots[described_base + i].name, name) == 0) return 1;
    return 0;
}

/* Fills described slot i with d, named name, then publishes it. described_lock
 * held. Only the description's fields are written: those init_described set
 * at enumeration (plans_for, described, context_group) are read without the
 * lock by loops over every slot (clt__slot_in_use, clt__slot_plans,
 * clt__same_context), and the description's only once published. */
static void describe_slot(int i, const clt_device_description *d, const char *name)
{
    clt__slot *s = &slots[described_base + i];
    s->type = d->type;
    s->global_mem = d->global_mem_bytes;
    s->max_alloc = d->max_alloc_bytes;
    s->max_work_group = (size_t)d->max_work_group;
    s->float_width = d->float_width;
    s->cpu_type = d->type == CLT_DEVICE_CPU;
    s->described_cap = d->cap_bytes;
    s->cache_l1 = (size_t)d->l1_cache_bytes;
    s->cache_l2 = (size_t)d->l2_cache_bytes;
    s->tile_m = d->tile_m;
    s->tile_n = d->tile_n;
    snprintf(s->name, sizeof s->name, "%.*s", (int)sizeof s->name - 1, name); /* it fits */
    descriptions[i] = *d;
    atomic_store_explicit(&described_set[i], 1, memory_order_release);
}

/* The described device with d, or a free number (-1 when none is left), or
 * CLT_ERR_INVALID_ARGUMENT when d's name is taken. Lock held. */
static clt_status described_number(const clt_device_description *d, const char *name, int *found, int *free_i)
{
    *found = *free_i = -1;
    for (int i = 0; i < CLT_PLAN_MAX_DESCRIBED; i++) {
        if (!atomic_load_explicit(&described_set[i], memory_order_acquire)) {
            if (*free_i < 0) *free_i = i;
        } else if (same_description(&descriptions[i], d)) {
            *found = i;
        } else if (strcmp(slots[described_base + i].name, name) == 0 && d->label[0]) {
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_device_describe: %s names another description "
                             "already", name);
        }
    }
    return CLT_OK;
}

clt_status clt_plan_device_describe(const clt_device_description *d, clt_device *out)
{
    if (!d || !out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_plan_device_describe: NULL argument");
    CLT_TRY(description_check(d));
    if (clt__slot_count() == 0 || described_base < 0)
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "clt_plan_device_describe: no room for described devices "
                         "(host memory ran out at enumeration)");
    char name[64], mem[24];
    memory_name(d, mem, sizeof mem);
    snprintf(name, sizeof name, "plan:%s", d->label[0] ? d->label : mem);
    pthread_mutex_lock(&described_lock);
    int found, free_i;
    clt_status st = described_number(d, name, &found, &free_i);
    if (st == CLT_OK && found < 0 && free_i < 0)
        st = clt__fail(CLT_ERR_UNSUPPORTED, "clt_plan_device_describe: %s would be a described device more than "
                       "the %d a process holds", name, CLT_PLAN_MAX_DESCRIBED);
    if (st == CLT_OK && found < 0) {
        /* Unlabelled, named by number where its type and memory name another or do not fit. */
        if (!d->label[0] && (name_taken(name) || strlen(name) >= sizeof slots[0].name))
            snprintf(name, sizeof name, "plan:%s#%d", d->type == CLT_DEVICE_CPU ? "cpu" : "gpu", free_i);
        describe_slot(free_i, d, name);
        found = free_i;
    }
    pthread_mutex_unlock(&described_lock);
    if (st == CLT_OK) *out = (clt_device){CLT_DEVICE_PLAN, found, CLT_DEVICE_PLAN};
    return st;
}
