/* Model parallel: a ResMLP split in two stages (on gpu:0 and gpu:1 when
 * there are two GPUs, else both on one device) trains exactly as the whole
 * model on one device, in one batch or micro-batches; micro-batched
 * inference gives the same outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static void pick_devices(clt_device *dev)
{
    int two = clt_num_gpus() >= 2;
    dev[0] = two ? clt_gpu(0) : clt_test_cpu();
    dev[1] = two ? clt_gpu(1) : clt_test_cpu();
}

/* net = Flatten, Linear(784,h), ReLU, Res, Res, Linear(h,10): layers 0..5. */
static clt_model *resmlp(clt_device dev)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, 784, 24, 2, 10, 5));
    return m;
}

static clt_tensor *batch_x(clt_device dev, int64_t b, uint64_t seed)
{
    float *h = malloc((size_t)b * 784 * sizeof(float));
    clt_test_fill_uniform(h, b * 784, seed, 0, 1);
    int64_t shape[4] = {b, 1, 28, 28};
    clt_tensor *x;
    ck_assert_ok(clt_from_host(&x, dev, CLT_FLOAT32, 4, shape, h));
    free(h);
    return x;
}

static clt_tensor *batch_y(clt_device dev, int64_t b, uint64_t seed)
{
    int32_t *h = malloc((size_t)b * sizeof(int32_t));
    for (int64_t i = 0; i < b; i++) h[i] = (int32_t)((i * 3 + seed) % 10);
    clt_tensor *y;
    ck_assert_ok(clt_from_host(&y, dev, CLT_INT32, 1, &b, h));
    free(h);
    return y;
}

static double tensor_err(const clt_tensor *a, const clt_tensor *ref)
{
    ck_assert_int_eq(clt_tensor_numel(a), clt_tensor_numel(ref));
    float *x = clt_test_read(a), *y = clt_test_read(ref);
    double e = clt_test_max_rel_err(x, y, clt_tensor_numel(ref));
    free(x);
    free(y);
    return e;
}

