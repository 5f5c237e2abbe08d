/* The one safe writer (src/core/file.c) and the files written through it:
 * a FIFO, device, directory or link at the target is refused and left as it
 * is; temporary names are random and never followed; an existing file's
 * mode is kept; a failed write (CLT_FAULT=write) or a SIGINT, SIGTERM or
 * SIGHUP during a save leaves the old or the new complete file and no
 * temporary file; the
 * trainer, `clt train --trace`, CLT_TRACE and `clt timeline` refuse a bad
 * output path before doing any work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/file.h"
#include "support.h"

static char dir[256];
static char out[1 << 16];

#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static void make_dir(void) { clt_test_make_temp_dir(dir, sizeof dir, "files"); }

static void remove_dir(void) { clt_test_remove_dir(dir); }

static void at(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The file's whole text (up to 4 KiB) into buf. */
static const char *get(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Names in dir other than . and .. and those listed (NULL-terminated). */
static int other_entries(const char *const *keep)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        int kept = 0;
        for (const char *const *k = keep; *k; k++) kept |= strcmp(*k, e->d_name) == 0;
        if (!kept) {
            fprintf(stderr, "unexpected entry %s/%s\n", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    return st.st_mode;
}

/* Each kind of non-regular target is refused by name and stays what it was. */
START_TEST(test_non_regular_targets_refused)
{
    char fifo[512], link[512], victim[512], sub[512], dev[512];
    at(fifo, sizeof fifo, "fifo");
    at(link, sizeof link, "link");
    at(victim, sizeof victim, "victim");
    at(sub, sizeof sub, "sub");
    at(dev, sizeof dev, "null");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    put(victim, "precious\n");
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    /* A character device of our own (the null device's numbers), never the
     * system's /dev/null; only root may make one. */
    int have_dev = mknod(dev, S_IFCHR | 0600, makedev(1, 3)) == 0;
    if (!have_dev) fprintf(stderr, "test_non_regular_targets_refused: not root, no character device made\n");

    struct {
        const char *path, *kind;
    } cases[] = {{fifo, "a FIFO"}, {link, "a symbolic link"}, {sub, "a directory"}, {dev, "a character device"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].path == dev && !have_dev) continue;
        ck_assert_status(clt__file_write(cases[i].path, "new\n", 4), CLT_ERR_IO);
        ck_assert_msg(strstr(clt_last_error(), cases[i].path) && strstr(clt_last_error(), cases[i].kind),
                      "message '%s' names neither %s nor %s", clt_last_error(), cases[i].path, cases[i].kind);
        ck_assert_status(clt__file_check_target(cases[i].path), CLT_ERR_IO);
    }
    ck_assert(S_ISFIFO(mode_of(fifo)));
    ck_assert(S_ISLNK(mode_of(link)));
    ck_assert(S_ISDIR(mode_of(sub)));
    if (have_dev) ck_assert(S_ISCHR(mode_of(dev)));
    char buf[4096];
    ck_assert_str_eq(get(victim, buf, sizeof buf), "precious\n");
    const char *keep[] = {"fifo", "link", "victim", "sub", "null", NULL};
    ck_assert_int_eq(other_entries(keep), 0);

    /* A missing directory and a file used as one are named too. */
    char missing[600], through[600];
    snprintf(missing, sizeof missing, "%s/no/such/out.csv", dir);
    snprintf(through, sizeof through, "%s/out.csv", victim);
    ck_assert_status(clt__file_check_target(missing), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), missing));
    ck_assert_status(clt__file_check_target(through), CLT_ERR_IO);
    ck_assert_status(clt__file_write(missing, "x", 1), CLT_ERR_IO);
    ck_assert_status(clt__file_check_target(""), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(rmdir(sub), 0);
}
END_TEST

/* The public face of the writer (clt_file_write, what `clt timeline` uses):
 * the same refusals, a complete file, and a status for NULL arguments. */
START_TEST(test_public_file_write)
{
    char target[512], link[512], victim[512], buf[4096];
    at(target, sizeof target, "out.svg");
    at(link, sizeof link, "link");
    at(victim, sizeof victim, "victim");
    ck_assert_ok(clt_file_write(target, "<svg/>\n", 7));
    ck_assert_str_eq(get(target, buf, sizeof buf), "<svg/>\n");
    ck_assert_ok(clt_file_write(target, NULL, 0));
    ck_assert_str_eq(get(target, buf, sizeof buf), "");
    put(victim, "precious\n");
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_status(clt_file_write(link, "new\n", 4), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), link));
    ck_assert(S_ISLNK(mode_of(link)));
    ck_assert_str_eq(get(victim, buf, sizeof buf), "precious\n");
    ck_assert_status(clt_file_write(target, NULL, 4), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), target));
    ck_assert_status(clt_file_write(NULL, "x", 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_file_write("", "x", 1), CLT_ERR_INVALID_ARGUMENT);
    const char *keep[] = {"out.svg", "link", "victim", NULL};
    ck_assert_int_eq(other_entries(keep), 0);
}
END_TEST

