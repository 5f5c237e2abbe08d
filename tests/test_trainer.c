/* The Trainer and checkpoints, on a small synthetic dataset made here: each
 * class lights its own band of pixels, so a ResMLP learns it in a few steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "trainer/progress.h"

static clt_trainer_options quiet_options(void)
{
    clt_trainer_options o = clt_trainer_default_options();
    o.log = NULL;
    o.progress = 0;
    o.batch_size = 32;
    return o;
}

static clt_model *resmlp(uint64_t seed)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 1, 10, seed));
    return m;
}

static float *params(const clt_model *m)
{
    return clt_test_read(clt_model_parameters(m));
}

START_TEST(test_fit_learns_and_reports)
{
    clt_dataset train = clt_test_make_dataset(320, 1), val = clt_test_make_dataset(64, 2);
    clt_model *m = resmlp(0);
    clt_trainer_options o = quiet_options();
    o.max_epochs = 3;
    char metrics[] = "/tmp/clt-test-metrics-XXXXXX", plot[] = "/tmp/clt-test-plot-XXXXXX";
    close(mkstemp(metrics));
    close(mkstemp(plot));
    o.metrics_path = metrics;
    o.plot_path = plot;
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &train, &val, &o, &r));
    ck_assert_int_eq(r.epochs, 3);
    ck_assert_int_eq(r.steps, 30);
    ck_assert_msg(r.train_loss < 1.0, "train loss %g did not fall", r.train_loss);
    ck_assert_msg(r.val_accuracy > 0.9, "val accuracy %g", r.val_accuracy);
    ck_assert(r.images_per_second > 0);

    FILE *f = fopen(metrics, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int lines = 0;
    while (fgets(line, sizeof line, f)) lines++;
    fclose(f);
    ck_assert_int_eq(lines, 4);
    f = fopen(plot, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(strstr(line, "<svg"));
    fclose(f);
    remove(metrics);
    remove(plot);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_same_seed_same_result)
{
    clt_dataset train = clt_test_make_dataset(100, 3);
    clt_trainer_options o = quiet_options();
    o.seed = 5;
    clt_model *a = resmlp(9), *b = resmlp(9);
    ck_assert_ok(clt_trainer_fit(a, &train, NULL, &o, NULL));
    ck_assert_ok(clt_trainer_fit(b, &train, NULL, &o, NULL));
    float *pa = params(a), *pb = params(b);
    ck_assert_int_eq(memcmp(pa, pb, clt_tensor_nbytes(clt_model_parameters(a))), 0);
    free(pa);
    free(pb);
    clt_model_free(a);
    clt_model_free(b);
    clt_dataset_free(&train);
}
END_TEST

START_TEST(test_num_gpus_is_a_ceiling)
{
    clt_dataset train = clt_test_make_dataset(40, 4);
    clt_trainer_options o = quiet_options();
    o.max_steps = 1;
    clt_trainer_result r;
    clt_model *m = resmlp(1);
    o.num_gpus = 0;
    if (clt_device_exists((clt_device){CLT_DEVICE_CPU, 0, 0})) {
        ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
        ck_assert_str_eq(r.device, "cpu:0");
    } else {
        /* No CPU device (CLT_CPU_AS_GPU=only): no GPU means cpu:0, which is not there. */
        ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, &r), CLT_ERR_NO_DEVICE);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "cpu:0"));
    }
    o.num_gpus = 64;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_str_eq(r.device, clt_num_gpus() > 0 ? "gpu:0" : "cpu:0");
    ck_assert_int_eq(r.steps, 1);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

