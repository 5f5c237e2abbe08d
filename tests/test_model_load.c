/* Self-describing models: clt_checkpoint_save writes a model's layer list,
 * task, class names, example shape and standardizer; clt_model_load rebuilds
 * any model from them (and old capstone files from their tensors), and
 * refuses hostile metadata with CLT_ERR_FORMAT before building anything. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Every parameter of a and b is bit for bit the same, under the same names. */
static void assert_same_parameters(const clt_model *a, const clt_model *b)
{
    ck_assert_int_eq(clt_model_num_parameter_tensors(a), clt_model_num_parameter_tensors(b));
    for (int i = 0; i < clt_model_num_parameter_tensors(a); i++) {
        const char *na, *nb;
        clt_tensor *ta, *tb;
        ck_assert_ok(clt_model_named_parameter(a, i, &na, &ta, NULL));
        ck_assert_ok(clt_model_named_parameter(b, i, &nb, &tb, NULL));
        ck_assert_str_eq(na, nb);
        ck_assert_int_eq(clt_tensor_numel(ta), clt_tensor_numel(tb));
        float *x = clt_test_read(ta), *y = clt_test_read(tb);
        ck_assert_msg(memcmp(x, y, (size_t)clt_tensor_numel(ta) * sizeof *x) == 0, "%s differs", na);
        free(x);
        free(y);
    }
    ck_assert_int_eq(clt_model_num_layers(a), clt_model_num_layers(b));
    for (int i = 0; i < clt_model_num_layers(a); i++) {
        clt_layer_info la, lb;
        ck_assert_ok(clt_model_layer(a, i, &la));
        ck_assert_ok(clt_model_layer(b, i, &lb));
        ck_assert_int_eq(la.kind, lb.kind);
        ck_assert_int_eq(la.in_features, lb.in_features);
        ck_assert_int_eq(la.out_features, lb.out_features);
        ck_assert_str_eq(la.name, lb.name);
    }
}

static clt_standardizer make_standardizer(int64_t width, int64_t outputs)
{
    float xm[16], xs[16], ym[4], ys[4];
    for (int i = 0; i < width; i++) {
        xm[i] = 0.25f * (float)i - 1.0f;
        xs[i] = 0.5f + 0.125f * (float)i;
    }
    for (int i = 0; i < outputs; i++) {
        ym[i] = 100.0f + (float)i;
        ys[i] = 7.0f;
    }
    clt_standardizer s;
    ck_assert_ok(clt_standardizer_from_host(&s, width, xm, xs, outputs, outputs ? ym : NULL, outputs ? ys : NULL));
    return s;
}

