/* clt: the command-line tool. */
#include <stdio.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clt <command> [options]\n"
            "\n"
            "commands:\n"
            "  devices   list every OpenCL platform and device\n"
            "\n"
            "Run `clt <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "devices") == 0) return clt_cmd_devices(argc - 1, argv + 1);
    fprintf(stderr, "clt: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