static int is_hex16(const char *s)
{
    if (strlen(s) != 16) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* The temporary name of an open file: TARGET.tmp-<16 hex>, a new regular
 * file, different for each open; links planted at the old predictable
 * names (OUT.<pid>.tmp, OUT.tmp.<pid>.0) are never written through. */
START_TEST(test_temp_names_random_and_exclusive)
{
    char target[512], victim[512], planted[2][600];
    at(target, sizeof target, "out.json");
    at(victim, sizeof victim, "victim");
    put(victim, "precious\n");
    snprintf(planted[0], sizeof planted[0], "%s.%ld.tmp", target, (long)getpid());
    snprintf(planted[1], sizeof planted[1], "%s.tmp.%ld.0", target, (long)getpid());
    for (int i = 0; i < 2; i++) ck_assert_int_eq(symlink(victim, planted[i]), 0);

    clt__afile a, b;
    ck_assert_ok(clt__afile_open(&a, target));
    ck_assert_ok(clt__afile_open(&b, target));
    size_t plen = strlen(target) + strlen(".tmp-");
    ck_assert_int_eq(strncmp(a.tmp_path, target, strlen(target)), 0);
    ck_assert_int_eq(strncmp(a.tmp_path + strlen(target), ".tmp-", 5), 0);
    ck_assert_msg(is_hex16(a.tmp_path + plen) && is_hex16(b.tmp_path + plen), "temp names %s, %s", a.tmp_path,
                  b.tmp_path);
    ck_assert_str_ne(a.tmp_path, b.tmp_path);
    ck_assert(S_ISREG(mode_of(a.tmp_path)));
    ck_assert_ok(clt__afile_write(&a, "{}\n", 3));
    ck_assert_ok(clt__afile_commit(&a));
    char tmp_b[600];
    snprintf(tmp_b, sizeof tmp_b, "%s", b.tmp_path);
    clt__afile_abort(&b);
    struct stat st;
    ck_assert_int_ne(lstat(tmp_b, &st), 0);

    char buf[4096];
    ck_assert_str_eq(get(target, buf, sizeof buf), "{}\n");
    ck_assert_str_eq(get(victim, buf, sizeof buf), "precious\n");
    for (int i = 0; i < 2; i++) ck_assert(S_ISLNK(mode_of(planted[i])));
    const char *keep[] = {"out.json", "victim", strrchr(planted[0], '/') + 1, strrchr(planted[1], '/') + 1, NULL};
    ck_assert_int_eq(other_entries(keep), 0);
}
END_TEST

/* Re-saving keeps the old file's mode, for a checkpoint and for a CSV; a new
 * file gets 0666 less the umask. */
START_TEST(test_mode_kept)
{
    char ckpt[512], csv[512], fresh[512];
    at(ckpt, sizeof ckpt, "model.safetensors");
    at(csv, sizeof csv, "m.csv");
    at(fresh, sizeof fresh, "fresh");
    clt_tensor *t;
    int64_t shape[] = {3};
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    const char *names[] = {"w"};
    ck_assert_ok(clt_safetensors_save(ckpt, 1, names, &t, 0, NULL, NULL));
    ck_assert_int_eq(chmod(ckpt, 0600), 0);
    ck_assert_ok(clt_safetensors_save(ckpt, 1, names, &t, 0, NULL, NULL));
    ck_assert_int_eq(mode_of(ckpt) & 07777, 0600);
    ck_assert_int_eq(chmod(ckpt, 0640), 0);
    ck_assert_ok(clt_safetensors_save(ckpt, 1, names, &t, 0, NULL, NULL));
    ck_assert_int_eq(mode_of(ckpt) & 07777, 0640);
    clt_tensor_release(t);

    put(csv, "old\n");
    ck_assert_int_eq(chmod(csv, 0604), 0);
    ck_assert_ok(clt__file_write(csv, "new\n", 4));
    ck_assert_int_eq(mode_of(csv) & 07777, 0604);

    mode_t mask = umask(022);
    ck_assert_ok(clt__file_write(fresh, "x", 1));
    umask(mask);
    ck_assert_int_eq(mode_of(fresh) & 07777, 0644);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* CLT_FAULT=write at every write event of a save in turn (the data writes
 * and the final flush): each fails with CLT_ERR_IO, the old file is intact
 * and no temporary file remains. */
START_TEST(test_write_fault_keeps_old_file)
{
    char target[512];
    at(target, sizeof target, "model.safetensors");
    clt_tensor *t;
    int64_t shape[] = {5};
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    const char *names[] = {"w"};
    put(target, "the old checkpoint\n");
    ck_assert_int_eq(clt__fault_set("write:999999"), 0);
    ck_assert_ok(clt_safetensors_save(target, 1, names, &t, 0, NULL, NULL));
    int64_t events = clt__fault_count(CLT__FAULT_WRITE);
    ck_assert_int_ge(events, 2);
    for (int64_t k = 1; k <= events; k++) {
        put(target, "the old checkpoint\n");
        char spec[32];
        snprintf(spec, sizeof spec, "write:%lld", (long long)k);
        ck_assert_int_eq(clt__fault_set(spec), 0);
        ck_assert_status(clt_safetensors_save(target, 1, names, &t, 0, NULL, NULL), CLT_ERR_IO);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), target));
        char buf[4096];
        ck_assert_str_eq(get(target, buf, sizeof buf), "the old checkpoint\n");
        const char *keep[] = {"model.safetensors", NULL};
        ck_assert_int_eq(other_entries(keep), 0);
    }
    clt__fault_set(NULL);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

