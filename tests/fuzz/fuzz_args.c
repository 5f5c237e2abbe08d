/* libFuzzer target: the option parser of `clt train` and `clt eval`, the
 * tool's own tools/clt/train_options.c, linked in (tests/fuzz/CMakeLists.txt
 * and tests/CMakeLists.txt for test_fuzz_regressions): no second copy. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/clt/train_options.h"

#include "fuzz_file.h"

#define FUZZ_MAX_ARGS 64

/* The first byte picks train or eval; the rest are arguments separated by
 * NUL bytes. */
static int fuzz_args(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int eval = data[0] & 1;
    char *text = malloc(size);
    FUZZ_REQUIRE(text);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char *argv[FUZZ_MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = eval ? "eval" : "train";
    for (char *p = text; p < text + size - 1 && argc < FUZZ_MAX_ARGS; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;
    train_args a;
    int rc = clt_tool_train_parse_args(argc, argv, &a, eval);
    FUZZ_REQUIRE(rc == 0 || rc == 2 || rc == -1);
    if (rc == 0) {
        /* Whatever the parser accepts is usable as is. */
        FUZZ_REQUIRE(a.data && (!eval || a.load));
        FUZZ_REQUIRE(a.epochs >= 1 && a.epochs <= 1000000);
        FUZZ_REQUIRE(a.num_gpus >= 0 && a.num_gpus <= 1024);
        FUZZ_REQUIRE(a.batch_size >= 1 && a.hiddens >= 1 && a.blocks >= 0);
        FUZZ_REQUIRE(a.steps >= 0 && a.train_limit >= 0 && a.val_limit >= 0);
        FUZZ_REQUIRE(isfinite(a.lr) && a.lr > 0);
        FUZZ_REQUIRE(a.optimizer == CLT_OPTIMIZER_SGD || a.optimizer == CLT_OPTIMIZER_ADAM);
    }
    free(text);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_args(data, size); }
#endif
