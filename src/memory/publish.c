/* Per-process publication of the memory counters. Each process maps a small
 * file, cltensor.<pid>, and the allocator stores its counters there under
 * its own per-device lock; `clt smi` maps the files of every process. */
#include "publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/env.h"
#include "../core/error.h"
#include "../device/device_internal.h"

#define PUB_MAGIC 0x31544c43u /* "CLT1": bumped whenever the layout changes */

/* The file's layout. Counters are atomics so a reader never sees half a
 * store; the writer sets magic last, so a reader skips a file in the making. */
typedef struct pub_device {
    char name[16];
    int32_t platform_index, device_index;
    char device_name[128];
    _Atomic int32_t used;
    _Atomic int64_t allocated, reserved, peak_allocated;
} pub_device;

typedef struct pub_header {
    _Atomic uint32_t magic;
    uint32_t ndevices;
    int32_t pid;
    uint64_t start_time; /* from /proc/<pid>/stat, to tell a reused pid */
    char command[256];
    pub_device devices[];
} pub_header;

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(pub_header *) mapped;
static atomic_int tried;      /* setup ran (successfully or not) in this process */
static int handlers_set;
static pid_t owner_pid;       /* the process that made `path` */
static size_t mapped_size;
static char path[512];

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0. */
static uint64_t start_time_of(int pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: count from the last ')'. */
    char *s = strrchr(buf, ')');
    if (!s) return 0;
    s++;
    for (int field = 3; field < 22 && s; field++) s = strchr(s + 1, ' ');
    return s ? strtoull(s + 1, NULL, 10) : 0;
}

static void read_command(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f) {
        size_t n = fread(out, 1, len - 1, f);
        fclose(f);
        out[n] = '\0';
        for (size_t i = 0; i + 1 < n; i++)
            if (out[i] == '\0') out[i] = ' ';
    }
    if (!out[0]) snprintf(out, len, "%s", program_invocation_name);
}

static void remove_at_exit(void)
{
    /* Other threads may still store counters, so the mapping stays. */
    if (atomic_load(&mapped) && owner_pid == getpid()) unlink(path);
}

/* A forked child would otherwise write its counters into its parent's file.
 * The lock is made anew: a thread of the parent may have held it. */
static void forget_in_child(void)
{
    pub_header *h = atomic_exchange(&mapped, NULL);
    if (h) munmap(h, mapped_size);
    atomic_store(&tried, 0);
    pthread_mutex_init(&setup_lock, NULL);
}

/* Creates and maps the file in `dir`; NULL on any failure. */
static pub_header *create_in(const char *dir, size_t size)
{
    if (!dir || !*dir) return NULL;
    int n = snprintf(path, sizeof path, "%s/cltensor.%d", dir, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, flags, 0644);
    if (fd < 0 && errno == EEXIST) {
        /* Left by an earlier process with our pid that did not exit cleanly. */
        unlink(path);
        fd = open(path, flags, 0644);
    }
    if (fd < 0) return NULL;
    /* Reserving the pages now (not a sparse ftruncate) means a full tmpfs
     * fails here instead of raising SIGBUS at a later store. */
    void *m = MAP_FAILED;
    if (posix_fallocate(fd, 0, (off_t)size) == 0) m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return NULL;
    }
    return m;
}

static void setup_locked(void)
{
    if (clt__env_int(CLT__ENV_NO_PUBLISH, 0)) return;
    int nslots = clt__slot_count();
    while (nslots > 0 && clt__slot_plans(nslots - 1)) nslots--; /* planning devices are not published */
    if (nslots <= 0) return;
    uint32_t ndev = nslots < CLT_SMI_MAX_DEVICES ? (uint32_t)nslots : CLT_SMI_MAX_DEVICES;
    size_t size = sizeof(pub_header) + ndev * sizeof(pub_device);
    const char *dirs[] = {"/dev/shm", getenv("XDG_RUNTIME_DIR"), "/tmp"};
    pub_header *h = NULL;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && !h; i++) h = create_in(dirs[i], size);
    if (!h) return;
    h->ndevices = ndev;
    h->pid = (int32_t)getpid();
    h->start_time = start_time_of(h->pid);
    read_command(h->command, sizeof h->command);
    for (uint32_t i = 0; i < ndev; i++) {
        const clt__slot *s = clt__slot_get((int)i);
        pub_device *d = &h->devices[i];
        snprintf(d->name, sizeof d->name, "%s", s->name);
        /* Pinned memory is the host's, not its device's: P:D -1:-1. */
        int host = s->type == CLT_DEVICE_PINNED;
        d->platform_index = host ? -1 : s->platform_index;
        d->device_index = host ? -1 : s->device_index;
        if (clGetDeviceInfo(s->device, CL_DEVICE_NAME, sizeof d->device_name, d->device_name, NULL) != CL_SUCCESS)
            d->device_name[0] = '\0';
        d->device_name[sizeof d->device_name - 1] = '\0';
    }
    atomic_store_explicit(&h->magic, PUB_MAGIC, memory_order_release);
    owner_pid = getpid();
    mapped_size = size;
    if (!handlers_set) {
        handlers_set = 1;
        atexit(remove_at_exit);
        pthread_atfork(NULL, NULL, forget_in_child);
    }
    atomic_store_explicit(&mapped, h, memory_order_release);
}

