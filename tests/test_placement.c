/* Placement: clt_to / clt_copy_to, copies between two devices of one context
 * (device to device) and between contexts (through the host), ordering
 * against queued work, and the device-mismatch error. The two-device cases
 * need POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1 (the second run of
 * scripts/test); without two GPUs they assert that the devices are absent. */
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Large enough that queued work on pocl takes a while, small enough for valgrind. */
enum { BIG = 1 << 18, BUSY = 1 << 20, BUSY_STEPS = 8 };

static clt_tensor *from_host(clt_device dev, const float *x, int64_t n)
{
    clt_tensor *t;
    int64_t shape[] = {n};
    ck_assert_ok(clt_from_host(&t, dev, CLT_FLOAT32, 1, shape, x));
    return t;
}

/* Returns x doubled `steps` times by a chain of kernels, all still queued. */
static clt_tensor *doubled(clt_tensor *x, int steps)
{
    clt_tensor *cur = clt_tensor_retain(x);
    for (int i = 0; i < steps; i++) {
        clt_tensor *next;
        ck_assert_ok(clt_add(&next, cur, cur));
        clt_tensor_release(cur);
        cur = next;
    }
    return cur;
}

/* Queues work on dev so that what is enqueued next there starts late. */
static void keep_busy(clt_device dev)
{
    clt_tensor *x, *y;
    int64_t shape[] = {BUSY};
    ck_assert_ok(clt_ones(&x, dev, CLT_FLOAT32, 1, shape));
    y = doubled(x, BUSY_STEPS);
    clt_tensor_release(x);
    clt_tensor_release(y);
}

/* Fills the device's cache with blocks of the sizes used below, so that no
 * allocation during a test asks the driver (whose new buffers are touched,
 * which waits for the queue and would hide a missing ordering). */
static void warm(clt_device dev)
{
    clt_tensor *t[8];
    int64_t busy[] = {BUSY}, big[] = {BIG};
    for (int i = 0; i < 4; i++) ck_assert_ok(clt_empty(&t[i], dev, CLT_FLOAT32, 1, busy));
    for (int i = 4; i < 8; i++) ck_assert_ok(clt_empty(&t[i], dev, CLT_FLOAT32, 1, big));
    for (int i = 0; i < 8; i++) clt_tensor_release(t[i]);
}

static void assert_values(const clt_tensor *t, const float *want, int64_t n, float scale)
{
    float *got = clt_test_read(t);
    int64_t bad = 0; /* one assertion, not one per element: each costs Check a write */
    while (bad < n && got[bad] == want[bad] * scale) bad++;
    ck_assert_msg(bad == n, "element %lld: %g, want %g", (long long)bad, bad < n ? got[bad] : 0.0,
                  bad < n ? want[bad] * scale : 0.0);
    free(got);
}

