/* A layer of the user's own (clt_model_add_layer): forward and backward
 * written with the library's ops. Its gradient is checked by finite
 * differences; the memory planner, which runs the model's real code on a
 * planning device, predicts a step with it to the byte with no change of
 * its own; data parallel replicas run it; a checkpoint records it by name,
 * clt_model_load refuses it and clt_checkpoint_load fills a model built
 * with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "trainer/step.h"

/* y = x + relu(x): slope 1 below zero, 2 above; keeps relu(x) for backward. */
static int forwards, backwards;

static clt_status bent_forward(void *ctx, clt_tensor *x, clt_tensor **y, clt_tensor **keep)
{
    (void)ctx;
    forwards++;
    clt_tensor *r = NULL;
    clt_status s = clt_relu(&r, x);
    if (s == CLT_OK) s = clt_add(y, x, r);
    if (s == CLT_OK && keep) *keep = r;
    else clt_tensor_release(r);
    return s;
}

/* dx = dy + dy * (relu(x) > 0) */
static clt_status bent_backward(void *ctx, clt_tensor *dy, clt_tensor *kept, clt_tensor **dx)
{
    (void)ctx;
    backwards++;
    clt_tensor *masked = NULL;
    clt_status s = clt_relu_backward(&masked, dy, kept);
    if (s == CLT_OK) s = clt_add(dx, dy, masked);
    clt_tensor_release(masked);
    return s;
}

static const clt_layer_ops bent = {"bent", bent_forward, bent_backward, NULL};

/* Linear(in, h), bent, Linear(h, h), ReLU, bent, Linear(h, out). */
static clt_model *bent_model(clt_device dev, int64_t in, int64_t h, int64_t out)
{
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, "net"));
    ck_assert_ok(clt_model_add_linear(m, in, h));
    ck_assert_ok(clt_model_add_layer(m, &bent));
    ck_assert_ok(clt_model_add_linear(m, h, h));
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_add_layer(m, &bent));
    ck_assert_ok(clt_model_add_linear(m, h, out));
    ck_assert_ok(clt_model_init(m, dev, 3));
    return m;
}

static double loss_of(clt_model *m, clt_tensor *x, clt_tensor *y)
{
    clt_tensor *out = NULL, *loss = NULL;
    double v = NAN;
    ck_assert_ok(clt_model_forward(m, x, &out));
    ck_assert_ok(clt_cross_entropy_loss_grad(&loss, NULL, out, y));
    ck_assert_ok(clt_item(loss, &v));
    clt_tensor_release(out);
    clt_tensor_release(loss);
    return v;
}

START_TEST(test_custom_layer_gradient)
{
    clt_device dev = clt_test_cpu();
    int64_t n = 6, in = 5, out = 3;
    clt_model *m = bent_model(dev, in, 7, out);
    clt_layer_info li;
    ck_assert_ok(clt_model_layer(m, 1, &li));
    ck_assert_int_eq(li.kind, CLT_LAYER_CUSTOM);
    ck_assert_str_eq(li.custom, "bent");
    ck_assert_int_eq(clt_model_num_outputs(m), out);
    float *xs = clt_test_random_floats(n * in, 11);
    clt_tensor *x = clt_test_upload(dev, xs, n, in), *y = NULL;
    free(xs);
    int32_t labels[] = {0, 1, 2, 2, 1, 0};
    ck_assert_ok(clt_from_host(&y, dev, CLT_INT32, 1, &n, labels));
    /* The analytic gradient. */
    clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
    forwards = backwards = 0;
    ck_assert_ok(clt_model_forward(m, x, &logits));
    ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
    ck_assert_ok(clt_model_backward(m, dlogits, NULL));
    ck_assert_int_eq(forwards, 2);
    ck_assert_int_eq(backwards, 2);
    int64_t np = clt_model_num_parameter_elements(m);
    float *p = malloc((size_t)np * sizeof *p), *g = malloc((size_t)np * sizeof *g);
    ck_assert_ok(clt_to_host(clt_model_parameters(m), p, (size_t)np * sizeof *p));
    ck_assert_ok(clt_to_host(clt_model_gradients(m), g, (size_t)np * sizeof *g));
    /* Central differences, in inference mode, at a spread of parameters. */
    clt_model_set_training(m, 0);
    for (int64_t i = 0; i < np; i += 7) {
        float keep = p[i];
        double eps = 1e-2, plus, minus;
        p[i] = keep + (float)eps;
        clt_tensor *t = NULL;
        ck_assert_ok(clt_from_host(&t, dev, CLT_FLOAT32, 1, &np, p));
        ck_assert_ok(clt_copy_(clt_model_parameters(m), t));
        clt_tensor_release(t);
        plus = loss_of(m, x, y);
        p[i] = keep - (float)eps;
        ck_assert_ok(clt_from_host(&t, dev, CLT_FLOAT32, 1, &np, p));
        ck_assert_ok(clt_copy_(clt_model_parameters(m), t));
        clt_tensor_release(t);
        minus = loss_of(m, x, y);
        p[i] = keep;
        double numeric = (plus - minus) / (2 * eps);
        ck_assert_msg(fabs(numeric - g[i]) <= 2e-3 + 2e-2 * fabs(numeric), "parameter %lld: analytic %g, numeric %g",
                      (long long)i, g[i], numeric);
    }
    free(p);
    free(g);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_model_free(m);
}
END_TEST

