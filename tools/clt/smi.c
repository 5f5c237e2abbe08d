/* clt smi: memory per device and per cltensor process, as nvidia-smi shows
 * it, from the counters each process publishes (include/cltensor/smi.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cltensor.h>

#include "commands.h"

#define MIB (1024.0 * 1024.0)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clt smi [--watch [SECONDS]] [--bytes]\n"
            "\n"
            "Shows each OpenCL device's memory (total, free where the driver can tell,\n"
            "and what cltensor processes hold), then one row per process and device:\n"
            "pid, allocated (live tensors), reserved (allocated plus the process's\n"
            "cache, what the driver sees), peak allocated, and the command line.\n"
            "\n"
            "options:\n"
            "  --watch [SECONDS]  redraw every SECONDS (default 2) until interrupted\n"
            "  --bytes            print sizes in bytes instead of MiB\n"
            "  -h, --help         show this help\n"
            "\n"
            "Processes publish their counters in /dev/shm/cltensor.<pid> (else\n"
            "$XDG_RUNTIME_DIR, else /tmp); files of processes that have exited are\n"
            "removed. A file is listed only when every field checks out and its owner\n"
            "is the process's owner; names are shown with unprintable bytes as \\xHH.\n"
            "CLT_NO_PUBLISH=1 keeps a process out of this list.\n");
}

/* Negative: unknown (or a sum past INT64_MAX). */
static void fmt_size(char *buf, size_t len, int64_t v, int bytes)
{
    if (v < 0) snprintf(buf, len, "unknown");
    else if (bytes) snprintf(buf, len, "%lld", (long long)v);
    else snprintf(buf, len, "%.1f", v / MIB);
}

/* A physical device, by its P:D (the same device may be gpu:0 in one
 * process and cpu:0 in another). */
typedef struct smi_device {
    int platform_index, device_index;
    char device_name[128];
    int64_t total, free, used;
    int processes;
} smi_device;

static smi_device *find_device(smi_device *devs, int n, int p, int d)
{
    for (int i = 0; i < n; i++)
        if (devs[i].platform_index == p && devs[i].device_index == d) return &devs[i];
    return NULL;
}

/* *sum += v, or -1 (unknown) once the sum would pass INT64_MAX: the counters
 * are bounded (0..2^52), but not the number of files. */
static void add_used(int64_t *sum, int64_t v)
{
    if (*sum < 0) return;
    *sum = v >= 0 && v <= INT64_MAX - *sum ? *sum + v : -1;
}

/* Adds this process's devices, each physical one once, with what the driver
 * says of its memory; returns the new count, or -1 with a message. */
static int add_listed_devices(smi_device *devs, int ndevs)
{
    int nlisted = clt_device_list_num_entries();
    for (int i = 0; i < nlisted; i++) {
        clt_device_info info;
        clt_device dev;
        if (clt_device_list_info(i, &info) != CLT_OK || clt_device_list_entry(i, &dev) != CLT_OK) {
            fprintf(stderr, "clt smi: %s\n", clt_last_error());
            return -1;
        }
        if (find_device(devs, ndevs, info.platform_index, info.device_index)) continue;
        smi_device *s = &devs[ndevs++];
        s->platform_index = info.platform_index;
        s->device_index = info.device_index;
        snprintf(s->device_name, sizeof s->device_name, "%s", info.device_name);
        if (clt_memory_get_info(dev, &s->free, &s->total) != CLT_OK) s->free = s->total = -1;
    }
    return ndevs;
}

/* Counts each published process against its devices, adding those this
 * process does not see (another POCL_DEVICES); returns the new count. */
static int add_published_devices(smi_device *devs, int ndevs, const clt_smi *snap)
{
    for (int i = 0; i < clt_smi_num_processes(snap); i++) {
        const clt_smi_process *proc = clt_smi_process_at(snap, i);
        for (int j = 0; j < proc->ndevices; j++) {
            const clt_smi_device *pd = &proc->devices[j];
            if (pd->platform_index < 0) continue; /* pinned host memory */
            smi_device *s = find_device(devs, ndevs, pd->platform_index, pd->device_index);
            if (!s) {
                s = &devs[ndevs++];
                s->platform_index = pd->platform_index;
                s->device_index = pd->device_index;
                clt_smi_escape(pd->device_name, s->device_name, sizeof s->device_name);
                s->free = s->total = -1;
            }
            add_used(&s->used, pd->reserved);
            s->processes++;
        }
    }
    return ndevs;
}

