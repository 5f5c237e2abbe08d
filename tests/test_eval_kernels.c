/* The kernels an evaluation of a classifier launches on the CPU class,
 * batches of at most 256 rows: after the forward, the loss with its sum
 * (softmax_xent_mean_seq_f32) and the correct predictions (count_hits_f32),
 * one launch each a batch; none of the separate passes they replace
 * (src/trainer/step.c clt__eval_step, src/ops/loss.c: the argmax, the
 * counting and its sum, the axpy of the loss sum; add_f32 too, which the
 * residual blocks' forward still launches), nor fill_u32, so that a cold
 * run makes pocl compile fewer kernels. */
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "device/sync.h"
#include "support.h"

static int loss_launches, hit_launches, replaced;
static const char *first_replaced = "";

static void see(int slot, cl_event ev, const char *name, const char *cat, size_t bytes)
{
    (void)slot, (void)ev, (void)cat, (void)bytes;
    static const char *const gone[] = {"argmax_rows_f32", "count_equal_partial_i32", "sum_final_f32", "axpy_f32",
                                       "fill_u32"};
    loss_launches += strcmp(name, "softmax_xent_mean_seq_f32") == 0;
    hit_launches += strcmp(name, "count_hits_f32") == 0;
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (strcmp(name, gone[i]) == 0 && replaced++ == 0) first_replaced = gone[i];
}

static void ignore_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns)
{
    (void)slot, (void)what, (void)cat, (void)start_ns, (void)end_ns;
}

START_TEST(test_one_launch_each)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_cpu(), &slot));
    clt_test_skip_if(clt__slot_get(slot)->max_work_group < 256, "wide-work-groups", "%s's work-groups hold fewer than 256",
                     clt__slot_get(slot)->name);
    static const clt__sync_tracer tracer = {see, ignore_host};
    clt_dataset ds = clt_test_make_dataset(100, 7);
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 1, 10, 3));
    setenv("CLT_DEVICE_CLASS", "cpu", 1);
    double loss, accuracy;
    ck_assert_ok(clt_trainer_evaluate(m, &ds, 32, 0, &loss, &accuracy)); /* builds the programs */
    loss_launches = hit_launches = replaced = 0;
    clt__sync_set_tracer(&tracer);
    double loss2, accuracy2;
    clt_status s = clt_trainer_evaluate(m, &ds, 32, 0, &loss2, &accuracy2);
    clt__sync_set_tracer(NULL);
    unsetenv("CLT_DEVICE_CLASS");
    ck_assert_ok(s);
    ck_assert(loss2 == loss && accuracy2 == accuracy);
    /* 100 examples in batches of 32: 4 batches */
    ck_assert_msg(loss_launches == 4 && hit_launches == 4 && replaced == 0,
                  "%d loss launches, %d count_hits_f32, %d of the passes they replace (the first %s)", loss_launches,
                  hit_launches, replaced, first_replaced);
    clt_model_free(m);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("eval_kernels");
    TCase *tc = clt_test_tcase("eval_kernels");
    tcase_add_test(tc, test_one_launch_each);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
