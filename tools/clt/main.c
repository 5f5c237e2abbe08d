/* clt: the command-line tool. Each command is a function in commands.h and
 * a row of the table below. */
#include <stdio.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"devices", clt_cmd_devices, "list every OpenCL platform and device"},
    {"smi", clt_cmd_smi, "memory per device and per cltensor process, like nvidia-smi"},
    {"train", clt_cmd_train, "train the chapter's ResMLP on Fashion-MNIST, or a model on a CSV, .npy/.npz or IDX file"},
    {"eval", clt_cmd_eval, "test figures of any saved model"},
    {"predict", clt_cmd_predict, "a saved model's predictions for the rows of a data file, as CSV"},
    {"timeline", clt_cmd_timeline, "draw a CLT_TRACE trace as an SVG timeline"},
    {"tune", clt_cmd_tune, "time GEMM tile sizes for a model's shapes and cache the fastest"},
    {"warmup", clt_cmd_warmup, "compile every kernel a model's training needs, ahead of time"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: clt <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun `clt <command> --help` for a command's options, `clt --version` for cltensor's version.\n");
}

/* cltensor's warnings (clt_set_warning_handler): one line each on stderr. */
static void print_warning(const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "clt: warning: %s\n", message);
}

int main(int argc, char **argv)
{
    clt_set_warning_handler(print_warning, NULL);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("clt (cltensor) %s\n", clt_version(NULL, NULL, NULL));
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) != 0) continue;
        /* A malformed CLT_* variable is a usage error of every command. */
        if (clt_check_environment() != CLT_OK) {
            fprintf(stderr, "clt %s: %s\n", cmd, clt_last_error());
            return 2;
        }
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "clt: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
