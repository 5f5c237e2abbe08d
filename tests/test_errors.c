/* Error paths: every one returns its status, sets a message naming what is
 * wrong, leaves *out NULL and holds no memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define POISON ((clt_tensor *)(uintptr_t)0x1)

static void assert_message_has(const char *needle)
{
    ck_assert_msg(strstr(clt_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"", clt_last_error(),
                  needle);
}

START_TEST(test_bad_shapes)
{
    clt_tensor *t = POISON;
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_status(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 9, nine), CLT_ERR_SHAPE);
    ck_assert_ptr_null(t);
    assert_message_has("not 9");
    ck_assert_status(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, -1, nine), CLT_ERR_SHAPE);
    int64_t neg[] = {3, -2};
    t = POISON;
    ck_assert_status(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 2, neg), CLT_ERR_SHAPE);
    ck_assert_ptr_null(t);
    assert_message_has("dimension 1 has negative size -2");
    int64_t huge[] = {INT64_MAX / 2, 3};
    ck_assert_status(clt_empty(&t, clt_test_cpu(), CLT_FLOAT32, 2, huge), CLT_ERR_SHAPE);
    assert_message_has("overflows");
    int64_t many[] = {1 << 21, 1 << 21, 1 << 21};
    ck_assert_status(clt_rand(&t, clt_test_cpu(), 3, many, 1), CLT_ERR_SHAPE);
    assert_message_has("dimension 2");
    ck_assert_status(clt_randn(&t, clt_test_cpu(), 9, nine, 1), CLT_ERR_SHAPE);
    float x = 0;
    ck_assert_status(clt_from_host(&t, clt_test_cpu(), CLT_FLOAT32, 2, neg, &x), CLT_ERR_SHAPE);
    ck_assert_ptr_null(t);
    ck_assert_status(clt_full(&t, clt_test_cpu(), CLT_INT32, 2, NULL, 1), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("shape is NULL");
    ck_assert_status(clt_zeros(&t, clt_test_cpu(), (clt_dtype)7, 1, neg), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("dtype");
    int64_t two[] = {2};
    t = POISON;
    ck_assert_status(clt_full(&t, clt_test_cpu(), CLT_INT32, 1, two, 3e9), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    assert_message_has("does not fit int32");
    ck_assert_status(clt_full(&t, clt_test_cpu(), CLT_INT32, 1, two, NAN), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_INT32, 1, two, -2147483648.0));
    int32_t back[2];
    ck_assert_ok(clt_to_host(t, back, sizeof back));
    ck_assert_int_eq(back[1], INT32_MIN);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_null_arguments)
{
    int64_t shape[] = {4};
    clt_tensor *t, *out = POISON;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_status(clt_zeros(NULL, clt_test_cpu(), CLT_FLOAT32, 1, shape), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("out is NULL");
    ck_assert_status(clt_empty(NULL, clt_test_cpu(), CLT_FLOAT32, 1, shape), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_full(NULL, clt_test_cpu(), CLT_FLOAT32, 1, shape, 2), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_rand(NULL, clt_test_cpu(), 1, shape, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_randn(NULL, clt_test_cpu(), 1, shape, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_from_host(NULL, clt_test_cpu(), CLT_FLOAT32, 1, shape, shape), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_from_host(&out, clt_test_cpu(), CLT_FLOAT32, 1, shape, NULL), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("data is NULL");
    ck_assert_ptr_null(out);
    ck_assert_status(clt_zeros_like(NULL, t), CLT_ERR_INVALID_ARGUMENT);
    out = POISON;
    ck_assert_status(clt_ones_like(&out, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    assert_message_has("clt_ones_like: src is NULL");
    ck_assert_status(clt_empty_like(&out, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_reshape(NULL, t, 1, shape), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_reshape(&out, NULL, 1, shape), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_narrow(&out, NULL, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_narrow(NULL, t, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_to(NULL, t, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    out = POISON;
    ck_assert_status(clt_to(&out, NULL, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    ck_assert_status(clt_copy_to(&out, NULL, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_copy_to(NULL, t, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_copy_(NULL, t), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_copy_(t, NULL), CLT_ERR_INVALID_ARGUMENT);
    float buf[4];
    ck_assert_status(clt_to_host(NULL, buf, sizeof buf), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_to_host(t, NULL, sizeof buf), CLT_ERR_INVALID_ARGUMENT);
    double v;
    ck_assert_status(clt_item(NULL, &v), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_item(t, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_add(NULL, t, t), CLT_ERR_INVALID_ARGUMENT);
    out = POISON;
    ck_assert_status(clt_add(&out, NULL, t), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    ck_assert_status(clt_add(&out, t, NULL), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_add: b is NULL");
    ck_assert_status(clt_tensor_set_category(NULL, CLT_MEM_WEIGHTS), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_tensor_set_category(t, (clt_memory_category)99), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_memory_get_stats(clt_test_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT);
    int64_t f;
    ck_assert_status(clt_memory_get_info(clt_test_cpu(), NULL, &f), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_memory_get_info(clt_test_cpu(), &f, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_memory_report(clt_test_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The model checks (clt__need_model, clt__need) name the call and the
 * argument, for a NULL and for an uninitialised model alike. */
