/* `clt train` and `clt eval` end to end on a small Fashion-MNIST-shaped
 * dataset this test writes itself, and, when PyTorch is installed, the
 * same steps in PyTorch giving the same parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

static char dir[] = "/tmp/clt-train-cli-XXXXXX";
static char out[1 << 16];

/* Runs a shell command; its output lands in `out`. */
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    clt_test_write_idx_split(dir, "train", 512, 1, 1);
    clt_test_write_idx_split(dir, "t10k", 128, 2, 1);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_train_save_eval_load)
{
    int rc = run("%s train --data %s --epochs 2 --batch-size 32 --hiddens 64 --blocks 1 --save %s/a.st "
                 "--metrics %s/m.csv --plot %s/p.svg", clt_test_clt_path(), dir, dir, dir, dir);
    ck_assert_msg(rc == 0, "clt train failed (%d): %s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "epoch 2/2"));
    ck_assert_ptr_nonnull(strstr(out, "images/s"));
    double acc = 0;
    const char *at = strstr(out, "test accuracy ");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at, "test accuracy %lf", &acc), 1);
    ck_assert_msg(acc > 0.9, "accuracy %g on an easy dataset", acc);

    rc = run("%s eval --load %s/a.st --data %s", clt_test_clt_path(), dir, dir);
    ck_assert_msg(rc == 0, "clt eval failed: %s", out);
    double eval_acc = 0;
    ck_assert_int_eq(sscanf(strstr(out, "test accuracy "), "test accuracy %lf", &eval_acc), 1);
    ck_assert_msg(eval_acc == acc, "eval %g differs from training's final %g", eval_acc, acc);

    rc = run("%s train --data %s --load %s/a.st --steps 3 --no-shuffle --batch-size 32 --save %s/b.st", clt_test_clt_path(), dir,
             dir, dir);
    ck_assert_msg(rc == 0, "training from a checkpoint failed: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "3 steps"));

    rc = run("%s eval --load %s/a.st --data %s --hiddens 32", clt_test_clt_path(), dir, dir);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(out, "64 hiddens"));
}
END_TEST

START_TEST(test_same_seed_same_checkpoint)
{
    for (int i = 0; i < 2; i++) {
        int rc = run("%s train --data %s --steps 4 --batch-size 64 --hiddens 32 --blocks 1 --seed 3 --val-limit 8 "
                     "--save %s/run%d.st", clt_test_clt_path(), dir, dir, i);
        ck_assert_msg(rc == 0, "%s", out);
    }
    ck_assert_int_eq(run("cmp %s/run0.st %s/run1.st", dir, dir), 0);
}
END_TEST

START_TEST(test_bad_input_is_refused)
{
    ck_assert_int_eq(run("%s train --epochs zero", clt_test_clt_path()), 2);
    ck_assert_ptr_nonnull(strstr(out, "--epochs"));
    ck_assert_int_eq(run("%s train --optimizer rmsprop", clt_test_clt_path()), 2);
    ck_assert_int_eq(run("%s train --data %s/none", clt_test_clt_path(), dir), 1);
    ck_assert_ptr_nonnull(strstr(out, "fetch-fashion-mnist"));
    ck_assert_int_eq(run("%s eval --data %s", clt_test_clt_path(), dir), 2);
    ck_assert_int_eq(run("%s train --device gpu:77 --data %s --steps 1", clt_test_clt_path(), dir), 1);
    ck_assert_ptr_nonnull(strstr(out, "gpu:77"));

    /* A truncated checkpoint and a corrupt data file: a message, no crash. */
    ck_assert_int_eq(run("%s train --data %s --steps 1 --hiddens 16 --blocks 1 --val-limit 8 --save %s/c.st", clt_test_clt_path(),
                         dir, dir), 0);
    ck_assert_int_eq(run("head -c 1000 %s/c.st > %s/trunc.st", dir, dir), 0);
    ck_assert_int_eq(run("%s eval --load %s/trunc.st --data %s", clt_test_clt_path(), dir, dir), 1);
    ck_assert_ptr_nonnull(strstr(out, "trunc.st"));
    ck_assert_int_eq(run("%s train --load %s/trunc.st --data %s", clt_test_clt_path(), dir, dir), 1);
    ck_assert_int_eq(run("mkdir %s/bad && cp %s/t10k-* %s/bad/ && head -c 5000 %s/train-images-idx3-ubyte.gz > "
                         "%s/bad/train-images-idx3-ubyte.gz && cp %s/train-labels-idx1-ubyte %s/bad/",
                         dir, dir, dir, dir, dir, dir, dir), 0);
    ck_assert_int_eq(run("%s train --data %s/bad --steps 1", clt_test_clt_path(), dir), 1);
    ck_assert_ptr_nonnull(strstr(out, "train-images-idx3-ubyte"));
}
END_TEST

