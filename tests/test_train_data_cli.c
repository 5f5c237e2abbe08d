/* `clt train --data FILE`: a CSV of classes and one of a regression train,
 * with the options a data file takes (validation split, test file,
 * standardisation, an MLP of any depth, the trainer's options), and bad
 * data stops with exit 2, the file, line and column named, nothing
 * written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static char dir[64];
static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static void write_text(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Two features; classes "neg"/"pos" by the sign of a + b; a target y = 3a - 2b + 5. */
static void write_tables(int n, uint64_t seed, const char *cls, const char *reg)
{
    float v[2 * 400];
    ck_assert_int_le(n, 400);
    clt_test_fill_uniform(v, 2 * n, seed, -1.0f, 1.0f);
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, cls);
    FILE *c = fopen(path, "w");
    snprintf(path, sizeof path, "%s/%s", dir, reg);
    FILE *r = fopen(path, "w");
    fprintf(c, "a,b,label\n");
    fprintf(r, "y;a;b\n"); /* semicolons, the target first */
    for (int i = 0; i < n; i++) {
        float a = v[2 * i], b = v[2 * i + 1];
        fprintf(c, "%.5f,%.5f,%s\n", a, b, a + b > 0 ? "pos" : "neg");
        fprintf(r, "%.5f;%.5f;%.5f\n", 3 * a - 2 * b + 5, a, b);
    }
    fclose(c);
    fclose(r);
}

static void write_bytes(const char *name, const uint8_t *bytes, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    clt_test_write_bytes(path, bytes, len);
}

/* The tables' classes as NumPy files: NAME-x.npy (n, 2) float32 and NAME-y.npy (n) int64, 0 (neg) and 1
 * (pos); NAME.npz of the two as x and y (stored), NAME-named.npz as features and labels (deflated). */
static void write_arrays(int n, uint64_t seed, const char *name)
{
    float v[2 * 400];
    int64_t y[400];
    ck_assert_int_le(n, 400);
    clt_test_fill_uniform(v, 2 * n, seed, -1.0f, 1.0f);
    for (int i = 0; i < n; i++) y[i] = v[2 * i] + v[2 * i + 1] > 0;
    static uint8_t xb[4096], yb[4096], zb[16384];
    char shape[32], file[64];
    snprintf(shape, sizeof shape, "(%d, 2)", n);
    size_t xl = clt_test_npy(xb, 1, "<f4", 0, shape, v, (size_t)n * 2 * sizeof(float));
    snprintf(shape, sizeof shape, "(%d,)", n);
    size_t yl = clt_test_npy(yb, 1, "<i8", 0, shape, y, (size_t)n * sizeof(int64_t));
    snprintf(file, sizeof file, "%s-x.npy", name);
    write_bytes(file, xb, xl);
    snprintf(file, sizeof file, "%s-y.npy", name);
    write_bytes(file, yb, yl);
    const uint8_t *data[] = {xb, yb};
    size_t lens[] = {xl, yl};
    const char *plain[] = {"x.npy", "y.npy"}, *named[] = {"features.npy", "labels.npy"};
    snprintf(file, sizeof file, "%s.npz", name);
    write_bytes(file, zb, clt_test_zip(zb, 2, plain, data, lens, 0));
    snprintf(file, sizeof file, "%s-named.npz", name);
    write_bytes(file, zb, clt_test_zip(zb, 2, named, data, lens, 1));
}

static void setup(void)
{
    clt_test_make_temp_dir(dir, sizeof dir, "data-cli");
    write_tables(400, 1, "cls.csv", "reg.csv");
    write_tables(100, 2, "cls-test.csv", "reg-test.csv");
}

static void teardown(void) { clt_test_remove_dir(dir); }

static double figure(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    ck_assert_msg(p != NULL, "no '%s' in: %s", name, text);
    return atof(p + strlen(name));
}