START_TEST(test_mlp_round_trip_with_standardizer)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "model-mlp");
    snprintf(path, sizeof path, "%s/mlp.safetensors", dir);
    clt_device dev = clt_test_cpu();
    int64_t hiddens[2] = {12, 7};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 6, 2, hiddens, 3, 42));
    clt_standardizer st = make_standardizer(6, 0);
    const char *names[3] = {"setosa", "versi,color \"x\"", "virgin\xc3\xa9"};
    clt_checkpoint_info info = {.task = CLT_TASK_CLASSIFY, .num_classes = 3, .class_names = names, .example_ndim = 2,
                                .example_shape = {2, 3}, .target = "species", .standardizer = &st, .epoch = 4};
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, &info));

    clt_model *back;
    clt_model_description d;
    ck_assert_ok(clt_model_load(&back, path, dev, &d));
    assert_same_parameters(m, back);
    ck_assert_int_eq(clt_model_training(back), 0);
    ck_assert_int_eq(d.task, CLT_TASK_CLASSIFY);
    ck_assert_int_eq(d.num_inputs, 6);
    ck_assert_int_eq(d.num_outputs, 3);
    ck_assert_int_eq(d.num_classes, 3);
    for (int c = 0; c < 3; c++) ck_assert_str_eq(d.class_names[c], names[c]);
    ck_assert_int_eq(d.example_ndim, 2);
    ck_assert_int_eq(d.example_shape[0], 2);
    ck_assert_int_eq(d.example_shape[1], 3);
    ck_assert_str_eq(d.target, "species");
    ck_assert_int_eq(d.info.epoch, 4);
    ck_assert_int_eq(d.has_standardizer, 1);
    ck_assert_int_eq(d.standardizer.width, 6);
    ck_assert_int_eq(d.standardizer.outputs, 0);
    ck_assert(memcmp(d.standardizer.x_mean, st.x_mean, 6 * sizeof(float)) == 0);
    ck_assert(memcmp(d.standardizer.x_std, st.x_std, 6 * sizeof(float)) == 0);

    /* The extra tensors and keys do not stop clt_checkpoint_load, which
     * reports the numbers. */
    clt_checkpoint_info got;
    ck_assert_ok(clt_checkpoint_load(path, back, NULL, &got));
    ck_assert_int_eq(got.num_classes, 3);
    ck_assert_int_eq(got.example_ndim, 2);
    ck_assert_ptr_null(got.class_names);
    ck_assert_ptr_null(got.standardizer);
    ck_assert_int_eq(got.epoch, 4);

    /* A model of another arrangement of layers with the same tensors is refused. */
    clt_model *other;
    ck_assert_ok(clt_model_create(&other, ""));
    ck_assert_ok(clt_model_add_linear(other, 6, 12));
    ck_assert_ok(clt_model_add_flatten(other)); /* where the MLP has a ReLU */
    ck_assert_ok(clt_model_add_linear(other, 12, 7));
    ck_assert_ok(clt_model_add_relu(other));
    ck_assert_ok(clt_model_add_linear(other, 7, 3));
    ck_assert_ok(clt_model_init(other, dev, 1));
    ck_assert_status(clt_checkpoint_load(path, other, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "cltensor.layers"), "%s", clt_last_error());
    clt_model_free(other);

    clt_model_description_free(&d);
    clt_model_description_free(&d); /* zeroed: a second free is harmless */
    clt_model_free(back);
    clt_model_free(m);
    clt_standardizer_free(&st);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_resmlp_and_regression_round_trip)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "model-res");
    snprintf(path, sizeof path, "%s/res.safetensors", dir);
    clt_device dev = clt_test_cpu();
    /* A ResMLP saved as the tool saves it, no description beyond the numbers. */
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, 10, 8, 2, 4, 3));
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = 8, .blocks = 2};
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, &info));
    clt_model *back;
    clt_model_description d;
    ck_assert_ok(clt_model_load(&back, path, dev, &d));
    assert_same_parameters(m, back);
    ck_assert_str_eq(clt_model_prefix(back), "net");
    ck_assert_int_eq(d.num_classes, 4);
    ck_assert_str_eq(d.class_names[3], "3");
    ck_assert_int_eq(d.example_ndim, 1);
    ck_assert_int_eq(d.example_shape[0], 10);
    ck_assert_int_eq(d.has_standardizer, 0);
    ck_assert_int_eq(d.info.hiddens, 8);
    ck_assert_ptr_null(d.target);
    clt_model_description_free(&d);
    clt_model_free(back);
    clt_model_free(m);

    /* A regression of two targets with a standardizer of features and targets; desc NULL. */
    int64_t h = 5;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 4, 1, &h, 2, 9));
    clt_standardizer st = make_standardizer(4, 2);
    clt_checkpoint_info ri = {.task = CLT_TASK_REGRESS, .standardizer = &st};
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, &ri));
    ck_assert_ok(clt_model_load(&back, path, dev, NULL));
    assert_same_parameters(m, back);
    clt_model_free(back);
    ck_assert_ok(clt_model_load(&back, path, dev, &d));
    ck_assert_int_eq(d.task, CLT_TASK_REGRESS);
    ck_assert_int_eq(d.num_classes, 0);
    ck_assert_ptr_null(d.class_names);
    ck_assert_int_eq(d.standardizer.outputs, 2);
    ck_assert(memcmp(d.standardizer.y_mean, st.y_mean, 2 * sizeof(float)) == 0);
    ck_assert(memcmp(d.standardizer.y_std, st.y_std, 2 * sizeof(float)) == 0);
    clt_model_description_free(&d);
    clt_model_free(back);

    /* What does not describe the model is refused when saving. */
    const char *one[1] = {"a"};
    clt_checkpoint_info bad = {.num_classes = 1, .class_names = one};
    ck_assert_status(clt_checkpoint_save(path, m, NULL, &bad), CLT_ERR_INVALID_ARGUMENT);
    bad = (clt_checkpoint_info){.task = CLT_TASK_REGRESS, .example_ndim = 1, .example_shape = {5}};
    ck_assert_status(clt_checkpoint_save(path, m, NULL, &bad), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "5 values") && strstr(clt_last_error(), "takes 4"), "%s", clt_last_error());
    clt_standardizer wide = make_standardizer(5, 0);
    bad = (clt_checkpoint_info){.task = CLT_TASK_REGRESS, .standardizer = &wide};
    ck_assert_status(clt_checkpoint_save(path, m, NULL, &bad), CLT_ERR_INVALID_ARGUMENT);
    bad = (clt_checkpoint_info){.task = CLT_TASK_CLASSIFY, .standardizer = &st}; /* targets for a classifier */
    ck_assert_status(clt_checkpoint_save(path, m, NULL, &bad), CLT_ERR_INVALID_ARGUMENT);
    const char *latin1[2] = {"ok", "caf\xe9"};
    bad = (clt_checkpoint_info){.num_classes = 2, .class_names = latin1};
    ck_assert_status(clt_checkpoint_save(path, m, NULL, &bad), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "class name 1"), "%s", clt_last_error());
    /* The file from before is still whole. */
    ck_assert_ok(clt_model_load(&back, path, dev, NULL));
    clt_model_free(back);
    clt_standardizer_free(&wide);
    clt_standardizer_free(&st);
    clt_model_free(m);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The model's parameters under their names, with the given metadata (pairs)
 * and extra tensors. */