/* Runs `clt train --data dir args --save save` in the background, sends it
 * SIG<sig> once save exists (its first epoch's checkpoint) and returns the
 * run's exit status, its log in `out`. The run is at nice 19 and the
 * watcher polls every 10 ms, so that on a loaded machine the watcher is
 * not the one left behind; a run whose training loop still ended before
 * the signal tested nothing and is repeated, up to 5 times. args must ask
 * for 30 epochs. */
static int train_until_signal(const char *args, const char *save, const char *log, const char *sig)
{
    int code = -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        run("rm -f %s; nice -n 19 %s train --data %s %s --save %s > %s 2>&1 & pid=$!; "
            "for i in $(seq 3000); do [ -f %s ] && break; sleep 0.01; done; "
            "kill -%s $pid; wait $pid; echo \"exit $?\"; cat %s",
            save, clt_test_clt_path(), dir, args, save, log, save, sig, log);
        const char *at = strstr(out, "exit ");
        ck_assert_msg(at && sscanf(at, "exit %d", &code) == 1, "no exit status: %s", out);
        /* Too late: the run ended, or the signal came after the last epoch, when
         * the training loop had put back the default action (no
         * "interrupted after"). Anything else is the outcome to check. */
        int late = code == 0 || (strcmp(sig, "KILL") != 0 && !strstr(out, "interrupted after") &&
                                 strstr(out, "epoch 30/30"));
        if (!late) break;
        fprintf(stderr, "train_until_signal: SIG%s came after the last epoch; again\n", sig);
    }
    return code;
}

/* Interrupted training: a run stopped by SIGINT, SIGTERM or SIGHUP saves
 * where it is (and exits with 128 + the signal), one killed outright keeps
 * its last epoch's checkpoint; either way --resume ends with the same bytes
 * as a run that was never interrupted. */
