/* Data parallel training against single-device training on the same global
 * batches: several steps, SGD and Adam, even and uneven splits (an empty
 * shard included), replicas on gpu:0 and gpu:1 when there are two GPUs (and
 * cpu:0, in its own context, as a third), else two replicas on one device,
 * which runs the same splitting and combining code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static clt_trainer_options quiet_options(clt_optimizer_kind kind)
{
    clt_trainer_options o = clt_trainer_default_options();
    o.log = NULL;
    o.progress = 0;
    o.batch_size = 32;
    o.seed = 3;
    o.optimizer = kind;
    o.lr = kind == CLT_OPTIMIZER_ADAM ? 1e-3f : 0.1f;
    return o;
}

static clt_model *resmlp(void)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_cpu(), 784, 32, 1, 10, 11));
    return m;
}

/* gpu:0, gpu:1 (and cpu:0) when two GPUs exist; else the CPU `count` times. */
static int pick_devices(clt_device *list, int want)
{
    if (clt_num_gpus() >= 2) {
        list[0] = clt_gpu(0);
        list[1] = clt_gpu(1);
        list[2] = clt_cpu();
        return want;
    }
    for (int i = 0; i < want; i++) list[i] = clt_cpu();
    return want;
}

/* Trains the same model on one device and data parallel on `k`; returns the
 * largest relative difference of the parameters. */
static double compare(clt_optimizer_kind kind, int k, int64_t n, int epochs, double *loss_diff)
{
    clt_dataset train = clt_test_make_dataset(n, 1);
    clt_device list[3];
    pick_devices(list, k);
    clt_trainer_options o = quiet_options(kind);
    o.max_epochs = epochs;
    o.use_device = 1;
    o.device = list[0];
    clt_model *ref = resmlp(), *par = resmlp();
    clt_trainer_result r1, r2;
    ck_assert_ok(clt_trainer_fit(ref, &train, NULL, &o, &r1));
    ck_assert_ok(clt_parallel_fit(par, &train, NULL, &o, list, k, NULL, &r2));
    ck_assert_int_eq(r1.steps, r2.steps);
    ck_assert_int_eq(r2.epochs, epochs);
    ck_assert(clt_device_equal(clt_model_device(par), list[0]));
    float *a = clt_test_read(clt_model_parameters(ref)), *b = clt_test_read(clt_model_parameters(par));
    double err = clt_test_max_rel_err(b, a, clt_model_parameter_count(ref));
    /* The run must have moved the parameters, or equality proves nothing. */
    clt_model *init = resmlp();
    float *c = clt_test_read(clt_model_parameters(init));
    ck_assert_msg(clt_test_max_rel_err(a, c, clt_model_parameter_count(ref)) > 1e-3, "training changed nothing");
    *loss_diff = fabs(r1.train_loss - r2.train_loss) / fabs(r1.train_loss);
    free(a);
    free(b);
    free(c);
    clt_model_free(init);
    clt_model_free(ref);
    clt_model_free(par);
    clt_dataset_free(&train);
    return err;
}

START_TEST(test_two_devices_sgd)
{
    double dl, err = compare(CLT_OPTIMIZER_SGD, 2, 128, 2, &dl);
    ck_assert_msg(err < 1e-5, "parameters differ by %g", err);
    ck_assert_msg(dl < 1e-5, "train loss differs by %g", dl);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_two_devices_adam)
{
    double dl, err = compare(CLT_OPTIMIZER_ADAM, 2, 128, 2, &dl);
    ck_assert_msg(err < 1e-5, "parameters differ by %g", err);
    ck_assert_msg(dl < 1e-5, "train loss differs by %g", dl);
}
END_TEST

/* 98 examples in batches of 32 over 3 devices: shards 10/11/11, and a last
 * batch of 2 whose first shard (the primary's) is empty. */
START_TEST(test_uneven_split)
{
    double dl, err = compare(CLT_OPTIMIZER_SGD, 3, 98, 1, &dl);
    ck_assert_msg(err < 1e-5, "parameters differ by %g", err);
    ck_assert_msg(dl < 1e-5, "train loss differs by %g", dl);
    err = compare(CLT_OPTIMIZER_ADAM, 3, 98, 1, &dl);
    ck_assert_msg(err < 1e-5, "parameters differ by %g (adam)", err);
}
END_TEST

static int reduce_calls;

static clt_status identity_allreduce(void *ctx, float *buf, int64_t n)
{
    (void)ctx;
    (void)buf;
    ck_assert_int_gt(n, 0);
    reduce_calls++;
    return CLT_OK;
}

static clt_status failing_allreduce(void *ctx, float *buf, int64_t n)
{
    (void)ctx;
    (void)buf;
    (void)n;
    return CLT_ERR_IO;
}

/* A one-rank collective goes through the host staging buffer once per step
 * (plus once per epoch for the loss) and changes nothing; its failure stops
 * the fit. */
