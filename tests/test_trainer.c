/* The Trainer and checkpoints, on a small synthetic dataset made here: each
 * class lights its own band of pixels, so a ResMLP learns it in a few steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

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
    ck_assert_ok(clt_model_create_resmlp(&m, clt_cpu(), 784, 32, 1, 10, seed));
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
    clt_checkpoint_info info = {"resmlp", 32, 1, 3, 30, 0};
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
    ck_assert_ok(clt_model_create_resmlp(&wide, clt_cpu(), 784, 64, 1, 10, 1));
    ck_assert_ok(clt_checkpoint_save(path, small, NULL, NULL));
    float *before = params(wide);
    ck_assert_status(clt_checkpoint_load(path, wide, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "net.1.weight"));
    float *after = params(wide);
    ck_assert_int_eq(memcmp(before, after, clt_tensor_nbytes(clt_model_parameters(wide))), 0);
    free(before);
    free(after);
    clt_model *deeper;
    ck_assert_ok(clt_model_create_resmlp(&deeper, clt_cpu(), 784, 32, 2, 10, 1));
    ck_assert_status(clt_checkpoint_load(path, deeper, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "missing"));
    /* Every parameter present, plus one the model does not have. */
    int n = clt_model_num_named_parameters(small);
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
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
