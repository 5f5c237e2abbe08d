/* Optimizers: lazy state on the parameters' device, updates against host
 * references of PyTorch's SGD and Adam/AdamW, and argument checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static clt_model *small_model(clt_device d)
{
    int64_t hiddens[] = {11};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, d, 5, 1, hiddens, 3, 7));
    return m;
}

/* One training forward and backward on random data; gradients accumulate. */
static void backward_once(clt_model *m, uint64_t seed)
{
    float xf[4 * 5];
    clt_test_fill_uniform(xf, 20, seed, -2, 2);
    int64_t xs[] = {4, 5};
    clt_tensor *x, *y, *dy;
    ck_assert_ok(clt_from_host(&x, clt_model_device(m), CLT_FLOAT32, 2, xs, xf));
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(dy);
}

START_TEST(test_lazy_state)
{
    clt_model *m = small_model(clt_test_device());
    int64_t N = clt_model_num_parameter_elements(m);
    clt_optimizer *adam, *sgdm, *sgd;
    ck_assert_ok(clt_optimizer_create_adam(&adam, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    ck_assert_ok(clt_optimizer_create_sgd(&sgdm, m, 0.1f, 0.9f, 0));
    ck_assert_ok(clt_optimizer_create_sgd(&sgd, m, 0.1f, 0, 0));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 0);
    ck_assert_int_eq(clt_optimizer_num_states(adam), 2);
    ck_assert_int_eq(clt_optimizer_num_states(sgdm), 1);
    ck_assert_int_eq(clt_optimizer_num_states(sgd), 0);

    /* No gradients yet: a step changes nothing and creates nothing. */
    float *p0 = clt_test_read(clt_model_parameters(m));
    ck_assert_ok(clt_optimizer_step(adam));
    ck_assert_int_eq(clt_optimizer_steps(adam), 0);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 0);
    float *p1 = clt_test_read(clt_model_parameters(m));
    ck_assert_mem_eq(p0, p1, (size_t)N * sizeof(float));

    backward_once(m, 1);
    int64_t before = clt_memory_allocated(clt_test_device());
    ck_assert_ok(clt_optimizer_step(adam));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 8 * N);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), before + 8 * N);
    for (int i = 0; i < 2; i++) {
        const char *name;
        clt_tensor *st;
        ck_assert_ok(clt_optimizer_state(adam, i, &name, &st));
        ck_assert_str_eq(name, i == 0 ? "exp_avg" : "exp_avg_sq");
        ck_assert_int_eq(clt_tensor_numel(st), N);
        ck_assert_int_eq(clt_tensor_category(st), CLT_MEM_OPTIMIZER);
        ck_assert(clt_device_equal(clt_tensor_device(st), clt_test_device()));
    }
    ck_assert_ok(clt_optimizer_step(adam));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 8 * N);
    ck_assert_int_eq(clt_optimizer_steps(adam), 2);

    ck_assert_ok(clt_optimizer_step(sgdm));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 12 * N);
    const char *name;
    ck_assert_ok(clt_optimizer_state(sgdm, 0, &name, NULL));
    ck_assert_str_eq(name, "momentum_buffer");
    ck_assert_ok(clt_optimizer_step(sgd));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 12 * N);
    ck_assert_status(clt_optimizer_state(sgd, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);

    clt_optimizer_free(adam);
    clt_optimizer_free(sgdm);
    clt_optimizer_free(sgd);
    clt_optimizer_free(NULL);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 0);
    free(p0);
    free(p1);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Runs three steps on the device and the same three on the host from the
 * device's gradients; compares parameters after each. */
