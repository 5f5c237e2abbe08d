/* The shape of a training step on the GPU-class branch (CLT_DEVICE_CLASS=gpu,
 * set by this test): the capstone's ResMLP (784-256-2x256-10) at batch 256
 * with SGD, a batch from the loader and clt__train_step, as the trainer
 * runs it. After two warm-up steps, a step enqueues at most MAX_FP32
 * kernels in float32 and MAX_FP16 in float16 (counted by
 * clt_test_kernels_start: launches, CLBlast calls and fills), and a float32
 * step makes no synchronization point (clt_sync_count); a float16 step
 * makes exactly one, the optimizer's read of the gradients' overflow flag.
 * The loader holds the data set on the device (docs/data.md): a step
 * uploads only the batch's int32 indices, BATCH * 4 bytes.
 * docs/gpu.md lists what the step launches. */
#include <stdlib.h>

#include "device/device_internal.h"
#include "support.h"
#include "trainer/step.h"

enum { IN = 784, H = 256, BLOCKS = 2, OUT = 10, BATCH = 256, N = 4 * BATCH, WARM = 2, STEPS = 2 };

/* The bounds where work-groups hold 256 work-items (the GPU-shaped kernels),
 * as reached: the loader's gather of the batch from the resident data set
 * (cl/gather.cl), float32 17 products (gemm_gpu_f32, bias and ReLU fused), 2
 * residual adds, the loss, its sum, the gradients' zeroing and the update;
 * float16 the gather, 75 kernels and 7 fills (docs/gpu.md). A device with
 * smaller work-groups keeps the CPU-shaped loss, two launches more. */
#define MAX_FP32 24
#define MAX_FP16 83
#define NARROW_EXTRA 2

static void one_step(clt_model *net, clt_optimizer *opt, clt_loader *l, clt_tensor *loss_sum)
{
    clt__step_tensors t = {0};
    ck_assert_ok(clt_loader_next(l, &t.x, &t.y));
    clt__step_options o = {0};
    ck_assert_ok(clt__train_step(net, opt, &t, loss_sum, 0, &o));
    clt__step_tensors_release(&t);
}

static void check_step(clt_dtype dtype)
{
    clt_device d = clt_test_device();
    int slot;
    ck_assert_ok(clt__resolve(d, &slot));
    int wide = clt__slot_get(slot)->max_work_group >= 256;
    clt_dataset ds = clt_test_make_dataset(N, 5);
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = BATCH;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, d, &lo));
    clt_model *net;
    ck_assert_ok(clt_model_create_resmlp(&net, d, IN, H, BLOCKS, OUT, 3));
    if (dtype == CLT_FLOAT16) ck_assert_ok(clt_model_to_dtype(net, CLT_FLOAT16));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, net, 0.1f, 0, 0));
    clt_tensor *loss_sum;
    ck_assert_ok(clt_zeros(&loss_sum, d, CLT_FLOAT32, 0, NULL));

    for (int i = 0; i < WARM; i++) one_step(net, opt, l, loss_sum);
    ck_assert_ok(clt_synchronize(d));
    uint64_t syncs = clt_sync_count(d);
    uint64_t kernels[STEPS]; /* each step's own */
    for (int i = 0; i < STEPS; i++) {
        clt_test_kernels_start();
        one_step(net, opt, l, loss_sum);
        kernels[i] = clt_test_kernels_stop();
    }
    uint64_t waits = clt_sync_count(d) - syncs;

    uint64_t most = (dtype == CLT_FLOAT16 ? MAX_FP16 : MAX_FP32) + (wide ? 0 : NARROW_EXTRA);
    for (int i = 0; i < STEPS; i++)
        ck_assert_msg(kernels[i] <= most, "%s: %llu kernels in step %d, at most %llu a step expected",
                      clt_dtype_name(dtype), (unsigned long long)kernels[i], i + 1, (unsigned long long)most);
    uint64_t want_waits = dtype == CLT_FLOAT16 ? STEPS : 0;
    ck_assert_msg(waits == want_waits, "%s: %llu synchronization points in %d steps, expected %llu",
                  clt_dtype_name(dtype), (unsigned long long)waits, STEPS, (unsigned long long)want_waits);
    /* Only indices were staged (a few rings of BATCH int32), never a float32 batch. */
    int64_t staged = clt_memory_allocated(clt_pinned());
    ck_assert_msg(staged < BATCH * IN * 4, "%lld bytes of pinned staging: the batch was not gathered on the device",
                  (long long)staged);
    double sum;
    ck_assert_ok(clt_item(loss_sum, &sum));
    ck_assert_msg(sum > 0, "loss sum %g", sum);

    clt_tensor_release(loss_sum);
    clt_optimizer_free(opt);
    clt_model_free(net);
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_step_fp32) { check_step(CLT_FLOAT32); }
END_TEST

START_TEST(test_step_fp16) { check_step(CLT_FLOAT16); }
END_TEST

int main(void)
{
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    Suite *s = suite_create("gpu_step");
    TCase *tc = clt_test_tcase("step");
    tcase_add_test(tc, test_step_fp32);
    tcase_add_test(tc, test_step_fp16);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
