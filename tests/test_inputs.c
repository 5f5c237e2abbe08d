/* Every input file is opened without blocking and must be a regular file
 * (src/core/input.c): a FIFO, a directory or a character device at a data
 * file's or a checkpoint's path is refused at once, by name and by kind,
 * from the library's readers (clt_idx_read, clt_dataset_load_idx,
 * clt_fashion_mnist_load, clt_safetensors_open, clt_checkpoint_load) and
 * from `clt train` and `clt eval`; the whole-file readers (clt_file_read,
 * clt_dataset_load's CSV and .npy) and `clt predict --input` and `clt
 * timeline` likewise. Each call runs under an alarm (the
 * library's) or `timeout` (the tool's), so a reader that blocks fails the
 * test instead of hanging it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/input.h"
#include "support.h"

static char dir[256];
static char out[1 << 16];

#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

/* Seconds any one open may take before the test counts it as blocked. */
enum { LIMIT_S = 60 };

static void setup(void) { clt_test_make_temp_dir(dir, sizeof dir, "inputs"); }
static void teardown(void) { clt_test_remove_dir(dir); }

/* The three kinds of non-regular file every reader must refuse. */
typedef struct {
    char path[512];
    const char *kind; /* as the message names it */
} odd_file;

static void make_odd(odd_file odd[3])
{
    snprintf(odd[0].path, sizeof odd[0].path, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(odd[0].path, 0600), 0);
    odd[0].kind = "is a FIFO, not a regular file";
    snprintf(odd[1].path, sizeof odd[1].path, "%s/sub", dir);
    ck_assert_int_eq(mkdir(odd[1].path, 0700), 0);
    odd[1].kind = "is a directory, not a regular file";
    snprintf(odd[2].path, sizeof odd[2].path, "/dev/null");
    odd[2].kind = "is a character device, not a regular file";
}

/* CLT_ERR_IO whose message is "PATH KIND". */
static void expect_refused(clt_status s, const odd_file *o, const char *call)
{
    char want[2048];
    snprintf(want, sizeof want, "%s %s", o->path, o->kind);
    ck_assert_msg(s == CLT_ERR_IO, "%s on %s: %s (%s)", call, o->path, clt_status_string(s), clt_last_error());
    ck_assert_msg(strstr(clt_last_error(), want), "%s: message \"%s\" lacks \"%s\"", call, clt_last_error(), want);
}

/* The helper itself: each kind refused with its errno and mode, a regular
 * file (through a link) opened blocking, and a missing one reported. */
START_TEST(test_input_helper)
{
    odd_file odd[3];
    make_odd(odd);
    alarm(LIMIT_S);
    const int want_errno[3] = {EINVAL, EISDIR, EINVAL};
    const mode_t want_type[3] = {S_IFIFO, S_IFDIR, S_IFCHR};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        errno = 0;
        ck_assert_int_eq(clt__input_fd(odd[i].path, &st), -1);
        ck_assert_int_eq(errno, want_errno[i]);
        ck_assert_int_eq(st.st_mode & S_IFMT, want_type[i]);
        int fd = 7;
        expect_refused(clt__input_open(odd[i].path, &fd, NULL), &odd[i], "clt__input_open");
        ck_assert_int_eq(fd, -1);
    }
    char file[512], link[512];
    snprintf(file, sizeof file, "%s/plain", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("12345", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(symlink(file, link), 0);
    struct stat st;
    int fd = -1;
    ck_assert_ok(clt__input_open(link, &fd, &st));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(st.st_size, 5);
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
    snprintf(file, sizeof file, "%s/absent", dir);
    ck_assert_int_eq(clt__input_open(file, &fd, &st), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "cannot open"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "No such file"));
    alarm(0);
}
END_TEST

/* clt_file_read, the public reader the tool's JSON input goes through, and
 * clt_dataset_load of a CSV or .npy path (src/io/slurp.c), with the same
 * message as the binary readers. */