START_TEST(test_to_same_device_is_the_same_tensor)
{
    clt_device dev = clt_try_gpu(0);
    int64_t shape[] = {3, 5};
    clt_tensor *t, *same, *same2;
    ck_assert_ok(clt_ones(&t, dev, CLT_FLOAT32, 2, shape));
    clt_memory_stats before, after;
    ck_assert_ok(clt_memory_get_stats(dev, &before));
    ck_assert_ok(clt_to(&same, t, dev));
    ck_assert_ptr_eq(same, t);
    /* The same device named by P:D is still the same device. */
    clt_device_info info;
    ck_assert_ok(clt_device_list_info(0, &info));
    clt_device at = clt_device_at(info.platform_index, info.device_index);
    if (clt_device_equal(at, dev)) {
        ck_assert_ok(clt_to(&same2, t, at));
        ck_assert_ptr_eq(same2, t);
        clt_tensor_release(same2);
    }
    ck_assert_ok(clt_memory_get_stats(dev, &after));
    ck_assert_int_eq(after.allocated, before.allocated);
    ck_assert_uint_eq(after.driver_allocs, before.driver_allocs);
    ck_assert_uint_eq(after.cache_hits, before.cache_hits);
    /* clt_to handed out a reference: t survives one release. */
    clt_tensor_release(t);
    float *x = clt_test_read(same);
    ck_assert_float_eq(x[14], 1.0f);
    free(x);
    clt_tensor_release(same);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_copy_to_same_device_copies)
{
    enum { N = 1031 };
    float host[N];
    clt_test_fill_uniform(host, N, 3, -2, 2);
    clt_device dev = clt_try_gpu(0);
    clt_tensor *t = from_host(dev, host, N), *c, *ones;
    ck_assert_ok(clt_tensor_set_category(t, CLT_MEM_WEIGHTS));
    int64_t before = clt_memory_allocated(dev);
    ck_assert_ok(clt_copy_to(&c, t, dev));
    ck_assert_ptr_ne(c, t);
    ck_assert_int_eq(clt_memory_allocated(dev), before + N * 4);
    ck_assert_int_eq(clt_tensor_category(c), CLT_MEM_WEIGHTS);
    assert_values(c, host, N, 1);
    /* Writing the copy leaves the original alone. */
    ck_assert_ok(clt_ones_like(&ones, c));
    ck_assert_ok(clt_copy_(c, ones));
    assert_values(t, host, N, 1);
    clt_tensor_release(t);
    clt_tensor_release(c);
    clt_tensor_release(ones);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Copies a view with an offset from one device to another while its
 * producer is still queued, and checks the values. */
static void check_copy_between(clt_device from, clt_device to)
{
    float *host = malloc(sizeof(float) * BIG);
    ck_assert_ptr_nonnull(host);
    clt_test_fill_uniform(host, BIG, 11, -1, 1);
    warm(from);
    warm(to);
    keep_busy(from);
    clt_tensor *x = from_host(from, host, BIG);
    clt_tensor *y = doubled(x, 3); /* still being written */
    clt_tensor *view, *c, *c2;
    ck_assert_ok(clt_narrow(&view, y, 7, BIG - 20));
    ck_assert_ok(clt_to(&c, view, to));
    ck_assert_ptr_ne(c, view);
    ck_assert_int_eq(clt_device_equal(clt_tensor_device(c), to), 1);
    ck_assert_int_eq(clt_tensor_numel(c), BIG - 20);
    ck_assert_ok(clt_copy_to(&c2, y, to));
    assert_values(c, host + 7, BIG - 20, 8);
    assert_values(c2, host, BIG, 8);
    /* And back again. */
    clt_tensor *back;
    ck_assert_ok(clt_copy_to(&back, c2, from));
    assert_values(back, host, BIG, 8);
    clt_tensor *all[] = {x, y, view, c, c2, back};
    for (int i = 0; i < 6; i++) clt_tensor_release(all[i]);
    free(host);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_copy_gpu_to_gpu)
{
    if (clt_num_gpus() < 2) {
        clt_tensor *t, *c = (clt_tensor *)&t;
        int64_t shape[] = {4};
        ck_assert_ok(clt_zeros(&t, clt_try_gpu(0), CLT_FLOAT32, 1, shape));
        ck_assert_status(clt_to(&c, t, clt_gpu(1)), CLT_ERR_NO_DEVICE);
        ck_assert_ptr_null(c);
        clt_tensor_release(t);
        clt_test_assert_no_live_tensors();
        return;
    }
    check_copy_between(clt_gpu(0), clt_gpu(1));
    check_copy_between(clt_gpu(1), clt_gpu(0));
}
END_TEST

START_TEST(test_copy_cpu_gpu)
{
    if (clt_num_gpus() < 1) {
        clt_tensor *t, *c = (clt_tensor *)&t;
        int64_t shape[] = {4};
        ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
        ck_assert_status(clt_copy_to(&c, t, clt_gpu(0)), CLT_ERR_NO_DEVICE);
        ck_assert_ptr_null(c);
        clt_tensor_release(t);
        clt_test_assert_no_live_tensors();
        return;
    }
    check_copy_between(clt_test_cpu(), clt_gpu(0));
    check_copy_between(clt_gpu(0), clt_test_cpu());
}
END_TEST

/* A device-to-device copy reads its source on the destination's queue. The
 * source's own queue must not overwrite or reuse that memory before the read. */
START_TEST(test_source_not_overwritten_before_foreign_read)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    float *host = malloc(sizeof(float) * BIG);
    ck_assert_ptr_nonnull(host);
    clt_test_fill_uniform(host, BIG, 5, -1, 1);
    warm(clt_gpu(1));
    clt_tensor *src = from_host(clt_gpu(0), host, BIG), *ones, *c1, *c3, *reuse;
    ck_assert_ok(clt_ones_like(&ones, src));
    ck_assert_ok(clt_synchronize(clt_gpu(0)));

    /* Overwritten by a copy on its own queue. */
    keep_busy(clt_gpu(1));
    ck_assert_ok(clt_copy_to(&c1, src, clt_gpu(1)));
    ck_assert_ok(clt_copy_(src, ones));
    /* Submits and finishes the overwrite while gpu:1 is still busy. */
    ck_assert_ok(clt_synchronize(clt_gpu(0)));
    assert_values(c1, host, BIG, 1);

    /* Released, and its memory handed to a new tensor at once. */
    clt_tensor *fresh = from_host(clt_gpu(0), host, BIG);
    keep_busy(clt_gpu(1));
    ck_assert_ok(clt_copy_to(&c3, fresh, clt_gpu(1)));
    clt_memory_stats before, after;
    ck_assert_ok(clt_memory_get_stats(clt_gpu(0), &before));
    clt_tensor_release(fresh);
    int64_t shape[] = {BIG};
    ck_assert_ok(clt_full(&reuse, clt_gpu(0), CLT_FLOAT32, 1, shape, 7));
    ck_assert_ok(clt_memory_get_stats(clt_gpu(0), &after));
    ck_assert_uint_eq(after.driver_allocs, before.driver_allocs); /* it did reuse the block */
    ck_assert_ok(clt_synchronize(clt_gpu(0)));
    assert_values(c3, host, BIG, 1);
    float *r = clt_test_read(reuse);
    ck_assert_float_eq(r[0], 7.0f);
    ck_assert_float_eq(r[BIG - 1], 7.0f);
    free(r);

    clt_tensor *all[] = {src, ones, c1, c3, reuse};
    for (int i = 0; i < 5; i++) clt_tensor_release(all[i]);
    free(host);
    clt_test_assert_no_live_tensors();
}
END_TEST

