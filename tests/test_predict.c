/* Prediction: clt_model_predict (standardization in, softmax or the
 * target's units out) and `clt predict`, which agrees with it on every row,
 * from a file in the training layout or of the features alone; and `clt
 * eval` of models made through the C API, a capstone checkpoint among them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define ROWS 37
#define WIDTH 4

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    fclose(f);
}

/* ROWS rows of WIDTH features (and a string target column when with_target), and the same rows in x. */
static void write_rows(const char *path, float *x, int with_target)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d%s\n", with_target ? ",species" : "");
    for (int i = 0; i < ROWS; i++) {
        for (int j = 0; j < WIDTH; j++) {
            x[i * WIDTH + j] = (float)((i * 7 + j * 3) % 11) * 0.5f - 2.0f + (float)j;
            fprintf(f, "%s%.9g", j ? "," : "", (double)x[i * WIDTH + j]);
        }
        fprintf(f, "%s\n", with_target ? (i % 2 ? ",cat" : ",unseen") : "");
    }
    fclose(f);
}

/* The CSV clt predict wrote: the header in header, then rows of fields as floats (the first kept as text in first). */
static int read_predictions(const char *path, char *header, size_t hlen, char first[][32], float *vals, int per_row,
                            int first_is_text)
{
    char *s = clt_test_read_file(path), *save = NULL;
    int rows = -1;
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save), rows++) {
        if (rows < 0) {
            snprintf(header, hlen, "%s", line);
            continue;
        }
        char *p = line;
        if (first_is_text) {
            char *comma = strchr(*p == '"' ? strchr(p + 1, '"') : p, ',');
            ck_assert_ptr_nonnull(comma);
            *comma = '\0';
            snprintf(first[rows], 32, "%s", p);
            p = comma + 1;
        }
        for (int j = 0; j < per_row; j++) {
            char *end;
            vals[rows * per_row + j] = strtof(p, &end);
            ck_assert_msg(end != p, "row %d: %s", rows, line);
            p = *end == ',' ? end + 1 : end;
        }
    }
    free(s);
    return rows;
}

