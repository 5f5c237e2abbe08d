/* `clt train` alone on three real public data sets that scikit-learn ships
 * as CSV (Debian's python3-sklearn): handwritten 8x8 digits (64 columns, 10
 * classes, gzip-compressed), breast cancer (30 float features, 2 classes)
 * and diabetes (10 features, a float target, data and target in two files
 * joined by paste). Every fifth row is the test set. Skips (77) when the
 * package is absent, unless CLT_TEST_REQUIRE names "sklearn" (scripts/test
 * --ci installs it and does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define SKLEARN "/usr/lib/python3/dist-packages/sklearn/datasets/data"

static char dir[64];
static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static double figure(const char *name)
{
    const char *p = strstr(out, name);
    ck_assert_msg(p != NULL, "no '%s' in: %s", name, out);
    return atof(p + strlen(name));
}

/* Splits the rows that `source` prints into NAME-train.csv and NAME-test.csv (every fifth row). */
static void split(const char *name, const char *source)
{
    ck_assert_msg(run("%s | awk -v d=%s/%s 'NR%%5==0{print > d\"-test.csv\"; next}{print > d\"-train.csv\"}'", source,
                      dir, name) == 0, "%s", out);
}

static void train(const char *name, const char *options)
{
    ck_assert_msg(run("%s train --data %s/%s-train.csv --test %s/%s-test.csv --standardize --optimizer adam --lr 0.001 "
                      "--seed 0 %s", clt_test_clt_path(), dir, name, dir, name, options) == 0, "%s", out);
}

START_TEST(test_digits)
{
    split("digits", "zcat " SKLEARN "/digits.csv.gz");
    train("digits", "--hiddens 128,64 --epochs 30 --batch-size 64");
    double acc = figure("test accuracy ");
    ck_assert_msg(acc > 0.95, "digits: test accuracy %g (PyTorch's on this split: 0.97): %s", acc, out);
    ck_assert_msg(strstr(out, "(359 examples)"), "%s", out);
}
END_TEST

START_TEST(test_breast_cancer)
{
    /* Its first line is scikit-learn's own header: counts and class names. */
    split("bc", "tail -n +2 " SKLEARN "/breast_cancer.csv");
    train("bc", "--hiddens 64,32 --epochs 30 --batch-size 32");
    double acc = figure("test accuracy ");
    ck_assert_msg(acc > 0.95, "breast cancer: test accuracy %g (PyTorch's on this split: 1.0): %s", acc, out);
}
END_TEST

START_TEST(test_diabetes)
{
    char source[512];
    snprintf(source, sizeof source,
             "zcat " SKLEARN "/diabetes_data_raw.csv.gz > %s/x && zcat " SKLEARN "/diabetes_target.csv.gz > %s/y && "
             "paste -d' ' %s/x %s/y", dir, dir, dir, dir);
    split("diab", source);
    train("diab", "--hiddens 64,32 --epochs 60 --batch-size 32");
    double mse = figure("test mse ");
    /* The target's variance is about 5900; PyTorch's MSE on this split 3392. */
    ck_assert_msg(mse > 0 && mse < 3800, "diabetes: test mse %g: %s", mse, out);
}
END_TEST

static void setup(void) { clt_test_make_temp_dir(dir, sizeof dir, "sklearn"); }
static void teardown(void) { clt_test_remove_dir(dir); }

int main(void)
{
    if (access(SKLEARN "/breast_cancer.csv", R_OK) != 0)
        return clt_test_skip_all("sklearn", "scikit-learn's data sets are not installed (%s; Debian's python3-sklearn)",
                                 SKLEARN);
    Suite *s = suite_create("sklearn_data");
    TCase *tc = clt_test_tcase("sklearn_data");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_digits);
    tcase_add_test(tc, test_breast_cancer);
    tcase_add_test(tc, test_diabetes);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
