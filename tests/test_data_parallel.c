/* Data parallel training against single-device training on the same global
 * batches: several steps, SGD and Adam, even and uneven splits (an empty
 * shard included), replicas on gpu:0 and gpu:1 when there are two GPUs (and
 * cpu:0, in its own context, as a third), else two replicas on one device,
 * which runs the same splitting and combining code. float16 models too:
 * against one device within float16 rounding, a forced overflow skipped on
 * every replica, and the replicas bit-identical after every step. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/parallel_internal.h"
#include "trainer/engine.h"
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
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 1, 10, 11));
    return m;
}

/* gpu:0, gpu:1 (and cpu:0) when two GPUs exist; else the CPU `count` times. */
static int pick_devices(clt_device *list, int want)
{
    if (clt_num_gpus() >= 2) {
        list[0] = clt_gpu(0);
        list[1] = clt_gpu(1);
        list[2] = clt_test_cpu();
        return want;
    }
    for (int i = 0; i < want; i++) list[i] = clt_test_cpu();
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
    double err = clt_test_max_rel_err(b, a, clt_model_num_parameter_elements(ref));
    /* The run must have moved the parameters, or equality proves nothing. */
    clt_model *init = resmlp();
    float *c = clt_test_read(clt_model_parameters(init));
    ck_assert_msg(clt_test_max_rel_err(a, c, clt_model_num_parameter_elements(ref)) > 1e-3,
                  "training changed nothing");
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

/* What the step hook saw: replicas that differed from the primary in their
 * float16 parameters (bit for bit) or loss scaler after some step, the
 * primary's scale after each step and its parameters after the first. */
typedef struct replica_watch {
    int steps, diverged;
    float scales[64];
    void *first;
    size_t first_bytes;
} replica_watch;

static void watch_replicas(clt_model *const *replicas, int k, void *ctx)
{
    replica_watch *w = ctx;
    clt_tensor *p0 = clt_model_parameters(replicas[0]);
    size_t bytes = clt_tensor_nbytes(p0);
    float *a = clt_test_read(p0), s0;
    int d0;
    int64_t c0;
    ck_assert_ok(clt_model_loss_scale_state(replicas[0], &s0, &d0, &c0));
    for (int i = 1; i < k; i++) {
        float si;
        int di;
        int64_t ci;
        float *b = clt_test_read(clt_model_parameters(replicas[i]));
        ck_assert_ok(clt_model_loss_scale_state(replicas[i], &si, &di, &ci));
        if (clt_model_dtype(replicas[i]) != CLT_FLOAT16 || memcmp(a, b, bytes) != 0 || si != s0 || di != d0 || ci != c0)
            w->diverged++;
        free(b);
    }
    if (w->steps < 64) w->scales[w->steps] = s0;
    if (w->steps++ == 0) {
        w->first = a;
        w->first_bytes = bytes;
    } else {
        free(a);
    }
}

/* The float32 master weights of the optimizer saved at path with a ResMLP. */
static float *saved_master(const char *path, clt_optimizer_kind kind)
{
    clt_model *m = resmlp();
    clt_optimizer *opt;
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(kind == CLT_OPTIMIZER_ADAM ? clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0)
                                            : clt_optimizer_create_sgd(&opt, m, 0.1f, 0, 0));
    ck_assert_ok(clt_checkpoint_load(path, m, opt, NULL));
    const char *name;
    clt_tensor *master;
    ck_assert_ok(clt_optimizer_state(opt, clt_optimizer_num_states(opt) - 1, &name, &master));
    ck_assert_str_eq(name, "master");
    float *x = clt_test_read(master);
    clt_optimizer_free(opt);
    clt_model_free(m);
    return x;
}

static float *read_widened(clt_tensor *t)
{
    clt_tensor *w;
    ck_assert_ok(clt_to_dtype(&w, t, CLT_FLOAT32));
    float *x = clt_test_read(w);
    clt_tensor_release(w);
    return x;
}

/* One float16 step (unit in the last place) at x. */
static double half_ulp(double x)
{
    int e;
    frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
}

typedef struct half_result {
    double master_err, loss_diff;
    int64_t n, master_far, param_far; /* elements off by more than HALF_MASTER_TOL (plus a float16 step) */
    float scale_ref, scale_par;
    replica_watch watch;
    float *init; /* the float16 parameters before training, widened */
} half_result;

