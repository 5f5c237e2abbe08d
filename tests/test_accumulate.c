/* Gradient accumulation: a step over N micro-batches (uneven splits
 * included) leaves the parameters of one step over the whole batch, to
 * float rounding: SGD, SGD with momentum and Adam, with and without
 * activation checkpointing, float16 too, on one device and data parallel
 * on two (POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "trainer/step.h"

static clt_dataset data;

static void setup(void) { data = clt_test_make_dataset(400, 11); }
static void teardown(void) { clt_dataset_free(&data); }

/* The parameters as float32 on the host. */
static float *params_of(const clt_model *m)
{
    clt_tensor *wide = NULL;
    ck_assert_ok(clt_to_dtype(&wide, clt_model_parameters(m), CLT_FLOAT32));
    clt_tensor *host = NULL;
    ck_assert_ok(clt_to(&host, wide, clt_test_cpu()));
    float *p = clt_test_read(host);
    clt_tensor_release(host);
    clt_tensor_release(wide);
    return p;
}

/* Largest |a - b| relative to the largest change a step made. */
static double rel_diff(const float *a, const float *b, const float *init, int64_t n)
{
    double diff = 0, moved = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        moved = fmax(moved, fabs((double)b[i] - init[i]));
    }
    ck_assert_msg(moved > 0, "the steps moved nothing");
    return diff / moved;
}

/* Trains 3 steps of batch 100 with `accumulate` micro-batches; returns the parameters. */
static float *train(clt_optimizer_kind opt, int accumulate, int ckpt, int fp16, int devices, int64_t *n)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 3, 10, 5));
    *n = clt_model_num_parameter_elements(m);
    clt_trainer_options o = clt_trainer_default_options();
    o.batch_size = 100;
    o.accumulate = accumulate;
    o.optimizer = opt;
    o.lr = opt == CLT_OPTIMIZER_ADAM ? 1e-3f : 0.1f;
    o.shuffle = 0;
    o.max_steps = 3;
    o.recompute_blocks = ckpt;
    o.fp16 = fp16;
    o.use_device = devices == 1;
    o.device = clt_test_cpu();
    clt_trainer_result r;
    if (devices == 1) ck_assert_ok(clt_trainer_fit(m, &data, NULL, &o, &r));
    else ck_assert_ok(clt_parallel_fit(m, &data, NULL, &o, NULL, devices, NULL, &r));
    ck_assert_int_eq(r.steps, 3);
    float *p = params_of(m);
    clt_model_free(m);
    return p;
}

static float *initial(void)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 3, 10, 5));
    float *p = params_of(m);
    clt_model_free(m);
    return p;
}

static void check_equal(clt_optimizer_kind opt, int ckpt, int fp16, int devices, double tol)
{
    int64_t n;
    float *init = initial();
    float *big = train(opt, 1, ckpt, fp16, devices, &n);
    /* 100 = 34 + 33 + 33, and 100 = 15 x 6 + 14 x 1 */
    int counts[] = {3, 7};
    for (int i = 0; i < 2; i++) {
        float *acc = train(opt, counts[i], ckpt, fp16, devices, &n);
        double d = rel_diff(acc, big, init, n);
        ck_assert_msg(d < tol, "%s, checkpointing %d, fp16 %d, %d device(s), %d micro-batches: parameters differ by "
                      "%g of the steps' change", opt == CLT_OPTIMIZER_ADAM ? "Adam" : "SGD", ckpt, fp16, devices,
                      counts[i], d);
        free(acc);
    }
    free(big);
    free(init);
}

START_TEST(test_sgd) { check_equal(CLT_OPTIMIZER_SGD, 0, 0, 1, 1e-4); }
END_TEST

START_TEST(test_adam) { check_equal(CLT_OPTIMIZER_ADAM, 0, 0, 1, 1e-3); }
END_TEST

START_TEST(test_checkpointed) { check_equal(CLT_OPTIMIZER_ADAM, 2, 0, 1, 1e-3); }
END_TEST

/* float16 rounds each micro-batch's gradients on their own: a looser bound. */
START_TEST(test_fp16) { check_equal(CLT_OPTIMIZER_SGD, 0, 1, 1, 2e-2); }
END_TEST

START_TEST(test_two_devices)
{
    if (clt_num_gpus() < 2) {
        printf("fewer than two GPUs: data-parallel accumulation runs under POCL_DEVICES=\"pthread pthread\" "
               "CLT_CPU_AS_GPU=1\n");
        return;
    }
    check_equal(CLT_OPTIMIZER_SGD, 0, 0, 2, 1e-4);
    check_equal(CLT_OPTIMIZER_ADAM, 0, 0, 2, 1e-3);
    /* Data parallel with accumulation equals one device without. */
    int64_t n;
    float *init = initial(), *one = train(CLT_OPTIMIZER_SGD, 1, 0, 0, 1, &n), *dp = train(CLT_OPTIMIZER_SGD, 3, 0, 0, 2, &n);
    ck_assert_double_lt(rel_diff(dp, one, init, n), 1e-4);
    free(init);
    free(one);
    free(dp);
}
END_TEST

/* SGD with momentum (not a trainer option): the library's step by hand. */
START_TEST(test_momentum)
{
    clt_device dev = clt_test_cpu();
    float *result[2];
    int64_t n = 0, rows = 90;
    float *xs = clt_test_random_floats(rows * 784, 2);
    for (int run = 0; run < 2; run++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 32, 2, 10, 5));
        n = clt_model_num_parameter_elements(m);
        clt_optimizer *opt;
        ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.1f, 0.9f, 0.0f));
        clt_tensor *x = clt_test_upload(dev, xs, rows, 784), *y = NULL, *sum = NULL;
        int64_t one = 1;
        ck_assert_ok(clt_zeros(&y, dev, CLT_INT32, 1, &rows));
        ck_assert_ok(clt_zeros(&sum, dev, CLT_FLOAT32, 1, &one));
        for (int step = 0; step < 3; step++) {
            ck_assert_ok(clt_model_zero_grad(m));
            ck_assert_ok(clt__accumulate(m, NULL, x, y, run ? 4 : 1, rows, sum, 0));
            ck_assert_ok(clt_optimizer_step(opt));
        }
        result[run] = params_of(m);
        clt_tensor_release(x);
        clt_tensor_release(y);
        clt_tensor_release(sum);
        clt_optimizer_free(opt);
        clt_model_free(m);
    }
    double diff = 0;
    for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)result[0][i] - result[1][i]));
    ck_assert_msg(diff < 1e-5, "momentum: accumulated and whole-batch parameters differ by %g", diff);
    ck_assert_int_eq(clt__micro_rows(90, 4, 0), 23);
    ck_assert_int_eq(clt__micro_rows(90, 4, 1), 23);
    ck_assert_int_eq(clt__micro_rows(90, 4, 2), 22);
    free(result[0]);
    free(result[1]);
    free(xs);
}
END_TEST

START_TEST(test_bad_accumulate)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 16, 1, 10, 5));
    clt_trainer_options o = clt_trainer_default_options();
    o.batch_size = 10;
    o.accumulate = 11;
    ck_assert_status(clt_trainer_fit(m, &data, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    o.accumulate = -1;
    ck_assert_status(clt_trainer_fit(m, &data, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("accumulate");
    TCase *tc = clt_test_tcase("accumulate");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sgd);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_checkpointed);
    tcase_add_test(tc, test_fp16);
    tcase_add_test(tc, test_momentum);
    tcase_add_test(tc, test_two_devices);
    tcase_add_test(tc, test_bad_accumulate);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