START_TEST(test_classifier_tool_agrees_with_library)
{
    char dir[256], model[300], input[300], feats[300], preds[300], out[4096];
    clt_test_make_temp_dir(dir, sizeof dir, "predict");
    snprintf(model, sizeof model, "%s/m.safetensors", dir);
    snprintf(input, sizeof input, "%s/train-layout.csv", dir);
    snprintf(feats, sizeof feats, "%s/features.csv", dir);
    snprintf(preds, sizeof preds, "%s/preds.csv", dir);
    clt_device dev = clt_test_cpu();
    int64_t h = 9;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, WIDTH, 1, &h, 3, 11));
    float mean[WIDTH] = {0.5f, 1.5f, 2.5f, 3.5f}, std[WIDTH] = {2, 3, 0.5f, 1};
    clt_standardizer st;
    ck_assert_ok(clt_standardizer_from_host(&st, WIDTH, mean, std, 0, NULL, NULL));
    const char *names[3] = {"cat", "dog, big", "fish"};
    clt_checkpoint_info info = {.num_classes = 3, .class_names = names, .target = "species", .standardizer = &st};
    ck_assert_ok(clt_checkpoint_save(model, m, NULL, &info));
    clt_model_free(m);
    clt_standardizer_free(&st);

    float x[ROWS * WIDTH], x2[ROWS * WIDTH], probs[ROWS * 3], got[ROWS * 3];
    int32_t classes[ROWS];
    write_rows(input, x, 1);
    write_rows(feats, x2, 0);
    clt_model_description d;
    ck_assert_ok(clt_model_load(&m, model, dev, &d));
    ck_assert_ok(clt_model_predict(m, &d, x, ROWS, WIDTH, probs, classes));
    for (int i = 0; i < ROWS; i++) {
        double sum = probs[i * 3] + probs[i * 3 + 1] + probs[i * 3 + 2];
        ck_assert_msg(fabs(sum - 1) < 1e-6, "row %d sums to %g", i, sum);
        for (int c = 0; c < 3; c++) ck_assert(probs[i * 3 + c] <= probs[i * 3 + classes[i]]);
    }
    /* The standardization is applied: predicting pre-standardised rows without it gives the same. */
    float z[ROWS * WIDTH], raw[ROWS * 3];
    for (int i = 0; i < ROWS * WIDTH; i++) z[i] = (x[i] - mean[i % WIDTH]) / std[i % WIDTH];
    clt_model_description plain = d;
    plain.has_standardizer = 0;
    ck_assert_ok(clt_model_predict(m, &plain, z, ROWS, WIDTH, raw, NULL));
    ck_assert_double_lt(clt_test_max_rel_err(raw, probs, ROWS * 3), 1e-5);

    const char *inputs[2] = {input, feats};
    for (int k = 0; k < 2; k++) {
        remove(preds);
        int rc = clt_test_shell(out, sizeof out, "%s predict --load %s --input %s --output %s", clt_test_clt_path(),
                                model, inputs[k], preds);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", inputs[k], rc, out);
        char header[256], first[ROWS][32];
        int rows = read_predictions(preds, header, sizeof header, first, got, 3, 1);
        ck_assert_int_eq(rows, ROWS);
        ck_assert_str_eq(header, "predicted,p_cat,\"p_dog, big\",p_fish");
        for (int i = 0; i < ROWS; i++) {
            const char *want = classes[i] == 1 ? "\"dog, big\"" : names[classes[i]];
            ck_assert_msg(strcmp(first[i], want) == 0, "row %d: %s, the library says %s", i, first[i], want);
            for (int c = 0; c < 3; c++)
                ck_assert_msg(got[i * 3 + c] == probs[i * 3 + c], "row %d class %d: %.9g against %.9g", i, c,
                              (double)got[i * 3 + c], (double)probs[i * 3 + c]);
        }
    }

    /* clt eval on the training layout, its target where the model records it (a middle column): labelled with
     * the library's predictions, then with each one class on. */
    char labelled[300];
    snprintf(labelled, sizeof labelled, "%s/labelled.csv", dir);
    for (int shift = 0; shift < 2; shift++) {
        FILE *f = fopen(labelled, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "a,b,species,c,d\n");
        for (int i = 0; i < ROWS; i++)
            fprintf(f, "%.9g,%.9g,\"%s\",%.9g,%.9g\n", (double)x[i * WIDTH], (double)x[i * WIDTH + 1],
                    names[(classes[i] + shift) % 3], (double)x[i * WIDTH + 2], (double)x[i * WIDTH + 3]);
        fclose(f);
        int rc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s", clt_test_clt_path(), model, labelled);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
        ck_assert_msg(strstr(out, shift ? "test accuracy 0.0000 (37 examples, " : "test accuracy 1.0000 (37 examples, "),
                      "%s", out);
    }
    /* Not a Fashion-MNIST classifier. */
    int erc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s", clt_test_clt_path(), model, dir);
    ck_assert_msg(erc == 2 && strstr(out, "a classifier of 4 inputs and 3 outputs, not a Fashion-MNIST classifier"),
                  "exit %d: %s", erc, out);

    /* Wrong widths: the library's CLT_ERR_SHAPE, the tool's exit 2 naming both; nothing written. */
    ck_assert_status(clt_model_predict(m, &d, x, ROWS, WIDTH - 1, probs, classes), CLT_ERR_SHAPE);
    ck_assert_msg(strstr(clt_last_error(), "3 features") && strstr(clt_last_error(), "takes 4"), "%s",
                  clt_last_error());
    char narrow[300];
    snprintf(narrow, sizeof narrow, "%s/narrow.csv", dir);
    write_text(narrow, "1,2\n3,4\n5,6\n");
    remove(preds);
    int rc = clt_test_shell(out, sizeof out, "%s predict --load %s --input %s --output %s", clt_test_clt_path(), model,
                            narrow, preds);
    ck_assert_msg(rc == 2 && strstr(out, narrow) && strstr(out, "2 features per row") && strstr(out, "takes 4"),
                  "exit %d: %s", rc, out);
    ck_assert_int_ne(access(preds, F_OK), 0);
    /* Bad data: file and line named, exit 2. */
    write_text(narrow, "a,b,c,d\n1,2,3,4\n1,2,x,4\n");
    rc = clt_test_shell(out, sizeof out, "%s predict --load %s --input %s --output %s", clt_test_clt_path(), model,
                        narrow, preds);
    ck_assert_msg(rc == 2 && strstr(out, narrow) && strstr(out, "line 3"), "exit %d: %s", rc, out);
    ck_assert_int_ne(access(preds, F_OK), 0);
    /* Usage. */
    rc = clt_test_shell(out, sizeof out, "%s predict --load %s", clt_test_clt_path(), model);
    ck_assert_msg(rc == 2 && strstr(out, "--input FILE"), "exit %d: %s", rc, out);

    clt_model_description_free(&d);
    clt_model_free(m);
    clt_test_remove_dir(dir);
}
END_TEST

/* --output is checked before any work, as clt train checks its files: it
 * may not be the --load model or the --input file however spelled (x and
 * ./x, a symbolic link to the directory), and a name too long for its
 * temporary file is refused with the model never loaded. Each refusal
 * leaves the inputs as they were. */