void clt__publish_update(int slot, const clt_memory_stats *s)
{
    pub_header *h = atomic_load_explicit(&mapped, memory_order_acquire);
    if (!h) {
        if (atomic_load_explicit(&tried, memory_order_acquire)) return;
        pthread_mutex_lock(&setup_lock);
        if (!atomic_load(&tried)) {
            setup_locked();
            atomic_store_explicit(&tried, 1, memory_order_release);
        }
        pthread_mutex_unlock(&setup_lock);
        h = atomic_load_explicit(&mapped, memory_order_acquire);
        if (!h) return;
    }
    if (slot < 0 || (uint32_t)slot >= h->ndevices) return;
    pub_device *d = &h->devices[slot];
    atomic_store_explicit(&d->allocated, s->allocated, memory_order_relaxed);
    atomic_store_explicit(&d->reserved, s->reserved, memory_order_relaxed);
    atomic_store_explicit(&d->peak_allocated, s->peak_allocated, memory_order_relaxed);
    atomic_store_explicit(&d->used, 1, memory_order_relaxed);
}

const char *clt__publish_path(void)
{
    return atomic_load(&mapped) ? path : NULL;
}

static int pid_alive(int pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

/* Parses "cltensor.<pid>"; 0 when the name is something else. */
static int pid_of_name(const char *name)
{
    const char *prefix = "cltensor.";
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0 || !name[plen]) return 0;
    char *end;
    long pid = strtol(name + plen, &end, 10);
    return *end == '\0' && pid > 0 && pid <= 0x7fffffff ? (int)pid : 0;
}

/* Whether the NUL-terminated string fits in its field of len bytes. */
static int terminated(const char *field, size_t len) { return memchr(field, '\0', len) != NULL; }

static int counter_ok(int64_t v) { return v >= 0 && v <= CLT__PUBLISH_MAX_BYTES; }

/* A record refused after part of it was copied: nothing of it is kept. */
static int refuse(clt_smi_process *p)
{
    memset(p, 0, sizeof *p);
    return 0;
}

int clt__publish_parse(const void *buf, size_t len, int pid, uint64_t start_time, clt_smi_process *p)
{
    memset(p, 0, sizeof *p);
    /* Copied out first: the fields are checked on this copy, never re-read. */
    union {
        pub_header h;
        char bytes[sizeof(pub_header) + CLT_SMI_MAX_DEVICES * sizeof(pub_device)];
    } copy;
    if (len < sizeof(pub_header) || len > sizeof copy) return 0;
    memcpy(copy.bytes, buf, len);
    const pub_header *h = &copy.h;
    if (atomic_load_explicit(&h->magic, memory_order_relaxed) != PUB_MAGIC) return 0; /* still being made */
    if (h->ndevices < 1 || h->ndevices > CLT_SMI_MAX_DEVICES) return 0;
    if (len != sizeof(pub_header) + h->ndevices * sizeof(pub_device)) return 0;
    if (pid <= 0 || h->pid != pid) return 0;
    /* Both start times known and equal: the record belongs to this very
     * process, not to an earlier one with its pid (stale) or to none. */
    if (h->start_time == 0 || start_time == 0) return 0;
    if (h->start_time != start_time) return -1;
    if (!terminated(h->command, sizeof h->command)) return 0;
    p->pid = pid;
    memcpy(p->command, h->command, sizeof p->command);
    for (uint32_t i = 0; i < h->ndevices; i++) {
        const pub_device *d = &h->devices[i];
        int32_t used = atomic_load_explicit(&d->used, memory_order_relaxed);
        int64_t allocated = atomic_load_explicit(&d->allocated, memory_order_relaxed);
        int64_t reserved = atomic_load_explicit(&d->reserved, memory_order_relaxed);
        int64_t peak = atomic_load_explicit(&d->peak_allocated, memory_order_relaxed);
        if (used != 0 && used != 1) return refuse(p);
        if (!terminated(d->name, sizeof d->name) || !terminated(d->device_name, sizeof d->device_name)) return refuse(p);
        int host = d->platform_index == -1 && d->device_index == -1;
        if (!host && (d->platform_index < 0 || d->platform_index > CLT__PUBLISH_MAX_INDEX || d->device_index < 0 ||
                      d->device_index > CLT__PUBLISH_MAX_INDEX))
            return refuse(p);
        if (!counter_ok(allocated) || !counter_ok(reserved) || !counter_ok(peak)) return refuse(p);
        if (!used) continue;
        clt_smi_device *o = &p->devices[p->ndevices++];
        memcpy(o->name, d->name, sizeof o->name);
        o->platform_index = d->platform_index;
        o->device_index = d->device_index;
        memcpy(o->device_name, d->device_name, sizeof o->device_name);
        o->allocated = allocated;
        o->reserved = reserved;
        o->peak_allocated = peak;
    }
    return 1;
}