static void check_mismatch(clt_device da, clt_device db)
{
    int64_t shape[] = {2, 3};
    clt_tensor *a, *b, *out = (clt_tensor *)&a;
    ck_assert_ok(clt_ones(&a, da, CLT_FLOAT32, 2, shape));
    ck_assert_ok(clt_rand(&b, db, 2, shape, 1));
    clt_memory_stats sa, sb, sa2, sb2;
    ck_assert_ok(clt_memory_get_stats(da, &sa));
    ck_assert_ok(clt_memory_get_stats(db, &sb));
    ck_assert_status(clt_add(&out, a, b), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_ptr_null(out);
    char na[16], nb[16], want[64];
    ck_assert_ok(clt_device_name(da, na, sizeof na));
    ck_assert_ok(clt_device_name(db, nb, sizeof nb));
    snprintf(want, sizeof want, "(%s and %s)", na, nb);
    ck_assert_msg(strstr(clt_last_error(), want) != NULL, "message \"%s\" lacks \"%s\"", clt_last_error(), want);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_add"));
    ck_assert_status(clt_copy_(a, b), CLT_ERR_DEVICE_MISMATCH);
    /* Nothing was copied or allocated on either device. */
    ck_assert_ok(clt_memory_get_stats(da, &sa2));
    ck_assert_ok(clt_memory_get_stats(db, &sb2));
    ck_assert_int_eq(sa2.allocated, sa.allocated);
    ck_assert_int_eq(sb2.allocated, sb.allocated);
    ck_assert_uint_eq(sa2.driver_allocs + sa2.cache_hits, sa.driver_allocs + sa.cache_hits);
    ck_assert_uint_eq(sb2.driver_allocs + sb2.cache_hits, sb.driver_allocs + sb.cache_hits);
    /* The chapter's fix: copy explicitly, then add on one device. */
    clt_tensor *z, *sum;
    ck_assert_ok(clt_to(&z, a, db));
    ck_assert_ok(clt_add(&sum, b, z));
    float *bx = clt_test_read(b), *sx = clt_test_read(sum);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(sx[i], bx[i] + 1.0f);
    free(bx);
    free(sx);
    ck_assert_int_eq(clt_device_equal(clt_tensor_device(sum), db), 1);
    clt_tensor_release(z);
    clt_tensor_release(sum);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_device_mismatch)
{
    if (clt_num_gpus() >= 2) check_mismatch(clt_gpu(0), clt_gpu(1));
    if (clt_num_gpus() >= 1) check_mismatch(clt_test_cpu(), clt_gpu(0));
    if (clt_num_gpus() == 0) ck_assert_int_eq(clt_device_list_num_entries(), 1); /* one device: nothing to mismatch */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_to_same_device_is_the_same_tensor);
    tcase_add_test(tc, test_copy_to_same_device_copies);
    tcase_add_test(tc, test_copy_gpu_to_gpu);
    tcase_add_test(tc, test_copy_cpu_gpu);
    tcase_add_test(tc, test_device_mismatch);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_add_test(gpus, test_source_not_overwritten_before_foreign_read);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