START_TEST(test_interrupt_and_resume)
{
    const char *args = "--epochs 30 --batch-size 32 --hiddens 32 --blocks 1 --seed 4 --val-limit 16 --metrics";
    int rc = run("%s train --data %s %s %s/full.csv --save %s/full.st", clt_test_clt_path(), dir, args, dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    const char *signals[] = {"INT", "KILL", "TERM", "HUP"};
    const int codes[] = {130, 137, 143, 129};
    for (int i = 0; i < 4; i++) {
        char part_args[600], save[300], log[300];
        snprintf(part_args, sizeof part_args, "%s %s/part%d.csv", args, dir, i);
        snprintf(save, sizeof save, "%s/part%d.st", dir, i);
        snprintf(log, sizeof log, "%s/log%d", dir, i);
        int code = train_until_signal(part_args, save, log, signals[i]);
        /* 128 + the signal: saved mid-epoch, or for SIGKILL the last epoch's file. */
        ck_assert_msg(code == codes[i], "SIG%s: exit %d: %s", signals[i], code, out);
        if (i != 1) ck_assert_msg(strstr(out, "continue with --resume") != NULL, "SIG%s: %s", signals[i], out);
        rc = run("%s train --data %s %s %s/part%d.csv --resume %s/part%d.st --save %s/part%d.st", clt_test_clt_path(),
                 dir, args, dir, i, dir, i, dir, i);
        ck_assert_msg(rc == 0, "resuming after SIG%s failed: %s", signals[i], out);
        ck_assert_msg(run("cmp %s/full.st %s/part%d.st", dir, dir, i) == 0,
                      "resumed after SIG%s, the parameters differ from an uninterrupted run", signals[i]);
        /* The resumed run's metrics keep the epochs before the interruption. */
        ck_assert_int_eq(run("test $(wc -l < %s/part%d.csv) -eq 31", dir, i), 0);
    }
    ck_assert_int_eq(run("%s train --data %s --load %s/full.st --resume %s/full.st", clt_test_clt_path(), dir, dir,
                         dir), 2);
}
END_TEST

/* A float16 run with Adam stopped after its first epoch and resumed ends
 * with the bytes of an uninterrupted one: the checkpoint carries the
 * float32 master weights, Adam's moments and the loss scaler. */
START_TEST(test_fp16_resume_exact)
{
    const char *args = "--fp16 --optimizer adam --lr 0.01 --batch-size 32 --hiddens 32 --blocks 1 --seed 5 "
                       "--val-limit 16";
    int rc = run("%s train --data %s %s --epochs 3 --save %s/h_full.st", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    rc = run("%s train --data %s %s --epochs 1 --save %s/h_part.st", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_int_eq(run("grep -c optimizer.master.net.1.weight %s/h_part.st", dir), 0);
    rc = run("%s train --data %s %s --epochs 3 --resume %s/h_part.st --save %s/h_part.st", clt_test_clt_path(), dir,
             args, dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(run("cmp %s/h_full.st %s/h_part.st", dir, dir) == 0,
                  "a resumed float16 run differs from an uninterrupted one");
}
END_TEST

/* --fp16 with --num-gpus 2 trains data parallel when two GPUs exist (one
 * device otherwise) and saves the float32 master weights. */
START_TEST(test_fp16_num_gpus)
{
    int rc = run("%s train --data %s --fp16 --num-gpus 2 --epochs 2 --batch-size 32 --hiddens 32 --blocks 1 "
                 "--save %s/h_dp.st", clt_test_clt_path(), dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    if (clt_num_gpus() >= 2) ck_assert_msg(strstr(out, "+1: ") != NULL, "not data parallel: %s", out);
    double acc = 0;
    const char *at = strstr(out, "test accuracy ");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at, "test accuracy %lf", &acc), 1);
    ck_assert_msg(acc > 0.9, "accuracy %g on an easy dataset", acc);
    ck_assert_int_eq(run("grep -c optimizer.master.net.1.weight %s/h_dp.st", dir), 0);
}
END_TEST

/* --num-gpus 2 (data parallel where two GPUs exist: POCL_DEVICES="pthread
 * pthread" CLT_CPU_AS_GPU=1) saves every epoch, stops on SIGINT saving
 * where it is, and --resume ends with the bytes of an uninterrupted run. */
START_TEST(test_num_gpus_interrupt_and_resume)
{
    const char *args = "--num-gpus 2 --epochs 30 --batch-size 32 --hiddens 32 --blocks 1 --seed 4 --val-limit 16";
    int rc = run("%s train --data %s %s --save %s/dp_full.st", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    if (clt_num_gpus() >= 2) ck_assert_msg(strstr(out, "+1") != NULL, "not data parallel: %s", out);
    char save[300], log[300];
    snprintf(save, sizeof save, "%s/dp_part.st", dir);
    snprintf(log, sizeof log, "%s/dp_log", dir);
    int code = train_until_signal(args, save, log, "INT");
    ck_assert_msg(code == 130, "exit %d: %s", code, out);
    ck_assert_msg(strstr(out, "continue with --resume") != NULL, "%s", out);
    rc = run("%s train --data %s %s --resume %s/dp_part.st --save %s/dp_part.st", clt_test_clt_path(), dir, args, dir,
             dir);
    ck_assert_msg(rc == 0, "resuming a data parallel run failed: %s", out);
    ck_assert_msg(run("cmp %s/dp_full.st %s/dp_part.st", dir, dir) == 0,
                  "resumed with --num-gpus 2, the parameters differ from an uninterrupted run");
}
END_TEST

/* A run stopped by --steps part way through an epoch and resumed writes
 * that epoch's metrics row as an uninterrupted run does: the same steps and
 * train loss (and validation figures), and seconds that include the time
 * before the stop. The stop's log line does not claim a finished epoch. */
START_TEST(test_resumed_metrics_row)
{
    const char *args = "--epochs 2 --batch-size 32 --hiddens 32 --blocks 1 --seed 6 --val-limit 16";
    int rc = run("%s train --data %s %s --metrics %s/r_full.csv", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    rc = run("%s train --data %s %s --steps 21 --metrics %s/r_part.csv --save %s/r_part.st", clt_test_clt_path(), dir,
             args, dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strstr(out, "epoch 2/2 (stopped after batch 5 of 16): train loss") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "epoch 2/2:") == NULL, "%s", out);
    double before = 0;
    ck_assert_int_eq(run("sed -n 3p %s/r_part.csv | cut -d, -f6", dir), 0);
    before = atof(out);
    ck_assert_msg(before > 0, "no partial row: %s", out);
    rc = run("%s train --data %s %s --resume %s/r_part.st --metrics %s/r_part.csv", clt_test_clt_path(), dir, args,
             dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    /* epoch, steps, train_loss, val_loss, val_accuracy agree; seconds cover both parts. */
    ck_assert_int_eq(run("cut -d, -f1-5 %s/r_full.csv > %s/r_a && cut -d, -f1-5 %s/r_part.csv > %s/r_b && diff %s/r_a %s/r_b", dir,
                         dir, dir, dir, dir, dir), 0);
    ck_assert_int_eq(run("test $(wc -l < %s/r_part.csv) -eq 3", dir), 0);
    ck_assert_int_eq(run("sed -n 3p %s/r_part.csv | cut -d, -f6", dir), 0);
    ck_assert_msg(atof(out) >= before, "resumed epoch's seconds %s < the %g before the stop", out, before);
}
END_TEST

/* Under CLT_SYNC_DEBUG=warn a run's few synchronization points are reported
 * as the public calls that made them (the trainer's loss reads, the
 * evaluation, the warm-up), not as the clt_item inside them. */
START_TEST(test_sync_points_name_the_trainer)
{
    ck_assert_int_eq(run("CLT_SYNC_DEBUG=warn %s train --data %s --hiddens 16 --blocks 1 --val-limit 8 2>&1",
                         clt_test_clt_path(), dir), 0);
    ck_assert_msg(strstr(out, "clt_trainer_fit (reading the loss)") &&
                      strstr(out, "clt_trainer_evaluate (reading the loss)") &&
                      !strstr(out, "clt_item"),
                  "%s", out);
}
END_TEST

/* CLT_DEVICE is the default device of clt train, eval, tune and --plan;
 * an explicit --device wins; a bad value is refused, named. */
START_TEST(test_clt_device)
{
    const char *clt = clt_test_clt_path(), *cpu = clt_test_cpu_name(); /* cpu:0, or a GPU where none */
    char on_cpu[48];
    snprintf(on_cpu, sizeof on_cpu, "on %s", cpu);
    ck_assert_int_eq(run("CLT_DEVICE=banana %s train --data %s --steps 1", clt, dir), 2);
    ck_assert_msg(strstr(out, "clt train: ") && strstr(out, "CLT_DEVICE") && strstr(out, "banana"), "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=gpu:77 %s train --data %s --steps 1 --hiddens 16 --blocks 1", clt, dir), 1);
    ck_assert_msg(strstr(out, "gpu:77") != NULL, "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=gpu:77 %s train --plan --hiddens 16 --blocks 1", clt), 1);
    ck_assert_msg(strstr(out, "gpu:77") != NULL, "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=gpu:77 %s train --data %s --steps 1 --hiddens 16 --blocks 1 --val-limit 8 "
                         "--device %s --save %s/dev.st", clt, dir, cpu, dir), 0);
    ck_assert_msg(strstr(out, on_cpu) != NULL, "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=%s %s train --data %s --steps 1 --hiddens 16 --blocks 1 --val-limit 8", cpu, clt,
                         dir), 0);
    ck_assert_msg(strstr(out, on_cpu) != NULL, "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=gpu:77 %s eval --load %s/dev.st --data %s", clt, dir, dir), 1);
    ck_assert_msg(strstr(out, "gpu:77") != NULL, "%s", out);
    ck_assert_int_eq(run("CLT_DEVICE=gpu:77 %s eval --load %s/dev.st --data %s --device %s", clt, dir, dir, cpu), 0);
    ck_assert_int_ne(run("CLT_DEVICE=gpu:77 %s tune --batch 8 --inputs 8 --hidden 8 --blocks 1 --outputs 8", clt), 0);
    ck_assert_msg(strstr(out, "gpu:77") != NULL, "%s", out);
}
END_TEST

