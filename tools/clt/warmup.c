/* clt warmup: compiles every kernel `clt train` needs ahead of time and
 * writes the program binaries to cltensor's cache, for packagers and CI
 * images whose first training run should not compile. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"

static const char *usage =
    "usage: clt warmup [--device D]... [--hiddens H] [--blocks K] [--batch-size B]\n"
    "                  [--optimizer sgd|adam] [--fp16] [--all]\n"
    "\n"
    "Compiles every kernel that `clt train` with the same options needs on each\n"
    "device D (default: the one clt train picks, gpu:0, else cpu) by running one\n"
    "training step and one evaluation batch of a scratch model, and writes the\n"
    "program binaries to cltensor's cache (CLT_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/cltensor, else ~/.cache/cltensor), so the next process\n"
    "loads them instead of compiling. --all also builds every other kernel\n"
    "program. Exits 1 when a binary could not be saved (a full disk, a cache\n"
    "directory that is not yours alone), naming it. Defaults: --hiddens 256\n"
    "--blocks 2 --batch-size 256 --optimizer sgd.\n";

static int number(const char *opt, const char *text, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "clt warmup: %s needs an integer in [%lld, %lld], not '%s'\n", opt, lo, hi, text ? text : "");
        return 0;
    }
    *out = v;
    return 1;
}

/* One device: a model as clt train builds it, warmed up. */
static int warm(clt_device dev, long long hiddens, long long blocks, long long batch, clt_optimizer_kind kind,
                int fp16, int flags)
{
    char name[32];
    clt_model *m = NULL;
    clt_warmup_result w;
    memset(&w, 0, sizeof w);
    clt_status s = clt_device_name(dev, name, sizeof name);
    int warmed = 0;
    if (s == CLT_OK) s = clt_model_create_resmlp(&m, dev, 784, hiddens, (int)blocks, 10, 0);
    if (s == CLT_OK && fp16) s = clt_model_to_dtype(m, CLT_FLOAT16);
    if (s == CLT_OK) {
        s = clt_model_warmup(m, batch, kind, 0.0, flags, &w);
        /* Every kernel built, some binaries not saved: the counts, then the failure. */
        warmed = s == CLT_OK || w.binaries_not_saved > 0;
    }
    clt_model_free(m);
    if (warmed)
        printf("%s: %d program(s) compiled in %.2f s, %d loaded from the cache, %d binar%s saved in %.2f s; %.2f s "
               "in all\n",
               name, w.programs_built, w.build_seconds, w.programs_loaded, w.binaries_saved,
               w.binaries_saved == 1 ? "y" : "ies", w.save_seconds, w.seconds);
    if (s != CLT_OK) {
        fflush(stdout);
        fprintf(stderr, "clt warmup: %s%s\n", clt_last_error(),
                warmed ? "; the next process compiles the programs whose binaries are missing" : "");
        return 0;
    }
    return 1;
}

int clt_cmd_warmup(int argc, char **argv)
{
    clt_device devs[16];
    int ndev = 0, fp16 = 0, flags = CLT_WARMUP_SAVE_BINARIES;
    long long hiddens = 256, blocks = 2, batch = 256;
    clt_optimizer_kind kind = CLT_OPTIMIZER_SGD;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--fp16") == 0) {
            fp16 = 1;
        } else if (strcmp(a, "--all") == 0) {
            flags |= CLT_WARMUP_ALL_PROGRAMS;
        } else if (strcmp(a, "--device") == 0) {
            if (ndev == (int)(sizeof devs / sizeof devs[0])) {
                fprintf(stderr, "clt warmup: at most %d --device options\n", (int)(sizeof devs / sizeof devs[0]));
                return 2;
            }
            if (!v || clt_device_parse(v, &devs[ndev]) != CLT_OK) {
                fprintf(stderr, "clt warmup: --device: %s\n", v ? clt_last_error() : "needs a device");
                return 2;
            }
            ndev++, i++;
        } else if (strcmp(a, "--hiddens") == 0) {
            ok = number(a, v, 1, 1 << 20, &hiddens), i++;
        } else if (strcmp(a, "--blocks") == 0) {
            ok = number(a, v, 0, 64, &blocks), i++;
        } else if (strcmp(a, "--batch-size") == 0) {
            ok = number(a, v, 1, 1 << 24, &batch), i++;
        } else if (strcmp(a, "--optimizer") == 0) {
            if (v && strcmp(v, "sgd") == 0) kind = CLT_OPTIMIZER_SGD;
            else if (v && strcmp(v, "adam") == 0) kind = CLT_OPTIMIZER_ADAM;
            else {
                fprintf(stderr, "clt warmup: --optimizer takes sgd or adam, not '%s'\n", v ? v : "");
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "clt warmup: unknown option '%s'\n%s", a, usage);
            return 2;
        }
        if (!ok) return 2;
    }
    if (ndev == 0) devs[ndev++] = clt_num_gpus() > 0 ? clt_gpu(0) : clt_cpu();
    for (int i = 0; i < ndev; i++)
        if (!warm(devs[i], hiddens, blocks, batch, kind, fp16, flags)) return 1;
    return 0;
}
