/* A training step recorded once and replayed (src/device/replay.h): a fit
 * with replay and one without (CLT_REPLAY=0) end with the same parameters,
 * bit for bit, the same loss and the same allocator counters, on the CPU
 * class and on the GPU class (CLT_DEVICE_CLASS=gpu, the data set resident
 * on the device), for a 784-64-10 MLP at batch 32 and a ResMLP; steps
 * replayed where the step is static (clt__replay_count), and steps that
 * change (a last smaller batch, momentum's first step, a learning rate
 * that changes every step, Adam's bias corrections) fall back and still
 * compute the same. With CLT_REPLAY=0 nothing is replayed; unset, nothing
 * on a CPU device (pocl); nor a float16 model's steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "device/replay.h"
#include "support.h"

typedef struct run {
    int resmlp;
    int64_t batch, n;
    int epochs;
    double momentum;
    int adam, cosine, fp16;
} run;

typedef struct outcome {
    float *params;
    int64_t numel;
    double loss;
    uint64_t replays;
    clt_memory_stats mem;
} outcome;

static clt_model *model_of(const run *r, clt_device d)
{
    clt_model *m = NULL;
    int64_t hidden = 64;
    if (r->resmlp) ck_assert_ok(clt_model_create_resmlp(&m, d, 784, 64, 2, 10, 5));
    else ck_assert_ok(clt_model_create_mlp(&m, d, 784, 1, &hidden, 10, 5));
    return m;
}

/* Trains r from the same start with CLT_REPLAY=replay (1 or 0; -1: unset). */
static outcome train(const run *r, int replay)
{
    if (replay < 0) unsetenv("CLT_REPLAY");
    else setenv("CLT_REPLAY", replay ? "1" : "0", 1);
    clt_device d = clt_test_device();
    clt_model *m = model_of(r, d);
    clt_dataset ds = clt_test_make_dataset(r->n, 7);
    clt_trainer_options o = clt_trainer_default_options();
    o.use_device = 1;
    o.device = d;
    o.batch_size = r->batch;
    o.max_epochs = r->epochs;
    o.lr = 0.05f;
    o.momentum = r->momentum;
    o.optimizer = r->adam ? CLT_OPTIMIZER_ADAM : CLT_OPTIMIZER_SGD;
    o.lr_schedule = r->cosine ? CLT_LR_COSINE : CLT_LR_CONSTANT;
    o.seed = 3;
    o.fp16 = r->fp16;
    clt_trainer_result res;
    uint64_t before = clt__replay_count();
    ck_assert_ok(clt_trainer_fit(m, &ds, NULL, &o, &res));
    outcome out = {.loss = res.train_loss, .replays = clt__replay_count() - before};
    out.params = clt_test_read(clt_model_parameters(m));
    out.numel = clt_tensor_numel(clt_model_parameters(m));
    ck_assert_ok(clt_memory_get_stats(d, &out.mem));
    clt_model_free(m);
    clt_dataset_free(&ds);
    return out;
}

/* Replay and not: the same parameters, loss and allocator counters. Returns the steps replayed. */
static uint64_t check_same(const run *r)
{
    outcome off = train(r, 0), on = train(r, 1);
    ck_assert_uint_eq(off.replays, 0);
    ck_assert_int_eq(on.numel, off.numel);
    ck_assert_msg(memcmp(on.params, off.params, (size_t)on.numel * sizeof(float)) == 0,
                  "parameters differ with replay (%llu steps replayed)", (unsigned long long)on.replays);
    ck_assert_msg(memcmp(&on.loss, &off.loss, sizeof on.loss) == 0, "loss %.9g with replay, %.9g without", on.loss,
                  off.loss);
    /* The host code ran in full: the allocator served the same requests. The
     * second run's counters include the first's, so compare what each added. */
    ck_assert_int_eq(on.mem.peak_allocated, off.mem.peak_allocated);
    ck_assert_int_eq(on.mem.allocated, off.mem.allocated);
    free(on.params);
    free(off.params);
    return on.replays;
}

static int64_t steps_of(const run *r) { return r->epochs * ((r->n + r->batch - 1) / r->batch); }

/* A step that never changes replays from its second on, less a recording
 * after each epoch's last (smaller) batch. */