static void check_against_host(int adam, float lr, float momentum, float wd, int decoupled)
{
    const float b1 = 0.8f, b2 = 0.95f, eps = 1e-6f;
    clt_model *m = small_model(clt_test_device());
    int64_t N = clt_model_num_parameter_elements(m);
    clt_optimizer *opt;
    if (adam)
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, lr, b1, b2, eps, wd, decoupled));
    else
        ck_assert_ok(clt_optimizer_create_sgd(&opt, m, lr, momentum, wd));
    float *pf = clt_test_read(clt_model_parameters(m));
    double *p = calloc((size_t)N, sizeof *p), *s1 = calloc((size_t)N, sizeof *s1), *s2 = calloc((size_t)N, sizeof *s2);
    ck_assert(p && s1 && s2);
    for (int64_t i = 0; i < N; i++) p[i] = pf[i];
    free(pf);
    for (int t = 1; t <= 3; t++) {
        ck_assert_ok(clt_model_zero_grad(m));
        backward_once(m, 10 + t);
        float *g = clt_test_read(clt_model_gradients(m));
        ck_assert_ok(clt_optimizer_step(opt));
        for (int64_t i = 0; i < N; i++) {
            double gi = g[i];
            if (adam) {
                if (decoupled)
                    p[i] *= 1.0 - (double)lr * wd;
                else
                    gi += wd * p[i];
                s1[i] = b1 * s1[i] + (1 - b1) * gi;
                s2[i] = b2 * s2[i] + (1 - b2) * gi * gi;
                double mhat = s1[i] / (1 - pow(b1, t)), vhat = s2[i] / (1 - pow(b2, t));
                p[i] -= lr * mhat / (sqrt(vhat) + eps);
            } else {
                gi += wd * p[i];
                if (momentum > 0) {
                    s1[i] = t == 1 ? gi : momentum * s1[i] + gi;
                    gi = s1[i];
                }
                p[i] -= lr * gi;
            }
        }
        free(g);
        float *got = clt_test_read(clt_model_parameters(m));
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(fabs(got[i] - p[i]) <= 1e-5 * fmax(1, fabs(p[i])), "step %d param[%lld] %.8g, host %.8g",
                          t, (long long)i, (double)got[i], p[i]);
        free(got);
    }
    ck_assert_int_eq(clt_optimizer_steps(opt), 3);
    free(p);
    free(s1);
    free(s2);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_sgd_matches_host)
{
    check_against_host(0, 0.05f, 0, 0, 0);
    check_against_host(0, 0.05f, 0, 0.1f, 0);
    check_against_host(0, 0.05f, 0.9f, 0.01f, 0);
}
END_TEST

START_TEST(test_adam_matches_host)
{
    check_against_host(1, 0.01f, 0, 0, 0);
    check_against_host(1, 0.01f, 0, 0.1f, 0);
    check_against_host(1, 0.01f, 0, 0.1f, 1);
}
END_TEST