#define CHUNK 65536
#define CHUNKS 40

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}

/* The child of the test below: a thread that does not block SIGINT (the
 * signal may be delivered to it), then a save that tells the parent when it
 * has started and, after `hold` chunks, waits for the parent's go (which
 * comes after the signals). Exits 0 only if the process outlived the save. */
static void held_save_child(const char *target, int hold, int ready_fd, int go_fd)
{
    pthread_t th;
    if (pthread_create(&th, NULL, idle_thread, NULL) != 0) _exit(3);
    static char chunk[CHUNK];
    memset(chunk, 'n', sizeof chunk);
    clt__afile f;
    if (clt__afile_open(&f, target) != CLT_OK) _exit(4);
    char c;
    for (int i = 0; i < CHUNKS; i++) {
        if (i == hold && (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 1)) _exit(5);
        if (clt__afile_write(&f, chunk, sizeof chunk) != CLT_OK) _exit(6);
    }
    if (clt__afile_commit(&f) != CLT_OK) _exit(7);
    _exit(0);
}

/* SIGINT (twice, as a second Ctrl-C) at several moments of a save (after 0,
 * 10, 20 and all but one of its chunks), and SIGTERM and SIGHUP in the
 * middle: the process ends by that signal only after the new file is
 * complete, and no temporary file remains. */
START_TEST(test_sigint_during_save)
{
    char target[512];
    at(target, sizeof target, "big.bin");
    const int holds[] = {0, 10, 20, CHUNKS - 1, 10, 10};
    const int sigs[] = {SIGINT, SIGINT, SIGINT, SIGINT, SIGTERM, SIGHUP};
    for (size_t h = 0; h < sizeof holds / sizeof holds[0]; h++) {
        put(target, "old\n");
        int ready[2], go[2];
        ck_assert_int_eq(pipe(ready), 0);
        ck_assert_int_eq(pipe(go), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            signal(sigs[h], SIG_DFL);
            held_save_child(target, holds[h], ready[1], go[0]);
        }
        close(ready[1]);
        close(go[0]);
        char c;
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        kill(pid, sigs[h]);
        kill(pid, sigs[h]);
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        close(ready[0]);
        close(go[1]);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[h], "signal %d after %d chunks: status %#x", sigs[h],
                      holds[h], st);
        struct stat fs;
        ck_assert_int_eq(stat(target, &fs), 0);
        ck_assert_msg(fs.st_size == (off_t)CHUNK * CHUNKS, "after %d chunks: %lld bytes", holds[h],
                      (long long)fs.st_size);
        const char *keep[] = {"big.bin", NULL};
        ck_assert_int_eq(other_entries(keep), 0);
    }
}
END_TEST