START_TEST(test_output_checked_up_front)
{
    char dir[256], model[300], feats[300], out[4096];
    clt_test_make_temp_dir(dir, sizeof dir, "predict-out");
    snprintf(model, sizeof model, "%s/m.safetensors", dir);
    snprintf(feats, sizeof feats, "%s/features.csv", dir);
    int64_t h = 5;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), WIDTH, 1, &h, 2, 3));
    ck_assert_ok(clt_checkpoint_save(model, m, NULL, NULL));
    clt_model_free(m);
    float x[ROWS * WIDTH];
    write_rows(feats, x, 0);
    size_t model_n, feats_n;
    uint8_t *model_bytes = clt_test_read_bytes(model, &model_n), *feats_bytes = clt_test_read_bytes(feats, &feats_n);
    const char *clt = clt_test_clt_path();

    /* The model and the input file, spelled as given, as ./x and through a link to their directory. */
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "ln -s %s %s/link", dir, dir), 0);
    static const struct {
        const char *output, *names;
    } clashes[] = {
        {"m.safetensors", "--load"},        {"./m.safetensors", "--load"},     {"link/m.safetensors", "--load"},
        {"features.csv", "--input"},        {"./features.csv", "--input"},     {"link/features.csv", "--input"},
    };
    for (size_t i = 0; i < sizeof clashes / sizeof clashes[0]; i++) {
        int rc = clt_test_shell(out, sizeof out, "cd %s && %s predict --load m.safetensors --input features.csv "
                                "--output %s", dir, clt, clashes[i].output);
        ck_assert_msg(rc == 2 && strstr(out, "--output") && strstr(out, clashes[i].names) &&
                          strstr(out, "would replace that input"),
                      "--output %s: exit %d: %s", clashes[i].output, rc, out);
        size_t n;
        uint8_t *now = clt_test_read_bytes(model, &n);
        ck_assert_msg(n == model_n && memcmp(now, model_bytes, n) == 0, "--output %s changed the model",
                      clashes[i].output);
        free(now);
        now = clt_test_read_bytes(feats, &n);
        ck_assert_msg(n == feats_n && memcmp(now, feats_bytes, n) == 0, "--output %s changed the input",
                      clashes[i].output);
        free(now);
    }

    /* A legal name whose temporary name is too long: refused before the (missing) model is loaded. */
    char longname[300];
    memset(longname, 'p', 250);
    snprintf(longname + 250, sizeof longname - 250, ".csv");
    int rc = clt_test_shell(out, sizeof out, "cd %s && %s predict --load missing.safetensors --input features.csv "
                            "--output %s", dir, clt, longname);
    ck_assert_msg(rc == 1 && strstr(out, "temporary file") && !strstr(out, "missing.safetensors"), "exit %d: %s", rc,
                  out);
    /* A directory that does not exist: refused up front too. */
    rc = clt_test_shell(out, sizeof out, "cd %s && %s predict --load missing.safetensors --input features.csv "
                        "--output nodir/p.csv", dir, clt);
    ck_assert_msg(rc == 1 && strstr(out, "nodir") && !strstr(out, "missing.safetensors"), "exit %d: %s", rc, out);
    /* And a good one still works. */
    rc = clt_test_shell(out, sizeof out, "cd %s && %s predict --load m.safetensors --input features.csv --output p.csv",
                        dir, clt);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(model_bytes);
    free(feats_bytes);
    clt_test_remove_dir(dir);
}
END_TEST