static void print_devices(const smi_device *devs, int ndevs, int bytes)
{
    char now[64];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S", localtime(&t));
    printf("clt smi  %s  (sizes in %s)\n\n", now, bytes ? "bytes" : "MiB");
    printf("%-6s %-32s %12s %12s %12s %5s\n", "P:D", "DEVICE", "TOTAL", "FREE", "CLT USED", "PROCS");
    for (int i = 0; i < ndevs; i++) {
        const smi_device *s = &devs[i];
        char pd[24], total[32], freeb[32], used[32];
        snprintf(pd, sizeof pd, "%d:%d", s->platform_index, s->device_index);
        fmt_size(total, sizeof total, s->total, bytes);
        fmt_size(freeb, sizeof freeb, s->free, bytes);
        fmt_size(used, sizeof used, s->used, bytes);
        printf("%-6s %-32.32s %12s %12s %12s %5d\n", pd, s->device_name, total, freeb, used, s->processes);
    }
}

/* One row per process and device; returns the number of rows. */
static int print_processes(const clt_smi *snap, int bytes)
{
    printf("\n%-8s %-6s %-7s %12s %12s %12s  %s\n", "PID", "P:D", "NAME", "ALLOCATED", "RESERVED", "PEAK",
           "COMMAND");
    int rows = 0;
    for (int i = 0; i < clt_smi_num_processes(snap); i++) {
        const clt_smi_process *proc = clt_smi_process_at(snap, i);
        for (int j = 0; j < proc->ndevices; j++) {
            const clt_smi_device *d = &proc->devices[j];
            char pd[24], a[32], r[32], p[32];
            if (d->platform_index < 0) snprintf(pd, sizeof pd, "host");
            else snprintf(pd, sizeof pd, "%d:%d", d->platform_index, d->device_index);
            fmt_size(a, sizeof a, d->allocated, bytes);
            fmt_size(r, sizeof r, d->reserved, bytes);
            fmt_size(p, sizeof p, d->peak_allocated, bytes);
            /* Another process wrote these bytes: escaped, never sent raw to the terminal. */
            char name[4 * sizeof d->name], command[61];
            clt_smi_escape(d->name, name, sizeof name);
            clt_smi_escape(proc->command, command, sizeof command);
            printf("%-8d %-6s %-7s %12s %12s %12s  %s\n", proc->pid, pd, name, a, r, p, command);
            rows++;
        }
    }
    return rows;
}

/* Prints one snapshot; returns the exit status. */
static int show(int bytes)
{
    clt_smi *snap;
    if (clt_smi_open(&snap) != CLT_OK) {
        fprintf(stderr, "clt smi: %s\n", clt_last_error());
        return 1;
    }
    int cap = clt_device_list_num_entries();
    for (int i = 0; i < clt_smi_num_processes(snap); i++) cap += clt_smi_process_at(snap, i)->ndevices;
    smi_device *devs = calloc(cap ? (size_t)cap : 1, sizeof *devs);
    if (!devs) {
        clt_smi_close(snap);
        fprintf(stderr, "clt smi: out of memory\n");
        return 1;
    }
    int ndevs = add_listed_devices(devs, 0);
    if (ndevs >= 0) {
        ndevs = add_published_devices(devs, ndevs, snap);
        print_devices(devs, ndevs, bytes);
        if (!print_processes(snap, bytes)) printf("no cltensor process is using a device\n");
        printf("\nCLT USED is what cltensor processes reserve: their live tensors plus their caches.\n");
        fflush(stdout);
    }
    free(devs);
    clt_smi_close(snap);
    return ndevs >= 0 ? 0 : 1;
}

int clt_cmd_smi(int argc, char **argv)
{
    int bytes = 0, watch = 0;
    double interval = 2.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--bytes") == 0) {
            bytes = 1;
        } else if (strcmp(argv[i], "--watch") == 0 || strncmp(argv[i], "--watch=", 8) == 0) {
            watch = 1;
            const char *val = NULL;
            if (argv[i][7] == '=') val = argv[i] + 8;
            else if (i + 1 < argc && argv[i + 1][0] != '-') val = argv[++i];
            if (val) {
                char *end;
                interval = strtod(val, &end);
                if (end == val || *end != '\0' || !(interval > 0) || interval > 86400) {
                    fprintf(stderr, "clt smi: --watch takes a positive number of seconds, not '%s'\n", val);
                    return 2;
                }
            }
        } else {
            fprintf(stderr, "clt smi: unknown option '%s' (see clt smi --help)\n", argv[i]);
            return 2;
        }
    }
    if (clt_device_list_num_entries() == 0) {
        /* The library says why: a missing ICD, or a resource limit. */
        clt_device_info none;
        clt_device_list_info(0, &none);
        fprintf(stderr, "clt smi: %s\n", clt_last_error());
        return 1;
    }
    if (!watch) return show(bytes);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    while (!interrupted) {
        if (tty) printf("\033[H\033[2J");
        int rc = show(bytes);
        if (rc != 0) return rc;
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        while (!interrupted && nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
    }
    return 0;
}