/* The owner of /proc/<pid> (the process's effective uid), or -1. */
static long long uid_of(int pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d", pid);
    struct stat st;
    return stat(p, &st) == 0 ? (long long)st.st_uid : -1;
}

/* Reads one file into *p. Returns 1 when it describes a live process, 0 to
 * skip it (unreadable, still being made, malformed, or not made by that
 * process), -1 when it is stale. The bytes are read (not mapped), so a file
 * that shrinks meanwhile is only short, never a SIGBUS. */
static int read_file(const char *file, int pid, clt_smi_process *p)
{
    if (!pid_alive(pid)) return -1;
    /* O_NONBLOCK: a FIFO planted under the name does not hang the reader. */
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    char buf[sizeof(pub_header) + CLT_SMI_MAX_DEVICES * sizeof(pub_device) + 1];
    size_t len = 0;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size < sizeof buf;
    while (ok && len < sizeof buf) {
        ssize_t n = pread(fd, buf + len, sizeof buf - len, (off_t)len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    if (!ok) return 0;
    /* A file made by another user than the process's is forged: not listed
     * under that pid (and not removed: it is not this reader's to judge). */
    if (uid_of(pid) != (long long)st.st_uid) return 0;
    return clt__publish_parse(buf, len, pid, start_time_of(pid), p);
}

void clt_smi_escape(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!out || outlen == 0) return;
    for (const unsigned char *c = (const unsigned char *)(in ? in : ""); *c; c++) {
        if (*c >= 0x20 && *c < 0x7f && *c != '\\') {
            if (o + 1 >= outlen) break;
            out[o++] = (char)*c;
        } else {
            if (o + 4 >= outlen) break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*c >> 4];
            out[o++] = hex[*c & 15];
        }
    }
    out[o] = '\0';
}

static int by_pid(const void *a, const void *b)
{
    int x = ((const clt_smi_process *)a)->pid, y = ((const clt_smi_process *)b)->pid;
    return (x > y) - (x < y);
}

int clt__publish_read(clt_smi_process **out)
{
    *out = NULL;
    const char *dirs[] = {"/dev/shm", getenv("XDG_RUNTIME_DIR"), "/tmp"};
    enum { NDIRS = sizeof dirs / sizeof dirs[0] };
    struct stat seen[NDIRS];
    int nseen = 0, count = 0, cap = 0;
    clt_smi_process *list = NULL;
    for (int d = 0; d < NDIRS; d++) {
        struct stat ds;
        if (!dirs[d] || !*dirs[d] || stat(dirs[d], &ds) != 0) continue;
        int dup = 0;
        for (int j = 0; j < nseen; j++) dup |= seen[j].st_dev == ds.st_dev && seen[j].st_ino == ds.st_ino;
        if (dup) continue;
        seen[nseen++] = ds;
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            int pid = pid_of_name(e->d_name);
            if (!pid) continue;
            char file[1024];
            snprintf(file, sizeof file, "%s/%s", dirs[d], e->d_name);
            if (count == cap) {
                int ncap = cap ? 2 * cap : 8;
                clt_smi_process *grown = realloc(list, (size_t)ncap * sizeof *grown);
                if (!grown) {
                    closedir(dir);
                    free(list);
                    return -1;
                }
                list = grown;
                cap = ncap;
            }
            int r = read_file(file, pid, &list[count]);
            if (r > 0) count++;
            else if (r < 0) unlink(file);
        }
        closedir(dir);
    }
    if (count) qsort(list, (size_t)count, sizeof *list, by_pid);
    *out = list;
    return count;
}

/* ---- the public reader ---- */

struct clt_smi {
    int count;
    clt_smi_process *processes;
};

clt_status clt_smi_open(clt_smi **out)
{
    CLT_TRY(clt__need("clt_smi_open", "out", out));
    *out = NULL;
    clt_smi *s = calloc(1, sizeof *s);
    if (!s) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory reading the published memory records");
    s->count = clt__publish_read(&s->processes);
    if (s->count < 0) {
        free(s);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory reading the published memory records");
    }
    *out = s;
    return CLT_OK;
}

int clt_smi_num_processes(const clt_smi *s) { return s ? s->count : 0; }

const clt_smi_process *clt_smi_process_at(const clt_smi *s, int i)
{
    return s && i >= 0 && i < s->count ? &s->processes[i] : NULL;
}

void clt_smi_close(clt_smi *s)
{
    if (!s) return;
    free(s->processes);
    free(s);
}
