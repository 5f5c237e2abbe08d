/* The kernel table keeps its own copy of each kernel's name
 * (src/kernels/program.c): a kernel asked for through a buffer that the
 * caller then overwrites is found again, the same kernel, by its name. */
#include <string.h>

#include "support.h"
#include "device/device_internal.h"
#include "kernels/program.h"

/* Kernel `name` of cl/elementwise.cl asked for through a stack buffer,
 * which is overwritten before this returns. */
static cl_kernel kernel_through_buffer(int slot, const char *name)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", name);
    cl_kernel k;
    ck_assert_ok(clt__kernel(slot, "elementwise", buf, &k));
    memset(buf, 'x', sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    return k;
}

START_TEST(test_name_in_reused_buffer)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    cl_kernel add = kernel_through_buffer(slot, "add_f32");
    cl_kernel scale = kernel_through_buffer(slot, "scale_f32");
    ck_assert_ptr_ne(add, scale);
    cl_kernel again;
    ck_assert_ok(clt__kernel(slot, "elementwise", "add_f32", &again));
    ck_assert_msg(again == add, "add_f32 asked for again gave another kernel: the table lost its name");
    ck_assert_ok(clt__kernel(slot, "elementwise", "scale_f32", &again));
    ck_assert_msg(again == scale, "scale_f32 asked for again gave another kernel: the table lost its name");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernel_names");
    TCase *tc = clt_test_tcase("names");
    tcase_add_test(tc, test_name_in_reused_buffer);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
