/* The outputs of a run (src/core/file.c, src/trainer/engine.c,
 * tools/clt/train.c): a metrics write that fails at an epoch's end does not
 * skip that epoch's checkpoint, and is reported after it; every output
 * path is checked before training, a name whose temporary name exceeds
 * NAME_MAX included; two outputs naming one file, however spelled, are
 * refused before training, as is an output that is the file resumed from;
 * temporaries of the writer's own pattern that a killed writer left are
 * removed when their target is next written, and nothing else is; a stop
 * before any step says that nothing was saved. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/file.h"
#include "support.h"

static char dir[256];
static char out[1 << 16];

#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static void setup(void)
{
    clt_test_make_temp_dir(dir, sizeof dir, "outputs");
    clt_test_write_idx_split(dir, "train", 128, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
}

static void teardown(void) { clt_test_remove_dir(dir); }

static void at(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The small run every CLI case below trains (or is refused before). */
#define TRAIN "%s train --data %s --steps 2 --batch-size 32 --hiddens 8 --blocks 1 --val-limit 8"

static clt_model *small_model(void)
{
    clt_model *m = NULL;
    int64_t hiddens[] = {8};
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 784, 1, hiddens, 10, 3));
    return m;
}

static clt_trainer_options quiet_options(void)
{
    clt_trainer_options o = clt_trainer_default_options();
    o.batch_size = 32;
    o.log = NULL;
    o.progress = 0;
    return o;
}

/* A metrics write that fails (CLT_FAULT=write at the first write event of
 * the epoch's files) fails the fit naming the metrics file and saying the
 * checkpoint was saved all the same; the plot is written, and the
 * checkpoint is there, whole, at epoch 1. */
START_TEST(test_checkpoint_kept_when_metrics_fail)
{
    char save[512], metrics[512], plot[512];
    at(save, sizeof save, "a.st");
    at(metrics, sizeof metrics, "m.csv");
    at(plot, sizeof plot, "p.svg");
    clt_dataset train = clt_test_make_dataset(64, 1), val = clt_test_make_dataset(16, 2);
    clt_trainer_options o = quiet_options();
    /* The write events of a fit without files (none, unless a cache writes),
     * counted on a second fit (nothing left to compile). */
    int64_t events = 0;
    for (int i = 0; i < 2; i++) {
        clt_model *m = small_model();
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        ck_assert_ok(clt_trainer_fit(m, &train, &val, &o, NULL));
        events = clt__fault_count(CLT__FAULT_WRITE);
        clt_model_free(m);
    }
    o.save_path = save;
    o.metrics_path = metrics;
    o.plot_path = plot;
    char spec[64];
    snprintf(spec, sizeof spec, "write:%lld", (long long)events + 1);
    clt_model *m = small_model();
    ck_assert_int_eq(clt__fault_set(spec), 0);
    clt_trainer_result r;
    clt_status s = clt_trainer_fit(m, &train, &val, &o, &r);
    ck_assert_int_eq(clt__fault_set(NULL), 0);
    ck_assert_msg(s == CLT_ERR_IO, "%s: %s", clt_status_string(s), clt_last_error());
    ck_assert_msg(strstr(clt_last_error(), metrics) && strstr(clt_last_error(), save) &&
                      strstr(clt_last_error(), "saved"), "%s", clt_last_error());
    ck_assert_msg(!exists(metrics), "%s was written", metrics);
    ck_assert_msg(exists(plot), "%s was not written", plot);
    clt_model_free(m);
    /* The checkpoint is epoch 1's, and loads. */
    m = small_model();
    clt_checkpoint_info info = {0};
    ck_assert_ok(clt_checkpoint_load(save, m, NULL, &info));
    ck_assert_int_eq(info.epoch, 1);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* clt train: a metrics file that cannot be written is an exit status of 1
 * and a message naming it. */
START_TEST(test_cli_metrics_failure_is_reported)
{
    int rc = run("CLT_FAULT=write:1+ " TRAIN " --metrics %s/m.csv", clt_test_clt_path(), dir, dir);
    ck_assert_msg(rc == 1 && strstr(out, "m.csv") && strstr(out, "cannot write"), "exit %d:\n%s", rc, out);
}
END_TEST

/* A name whose temporary name (NAME.tmp-<16 hex>) exceeds NAME_MAX is
 * refused up front, for every output option and for the library's paths;
 * the longest name that fits is written. */
START_TEST(test_long_names_refused_up_front)
{
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    long fits = name_max - (long)strlen(".tmp-0123456789abcdef");
    char names[3][PATH_MAX];
    const long lengths[] = {fits + 1, name_max - 3, fits};
    for (int i = 0; i < 3; i++) {
        char base[NAME_MAX + 1];
        memset(base, 'n', (size_t)lengths[i]);
        base[lengths[i]] = '\0';
        at(names[i], sizeof names[i], base);
    }
    const char *opts[] = {"--save", "--metrics", "--plot", "--trace", "--memory-plot"};
    char want[64];
    snprintf(want, sizeof want, "use a name of at most %ld bytes", fits);
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++)
        for (int i = 0; i < 2; i++) {
            int rc = run(TRAIN " %s %s", clt_test_clt_path(), dir, opts[o], names[i]);
            ck_assert_msg(rc == 1 && strstr(out, names[i]) && strstr(out, want) && !strstr(out, "epoch 1"),
                          "%s of %ld bytes: exit %d:\n%s", opts[o], lengths[i], rc, out);
            ck_assert(!exists(names[i]));
        }
    int rc = run(TRAIN " --save %s", clt_test_clt_path(), dir, names[2]);
    ck_assert_msg(rc == 0 && exists(names[2]), "--save of %ld bytes: exit %d:\n%s", fits, rc, out);

    /* The library's check, before any work. */
    clt_dataset train = clt_test_make_dataset(32, 1);
    clt_model *m = small_model();
    clt_trainer_options o = quiet_options();
    o.save_path = names[0];
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), want));
    ck_assert(!exists(names[0]));
    const clt_file_use use = {"the file", names[1], CLT_FILE_OUTPUT};
    ck_assert_status(clt_file_check_uses(&use, 1), CLT_ERR_IO);
    ck_assert_status(clt_file_write(names[0], "x", 1), CLT_ERR_IO);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Two outputs naming one file (the same string, ./x, d/../x, a hard link, a
 * path through a directory link, a file not there yet) and an output that
 * is the --resume file are refused before training, and the file is left
 * as it was; --save may be the --resume file. */
