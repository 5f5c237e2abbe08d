/* Two threads train two models at once in one process, each on its own
 * device (gpu:0 and gpu:1 when there are two, else both on the CPU), and
 * each must get exactly what the same training gives alone; then threads on
 * every device at once, each starting cold (its context, queue and kernels
 * made while the others make theirs: the locks are per device). Run under
 * ThreadSanitizer by scripts/test --tsan. And (the "clblast" entry) first
 * CLBlast products on every device at once, in fresh processes, since
 * CLBlast's first calls are not thread-safe (src/ops/dense.c). And
 * described planning devices made while another thread loops over every
 * device. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "device/device_internal.h"
#include "ops/ops_internal.h"

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
    if (ngpu < 2) devs[0] = devs[1] = clt_test_cpu();
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
    int n = clt_device_list_num_entries();
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

static atomic_int reading, described_all;

/* Synchronizes every device in use and reads the test device's figures,
 * over and over until the described devices are all made: the loops over
 * every slot (clt_synchronize_all, the records clt smi reads) beside
 * clt_plan_device_describe filling the pool's slots. */
static void *read_devices(void *arg)
{
    (void)arg;
    clt_memory_stats st;
    while (!atomic_load(&described_all)) {
        if (clt_synchronize_all() != CLT_OK || clt_memory_get_stats(clt_test_device(), &st) != CLT_OK) break;
        atomic_store(&reading, 1);
    }
    return NULL;
}

/* Described devices made while another thread loops over every device: a
 * slot is written only before it is published, and read only after (under
 * ThreadSanitizer a race fails the test). */
START_TEST(test_describe_beside_readers)
{
    pthread_t reader;
    ck_assert_int_eq(pthread_create(&reader, NULL, read_devices, NULL), 0);
    while (!atomic_load(&reading)) sched_yield();
    clt_device_description d = clt_device_description_default(CLT_DEVICE_GPU);
    clt_status s = CLT_OK;
    int made = 0;
    for (unsigned long long mib = 1; s == CLT_OK && mib <= CLT_PLAN_MAX_DESCRIBED; mib++) {
        d.global_mem_bytes = d.max_alloc_bytes = (777 + mib) << 20;
        clt_device dev;
        s = clt_plan_device_describe(&d, &dev);
        if (s == CLT_OK) ck_assert_ok(clt_synchronize(dev));
        made += s == CLT_OK;
        sched_yield();
    }
    atomic_store(&described_all, 1);
    ck_assert_int_eq(pthread_join(reader, NULL), 0);
    ck_assert_msg(s == CLT_OK || s == CLT_ERR_UNSUPPORTED, "%s", clt_last_error());
    ck_assert_int_gt(made, 0);
    ck_assert_ok(clt_synchronize_all());
}
END_TEST

/* The child's side of test_first_clblast_products_at_once: a product per
 * device, each thread's the first CLBlast call in the process, all released
 * at one moment; each checked against the C reference. Exits 0; 1 when a
 * device could not be set up or a product failed or was wrong; 77, having
 * made nothing, with fewer than two devices on CLBlast. */
enum { FIRST_MOST = 4, FM = 37, FN = 29, FK = 23 };

typedef struct first_product {
    clt_device dev;
    clt_tensor *a, *b, *c;
    pthread_barrier_t *start;
    clt_status status;
    char error[256]; /* the thread's own message (clt_last_error is per thread) */
} first_product;

static void *first_gemm(void *arg)
{
    first_product *p = arg;
    pthread_barrier_wait(p->start);
    p->status = clt_gemm_(0, 1, 1.0f, p->a, p->b, 0.0f, p->c);
    if (p->status == CLT_OK) p->status = clt_synchronize(p->dev);
    if (p->status != CLT_OK) snprintf(p->error, sizeof p->error, "%s", clt_last_error());
    return NULL;
}

/* The devices (at most FIRST_MOST) into p; how many run their products on
 * CLBlast, or -1 when one cannot be resolved. */
static int clblast_devices(first_product *p, int n)
{
    int on_clblast = 0;
    for (int i = 0; i < n; i++) {
        int slot, cpu = 1;
        if (clt_device_list_entry(i, &p[i].dev) != CLT_OK || clt__resolve(p[i].dev, &slot) != CLT_OK ||
            clt__dense_cpu(slot, &cpu) != CLT_OK) {
            fprintf(stderr, "device %d: %s\n", i, clt_last_error());
            return -1;
        }
        on_clblast += !cpu;
    }
    return on_clblast;
}