START_TEST(test_schedule_and_restore)
{
    clt_model *m = small_model(clt_test_device());
    int64_t N = clt_model_num_parameter_elements(m);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1));
    ck_assert_float_eq(clt_optimizer_lr(opt), 1e-3f);
    ck_assert_ok(clt_optimizer_set_lr(opt, 0.5f));
    ck_assert_float_eq(clt_optimizer_lr(opt), 0.5f);
    ck_assert_status(clt_optimizer_set_lr(opt, -1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_optimizer_set_steps(opt, 41));
    ck_assert_int_eq(clt_optimizer_steps(opt), 41);
    ck_assert_status(clt_optimizer_set_steps(opt, -1), CLT_ERR_INVALID_ARGUMENT);
    /* init_state makes zeroed state ready for a checkpoint to fill. */
    ck_assert_ok(clt_optimizer_init_state(opt));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 8 * N);
    clt_tensor *st;
    ck_assert_ok(clt_optimizer_state(opt, 1, NULL, &st));
    float *v = clt_test_read(st);
    for (int64_t i = 0; i < N; i++) ck_assert_float_eq(v[i], 0.0f);
    free(v);
    ck_assert_ok(clt_optimizer_init_state(opt));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_OPTIMIZER), 8 * N);
    backward_once(m, 3);
    ck_assert_ok(clt_optimizer_step(opt));
    ck_assert_int_eq(clt_optimizer_steps(opt), 42);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_state_follows_parameters)
{
    clt_device other = clt_test_cpu();
    clt_test_skip_if(!clt_device_exists(other) || clt_device_equal(other, clt_test_device()), "gpu",
                     "needs a GPU besides the CPU");
    clt_model *m = small_model(other);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    backward_once(m, 1);
    ck_assert_ok(clt_optimizer_step(opt));
    clt_tensor *st;
    ck_assert_ok(clt_optimizer_state(opt, 0, NULL, &st));
    ck_assert(clt_device_equal(clt_tensor_device(st), other));
    /* The model moved after the state was born: the step refuses. */
    ck_assert_ok(clt_model_to(m, clt_test_device()));
    ck_assert_status(clt_optimizer_step(opt), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_status(clt_optimizer_init_state(opt), CLT_ERR_DEVICE_MISMATCH);
    clt_optimizer_free(opt);
    /* Built after the move, the state is created next to the parameters. */
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    ck_assert_ok(clt_optimizer_step(opt));
    ck_assert_ok(clt_optimizer_state(opt, 0, NULL, &st));
    ck_assert(clt_device_equal(clt_tensor_device(st), clt_test_device()));
    ck_assert_int_eq(clt_memory_allocated_category(other, CLT_MEM_OPTIMIZER), 0);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_invalid_arguments)
{
    clt_model *m = small_model(clt_test_device());
    clt_optimizer *opt = (clt_optimizer *)m; /* a non-NULL sentinel: failures must reset it */
    ck_assert_status(clt_optimizer_create_sgd(&opt, m, -0.1f, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(opt);
    ck_assert_status(clt_optimizer_create_sgd(&opt, m, NAN, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_sgd(&opt, m, 0.1f, 1.0f, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_sgd(&opt, m, 0.1f, 0, -1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_sgd(&opt, NULL, 0.1f, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_sgd(NULL, m, 0.1f, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_adam(&opt, m, 1e-3f, 1.0f, 0.999f, 1e-8f, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 1.5f, 1e-8f, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, -1, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    clt_model *empty;
    ck_assert_ok(clt_model_create(&empty, "net"));
    ck_assert_status(clt_optimizer_create_adam(&opt, empty, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0),
                     CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_optimizer_step(NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_model_free(empty);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* pocl compiles kernels lazily on its worker threads: a process that exits
 * with work queued can race LLVM's exit-time destructors. */
/* nn.h: convert before building an optimizer. One built before refuses to
 * step (its state and master weights are of the old parameters). */
START_TEST(test_convert_after_optimizer_refused)
{
    int64_t hidden[] = {3}, xs[] = {2, 4}, ys[] = {2};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t y[2] = {0, 1};
    clt_tensor *tx, *ty, *logits, *loss, *dlogits;
    ck_assert_ok(clt_from_host(&tx, clt_test_cpu(), CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&ty, clt_test_cpu(), CLT_INT32, 1, ys, y));
    for (int round_trip = 0; round_trip < 2; round_trip++) {
        clt_model *m;
        clt_optimizer *opt;
        ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 4, 1, hidden, 2, 1));
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
        ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
        if (round_trip) ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT32));
        ck_assert_ok(clt_model_forward(m, tx, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, ty));
        ck_assert_ok(clt_model_backward(m, dlogits, NULL));
        ck_assert_status(clt_optimizer_step(opt), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "convert before building an optimizer"));
        clt_optimizer_free(opt);
        /* Built after the conversion, it steps. */
        ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
        ck_assert_ok(clt_optimizer_step(opt));
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
        clt_optimizer_free(opt);
        clt_model_free(m);
    }
    clt_tensor_release(tx);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = clt_test_tcase("optimizers");
    tcase_add_test(tc, test_lazy_state);
    tcase_add_test(tc, test_sgd_matches_host);
    tcase_add_test(tc, test_adam_matches_host);
    tcase_add_test(tc, test_schedule_and_restore);
    tcase_add_test(tc, test_invalid_arguments);
    tcase_add_test(tc, test_convert_after_optimizer_refused);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_add_test(gpus, test_state_follows_parameters);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