/* A stop request ends the fit it finds and no other. */
START_TEST(test_stop_request_is_consumed)
{
    clt_dataset train = clt_test_make_dataset(64, 8);
    clt_model *m = resmlp(1);
    clt_trainer_options o = quiet_options();
    clt_trainer_result r;
    clt_trainer_request_stop();
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_eq(r.steps, 0);
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_int_eq(r.stopped, 0);
    ck_assert_int_eq(r.steps, 2);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

START_TEST(test_bad_options)
{
    clt_dataset train = clt_test_make_dataset(10, 5);
    clt_model *m = resmlp(1);
    clt_trainer_options o = quiet_options();
    o.batch_size = 0;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "batch_size"));
    o = quiet_options();
    o.lr = -1;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    o = quiet_options();
    o.use_device = 1;
    o.device = clt_gpu(99);
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_trainer_fit(NULL, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

START_TEST(test_checkpoint_round_trip_exact)
{
    char path[] = "/tmp/clt-test-ckpt-XXXXXX";
    close(mkstemp(path));
    clt_model *a = resmlp(11), *b = resmlp(12);
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = 32, .blocks = 1, .epoch = 3, .steps = 30};
    ck_assert_ok(clt_checkpoint_save(path, a, NULL, &info));
    int64_t h, k;
    ck_assert_ok(clt_checkpoint_resmlp_shape(path, &h, &k));
    ck_assert_int_eq(h, 32);
    ck_assert_int_eq(k, 1);
    clt_checkpoint_info got;
    ck_assert_ok(clt_checkpoint_load(path, b, NULL, &got));
    ck_assert_int_eq(got.epoch, 3);
    ck_assert_int_eq(got.steps, 30);
    float *pa = params(a), *pb = params(b);
    ck_assert_int_eq(memcmp(pa, pb, clt_tensor_nbytes(clt_model_parameters(a))), 0);
    free(pa);
    free(pb);
    remove(path);
    clt_model_free(a);
    clt_model_free(b);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_checkpoint_with_adam_state)
{
    char path[] = "/tmp/clt-test-ckpt-XXXXXX";
    close(mkstemp(path));
    clt_dataset train = clt_test_make_dataset(64, 6);
    clt_model *a = resmlp(1);
    clt_trainer_options o = quiet_options();
    o.optimizer = CLT_OPTIMIZER_ADAM;
    o.lr = 1e-3f;
    o.save_path = path;
    ck_assert_ok(clt_trainer_fit(a, &train, NULL, &o, NULL));
    clt_model *b = resmlp(2);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, b, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    ck_assert_ok(clt_checkpoint_load(path, b, opt, NULL));
    ck_assert_int_eq(clt_optimizer_steps(opt), 2);
    ck_assert_int_eq(clt_optimizer_num_states(opt), 2);
    clt_tensor *m1;
    ck_assert_ok(clt_optimizer_state(opt, 0, NULL, &m1));
    ck_assert_ptr_nonnull(m1);
    float *s = clt_test_read(m1);
    double norm = 0;
    for (int64_t i = 0; i < clt_tensor_numel(m1); i++) norm += fabs(s[i]);
    ck_assert_msg(norm > 0, "Adam's first moment was not restored");
    free(s);
    clt_optimizer_free(opt);
    remove(path);
    clt_model_free(a);
    clt_model_free(b);
    clt_dataset_free(&train);
}
END_TEST

