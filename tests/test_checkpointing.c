/* Activation checkpointing: gradients equal bit for bit to plain
 * backpropagation for every segment size (the chapter's check: four residual
 * blocks of width 64, batch 32), and the peak of activation memory equals the
 * accounting: segment inputs plus one segment's recomputed activations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

enum { B = 32, H = 64 };

/* The chapter's stack: nn.Sequential(*[ResidualBlock(H) for _ in range(n)]). */
static clt_model *stack(int nblocks)
{
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, ""));
    for (int i = 0; i < nblocks; i++) ck_assert_ok(clt_model_add_residual(m, H));
    ck_assert_ok(clt_model_init(m, clt_test_device(), 0));
    return m;
}

static clt_tensor *uniform(int64_t rows, int64_t cols, uint64_t seed)
{
    float *host = malloc((size_t)(rows * cols) * sizeof *host);
    clt_test_fill_uniform(host, rows * cols, seed, -1.0f, 1.0f);
    int64_t shape[2] = {rows, cols};
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_FLOAT32, 2, shape, host));
    free(host);
    return t;
}

/* run_stack(blocks, X, use_checkpoint).sum().backward(): dy is all ones.
 * Returns the flat gradients; *dx_out (may be NULL) gets the input's. */
static float *stack_grads(clt_model *m, clt_tensor *x, int segment_size, float **dx_out)
{
    ck_assert_ok(clt_model_set_recompute(m, segment_size));
    ck_assert_int_eq(clt_model_recompute(m), segment_size);
    ck_assert_ok(clt_model_zero_grad(m));
    clt_tensor *y, *dy, *dx = NULL;
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, dx_out ? &dx : NULL));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    if (dx_out) *dx_out = clt_test_read(dx);
    clt_tensor_release(dx);
    clt_tensor_release(dy);
    clt_tensor_release(y);
    return clt_test_read(clt_model_gradients(m));
}

START_TEST(test_chapter_check_bit_for_bit)
{
    clt_model *m = stack(4);
    clt_tensor *x = uniform(B, H, 7);
    int64_t n = clt_model_num_parameter_elements(m);
    float *dx_ref, *dx;
    float *ref = stack_grads(m, x, 0, &dx_ref);
    /* 1, the default sqrt(4) = 2, 3 (does not divide 4), the whole stack, more. */
    int sizes[] = {1, CLT_RECOMPUTE_AUTO, 2, 3, 4, 9};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        float *g = stack_grads(m, x, sizes[k], &dx);
        ck_assert_msg(memcmp(g, ref, (size_t)n * sizeof *g) == 0, "segment size %d: gradients differ", sizes[k]);
        ck_assert_msg(memcmp(dx, dx_ref, (size_t)B * H * sizeof *dx) == 0, "segment size %d: dx differs",
                      sizes[k]);
        free(g);
        free(dx);
    }
    /* The gradients are real: not all zero. */
    int nonzero = 0;
    for (int64_t i = 0; i < n; i++) nonzero += ref[i] != 0.0f;
    ck_assert_int_gt(nonzero, n / 2);
    free(ref);
    free(dx_ref);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A ResMLP: checkpointed blocks between ordinary layers (Flatten, Linear,
 * ReLU before, Linear after), five blocks in segments of 2, 2, 1. */
START_TEST(test_resmlp_with_loss)
{
    enum { IN = 13, OUT = 7, BATCH = 5, HID = 11, BLOCKS = 5 };
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), IN, HID, BLOCKS, OUT, 3));
    ck_assert_int_eq(clt_model_num_blocks(m), BLOCKS);
    clt_tensor *x = uniform(BATCH, IN, 11);
    int32_t lab[BATCH] = {0, 6, 3, 2, 5};
    int64_t bshape[1] = {BATCH};
    clt_tensor *labels;
    ck_assert_ok(clt_from_host(&labels, clt_test_device(), CLT_INT32, 1, bshape, lab));
    int64_t n = clt_model_num_parameter_elements(m);
    float *ref = NULL;
    int sizes[] = {0, 2, CLT_RECOMPUTE_AUTO, 1, 5};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ck_assert_ok(clt_model_set_recompute(m, sizes[k]));
        ck_assert_ok(clt_model_zero_grad(m));
        clt_tensor *logits, *loss, *dlogits;
        ck_assert_ok(clt_model_forward(m, x, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, labels));
        ck_assert_ok(clt_model_backward(m, dlogits, NULL));
        float *g = clt_test_read(clt_model_gradients(m));
        if (!ref) ref = g;
        else {
            ck_assert_msg(memcmp(g, ref, (size_t)n * sizeof *g) == 0, "segment size %d: gradients differ",
                          sizes[k]);
            free(g);
        }
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
    }
    free(ref);
    clt_tensor_release(labels);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Stored activations, in (B,H) tensors, for a stack of `blocks` whose input
 * is the caller's (so not an activation): without checkpointing each block
 * keeps its input and its two ReLU outputs, 3n - 1. With segments of S, the
 * backward of segment k holds the inputs of segments 2..k plus segment k's
 * recomputed activations, 3 L_k - 1 beyond its input. */
