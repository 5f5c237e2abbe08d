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
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
