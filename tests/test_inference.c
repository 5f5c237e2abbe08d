/* Inference mode, the article's no_grad: a forward with training off keeps
 * no activations, so its peak is the weights, the batch and the largest
 * set of tensors alive at one moment: without fusion (CLT_FUSE=0) a
 * Linear's output and its ReLU's, with it a fused Linear + ReLU's input and
 * output. On CPU devices an evaluating model also keeps every Linear's
 * weight packed for its product (made by the first forward, counted as
 * weights; training keeps none), so the steady inference peak, measured
 * on the second forward, adds those panels. A training forward's peak
 * adds the activations it has stored by then and, on CPU devices, the
 * weight a product packs for itself. */
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "device/device_internal.h"
#include "ops/ops_internal.h"
#include "ops/tune.h"

enum { B = 256, IN = 32, H1 = 64, H2 = 256, OUT = 10 };

static int64_t floats_to_bytes(int64_t n) { return n * B * 4; }

/* Bytes of a Linear(in, out) weight packed into panels of the device's
 * default tile's columns (clt__cpu_tile_default) for the product when the
 * CPU kernels run it (src/ops/dense.c), else 0: for the call in training,
 * kept while evaluating. */
static int64_t packed(int64_t in, int64_t out)
{
    /* The library's own choice (CLT_DENSE, CLT_DEVICE_CLASS, the device type). */
    int slot, cpu = 0;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    int64_t tn = clt__cpu_tile_default(slot).tn;
    return cpu ? (out + tn - 1) / tn * tn * in * 4 : 0;
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

static void forward_peak(clt_model *m, clt_tensor *x, int training, int64_t *peak, int64_t *stored)
{
    clt_model_set_training(m, training);
    if (!training) {
        /* The first evaluating forward packs the weights it keeps. */
        clt_tensor *y0;
        ck_assert_ok(clt_model_forward(m, x, &y0));
        clt_tensor_release(y0);
    }
    ck_assert_ok(clt_synchronize(clt_test_device()));
    ck_assert_ok(clt_memory_reset_peak(clt_test_device()));
    clt_tensor *y;
    ck_assert_ok(clt_model_forward(m, x, &y));
    *peak = clt_memory_max_allocated(clt_test_device());
    *stored = clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS);
    clt_tensor_release(y);
}

/* Linear(IN,H1), ReLU, Linear(H1,H2), ReLU, Linear(H2,OUT). */
static void check_peaks(int fused)
{
    ck_assert_int_eq(setenv("CLT_FUSE", fused ? "1" : "0", 1), 0);
    int64_t hiddens[2] = {H1, H2};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), IN, 2, hiddens, OUT, 1));
    float host[B * IN];
    clt_test_fill_uniform(host, B * IN, 3, -1, 1);
    int64_t shape[2] = {B, IN};
    clt_tensor *x;
    ck_assert_ok(clt_from_host(&x, clt_test_device(), CLT_FLOAT32, 2, shape, host));
    int64_t weights = 4 * clt_model_num_parameter_elements(m);
    int64_t batch = floats_to_bytes(IN);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), weights + batch);

    int64_t infer_peak, infer_stored, train_peak, train_stored;
    int64_t kept = packed(IN, H1) + packed(H1, H2) + packed(H2, OUT);
    forward_peak(m, x, 0, &infer_peak, &infer_stored);
    ck_assert_int_eq(infer_stored, 0);
    if (fused) {
        /* The second product: its input and its output; every other moment
         * holds less. */
        ck_assert_int_eq(infer_peak, weights + batch + kept + floats_to_bytes(H1 + H2));
    } else {
        /* Linear(H1,H2)'s output and its ReLU's. */
        ck_assert_int_eq(infer_peak, weights + batch + kept + floats_to_bytes(H2 + H2));
    }
    /* Nothing stays but the output and the packed weights. */
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), weights + batch + kept);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_WEIGHTS), weights + kept);

    forward_peak(m, x, 1, &train_peak, &train_stored);
    /* Kept for backward: both ReLU outputs (the Linears' inputs are those
     * and the caller's batch). */
    ck_assert_int_eq(train_stored, floats_to_bytes(H1 + H2));
    ck_assert_int_eq(clt_memory_max_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), train_stored);
    if (fused) {
        /* The first ReLU's output, stored, is the second product's input,
         * alive at that moment in inference too; the last product's moment
         * adds its output and packed weight to both stored outputs. */
        ck_assert_int_eq(train_peak, weights + batch + floats_to_bytes(H1 + H2) +
                                         max2(packed(H1, H2), floats_to_bytes(OUT) + packed(H2, OUT)));
        ck_assert_int_ge(train_peak, infer_peak - kept);
    } else {
        /* At the same moment the first ReLU's output is still stored. */
        ck_assert_int_eq(train_peak, infer_peak - kept + floats_to_bytes(H1));
    }
    clt_model_set_training(m, 0);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), weights + batch);

    clt_model_free(m);

    /* Deeper stacks of one width: inference stays flat, training grows by
     * one stored (B,H1) ReLU output per layer. */
    int64_t excess[2];
    for (int d = 0; d < 2; d++) {
        int depth = d ? 6 : 2;
        int64_t wide[6] = {H1, H1, H1, H1, H1, H1};
        clt_model *deep;
        ck_assert_ok(clt_model_create_mlp(&deep, clt_test_device(), IN, depth, wide, OUT, 2));
        int64_t dweights = 4 * clt_model_num_parameter_elements(deep);
        forward_peak(deep, x, 0, &infer_peak, &infer_stored);
        int64_t dkept = packed(IN, H1) + (depth - 1) * packed(H1, H1) + packed(H1, OUT);
        ck_assert_int_eq(clt_memory_allocated(clt_test_device()), dweights + batch + dkept);
        excess[d] = infer_peak - dweights - batch - dkept;
        forward_peak(deep, x, 1, &train_peak, &train_stored);
        ck_assert_int_eq(train_stored, floats_to_bytes(depth * H1));
        /* Unfused, at the last ReLU: every earlier stored output plus its
         * input and output. Fused, at the last pair's product (every
         * stored output, the last one being its output, and its weight) or
         * at the last Linear's (its output and weight besides). */
        int64_t want = fused ? floats_to_bytes(depth * H1) +
                                   max2(packed(H1, H1), floats_to_bytes(OUT) + packed(H1, OUT))
                             : floats_to_bytes((depth + 1) * H1);
        ck_assert_int_eq(train_peak, dweights + batch + want);
        clt_model_set_training(deep, 0);
        clt_model_free(deep);
    }
    ck_assert_int_eq(excess[0], excess[1]);
    ck_assert_int_ge(excess[0], floats_to_bytes(2 * H1));

    clt_tensor_release(x);
    unsetenv("CLT_FUSE");
    clt_test_assert_no_live_tensors();
}

START_TEST(test_inference_peak) { check_peaks(0); }
END_TEST

START_TEST(test_inference_peak_fused) { check_peaks(1); }
END_TEST

int main(void)
{
    Suite *s = suite_create("inference");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_inference_peak);
    tcase_add_test(tc, test_inference_peak_fused);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
