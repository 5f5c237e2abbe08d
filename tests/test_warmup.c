/* clt_model_warmup runs the trainer's own step on a scratch copy of the
 * model (clt__model_layout: the same layers), with the training data's loss:
 * the MSE for a regression (CLT_WARMUP_REGRESSION), else the cross-entropy.
 * The kernels it launches are read back from a trace; the model itself is
 * left as it was. */
#include <stdlib.h>
#include <string.h>

#include "support.h"

static char *traced_warmup(clt_model *m, int flags)
{
    char dir[64], path[96];
    clt_test_make_temp_dir(dir, sizeof dir, "warmup");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    ck_assert_ok(clt_trace_start(path));
    clt_warmup_result w;
    ck_assert_ok(clt_model_warmup(m, 8, CLT_OPTIMIZER_ADAM, 0.0, flags, &w));
    ck_assert_ok(clt_trace_stop());
    char *trace = clt_test_read_file(path);
    ck_assert_ptr_nonnull(trace);
    clt_test_remove_dir(dir);
    return trace;
}

START_TEST(test_warmup_runs_the_datas_loss)
{
    clt_device dev = clt_test_cpu();
    int64_t hiddens[] = {16, 8};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 5, 2, hiddens, 3, 1));
    int64_t n = clt_model_num_parameter_elements(m);
    float *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
    ck_assert_ok(clt_to_host(clt_model_parameters(m), before, (size_t)n * sizeof *before));
    char *trace = traced_warmup(m, CLT_WARMUP_REGRESSION);
    ck_assert_msg(strstr(trace, "\"mse_f32\""), "no MSE kernel in the regression's warm-up");
    ck_assert_msg(!strstr(trace, "\"softmax_xent_"), "a cross-entropy in the regression's warm-up");
    free(trace);
    trace = traced_warmup(m, 0);
    /* softmax_xent_f32, or on a GPU-class device its one-work-group form. */
    ck_assert_msg(strstr(trace, "\"softmax_xent_"), "no cross-entropy kernel in the classifier's warm-up");
    ck_assert_msg(!strstr(trace, "\"mse_f32\""), "an MSE in the classifier's warm-up");
    free(trace);
    /* The model is untouched: its parameters as they were, no gradients. */
    ck_assert_ok(clt_to_host(clt_model_parameters(m), after, (size_t)n * sizeof *after));
    ck_assert_int_eq(memcmp(before, after, (size_t)n * sizeof *after), 0);
    ck_assert_ptr_null(clt_model_gradients(m));
    free(before);
    free(after);
    clt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warmup");
    TCase *tc = clt_test_tcase("warmup");
    tcase_add_test(tc, test_warmup_runs_the_datas_loss);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