START_TEST(test_regression_in_target_units)
{
    char dir[256], model[300], feats[300], out[8192];
    clt_test_make_temp_dir(dir, sizeof dir, "predict-reg");
    snprintf(model, sizeof model, "%s/r.safetensors", dir);
    snprintf(feats, sizeof feats, "%s/features.csv", dir);
    clt_device dev = clt_test_cpu();
    int64_t h = 6;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, WIDTH, 1, &h, 1, 3));
    float mean[WIDTH] = {0, 0, 0, 0}, std[WIDTH] = {1, 1, 1, 1}, ym = 250, ys = 40;
    clt_standardizer st;
    ck_assert_ok(clt_standardizer_from_host(&st, WIDTH, mean, std, 1, &ym, &ys));
    clt_checkpoint_info info = {.task = CLT_TASK_REGRESS, .standardizer = &st};
    ck_assert_ok(clt_checkpoint_save(model, m, NULL, &info));
    float x[ROWS * WIDTH], y[ROWS], raw[ROWS], got[ROWS];
    write_rows(feats, x, 0);
    /* The model's own outputs, without the description: values * 40 + 250 come back. */
    ck_assert_ok(clt_model_predict(m, NULL, x, ROWS, WIDTH, raw, NULL));
    clt_model_free(m);
    clt_standardizer_free(&st);
    clt_model_description d;
    ck_assert_ok(clt_model_load(&m, model, dev, &d));
    int32_t untouched[ROWS];
    memset(untouched, 0x7f, sizeof untouched);
    ck_assert_ok(clt_model_predict(m, &d, x, ROWS, WIDTH, y, untouched));
    for (int i = 0; i < ROWS; i++) {
        ck_assert_float_eq_tol(y[i], raw[i] * 40 + 250, 1e-3);
        ck_assert_int_eq(untouched[i], 0x7f7f7f7f);
    }
    /* To standard output. */
    int rc = clt_test_shell(out, sizeof out, "%s predict --load %s --input %s", clt_test_clt_path(), model, feats);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    char *p = out;
    ck_assert_msg(strncmp(p, "predicted\n", 10) == 0, "%s", out);
    p += 10;
    for (int i = 0; i < ROWS; i++) {
        char *end;
        got[i] = strtof(p, &end);
        ck_assert_msg(end != p && *end == '\n', "row %d: %s", i, p);
        ck_assert_msg(got[i] == y[i], "row %d: %.9g against %.9g", i, (double)got[i], (double)y[i]);
        p = end + 1;
    }
    /* clt eval on rows whose target is the library's prediction plus 1: MSE and MAE 1, in the target's units. */
    char labelled[300];
    snprintf(labelled, sizeof labelled, "%s/labelled.csv", dir);
    FILE *f = fopen(labelled, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < ROWS; i++)
        fprintf(f, "%.9g,%.9g,%.9g,%.9g,%.9g\n", (double)x[i * WIDTH], (double)x[i * WIDTH + 1], (double)x[i * WIDTH + 2],
                (double)x[i * WIDTH + 3], (double)y[i] + 1);
    fclose(f);
    rc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s", clt_test_clt_path(), model, labelled);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    const char *mse = strstr(out, "test mse "), *mae = strstr(out, "test mae ");
    ck_assert_msg(mse && mae && strstr(out, "(37 examples, "), "%s", out);
    ck_assert_msg(fabs(atof(mse + 9) - 1) < 1e-3 && fabs(atof(mae + 9) - 1) < 1e-3, "%s", out);
    clt_model_description_free(&d);
    clt_model_free(m);
    clt_test_remove_dir(dir);
}
END_TEST

/* A capstone checkpoint as PyTorch writes it (no metadata: no layer list) is evaluated on Fashion-MNIST's
 * test split, with the library's own figures. */
START_TEST(test_eval_old_checkpoint)
{
    char dir[256], model[300], out[4096];
    clt_test_make_temp_dir(dir, sizeof dir, "eval-old");
    snprintf(model, sizeof model, "%s/old.safetensors", dir);
    clt_test_write_idx_split(dir, "t10k", 64, 5, 0);
    clt_device dev = clt_try_gpu(0); /* where clt eval evaluates without --device */
    char devname[32];
    clt_device_name(dev, devname, sizeof devname);
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 16, 1, 10, 4));
    int n = clt_model_num_parameter_tensors(m);
    const char *names[16];
    clt_tensor *tensors[16];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) ck_assert_ok(clt_model_named_parameter(m, i, &names[i], &tensors[i], NULL));
    ck_assert_ok(clt_safetensors_save(model, n, names, tensors, 0, NULL, NULL));
    clt_dataset test;
    ck_assert_ok(clt_fashion_mnist_load(&test, dir, CLT_SPLIT_TEST));
    double loss, acc;
    clt_model_set_training(m, 0);
    ck_assert_ok(clt_trainer_evaluate(m, &test, 256, 0, &loss, &acc));
    int rc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s", clt_test_clt_path(), model, dir);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    char want[128];
    snprintf(want, sizeof want, "test loss %.4f, test accuracy %.4f (64 images, %s)", loss, acc, devname);
    ck_assert_msg(strstr(out, want), "want '%s': %s", want, out);
    /* The same images as a data file, its labels from --labels. */
    rc = clt_test_shell(out, sizeof out,
                        "%s eval --load %s --data %s/t10k-images-idx3-ubyte --labels %s/t10k-labels-idx1-ubyte",
                        clt_test_clt_path(), model, dir, dir);
    snprintf(want, sizeof want, "test loss %.4f, test accuracy %.4f (64 examples, %s)", loss, acc, devname);
    ck_assert_msg(rc == 0 && strstr(out, want), "exit %d, want '%s': %s", rc, want, out);
    rc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s --hiddens 16 --blocks 2", clt_test_clt_path(),
                        model, dir);
    ck_assert_msg(rc == 2 && strstr(out, "16 hiddens and 1 blocks, not 16 and 2"), "exit %d: %s", rc, out);
    clt_dataset_free(&test);
    clt_model_free(m);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("predict");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_classifier_tool_agrees_with_library);
    tcase_add_test(tc, test_output_checked_up_front);
    tcase_add_test(tc, test_regression_in_target_units);
    tcase_add_test(tc, test_eval_old_checkpoint);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
