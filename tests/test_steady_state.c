/* The steady state of a training loop: after the first step of the capstone
 * ResMLP (784-256-2x256-10, small batch), every later step is served by the
 * caching allocator alone (no buffer from or back to the driver) and runs
 * without a synchronization point until the loss is read; and that step's
 * loss is the one a read returns. */
#include <stdint.h>
#include <stdlib.h>

#include "support.h"

enum { IN = 784, H = 256, BLOCKS = 2, OUT = 10, B = 7, STEPS = 4 };

/* One SGD step on (X, y); *loss is the step's loss tensor (not read). */
static void train_step(clt_model *net, clt_optimizer *opt, clt_tensor *X, clt_tensor *y, clt_tensor **loss)
{
    clt_tensor *logits, *dlogits;
    ck_assert_ok(clt_model_zero_grad(net));
    ck_assert_ok(clt_model_forward(net, X, &logits));
    ck_assert_ok(clt_cross_entropy_loss_grad(loss, &dlogits, logits, y));
    clt_tensor_release(logits);
    ck_assert_ok(clt_model_backward(net, dlogits, NULL));
    clt_tensor_release(dlogits);
    ck_assert_ok(clt_optimizer_step(opt));
}

static void run_steady_state(clt_device d, int adam)
{
    clt_model *net;
    ck_assert_ok(clt_model_create_resmlp(&net, d, IN, H, BLOCKS, OUT, 3));
    clt_optimizer *opt;
    if (adam) ck_assert_ok(clt_optimizer_create_adam(&opt, net, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    else ck_assert_ok(clt_optimizer_create_sgd(&opt, net, 0.05f, 0.9f, 0));
    int64_t xs[] = {B, IN}, ys[] = {B};
    int32_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = (i * 3) % OUT;
    clt_tensor *X, *y;
    ck_assert_ok(clt_randn(&X, d, 2, xs, 11));
    ck_assert_ok(clt_from_host(&y, d, CLT_INT32, 1, ys, labels));

    clt_tensor *loss = NULL;
    train_step(net, opt, X, y, &loss);
    double first;
    ck_assert_ok(clt_item(loss, &first));
    clt_tensor_release(loss);

    clt_memory_stats before, after;
    ck_assert_ok(clt_memory_get_stats(d, &before));
    ck_assert_ok(clt_synchronize(d));
    uint64_t syncs = clt_sync_count(d);
    for (int step = 1; step < STEPS; step++) {
        train_step(net, opt, X, y, &loss);
        if (step < STEPS - 1) clt_tensor_release(loss);
    }
    ck_assert_ok(clt_memory_get_stats(d, &after));
    ck_assert_msg(after.driver_allocs == before.driver_allocs, "%llu driver allocations in steady-state steps",
                  (unsigned long long)(after.driver_allocs - before.driver_allocs));
    ck_assert_msg(after.driver_frees == before.driver_frees, "%llu driver frees in steady-state steps",
                  (unsigned long long)(after.driver_frees - before.driver_frees));
    ck_assert_msg(after.cache_hits > before.cache_hits, "steady-state steps allocated nothing from the cache");
    ck_assert_msg(clt_sync_count(d) == syncs, "%llu sync points inside training steps",
                  (unsigned long long)(clt_sync_count(d) - syncs));

    /* Reading the loss is the one synchronization point, and training on one
     * batch lowers it. */
    double last;
    ck_assert_ok(clt_item(loss, &last));
    ck_assert_uint_eq(clt_sync_count(d), syncs + 1);
    ck_assert_msg(last < first, "loss went from %g to %g over %d steps on one batch", first, last, STEPS);
    clt_tensor_release(loss);
    clt_tensor_release(X);
    clt_tensor_release(y);
    clt_optimizer_free(opt);
    clt_model_free(net);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_steady_state_sgd) { run_steady_state(clt_try_gpu(0), 0); }
END_TEST

START_TEST(test_steady_state_adam) { run_steady_state(clt_try_gpu(0), 1); }
END_TEST

START_TEST(test_steady_state_cpu_device) { run_steady_state(clt_test_cpu(), 0); }
END_TEST

int main(void)
{
    Suite *s = suite_create("steady_state");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_steady_state_sgd);
    tcase_add_test(tc, test_steady_state_adam);
    tcase_add_test(tc, test_steady_state_cpu_device);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
