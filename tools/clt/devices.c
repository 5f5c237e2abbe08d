/* clt devices: every platform and device, as cltensor names them. */
#include <stdio.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"

int clt_cmd_devices(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: clt devices\n\nPrints cltensor's version, then lists every OpenCL device with its P:D\n"
               "index (platform:device, as clt_device_at and CLT_DEVICE take it) and its\n"
               "cltensor name.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "clt devices: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("cltensor %s\n", clt_version(NULL, NULL, NULL));
    int n = clt_device_list_num_entries();
    if (n == 0) {
        /* The library says why: a missing ICD, or a resource limit. */
        clt_device_info none;
        clt_device_list_info(0, &none);
        fprintf(stderr, "clt devices: %s\n", clt_last_error());
        return 1;
    }
    for (int i = 0; i < n; i++) {
        clt_device_info info;
        if (clt_device_list_info(i, &info) != CLT_OK) {
            fprintf(stderr, "clt devices: %s\n", clt_last_error());
            return 1;
        }
        printf("%d:%d  %-6s %-11s %s / %s%s\n", info.platform_index, info.device_index, info.name, info.type,
               info.vendor, info.device_name, info.presented_as_gpu ? " (CPU presented as GPU)" : "");
        printf("       platform: %s; %s; driver %s\n", info.platform_name, info.opencl_version,
               info.driver_version);
        printf("       %u compute units, %.0f MiB global memory, %.0f MiB max allocation, fp16 %s, fp64 %s\n",
               info.compute_units, info.global_mem_bytes / 1048576.0, info.max_alloc_bytes / 1048576.0,
               info.has_fp16 ? "yes" : "no", info.has_fp64 ? "yes" : "no");
    }
    return 0;
}
