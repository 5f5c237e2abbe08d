/* Device-wide memory, the printed report and byte counts as text. */
#include <stdio.h>
#include <string.h>

#include "../core/env.h"
#include "../core/error.h"
#include "../device/device_internal.h"
#include "cltensor/memory.h"

#ifndef CL_DEVICE_GLOBAL_FREE_MEMORY_AMD
#define CL_DEVICE_GLOBAL_FREE_MEMORY_AMD 0x4039
#endif

#define MIB (1024.0 * 1024.0)

/* MemAvailable from /proc/meminfo, or -1. */
static int64_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

clt_status clt_memory_get_info(clt_device dev, int64_t *free_bytes, int64_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_get_info: NULL output pointer");
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    const clt__slot *s = clt__slot_get(slot);
    *total_bytes = (int64_t)s->global_mem;
    *free_bytes = -1;
    int gpu;
    CLT_TRY(clt__gpu_class(slot, &gpu));
    char ext[4096] = "";
    if (!s->described) clGetDeviceInfo(s->device, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
    ext[sizeof ext - 1] = '\0';
    if (strstr(ext, "cl_amd_device_attribute_query")) {
        size_t kb[2] = {0, 0};
        if (clGetDeviceInfo(s->device, CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, sizeof kb, kb, NULL) == CL_SUCCESS)
            *free_bytes = (int64_t)kb[0] * 1024;
    } else if (!gpu && !s->described) { /* a described device has no driver to tell: -1 */
        int64_t avail = host_available();
        *free_bytes = avail < 0 ? -1 : avail < *total_bytes ? avail : *total_bytes;
    }
    return CLT_OK;
}

clt_status clt_memory_report(clt_device dev, FILE *out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_report: out is NULL");
    clt_memory_stats s;
    CLT_TRY(clt_memory_get_stats(dev, &s));
    char name[32];
    CLT_TRY(clt_device_name(dev, name, sizeof name));
    fprintf(out, "memory on %s\n", name);
    fprintf(out, "  %-18s %10s %10s\n", "", "MiB", "peak MiB");
    fprintf(out, "  %-18s %10.1f %10.1f\n", "allocated", s.allocated / MIB, s.peak_allocated / MIB);
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++)
        fprintf(out, "    %-16s %10.1f %10.1f\n", clt_memory_category_name((clt_memory_category)c),
                s.category_allocated[c] / MIB, s.category_peak[c] / MIB);
    fprintf(out, "  %-18s %10.1f %10.1f\n", "reserved", s.reserved / MIB, s.peak_reserved / MIB);
    if (s.cap) fprintf(out, "  %-18s %10.1f\n", "cap", s.cap / MIB);
    return CLT_OK;
}

clt_status clt_size_parse(const char *text, int64_t *bytes)
{
    if (!bytes) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_size_parse: bytes is NULL");
    *bytes = 0;
    /* No total: a bare fraction, a share of a device, is refused. */
    if (!text || clt__parse_size(text, 0, bytes) != 0) {
        *bytes = 0;
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         "clt_size_parse: \"%.40s\" is not a byte count (digits, then K, M, G or T)",
                         text ? text : "(null)");
    }
    return CLT_OK;
}