START_TEST(test_checkpoint_refuses_other_architecture)
{
    char path[] = "/tmp/clt-test-ckpt-XXXXXX";
    close(mkstemp(path));
    clt_model *small = resmlp(1), *wide;
    ck_assert_ok(clt_model_create_resmlp(&wide, clt_test_cpu(), 784, 64, 1, 10, 1));
    ck_assert_ok(clt_checkpoint_save(path, small, NULL, NULL));
    float *before = params(wide);
    ck_assert_status(clt_checkpoint_load(path, wide, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "net.1.weight"));
    float *after = params(wide);
    ck_assert_int_eq(memcmp(before, after, clt_tensor_nbytes(clt_model_parameters(wide))), 0);
    free(before);
    free(after);
    clt_model *deeper;
    ck_assert_ok(clt_model_create_resmlp(&deeper, clt_test_cpu(), 784, 32, 2, 10, 1));
    ck_assert_status(clt_checkpoint_load(path, deeper, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "missing"));
    /* Every parameter present, plus one the model does not have. */
    int n = clt_model_num_parameter_tensors(small);
    const char *names[16];
    clt_tensor *tensors[16];
    ck_assert_int_lt(n, 16);
    for (int i = 0; i < n; i++) ck_assert_ok(clt_model_named_parameter(small, i, &names[i], &tensors[i], NULL));
    names[n] = "net.9.weight";
    tensors[n] = tensors[0];
    ck_assert_ok(clt_safetensors_save(path, n + 1, names, tensors, 0, NULL, NULL));
    ck_assert_status(clt_checkpoint_load(path, small, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "net.9.weight"));
    remove(path);
    clt_model_free(small);
    clt_model_free(wide);
    clt_model_free(deeper);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_checkpoint_missing_and_corrupt_files)
{
    clt_model *m = resmlp(1);
    ck_assert_status(clt_checkpoint_load("/nonexistent/ckpt.safetensors", m, NULL, NULL), CLT_ERR_IO);
    char path[] = "/tmp/clt-test-ckpt-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_eq(write(fd, "\x10\0\0\0\0\0\0\0{not json", 17), 17);
    close(fd);
    ck_assert_status(clt_checkpoint_load(path, m, NULL, NULL), CLT_ERR_FORMAT);
    remove(path);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The library prints nothing unless asked: no log and no bar by default. */
START_TEST(test_default_options_are_silent)
{
    clt_trainer_options o = clt_trainer_default_options();
    ck_assert_ptr_null(o.log);
    ck_assert_int_eq(o.progress, 0);
}
END_TEST

/* The epoch line leaves out what does not exist (no validation set: no
 * "val loss nan") and says when a step limit stopped the epoch part way. */
START_TEST(test_log_line)
{
    clt_dataset train = clt_test_make_dataset(96, 1);
    clt_model *m = resmlp(0);
    clt_trainer_options o = quiet_options();
    char buf[4096] = "";
    FILE *log = fmemopen(buf, sizeof buf - 1, "w");
    ck_assert_ptr_nonnull(log);
    o.log = log;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, NULL));
    o.max_steps = 1;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, NULL));
    fclose(log);
    ck_assert_msg(strstr(buf, "epoch 1/1: train loss") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "val loss") == NULL && strstr(buf, "nan") == NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "epoch 1/1 (stopped after batch 1 of 3): train loss") != NULL, "%s", buf);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

/* An empty validation set is no sign of divergence: a healthy run with one
 * trains every epoch, its validation figures NaN (nothing evaluated). */
START_TEST(test_empty_validation_set)
{
    clt_dataset train = clt_test_make_dataset(64, 1), val = clt_test_make_dataset(0, 2);
    clt_model *m = resmlp(0);
    clt_trainer_options o = quiet_options();
    o.max_epochs = 2;
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &train, &val, &o, &r));
    ck_assert_int_eq(r.epochs, 2);
    ck_assert(isfinite(r.train_loss));
    ck_assert(isnan(r.val_loss));
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
}
END_TEST

/* The progress bar counts what the epoch's log line counts (the engine's
 * one choice, which the log line reads back from the bar): examples/s for
 * tables, images/s for images. */
START_TEST(test_progress_unit)
{
    for (int tabular = 0; tabular <= 1; tabular++) {
        char buf[512];
        memset(buf, 0, sizeof buf);
        FILE *f = fmemopen(buf, sizeof buf - 1, "w");
        ck_assert_ptr_nonnull(f);
        clt__progress p;
        clt__progress_init(&p, f, "cpu:0", tabular ? "examples" : "images");
        clt__progress_begin(&p, 1, 2, 10);
        clt__progress_update(&p, 5, 160, 0.5);
        fclose(f);
        ck_assert_msg(strstr(buf, tabular ? " examples/s " : " images/s ") && strstr(buf, "epoch 1/2 ["), "%s", buf);
        ck_assert_msg(!strstr(buf, "img/s"), "%s", buf);
    }
}
END_TEST