/* --lr 1e6: the loss becomes NaN; clt train exits 1 saying so, and the last
 * good checkpoint and metrics are left as they were (no blank fields). */
START_TEST(test_divergence_exits_nonzero)
{
    const char *args = "--batch-size 32 --hiddens 32 --blocks 1 --val-limit 16";
    int rc = run("%s train --data %s %s --save %s/d.st --metrics %s/d.csv && cp %s/d.st %s/d0.st && cp %s/d.csv "
                 "%s/d0.csv", clt_test_clt_path(), dir, args, dir, dir, dir, dir, dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    rc = run("%s train --data %s %s --epochs 3 --lr 1e6 --save %s/d.st --metrics %s/d.csv", clt_test_clt_path(), dir,
             args, dir, dir);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "clt train: training: ") && strstr(out, "diverged") && strstr(out, "learning rate"),
                  "%s", out);
    ck_assert_int_eq(run("cmp %s/d.st %s/d0.st && cmp %s/d.csv %s/d0.csv", dir, dir, dir, dir), 0);
    ck_assert_int_ne(run("grep -E ',,|,$|nan' %s/d.csv", dir), 0);
}
END_TEST

/* What --help, the log and the messages say. */
START_TEST(test_help_and_messages)
{
    const char *clt = clt_test_clt_path();
    ck_assert_int_eq(run("%s train --help", clt), 0);
    ck_assert_msg(strstr(out, "at every\n                          epoch's end (even when --metrics or --plot cannot be "
                              "written) and\n                          on Ctrl-C, SIGTERM or SIGHUP") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "no two outputs the\nsame file") != NULL, "%s", out);
    ck_assert_int_eq(run("%s train --epochs zero", clt), 2);
    ck_assert_msg(strncmp(out, "clt train: --epochs", 19) == 0, "%s", out);
    ck_assert_int_eq(run("%s train --frobnicate", clt), 2);
    ck_assert_msg(strncmp(out, "clt train: unknown option '--frobnicate'", 40) == 0, "%s", out);
    ck_assert_int_eq(run("%s eval --load", clt), 2);
    ck_assert_msg(strncmp(out, "clt eval: --load needs a value", 30) == 0, "%s", out);
    /* Missing data: which files, from where; the fetch script as in-tree only. */
    ck_assert_int_eq(run("%s train --data %s/none", clt, dir), 1);
    ck_assert_msg(strstr(out, "t10k-labels-idx1-ubyte") && strstr(out, "github.com/zalandoresearch/fashion-mnist") &&
                      strstr(out, "in a cltensor source tree, scripts/fetch-fashion-mnist"), "%s", out);
}
END_TEST