static int64_t expected_tensors(int blocks, int size)
{
    if (size == 0) return 3 * blocks - 1;
    int64_t peak = 0;
    for (int k = 0, start = 0; start < blocks; k++, start += size) {
        int len = blocks - start < size ? blocks - start : size;
        int64_t at = k + 3 * len - 1;
        if (at > peak) peak = at;
    }
    return peak;
}

START_TEST(test_peak_follows_accounting)
{
    enum { BLOCKS = 7 };
    clt_model *m = stack(BLOCKS);
    clt_tensor *x = uniform(B, H, 5);
    const int64_t one = (int64_t)B * H * 4;
    int sizes[] = {0, 1, 2, 3, 7, CLT_RECOMPUTE_AUTO};
    int64_t peaks[6];
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ck_assert_ok(clt_model_set_recompute(m, sizes[k]));
        clt_tensor *y, *dy;
        /* Gradients exist before measuring, as in every step after the first. */
        ck_assert_ok(clt_model_forward(m, x, &y));
        ck_assert_ok(clt_ones_like(&dy, y));
        ck_assert_ok(clt_model_backward(m, dy, NULL));
        clt_tensor_release(y);
        ck_assert_ok(clt_memory_reset_peak(clt_test_device()));
        ck_assert_ok(clt_model_forward(m, x, &y));
        int64_t after_forward = clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS);
        ck_assert_ok(clt_model_backward(m, dy, NULL));
        int size = sizes[k] == CLT_RECOMPUTE_AUTO ? 3 : sizes[k]; /* round(sqrt(7)) */
        int64_t want = expected_tensors(BLOCKS, size) * one;
        peaks[k] = clt_memory_max_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS);
        ck_assert_msg(peaks[k] == want, "segment size %d: peak %lld bytes, expected %lld", sizes[k],
                      (long long)peaks[k], (long long)want);
        /* After forward only the segment inputs after the first remain. */
        int nseg = size ? (BLOCKS + size - 1) / size : 0;
        ck_assert_int_eq(after_forward, size ? (nseg - 1) * one : want);
        ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
        clt_tensor_release(dy);
        clt_tensor_release(y);
    }
    /* sqrt-sized segments (3, 3, 1) hold 1 + 8 tensors at most, against 20. */
    ck_assert_int_lt(peaks[5], peaks[0] / 2);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_inference_and_errors)
{
    clt_model *m = stack(3);
    clt_tensor *x = uniform(B, H, 9);
    ck_assert_status(clt_model_set_recompute(m, -2), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_set_recompute(NULL, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(clt_model_recompute(NULL), 0);
    ck_assert_int_eq(clt_model_num_blocks(m), 3);
    ck_assert_int_eq(clt_model_num_blocks(NULL), 0);
    /* Inference keeps nothing, checkpointed or not, and gives the same output. */
    clt_model_set_training(m, 0);
    clt_tensor *y0, *y1;
    ck_assert_ok(clt_model_forward(m, x, &y0));
    ck_assert_ok(clt_model_set_recompute(m, 2));
    ck_assert_ok(clt_model_forward(m, x, &y1));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    float *a = clt_test_read(y0), *b = clt_test_read(y1);
    ck_assert_mem_eq(a, b, (size_t)B * H * sizeof *a);
    free(a);
    free(b);
    clt_tensor_release(y1);
    /* Changing the segment size drops a pending forward, as switching modes does. */
    clt_model_set_training(m, 1);
    ck_assert_ok(clt_model_forward(m, x, &y1));
    ck_assert_int_gt(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    ck_assert_ok(clt_model_set_recompute(m, 1));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    ck_assert_status(clt_model_backward(m, y1, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(y0);
    clt_tensor_release(y1);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* examples/checkpointing --small prints the chapter's table; the peak with
 * checkpointing is at most 0.6 of the peak without (times are not checked). */
START_TEST(test_example_small)
{
    const char *dir = getenv("CLT_BINARY_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/checkpointing", dir ? dir : ".");
    clt_test_skip_if(!dir || access(path, X_OK) != 0, "examples", "%s is not built (CLT_BUILD_EXAMPLES=OFF?)", path);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "'%s' --small 2>&1", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[256];
    double peak[2] = {-1, -1}, v;
    int found = 0;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "checkpointing=False peak %lf", &v) == 1) peak[0] = v, found++;
        if (sscanf(line, "checkpointing=True peak %lf", &v) == 1) peak[1] = v, found++;
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_int_eq(found, 2);
    ck_assert_double_gt(peak[1], 0);
    ck_assert_double_le(peak[1], 0.6 * peak[0]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpointing");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_chapter_check_bit_for_bit);
    tcase_add_test(tc, test_resmlp_with_loss);
    tcase_add_test(tc, test_peak_follows_accounting);
    tcase_add_test(tc, test_inference_and_errors);
    suite_add_tcase(s, tc);
    TCase *ex = clt_test_tcase("examples"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(ex, "examples");
    tcase_set_timeout(ex, 120);
    tcase_add_test(ex, test_example_small);
    suite_add_tcase(s, ex);
    return clt_test_run(s);
}