/* Line i (from 0) of a file's text lines, after `skip` header lines, as a copy in buf; 0 past the end. */
static int line_of(const char *text, int skip, int i, char *buf, size_t len)
{
    const char *p = text;
    for (int k = 0; k < skip + i; k++) {
        p = strchr(p, '\n');
        if (!p || !*++p) return 0;
    }
    size_t n = strcspn(p, "\r\n");
    if (n == 0 || n >= len) return 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

/* `clt predict --load model --input test` into preds.csv; the fraction of
 * rows whose predicted class (the first field) is the test file's last
 * field, the header in header. */
static double predicted_accuracy(const char *model, const char *test, char *header, size_t hlen)
{
    int rc = run("%s predict --load %s/%s --input %s/%s --output %s/preds.csv", clt_test_clt_path(), dir, model, dir,
                 test, dir);
    ck_assert_msg(rc == 0, "clt predict: exit %d: %s", rc, out);
    char path[128], row[256], want[256];
    snprintf(path, sizeof path, "%s/%s", dir, test);
    char *truth = clt_test_read_file(path);
    snprintf(path, sizeof path, "%s/preds.csv", dir);
    char *preds = clt_test_read_file(path);
    ck_assert(line_of(preds, 0, 0, header, hlen));
    int n = 0, right = 0;
    for (; line_of(preds, 1, n, row, sizeof row); n++) {
        ck_assert(line_of(truth, 1, n, want, sizeof want));
        *strchr(row, ',') = '\0';
        right += strcmp(row, strrchr(want, ',') + 1) == 0;
    }
    ck_assert_int_eq(n, 100);
    free(truth);
    free(preds);
    return (double)right / n;
}

START_TEST(test_classes_from_csv)
{
    ck_assert_msg(run("%s train --data %s/cls.csv --test %s/cls-test.csv --val-split 0.25 --standardize --hiddens 16,16 "
                      "--epochs 8 --batch-size 32 --lr 0.2 --momentum 0.5 --weight-decay 0.0001 --lr-schedule cosine "
                      "--warmup-steps 4 --seed 3 --metrics %s/m.csv --save %s/m.st",
                      clt_test_clt_path(), dir, dir, dir, dir) == 0, "%s", out);
    /* 300 training examples in batches of 32: 10 steps per epoch, 100 validation examples. */
    ck_assert_msg(strstr(out, "trained 8 epoch(s), 80 steps"), "%s", out);
    double val = figure(out, "val accuracy "), test = figure(out, "test accuracy ");
    ck_assert_msg(val > 0.9 && test > 0.9, "val %g, test %g: %s", val, test, out);
    ck_assert_msg(strstr(out, "(100 examples)"), "%s", out);
    char *csv = clt_test_read_file(strcat(strcpy((char[128]){0}, dir), "/m.csv"));
    ck_assert_msg(strncmp(csv, "epoch,steps,train_loss,val_loss,val_accuracy,", 45) == 0, "%s", csv);
    free(csv);
    /* The saved model describes itself: clt predict names the CSV's classes, standardises the raw rows and
     * agrees with the test figures. */
    char header[256];
    double acc = predicted_accuracy("m.st", "cls-test.csv", header, sizeof header);
    ck_assert_str_eq(header, "predicted,p_neg,p_pos");
    ck_assert_msg(fabs(acc - test) < 1e-9, "clt predict's accuracy %g, the test figure %g", acc, test);
    /* clt eval on the test file, read as the model records it: the figures the run printed. */
    ck_assert_msg(run("%s eval --load %s/m.st --data %s/cls-test.csv", clt_test_clt_path(), dir, dir) == 0, "%s", out);
    ck_assert_msg(figure(out, "test accuracy ") == test && strstr(out, "(100 examples, "), "%s", out);
    /* So does a model continued with --resume, and one saved at an epoch's end. */
    ck_assert_msg(run("%s train --data %s/cls.csv --standardize --hiddens 16,16 --epochs 2 --batch-size 32 --lr 0.2 "
                      "--save %s/r.st", clt_test_clt_path(), dir, dir) == 0, "%s", out);
    acc = predicted_accuracy("r.st", "cls-test.csv", header, sizeof header);
    ck_assert_str_eq(header, "predicted,p_neg,p_pos");
    ck_assert_msg(run("%s train --data %s/cls.csv --standardize --hiddens 16,16 --epochs 4 --batch-size 32 --lr 0.2 "
                      "--resume %s/r.st --save %s/r.st --test %s/cls-test.csv", clt_test_clt_path(), dir, dir, dir,
                      dir) == 0, "%s", out);
    test = figure(out, "test accuracy ");
    acc = predicted_accuracy("r.st", "cls-test.csv", header, sizeof header);
    ck_assert_str_eq(header, "predicted,p_neg,p_pos");
    ck_assert_msg(fabs(acc - test) < 1e-9 && acc > 0.9, "after --resume: clt predict's accuracy %g, the test's %g", acc,
                  test);
}
END_TEST

START_TEST(test_regression_from_csv)
{
    ck_assert_msg(run("%s train --data %s/reg.csv --target y --test %s/reg-test.csv --standardize --hiddens 16 --blocks 1 "
                      "--epochs 10 --batch-size 32 --lr 0.05 --lr-schedule step --lr-step-size 50 --lr-gamma 0.5 "
                      "--early-stopping 3 --metrics %s/r.csv --save %s/r.st",
                      clt_test_clt_path(), dir, dir, dir, dir) == 0, "%s", out);
    double mse = figure(out, "test mse "), mae = figure(out, "test mae ");
    /* The target's variance is about 13/3 + ...: a fit far below it, in the target's units. */
    ck_assert_msg(mse < 0.2 && mae < 0.4 && mae > 0, "test mse %g, mae %g: %s", mse, mae, out);
    ck_assert_msg(strstr(out, "epoch 1/10: train loss") && strstr(out, "val mse"), "%s", out);
    char *csv = clt_test_read_file(strcat(strcpy((char[128]){0}, dir), "/r.csv"));
    ck_assert_msg(strncmp(csv, "epoch,steps,train_loss,val_loss,val_mse,val_mae,", 48) == 0, "%s", csv);
    free(csv);
    /* clt predict on the test file's rows (the target "y" first, as the model records): values in the
     * target's units, whose errors are the test figures. */
    ck_assert_msg(run("%s predict --load %s/r.st --input %s/reg-test.csv --output %s/preds.csv", clt_test_clt_path(),
                      dir, dir, dir) == 0, "%s", out);
    char path[128], row[256], truth_row[256];
    snprintf(path, sizeof path, "%s/reg-test.csv", dir);
    char *truth = clt_test_read_file(path);
    snprintf(path, sizeof path, "%s/preds.csv", dir);
    char *preds = clt_test_read_file(path);
    ck_assert_msg(strncmp(preds, "predicted\n", 10) == 0, "%s", preds);
    double se = 0, ae = 0;
    int n = 0;
    for (; line_of(preds, 1, n, row, sizeof row); n++) {
        ck_assert(line_of(truth, 1, n, truth_row, sizeof truth_row));
        double d = atof(row) - atof(truth_row);
        se += d * d;
        ae += fabs(d);
    }
    ck_assert_int_eq(n, 100);
    ck_assert_msg(fabs(se / n - mse) <= 1e-3 * mse && fabs(ae / n - mae) <= 1e-3 * mae,
                  "clt predict: mse %g, mae %g; the test figures %g, %g", se / n, ae / n, mse, mae);
    free(truth);
    free(preds);
    /* clt eval reads the test file's target "y" as recorded, standardises and reports the target's units. */
    ck_assert_msg(run("%s eval --load %s/r.st --data %s/reg-test.csv", clt_test_clt_path(), dir, dir) == 0, "%s", out);
    ck_assert_msg(fabs(figure(out, "test mse ") - mse) <= 1e-5 * mse && fabs(figure(out, "test mae ") - mae) <= 1e-5 * mae,
                  "mse %g, mae %g: %s", mse, mae, out);
    ck_assert_msg(strstr(out, "(100 examples, "), "%s", out);
    /* A regression is no Fashion-MNIST classifier, and a file of another layout is bad data. */
    ck_assert_int_eq(run("%s eval --load %s/r.st --data %s", clt_test_clt_path(), dir, dir), 2);
    ck_assert_msg(strstr(out, "is a regression of 2 inputs and 1 outputs, not a Fashion-MNIST classifier"), "%s", out);
    ck_assert_int_eq(run("%s eval --load %s/r.st --data %s/cls-test.csv", clt_test_clt_path(), dir, dir), 2);
    ck_assert_msg(strstr(out, "cls-test.csv: no target column 'y'"), "%s", out);
    /* The target by index, the task forced. */
    ck_assert_int_eq(run("%s train --data %s/reg.csv --target 0 --task regress --epochs 1 --steps 1", clt_test_clt_path(),
                         dir), 0);
}
END_TEST

/* Lines in a file's text. */
static int count_lines(const char *path)
{
    char *text = clt_test_read_file(path);
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    free(text);
    return n;
}

/* Early stopping's summary gives the kept epoch's figures (its metrics row), not the last epoch's; --delimiter
 * and --header read a CSV as told, in clt train, clt eval and clt predict. */
START_TEST(test_kept_epoch_and_csv_options)
{
    const char *clt = clt_test_clt_path();
    ck_assert_msg(run("%s train --data %s/cls.csv --standardize --hiddens 16,16 --epochs 30 --batch-size 32 --lr 0.5 "
                      "--momentum 0.9 --early-stopping 1 --metrics %s/es.csv --save %s/es.st", clt, dir, dir, dir) == 0,
                  "%s", out);
    const char *kept = strstr(out, "stopped early, kept epoch ");
    ck_assert_msg(kept, "no early stop: %s", out);
    int epoch = atoi(kept + strlen("stopped early, kept epoch "));
    double loss = figure(kept, ": val loss "), acc = figure(kept, ", val accuracy ");
    char path[128], row[256];
    snprintf(path, sizeof path, "%s/es.csv", dir);
    char *csv = clt_test_read_file(path);
    /* epoch,steps,train_loss,val_loss,val_accuracy,...: the kept epoch's row, and a later one that differs. */
    ck_assert(line_of(csv, 1, epoch - 1, row, sizeof row));
    double row_loss, row_acc, train_loss;
    int row_epoch;
    long long steps;
    ck_assert_int_eq(sscanf(row, "%d,%lld,%lf,%lf,%lf", &row_epoch, &steps, &train_loss, &row_loss, &row_acc), 5);
    ck_assert_int_eq(row_epoch, epoch);
    ck_assert_msg(fabs(loss - row_loss) < 1e-4 && fabs(acc - row_acc) < 1e-4, "kept epoch %d: %g, %g; its row: %s",
                  epoch, loss, acc, row);
    ck_assert(line_of(csv, 1, epoch, row, sizeof row));
    ck_assert_int_eq(sscanf(row, "%d,%lld,%lf,%lf", &row_epoch, &steps, &train_loss, &row_loss), 4);
    ck_assert_msg(row_loss >= loss && fabs(row_loss - loss) >= 1e-4, "the next epoch's val loss %g, kept %g", row_loss,
                  loss);
    free(csv);

    /* The test rows without a header, with semicolons. */
    snprintf(path, sizeof path, "%s/cls-test.csv", dir);
    char *text = clt_test_read_file(path), *body = strchr(text, '\n') + 1;
    for (char *p = body; *p; p++)
        if (*p == ',') *p = ';';
    write_text("semi.csv", body);
    free(text);
    ck_assert_msg(run("%s eval --load %s/es.st --data %s/semi.csv --delimiter ';' --header no", clt, dir, dir) == 0 &&
                      strstr(out, "(100 examples, "), "%s", out);
    ck_assert_msg(run("%s eval --load %s/es.st --data %s/semi.csv --delimiter ';' --header yes", clt, dir, dir) == 0 &&
                      strstr(out, "(99 examples, "), "%s", out);
    ck_assert_int_eq(run("%s eval --load %s/es.st --data %s/semi.csv --delimiter tab", clt, dir, dir), 2);
    ck_assert_msg(strstr(out, "semi.csv: one column, the target: no feature columns"), "%s", out);
    ck_assert_msg(run("%s predict --load %s/es.st --input %s/semi.csv --delimiter ';' --header no --output %s/preds.csv",
                      clt, dir, dir, dir) == 0, "%s", out);
    snprintf(path, sizeof path, "%s/preds.csv", dir);
    ck_assert_int_eq(count_lines(path), 101);
    ck_assert_msg(run("%s predict --load %s/es.st --input %s/semi.csv --header yes --output %s/preds.csv", clt, dir,
                      dir, dir) == 0, "%s", out);
    ck_assert_int_eq(count_lines(path), 100);
    ck_assert_msg(run("%s train --data %s/semi.csv --delimiter ';' --header no --epochs 1 --steps 1", clt, dir) == 0,
                  "%s", out);
    const char *bad[][2] = {
        {"train --data %s/semi.csv --delimiter '|'", "--delimiter takes , ; tab or space, not '|'"},
        {"train --data %s/semi.csv --header maybe", "--header takes yes, no or auto, not 'maybe'"},
        {"predict --load m --input %s/semi.csv --header 1", "--header takes yes, no or auto, not '1'"},
        {"predict --load m --input %s/semi.csv --delimiter ::", "--delimiter takes , ; tab or space, not '::'"},
        {"train --data %s --header yes", "take a data file as --data, not the folder"},
        {"train --data %s --x-name a", "take a data file as --data, not the folder"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, bad[i][0], dir);
        int rc = run("%s %s", clt, cmd);
        ck_assert_msg(rc == 2 && strstr(out, bad[i][1]), "%s: exit %d: %s", cmd, rc, out);
    }
}
END_TEST

/* The fraction of rows of DIR/preds.csv (a header, then the class first) that name the class of write_arrays(n,
 * seed): "0" or "1". */
static double arrays_accuracy(int n, uint64_t seed)
{
    float v[2 * 400];
    clt_test_fill_uniform(v, 2 * n, seed, -1.0f, 1.0f);
    char path[128], row[256];
    snprintf(path, sizeof path, "%s/preds.csv", dir);
    char *preds = clt_test_read_file(path);
    ck_assert_msg(strncmp(preds, "predicted,p_0,p_1\n", 18) == 0, "%s", preds);
    int i = 0, right = 0;
    for (; line_of(preds, 1, i, row, sizeof row); i++) right += atoi(row) == (v[2 * i] + v[2 * i + 1] > 0);
    ck_assert_int_eq(i, n);
    free(preds);
    return (double)right / n;
}

/* .npy features with a second .npy of labels (--labels, --test-labels), and .npz files of both (x and y, or
 * arrays named by --x-name and --y-name): clt train, clt eval and clt predict agree. */
START_TEST(test_npy_and_npz)
{
    write_arrays(400, 1, "a");
    write_arrays(100, 2, "at");
    const char *clt = clt_test_clt_path();
    ck_assert_msg(run("%s train --data %s/a-x.npy --labels %s/a-y.npy --test %s/at-x.npy --test-labels %s/at-y.npy "
                      "--standardize --hiddens 16,16 --epochs 8 --batch-size 32 --lr 0.2 --seed 3 --save %s/n.st",
                      clt, dir, dir, dir, dir, dir) == 0, "%s", out);
    double test = figure(out, "test accuracy ");
    ck_assert_msg(test > 0.9 && strstr(out, "(100 examples)"), "%s", out);
    /* A data file's epochs count examples, not images. */
    ck_assert_msg(strstr(out, "examples/s on ") && !strstr(out, "images/s"), "%s", out);
    ck_assert_msg(run("%s eval --load %s/n.st --data %s/at-x.npy --labels %s/at-y.npy", clt, dir, dir, dir) == 0, "%s",
                  out);
    ck_assert_msg(figure(out, "test accuracy ") == test && strstr(out, "(100 examples, "), "%s", out);
    ck_assert_msg(run("%s predict --load %s/n.st --input %s/at-x.npy --output %s/preds.csv", clt, dir, dir, dir) == 0,
                  "%s", out);
    ck_assert_msg(fabs(arrays_accuracy(100, 2) - test) < 1e-9, "clt predict against the test figure %g", test);
    /* An .npy test file without its labels' file: the option to give them named. */
    ck_assert_int_eq(run("%s train --data %s/a-x.npy --labels %s/a-y.npy --test %s/at-x.npy --save %s/bad.st", clt, dir,
                         dir, dir, dir), 2);
    ck_assert_msg(strstr(out, "at-x.npy: a .npy file holds the features alone") &&
                      strstr(out, "give the targets' file of ") && strstr(out, "with --test-labels FILE"), "%s", out);
    ck_assert_int_eq(run("%s train --data %s/a-x.npy", clt, dir), 2);
    ck_assert_msg(strstr(out, "with --labels FILE"), "%s", out);
    ck_assert_int_eq(run("%s train --data %s/a-x.npy --labels %s/a-y.npy --test-labels %s/at-y.npy", clt, dir, dir,
                         dir), 2);
    ck_assert_msg(strstr(out, "give --test FILE too"), "%s", out);

    /* .npz: x and y by default; other names by --x-name and --y-name, for clt train, eval and predict. */
    ck_assert_msg(run("%s train --data %s/a.npz --test %s/at.npz --standardize --hiddens 16,16 --epochs 8 "
                      "--batch-size 32 --lr 0.2 --seed 3", clt, dir, dir) == 0, "%s", out);
    ck_assert_msg(figure(out, "test accuracy ") == test, "the .npz's figure, the .npy's %g: %s", test, out);
    ck_assert_int_eq(run("%s train --data %s/a-named.npz", clt, dir), 2);
    ck_assert_msg(strstr(out, "no array 'x'"), "%s", out);
    ck_assert_msg(run("%s train --data %s/a-named.npz --test %s/at-named.npz --x-name features --y-name labels "
                      "--standardize --hiddens 16,16 --epochs 8 --batch-size 32 --lr 0.2 --seed 3 --save %s/z.st", clt,
                      dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(figure(out, "test accuracy ") == test, "the named .npz's figure, the .npy's %g: %s", test, out);
    ck_assert_msg(run("%s eval --load %s/z.st --data %s/at-named.npz --x-name features --y-name labels", clt, dir,
                      dir) == 0 && figure(out, "test accuracy ") == test, "%s", out);
    ck_assert_int_eq(run("%s eval --load %s/z.st --data %s/at-named.npz --x-name features", clt, dir, dir), 2);
    ck_assert_msg(strstr(out, "no array 'y'"), "%s", out);
    ck_assert_msg(run("%s predict --load %s/z.st --input %s/at-named.npz --x-name features --output %s/preds.csv", clt,
                      dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(fabs(arrays_accuracy(100, 2) - test) < 1e-9, "clt predict of the named .npz");
    ck_assert_int_eq(run("%s predict --load %s/z.st --input %s/at-named.npz", clt, dir, dir), 2);
    ck_assert_msg(strstr(out, "no array 'x'"), "%s", out);
}
END_TEST

/* A run whose last step breaks the model (its loss, read before the update, finite; the validation loss after
 * it not): exit 1, the message, no checkpoint. */
START_TEST(test_late_divergence_saves_nothing)
{
    enum { N = 64, W = 4 };
    float x[N * W], y[N];
    clt_test_fill_uniform(x, N * W, 1, 0.0f, 30000.0f);
    clt_test_fill_uniform(y, N, 2, 0.0f, 30000.0f);
    static uint8_t xb[4096], yb[1024];
    write_bytes("big-x.npy", xb, clt_test_npy(xb, 1, "<f4", 0, "(64, 4)", x, sizeof x));
    write_bytes("big-y.npy", yb, clt_test_npy(yb, 1, "<f4", 0, "(64,)", y, sizeof y));
    /* 51 training examples in one batch: one step per epoch. */
    int rc = run("%s train --data %s/big-x.npy --labels %s/big-y.npy --batch-size 64 --lr 1e30 --save %s/div.st "
                 "--metrics %s/div.csv", clt_test_clt_path(), dir, dir, dir, dir);
    ck_assert_msg(rc == 1 && strstr(out, "training diverged: the validation loss is") &&
                      strstr(out, "after epoch 1 (step 1)"), "exit %d: %s", rc, out);
    char path[128];
    snprintf(path, sizeof path, "%s/div.st", dir);
    ck_assert_msg(access(path, F_OK) != 0, "a checkpoint was written");
    snprintf(path, sizeof path, "%s/div.csv", dir);
    ck_assert_msg(access(path, F_OK) != 0, "metrics were written");
}
END_TEST

/* Each bad file: exit 2, the message, no --save or --metrics file. */
static void refuse(const char *name, const char *text, const char *message)
{
    write_text(name, text);
    int rc = run("%s train --data %s/%s --save %s/bad.st --metrics %s/bad.csv", clt_test_clt_path(), dir, name, dir, dir);
    ck_assert_msg(rc == 2, "%s: exit %d: %s", name, rc, out);
    ck_assert_msg(strstr(out, message), "%s: no '%s' in: %s", name, message, out);
    ck_assert_msg(strstr(out, name), "%s: the file is not named: %s", name, out);
    char path[128];
    snprintf(path, sizeof path, "%s/bad.st", dir);
    ck_assert_msg(access(path, F_OK) != 0, "%s: a checkpoint was written", name);
    snprintf(path, sizeof path, "%s/bad.csv", dir);
    ck_assert_msg(access(path, F_OK) != 0, "%s: metrics were written", name);
}

START_TEST(test_bad_data_exits_2)
{
    refuse("nan.csv", "a,b,y\n1,2,0\n3,nan,1\n4,5,0\n6,7,1\n", "line 3, column 2 (b)");
    refuse("inf.csv", "a,b,y\n1,2,0\n3,4,1\n4,-inf,0\n6,7,1\n", "line 4, column 2 (b)");
    refuse("ragged.csv", "a,b,y\n1,2,0\n3,1\n4,5,0\n", "line 3 has 2 fields");
    refuse("text.csv", "a,b,y\n1,2,0\n3,x,1\n4,5,0\n", "line 3, column 2 (b): 'x' is not a number");
    refuse("empty.csv", "", "an empty file");
    refuse("one.csv", "a,b,y\n1,2,0\n3,4,0\n4,5,0\n", "a classifier needs two classes");
    refuse("latin1.csv", "a,b,y\n1,2,ok\n3,4,caf\xe9\n4,5,ok\n6,7,caf\xe9\n",
           "line 3, column 3: the class label is not valid UTF-8 text");
    /* A test label the training data lack (out of its classes' range). */
    write_text("test-dog.csv", "a,b,label\n1,2,dog\n");
    int rc = run("%s train --data %s/cls.csv --test %s/test-dog.csv --save %s/bad.st", clt_test_clt_path(), dir, dir, dir);
    ck_assert_msg(rc == 2 && strstr(out, "test-dog.csv: line 2, column 3: class 'dog' does not occur"), "%d %s", rc, out);
    char path[128];
    snprintf(path, sizeof path, "%s/bad.st", dir);
    ck_assert(access(path, F_OK) != 0);
}
END_TEST

START_TEST(test_options_refused)
{
    const char *bad[][2] = {
        {"--val-split 1", "--val-split needs a number in (0, 1)"},
        {"--val-split 0", "--val-split needs a number in (0, 1)"},
        {"--momentum 1", "--momentum needs a number in [0, 1)"},
        {"--weight-decay -1", "--weight-decay needs a number"},
        {"--lr-schedule linear", "--lr-schedule takes step, cosine or constant"},
        {"--lr-schedule step", "--lr-schedule step needs --lr-step-size N"},
        {"--lr-gamma 2", "--lr-gamma needs a number in (0, 1]"},
        {"--warmup-steps -1", "--warmup-steps needs an integer >= 0"},
        {"--early-stopping 0", "--early-stopping needs an integer >= 1"},
        {"--task cluster", "--task takes classify or regress"},
        {"--hiddens 16,,8", "--hiddens needs a width or a list"},
        {"--hiddens 16,8 --blocks 2", "--blocks is the ResMLP's"},
        {"--optimizer adam --momentum 0.9", "--momentum is SGD's"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run("%s train --data %s/cls.csv %s", clt_test_clt_path(), dir, bad[i][0]);
        ck_assert_msg(rc == 2 && strstr(out, bad[i][1]), "%s: exit %d: %s", bad[i][0], rc, out);
    }
    /* The data file's options are refused with Fashion-MNIST's folder. */
    int rc = run("%s train --data %s --val-split 0.1", clt_test_clt_path(), dir);
    ck_assert_msg(rc == 2 && strstr(out, "take a data file as --data"), "%d %s", rc, out);
    ck_assert_msg(run("%s train --help", clt_test_clt_path()) == 0 && strstr(out, "your\nown data"), "%s", out);
    /* Every data file option is in its command's help, and clt --help says what train trains on. */
    const char *helps[][2] = {
        {"train", "--test-labels FILE"}, {"train", "--x-name NAME"}, {"train", "--y-name NAME"},
        {"train", "--delimiter C"},      {"train", "--header yes|no|auto"}, {"eval", "--x-name NAME"},
        {"eval", "--y-name NAME"},       {"eval", "--delimiter C"},  {"eval", "--header yes|no|auto"},
        {"predict", "--x-name NAME"},    {"predict", "--delimiter C"}, {"predict", "--header yes|no|auto"},
    };
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
        ck_assert_msg(run("%s %s --help", clt_test_clt_path(), helps[i][0]) == 0 && strstr(out, helps[i][1]),
                      "clt %s --help lacks %s: %s", helps[i][0], helps[i][1], out);
    ck_assert_msg(run("%s --help", clt_test_clt_path()) == 0 &&
                      strstr(out, "train     train the chapter's ResMLP on Fashion-MNIST, or a model on a CSV, .npy/.npz "
                                  "or IDX file"), "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_data_cli");
    TCase *tc = clt_test_tcase("train_data_cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_classes_from_csv);
    tcase_add_test(tc, test_regression_from_csv);
    tcase_add_test(tc, test_bad_data_exits_2);
    tcase_add_test(tc, test_options_refused);
    tcase_add_test(tc, test_npy_and_npz);
    tcase_add_test(tc, test_kept_epoch_and_csv_options);
    tcase_add_test(tc, test_late_divergence_saves_nothing);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