/* PyTorch's side is bench/pytorch_resmlp.py; without PyTorch this test
 * skips (a failure when CLT_TEST_REQUIRE names torch, as in scripts/test --ci). */
START_TEST(test_matches_pytorch)
{
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    clt_test_skip_if(run("%s -c 'import torch'", py) != 0, "torch",
                     "PyTorch is not installed (apt-get install python3-torch): no comparison with PyTorch");
    const char *src = getenv("CLT_SOURCE_DIR");
    char script[1024];
    snprintf(script, sizeof script, "%s/bench/pytorch_resmlp.py", src ? src : ".");
    ck_assert_msg(run("%s %s init --hiddens 64 --blocks 2 --seed 7 --out %s/init.st", py, script, dir) == 0, "%s", out);
    ck_assert_msg(run("%s %s train --data %s --load %s/init.st --steps 6 --batch-size 100 --lr 0.1 --out %s/pt.st",
                      py, script, dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(run("%s train --data %s --load %s/init.st --no-shuffle --steps 6 --batch-size 100 --lr 0.1 "
                      "--val-limit 8 --save %s/clt.st", clt_test_clt_path(), dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(run("%s %s diff %s/pt.st %s/clt.st", py, script, dir, dir) == 0, "%s", out);
    double diff = atof(out);
    ck_assert_msg(diff < 1e-4, "parameters differ from PyTorch's by %g after 6 steps", diff);
}
END_TEST

/* A TCase of the suite with the data fixture; tag (may be NULL) makes it
 * a ctest entry of its own (tests/CMakeLists.txt). */
static TCase *with_data(Suite *s, const char *name, const char *tag)
{
    TCase *tc = clt_test_tcase(name);
    if (tag) tcase_set_tags(tc, tag);
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    suite_add_tcase(s, tc);
    return tc;
}

int main(void)
{
    Suite *s = suite_create("train_cli");
    TCase *tc = with_data(s, "train_cli", NULL);
    tcase_add_test(tc, test_train_save_eval_load);
    tcase_add_test(tc, test_same_seed_same_checkpoint);
    tcase_add_test(tc, test_bad_input_is_refused);
    tcase_add_test(tc, test_interrupt_and_resume);
    tcase_add_test(tc, test_fp16_resume_exact);
    tcase_add_test(tc, test_resumed_metrics_row);
    tcase_add_test(tc, test_clt_device);
    tcase_add_test(tc, test_sync_points_name_the_trainer);
    tcase_add_test(tc, test_divergence_exits_nonzero);
    tcase_add_test(tc, test_help_and_messages);
    /* The cases that count GPUs, the entry the sanitizers also run on one
     * device (tests/CMakeLists.txt). */
    TCase *gpus = with_data(s, "gpus", "gpus");
    tcase_add_test(gpus, test_fp16_num_gpus);
    tcase_add_test(gpus, test_num_gpus_interrupt_and_resume);
    /* PyTorch parity, which may skip. */
    TCase *torch = with_data(s, "pytorch", "torch");
    tcase_add_test(torch, test_matches_pytorch);
    return clt_test_run(s);
}