/* Adding a layer needs no planner change: a step with custom layers is
 * predicted as measured, to the byte. */
START_TEST(test_custom_layer_planned_exactly)
{
    clt_device dev = clt_test_cpu();
    int64_t n = 129, in = 40, h = 300;
    clt_model *m = bent_model(dev, in, h, 10);
    clt_plan_options o = clt_plan_default_options();
    o.device = dev;
    o.batch_size = n;
    o.optimizer = CLT_OPTIMIZER_ADAM;
    clt_plan p;
    ck_assert_ok(clt_plan_step(m, &o, &p));
    ck_assert_int_gt(p.activations, 0);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    int64_t one = 1;
    clt_tensor *loss_sum = NULL;
    ck_assert_ok(clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one));
    for (int step = 0; step < 2; step++) {
        if (step == 1) ck_assert_ok(clt_memory_reset_peak(dev));
        float *xs = clt_test_random_floats(n * in, 5 + step);
        clt__step_tensors t = {.x = clt_test_upload(dev, xs, n, in)};
        free(xs);
        ck_assert_ok(clt_zeros(&t.y, dev, CLT_INT32, 1, &n));
        clt__step_options so = {0};
        ck_assert_ok(clt__train_step(m, opt, &t, loss_sum, 0, &so));
        clt__step_tensors_release(&t);
    }
    ck_assert_int_eq(clt_memory_max_allocated(dev), p.peak);
    ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_ACTIVATIONS), p.peak_activations);
    clt_tensor_release(loss_sum);
    clt_optimizer_free(opt);
    clt_model_free(m);
}
END_TEST

static char out[1 << 14];

