/* Tensors: creation, reading back, random values against a C reference of
 * cl/random.cl, views, zero-size tensors, *_like and printing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* The generator of cl/random.cl, in C. */
static uint64_t ref_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float ref_uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = ref_mix64(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

static double ref_normal(uint64_t seed, uint64_t i)
{
    double u1 = 1.0 - ref_uniform(seed, 2 * i), u2 = ref_uniform(seed, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

START_TEST(test_ones_read_back)
{
    clt_tensor *t;
    int64_t shape[] = {2, 3};
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    float *x = clt_test_read(t);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(x[i], 1.0f);
    free(x);
    char buf[256];
    ck_assert_ok(clt_tensor_format(t, buf, sizeof buf));
    char want[128];
    snprintf(want, sizeof want, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='%s')", clt_test_cpu_name());
    ck_assert_str_eq(buf, want);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_add_matches_host)
{
    enum { N = 1031 };
    float a[N], b[N];
    clt_test_fill_uniform(a, N, 1, -1, 1);
    clt_test_fill_uniform(b, N, 2, -1, 1);
    int64_t shape[] = {N};
    clt_tensor *ta, *tb, *ty;
    ck_assert_ok(clt_from_host(&ta, clt_test_cpu(), CLT_FLOAT32, 1, shape, a));
    ck_assert_ok(clt_from_host(&tb, clt_test_cpu(), CLT_FLOAT32, 1, shape, b));
    ck_assert_ok(clt_add(&ty, ta, tb));
    float *y = clt_test_read(ty);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], a[i] + b[i]);
    free(y);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_zeros_full_int32)
{
    static const int64_t sizes[] = {1, 7, 64, 1031};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t shape[] = {sizes[k]};
        clt_tensor *z, *f, *i;
        ck_assert_ok(clt_zeros(&z, clt_test_cpu(), CLT_FLOAT32, 1, shape));
        ck_assert_ok(clt_full(&f, clt_test_cpu(), CLT_FLOAT32, 1, shape, -2.5));
        ck_assert_ok(clt_full(&i, clt_test_cpu(), CLT_INT32, 1, shape, 7));
        ck_assert_int_eq(clt_tensor_dtype(i), CLT_INT32);
        ck_assert_uint_eq(clt_tensor_nbytes(i), (size_t)sizes[k] * 4);
        float *zx = clt_test_read(z), *fx = clt_test_read(f);
        int32_t *ix = (int32_t *)clt_test_read(i);
        for (int64_t j = 0; j < sizes[k]; j++) {
            ck_assert_float_eq(zx[j], 0.0f);
            ck_assert_float_eq(fx[j], -2.5f);
            ck_assert_int_eq(ix[j], 7);
        }
        free(zx);
        free(fx);
        free(ix);
        clt_tensor_release(z);
        clt_tensor_release(f);
        clt_tensor_release(i);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_rand_matches_reference)
{
    static const int64_t sizes[] = {1, 13, 1031};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k], shape[] = {n};
        clt_tensor *u, *u2, *g;
        ck_assert_ok(clt_rand(&u, clt_try_gpu(0), 1, shape, 42 + k));
        ck_assert_ok(clt_rand(&u2, clt_test_cpu(), 1, shape, 42 + k));
        ck_assert_ok(clt_randn(&g, clt_try_gpu(0), 1, shape, 42 + k));
        float *ux = clt_test_read(u), *u2x = clt_test_read(u2), *gx = clt_test_read(g);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_float_eq(ux[i], ref_uniform(42 + k, (uint64_t)i));
            ck_assert_float_eq(u2x[i], ux[i]); /* the same on every device */
            ck_assert_float_ge(ux[i], 0.0f);
            ck_assert_float_lt(ux[i], 1.0f);
            ck_assert_double_eq_tol(gx[i], ref_normal(42 + k, (uint64_t)i), 1e-4 * fmax(1.0, fabs(gx[i])));
        }
        free(ux);
        free(u2x);
        free(gx);
        clt_tensor_release(u);
        clt_tensor_release(u2);
        clt_tensor_release(g);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_rand_reproducible_and_distributed)
{
    enum { N = 20011 };
    int64_t shape[] = {N};
    clt_tensor *a, *b, *c, *g;
    ck_assert_ok(clt_rand(&a, clt_test_cpu(), 1, shape, 7));
    ck_assert_ok(clt_rand(&b, clt_test_cpu(), 1, shape, 7));
    ck_assert_ok(clt_rand(&c, clt_test_cpu(), 1, shape, 8));
    ck_assert_ok(clt_randn(&g, clt_test_cpu(), 1, shape, 7));
    float *ax = clt_test_read(a), *bx = clt_test_read(b), *cx = clt_test_read(c), *gx = clt_test_read(g);
    ck_assert_int_eq(memcmp(ax, bx, sizeof(float) * N), 0);
    ck_assert_int_ne(memcmp(ax, cx, sizeof(float) * N), 0);
    double mu = 0, gm = 0, gv = 0;
    for (int i = 0; i < N; i++) {
        mu += ax[i];
        gm += gx[i];
    }
    mu /= N;
    gm /= N;
    for (int i = 0; i < N; i++) gv += (gx[i] - gm) * (gx[i] - gm);
    gv /= N;
    /* Five standard errors. */
    ck_assert_double_eq_tol(mu, 0.5, 5 * 0.2887 / sqrt(N));
    ck_assert_double_eq_tol(gm, 0.0, 5 / sqrt(N));
    ck_assert_double_eq_tol(gv, 1.0, 5 * sqrt(2.0 / N));
    free(ax);
    free(bx);
    free(cx);
    free(gx);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(g);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_from_host_to_host_item)
{
    int32_t labels[5] = {3, -1, 0, 2147483647, 9};
    int64_t shape[] = {5};
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_INT32, 1, shape, labels));
    int32_t back[5];
    ck_assert_ok(clt_to_host(t, back, sizeof back));
    ck_assert_int_eq(memcmp(back, labels, sizeof back), 0);
    /* The caller's buffer is copied at once: changing it later does not matter. */
    float v = 2.75f;
    clt_tensor *s;
    ck_assert_ok(clt_from_host(&s, clt_test_cpu(), CLT_FLOAT32, 0, NULL, &v));
    v = 0;
    double item;
    ck_assert_ok(clt_item(s, &item));
    ck_assert_double_eq(item, 2.75);
    ck_assert_int_eq(clt_tensor_ndim(s), 0);
    ck_assert_int_eq(clt_tensor_numel(s), 1);
    clt_tensor *one;
    ck_assert_ok(clt_narrow(&one, t, 3, 1));
    ck_assert_ok(clt_item(one, &item));
    ck_assert_double_eq(item, 2147483647.0);
    ck_assert_status(clt_item(t, &item), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "5 elements"));
    int32_t small[2];
    ck_assert_status(clt_to_host(t, small, sizeof small), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "8 bytes"));
    clt_tensor_release(one);
    clt_tensor_release(s);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_shape_queries)
{
    int64_t shape[] = {2, 3, 5};
    clt_tensor *t;
    ck_assert_ok(clt_empty(&t, clt_test_cpu(), CLT_FLOAT32, 3, shape));
    int64_t got[CLT_MAX_DIMS];
    ck_assert_int_eq(clt_tensor_shape(t, got), 3);
    ck_assert_int_eq(got[0], 2);
    ck_assert_int_eq(got[2], 5);
    ck_assert_int_eq(clt_tensor_dim(t, -1), 5);
    ck_assert_int_eq(clt_tensor_dim(t, 1), 3);
    ck_assert_int_eq(clt_tensor_dim(t, 3), 0);
    ck_assert_int_eq(clt_tensor_numel(t), 30);
    ck_assert_uint_eq(clt_tensor_nbytes(t), 120);
    ck_assert_int_eq(clt_device_equal(clt_tensor_device(t), clt_test_cpu()), 1);
    ck_assert_str_eq(clt_dtype_name(CLT_FLOAT32), "float32");
    ck_assert_str_eq(clt_dtype_name(CLT_INT32), "int32");
    ck_assert_uint_eq(clt_dtype_size(CLT_INT32), 4);
    /* Eight dimensions is the limit, and works. */
    int64_t eight[8] = {1, 2, 1, 2, 1, 2, 1, 3};
    clt_tensor *e;
    ck_assert_ok(clt_ones(&e, clt_test_cpu(), CLT_FLOAT32, 8, eight));
    ck_assert_int_eq(clt_tensor_numel(e), 24);
    float *x = clt_test_read(e);
    for (int i = 0; i < 24; i++) ck_assert_float_eq(x[i], 1.0f);
    free(x);
    clt_tensor_release(e);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_reshape_and_narrow_share_storage)
{
    enum { R = 7, C = 13 };
    float host[R * C];
    for (int i = 0; i < R * C; i++) host[i] = (float)i;
    int64_t shape[] = {R, C};
    clt_tensor *t, *flat, *mid, *mid2, *inferred;
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_FLOAT32, 2, shape, host));
    int64_t before = clt_memory_allocated(clt_test_cpu());
    int64_t fshape[] = {-1};
    ck_assert_ok(clt_reshape(&flat, t, 1, fshape));
    ck_assert_int_eq(clt_tensor_dim(flat, 0), R * C);
    ck_assert_ok(clt_narrow(&mid, t, 2, 3));
    ck_assert_int_eq(clt_tensor_dim(mid, 0), 3);
    ck_assert_int_eq(clt_tensor_dim(mid, 1), C);
    ck_assert_ok(clt_narrow(&mid2, mid, 1, 2)); /* a view of a view */
    int64_t ishape[] = {C, -1};
    ck_assert_ok(clt_reshape(&inferred, mid2, 2, ishape));
    ck_assert_int_eq(clt_tensor_dim(inferred, 1), 2);
    /* Views take no memory. */
    ck_assert_int_eq(clt_memory_allocated(clt_test_cpu()), before);
    float *m = clt_test_read(mid2);
    for (int i = 0; i < 2 * C; i++) ck_assert_float_eq(m[i], (float)(3 * C + i));
    free(m);
    /* Kernels honour a view's offset, reading and writing. */
    clt_tensor *sum;
    ck_assert_ok(clt_add(&sum, mid, mid));
    float *s = clt_test_read(sum);
    for (int i = 0; i < 3 * C; i++) ck_assert_float_eq(s[i], 2.0f * (float)(2 * C + i));
    free(s);
    clt_tensor *ones;
    ck_assert_ok(clt_ones_like(&ones, mid2));
    ck_assert_ok(clt_copy_(mid2, ones));
    float *all = clt_test_read(flat);
    for (int i = 0; i < R * C; i++) ck_assert_float_eq(all[i], i >= 3 * C && i < 5 * C ? 1.0f : (float)i);
    free(all);
    /* The storage lives while any view does. */
    clt_tensor_release(t);
    clt_tensor_release(flat);
    clt_tensor_release(mid);
    clt_tensor_release(mid2);
    ck_assert_int_eq(clt_memory_allocated(clt_test_cpu()), before + (3 * C + 2 * C) * 4); /* + sum, ones */
    m = clt_test_read(inferred);
    for (int i = 0; i < 2 * C; i++) ck_assert_float_eq(m[i], 1.0f);
    free(m);
    clt_tensor_release(inferred);
    clt_tensor_release(sum);
    clt_tensor_release(ones);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_view_errors)
{
    int64_t shape[] = {4, 6};
    clt_tensor *t, *v = (clt_tensor *)&v;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    int64_t bad[] = {5, 5};
    ck_assert_status(clt_reshape(&v, t, 2, bad), CLT_ERR_SHAPE);
    ck_assert_ptr_null(v);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "24 elements"));
    int64_t two_infer[] = {-1, -1};
    ck_assert_status(clt_reshape(&v, t, 2, two_infer), CLT_ERR_SHAPE);
    int64_t no_fit[] = {5, -1};
    ck_assert_status(clt_reshape(&v, t, 2, no_fit), CLT_ERR_SHAPE);
    int64_t neg[] = {-4, -6};
    ck_assert_status(clt_reshape(&v, t, 2, neg), CLT_ERR_SHAPE);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 4, 6};
    ck_assert_status(clt_reshape(&v, t, 9, nine), CLT_ERR_SHAPE);
    ck_assert_status(clt_reshape(&v, t, 2, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_narrow(&v, t, 3, 2), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "[3, 5)"));
    ck_assert_status(clt_narrow(&v, t, -1, 1), CLT_ERR_SHAPE);
    ck_assert_status(clt_narrow(&v, t, 0, -1), CLT_ERR_SHAPE);
    ck_assert_status(clt_narrow(&v, t, 5, 0), CLT_ERR_SHAPE);
    ck_assert_ok(clt_narrow(&v, t, 4, 0)); /* empty, at the end */
    ck_assert_int_eq(clt_tensor_numel(v), 0);
    clt_tensor_release(v);
    clt_tensor *s;
    ck_assert_ok(clt_zeros(&s, clt_test_cpu(), CLT_FLOAT32, 0, NULL));
    ck_assert_status(clt_narrow(&v, s, 0, 1), CLT_ERR_SHAPE);
    clt_tensor_release(s);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_zero_size_tensors)
{
    int64_t shapes[][3] = {{0}, {3, 0}, {0, 5, 2}};
    int ndims[] = {1, 2, 3};
    for (int k = 0; k < 3; k++) {
        clt_tensor *z, *o, *r, *h, *sum, *c, *like;
        ck_assert_ok(clt_zeros(&z, clt_try_gpu(0), CLT_FLOAT32, ndims[k], shapes[k]));
        ck_assert_ok(clt_ones(&o, clt_try_gpu(0), CLT_FLOAT32, ndims[k], shapes[k]));
        ck_assert_ok(clt_randn(&r, clt_try_gpu(0), ndims[k], shapes[k], 1));
        ck_assert_ok(clt_from_host(&h, clt_try_gpu(0), CLT_FLOAT32, ndims[k], shapes[k], NULL));
        ck_assert_int_eq(clt_tensor_numel(z), 0);
        ck_assert_uint_eq(clt_tensor_nbytes(z), 0);
        ck_assert_ok(clt_add(&sum, z, o));
        ck_assert_ok(clt_copy_to(&c, r, clt_test_cpu()));
        ck_assert_ok(clt_zeros_like(&like, c));
        ck_assert_ok(clt_copy_(like, c));
        ck_assert_ok(clt_to_host(sum, NULL, 0));
        char buf[128];
        ck_assert_ok(clt_tensor_format(z, buf, sizeof buf));
        ck_assert_ptr_nonnull(strstr(buf, "[]"));
        int64_t flat[] = {0};
        clt_tensor *v;
        ck_assert_ok(clt_reshape(&v, sum, 1, flat));
        clt_tensor_release(v);
        clt_tensor *all[] = {z, o, r, h, sum, c, like};
        for (int i = 0; i < 7; i++) clt_tensor_release(all[i]);
    }
    ck_assert_int_eq(clt_memory_allocated(clt_try_gpu(0)), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_like_uses_source_device_and_dtype)
{
    clt_device devs[3];
    int n = 0;
    devs[n++] = clt_test_cpu();
    for (int i = 0; i < clt_num_gpus() && n < 3; i++) devs[n++] = clt_gpu(i);
    clt_device_set_default(clt_test_cpu()); /* *_like must ignore the default */
    for (int k = 0; k < n; k++) {
        int64_t shape[] = {3, 11};
        clt_tensor *src, *e, *z, *o;
        ck_assert_ok(clt_full(&src, devs[k], CLT_INT32, 2, shape, 5));
        ck_assert_ok(clt_empty_like(&e, src));
        ck_assert_ok(clt_zeros_like(&z, src));
        ck_assert_ok(clt_ones_like(&o, src));
        clt_tensor *all[] = {e, z, o};
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(clt_device_equal(clt_tensor_device(all[i]), devs[k]), 1);
            ck_assert_int_eq(clt_tensor_dtype(all[i]), CLT_INT32);
            ck_assert_int_eq(clt_tensor_dim(all[i], 0), 3);
            ck_assert_int_eq(clt_tensor_dim(all[i], 1), 11);
        }
        int32_t *zx = (int32_t *)clt_test_read(z), *ox = (int32_t *)clt_test_read(o);
        for (int i = 0; i < 33; i++) {
            ck_assert_int_eq(zx[i], 0);
            ck_assert_int_eq(ox[i], 1);
        }
        free(zx);
        free(ox);
        for (int i = 0; i < 3; i++) clt_tensor_release(all[i]);
        clt_tensor_release(src);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_refcount)
{
    int64_t shape[] = {100};
    clt_tensor *t;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_ptr_eq(clt_tensor_retain(t), t);
    clt_tensor_release(t);
    ck_assert_int_eq(clt_memory_allocated(clt_test_cpu()), 400);
    clt_tensor_release(t);
    clt_tensor_release(NULL);
    ck_assert_ptr_null(clt_tensor_retain(NULL));
    clt_test_assert_no_live_tensors();
}
END_TEST

/* want names cpu:0; where clt_test_cpu() stands for another device, its name. */
static void assert_format(const clt_tensor *t, const char *want)
{
    char buf[4096], expect[4096];
    ck_assert_ok(clt_tensor_format(t, buf, sizeof buf));
    const char *at = strstr(want, "device='cpu:0'");
    if (at)
        snprintf(expect, sizeof expect, "%.*sdevice='%s'%s", (int)(at - want), want, clt_test_cpu_name(),
                 at + strlen("device='cpu:0'"));
    else
        snprintf(expect, sizeof expect, "%s", want);
    ck_assert_str_eq(buf, expect);
}

START_TEST(test_print_format)
{
    float v[6] = {0.0769f, 0.4852f, 0.999f, 0.3158f, 0.78f, -0.9361f};
    int64_t s23[] = {2, 3}, s3[] = {3}, s222[] = {2, 2, 2};
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_FLOAT32, 2, s23, v));
    assert_format(t, "tensor([[0.0769, 0.4852, 0.9990],\n        [0.3158, 0.7800, -0.9361]], device='cpu:0')");
    clt_tensor_release(t);
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_INT32, 1, s3, -4));
    assert_format(t, "tensor([-4, -4, -4], device='cpu:0', dtype=int32)");
    clt_tensor_release(t);
    ck_assert_ok(clt_ones(&t, clt_test_cpu(), CLT_FLOAT32, 3, s222));
    assert_format(t, "tensor([[[1., 1.],\n         [1., 1.]],\n\n        [[1., 1.],\n         [1., 1.]]], "
                     "device='cpu:0')");
    clt_tensor_release(t);
    float sv = 3;
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_FLOAT32, 0, NULL, &sv));
    assert_format(t, "tensor(3., device='cpu:0')");
    clt_tensor_release(t);
    float special[3] = {NAN, INFINITY, -INFINITY};
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_FLOAT32, 1, s3, special));
    assert_format(t, "tensor([nan, inf, -inf], device='cpu:0')");
    clt_tensor_release(t);
    /* Long tensors are summarised with three values at each end. */
    int64_t big[] = {2000};
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_FLOAT32, 1, big, 2));
    assert_format(t, "tensor([2., 2., 2., ..., 2., 2., 2.], device='cpu:0')");
    /* Too small a buffer is an error, not a truncated string. */
    char small[10];
    ck_assert_status(clt_tensor_format(t, small, sizeof small), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_tensor_format(t, NULL, 10), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_tensor_format(NULL, small, sizeof small), CLT_ERR_INVALID_ARGUMENT);
    /* clt_tensor_print grows its buffer as needed. */
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    clt_tensor *wide;
    int64_t w[] = {999};
    ck_assert_ok(clt_full(&wide, clt_test_cpu(), CLT_FLOAT32, 1, w, 0.5));
    ck_assert_ok(clt_tensor_print(wide, f));
    ck_assert_int_gt(ftell(f), 999 * 8);
    ck_assert_status(clt_tensor_print(wide, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_tensor_print(NULL, f), CLT_ERR_INVALID_ARGUMENT);
    fclose(f);
    clt_tensor_release(wide);
    clt_tensor_release(t);
    if (clt_num_gpus() > 1) {
        ck_assert_ok(clt_ones(&t, clt_gpu(1), CLT_FLOAT32, 2, s23));
        assert_format(t, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='gpu:1')");
        clt_tensor_release(t);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_ones_read_back);
    tcase_add_test(tc, test_add_matches_host);
    tcase_add_test(tc, test_zeros_full_int32);
    tcase_add_test(tc, test_rand_matches_reference);
    tcase_add_test(tc, test_rand_reproducible_and_distributed);
    tcase_add_test(tc, test_from_host_to_host_item);
    tcase_add_test(tc, test_shape_queries);
    tcase_add_test(tc, test_reshape_and_narrow_share_storage);
    tcase_add_test(tc, test_view_errors);
    tcase_add_test(tc, test_zero_size_tensors);
    tcase_add_test(tc, test_like_uses_source_device_and_dtype);
    tcase_add_test(tc, test_refcount);
    tcase_add_test(tc, test_print_format);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