/* Tolerances. float16 storage rounds gradients to 11 significant bits
 * (relative 2^-11, about 5e-4): data parallel rounds each shard's gradient
 * before the float32 sum and the sum once more, one device the whole
 * gradient once, so gradients differ by a few such roundings. SGD moves the
 * float32 master weights by lr times that, far below 1e-4 for gradients of
 * order 1; the float16 parameters round the masters, so they differ by as
 * much plus one float16 step (an element near a rounding boundary). Adam divides by the
 * gradient's running magnitude: where a gradient is within rounding noise of
 * zero its update may go lr one way in one run and the other way in the
 * other, so a few elements (under 0.1%) may differ by up to 2 lr per step. */
#define HALF_MASTER_TOL 1e-4

/* compare() for float16 models starting at loss scale `scale`: the float32
 * master weights (from each run's checkpoint) and the float16 parameters of
 * the two runs, their final scales, and what the replicas looked like after
 * each step. */
static void compare_half(clt_optimizer_kind kind, int k, int64_t n, int epochs, float scale, half_result *out)
{
    clt_dataset train = clt_test_make_dataset(n, 1);
    clt_device list[3];
    pick_devices(list, k);
    clt_trainer_options o = quiet_options(kind);
    o.max_epochs = epochs;
    o.use_device = 1;
    o.device = list[0];
    o.fp16 = 1;
    o.save_info = (clt_checkpoint_info){.arch = "resmlp", .hiddens = 32, .blocks = 1};
    char dir[256], ref_path[300], par_path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "dp16");
    snprintf(ref_path, sizeof ref_path, "%s/ref.safetensors", dir);
    snprintf(par_path, sizeof par_path, "%s/par.safetensors", dir);
    clt_model *ref = resmlp(), *par = resmlp();
    ck_assert_ok(clt_model_set_loss_scale(ref, scale, 1));
    ck_assert_ok(clt_model_set_loss_scale(par, scale, 1));
    clt_model *init = resmlp();
    ck_assert_ok(clt_model_to_dtype(init, CLT_FLOAT16));
    out->init = read_widened(clt_model_parameters(init));
    clt_model_free(init);
    clt_trainer_result r1, r2;
    o.save_path = ref_path;
    ck_assert_ok(clt_trainer_fit(ref, &train, NULL, &o, &r1));
    memset(&out->watch, 0, sizeof out->watch);
    clt__dp_set_step_hook(watch_replicas, &out->watch);
    o.save_path = par_path;
    clt_status s = clt_parallel_fit(par, &train, NULL, &o, list, k, NULL, &r2);
    clt__dp_set_step_hook(NULL, NULL);
    ck_assert_ok(s);
    ck_assert_int_eq(r1.steps, r2.steps);
    ck_assert_int_eq(out->watch.steps, r2.steps);
    ck_assert_int_eq(clt_model_dtype(par), CLT_FLOAT16);
    int64_t np = out->n = clt_model_num_parameter_elements(ref);
    float *ma = saved_master(ref_path, kind), *mb = saved_master(par_path, kind);
    ck_assert_msg(clt_test_max_rel_err(ma, out->init, np) > 1e-3, "training changed nothing");
    float *pa = read_widened(clt_model_parameters(ref)), *pb = read_widened(clt_model_parameters(par));
    out->master_err = clt_test_max_rel_err(mb, ma, np);
    out->master_far = out->param_far = 0;
    for (int64_t i = 0; i < np; i++) {
        out->master_far += fabs((double)ma[i] - mb[i]) > HALF_MASTER_TOL;
        out->param_far += fabs((double)pa[i] - pb[i]) > HALF_MASTER_TOL + half_ulp(fmax(fabs(pa[i]), fabs(pb[i])));
    }
    out->loss_diff = fabs(r1.train_loss - r2.train_loss) / fabs(r1.train_loss);
    out->scale_ref = clt_model_loss_scale(ref);
    out->scale_par = clt_model_loss_scale(par);
    free(ma);
    free(mb);
    free(pa);
    free(pb);
    clt_model_free(ref);
    clt_model_free(par);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}