START_TEST(test_same_file_refused)
{
    char x[512], sub[512], dlink[512], hard[512];
    at(x, sizeof x, "x.st");
    at(sub, sizeof sub, "sub");
    at(dlink, sizeof dlink, "dirlink");
    at(hard, sizeof hard, "hard.st");
    put(x, "precious\n");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(symlink(dir, dlink), 0);
    ck_assert_int_eq(link(x, hard), 0);
    char cases[8][1400];
    int n = 0;
    snprintf(cases[n++], sizeof cases[0], "--save %s --trace %s", x, x);
    snprintf(cases[n++], sizeof cases[0], "--save %s --trace %s/./x.st", x, dir);
    snprintf(cases[n++], sizeof cases[0], "--save %s --metrics %s/sub/../x.st", x, dir);
    snprintf(cases[n++], sizeof cases[0], "--save %s --plot %s", x, hard);
    snprintf(cases[n++], sizeof cases[0], "--save %s --memory-plot %s/x.st", x, dlink);
    snprintf(cases[n++], sizeof cases[0], "--metrics %s/new.csv --plot %s/sub/../new.csv", dir, dir);
    snprintf(cases[n++], sizeof cases[0], "--resume %s --metrics %s/./x.st --save %s/c.st", x, dir, dir);
    for (int i = 0; i < n; i++) {
        int rc = run(TRAIN " %s", clt_test_clt_path(), dir, cases[i]);
        ck_assert_msg(rc == 2 && (strstr(out, "name the same file") || strstr(out, "replace that input")) &&
                          !strstr(out, "epoch 1"),
                      "%s: exit %d:\n%s", cases[i], rc, out);
        char *text = clt_test_read_file(x);
        ck_assert_msg(strcmp(text, "precious\n") == 0, "%s: x.st changed", cases[i]);
        free(text);
    }
    char fresh[512];
    at(fresh, sizeof fresh, "new.csv");
    ck_assert(!exists(fresh));
    /* Spelled relative to the working directory. */
    int rc = run("cd %s && " TRAIN " --save x.st --trace ./x.st", dir, clt_test_clt_path(), dir);
    ck_assert_msg(rc == 2 && strstr(out, "name the same file"), "exit %d:\n%s", rc, out);

    /* The library: two of the trainer's paths, and one and the running trace. */
    clt_dataset train = clt_test_make_dataset(32, 1);
    clt_model *m = small_model();
    clt_trainer_options o = quiet_options();
    o.max_steps = 1;
    char spelled[600];
    snprintf(spelled, sizeof spelled, "%s/sub/../x.st", dir);
    o.save_path = x;
    o.metrics_path = spelled;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "name the same file"));
    char trace[512], trace_spelled[600], c[512];
    at(trace, sizeof trace, "t.json");
    snprintf(trace_spelled, sizeof trace_spelled, "%s/./t.json", dir);
    at(c, sizeof c, "c.st");
    o.metrics_path = NULL;
    o.save_path = trace_spelled;
    ck_assert_ok(clt_trace_start(trace));
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "running trace") && strstr(clt_last_error(), trace_spelled), "%s",
                  clt_last_error());
    ck_assert_ok(clt_trace_stop());
    /* A checkpoint saved over the one resumed is no clash. */
    o.save_path = c;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, NULL));
    o.resume_path = c;
    o.max_steps = 2;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, NULL));
    o.metrics_path = c;
    o.save_path = NULL;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "replace that input"));
    clt_model_free(m);
    clt_dataset_free(&train);

    /* The public check: inputs may share a file, an unknown role is refused. */
    const clt_file_use inputs[] = {{"a", x, CLT_FILE_INPUT}, {"b", hard, CLT_FILE_INPUT}, {"c", NULL, CLT_FILE_OUTPUT}};
    ck_assert_ok(clt_file_check_uses(inputs, 3));
    const clt_file_use bad = {"a", x, (clt_file_role)7};
    ck_assert_status(clt_file_check_uses(&bad, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_file_check_uses(NULL, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_file_check_uses(NULL, 0));
    ck_assert_int_eq(clt__file_same(x, hard), 1);
    ck_assert_int_eq(clt__file_same(x, fresh), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Stale temporaries: writing TARGET removes TARGET.tmp-<16 lowercase hex>
 * regular files of this user that no live writer holds, and nothing else:
 * not other patterns, not another target's, not a link (nor what it points
 * to), a directory or a FIFO of that name, not a live writer's file, not
 * (as root, who can make one) another user's. */
START_TEST(test_stale_temporaries_removed)
{
    char target[512];
    at(target, sizeof target, "out.st");
    const char *stale[] = {"out.st.tmp-0123456789abcdef", "out.st.tmp-fedcba9876543210"};
    const char *kept[] = {"out.st.tmp-0123456789ABCDEF", "out.st.tmp-0123456789abcde", "out.st.tmp-0123456789abcdef0",
                          "other.st.tmp-0123456789abcdef", "xout.st.tmp-0123456789abcdef", "out.st.tmp-012345678-abcdef",
                          "out.st.tmp.0123456789abcdef"};
    char path[800], victim[512];
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, stale[i]);
        put(path, "left by kill -9\n");
    }
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, kept[i]);
        put(path, "not ours\n");
    }
    at(victim, sizeof victim, "victim");
    put(victim, "precious\n");
    snprintf(path, sizeof path, "%s/out.st.tmp-1111111111111111", dir);
    ck_assert_int_eq(symlink(victim, path), 0);
    snprintf(path, sizeof path, "%s/out.st.tmp-2222222222222222", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/out.st.tmp-3333333333333333", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    int as_root = geteuid() == 0;
    if (as_root) {
        snprintf(path, sizeof path, "%s/out.st.tmp-4444444444444444", dir);
        put(path, "another user's\n");
        ck_assert_int_eq(chown(path, 12345, 12345), 0);
    }
    /* A live writer's temporary file. */
    clt__afile live;
    ck_assert_ok(clt__afile_open(&live, target));
    char live_tmp[800];
    snprintf(live_tmp, sizeof live_tmp, "%s", live.tmp_path);

    ck_assert_ok(clt_file_write(target, "new\n", 4));
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, stale[i]);
        ck_assert_msg(!exists(path), "%s was left", path);
    }
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, kept[i]);
        ck_assert_msg(exists(path), "%s was removed", path);
    }
    const char *others[] = {"out.st.tmp-1111111111111111", "out.st.tmp-2222222222222222", "out.st.tmp-3333333333333333",
                            as_root ? "out.st.tmp-4444444444444444" : NULL};
    for (size_t i = 0; i < 4 && others[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, others[i]);
        ck_assert_msg(exists(path), "%s was removed", path);
    }
    char *text = clt_test_read_file(victim);
    ck_assert_str_eq(text, "precious\n");
    free(text);
    ck_assert_msg(exists(live_tmp), "the live writer's %s was removed", live_tmp);
    ck_assert_ok(clt__afile_write(&live, "live\n", 5));
    ck_assert_ok(clt__afile_commit(&live));
    text = clt_test_read_file(target);
    ck_assert_str_eq(text, "live\n");
    free(text);

    /* clt train --save does the same, through the checkpoint writer. */
    snprintf(path, sizeof path, "%s/c.st.tmp-abcdefabcdefabcd", dir);
    put(path, "left by kill -9\n");
    int rc = run(TRAIN " --save %s/c.st", clt_test_clt_path(), dir, dir);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(!exists(path), "%s was left", path);
}
END_TEST