static int first_products_child(void)
{
    int n = clt_device_list_num_entries(), bad = 0;
    if (n > FIRST_MOST) n = FIRST_MOST;
    first_product p[FIRST_MOST];
    memset(p, 0, sizeof p);
    int on_clblast = clblast_devices(p, n);
    if (on_clblast < 0) return 1;
    if (on_clblast < 2) return CLT_TEST_SKIPPED;
    pthread_barrier_t start;
    float ha[FM * FK], hb[FN * FK], want[FM * FN], got[FM * FN];
    clt_test_fill_uniform(ha, FM * FK, 5, -1, 1);
    clt_test_fill_uniform(hb, FN * FK, 6, -1, 1);
    clt_test_ref_gemm(0, 1, FM, FN, FK, 1.0f, ha, hb, 0.0f, want);
    int64_t as[] = {FM, FK}, bs[] = {FN, FK}, cs[] = {FM, FN};
    for (int i = 0; i < n && !bad; i++) {
        p[i].start = &start;
        if (clt_from_host(&p[i].a, p[i].dev, CLT_FLOAT32, 2, as, ha) != CLT_OK ||
            clt_from_host(&p[i].b, p[i].dev, CLT_FLOAT32, 2, bs, hb) != CLT_OK ||
            clt_zeros(&p[i].c, p[i].dev, CLT_FLOAT32, 2, cs) != CLT_OK) {
            fprintf(stderr, "device %d: %s\n", i, clt_last_error());
            bad = 1;
        }
    }
    if (!bad && pthread_barrier_init(&start, NULL, (unsigned)n) != 0) bad = 1;
    if (!bad) {
        pthread_t th[FIRST_MOST];
        int started = 0;
        for (; started < n; started++)
            if (pthread_create(&th[started], NULL, first_gemm, &p[started]) != 0) break;
        /* A thread that did not start would leave the others at the barrier. */
        if (started < n) _exit(1);
        for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < n; i++) {
            if (p[i].status == CLT_OK && (p[i].status = clt_to_host(p[i].c, got, sizeof got)) != CLT_OK)
                snprintf(p[i].error, sizeof p[i].error, "%s", clt_last_error());
            if (p[i].status != CLT_OK) {
                fprintf(stderr, "device %d: %s\n", i, p[i].error);
                bad = 1;
            } else if (!(clt_test_max_rel_err(got, want, FM * FN) < 1e-4)) {
                fprintf(stderr, "device %d: the product differs from the reference\n", i);
                bad = 1;
            }
        }
    }
    clt_synchronize_all();
    for (int i = 0; i < n; i++) {
        clt_tensor_release(p[i].a);
        clt_tensor_release(p[i].b);
        clt_tensor_release(p[i].c);
    }
    return bad;
}

/* Fresh processes (this binary again, so that no device was used before)
 * each make their first CLBlast products on every device at once. Without
 * the lock around CLBlast's calls (src/ops/dense.c) 9 of 10 runs of this
 * test failed, nearly all with a process dead of SIGSEGV; with it, 0 of 6.
 * Each process has two minutes (SIGALRM). */
START_TEST(test_first_clblast_products_at_once)
{
    enum { RUNS = 16 };
    for (int run = 0; run < RUNS; run++) {
        int code = clt_test_run_self("--first-clblast-products", NULL, NULL, 120);
        ck_assert_msg(code < 128, "run %d: the process died of signal %d", run, code - 128);
        clt_test_skip_if(code == CLT_TEST_SKIPPED, "clblast-devices",
                         "fewer than two devices here run their products on CLBlast");
        ck_assert_msg(code == 0, "run %d exited %d", run, code);
    }
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--first-clblast-products") == 0) return first_products_child();
    Suite *s = suite_create("threads");
    TCase *tc = clt_test_tcase("training");
    tcase_add_test(tc, test_two_threads_two_models);
    tcase_add_test(tc, test_threads_on_every_device_from_cold);
    tcase_add_test(tc, test_describe_beside_readers);
    suite_add_tcase(s, tc);
    TCase *clblast = clt_test_tcase("clblast"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(clblast, "clblast");
    tcase_add_test(clblast, test_first_clblast_products_at_once);
    suite_add_tcase(s, clblast);
    return clt_test_run(s);
}