/* The two runs agree within the tolerances above; `steps` optimizer steps
 * were applied. */
static void check_half_result(half_result *r, clt_optimizer_kind kind, int steps)
{
    ck_assert_int_eq(r->watch.diverged, 0);
    ck_assert_float_eq(r->scale_par, r->scale_ref);
    ck_assert_msg(r->loss_diff < 1e-3, "train loss differs by %g", r->loss_diff);
    int64_t few = kind == CLT_OPTIMIZER_ADAM ? r->n / 1000 : 0;
    ck_assert_msg(r->master_far <= few, "%lld master weights differ by more than %g", (long long)r->master_far,
                  HALF_MASTER_TOL);
    ck_assert_msg(r->param_far <= few, "%lld float16 parameters differ by more than %g and a step",
                  (long long)r->param_far, HALF_MASTER_TOL);
    double bound = kind == CLT_OPTIMIZER_ADAM ? 2 * 1e-3 * steps : HALF_MASTER_TOL;
    ck_assert_msg(r->master_err <= bound, "master weights differ by %g", r->master_err);
    free(r->init);
    free(r->watch.first);
}

static void check_half(clt_optimizer_kind kind, int k, int64_t n, int epochs)
{
    half_result r;
    compare_half(kind, k, n, epochs, 65536.0f, &r);
    check_half_result(&r, kind, (int)((n + 31) / 32 * epochs));
}

START_TEST(test_two_devices_half_sgd)
{
    check_half(CLT_OPTIMIZER_SGD, 2, 128, 2);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_two_devices_half_adam)
{
    check_half(CLT_OPTIMIZER_ADAM, 2, 128, 2);
}
END_TEST

/* As test_uneven_split (shards 10/11/11, then an empty primary shard). */
START_TEST(test_uneven_split_half)
{
    check_half(CLT_OPTIMIZER_SGD, 3, 98, 1);
    check_half(CLT_OPTIMIZER_ADAM, 3, 98, 1);
}
END_TEST

/* A loss scale of 3 * 2^20 overflows float16: the true class's dy is about
 * -1/32 (a mean over 32 examples), and dy times the scale alone exceeds
 * 65504. The first steps are skipped on every replica, the scale halving
 * alike on all, until it fits; the run then matches one device's, which
 * skipped the same steps. (The scale is not a power of two so that it never
 * lands where this run's largest gradient is within a few percent of
 * float16's limit: there a shard's partial gradient may overflow where the
 * whole batch's does not, and data parallel would skip one step more, as it
 * must when any replica overflows.) */
START_TEST(test_half_overflow_skips_everywhere)
{
    half_result r;
    float start = 3145728.0f;
    compare_half(CLT_OPTIMIZER_ADAM, 2, 160, 2, start, &r);
    ck_assert_int_eq(r.watch.steps, 10);
    ck_assert_float_eq(r.watch.scales[0], start / 2);
    ck_assert_float_eq(r.watch.scales[1], start / 4);
    ck_assert_float_eq(r.watch.scales[2], start / 8);
    for (int i = 3; i < r.watch.steps; i++) ck_assert_float_eq(r.watch.scales[i], start / 8);
    /* Skipped: the first step left the parameters as they were. */
    int64_t n = (int64_t)r.watch.first_bytes / 2;
    const uint16_t *first = r.watch.first;
    for (int64_t i = 0; i < n; i++)
        CLT_TEST_REQUIRE(clt_half_to_float(first[i]) == r.init[i], "parameter %lld: %g after the skipped step, %g "
                         "before", (long long)i, (double)clt_half_to_float(first[i]), (double)r.init[i]);
    check_half_result(&r, CLT_OPTIMIZER_ADAM, 7);
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
    return clt_set_error(CLT_ERR_IO, "transport down after %lld floats", (long long)n);
}

/* A one-rank collective goes through the host staging buffer once per step
 * (plus twice per epoch: the loss, and the end of the epoch's verdict) and
 * changes nothing; its failure stops the fit. */