START_TEST(test_model_arguments)
{
    int64_t shape[] = {2, 3};
    clt_tensor *x;
    ck_assert_ok(clt_zeros(&x, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    clt_tensor *y = POISON;
    ck_assert_status(clt_model_forward(NULL, x, &y), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(y);
    assert_message_has("clt_model_forward: the model is NULL");
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, NULL));
    ck_assert_status(clt_model_forward(m, x, &y), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_forward: the model has no parameters yet; call clt_model_init");

    clt_model *r = (clt_model *)POISON;
    ck_assert_status(clt_model_replicate(&r, NULL, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    assert_message_has("clt_model_replicate: the source model is NULL");
    ck_assert_status(clt_model_replicate(&r, m, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_replicate: the source model has no parameters yet");
    ck_assert_status(clt_model_replicate(NULL, m, clt_test_cpu()), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_replicate: out is NULL");

    clt_model *stages[1];
    int first[] = {0};
    clt_device devs[] = {clt_test_cpu()};
    ck_assert_status(clt_model_split(m, 1, first, devs, NULL), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_split: stages is NULL");
    ck_assert_status(clt_model_split(m, 1, NULL, devs, stages), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_split: first_layer is NULL");
    ck_assert_status(clt_model_split(m, 1, first, NULL, stages), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_split: devices is NULL");
    ck_assert_status(clt_model_split(m, 0, first, devs, stages), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_split: 0 stages");
    ck_assert_status(clt_model_split(NULL, 1, first, devs, stages), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("clt_model_split: the source model is NULL");
    ck_assert_ptr_null(stages[0]);
    clt_model_free(m);
    clt_tensor_release(x);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_operand_errors)
{
    int64_t s4[] = {4}, s5[] = {5}, s22[] = {2, 2};
    clt_tensor *a, *b, *c, *i, *out = POISON;
    ck_assert_ok(clt_zeros(&a, clt_test_cpu(), CLT_FLOAT32, 1, s4));
    ck_assert_ok(clt_zeros(&b, clt_test_cpu(), CLT_FLOAT32, 1, s5));
    ck_assert_ok(clt_zeros(&c, clt_test_cpu(), CLT_FLOAT32, 2, s22));
    ck_assert_ok(clt_zeros(&i, clt_test_cpu(), CLT_INT32, 1, s4));
    int64_t before = clt_memory_allocated(clt_test_cpu());
    ck_assert_status(clt_add(&out, a, b), CLT_ERR_SHAPE);
    ck_assert_ptr_null(out);
    /* Same element count, different shape: still refused. */
    ck_assert_status(clt_add(&out, a, c), CLT_ERR_SHAPE);
    ck_assert_status(clt_add(&out, a, i), CLT_ERR_UNSUPPORTED);
    assert_message_has("int32");
    ck_assert_status(clt_copy_(a, b), CLT_ERR_SHAPE);
    ck_assert_status(clt_copy_(a, i), CLT_ERR_SHAPE);
    assert_message_has("float32");
    ck_assert_int_eq(clt_memory_allocated(clt_test_cpu()), before);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(i);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_no_device)
{
    int64_t shape[] = {4};
    clt_tensor *t, *out = POISON;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_status(clt_to(&out, t, clt_gpu(9)), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_null(out);
    assert_message_has("gpu:9");
    ck_assert_status(clt_copy_to(&out, t, clt_device_at(3, 1)), CLT_ERR_NO_DEVICE);
    assert_message_has("3:1");
    ck_assert_status(clt_rand(&out, clt_gpu(9), 1, shape, 1), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_from_host(&out, clt_gpu(9), CLT_FLOAT32, 1, shape, shape), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_memory_empty_cache(clt_gpu(9)), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_memory_reset_peak(clt_gpu(9)), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_memory_set_cap(clt_gpu(9), 1 << 20), CLT_ERR_NO_DEVICE);
    ck_assert_status(clt_memory_set_fraction(clt_gpu(9), 0.5), CLT_ERR_NO_DEVICE);
    int64_t f, tot;
    ck_assert_status(clt_memory_get_info(clt_gpu(9), &f, &tot), CLT_ERR_NO_DEVICE);
    clt_memory_stats st;
    ck_assert_status(clt_memory_get_stats(clt_gpu(9), &st), CLT_ERR_NO_DEVICE);
    ck_assert_int_eq(st.reserved, 0);
    ck_assert_int_eq(clt_memory_allocated(clt_gpu(9)), 0);
    ck_assert_int_eq(clt_memory_reserved(clt_gpu(9)), 0);
    ck_assert_status(clt_memory_report(clt_gpu(9), stdout), CLT_ERR_NO_DEVICE);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_bad_memory_settings)
{
    ck_assert_status(clt_memory_set_cap(clt_test_cpu(), -1), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("negative");
    ck_assert_status(clt_memory_set_fraction(clt_test_cpu(), 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_memory_set_fraction(clt_test_cpu(), 1.5), CLT_ERR_INVALID_ARGUMENT);
    assert_message_has("1.5");
    ck_assert_str_eq(clt_memory_category_name(CLT_MEM_WEIGHTS), "weights");
    ck_assert_str_eq(clt_memory_category_name((clt_memory_category)42), "unknown");
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), (clt_memory_category)42), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_bad_shapes);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_model_arguments);
    tcase_add_test(tc, test_operand_errors);
    tcase_add_test(tc, test_no_device);
    tcase_add_test(tc, test_bad_memory_settings);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