static void check_static(const run *r)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    setenv("CLT_REPLAY", "1", 1);
    if (!clt__replay_supported(slot)) {
        clt_test_skip("test_replay", "cl_khr_command_buffer", "the device has no cl_khr_command_buffer 0.9.0-0.9.4");
        return;
    }
    uint64_t replays = check_same(r);
    int64_t least = steps_of(r) - 3 * r->epochs;
    ck_assert_msg((int64_t)replays >= least, "%llu of %lld steps replayed, at least %lld expected",
                  (unsigned long long)replays, (long long)steps_of(r), (long long)least);
}

START_TEST(test_mlp_batch32)
{
    run r = {.batch = 32, .n = 32 * 8 + 5, .epochs = 2};
    check_static(&r);
}
END_TEST

START_TEST(test_resmlp_momentum)
{
    run r = {.resmlp = 1, .batch = 64, .n = 64 * 6 + 9, .epochs = 2, .momentum = 0.9};
    check_static(&r);
}
END_TEST

/* Steps that change every time fall back, and compute the same. */
START_TEST(test_changing_steps)
{
    run cosine = {.batch = 32, .n = 32 * 6, .epochs = 1, .cosine = 1};
    run adam = {.resmlp = 1, .batch = 32, .n = 32 * 6, .epochs = 1, .adam = 1};
    check_same(&cosine);
    check_same(&adam);
}
END_TEST

/* Unset, CLT_REPLAY replays on a GPU but not on a CPU, where pocl's
 * command buffers save no host time. */
START_TEST(test_default_off_on_cpus)
{
    run r = {.batch = 32, .n = 32 * 6, .epochs = 1};
    int slot;
    cl_device_type type = 0;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    ck_assert_int_eq(clGetDeviceInfo(clt__slot_get(slot)->device, CL_DEVICE_TYPE, sizeof type, &type, NULL),
                     CL_SUCCESS);
    outcome unset = train(&r, -1);
    if (type & CL_DEVICE_TYPE_CPU) ck_assert_uint_eq(unset.replays, 0);
    else ck_assert_msg(unset.replays > 0 || !clt__replay_supported(slot), "a GPU did not replay by default");
    free(unset.params);
}
END_TEST

/* A float16 model's steps are not replayed. */
START_TEST(test_float16_not_replayed)
{
    run r = {.batch = 32, .n = 32 * 6, .epochs = 1, .fp16 = 1};
    outcome on = train(&r, 1);
    ck_assert_uint_eq(on.replays, 0);
    free(on.params);
}
END_TEST

/* A trace shows a replayed step as one command named replay. */
START_TEST(test_trace_shows_replay)
{
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "replay");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    ck_assert_ok(clt_trace_start(path)); /* before the device's queue, so it profiles */
    run r = {.batch = 32, .n = 32 * 6, .epochs = 1};
    outcome on = train(&r, 1);
    ck_assert_ok(clt_trace_stop());
    char *json = clt_test_read_file(path);
    ck_assert_ptr_nonnull(json);
    ck_assert_msg(on.replays > 0 && strstr(json, "\"name\":\"replay\""), "%llu steps replayed, no replay traced",
                  (unsigned long long)on.replays);
    free(json);
    free(on.params);
    clt_test_remove_dir(dir);
}
END_TEST

START_TEST(test_gpu_class_mlp)
{
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    run r = {.batch = 32, .n = 32 * 8 + 5, .epochs = 2};
    check_static(&r);
}
END_TEST

START_TEST(test_gpu_class_resmlp)
{
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    run r = {.resmlp = 1, .batch = 64, .n = 64 * 6 + 9, .epochs = 2, .momentum = 0.9};
    check_static(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = clt_test_tcase("replay");
    tcase_add_test(tc, test_mlp_batch32);
    tcase_add_test(tc, test_resmlp_momentum);
    tcase_add_test(tc, test_changing_steps);
    tcase_add_test(tc, test_default_off_on_cpus);
    tcase_add_test(tc, test_float16_not_replayed);
    tcase_add_test(tc, test_trace_shows_replay);
    tcase_add_test(tc, test_gpu_class_mlp);
    tcase_add_test(tc, test_gpu_class_resmlp);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