START_TEST(test_empty_dataset_is_refused)
{
    clt_dataset train = clt_test_make_dataset(8, 1);
    clt_model *m = resmlp(0);
    clt_trainer_options o = quiet_options();
    int64_t n = train.n;
    train.n = 0;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "no examples"));
    train.n = n;
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* The epoch's last step breaks the model: its loss, read before the update,
 * is finite, the parameters after it are not. The validation loss (or,
 * without validation examples: no set, or an empty one, the parameters)
 * show it: CLT_ERR_DIVERGED and no checkpoint, as for a non-finite training
 * loss. */
START_TEST(test_divergence_at_the_last_step)
{
    char dir[256], ckpt[300];
    clt_test_make_temp_dir(dir, sizeof dir, "diverge-last");
    snprintf(ckpt, sizeof ckpt, "%s/c.st", dir);
    enum { N = 32, W = 4 };
    float x[N * W], y[N];
    clt_test_fill_uniform(x, N * W, 1, 0.0f, 30000.0f);
    clt_test_fill_uniform(y, N, 2, 0.0f, 30000.0f);
    clt_dataset train;
    ck_assert_ok(clt_dataset_from_host(&train, N, W, x, NULL, 0, NULL, y, 1));
    clt_trainer_options o = quiet_options();
    o.batch_size = N; /* one step: the epoch's last, its loss (before the update) finite */
    o.lr = 1e30f; /* the update overflows */
    o.save_path = ckpt;
    int64_t h = 32;
    clt_dataset empty = train; /* the same layout, no examples */
    empty.n = 0;
    for (int val_kind = 2; val_kind >= 0; val_kind--) { /* 2: the training set, 1: an empty one, 0: none */
        int with_val = val_kind == 2;
        clt_model *m;
        ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), W, 1, &h, 1, 0));
        clt_trainer_result r;
        const clt_dataset *val = val_kind == 2 ? &train : val_kind == 1 ? &empty : NULL;
        ck_assert_status(clt_trainer_fit(m, &train, val, &o, &r), CLT_ERR_DIVERGED);
        const char *msg = clt_last_error();
        ck_assert_msg(strstr(msg, "diverged") && strstr(msg, "after epoch 1 (step 1)") &&
                          strstr(msg, with_val ? "the validation loss is" : "the parameters are not finite") &&
                          strstr(msg, "learning rate"), "%s", msg);
        ck_assert_msg(access(ckpt, F_OK) != 0, "a checkpoint was written: %s", msg);
        ck_assert_int_eq(r.saves, 0);
        clt_model_free(m);
    }
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

/* A non-finite loss stops the run with CLT_ERR_DIVERGED naming the epoch,
 * the step and the loss, and writes nothing: the last good checkpoint and
 * metrics stay as they were. */
START_TEST(test_divergence_stops_and_keeps_the_checkpoint)
{
    char dir[256], ckpt[300], csv[300];
    clt_test_make_temp_dir(dir, sizeof dir, "diverge");
    snprintf(ckpt, sizeof ckpt, "%s/c.st", dir);
    snprintf(csv, sizeof csv, "%s/m.csv", dir);
    clt_dataset train = clt_test_make_dataset(96, 1);
    clt_model *m = resmlp(0);
    clt_trainer_options o = quiet_options();
    o.save_path = ckpt;
    o.metrics_path = csv;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, NULL));
    char *good = clt_test_read_file(ckpt), *good_csv = clt_test_read_file(csv);
    long good_size = file_size(ckpt);
    o.lr = 1e6f;
    o.max_epochs = 3;
    clt_trainer_result r;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, &r), CLT_ERR_DIVERGED);
    const char *msg = clt_last_error();
    ck_assert_msg(strstr(msg, "diverged") && strstr(msg, "epoch 1") && strstr(msg, "nan") &&
                      strstr(msg, "learning rate"), "%s", msg);
    ck_assert_int_eq(file_size(ckpt), good_size);
    char *after = clt_test_read_file(ckpt), *after_csv = clt_test_read_file(csv);
    ck_assert_int_eq(memcmp(good, after, (size_t)good_size), 0);
    ck_assert_str_eq(good_csv, after_csv);
    ck_assert_int_eq(r.epochs, 0);
    ck_assert_str_eq(clt_status_string(CLT_ERR_DIVERGED), "CLT_ERR_DIVERGED");
    free(good);
    free(after);
    free(good_csv);
    free(after_csv);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

