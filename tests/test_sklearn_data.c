/* `clt train` alone on three real public data sets that scikit-learn ships
 * as CSV (Debian's python3-sklearn): handwritten 8x8 digits (64 columns, 10
 * classes, gzip-compressed), breast cancer (30 float features, 2 classes)
 * and diabetes (10 features, a float target, data and target in two files
 * joined by paste). Every fifth row is the test set. The bars are the
 * issue's: within 1 point of PyTorch's test accuracy on this split, an MSE
 * within 5% of PyTorch's. Breast cancer trains from .npy files too (written
 * here from the CSV's rows), to the same figure. Skips (77) when the
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

/* DIR/NAME-PART.csv's features and class ids as DIR/NAME-PART-x.npy (float32) and DIR/NAME-PART-y.npy (int32). */
static void to_npy(const char *name, const char *part)
{
    char path[128], shape[48];
    snprintf(path, sizeof path, "%s/%s-%s.csv", dir, name, part);
    clt_dataset ds;
    clt_data_options o = clt_data_default_options();
    ck_assert_msg(clt_dataset_load(&ds, path, &o) == CLT_OK, "%s", clt_last_error());
    ck_assert_int_eq(ds.task, CLT_TASK_CLASSIFY);
    int64_t w = clt_dataset_width(&ds);
    size_t xbytes = (size_t)(ds.n * w) * sizeof(float), ybytes = (size_t)ds.n * sizeof(int32_t);
    uint8_t *buf = malloc(xbytes + ybytes + 256);
    ck_assert_ptr_nonnull(buf);
    const struct {
        const char *suffix, *descr;
        const void *data;
        size_t bytes;
        int two_d;
    } arrays[] = {{"x", "<f4", ds.x, xbytes, 1}, {"y", "<i4", ds.classes, ybytes, 0}};
    for (int a = 0; a < 2; a++) {
        if (arrays[a].two_d) snprintf(shape, sizeof shape, "(%lld, %lld)", (long long)ds.n, (long long)w);
        else snprintf(shape, sizeof shape, "(%lld,)", (long long)ds.n);
        size_t n = clt_test_npy(buf, 1, arrays[a].descr, 0, shape, arrays[a].data, arrays[a].bytes);
        snprintf(path, sizeof path, "%s/%s-%s-%s.npy", dir, name, part, arrays[a].suffix);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
        fclose(f);
    }
    free(buf);
    clt_dataset_free(&ds);
}

START_TEST(test_digits)
{
    split("digits", "zcat " SKLEARN "/digits.csv.gz");
    train("digits", "--hiddens 128,64 --epochs 30 --batch-size 64");
    double acc = figure("test accuracy ");
    /* Seeds 0-11 gave 0.9638-0.9833 (seed 0: 0.9694). */
    ck_assert_msg(acc >= 0.96, "digits: test accuracy %g (PyTorch's on this split: 0.97): %s", acc, out);
    ck_assert_msg(strstr(out, "(359 examples)"), "%s", out);
}
END_TEST

START_TEST(test_breast_cancer)
{
    /* Its first line is scikit-learn's own header: counts and class names. */
    split("bc", "tail -n +2 " SKLEARN "/breast_cancer.csv");
    train("bc", "--hiddens 64,32 --epochs 30 --batch-size 32");
    double acc = figure("test accuracy ");
    /* Seeds 0-11 gave 112 or 113 of the 113 right (seed 0: 112, 0.9912). */
    ck_assert_msg(acc >= 0.99, "breast cancer: test accuracy %g (PyTorch's on this split: 1.0): %s", acc, out);
    /* The same rows as .npy files (the features, then the labels' file): the same figure. */
    to_npy("bc", "train");
    to_npy("bc", "test");
    ck_assert_msg(run("%s train --data %s/bc-train-x.npy --labels %s/bc-train-y.npy --test %s/bc-test-x.npy "
                      "--test-labels %s/bc-test-y.npy --standardize --optimizer adam --lr 0.001 --seed 0 --hiddens 64,32 "
                      "--epochs 30 --batch-size 32", clt_test_clt_path(), dir, dir, dir, dir) == 0, "%s", out);
    ck_assert_msg(figure("test accuracy ") == acc && strstr(out, "(113 examples)"), "the CSV's %g: %s", acc, out);
}
END_TEST

START_TEST(test_diabetes)
{
    char source[512];
    snprintf(source, sizeof source,
             "zcat " SKLEARN "/diabetes_data_raw.csv.gz > %s/x && zcat " SKLEARN "/diabetes_target.csv.gz > %s/y && "
             "paste -d' ' %s/x %s/y", dir, dir, dir, dir);
    split("diab", source);
    train("diab", "--hiddens 64,32 --epochs 30 --batch-size 32");
    double mse = figure("test mse ");
    /* The target's variance is about 5900. PyTorch (torch.nn, the same MLP, standardisation, Adam 1e-3,
     * batch 32, 30 epochs, trained on the whole training split) gives 3129-3339 on this split over seeds
     * 0-3, mean 3230, and 5% above that mean is 3392. cltensor's seeds 0-7 gave 3069-3412 (seed 0: 3201). */
    ck_assert_msg(mse > 0 && mse < 3392, "diabetes: test mse %g: %s", mse, out);
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