/* With no save running, the handlers and the thread's mask are as before. */
START_TEST(test_signals_restored)
{
    char target[512];
    at(target, sizeof target, "x");
    struct sigaction before, after;
    sigaction(SIGINT, NULL, &before);
    sigset_t mask_before, mask_after;
    pthread_sigmask(SIG_SETMASK, NULL, &mask_before);
    ck_assert_ok(clt__file_write(target, "1", 1));
    char fifo[512];
    at(fifo, sizeof fifo, "fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_status(clt__file_write(fifo, "1", 1), CLT_ERR_IO);
    sigaction(SIGINT, NULL, &after);
    pthread_sigmask(SIG_SETMASK, NULL, &mask_after);
    ck_assert(before.sa_handler == after.sa_handler);
    ck_assert_int_eq(sigismember(&mask_after, SIGINT), sigismember(&mask_before, SIGINT));
    ck_assert_int_eq(sigismember(&mask_after, SIGTERM), sigismember(&mask_before, SIGTERM));
    ck_assert_int_eq(sigismember(&mask_after, SIGHUP), sigismember(&mask_before, SIGHUP));
}
END_TEST

/* `clt train` refuses --metrics, --plot, --save or --trace at a FIFO or a
 * link before training (nothing else is written), and the node is intact. */
START_TEST(test_train_refuses_bad_outputs)
{
    clt_test_write_idx_split(dir, "train", 64, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
    char fifo[512], victim[512], link[512];
    at(fifo, sizeof fifo, "fifo");
    at(victim, sizeof victim, "victim");
    at(link, sizeof link, "link");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    put(victim, "precious\n");
    ck_assert_int_eq(symlink(victim, link), 0);
    const char *opts[] = {"--metrics", "--plot", "--save", "--trace"};
    const char *targets[] = {fifo, link};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        for (int j = 0; j < 2; j++) {
            const char *other = strcmp(opts[i], "--save") == 0 ? "--metrics" : "--save";
            int rc = run("%s train --data %s --steps 2 --batch-size 16 --hiddens 8 --blocks 1 %s %s %s %s/other",
                         clt_test_clt_path(), dir, opts[i], targets[j], other, dir);
            ck_assert_msg(rc >= 1 && rc <= 125, "%s %s: exit %d:\n%s", opts[i], targets[j], rc, out);
            ck_assert_msg(strstr(out, targets[j]), "%s %s: output does not name it:\n%s", opts[i], targets[j], out);
            ck_assert_msg(!strstr(out, "epoch 1"), "%s %s: trained anyway:\n%s", opts[i], targets[j], out);
            char other_path[600];
            snprintf(other_path, sizeof other_path, "%s/other", dir);
            struct stat st;
            ck_assert_msg(lstat(other_path, &st) != 0, "%s %s: %s was written", opts[i], targets[j], other_path);
        }
    ck_assert(S_ISFIFO(mode_of(fifo)));
    ck_assert(S_ISLNK(mode_of(link)));
    char buf[4096];
    ck_assert_str_eq(get(victim, buf, sizeof buf), "precious\n");

    /* The library's own check, for a program that calls the trainer. */
    clt_model *m;
    int64_t hiddens[] = {8};
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 784, 1, hiddens, 10, 1));
    clt_dataset ds = clt_test_make_dataset(16, 1);
    clt_trainer_options o = clt_trainer_default_options();
    o.metrics_path = fifo;
    o.log = NULL;
    o.progress = 0;
    ck_assert_status(clt_trainer_fit(m, &ds, NULL, &o, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), fifo));
    ck_assert(S_ISFIFO(mode_of(fifo)));
    clt_dataset_free(&ds);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* CLT_TRACE that cannot be written fails the run at its first device use,
 * naming the variable and the path; a FIFO there is left as it is. */