/* A float16 run whose every step overflows (a static loss scale of 1e30)
 * skips them all: CLT_ERR_DIVERGED saying so. One that skips some reports
 * how many. */
START_TEST(test_fp16_all_steps_skipped)
{
    clt_dataset train = clt_test_make_dataset(64, 1);
    clt_model *m = resmlp(0);
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_model_set_loss_scale(m, 1e30f, 0));
    clt_trainer_options o = quiet_options();
    o.fp16 = 1;
    clt_trainer_result r;
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, &r), CLT_ERR_DIVERGED);
    ck_assert_msg(strstr(clt_last_error(), "every one of the 2 steps of epoch 1 was skipped"), "%s", clt_last_error());
    ck_assert_int_eq(r.skipped_steps, 2);
    /* A dynamic scale of 3 * 2^20 overflows at first (test_data_parallel's
     * test_half_overflow_skips_everywhere), halves, then fits. */
    clt_dataset more = clt_test_make_dataset(320, 1);
    ck_assert_ok(clt_model_set_loss_scale(m, 3145728.0f, 1));
    ck_assert_ok(clt_trainer_fit(m, &more, NULL, &o, &r));
    ck_assert_int_eq(r.steps, 10);
    ck_assert_int_gt(r.skipped_steps, 0);
    ck_assert_int_lt(r.skipped_steps, r.steps);
    clt_dataset_free(&more);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

/* Saves m's parameters under key=value metadata. */
static void save_with_metadata(const char *path, const clt_model *m, const char *key, const char *value)
{
    int n = clt_model_num_parameter_tensors(m);
    const char *names[16], *keys[2] = {"format", key}, *values[2] = {"pt", value};
    clt_tensor *tensors[16];
    ck_assert_int_lt(n, 16);
    for (int i = 0; i < n; i++) ck_assert_ok(clt_model_named_parameter(m, i, &names[i], &tensors[i], NULL));
    ck_assert_ok(clt_safetensors_save(path, n, names, tensors, 2, keys, values));
}

/* Resume metadata is checked, not trusted: out of range, unparsable or
 * contradicting the file's tensors or the run is CLT_ERR_FORMAT naming the
 * key and the value, before anything is loaded. */
START_TEST(test_resume_metadata_is_checked)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "meta");
    snprintf(path, sizeof path, "%s/c.st", dir);
    clt_model *m = resmlp(0);
    const struct {
        const char *key, *value;
    } bad[] = {
        {"cltensor.epoch", "2147483647"},
        {"cltensor.epoch", "banana"},
        {"cltensor.epoch", "4294967296"},
        {"cltensor.epoch", "-1"},
        {"cltensor.epoch", "1x"},
        {"cltensor.steps", "9223372036854775807"},
        {"cltensor.steps", "99999999999999999999"},
        {"cltensor.optimizer_steps", "9223372036854775806"},
        {"cltensor.batch", "-5"},
        {"cltensor.hiddens", "64"},
        {"cltensor.loss_scale_dynamic", "2"},
        {"cltensor.epoch_loss_sum", "nan"},
        {"cltensor.epoch_seconds", "-1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        save_with_metadata(path, m, bad[i].key, bad[i].value);
        clt_checkpoint_info info;
        ck_assert_status(clt_checkpoint_load(path, m, NULL, &info), CLT_ERR_FORMAT);
        ck_assert_msg(strstr(clt_last_error(), bad[i].key) && strstr(clt_last_error(), bad[i].value),
                      "%s=%s: %s", bad[i].key, bad[i].value, clt_last_error());
    }
    /* In range for the file, but not for this run: batch 7 of an epoch of 2. */
    clt_dataset train = clt_test_make_dataset(64, 1);
    clt_trainer_options o = quiet_options();
    o.resume_path = path;
    save_with_metadata(path, m, "cltensor.batch", "7");
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "cltensor.steps"), "%s", clt_last_error());
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = 32, .blocks = 1, .steps = 9, .batch = 7};
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, &info));
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "cltensor.batch is 7") && strstr(clt_last_error(), "2 batches"), "%s",
                  clt_last_error());
    /* The largest epoch accepted resumes without overflow: nothing left to train. */
    info.epoch = 2147483646;
    info.batch = 0;
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, &info));
    o.max_epochs = 2147483647;
    o.max_steps = 10;
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
    ck_assert_int_eq(r.epochs, 2147483646);
    ck_assert_int_eq(r.steps, 10);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