START_TEST(test_whole_file_readers_refuse)
{
    odd_file odd[3];
    make_odd(odd);
    alarm(LIMIT_S);
    for (int i = 0; i < 3; i++) {
        char *data = (char *)1;
        size_t len = 1;
        expect_refused(clt_file_read(odd[i].path, &data, &len), &odd[i], "clt_file_read");
        ck_assert_ptr_null(data);
        ck_assert_uint_eq(len, 0);
        clt_dataset ds;
        expect_refused(clt_dataset_load(&ds, odd[i].path, NULL), &odd[i], "clt_dataset_load");
    }
    /* The same FIFO under a CSV's and a .npy's name. */
    static const char *const names[] = {"rows.csv", "rows.npy"};
    for (int i = 0; i < 2; i++) {
        odd_file named = odd[0];
        snprintf(named.path, sizeof named.path, "%s/%s", dir, names[i]);
        ck_assert_int_eq(mkfifo(named.path, 0600), 0);
        clt_dataset ds;
        expect_refused(clt_dataset_load(&ds, named.path, NULL), &named, "clt_dataset_load");
    }
    char file[512];
    snprintf(file, sizeof file, "%s/plain.json", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"a\": 1}", f);
    ck_assert_int_eq(fclose(f), 0);
    char *data = NULL;
    size_t len = 0;
    ck_assert_ok(clt_file_read(file, &data, &len));
    ck_assert_uint_eq(len, 8);
    ck_assert_str_eq(data, "{\"a\": 1}");
    free(data);
    ck_assert_int_eq(clt_file_read(NULL, &data, &len), CLT_ERR_INVALID_ARGUMENT);
    alarm(0);
}
END_TEST

/* Each library reader of a user-given path. */
START_TEST(test_library_readers_refuse)
{
    odd_file odd[3];
    make_odd(odd);
    clt_model *m = NULL;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 16, 1, 10, 1));
    /* A data folder whose training images are each kind in turn, its
     * labels a real file. */
    char data[300], images[400];
    snprintf(data, sizeof data, "%s/data", dir);
    ck_assert_int_eq(mkdir(data, 0700), 0);
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte", data);
    alarm(LIMIT_S);
    for (int i = 0; i < 3; i++) {
        const odd_file *o = &odd[i];
        unlink(images);
        clt_test_write_idx_split(data, "train", 16, 1, 0);
        clt_idx idx;
        expect_refused(clt_idx_read(o->path, &idx), o, "clt_idx_read");
        clt_safetensors *st = NULL;
        expect_refused(clt_safetensors_open(&st, o->path), o, "clt_safetensors_open");
        ck_assert_ptr_null(st);
        expect_refused(clt_checkpoint_load(o->path, m, NULL, NULL), o, "clt_checkpoint_load");
        char labels[400];
        snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte", data);
        clt_dataset ds;
        expect_refused(clt_dataset_load_idx(&ds, o->path, labels), o, "clt_dataset_load_idx");
        expect_refused(clt_dataset_load_idx(&ds, images, o->path), o, "clt_dataset_load_idx");
        /* The same kinds under the standard name, found by the loader. */
        ck_assert_int_eq(unlink(images), 0);
        ck_assert_int_eq(symlink(o->path, images), 0);
        odd_file named = *o;
        snprintf(named.path, sizeof named.path, "%s", images);
        expect_refused(clt_fashion_mnist_load(&ds, data, CLT_SPLIT_TRAIN), &named, "clt_fashion_mnist_load");
    }
    alarm(0);
    clt_model_free(m);
}
END_TEST

/* `clt train` and `clt eval` with a FIFO, a directory or /dev/null as the
 * data file or the checkpoint: exit 1 at once, the message naming both. */
