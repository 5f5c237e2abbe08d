/* Two threads train two models at once in one process, each on its own
 * device (gpu:0 and gpu:1 when there are two, else both on the CPU), and
 * each must get exactly what the same training gives alone; then threads on
 * every device at once, each starting cold (its context, queue and kernels
 * made while the others make theirs: the locks are per device). Run under
 * ThreadSanitizer by scripts/test --tsan. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define B 9
#define IN 13
#define HIDDENS 24
#define CLASSES 7
#define STEPS 5

typedef struct job {
    clt_device dev;
    uint64_t seed;
    clt_status status;
    char error[256];
    float *params; /* after training, malloc'd */
    int64_t n;
} job;

/* Builds a ResMLP on j->dev and trains it STEPS Adam steps on one batch. */
static void *train(void *arg)
{
    job *j = arg;
    clt_model *m = NULL;
    clt_optimizer *opt = NULL;
    clt_tensor *x = NULL, *y = NULL;
    float xs[B * IN];
    int32_t ys[B];
    clt_test_fill_uniform(xs, B * IN, j->seed, -1.0f, 1.0f);
    for (int i = 0; i < B; i++) ys[i] = (int32_t)((i * 5 + j->seed) % CLASSES);
    int64_t xshape[] = {B, IN}, yshape[] = {B};
    clt_status s = clt_model_create_resmlp(&m, j->dev, IN, HIDDENS, 1, CLASSES, j->seed);
    if (s == CLT_OK) s = clt_optimizer_create_adam(&opt, m, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0);
    if (s == CLT_OK) s = clt_from_host(&x, j->dev, CLT_FLOAT32, 2, xshape, xs);
    if (s == CLT_OK) s = clt_from_host(&y, j->dev, CLT_INT32, 1, yshape, ys);
    for (int step = 0; s == CLT_OK && step < STEPS; step++) {
        clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
        s = clt_model_zero_grad(m);
        if (s == CLT_OK) s = clt_model_forward(m, x, &logits);
        if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y);
        if (s == CLT_OK) s = clt_model_backward(m, dlogits, NULL);
        if (s == CLT_OK) s = clt_optimizer_step(opt);
        clt_tensor_release(dlogits);
        clt_tensor_release(loss);
        clt_tensor_release(logits);
    }
    if (s == CLT_OK) {
        j->n = clt_model_num_parameter_elements(m);
        j->params = malloc((size_t)j->n * sizeof *j->params);
        s = j->params ? clt_to_host(clt_model_parameters(m), j->params, (size_t)j->n * sizeof *j->params)
                      : CLT_ERR_OUT_OF_MEMORY;
    }
    j->status = s;
    if (s != CLT_OK) snprintf(j->error, sizeof j->error, "%s", clt_last_error());
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_optimizer_free(opt);
    clt_model_free(m);
    return NULL;
}

START_TEST(test_two_threads_two_models)
{
    clt_device devs[2];
    int ngpu = clt_try_all_gpus(devs, 2);
    if (ngpu < 2) devs[0] = devs[1] = clt_cpu();
    job alone[2], together[2];
    for (int i = 0; i < 2; i++) {
        memset(&alone[i], 0, sizeof alone[i]);
        alone[i].dev = devs[i];
        alone[i].seed = 3 + (uint64_t)i;
        together[i] = alone[i];
        train(&alone[i]);
        ck_assert_msg(alone[i].status == CLT_OK, "alone %d: %s", i, alone[i].error);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, train, &together[i]), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(together[i].status == CLT_OK, "thread %d: %s", i, together[i].error);
        ck_assert_int_eq(together[i].n, alone[i].n);
        ck_assert_msg(memcmp(together[i].params, alone[i].params, (size_t)alone[i].n * sizeof(float)) == 0,
                      "thread %d trained differently beside another thread", i);
        free(alone[i].params);
        free(together[i].params);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* One thread per device (gpu:0, gpu:1 of one context and cpu:0 of its own
 * under CLT_CPU_AS_GPU=1; else the devices there are), started before any
 * device was used in this process, so contexts, queues and kernel tables are
 * created concurrently; each result must equal its device's run alone. */
START_TEST(test_threads_on_every_device_from_cold)
{
    enum { MOST = 4 };
    int n = clt_device_list_count();
    if (n > MOST) n = MOST;
    job alone[MOST], together[MOST];
    pthread_t th[MOST];
    for (int i = 0; i < n; i++) {
        memset(&together[i], 0, sizeof together[i]);
        ck_assert_ok(clt_device_list_entry(i, &together[i].dev));
        together[i].seed = 11 + (uint64_t)i;
        alone[i] = together[i];
    }
    for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, train, &together[i]), 0);
    for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(together[i].status == CLT_OK, "thread %d: %s", i, together[i].error);
        train(&alone[i]);
        ck_assert_msg(alone[i].status == CLT_OK, "alone %d: %s", i, alone[i].error);
        ck_assert_int_eq(together[i].n, alone[i].n);
        ck_assert_msg(memcmp(together[i].params, alone[i].params, (size_t)alone[i].n * sizeof(float)) == 0,
                      "the thread on device %d trained differently beside the others", i);
        free(alone[i].params);
        free(together[i].params);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = clt_test_tcase("training");
    tcase_add_test(tc, test_two_threads_two_models);
    tcase_add_test(tc, test_threads_on_every_device_from_cold);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
