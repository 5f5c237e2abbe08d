/* Pinned host tensors: naming, host access, non-blocking copies in both
 * directions, and the in-flight guard. A gate (a user event the device
 * queue waits on) keeps a transfer in flight for as long as the test needs. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device_internal.h"
#include "support.h"
#include "tensor/tensor_internal.h"

/* Every device a pinned tensor is copied to in these tests. */
static int devices(clt_device *out)
{
    int n = 0;
    out[n++] = clt_test_cpu();
    for (int i = 0; i < 2 && i < clt_num_gpus(); i++) out[n++] = clt_gpu(i);
    return n;
}

START_TEST(test_pinned_is_a_named_device)
{
    char name[32];
    ck_assert_ok(clt_device_name(clt_pinned(), name, sizeof name));
    ck_assert_str_eq(name, "pinned");
    clt_device d;
    ck_assert_ok(clt_device_parse("pinned", &d));
    ck_assert(clt_device_equal(d, clt_pinned()));
    ck_assert(clt_device_exists(clt_pinned()));
    /* Not an OpenCL device of its own: `clt devices` does not list it. */
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device_info info;
        ck_assert_ok(clt_device_list_info(i, &info));
        ck_assert_str_ne(info.name, "pinned");
    }
    clt_tensor *t;
    int64_t shape[] = {2, 3};
    ck_assert_ok(clt_full(&t, clt_pinned(), CLT_FLOAT32, 2, shape, 1.5));
    char buf[128];
    ck_assert_ok(clt_tensor_format(t, buf, sizeof buf));
    ck_assert_ptr_nonnull(strstr(buf, "device='pinned'"));
    ck_assert(clt_device_equal(clt_tensor_device(t), clt_pinned()));
    /* Kernels do not run on host memory. */
    clt_tensor *y;
    ck_assert_status(clt_add(&y, t, t), CLT_ERR_UNSUPPORTED);
    clt_tensor_release(t);
}
END_TEST