START_TEST(test_unwritable_clt_trace_fails)
{
    clt_test_write_idx_split(dir, "train", 64, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
    char fifo[512];
    at(fifo, sizeof fifo, "fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *bad[] = {"/nonexistent-clt-dir/trace.json", fifo};
    for (int i = 0; i < 2; i++) {
        int rc = run("CLT_TRACE='%s' %s train --data %s --steps 1 --batch-size 16 --hiddens 8 --blocks 1", bad[i],
                     clt_test_clt_path(), dir);
        ck_assert_msg(rc >= 1 && rc <= 125, "CLT_TRACE=%s: exit %d:\n%s", bad[i], rc, out);
        ck_assert_msg(strstr(out, "CLT_TRACE") && strstr(out, bad[i]), "CLT_TRACE=%s: message:\n%s", bad[i], out);
    }
    ck_assert(S_ISFIFO(mode_of(fifo)));
    /* A good one still records. */
    char trace[512];
    at(trace, sizeof trace, "t.json");
    int rc = run("CLT_TRACE='%s' %s train --data %s --steps 1 --batch-size 16 --hiddens 8 --blocks 1", trace,
                 clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert(S_ISREG(mode_of(trace)));

    /* clt timeline draws it, but not onto a FIFO or through a link. */
    char svg[512], link[512], victim[512];
    at(svg, sizeof svg, "t.svg");
    at(link, sizeof link, "link.svg");
    at(victim, sizeof victim, "victim");
    put(victim, "precious\n");
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_eq(run("%s timeline %s %s", clt_test_clt_path(), trace, svg), 0);
    ck_assert(S_ISREG(mode_of(svg)));
    const char *targets[] = {fifo, link};
    for (int i = 0; i < 2; i++) {
        rc = run("%s timeline %s %s", clt_test_clt_path(), trace, targets[i]);
        ck_assert_msg(rc == 1 && strstr(out, targets[i]), "timeline to %s: exit %d:\n%s", targets[i], rc, out);
    }
    ck_assert(S_ISFIFO(mode_of(fifo)));
    ck_assert(S_ISLNK(mode_of(link)));
    char buf[4096];
    ck_assert_str_eq(get(victim, buf, sizeof buf), "precious\n");
}
END_TEST

/* The kernel binary cache and the tuning cache: FIFOs planted at their file
 * names do not block a run (the readers open only regular files); each is
 * reported, removed and, where the run writes that entry (the tuning cache
 * under CLT_TUNE=1), replaced by a regular file. */
START_TEST(test_cache_files_never_block_or_get_replaced)
{
    clt_test_write_idx_split(dir, "train", 64, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
    char cache[512];
    at(cache, sizeof cache, "cache");
    /* On pocl only clt warmup writes program binaries (docs/performance.md). */
    int rc = run("CLT_CACHE_DIR='%s' timeout 300 %s warmup --hiddens 8 --blocks 1 --batch-size 16", cache,
                 clt_test_clt_path());
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *cmd = "CLT_CACHE_DIR='%s' CLT_TUNE=1 timeout 300 %s train --data %s --steps 1 --batch-size 16 "
                      "--hiddens 8 --blocks 1 --val-limit 16";
    rc = run(cmd, cache, clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    DIR *d = opendir(cache);
    ck_assert_ptr_nonnull(d);
    int bins = 0, tunes = 0;
    static char names[64][800];
    struct dirent *e;
    while ((e = readdir(d)) && bins + tunes < 64) {
        int bin = strstr(e->d_name, ".bin") != NULL, tune = strncmp(e->d_name, "tune-", 5) == 0;
        if (!bin && !tune) continue;
        snprintf(names[bins + tunes], sizeof names[0], "%s/%s", cache, e->d_name);
        bins += bin;
        tunes += tune;
    }
    closedir(d);
    /* GPU-class devices are not tuned (CLBlast runs their products). */
    const char *cls = getenv("CLT_DEVICE_CLASS");
    int tuned = !(cls && strcasecmp(cls, "gpu") == 0);
    ck_assert_msg(bins > 0 && (tunes > 0 || !tuned), "%d kernel binaries, %d tuning files in %s", bins, tunes, cache);
    for (int i = 0; i < bins + tunes; i++) {
        ck_assert_int_eq(unlink(names[i]), 0);
        ck_assert_int_eq(mkfifo(names[i], 0600), 0);
    }
    rc = run(cmd, cache, clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0, "with FIFOs in the cache: exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "clt: warning: ignoring the") && strstr(out, "it is a FIFO"),
                  "no warning about the FIFOs:\n%s", out);
    for (int i = 0; i < bins + tunes; i++) {
        struct stat st;
        int there = lstat(names[i], &st) == 0;
        ck_assert_msg(!there || S_ISREG(st.st_mode), "%s is still there and not a regular file", names[i]);
        /* The tuning cache is written again (CLT_TUNE=1 tunes the shapes anew). */
        if (strstr(names[i], "/tune-")) ck_assert_msg(there, "%s was not written again", names[i]);
    }
    for (int i = 0; i < bins + tunes; i++) unlink(names[i]);
    d = opendir(cache);
    while ((e = readdir(d))) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
        if (e->d_name[0] != '.') unlink(path);
    }
    closedir(d);
    ck_assert_int_eq(rmdir(cache), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("files");
    TCase *tc = clt_test_tcase("writer");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_add_test(tc, test_non_regular_targets_refused);
    tcase_add_test(tc, test_public_file_write);
    tcase_add_test(tc, test_temp_names_random_and_exclusive);
    tcase_add_test(tc, test_mode_kept);
    tcase_add_test(tc, test_write_fault_keeps_old_file);
    tcase_add_test(tc, test_sigint_during_save);
    tcase_add_test(tc, test_signals_restored);
    tcase_add_test(tc, test_train_refuses_bad_outputs);
    tcase_add_test(tc, test_unwritable_clt_trace_fails);
    tcase_add_test(tc, test_cache_files_never_block_or_get_replaced);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