START_TEST(test_collective_of_one)
{
    clt_dataset train = clt_test_make_dataset(64, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.use_device = 1;
    o.device = clt_test_cpu();
    clt_model *ref = resmlp(), *par = resmlp();
    ck_assert_ok(clt_trainer_fit(ref, &train, NULL, &o, NULL));
    clt_collective comm = {0, 1, identity_allreduce, NULL};
    clt_device dev = clt_test_cpu();
    reduce_calls = 0;
    ck_assert_ok(clt_parallel_fit(par, &train, NULL, &o, &dev, 1, &comm, NULL));
    ck_assert_int_eq(reduce_calls, 2 + 1 + 1);
    float *a = clt_test_read(clt_model_parameters(ref)), *b = clt_test_read(clt_model_parameters(par));
    ck_assert_double_lt(clt_test_max_rel_err(b, a, clt_model_num_parameter_elements(ref)), 1e-6);
    comm.allreduce_sum = failing_allreduce;
    ck_assert_status(clt_parallel_fit(par, &train, NULL, &o, &dev, 1, &comm, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "allreduce_sum"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), ": transport down after ")); /* the callback's own message */
    free(a);
    free(b);
    clt_model_free(ref);
    clt_model_free(par);
    clt_dataset_free(&train);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Two ranks in one process, each a thread: allreduce_sum waits for both
 * and sums their buffers; a rank whose fit has returned has left, and the
 * other's next allreduce_sum fails at once instead of waiting for it (where
 * MPI would wait forever). */
typedef struct two_ranks {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    float *bufs[2];
    int arrived, generation, left;
} two_ranks;

typedef struct rank_run {
    two_ranks *g;
    int rank;
    clt_status s;
    char why[512];
    clt_trainer_result r;
    float lr;
} rank_run;

static clt_status threads_allreduce(void *ctx, float *buf, int64_t n)
{
    rank_run *me = ctx;
    two_ranks *g = me->g;
    pthread_mutex_lock(&g->mu);
    int gen = g->generation, ok = !g->left;
    if (ok && ++g->arrived == 2) {
        g->bufs[me->rank] = buf;
        float *other = g->bufs[1 - me->rank];
        for (int64_t i = 0; i < n; i++) buf[i] = other[i] = buf[i] + other[i];
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->cv);
    } else if (ok) {
        g->bufs[me->rank] = buf;
        while (gen == g->generation && !g->left) pthread_cond_wait(&g->cv, &g->mu);
        ok = gen != g->generation;
    }
    pthread_mutex_unlock(&g->mu);
    return ok ? CLT_OK : clt_set_error(CLT_ERR_IO, "the other rank has left");
}

/* One rank's fit: lr so large that the epoch's one step makes the
 * parameters infinite while its loss, read before the update, is finite. */