START_TEST(test_collective_of_one)
{
    clt_dataset train = clt_test_make_dataset(64, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.use_device = 1;
    o.device = clt_cpu();
    clt_model *ref = resmlp(), *par = resmlp();
    ck_assert_ok(clt_trainer_fit(ref, &train, NULL, &o, NULL));
    clt_collective comm = {0, 1, identity_allreduce, NULL};
    clt_device dev = clt_cpu();
    reduce_calls = 0;
    ck_assert_ok(clt_parallel_fit(par, &train, NULL, &o, &dev, 1, &comm, NULL));
    ck_assert_int_eq(reduce_calls, 2 + 1);
    float *a = clt_test_read(clt_model_parameters(ref)), *b = clt_test_read(clt_model_parameters(par));
    ck_assert_double_lt(clt_test_max_rel_err(b, a, clt_model_parameter_count(ref)), 1e-6);
    comm.allreduce_sum = failing_allreduce;
    ck_assert_status(clt_parallel_fit(par, &train, NULL, &o, &dev, 1, &comm, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "allreduce_sum"));
    free(a);
    free(b);
    clt_model_free(ref);
    clt_model_free(par);
    clt_dataset_free(&train);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Validation, logging and the result on the primary (rank 0). */
START_TEST(test_fit_reports)
{
    clt_dataset train = clt_test_make_dataset(96, 1), val = clt_test_make_dataset(40, 2);
    clt_device list[3];
    int k = pick_devices(list, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.max_epochs = 3;
    clt_model *m = resmlp();
    clt_trainer_result r;
    ck_assert_ok(clt_parallel_fit(m, &train, &val, &o, list, k, NULL, &r));
    ck_assert_int_eq(r.steps, 9);
    ck_assert_msg(r.val_accuracy > 0.8, "val accuracy %g", r.val_accuracy);
    ck_assert_msg(r.train_loss < 2.2, "train loss %g did not fall below ln 10", r.train_loss);
    char want[32];
    ck_assert_ok(clt_device_name(list[0], want, sizeof want));
    strcat(want, "+1");
    ck_assert_str_eq(r.device, want);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
}
END_TEST

/* The host issues every device's work without waiting: the number of
 * synchronization points does not grow with the number of steps. */
START_TEST(test_steps_do_not_wait)
{
    clt_dataset train = clt_test_make_dataset(320, 1);
    clt_device list[3];
    int k = pick_devices(list, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_ADAM);
    uint64_t syncs[2];
    for (int run = 0; run < 2; run++) {
        clt_model *m = resmlp();
        o.max_steps = run == 0 ? 2 : 8;
        for (int i = 0; i < k; i++) clt_reset_sync_count(list[i]);
        ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, list, k, NULL, NULL));
        syncs[run] = 0;
        for (int i = 0; i < k; i++) syncs[run] += clt_sync_count(list[i]);
        clt_model_free(m);
    }
    ck_assert_uint_eq(syncs[0], syncs[1]);
    clt_dataset_free(&train);
}
END_TEST

START_TEST(test_replicate)
{
    clt_model *m = resmlp(), *copy;
    clt_device dev = clt_num_gpus() >= 2 ? clt_gpu(1) : clt_cpu();
    ck_assert_ok(clt_model_replicate(&copy, m, dev));
    ck_assert(clt_device_equal(clt_model_device(copy), dev));
    ck_assert_int_eq(clt_model_num_named_parameters(copy), clt_model_num_named_parameters(m));
    for (int i = 0; i < clt_model_num_named_parameters(m); i++) {
        const char *a, *b;
        ck_assert_ok(clt_model_named_parameter(m, i, &a, NULL, NULL));
        ck_assert_ok(clt_model_named_parameter(copy, i, &b, NULL, NULL));
        ck_assert_str_eq(a, b);
    }
    float *pa = clt_test_read(clt_model_parameters(m)), *pb = clt_test_read(clt_model_parameters(copy));
    ck_assert_int_eq(memcmp(pa, pb, clt_tensor_nbytes(clt_model_parameters(m))), 0);
    ck_assert_ptr_null(clt_model_gradients(copy));
    free(pa);
    free(pb);
    clt_model_free(copy);
    clt_model *empty;
    ck_assert_ok(clt_model_create(&empty, "x"));
    ck_assert_status(clt_model_replicate(&copy, empty, dev), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(copy);
    clt_model_free(empty);
    clt_model_free(m);
}
END_TEST

START_TEST(test_bad_arguments)
{
    clt_dataset train = clt_test_make_dataset(8, 1);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    clt_model *m = resmlp();
    clt_device missing = clt_gpu(7), cpu = clt_cpu();
    ck_assert_status(clt_parallel_fit(m, &train, NULL, &o, &missing, 1, NULL, NULL), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_parallel_fit(m, &train, NULL, &o, &cpu, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_parallel_fit(NULL, &train, NULL, &o, NULL, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_collective bad = {2, 2, identity_allreduce, NULL};
    ck_assert_status(clt_parallel_fit(m, &train, NULL, &o, &cpu, 1, &bad, NULL), CLT_ERR_INVALID_ARGUMENT);
    o.batch_size = 0;
    ck_assert_status(clt_parallel_fit(m, &train, NULL, &o, &cpu, 1, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_model_free(m);
    clt_dataset_free(&train);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data_parallel");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_two_devices_sgd);
    tcase_add_test(tc, test_two_devices_adam);
    tcase_add_test(tc, test_uneven_split);
    tcase_add_test(tc, test_collective_of_one);
    tcase_add_test(tc, test_fit_reports);
    tcase_add_test(tc, test_steps_do_not_wait);
    tcase_add_test(tc, test_replicate);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