START_TEST(test_custom_layer_checkpoint)
{
    clt_device dev = clt_test_cpu();
    char dir[64], path[96];
    clt_test_make_temp_dir(dir, sizeof dir, "custom");
    snprintf(path, sizeof path, "%s/bent.safetensors", dir);
    clt_model *m = bent_model(dev, 4, 6, 2);
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, NULL));
    /* Only the program that made the layer can build it. */
    clt_model *loaded = NULL;
    ck_assert_status(clt_model_load(&loaded, path, dev, NULL), CLT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(clt_last_error(), "layer 1 is the custom layer \"bent\""), "%s", clt_last_error());
    ck_assert_ptr_null(loaded);
    /* That program loads its parameters into the model it builds... */
    clt_model *again = bent_model(dev, 4, 6, 2);
    ck_assert_ok(clt_checkpoint_load(path, again, NULL, NULL));
    int64_t np = clt_model_num_parameter_elements(m);
    float *a = malloc((size_t)np * sizeof *a), *b = malloc((size_t)np * sizeof *b);
    ck_assert_ok(clt_to_host(clt_model_parameters(m), a, (size_t)np * sizeof *a));
    ck_assert_ok(clt_to_host(clt_model_parameters(again), b, (size_t)np * sizeof *b));
    ck_assert_int_eq(memcmp(a, b, (size_t)np * sizeof *a), 0);
    free(a);
    free(b);
    /* ...but not into one whose custom layer is another. */
    static const clt_layer_ops other = {"other", bent_forward, bent_backward, NULL};
    clt_model *wrong;
    ck_assert_ok(clt_model_create(&wrong, "net"));
    ck_assert_ok(clt_model_add_linear(wrong, 4, 6));
    ck_assert_ok(clt_model_add_layer(wrong, &other));
    ck_assert_ok(clt_model_add_linear(wrong, 6, 6));
    ck_assert_ok(clt_model_add_relu(wrong));
    ck_assert_ok(clt_model_add_layer(wrong, &bent));
    ck_assert_ok(clt_model_add_linear(wrong, 6, 2));
    ck_assert_ok(clt_model_init(wrong, dev, 3));
    ck_assert_status(clt_checkpoint_load(path, wrong, NULL, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "layer 1 differs"), "%s", clt_last_error());
    /* clt eval names the layer too. */
    int rc = clt_test_shell(out, sizeof out, "%s eval --load %s --data %s 2>&1", clt_test_clt_path(), path, dir);
    ck_assert_msg(rc != 0 && strstr(out, "custom layer \"bent\""), "exit %d: %s", rc, out);
    clt_model_free(wrong);
    clt_model_free(again);
    clt_model_free(m);
    clt_test_remove_dir(dir);
}
END_TEST

START_TEST(test_custom_layer_bad_arguments)
{
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, "net"));
    clt_layer_ops ops = bent;
    ops.name = "has space";
    ck_assert_status(clt_model_add_layer(m, &ops), CLT_ERR_INVALID_ARGUMENT);
    ops.name = "";
    ck_assert_status(clt_model_add_layer(m, &ops), CLT_ERR_INVALID_ARGUMENT);
    ops.name = "abcdefghijklmnopqrstuvwxyz0123456"; /* 33 bytes */
    ck_assert_status(clt_model_add_layer(m, &ops), CLT_ERR_INVALID_ARGUMENT);
    ops = bent;
    ops.backward = NULL;
    ck_assert_status(clt_model_add_layer(m, &ops), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_add_layer(m, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(clt_model_num_layers(m), 0);
    clt_model_free(m);
}
END_TEST

/* Data parallel replicas run the same layer: two replicas on two devices. */
START_TEST(test_custom_layer_replicated)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    clt_model *m = bent_model(clt_gpu(0), 4, 6, 2), *r = NULL;
    ck_assert_ok(clt_model_replicate(&r, m, clt_gpu(1)));
    clt_layer_info li;
    ck_assert_ok(clt_model_layer(r, 4, &li));
    ck_assert_int_eq(li.kind, CLT_LAYER_CUSTOM);
    int64_t n = 3, shape[] = {3, 4};
    float xs[12] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
    clt_tensor *x0 = NULL, *x1 = NULL, *y0 = NULL, *y1 = NULL;
    ck_assert_ok(clt_from_host(&x0, clt_gpu(0), CLT_FLOAT32, 2, shape, xs));
    ck_assert_ok(clt_from_host(&x1, clt_gpu(1), CLT_FLOAT32, 2, shape, xs));
    ck_assert_ok(clt_model_forward(m, x0, &y0));
    ck_assert_ok(clt_model_forward(r, x1, &y1));
    float a[6], b[6];
    ck_assert_ok(clt_to_host(y0, a, sizeof a));
    ck_assert_ok(clt_to_host(y1, b, sizeof b));
    for (int i = 0; i < 2 * n; i++) ck_assert_float_eq(a[i], b[i]);
    clt_tensor_release(x0);
    clt_tensor_release(x1);
    clt_tensor_release(y0);
    clt_tensor_release(y1);
    clt_model_free(r);
    clt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("custom_layer");
    TCase *tc = clt_test_tcase("custom_layer");
    tcase_add_test(tc, test_custom_layer_gradient);
    tcase_add_test(tc, test_custom_layer_planned_exactly);
    tcase_add_test(tc, test_custom_layer_checkpoint);
    tcase_add_test(tc, test_custom_layer_bad_arguments);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_add_test(gpus, test_custom_layer_replicated);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