static void *rank_main(void *arg)
{
    rank_run *me = arg;
    clt_dataset train = clt_test_make_dataset(32, 1), val = clt_test_make_dataset(16, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.max_epochs = 3;
    o.lr = me->lr;
    clt_model *m = resmlp();
    clt_collective comm = {me->rank, 2, threads_allreduce, me};
    clt_device dev = clt_test_cpu();
    me->s = clt_parallel_fit(m, &train, &val, &o, &dev, 1, &comm, &me->r);
    snprintf(me->why, sizeof me->why, "%s", clt_last_error());
    pthread_mutex_lock(&me->g->mu);
    me->g->left = 1;
    pthread_cond_broadcast(&me->g->cv);
    pthread_mutex_unlock(&me->g->mu);
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    return NULL;
}

/* Rank 0 alone evaluates: when its validation loss shows the epoch's last
 * step broke the model, every rank stops with CLT_ERR_DIVERGED after the
 * same epoch, none goes on into the next epoch's collectives. A finite run
 * of the same two ranks ends with both. */
START_TEST(test_ranks_agree_on_divergence)
{
    for (int broken = 1; broken >= 0; broken--) {
        two_ranks g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
        rank_run runs[2] = {{.g = &g, .rank = 0}, {.g = &g, .rank = 1}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            runs[i].lr = broken ? 3e38f : 0.01f;
            ck_assert_int_eq(pthread_create(&t[i], NULL, rank_main, &runs[i]), 0);
        }
        for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        for (int i = 0; i < 2; i++) {
            if (!broken) {
                ck_assert_msg(runs[i].s == CLT_OK, "rank %d: %s", i, runs[i].why);
                ck_assert_int_eq(runs[i].r.epochs, 3);
                continue;
            }
            ck_assert_msg(runs[i].s == CLT_ERR_DIVERGED, "rank %d: %s: %s", i, clt_status_string(runs[i].s),
                          runs[i].why);
            ck_assert_msg(strstr(runs[i].why, i == 0 ? "validation loss" : "rank 0 found the model broken after "
                                                                           "epoch 1"), "rank %d: %s", i, runs[i].why);
        }
    }
}
END_TEST

/* Three ranks, one real and two simulated by the collective: every sum
 * is the real rank's buffer times three (the others' the same), except the
 * end of an epoch's verdict, where each simulated rank adds its own vote
 * (clt__fit_vote) of the status it failed with, or CLT_OK. */
typedef struct simulated_ranks {
    int real;              /* the real rank's number */
    clt_status status[3];  /* each simulated rank's at the epoch's end */
} simulated_ranks;

static clt_status simulated_allreduce(void *ctx, float *buf, int64_t n)
{
    const simulated_ranks *w = ctx;
    if (n != CLT__VERDICT_FLOATS) {
        for (int64_t i = 0; i < n; i++) buf[i] *= 3;
        return CLT_OK;
    }
    for (int r = 0; r < 3; r++) {
        if (r == w->real) continue;
        float v[CLT__VERDICT_FLOATS];
        clt__fit_vote(v, r == 0, w->status[r]);
        for (int64_t i = 0; i < n; i++) buf[i] += v[i];
    }
    return CLT_OK;
}

/* Non-lead ranks that fail at an epoch's end stop every rank after it, with
 * their status when they agree on one, else the most common, and a message
 * counting the ranks of each (docs/multi-device.md). */
START_TEST(test_ranks_agree_on_other_failures)
{
    static const struct {
        int real;
        clt_status status[3], want;
        const char *counts;
    } cases[] = {
        {0, {CLT_OK, CLT_ERR_FORMAT, CLT_ERR_FORMAT}, CLT_ERR_FORMAT, "2 other ranks failed at the end of epoch 1 "
                                                                      "(2 with CLT_ERR_FORMAT; "},
        {0, {CLT_OK, CLT_ERR_FORMAT, CLT_ERR_IO}, CLT_ERR_IO, "(1 with CLT_ERR_IO, 1 with CLT_ERR_FORMAT; their "},
        {0, {CLT_OK, CLT_ERR_FORMAT, CLT_ERR_SHAPE}, CLT_ERR_SHAPE, "stopped with CLT_ERR_SHAPE, the most common"},
        {1, {CLT_OK, CLT_OK, CLT_ERR_UNSUPPORTED}, CLT_ERR_UNSUPPORTED, "1 other rank failed at the end of epoch 1 "
                                                                        "(1 with CLT_ERR_UNSUPPORTED; its own"},
        {2, {CLT_OK, CLT_OK, CLT_OK}, CLT_OK, NULL},
    };
    ck_assert_int_eq(CLT__VERDICT_FLOATS, 303); /* docs/multi-device.md */
    clt_dataset train = clt_test_make_dataset(96, 1);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.max_epochs = 2;
    clt_device dev = clt_test_cpu();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        simulated_ranks w = {cases[c].real, {cases[c].status[0], cases[c].status[1], cases[c].status[2]}};
        clt_collective comm = {w.real, 3, simulated_allreduce, &w};
        clt_model *m = resmlp();
        clt_trainer_result r;
        clt_status s = clt_parallel_fit(m, &train, NULL, &o, &dev, 1, &comm, &r);
        ck_assert_msg(s == cases[c].want, "case %zu: %s: %s", c, clt_status_string(s), clt_last_error());
        ck_assert_int_eq(r.epochs, s == CLT_OK ? 2 : 1);
        if (cases[c].counts)
            ck_assert_msg(strstr(clt_last_error(), cases[c].counts), "case %zu: %s", c, clt_last_error());
        clt_model_free(m);
    }
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
        for (int i = 0; i < k; i++) clt_sync_reset_count(list[i]);
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
    clt_device dev = clt_num_gpus() >= 2 ? clt_gpu(1) : clt_test_cpu();
    ck_assert_ok(clt_model_replicate(&copy, m, dev));
    ck_assert(clt_device_equal(clt_model_device(copy), dev));
    ck_assert_int_eq(clt_model_num_parameter_tensors(copy), clt_model_num_parameter_tensors(m));
    for (int i = 0; i < clt_model_num_parameter_tensors(m); i++) {
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
    clt_device missing = clt_gpu(7), cpu = clt_test_cpu();
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

/* 1 when the two files hold the same bytes. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    ck_assert_msg(fa && fb, "cannot open %s or %s", a, b);
    int same = 1, ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb) same = 0;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

/* Data parallel runs save at every epoch's end and resume: stopped by a
 * step limit part way through epoch 2, then resumed, the run ends with the
 * bytes of an uninterrupted one, and reports the same epoch loss up to
 * float rounding (the resumed part's sum is added in another order). */
START_TEST(test_resume_data_parallel)
{
    char dir[256], full[300], part[300];
    clt_test_make_temp_dir(dir, sizeof dir, "dp-resume");
    snprintf(full, sizeof full, "%s/full.st", dir);
    snprintf(part, sizeof part, "%s/part.st", dir);
    clt_dataset train = clt_test_make_dataset(320, 1);
    clt_device list[3];
    int k = pick_devices(list, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_ADAM);
    o.max_epochs = 2;
    o.save_path = full;
    o.save_info = (clt_checkpoint_info){.arch = "resmlp", .hiddens = 32, .blocks = 1};
    clt_model *a = resmlp(), *b = resmlp();
    clt_trainer_result ra, rb;
    o.max_steps = 10; /* exactly one epoch: its end saves */
    ck_assert_ok(clt_parallel_fit(a, &train, NULL, &o, list, k, NULL, &ra));
    clt_checkpoint_info info;
    clt_model *check = resmlp();
    ck_assert_ok(clt_checkpoint_load(full, check, NULL, &info));
    ck_assert_int_eq(info.epoch, 1);
    ck_assert_int_eq(info.steps, 10);
    clt_model_free(check);
    o.max_steps = 0;
    o.resume_path = full;
    ck_assert_ok(clt_parallel_fit(a, &train, NULL, &o, list, k, NULL, &ra));
    ck_assert_int_eq(ra.steps, 20);
    o.resume_path = NULL;
    o.save_path = part;
    o.max_steps = 13;
    ck_assert_ok(clt_parallel_fit(b, &train, NULL, &o, list, k, NULL, &rb));
    ck_assert_int_eq(rb.epochs, 1);
    o.max_steps = 0;
    o.resume_path = part;
    ck_assert_ok(clt_parallel_fit(b, &train, NULL, &o, list, k, NULL, &rb));
    ck_assert_int_eq(rb.steps, 20);
    ck_assert_int_eq(rb.epochs, 2);
    ck_assert_msg(same_file(full, part), "a resumed data parallel run differs from an uninterrupted one");
    ck_assert_msg(fabs(ra.train_loss - rb.train_loss) <= 1e-6 * fabs(ra.train_loss), "train loss %.9g vs %.9g",
                  ra.train_loss, rb.train_loss);
    clt_model_free(a);
    clt_model_free(b);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

/* A stop request ends a data parallel fit too, saved where it stopped.
 * Without ranks it acts before the next step; with a collective the ranks
 * agree on it through the step's allreduce, so it acts after that step;
 * either way resuming ends as an uninterrupted run. */
START_TEST(test_stop_data_parallel)
{
    char dir[256], full[300], part[300];
    clt_test_make_temp_dir(dir, sizeof dir, "dp-stop");
    snprintf(full, sizeof full, "%s/full.st", dir);
    snprintf(part, sizeof part, "%s/part.st", dir);
    clt_dataset train = clt_test_make_dataset(128, 1);
    clt_device list[3];
    int k = pick_devices(list, 2);
    clt_trainer_options o = quiet_options(CLT_OPTIMIZER_SGD);
    o.save_path = part;
    clt_model *m = resmlp();
    clt_trainer_result r;
    clt_trainer_request_stop();
    ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, list, k, NULL, &r));
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_eq(r.steps, 0);
    clt_model_free(m);

    clt_collective comm = {0, 1, identity_allreduce, NULL};
    clt_device dev = clt_test_cpu();
    o.max_epochs = 2;
    o.save_path = full;
    m = resmlp();
    ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, &dev, 1, &comm, &r));
    ck_assert_int_eq(r.steps, 8);
    clt_model_free(m);
    m = resmlp();
    o.save_path = part;
    clt_trainer_request_stop();
    ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, &dev, 1, &comm, &r));
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_eq(r.steps, 1);
    o.resume_path = part;
    ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, &dev, 1, &comm, &r));
    ck_assert_int_eq(r.stopped, 0);
    ck_assert_int_eq(r.steps, 8);
    ck_assert_msg(same_file(full, part), "resumed after a stop, the parameters differ from an uninterrupted run");
    clt_model_free(m);
    clt_dataset_free(&train);
    clt_test_remove_dir(dir);
}
END_TEST

