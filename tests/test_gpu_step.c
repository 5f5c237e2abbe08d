/* The shape of a training step on the GPU-class branch (CLT_DEVICE_CLASS=gpu,
 * set by this test): the capstone's ResMLP (784-256-2x256-10) at batch 256
 * with SGD, a batch from the loader and clt__train_step, as the trainer
 * runs it. After two warm-up steps, a step enqueues at most MAX_FP32
 * kernels in float32 and MAX_FP16 in float16 (counted by
 * clt_test_kernels_start: launches, CLBlast calls and fills), and neither
 * makes a synchronization point (clt_sync_count): a float16 step's
 * overflow check, skip and loss scale stay on the device. The loader holds
 * the data set on the device (docs/data.md): a step uploads only the
 * batch's int32 indices, BATCH * 4 bytes. Then the pieces that make the
 * counts: an overflowing float16 step skipped on the device, the gradients'
 * zeroing folded into the update, the loss sum in the loss's launch.
 * docs/gpu.md lists what the step launches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/half.h"

#include "device/device_internal.h"
#include "support.h"
#include "trainer/step.h"

enum { IN = 784, H = 256, BLOCKS = 2, OUT = 10, BATCH = 256, N = 4 * BATCH, WARM = 2, STEPS = 2 };

/* The bounds where work-groups hold 256 work-items (the GPU-shaped kernels),
 * as reached: the loader's gather of the batch from the resident data set
 * (cl/gather.cl), float32 17 products (gemm_gpu_f32, bias, ReLU and the
 * residual sums fused), the loss with its sum and the update, which zeroes
 * the gradients; float16 the gather, the products, the loss, the unscale
 * (zeroing the gradients), the update (narrowing the master weights) and
 * the scaler's update (docs/gpu.md). A device with smaller work-groups keeps
 * the CPU-shaped loss and its sum, three launches more. */
#define MAX_FP32 20
#define MAX_FP16 25
#define NARROW_EXTRA 3

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
    ck_assert_msg(waits == 0, "%s: %llu synchronization points in %d steps, expected none", clt_dtype_name(dtype),
                  (unsigned long long)waits, STEPS);
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

/* A small float16 (or float32) MLP with SGD or Adam and a batch for it. */
typedef struct small {
    clt_model *m;
    clt_optimizer *opt;
    clt_tensor *x, *y, *loss_sum;
} small;

static void small_make(small *f, clt_dtype dt, int adam)
{
    clt_device d = clt_test_device();
    int64_t hid[] = {32}, xs[2] = {16, 12}, n = 16;
    ck_assert_ok(clt_model_create_mlp(&f->m, d, 12, 1, hid, 5, 8));
    if (dt == CLT_FLOAT16) ck_assert_ok(clt_model_to_dtype(f->m, CLT_FLOAT16));
    if (adam) ck_assert_ok(clt_optimizer_create_adam(&f->opt, f->m, 1e-2f, 0.9f, 0.999f, 1e-8f, 0, 0));
    else ck_assert_ok(clt_optimizer_create_sgd(&f->opt, f->m, 0.1f, 0.9f, 0));
    float xv[16 * 12];
    int32_t yv[16];
    clt_test_fill_uniform(xv, 16 * 12, 4, -1, 1);
    for (int i = 0; i < 16; i++) yv[i] = i % 5;
    ck_assert_ok(clt_from_host(&f->x, d, CLT_FLOAT32, 2, xs, xv));
    ck_assert_ok(clt_from_host(&f->y, d, CLT_INT32, 1, &n, yv));
    ck_assert_ok(clt_zeros(&f->loss_sum, d, CLT_FLOAT32, 0, NULL));
}

static void small_free(small *f)
{
    clt_tensor_release(f->x);
    clt_tensor_release(f->y);
    clt_tensor_release(f->loss_sum);
    clt_optimizer_free(f->opt);
    clt_model_free(f->m);
}

/* The trainer's step on f's batch; the synchronization points it made. */
static uint64_t small_step(small *f)
{
    clt_device d = clt_test_device();
    ck_assert_ok(clt_synchronize(d));
    uint64_t before = clt_sync_count(d);
    clt__step_tensors t = {.x = clt_tensor_retain(f->x), .y = clt_tensor_retain(f->y)};
    clt__step_options o = {0};
    ck_assert_ok(clt__train_step(f->m, f->opt, &t, f->loss_sum, 0, &o));
    clt__step_tensors_release(&t);
    return clt_sync_count(d) - before;
}

/* The flat buffer's bytes. */
static void *bytes(const clt_tensor *t)
{
    size_t n = clt_tensor_nbytes(t);
    void *b = malloc(n);
    ck_assert_ptr_nonnull(b);
    ck_assert_ok(clt_to_host(t, b, n));
    return b;
}

static int all_zero(const clt_tensor *t)
{
    size_t n = clt_tensor_nbytes(t);
    unsigned char *b = bytes(t);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= b[i] == 0;
    free(b);
    return zero;
}

/* A loss scale of 2^40 overflows float16: the device skips the step (the
 * parameters as they were, the step not counted) and halves the scale,
 * with no host wait; the host reads the outcome when asked. The trainer's
 * step leaves the gradients zero, skipped or not. Then Adam counts only
 * the steps taken: a skipped step and a taken one give the bits of one
 * taken step (the bias corrections of step 1, computed on the device). */