static void save_raw(const char *path, const clt_model *m, int nmeta, const char *const *keys,
                     const char *const *values, int nextra, const char *const *extra_names, clt_tensor *const *extra)
{
    const char *names[64];
    clt_tensor *tensors[64];
    int n = clt_model_num_parameter_tensors(m);
    ck_assert_int_le(n + nextra, 64);
    for (int i = 0; i < n; i++) ck_assert_ok(clt_model_named_parameter(m, i, &names[i], &tensors[i], NULL));
    for (int i = 0; i < nextra; i++) {
        names[n + i] = extra_names[i];
        tensors[n + i] = extra[i];
    }
    ck_assert_ok(clt_safetensors_save(path, n + nextra, names, tensors, nmeta, keys, values));
}

/* A checkpoint of the capstone's `clt train` from before models described
 * themselves: only arch, hiddens, blocks and the counters. */
START_TEST(test_capstone_checkpoint_loads)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "model-old");
    snprintf(path, sizeof path, "%s/old.safetensors", dir);
    clt_device dev = clt_test_cpu();
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 16, 2, 10, 5));
    const char *keys[] = {"format", "cltensor.arch", "cltensor.hiddens", "cltensor.blocks", "cltensor.epoch"};
    const char *values[] = {"pt", "resmlp", "16", "2", "3"};
    save_raw(path, m, 5, keys, values, 0, NULL, NULL);
    clt_model *back;
    clt_model_description d;
    ck_assert_ok(clt_model_load(&back, path, dev, &d));
    assert_same_parameters(m, back);
    ck_assert_int_eq(d.num_inputs, 784);
    ck_assert_int_eq(d.num_classes, 10);
    ck_assert_int_eq(d.info.epoch, 3);
    ck_assert_int_eq(clt_model_num_blocks(back), 2);
    clt_model_description_free(&d);
    clt_model_free(back);
    /* Its tensors alone (a PyTorch state_dict) load as well. */
    save_raw(path, m, 0, NULL, NULL, 0, NULL, NULL);
    ck_assert_ok(clt_model_load(&back, path, dev, NULL));
    assert_same_parameters(m, back);
    clt_model_free(back);
    clt_model_free(m);
    /* A file that is neither. */
    int64_t h = 4;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 3, 1, &h, 2, 1));
    save_raw(path, m, 0, NULL, NULL, 0, NULL, NULL);
    ck_assert_status(clt_model_load(&back, path, dev, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_null(back);
    ck_assert_msg(strstr(clt_last_error(), "not a ResMLP checkpoint"), "%s", clt_last_error());
    clt_model_free(m);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Each hostile description is CLT_ERR_FORMAT naming the file and the key,
 * with no model, no description and no memory left behind. */
START_TEST(test_hostile_metadata_refused)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "model-bad");
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    clt_device dev = clt_test_cpu();
    int64_t h = 4;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 3, 1, &h, 2, 1)); /* 0: Linear(3,4), 1: ReLU, 2: Linear(4,2) */
    const char *good = "[{\"kind\":\"linear\",\"in\":3,\"out\":4},{\"kind\":\"relu\"},{\"kind\":\"linear\",\"in\":4,"
                       "\"out\":2}]";
    /* 4097 ReLUs and one Linear: too many layers. */
    size_t many_len = 4097 * 16 + 64;
    char *many = malloc(many_len);
    ck_assert_ptr_nonnull(many);
    strcpy(many, "[{\"kind\":\"linear\",\"in\":3,\"out\":4}");
    for (int i = 0; i < 4097; i++) strcat(many, ",{\"kind\":\"relu\"}");
    strcat(many, "]");
    const struct {
        const char *key, *value, *expect;
    } bad[] = {
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":3,\"out\":4}", "not JSON"},
        {"cltensor.layers", "{}", "array of 1 to 4096"},
        {"cltensor.layers", "[]", "array of 1 to 4096"},
        {"cltensor.layers", many, "array of 1 to 4096"},
        {"cltensor.layers", "[{\"kind\":\"relu\"}]", "no linear or residual"},
        {"cltensor.layers", "[{\"kind\":\"conv\"}]", "unknown kind"},
        {"cltensor.layers", "[7]", "layer 0 is not an object"},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":3}]", "needs \"in\" and \"out\""},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":3,\"out\":4.0}]", "needs \"in\" and \"out\""},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":0,\"out\":4}]", "needs \"in\" and \"out\""},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":3,\"out\":2147483648}]", "needs \"in\" and \"out\""},
        {"cltensor.layers", "[{\"kind\":\"relu\",\"in\":3}]", "fields its kind does not take"},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":3,\"out\":4},{\"kind\":\"linear\",\"in\":5,\"out\":2}]",
         "takes 5 features but the layer before gives 4"},
        /* Sizes whose parameter count overflows, then one that fits but is not the file's. */
        {"cltensor.layers",
         "[{\"kind\":\"residual\",\"width\":2147483647},{\"kind\":\"residual\",\"width\":2147483647},"
         "{\"kind\":\"residual\",\"width\":2147483647},{\"kind\":\"residual\",\"width\":2147483647},"
         "{\"kind\":\"residual\",\"width\":2147483647},{\"kind\":\"residual\",\"width\":2147483647},"
         "{\"kind\":\"residual\",\"width\":2147483647},{\"kind\":\"residual\",\"width\":2147483647},"
         "{\"kind\":\"residual\",\"width\":2147483647},{\"kind\":\"residual\",\"width\":2147483647}]",
         "more parameters than fit"},
        {"cltensor.layers", "[{\"kind\":\"linear\",\"in\":100000,\"out\":100000}]",
         "parameters but the file's tensors hold 26"},
        {"cltensor.task", "cluster", "\"classify\" or \"regress\""},
        {"cltensor.prefix", "a-prefix-of-more-than-thirty-one-bytes", "longer than 31"},
        {"cltensor.class_names", "[\"a\",\"b\",\"c\"]", "names 3 classes but the model is a classifier of 2"},
        {"cltensor.class_names", "[\"a\",2]", "other than a string"},
        {"cltensor.class_names", "[\"a\",\"b\\u0000c\"]", "NUL"},
        {"cltensor.class_names", "[]", "array of 1 to"},
        {"cltensor.example_shape", "[2,2]", "does not hold the model's 3 inputs"},
        {"cltensor.example_shape", "[2147483647,2147483647,2147483647,2147483647,2147483647]",
         "does not hold the model's 3 inputs"},
        {"cltensor.example_shape", "[3,0]", "outside 1..2147483647"},
        {"cltensor.example_shape", "[1,1,1,1,1,1,1,3]", "1 to 7 sizes"},
    };
    int64_t before = clt_memory_allocated(dev);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *keys[3] = {"cltensor.layers", "cltensor.task", bad[i].key};
        const char *values[3] = {good, "classify", bad[i].value};
        int n = 3;
        if (strcmp(bad[i].key, keys[0]) == 0 || strcmp(bad[i].key, keys[1]) == 0) {
            values[strcmp(bad[i].key, keys[0]) == 0 ? 0 : 1] = bad[i].value;
            n = 2;
        }
        save_raw(path, m, n, keys, values, 0, NULL, NULL);
        clt_model *back = (clt_model *)1;
        clt_model_description d;
        d.num_classes = 99;
        ck_assert_status(clt_model_load(&back, path, dev, &d), CLT_ERR_FORMAT);
        ck_assert_msg(strstr(clt_last_error(), path) && strstr(clt_last_error(), bad[i].key) &&
                          strstr(clt_last_error(), bad[i].expect),
                      "case %zu: %s", i, clt_last_error());
        ck_assert_ptr_null(back);
        ck_assert_int_eq(d.num_classes, 0);
        ck_assert_int_eq(clt_memory_allocated(dev), before);
        /* clt_checkpoint_load checks the same metadata. */
        ck_assert_status(clt_checkpoint_load(path, m, NULL, NULL), CLT_ERR_FORMAT);
    }
    free(many);
    /* Classes named for a regression. */
    const char *rk[3] = {"cltensor.layers", "cltensor.task", "cltensor.class_names"};
    const char *rv[3] = {good, "regress", "[\"a\",\"b\"]"};
    save_raw(path, m, 3, rk, rv, 0, NULL, NULL);
    clt_model *back;
    ck_assert_status(clt_model_load(&back, path, dev, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "cltensor.class_names"), "%s", clt_last_error());
    clt_model_free(m);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The preprocess.* tensors: F32 vectors of the model's widths, in pairs,
 * finite means and positive deviations; nothing else under that prefix. */