START_TEST(test_tool_refuses)
{
    odd_file odd[3];
    make_odd(odd);
    const char *clt = clt_test_clt_path();
    char good[512], ck[600];
    snprintf(good, sizeof good, "%s/good", dir);
    ck_assert_int_eq(mkdir(good, 0700), 0);
    clt_test_write_idx_split(good, "train", 64, 1, 0);
    clt_test_write_idx_split(good, "t10k", 32, 2, 0);
    snprintf(ck, sizeof ck, "%s/a.st", dir);
    int rc = run("timeout %d %s train --data %s --steps 1 --batch-size 16 --hiddens 16 --blocks 1 --save %s", LIMIT_S,
                 clt, good, ck);
    ck_assert_msg(rc == 0, "clt train (%d): %s", rc, out);
    for (int i = 0; i < 3; i++) {
        const odd_file *o = &odd[i];
        char want[2048];
        snprintf(want, sizeof want, "%s %s", o->path, o->kind);
        rc = run("timeout %d %s eval --load %s --data %s", LIMIT_S, clt, o->path, good);
        ck_assert_msg(rc == 1 && strstr(out, want), "clt eval --load %s: exit %d:\n%s", o->path, rc, out);
        rc = run("timeout %d %s train --load %s --data %s --steps 1 --hiddens 16 --blocks 1", LIMIT_S, clt, o->path,
                 good);
        ck_assert_msg(rc == 1 && strstr(out, want), "clt train --load %s: exit %d:\n%s", o->path, rc, out);

        /* A data folder whose test labels (read by both commands) are o. */
        char bad[300];
        snprintf(bad, sizeof bad, "%s/bad%d", dir, i);
        ck_assert_int_eq(run("mkdir %s && cp %s/*-ubyte %s/ && ln -sf %s %s/t10k-labels-idx1-ubyte", bad, good, bad,
                             o->path, bad), 0);
        snprintf(want, sizeof want, "%s/t10k-labels-idx1-ubyte %s", bad, o->kind);
        rc = run("timeout %d %s eval --load %s --data %s", LIMIT_S, clt, ck, bad);
        ck_assert_msg(rc == 1 && strstr(out, want), "clt eval --data %s: exit %d:\n%s", bad, rc, out);
        rc = run("timeout %d %s train --data %s --steps 1 --hiddens 16 --blocks 1", LIMIT_S, clt, bad);
        ck_assert_msg(rc == 1 && strstr(out, want), "clt train --data %s: exit %d:\n%s", bad, rc, out);
    }
    /* A FIFO itself (not a link to one) at the training images' name. */
    char fifo_dir[512];
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo-data", dir);
    ck_assert_int_eq(run("mkdir %s && cp %s/*-ubyte %s/ && rm %s/train-images-idx3-ubyte && mkfifo "
                         "%s/train-images-idx3-ubyte", fifo_dir, good, fifo_dir, fifo_dir, fifo_dir), 0);
    rc = run("timeout %d %s train --data %s --steps 1", LIMIT_S, clt, fifo_dir);
    ck_assert_msg(rc == 1 && strstr(out, "train-images-idx3-ubyte is a FIFO, not a regular file"),
                  "clt train with a FIFO for the images: exit %d:\n%s", rc, out);
}
END_TEST

/* The tool's other inputs with a FIFO there: a CSV or .npy --data file of
 * clt train and clt eval, clt predict's --input, and clt timeline's trace
 * (read through jansson once, which blocked on a FIFO forever). Each ends
 * at once, naming the FIFO; `timeout` turns a hang into a failure (124). */
START_TEST(test_tool_refuses_fifo_text_inputs)
{
    const char *clt = clt_test_clt_path();
    char csv[512], npy[512], model[512], svg[512];
    snprintf(csv, sizeof csv, "%s/rows.csv", dir);
    snprintf(npy, sizeof npy, "%s/rows.npy", dir);
    snprintf(model, sizeof model, "%s/m.safetensors", dir);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    ck_assert_int_eq(mkfifo(csv, 0600), 0);
    ck_assert_int_eq(mkfifo(npy, 0600), 0);
    int64_t h = 4;
    clt_model *m = NULL;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 3, 1, &h, 2, 1));
    ck_assert_ok(clt_checkpoint_save(model, m, NULL, NULL));
    clt_model_free(m);
    const char *fifos[2] = {csv, npy};
    for (int i = 0; i < 2; i++) {
        char want[600];
        snprintf(want, sizeof want, "%s is a FIFO, not a regular file", fifos[i]);
        int rc = run("timeout %d %s train --data %s --steps 1 --hiddens 4", LIMIT_S, clt, fifos[i]);
        ck_assert_msg(rc != 0 && rc != 124 && strstr(out, want), "clt train --data %s: exit %d:\n%s", fifos[i], rc,
                      out);
        rc = run("timeout %d %s eval --load %s --data %s", LIMIT_S, clt, model, fifos[i]);
        ck_assert_msg(rc != 0 && rc != 124 && strstr(out, want), "clt eval --data %s: exit %d:\n%s", fifos[i], rc,
                      out);
        rc = run("timeout %d %s predict --load %s --input %s", LIMIT_S, clt, model, fifos[i]);
        ck_assert_msg(rc != 0 && rc != 124 && strstr(out, want), "clt predict --input %s: exit %d:\n%s", fifos[i],
                      rc, out);
        rc = run("timeout %d %s timeline %s %s", LIMIT_S, clt, fifos[i], svg);
        ck_assert_msg(rc == 1 && strstr(out, want), "clt timeline %s: exit %d:\n%s", fifos[i], rc, out);
        ck_assert_int_ne(access(svg, F_OK), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inputs");
    TCase *tc = clt_test_tcase("inputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_input_helper);
    tcase_add_test(tc, test_library_readers_refuse);
    tcase_add_test(tc, test_tool_refuses);
    tcase_add_test(tc, test_whole_file_readers_refuse);
    tcase_add_test(tc, test_tool_refuses_fifo_text_inputs);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