START_TEST(test_host_ptr_and_round_trip)
{
    enum { N = 1031 };
    float data[N];
    clt_test_fill_uniform(data, N, 3, -1, 1);
    int64_t shape[] = {N};
    clt_tensor *p, *back;
    ck_assert_ok(clt_from_host(&p, clt_pinned(), CLT_FLOAT32, 1, shape, data));
    float *host;
    ck_assert_ok(clt_tensor_host_ptr(p, 0, (void **)&host));
    ck_assert_float_eq(host[N - 1], data[N - 1]);
    host[0] = 42.0f;
    clt_device devs[3];
    int n = devices(devs);
    for (int i = 0; i < n; i++) {
        clt_tensor *d;
        ck_assert_ok(clt_to(&d, p, devs[i]));
        ck_assert_ok(clt_to(&back, d, clt_pinned()));
        /* A blocking copy into pinned memory is complete on return. */
        ck_assert_int_eq(clt_tensor_in_flight(back), 0);
        float *b;
        ck_assert_ok(clt_tensor_host_ptr(back, 0, (void **)&b));
        ck_assert_float_eq(b[0], 42.0f);
        for (int k = 1; k < N; k++)
            CLT_TEST_REQUIRE(b[k] == data[k], "[%d]: %g, not %g", k, (double)b[k], (double)data[k]);
        clt_tensor_release(d);
        clt_tensor_release(back);
    }
    clt_tensor *dev_t;
    ck_assert_ok(clt_ones(&dev_t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    void *none;
    ck_assert_status(clt_tensor_host_ptr(dev_t, 0, &none), CLT_ERR_UNSUPPORTED);
    ck_assert_int_eq(clt_tensor_in_flight(dev_t), 0);
    clt_tensor_release(dev_t);
    clt_tensor_release(p);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The chapter's warning turned into a guarantee: while the upload reads the
 * pinned source, writes through the API fail instead of corrupting it. */
START_TEST(test_upload_in_flight_guard)
{
    enum { N = 4099 };
    float data[N], other[N];
    clt_test_fill_uniform(data, N, 5, 0, 1);
    for (int i = 0; i < N; i++) other[i] = -1.0f;
    int64_t shape[] = {N};
    clt_device devs[3];
    int n = devices(devs);
    for (int i = 0; i < n; i++) {
        clt_tensor *p, *d, *w;
        ck_assert_ok(clt_from_host(&p, clt_pinned(), CLT_FLOAT32, 1, shape, data));
        ck_assert_ok(clt_ones(&w, devs[i], CLT_FLOAT32, 1, shape)); /* device in use, kernels built */
        ck_assert_ok(clt_synchronize(devs[i]));
        uint64_t before = clt_sync_count(devs[i]), before_pinned = clt_sync_count(clt_pinned());
        cl_event gate = clt_test_close_gate(devs[i]);
        clt_event *ev;
        ck_assert_ok(clt_to_async(&d, p, devs[i], &ev));
        ck_assert_ptr_nonnull(ev);
        ck_assert_int_eq(clt_tensor_in_flight(p), 1);
        int done = 1;
        ck_assert_ok(clt_event_query(ev, &done));
        ck_assert_int_eq(done, 0);
        ck_assert_status(clt_tensor_write(p, other, sizeof other, 0), CLT_ERR_BUSY);
        void *ptr;
        ck_assert_status(clt_tensor_host_ptr(p, 0, &ptr), CLT_ERR_BUSY);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "or pass wait = 1"));
        ck_assert_ptr_null(ptr);
        clt_tensor *q;
        ck_assert_ok(clt_zeros(&q, clt_pinned(), CLT_FLOAT32, 1, shape));
        ck_assert_status(clt_copy_(p, q), CLT_ERR_BUSY);
        /* clt_copy_ has no wait argument, and its message offers none. */
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_event_wait"));
        ck_assert_ptr_null(strstr(clt_last_error(), "wait = 1"));
        ck_assert_ptr_null(strstr(clt_last_error(), "ask this call"));
        clt_tensor_release(q);
        /* Work on the destination queues behind the upload. */
        ck_assert_ok(clt_add_(w, d));
        ck_assert_int_eq(clt_sync_count(devs[i]), before);
        ck_assert_int_eq(clt_sync_count(clt_pinned()), before_pinned);
        clt_test_open_gate(gate);
        ck_assert_ok(clt_event_wait(ev));
        ck_assert_int_eq(clt_sync_count(devs[i]), before + 1);
        ck_assert_int_eq(clt_sync_count(clt_pinned()), before_pinned);
        clt_event_free(ev);
        ck_assert_int_eq(clt_tensor_in_flight(p), 0);
        ck_assert_ok(clt_tensor_write(p, other, sizeof other, 0));
        float *h = clt_test_read(w);
        for (int k = 0; k < N; k++)
            CLT_TEST_REQUIRE(h[k] == 1.0f + data[k], "[%d]: %g, not %g", k, (double)h[k], (double)(1.0f + data[k]));
        free(h);
        clt_tensor_release(p);
        clt_tensor_release(d);
        clt_tensor_release(w);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Asked to wait, a write into an in-flight tensor waits for the transfer
 * (a sync point) and then succeeds; the device copy keeps the old values. */
START_TEST(test_write_waits_when_asked)
{
    enum { N = 517 };
    float data[N], other[N];
    clt_test_fill_uniform(data, N, 8, 0, 1);
    for (int i = 0; i < N; i++) other[i] = 7.0f;
    int64_t shape[] = {N};
    clt_tensor *p, *d;
    ck_assert_ok(clt_from_host(&p, clt_pinned(), CLT_FLOAT32, 1, shape, data));
    ck_assert_ok(clt_to_async(&d, p, clt_test_cpu(), NULL));
    uint64_t before = clt_sync_count(clt_pinned());
    ck_assert_ok(clt_tensor_write(p, other, sizeof other, 1));
    ck_assert_int_eq(clt_tensor_in_flight(p), 0);
    ck_assert_uint_le(clt_sync_count(clt_pinned()), before + 1);
    float *h = clt_test_read(d);
    for (int k = 0; k < N; k++) CLT_TEST_REQUIRE(h[k] == data[k], "[%d]: %g, not %g", k, (double)h[k], (double)data[k]);
    free(h);
    float *ptr;
    ck_assert_ok(clt_tensor_host_ptr(p, 1, (void **)&ptr));
    ck_assert_float_eq(ptr[N - 1], 7.0f);
    clt_tensor_release(p);
    clt_tensor_release(d);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Device to pinned without blocking: the data is there only after the wait. */
START_TEST(test_download_delivers_after_wait)
{
    enum { N = 2053 };
    float data[N];
    clt_test_fill_uniform(data, N, 9, -3, 3);
    int64_t shape[] = {N};
    clt_device devs[3];
    int n = devices(devs);
    for (int i = 0; i < n; i++) {
        clt_tensor *d, *h;
        ck_assert_ok(clt_from_host(&d, devs[i], CLT_FLOAT32, 1, shape, data));
        ck_assert_ok(clt_scale_(d, 1.0f));
        ck_assert_ok(clt_synchronize(devs[i]));
        cl_event gate = clt_test_close_gate(devs[i]);
        ck_assert_ok(clt_scale_(d, 2.0f));
        clt_event *ev;
        ck_assert_ok(clt_to_async(&h, d, clt_pinned(), &ev));
        ck_assert_int_eq(clt_tensor_in_flight(h), 1);
        void *ptr;
        ck_assert_status(clt_tensor_host_ptr(h, 0, &ptr), CLT_ERR_BUSY);
        ck_assert_ok(clt_scale_(d, 0.0f)); /* after the download: must not reach h */
        uint64_t before = clt_sync_count(devs[i]);
        clt_test_open_gate(gate);
        ck_assert_ok(clt_event_wait(ev));
        ck_assert_int_eq(clt_sync_count(devs[i]), before + 1);
        clt_event_free(ev);
        float *x;
        ck_assert_ok(clt_tensor_host_ptr(h, 0, (void **)&x));
        for (int k = 0; k < N; k++)
            CLT_TEST_REQUIRE(x[k] == 2.0f * data[k], "[%d]: %g, not %g", k, (double)x[k], (double)(2.0f * data[k]));
        clt_tensor_release(d);
        clt_tensor_release(h);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Releasing a pinned tensor whose upload is still pending must neither wait
 * nor hand its memory to another tensor before the upload has read it. */
START_TEST(test_release_in_flight_does_not_wait)
{
    enum { N = 3001 };
    float data[N];
    clt_test_fill_uniform(data, N, 10, 0, 1);
    int64_t shape[] = {N};
    clt_tensor *p, *d, *w;
    ck_assert_ok(clt_ones(&w, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_synchronize(clt_test_cpu()));
    ck_assert_ok(clt_from_host(&p, clt_pinned(), CLT_FLOAT32, 1, shape, data));
    cl_event gate = clt_test_close_gate(clt_test_cpu());
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    ck_assert_ok(clt_to_async(&d, p, clt_test_cpu(), NULL));
    clt_tensor_release(p);
    /* Same size: would reuse p's block if it were freed now. */
    clt_tensor *p2;
    ck_assert_ok(clt_full(&p2, clt_pinned(), CLT_FLOAT32, 1, shape, -5.0));
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_test_open_gate(gate);
    float *h = clt_test_read(d);
    for (int k = 0; k < N; k++) CLT_TEST_REQUIRE(h[k] == data[k], "[%d]: %g, not %g", k, (double)h[k], (double)data[k]);
    free(h);
    clt_tensor_release(p2);
    clt_tensor_release(d);
    clt_tensor_release(w);
    /* The transfer's completion callback queues the block; sync points
     * reclaim it (the callback may run just after the wait returns). */
    for (int i = 0; i < 500 && clt_memory_allocated(clt_pinned()) != 0; i++) {
        ck_assert_ok(clt_synchronize_all());
        usleep(10000);
    }
    ck_assert_int_eq(clt_memory_allocated(clt_pinned()), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pinned");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pinned_is_a_named_device);
    tcase_add_test(tc, test_host_ptr_and_round_trip);
    tcase_add_test(tc, test_upload_in_flight_guard);
    tcase_add_test(tc, test_write_waits_when_asked);
    tcase_add_test(tc, test_download_delivers_after_wait);
    tcase_add_test(tc, test_release_in_flight_does_not_wait);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
