/* The chapter's four plateaus of training memory, checked exactly on a small
 * MLP from clt_memory_allocated and the per-category counters, over two
 * steps (the loop then cycles between plateaus two and three); and the
 * four_plateaus example run small. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

enum { IN = 19, H1 = 41, H2 = 29, H3 = 37, OUT = 10, B = 13 };

static void expect_categories(clt_device d, int64_t weights, int64_t acts, int64_t grads, int64_t opt)
{
    ck_assert_int_eq(clt_memory_allocated_category(d, CLT_MEM_WEIGHTS), weights);
    ck_assert_int_eq(clt_memory_allocated_category(d, CLT_MEM_ACTIVATIONS), acts);
    ck_assert_int_eq(clt_memory_allocated_category(d, CLT_MEM_GRADIENTS), grads);
    ck_assert_int_eq(clt_memory_allocated_category(d, CLT_MEM_OPTIMIZER), opt);
}

START_TEST(test_four_plateaus_exact)
{
    clt_device d = clt_try_gpu(0);
    int64_t hiddens[] = {H1, H2, H3};
    clt_model *net;
    ck_assert_ok(clt_model_create_mlp(&net, d, IN, 3, hiddens, OUT, 0));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, net, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    const int64_t N = (int64_t)IN * H1 + H1 + H1 * H2 + H2 + H2 * H3 + H3 + H3 * OUT + OUT;
    ck_assert_int_eq(clt_model_num_parameter_elements(net), N);

    int64_t xs[] = {B, IN}, ys[] = {B};
    int32_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = (i * 7) % OUT;
    clt_tensor *X, *y;
    ck_assert_ok(clt_randn(&X, d, 2, xs, 1));
    ck_assert_ok(clt_from_host(&y, d, CLT_INT32, 1, ys, labels));

    /* The accounting: 4N of weights plus the batch; the activations backward
     * needs are the three ReLU outputs (each also the next Linear's input)
     * and the loss's dlogits; 4N of gradients; 8N of Adam state. */
    const int64_t W = 4 * N, batch = 4 * B * IN + 4 * B;
    const int64_t acts = 4 * B * (H1 + H2 + H3) + 4 * B * OUT, loss_bytes = 4;

    ck_assert_int_eq(clt_memory_allocated(d), W + batch);
    expect_categories(d, W, 0, 0, 0);

    clt_tensor *loss = NULL;
    for (int step = 0; step < 2; step++) {
        int64_t state = step == 0 ? 0 : W + 2 * W; /* gradients and Adam after the first step */
        clt_tensor_release(loss);
        ck_assert_ok(clt_model_zero_grad(net));
        clt_tensor *logits, *dlogits;
        ck_assert_ok(clt_model_forward(net, X, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
        clt_tensor_release(logits);
        /* Plateau 2: + activations. */
        ck_assert_int_eq(clt_memory_allocated(d), W + batch + state + acts + loss_bytes);
        expect_categories(d, W, acts, step ? W : 0, step ? 2 * W : 0);

        ck_assert_ok(clt_model_backward(net, dlogits, NULL));
        clt_tensor_release(dlogits);
        /* Plateau 3: activations gone, gradients exactly the size of the weights. */
        ck_assert_int_eq(clt_memory_allocated(d), W + batch + loss_bytes + W + (step ? 2 * W : 0));
        expect_categories(d, W, 0, W, step ? 2 * W : 0);

        ck_assert_ok(clt_optimizer_step(opt));
        /* Plateau 4: + 8N at the first step, then nothing new. */
        ck_assert_int_eq(clt_memory_allocated(d), W + batch + loss_bytes + W + 2 * W);
        expect_categories(d, W, 0, W, 2 * W);
    }
    double lv;
    ck_assert_ok(clt_item(loss, &lv));
    ck_assert(lv > 0 && lv < 10);
    clt_tensor_release(loss);
    clt_tensor_release(X);
    clt_tensor_release(y);
    clt_optimizer_free(opt);
    clt_model_free(net);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_example_small)
{
    const char *bin = getenv("CLT_BINARY_DIR");
    char path[1024], cmd[1200];
    snprintf(path, sizeof path, "%s/examples/four_plateaus", bin ? bin : ".");
    clt_test_skip_if(access(path, X_OK) != 0, "examples", "%s is not built (CLT_BUILD_EXAMPLES=OFF?)", path);
    snprintf(cmd, sizeof cmd, "'%s' --batch 24 --hidden 64 2>&1", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    ck_assert_msg(status == 0, "four_plateaus exited with %d:\n%s", status, out);
    const char *lines[] = {"weights", "+ activations", "+ gradients", "+ optimizer state"};
    for (int i = 0; i < 4; i++) ck_assert_msg(strstr(out, lines[i]) != NULL, "no \"%s\" in:\n%s", lines[i], out);
    /* Every reading equals its accounting: four lines end with a zero difference. */
    int exact = 0;
    for (const char *q = out; (q = strstr(q, " +0.000%\n")) != NULL; q++) exact++;
    ck_assert_msg(exact == 4, "%d of 4 readings equal the accounting:\n%s", exact, out);
}
END_TEST

/* pocl compiles kernels lazily on its worker threads: a process that exits
 * with work queued can race LLVM's exit-time destructors. */
int main(void)
{
    Suite *s = suite_create("plateaus");
    TCase *tc = clt_test_tcase("memory");
    tcase_add_test(tc, test_four_plateaus_exact);
    suite_add_tcase(s, tc);
    TCase *ex = clt_test_tcase("examples"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(ex, "examples");
    tcase_add_test(ex, test_example_small);
    suite_add_tcase(s, ex);
    return clt_test_run(s);
}