/* A run stopped part way through an epoch (a step limit, then a stop
 * request) and resumed reports that epoch's train loss exactly as an
 * uninterrupted run does, and ends with its parameters. */
START_TEST(test_resumed_epoch_reports_as_uninterrupted)
{
    char dir[256], ckpt[300];
    clt_test_make_temp_dir(dir, sizeof dir, "resume");
    snprintf(ckpt, sizeof ckpt, "%s/c.st", dir);
    clt_dataset train = clt_test_make_dataset(320, 1);
    clt_trainer_options o = quiet_options();
    o.max_epochs = 2;
    clt_model *full = resmlp(3), *part = resmlp(3);
    clt_trainer_result a, b;
    ck_assert_ok(clt_trainer_fit(full, &train, NULL, &o, &a));
    o.save_path = ckpt;
    o.max_steps = 13; /* epoch 2, batch 3 of 10 */
    ck_assert_ok(clt_trainer_fit(part, &train, NULL, &o, &b));
    o.max_steps = 0;
    o.resume_path = ckpt;
    ck_assert_ok(clt_trainer_fit(part, &train, NULL, &o, &b));
    ck_assert_int_eq(b.steps, 20);
    ck_assert_int_eq(b.epochs, 2);
    ck_assert_msg(b.train_loss == a.train_loss, "resumed %.9g, uninterrupted %.9g", b.train_loss, a.train_loss);
    float *pa = params(full), *pb = params(part);
    ck_assert_int_eq(memcmp(pa, pb, clt_tensor_nbytes(clt_model_parameters(full))), 0);
    free(pa);
    free(pb);
    clt_model_free(full);
    clt_model_free(part);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer");
    TCase *tc = clt_test_tcase("trainer");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fit_learns_and_reports);
    tcase_add_test(tc, test_same_seed_same_result);
    tcase_add_test(tc, test_num_gpus_is_a_ceiling);
    tcase_add_test(tc, test_bad_options);
    tcase_add_test(tc, test_stop_request_is_consumed);
    tcase_add_test(tc, test_checkpoint_round_trip_exact);
    tcase_add_test(tc, test_checkpoint_with_adam_state);
    tcase_add_test(tc, test_checkpoint_refuses_other_architecture);
    tcase_add_test(tc, test_checkpoint_missing_and_corrupt_files);
    tcase_add_test(tc, test_default_options_are_silent);
    tcase_add_test(tc, test_log_line);
    tcase_add_test(tc, test_empty_dataset_is_refused);
    tcase_add_test(tc, test_divergence_stops_and_keeps_the_checkpoint);
    tcase_add_test(tc, test_divergence_at_the_last_step);
    tcase_add_test(tc, test_empty_validation_set);
    tcase_add_test(tc, test_progress_unit);
    tcase_add_test(tc, test_fp16_all_steps_skipped);
    tcase_add_test(tc, test_resume_metadata_is_checked);
    tcase_add_test(tc, test_resumed_epoch_reports_as_uninterrupted);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