static clt_optimizer *make_opt(clt_model *m, int adam)
{
    clt_optimizer *o;
    if (adam) ck_assert_ok(clt_optimizer_create_adam(&o, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    else ck_assert_ok(clt_optimizer_create_sgd(&o, m, 0.1f, 0.9f, 0.0f));
    return o;
}

/* The split shares the parameters' names (renumbered) and values. */
START_TEST(test_split_names_and_values)
{
    clt_device dev[2];
    pick_devices(dev);
    clt_model *ref = resmlp(clt_test_cpu()), *st[2];
    int first[2] = {0, 4};
    ck_assert_ok(clt_model_split(ref, 2, first, dev, st));
    ck_assert(clt_device_equal(clt_model_device(st[1]), dev[1]));
    ck_assert_int_eq(clt_model_num_parameter_elements(st[0]) + clt_model_num_parameter_elements(st[1]),
                     clt_model_num_parameter_elements(ref));
    ck_assert_int_eq(clt_model_find_parameter(st[0], "net.3.body.2.bias"), 5);
    ck_assert_int_eq(clt_model_find_parameter(st[1], "net.0.body.0.weight"), 0);
    ck_assert_int_eq(clt_model_find_parameter(st[1], "net.1.bias"), 5);
    clt_tensor *a, *b;
    ck_assert_ok(clt_model_named_parameter(st[1], clt_model_find_parameter(st[1], "net.0.body.2.weight"), NULL, &a,
                                           NULL));
    ck_assert_ok(clt_model_named_parameter(ref, clt_model_find_parameter(ref, "net.4.body.2.weight"), NULL, &b, NULL));
    ck_assert_double_eq(tensor_err(a, b), 0);
    clt_model_free(st[0]);
    clt_model_free(st[1]);

    int bad[3][2] = {{1, 4}, {0, 0}, {0, 6}};
    for (int i = 0; i < 3; i++) {
        ck_assert_status(clt_model_split(ref, 2, bad[i], dev, st), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(st[0]);
    }
    ck_assert_ok(clt_model_to_dtype(ref, CLT_FLOAT16));
    ck_assert_status(clt_model_split(ref, 2, first, dev, st), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "float16"));
    ck_assert_ptr_null(st[0]);
    clt_model_free(ref);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Four steps of the split model against the whole one: logits, dx and the
 * parameters after each step, with SGD (momentum) and Adam, in one batch or
 * in micro-batches (one step with fewer rows than micro-batches). */
static void train_and_compare(int adam, int micro)
{
    clt_device dev[2];
    pick_devices(dev);
    clt_model *ref = resmlp(dev[0]), *st[2];
    int first[2] = {0, 4};
    ck_assert_ok(clt_model_split(ref, 2, first, dev, st));
    clt_pipeline *p;
    ck_assert_ok(clt_pipeline_create(&p, st, 2, micro));
    clt_optimizer *oref = make_opt(ref, adam), *o0 = make_opt(st[0], adam), *o1 = make_opt(st[1], adam);
    for (int step = 0; step < 4; step++) {
        int64_t b = step == 2 ? 2 : 13 + step * 7;
        clt_tensor *x = batch_x(dev[0], b, (uint64_t)step), *y = batch_y(dev[0], b, (uint64_t)step);
        clt_tensor *lr = NULL, *dr = NULL, *dxr = NULL, *lp = NULL, *dp = NULL, *dxp = NULL, *ylast;
        clt_tensor *outr, *outp;
        ck_assert_ok(clt_model_forward(ref, x, &outr));
        ck_assert_ok(clt_cross_entropy_loss_grad(&lr, &dr, outr, y));
        ck_assert_ok(clt_model_zero_grad(ref));
        ck_assert_ok(clt_model_backward(ref, dr, &dxr));
        ck_assert_ok(clt_optimizer_step(oref));

        ck_assert_ok(clt_pipeline_forward(p, x, &outp));
        ck_assert(clt_device_equal(clt_tensor_device(outp), dev[1]));
        ck_assert_ok(clt_to(&ylast, y, dev[1]));
        ck_assert_ok(clt_cross_entropy_loss_grad(&lp, &dp, outp, ylast));
        ck_assert_ok(clt_model_zero_grad(st[0]));
        ck_assert_ok(clt_model_zero_grad(st[1]));
        ck_assert_ok(clt_pipeline_backward(p, dp, &dxp));
        ck_assert(clt_device_equal(clt_tensor_device(dxp), dev[0]));
        ck_assert_ok(clt_optimizer_step(o0));
        ck_assert_ok(clt_optimizer_step(o1));

        ck_assert_double_lt(tensor_err(outp, outr), 1e-5);
        ck_assert_double_lt(tensor_err(lp, lr), 1e-5);
        ck_assert_double_lt(tensor_err(dxp, dxr), 1e-5);
        clt_tensor *whole[2] = {clt_model_parameters(st[0]), clt_model_parameters(st[1])}, *pr;
        int64_t n0 = clt_tensor_numel(whole[0]);
        ck_assert_ok(clt_narrow(&pr, clt_model_parameters(ref), 0, n0));
        ck_assert_double_lt(tensor_err(whole[0], pr), 1e-5);
        clt_tensor_release(pr);
        ck_assert_ok(clt_narrow(&pr, clt_model_parameters(ref), n0, clt_tensor_numel(whole[1])));
        ck_assert_double_lt(tensor_err(whole[1], pr), 1e-5);
        clt_tensor_release(pr);
        clt_tensor *list[] = {x, y, lr, dr, dxr, lp, dp, dxp, ylast, outr, outp};
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) clt_tensor_release(list[i]);
    }
    /* The whole run changed the parameters. */
    clt_model *init = resmlp(clt_test_cpu());
    ck_assert_double_gt(tensor_err(clt_model_parameters(ref), clt_model_parameters(init)), 1e-3);
    clt_model_free(init);
    ck_assert_status(clt_pipeline_backward(p, clt_model_parameters(st[1]), NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_optimizer_free(oref);
    clt_optimizer_free(o0);
    clt_optimizer_free(o1);
    clt_pipeline_free(p);
    clt_model_free(st[0]);
    clt_model_free(st[1]);
    clt_model_free(ref);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_train_sgd) { train_and_compare(0, 1); }
END_TEST

START_TEST(test_train_adam) { train_and_compare(1, 1); }
END_TEST

START_TEST(test_train_micro_batches_sgd) { train_and_compare(0, 3); }
END_TEST

START_TEST(test_train_micro_batches_adam) { train_and_compare(1, 4); }
END_TEST

/* Inference streamed in micro-batches (more than the batch has rows, too)
 * over three stages. */
START_TEST(test_micro_batches)
{
    clt_device dev[2];
    pick_devices(dev);
    clt_model *ref = resmlp(dev[0]), *st[3];
    clt_device three[3] = {dev[0], dev[1], dev[0]};
    int first[3] = {0, 3, 5};
    ck_assert_ok(clt_model_split(ref, 3, first, three, st));
    clt_model_set_training(ref, 0);
    for (int k = 0; k < 3; k++) clt_model_set_training(st[k], 0);
    int64_t sizes[] = {1, 37};
    int micro[] = {1, 3, 50};
    for (int i = 0; i < 2; i++) {
        clt_tensor *x = batch_x(clt_test_cpu(), sizes[i], 9), *xr, *yr;
        ck_assert_ok(clt_to(&xr, x, dev[0]));
        ck_assert_ok(clt_model_forward(ref, xr, &yr));
        for (int j = 0; j < 3; j++) {
            clt_pipeline *p;
            clt_tensor *yp;
            ck_assert_ok(clt_pipeline_create(&p, st, 3, micro[j]));
            ck_assert_ok(clt_pipeline_forward(p, x, &yp));
            ck_assert_int_eq(clt_tensor_dim(yp, 0), sizes[i]);
            ck_assert_int_eq(clt_tensor_dim(yp, 1), 10);
            ck_assert(clt_device_equal(clt_tensor_device(yp), dev[0]));
            ck_assert_double_lt(tensor_err(yp, yr), 1e-5);
            clt_tensor_release(yp);
            clt_pipeline_free(p);
        }
        clt_tensor_release(x);
        clt_tensor_release(xr);
        clt_tensor_release(yr);
    }
    clt_pipeline *p;
    ck_assert_status(clt_pipeline_create(&p, st, 3, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    for (int k = 0; k < 3; k++) clt_model_free(st[k]);
    clt_model_free(ref);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Forward and backward in micro-batches only enqueue: no synchronization
 * point, so both devices can work at once. */
START_TEST(test_pipeline_does_not_wait)
{
    clt_device dev[2];
    pick_devices(dev);
    clt_model *ref = resmlp(dev[0]), *st[2];
    int first[2] = {0, 4};
    ck_assert_ok(clt_model_split(ref, 2, first, dev, st));
    clt_pipeline *p;
    ck_assert_ok(clt_pipeline_create(&p, st, 2, 4));
    clt_tensor *x = batch_x(dev[0], 32, 1), *y = batch_y(dev[1], 32, 1);
    ck_assert_ok(clt_synchronize_all());
    clt_sync_reset_count(dev[0]);
    clt_sync_reset_count(dev[1]);
    for (int step = 0; step < 2; step++) {
        clt_tensor *out, *loss, *dout, *dx;
        ck_assert_ok(clt_pipeline_forward(p, x, &out));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dout, out, y));
        ck_assert_ok(clt_pipeline_backward(p, dout, &dx));
        clt_tensor_release(out);
        clt_tensor_release(loss);
        clt_tensor_release(dout);
        clt_tensor_release(dx);
    }
    ck_assert_uint_eq(clt_sync_count(dev[0]) + clt_sync_count(dev[1]), 0);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_pipeline_free(p);
    clt_model_free(st[0]);
    clt_model_free(st[1]);
    clt_model_free(ref);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_parallel");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_split_names_and_values);
    tcase_add_test(tc, test_train_sgd);
    tcase_add_test(tc, test_train_adam);
    tcase_add_test(tc, test_train_micro_batches_sgd);
    tcase_add_test(tc, test_train_micro_batches_adam);
    tcase_add_test(tc, test_micro_batches);
    tcase_add_test(tc, test_pipeline_does_not_wait);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