/* A stop asked for before the first step (a signal during the warm-up)
 * ends the fit with nothing saved, and it says so. */
START_TEST(test_stop_before_any_step_saves_nothing)
{
    char save[512];
    at(save, sizeof save, "s.st");
    clt_dataset train = clt_test_make_dataset(64, 1);
    clt_model *m = small_model();
    clt_trainer_options o = quiet_options();
    o.save_path = save;
    clt_trainer_result r;
    clt_trainer_request_stop();
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_eq(r.steps, 0);
    ck_assert_int_eq(r.saves, 0);
    ck_assert(!exists(save));
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_int_eq(r.stopped, 0);
    ck_assert_int_eq(r.saves, 1);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* clt train: SIGINT as soon as the training loop catches it (its SigCgt
 * bit), which is before the warm-up ends: "saved FILE" is printed exactly
 * when FILE was written; at least one of the tries lands before any step
 * and says nothing was saved. A try whose run had ended (no "interrupted")
 * tested nothing and is repeated. */
START_TEST(test_cli_signal_in_warmup)
{
    char save[512], log[512];
    at(save, sizeof save, "w.st");
    at(log, sizeof log, "w.log");
    int early = 0;
    for (int attempt = 0; attempt < 5 && !early; attempt++) {
        run("rm -f %s; nice -n 19 %s train --data %s --epochs 30 --batch-size 32 --hiddens 8 --blocks 1 "
            "--val-limit 8 --save %s > %s 2>&1 & pid=$!; "
            "for i in $(seq 3000); do m=$(awk '/^SigCgt/ {print $2}' /proc/$pid/status 2>/dev/null); "
            "[ -n \"$m\" ] && [ $((0x$m & 2)) -ne 0 ] && break; sleep 0.01; done; "
            "kill -INT $pid; wait $pid; echo \"exit $?\"; cat %s",
            save, clt_test_clt_path(), dir, save, log, log);
        int code = -1;
        const char *e = strstr(out, "exit ");
        ck_assert_msg(e && sscanf(e, "exit %d", &code) == 1, "%s", out);
        if (!strstr(out, "interrupted") && (code == 0 || strstr(out, "epoch 30/30"))) continue;
        ck_assert_msg(code == 130, "exit %d:\n%s", code, out);
        char said[600];
        snprintf(said, sizeof said, "saved %s", save);
        int claims = strstr(out, said) != NULL;
        ck_assert_msg(claims == exists(save), "says saved: %d, %s exists: %d:\n%s", claims, save, exists(save), out);
        early = strstr(out, "interrupted before any step; nothing saved") != NULL;
        ck_assert_msg(early || claims, "neither saved nor said why not:\n%s", out);
    }
    ck_assert_msg(early, "no try was interrupted before its first step:\n%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outputs");
    TCase *tc = clt_test_tcase("outputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_checkpoint_kept_when_metrics_fail);
    tcase_add_test(tc, test_cli_metrics_failure_is_reported);
    tcase_add_test(tc, test_long_names_refused_up_front);
    tcase_add_test(tc, test_same_file_refused);
    tcase_add_test(tc, test_stale_temporaries_removed);
    tcase_add_test(tc, test_stop_before_any_step_saves_nothing);
    tcase_add_test(tc, test_cli_signal_in_warmup);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
