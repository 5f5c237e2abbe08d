/* `clt train --accumulate` against PyTorch: 6 SGD steps of batch 100 in 3
 * micro-batches (34 + 33 + 33) leave the parameters PyTorch's one-batch
 * steps do (bench/pytorch_resmlp.py). Exits 77 (ctest: skipped) when
 * PyTorch is not installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static char dir[64];
static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static const char *python(void) { return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3"; }

START_TEST(test_accumulate_matches_pytorch)
{
    const char *py = python(), *src = getenv("CLT_SOURCE_DIR");
    char script[1024];
    snprintf(script, sizeof script, "%s/bench/pytorch_resmlp.py", src ? src : ".");
    clt_test_make_temp_dir(dir, sizeof dir, "acc-torch");
    clt_test_write_idx_split(dir, "train", 600, 1, 1);
    clt_test_write_idx_split(dir, "t10k", 16, 2, 1);
    ck_assert_msg(run("%s %s init --hiddens 64 --blocks 2 --seed 7 --out %s/init.st", py, script, dir) == 0, "%s", out);
    ck_assert_msg(run("%s %s train --data %s --load %s/init.st --steps 6 --batch-size 100 --lr 0.1 --out %s/pt.st",
                      py, script, dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(run("%s train --data %s --load %s/init.st --no-shuffle --steps 6 --batch-size 100 --accumulate 3 "
                      "--lr 0.1 --val-limit 8 --save %s/clt.st", clt_test_clt_path(), dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(run("%s %s diff %s/pt.st %s/clt.st", py, script, dir, dir) == 0, "%s", out);
    double diff = atof(out);
    ck_assert_msg(diff < 1e-4, "parameters differ from PyTorch's by %g after 6 accumulated steps", diff);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    char probe[128];
    snprintf(probe, sizeof probe, "%s -c 'import torch' > /dev/null 2>&1", python());
    if (system(probe) != 0) {
        printf("PyTorch is not installed: skipping the --accumulate comparison with PyTorch\n");
        return 77;
    }
    Suite *s = suite_create("accumulate_torch");
    TCase *tc = clt_test_tcase("accumulate_torch");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_accumulate_matches_pytorch);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