/* clt_parallel_plan predicts each device's peak as clt_parallel_fit
 * measures it: the peaks from the end of the first step (reset by the step
 * hook) through the second, float32 and float16, with accumulation. */
static void reset_peaks(clt_model *const *replicas, int k, void *ctx)
{
    int *steps = ctx;
    if (++*steps != 1) return;
    for (int i = 0; i < k; i++) ck_assert_ok(clt_memory_reset_peak(clt_model_device(replicas[i])));
}

START_TEST(test_plan_matches_data_parallel)
{
    clt_device list[3];
    pick_devices(list, 2);
    for (int half = 0; half <= 1; half++) {
        clt_model *m;
        ck_assert_ok(clt_model_create_resmlp(&m, list[0], 784, 96, 2, 10, 3));
        clt_plan_options po = clt_plan_default_options();
        po.batch_size = 250;
        po.accumulate = 2;
        po.optimizer = CLT_OPTIMIZER_ADAM;
        po.dtype = half ? CLT_FLOAT16 : CLT_FLOAT32;
        int64_t predicted[2];
        ck_assert_ok(clt_parallel_plan(m, &po, list, 2, predicted));
        ck_assert_int_gt(predicted[0], 0);
        ck_assert_int_gt(predicted[1], 0);
        clt_dataset train = clt_test_make_dataset(500, 1);
        clt_trainer_options o = quiet_options(CLT_OPTIMIZER_ADAM);
        o.batch_size = 250;
        o.accumulate = 2;
        o.fp16 = half;
        o.max_steps = 2;
        int steps = 0;
        clt__dp_set_step_hook(reset_peaks, &steps);
        clt_trainer_result r;
        ck_assert_ok(clt_parallel_fit(m, &train, NULL, &o, list, 2, NULL, &r));
        clt__dp_set_step_hook(NULL, NULL);
        ck_assert_int_eq(steps, 2);
        /* Each replica's loader stages its shard, not the whole batch: two
         * buffers of 125 rows of 784 floats and an int32 label, per replica. */
        ck_assert_int_eq(clt_memory_max_allocated(clt_pinned()), 2 * 2 * 125 * (784 * 4 + 4));
        ck_assert_ok(clt_memory_reset_peak(clt_pinned()));
        for (int i = 0; i < 2; i++)
            ck_assert_msg(clt_memory_max_allocated(list[i]) == predicted[i],
                          "float%d, replica %d: measured %lld, predicted %lld", half ? 16 : 32, i,
                          (long long)clt_memory_max_allocated(list[i]), (long long)predicted[i]);
        clt_dataset_free(&train);
        clt_model_free(m);
    }
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
    tcase_add_test(tc, test_two_devices_half_sgd);
    tcase_add_test(tc, test_two_devices_half_adam);
    tcase_add_test(tc, test_uneven_split_half);
    tcase_add_test(tc, test_half_overflow_skips_everywhere);
    tcase_add_test(tc, test_collective_of_one);
    tcase_add_test(tc, test_ranks_agree_on_divergence);
    tcase_add_test(tc, test_ranks_agree_on_other_failures);
    tcase_add_test(tc, test_fit_reports);
    tcase_add_test(tc, test_steps_do_not_wait);
    tcase_add_test(tc, test_replicate);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_resume_data_parallel);
    tcase_add_test(tc, test_stop_data_parallel);
    tcase_add_test(tc, test_plan_matches_data_parallel);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