START_TEST(test_fp16_overflow_skips_on_the_device)
{
    for (int adam = 0; adam <= 1; adam++) {
        small f, g;
        small_make(&f, CLT_FLOAT16, adam);
        small_make(&g, CLT_FLOAT16, adam);
        void *before = bytes(clt_model_parameters(f.m));
        ck_assert_ok(clt_model_set_loss_scale(f.m, 1099511627776.0f, 1));
        ck_assert_int_eq(small_step(&f), 0);
        ck_assert_int_eq(small_step(&f), 0); /* both skipped */
        ck_assert(all_zero(clt_model_gradients(f.m)));
        void *after = bytes(clt_model_parameters(f.m));
        ck_assert_mem_eq(before, after, clt_tensor_nbytes(clt_model_parameters(f.m)));
        free(after);
        free(before);
        float scale;
        int dynamic;
        int64_t clean;
        ck_assert_ok(clt_model_loss_scale_state(f.m, &scale, &dynamic, &clean));
        ck_assert_float_eq(scale, 274877906944.0f); /* 2^38 */
        ck_assert_int_eq(clean, 0);
        ck_assert_int_eq(clt_optimizer_steps(f.opt), 0);
        /* A scale that fits: the step is taken, the clean steps count. */
        ck_assert_ok(clt_model_set_loss_scale(f.m, 256.0f, 1));
        ck_assert_ok(clt_model_set_loss_scale(g.m, 256.0f, 1));
        uint16_t *first = bytes(clt_model_parameters(g.m));
        ck_assert_int_eq(small_step(&f), 0);
        ck_assert_int_eq(small_step(&g), 0);
        if (adam) {
            /* Adam's first step moves each weight by lr (its bias corrections
             * those of step 1), where the gradient is not zero. */
            clt_tensor *master;
            ck_assert_ok(clt_optimizer_state(g.opt, 2, NULL, &master));
            float *w = clt_test_read(master);
            int64_t n = clt_tensor_numel(master), moved = 0;
            for (int64_t i = 0; i < n; i++) {
                float step = fabsf(w[i] - clt_half_to_float(first[i]));
                if (step == 0.0f) continue;
                moved++;
                ck_assert_msg(step > 0.98e-2f && step < 1.01e-2f, "Adam's first step moved weight %lld by %g, not 1e-2",
                              (long long)i, (double)step);
            }
            ck_assert_int_gt(moved, n / 2);
            free(w);
        }
        free(first);
        ck_assert_ok(clt_model_loss_scale_state(f.m, &scale, &dynamic, &clean));
        ck_assert_float_eq(scale, 256.0f);
        ck_assert_int_eq(clean, 1);
        ck_assert_int_eq(clt_optimizer_steps(f.opt), 1);
        ck_assert_int_eq(clt_optimizer_steps(g.opt), 1);
        void *pf = bytes(clt_model_parameters(f.m)), *pg = bytes(clt_model_parameters(g.m));
        ck_assert_msg(memcmp(pf, pg, clt_tensor_nbytes(clt_model_parameters(f.m))) == 0,
                      "%s: two skipped steps and a taken one differ from one taken step", adam ? "Adam" : "SGD");
        free(pf);
        free(pg);
        small_free(&f);
        small_free(&g);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The trainer's step zeroes the gradients in its update (float32: the
 * update kernel; float16: the unscale), so the next clt_model_zero_grad
 * launches nothing; a backward, or any write to the gradients, re-arms it.
 * The public clt_optimizer_step leaves them readable. */
START_TEST(test_zero_grad_folded_into_the_update)
{
    for (int half = 0; half <= 1; half++) {
        small f;
        small_make(&f, half ? CLT_FLOAT16 : CLT_FLOAT32, 0);
        ck_assert_int_eq(small_step(&f), 0);
        ck_assert(all_zero(clt_model_gradients(f.m)));
        clt_test_kernels_start();
        ck_assert_ok(clt_model_zero_grad(f.m));
        ck_assert_int_eq(clt_test_kernels_stop(), 0);
        /* A backward writes them: zeroing launches again, once. */
        clt_tensor *out, *loss, *dout;
        ck_assert_ok(clt_model_forward(f.m, f.x, &out));
        ck_assert_ok(clt_softmax_cross_entropy(&loss, &dout, out, f.y));
        ck_assert_ok(clt_model_backward(f.m, dout, NULL));
        ck_assert(!all_zero(clt_model_gradients(f.m)));
        void *g = bytes(clt_model_gradients(f.m));
        ck_assert_ok(clt_optimizer_step(f.opt));
        void *g_after = bytes(clt_model_gradients(f.m));
        ck_assert_mem_eq(g, g_after, clt_tensor_nbytes(clt_model_gradients(f.m)));
        free(g);
        free(g_after);
        clt_test_kernels_start();
        ck_assert_ok(clt_model_zero_grad(f.m));
        ck_assert_ok(clt_model_zero_grad(f.m));
        ck_assert_int_eq(clt_test_kernels_stop(), 1);
        ck_assert(all_zero(clt_model_gradients(f.m)));
        /* A write of the caller's re-arms it too. */
        ck_assert_ok(clt_fill_(clt_model_gradients(f.m), 1.0));
        clt_test_kernels_start();
        ck_assert_ok(clt_model_zero_grad(f.m));
        ck_assert_int_eq(clt_test_kernels_stop(), 1);
        ck_assert(all_zero(clt_model_gradients(f.m)));
        clt_tensor_release(out);
        clt_tensor_release(loss);
        clt_tensor_release(dout);
        small_free(&f);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    Suite *s = suite_create("gpu_step");
    TCase *tc = clt_test_tcase("step");
    tcase_add_test(tc, test_step_fp32);
    tcase_add_test(tc, test_step_fp16);
    tcase_add_test(tc, test_fp16_overflow_skips_on_the_device);
    tcase_add_test(tc, test_zero_grad_folded_into_the_update);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