START_TEST(test_hostile_standardizer_refused)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "model-pre");
    snprintf(path, sizeof path, "%s/pre.safetensors", dir);
    clt_device dev = clt_test_cpu();
    int64_t h = 4, three = 3, four = 4;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 3, 1, &h, 2, 1));
    const char *keys[2] = {"cltensor.layers", "cltensor.task"};
    const char *values[2] = {"[{\"kind\":\"linear\",\"in\":3,\"out\":4},{\"kind\":\"relu\"},{\"kind\":\"linear\","
                             "\"in\":4,\"out\":2}]", "classify"};
    float ok[4] = {0, 1, 2, 3}, zero[3] = {1, 0, 1}, nan3[3] = {NAN, 0, 0};
    clt_tensor *mean, *std, *wide, *zstd, *nmean;
    ck_assert_ok(clt_from_host(&mean, dev, CLT_FLOAT32, 1, &three, ok));
    ck_assert_ok(clt_from_host(&std, dev, CLT_FLOAT32, 1, &three, ok + 1));
    ck_assert_ok(clt_from_host(&wide, dev, CLT_FLOAT32, 1, &four, ok));
    ck_assert_ok(clt_from_host(&zstd, dev, CLT_FLOAT32, 1, &three, zero));
    ck_assert_ok(clt_from_host(&nmean, dev, CLT_FLOAT32, 1, &three, nan3));
    const struct {
        int n;
        const char *names[2];
        clt_tensor *t[2];
        const char *expect;
    } bad[] = {
        {1, {"preprocess.x_mean"}, {mean}, "in pairs"},
        {2, {"preprocess.x_mean", "preprocess.x_std"}, {mean, wide}, "preprocess.x_std must be F32 of shape (3)"},
        {2, {"preprocess.x_mean", "preprocess.x_std"}, {mean, zstd}, "positive finite deviation"},
        {2, {"preprocess.x_mean", "preprocess.x_std"}, {nmean, std}, "finite mean"},
        {2, {"preprocess.x_mean", "preprocess.scale"}, {mean, std}, "preprocess.scale is not one of"},
        {2, {"preprocess.y_mean", "preprocess.y_std"}, {mean, std}, "preprocess.y_mean standardizes a regression's targets, but the model is a classifier"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        save_raw(path, m, 2, keys, values, bad[i].n, bad[i].names, bad[i].t);
        clt_model *back;
        ck_assert_status(clt_model_load(&back, path, dev, NULL), CLT_ERR_FORMAT);
        ck_assert_msg(strstr(clt_last_error(), path) && strstr(clt_last_error(), bad[i].expect), "case %zu: %s", i,
                      clt_last_error());
        ck_assert_ptr_null(back);
        /* clt_checkpoint_load, which does not read them, loads the parameters. */
        ck_assert_ok(clt_checkpoint_load(path, m, NULL, NULL));
    }
    clt_tensor_release(mean);
    clt_tensor_release(std);
    clt_tensor_release(wide);
    clt_tensor_release(zstd);
    clt_tensor_release(nmean);
    clt_model_free(m);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_load");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_mlp_round_trip_with_standardizer);
    tcase_add_test(tc, test_resmlp_and_regression_round_trip);
    tcase_add_test(tc, test_capstone_checkpoint_loads);
    tcase_add_test(tc, test_hostile_metadata_refused);
    tcase_add_test(tc, test_hostile_standardizer_refused);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
