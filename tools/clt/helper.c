/* The warm-up helper of a cold `clt train --helper` (helper.h). pocl compiles one
 * process's kernels under one lock, so a second process is what gets the
 * second core compiling; both share pocl's cache, keyed by source, options
 * and device, whose entries are written by rename. The helper runs the
 * step in reverse (CLT_WARMUP_REVERSE), so the two meet in the middle
 * rather than compile the same kernels side by side. It is started by
 * posix_spawn (a fork of a process that has initialised OpenCL is not
 * safe) and ends when the run's warm-up is over, or with the run: it asks
 * for SIGKILL when its parent dies (clt warmup --helper). */
#include "helper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* 1 when the warm-up of that model is recorded: its kernels are in pocl's cache. */
static int warm(clt_device device, int64_t hiddens, int64_t blocks, int64_t batch, clt_optimizer_kind optimizer)
{
    clt_model *m;
    if (clt_model_create_resmlp(&m, device, 784, hiddens, (int)blocks, 10, 0) != CLT_OK) return 1;
    int cached = clt_model_warmup_cached(m, batch, optimizer, 0.0, 0);
    clt_model_free(m);
    return cached;
}

pid_t clt_helper_start(clt_device device, int64_t hiddens, int64_t blocks, int64_t batch,
                       clt_optimizer_kind optimizer)
{
    char dev[32], h[24], k[24], b[24], parent[24];
    if (clt_device_name(device, dev, sizeof dev) != CLT_OK || warm(device, hiddens, blocks, batch, optimizer)) return 0;
    snprintf(h, sizeof h, "%lld", (long long)hiddens);
    snprintf(k, sizeof k, "%lld", (long long)blocks);
    snprintf(b, sizeof b, "%lld", (long long)batch);
    snprintf(parent, sizeof parent, "%lld", (long long)getpid());
    char *argv[] = {"clt", "warmup", "--helper", parent, "--device", dev, "--hiddens", h, "--blocks", k,
                    "--batch-size", b, "--optimizer", optimizer == CLT_OPTIMIZER_ADAM ? "adam" : "sgd", NULL};
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) return 0;
    pid_t pid = 0;
    int ok = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
             posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) == 0 &&
             posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) == 0 &&
             posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    return ok ? pid : 0;
}

void clt_helper_stop(pid_t pid)
{
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}
