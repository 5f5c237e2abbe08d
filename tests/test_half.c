/* Float16 storage (docs/half.md): host and device conversions against each
 * other and against half's precision, special values, the float16 layer ops
 * against their float32 forms, model conversion, memory, loss scaling, and
 * mixed-precision training against float32 training. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/half.h"
#include "ops/linear_f16.h"
#include "support.h"

/* Reads a float16 tensor as float32 values. */
static float *read_half(const clt_tensor *t)
{
    int64_t n = clt_tensor_numel(t);
    uint16_t *h = malloc((size_t)n * 2 + 2);
    float *f = malloc((size_t)n * 4 + 4);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(clt_tensor_dtype(t), CLT_FLOAT16);
    ck_assert_ok(clt_to_host(t, h, (size_t)n * 2));
    for (int64_t i = 0; i < n; i++) f[i] = clt_half_to_float(h[i]);
    free(h);
    return f;
}

static clt_tensor *half_from(const float *x, int64_t n)
{
    clt_tensor *f, *h;
    ck_assert_ok(clt_from_host(&f, clt_test_cpu(), CLT_FLOAT32, 1, &n, x));
    ck_assert_ok(clt_to_dtype(&h, f, CLT_FLOAT16));
    clt_tensor_release(f);
    return h;
}

START_TEST(test_host_conversion_exact_on_every_half)
{
    /* Every float16 value widens exactly and narrows back to itself. */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = clt_half_to_float((uint16_t)h);
        if (isnan(f)) {
            CLT_TEST_REQUIRE((h & 0x7c00) == 0x7c00 && (h & 0x3ff), "0x%04x, not a NaN, widens to NaN", (unsigned)h);
            CLT_TEST_REQUIRE(isnan(clt_half_to_float(clt_float_to_half(f))), "0x%04x: NaN narrows to a number",
                             (unsigned)h);
            continue;
        }
        CLT_TEST_REQUIRE(clt_float_to_half(f) == h, "0x%04x widens to %a, which narrows to 0x%04x", (unsigned)h,
                         (double)f, (unsigned)clt_float_to_half(f));
    }
    ck_assert_float_eq(clt_half_to_float(0x3c00), 1.0f);
    ck_assert_float_eq(clt_half_to_float(0x7bff), 65504.0f);
    ck_assert_float_eq(clt_half_to_float(0x0001), ldexpf(1, -24));
    ck_assert_float_eq(clt_half_to_float(0x0400), ldexpf(1, -14));
    /* Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
    ck_assert_uint_eq(clt_float_to_half(1.0f + ldexpf(1, -11)), 0x3c00);
    ck_assert_uint_eq(clt_float_to_half(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    ck_assert_uint_eq(clt_float_to_half(65519.0f), 0x7bff);
    ck_assert_uint_eq(clt_float_to_half(65520.0f), 0x7c00);
    ck_assert_uint_eq(clt_float_to_half(ldexpf(1, -25)), 0x0000);
    ck_assert_uint_eq(clt_float_to_half(ldexpf(3, -26)), 0x0001);
    ck_assert_uint_eq(clt_float_to_half(-0.0f), 0x8000);
}
END_TEST

START_TEST(test_device_round_trip_bounds_and_specials)
{
    const int64_t sizes[] = {1, 7, 67, 1031};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        float *x = malloc((size_t)n * 4);
        clt_test_fill_uniform(x, n, 11 + k, -1, 1);
        /* Magnitudes over half's normal range: 2^-14 .. 2^15. */
        for (int64_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 30) - 14);
        clt_tensor *h = half_from(x, n), *back;
        ck_assert_int_eq(clt_tensor_nbytes(h), (size_t)n * 2);
        ck_assert_ok(clt_to_dtype(&back, h, CLT_FLOAT32));
        float *y = clt_test_read(back), *hv = read_half(h);
        for (int64_t i = 0; i < n; i++) {
            /* Round to nearest: relative error at most 2^-11 for normals. */
            if (fabsf(x[i]) >= ldexpf(1, -14))
                CLT_TEST_REQUIRE(fabsf(y[i] - x[i]) <= ldexpf(1, -11) * fabsf(x[i]), "%g became %g", (double)x[i],
                                 (double)y[i]);
            else
                CLT_TEST_REQUIRE(fabsf(y[i] - x[i]) <= ldexpf(1, -25), "subnormal %g became %g", (double)x[i],
                              (double)y[i]);
            /* The device rounds as the host reference does. */
            ck_assert_msg(hv[i] == clt_half_to_float(clt_float_to_half(x[i])), "%g: device %g, host %g",
                          (double)x[i], (double)hv[i], (double)clt_half_to_float(clt_float_to_half(x[i])));
        }
        free(x);
        free(y);
        free(hv);
        clt_tensor_release(h);
        clt_tensor_release(back);
    }
    const float sp[] = {INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 1e5f, -1e6f, ldexpf(1, -24),
                        ldexpf(5, -24), ldexpf(1, -26), 1e-10f, -0.0f, 0.0f};
    int64_t n = sizeof sp / sizeof sp[0];
    clt_tensor *h = half_from(sp, n);
    float *y = read_half(h);
    ck_assert(isinf(y[0]) && y[0] > 0);
    ck_assert(isinf(y[1]) && y[1] < 0);
    ck_assert(isnan(y[2]));
    ck_assert_float_eq(y[3], 65504.0f);
    ck_assert(isinf(y[4]) && y[4] > 0); /* overflow */
    ck_assert(isinf(y[5]) && y[5] > 0);
    ck_assert(isinf(y[6]) && y[6] < 0);
    ck_assert_float_eq(y[7], ldexpf(1, -24)); /* smallest subnormal */
    ck_assert_float_eq(y[8], ldexpf(5, -24));
    ck_assert_float_eq(y[9], 0.0f); /* flushed: below half the smallest subnormal */
    ck_assert_float_eq(y[10], 0.0f);
    ck_assert(y[11] == 0.0f && signbit(y[11]));
    ck_assert(y[12] == 0.0f && !signbit(y[12]));
    free(y);
    clt_tensor_release(h);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* clt_relu, clt_relu_backward and clt_add on float16 tensors: float32
 * arithmetic on the stored values, rounded once to float16, as a C
 * reference computes it; odd sizes, NaN passing through the ReLU. */
START_TEST(test_elementwise_ops_on_half)
{
    static const int64_t sizes[] = {1, 7, 257};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        float *x = clt_test_random_floats(n, 11 + (uint64_t)n), *dy = clt_test_random_floats(n, 12 + (uint64_t)n);
        x[0] = NAN;
        for (int64_t i = 0; i < n; i++) {
            x[i] = clt_half_to_float(clt_float_to_half(x[i]));
            dy[i] = clt_half_to_float(clt_float_to_half(dy[i]));
        }
        clt_tensor *tx = half_from(x, n), *tdy = half_from(dy, n), *ty, *tdx, *tsum;
        ck_assert_ok(clt_relu(&ty, tx));
        ck_assert_ok(clt_relu_backward(&tdx, tdy, ty));
        ck_assert_ok(clt_add(&tsum, tx, tdy));
        ck_assert_int_eq(clt_tensor_dtype(ty), CLT_FLOAT16);
        float *y = read_half(ty), *dx = read_half(tdx), *sum = read_half(tsum);
        ck_assert(isnan(y[0]));
        for (int64_t i = 0; i < n; i++) {
            float want_y = x[i] < 0.0f ? 0.0f : x[i];
            float want_dx = want_y > 0.0f ? dy[i] : 0.0f, want_sum = clt_half_to_float(clt_float_to_half(x[i] + dy[i]));
            CLT_TEST_REQUIRE(i == 0 || y[i] == want_y, "%lld: y[%lld] %g, not %g", (long long)n, (long long)i,
                             (double)y[i], (double)want_y);
            CLT_TEST_REQUIRE(dx[i] == want_dx, "%lld: dx[%lld] %g, not %g", (long long)n, (long long)i, (double)dx[i],
                             (double)want_dx);
            CLT_TEST_REQUIRE(i == 0 || sum[i] == want_sum, "%lld: sum[%lld] %g, not %g", (long long)n, (long long)i,
                             (double)sum[i], (double)want_sum);
        }
        free(y);
        free(dx);
        free(sum);
        free(x);
        free(dy);
        clt_tensor_release(tx);
        clt_tensor_release(tdy);
        clt_tensor_release(ty);
        clt_tensor_release(tdx);
        clt_tensor_release(tsum);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* 7.0 in float16 and float32, around every view below. */
static const uint16_t edge_fill_h = 0x4700;
static const float edge_fill_f = 7.0f;
#define EDGE_PAD 17 /* elements after each view: more than a vector */

static const void *edge_fill(clt_dtype dt) { return dt == CLT_FLOAT16 ? (const void *)&edge_fill_h : &edge_fill_f; }

/* A view of the n values x (float16 bits or float32, as dt) at element off
 * of a longer tensor whose other elements are the edge fill; *base is the
 * whole tensor. */
static clt_tensor *filled_view(clt_dtype dt, const void *x, int64_t n, int64_t off, clt_tensor **base)
{
    size_t es = clt_dtype_size(dt);
    int64_t total = off + n + EDGE_PAD;
    unsigned char *b = malloc((size_t)total * es);
    ck_assert_ptr_nonnull(b);
    for (int64_t i = 0; i < total; i++)
        memcpy(b + i * es, i >= off && i < off + n ? (const unsigned char *)x + (i - off) * es : edge_fill(dt), es);
    ck_assert_ok(clt_from_host(base, clt_test_cpu(), dt, 1, &total, b));
    free(b);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, off, n));
    return v;
}

/* The n values at element off of base (float16 bits or float32), whose
 * other elements must still be the edge fill. */
static void *read_view(const clt_tensor *base, int64_t n, int64_t off)
{
    clt_dtype dt = clt_tensor_dtype(base);
    size_t es = clt_dtype_size(dt);
    int64_t total = clt_tensor_numel(base);
    unsigned char *b = malloc((size_t)total * es);
    ck_assert_ptr_nonnull(b);
    ck_assert_ok(clt_to_host(base, b, (size_t)total * es));
    for (int64_t i = 0; i < total; i++) {
        if (i >= off && i < off + n) continue;
        uint32_t bits = 0;
        memcpy(&bits, b + i * es, es);
        ck_assert_msg(memcmp(b + i * es, edge_fill(dt), es) == 0, "element %lld around a view of %lld became 0x%0*x",
                      (long long)i, (long long)n, (int)(2 * es), bits);
    }
    memmove(b, b + off * es, (size_t)n * es);
    return b;
}

/* got (float16 bits) is want rounded to float16, any NaN for NaN. */
static void assert_half_bits(const uint16_t *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            CLT_TEST_REQUIRE(isnan(clt_half_to_float(got[i])), "%s of %lld: element %lld is 0x%04x, not NaN", what,
                             (long long)n, (long long)i, got[i]);
            continue;
        }
        uint16_t w = clt_float_to_half(want[i]);
        CLT_TEST_REQUIRE(got[i] == w, "%s of %lld: element %lld is 0x%04x, not 0x%04x", what, (long long)n,
                         (long long)i, got[i], w);
    }
}

/* got is want to the bit, any NaN for NaN. */
static void assert_float_bits(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t g, w;
        memcpy(&g, &got[i], 4);
        memcpy(&w, &want[i], 4);
        CLT_TEST_REQUIRE(g == w || (isnan(got[i]) && isnan(want[i])), "%s of %lld: element %lld is %a, not %a", what,
                         (long long)n, (long long)i, (double)got[i], (double)want[i]);
    }
}

static uint16_t *read_bits(const clt_tensor *t)
{
    size_t n = (size_t)clt_tensor_numel(t);
    uint16_t *h = malloc(n * sizeof *h);
    ck_assert_ptr_nonnull(h);
    ck_assert_ok(clt_to_host(t, h, n * sizeof *h));
    return h;
}

/* A loss scaler on the CPU device (src/ops/half.h's words): scale, 1 / scale, 0 clean steps. */
static clt_tensor *scaler_of(float scale)
{
    int32_t w[CLT__SCALER_WORDS] = {0};
    float inv = 1.0f / scale;
    memcpy(&w[CLT__SCALER_SCALE], &scale, 4);
    memcpy(&w[CLT__SCALER_INV], &inv, 4);
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_cpu(), CLT_INT32, 1, (int64_t[]){CLT__SCALER_WORDS}, w));
    return t;
}

/* unscale_f16 of h (n float16 values at element off) by 0.5: the flag it leaves. */
static int unscale_flag(const uint16_t *h, int64_t n, int64_t off)
{
    clt_tensor *sbase, *dbase, *flag;
    clt_tensor *sv = filled_view(CLT_FLOAT16, h, n, off, &sbase);
    float *zero = calloc((size_t)n, sizeof *zero);
    ck_assert_ptr_nonnull(zero);
    clt_tensor *dv = filled_view(CLT_FLOAT32, zero, n, off + 1, &dbase);
    ck_assert_ok(clt_zeros(&flag, clt_test_cpu(), CLT_INT32, 1, (int64_t[]){1}));
    clt_tensor *scaler = scaler_of(2.0f);
    ck_assert_ok(clt__unscale_f16(dv, sv, scaler, flag, 0));
    clt_tensor_release(scaler);
    int32_t f;
    ck_assert_ok(clt_to_host(flag, &f, sizeof f));
    free(read_view(dbase, n, off + 1));
    free(zero);
    clt_tensor *ts[] = {sv, sbase, dv, dbase, flag};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    return f;
}

/* cl/half.cl's elementwise kernels take 16 elements a work-item and the rest
 * one at a time: sizes around that width, views at odd offsets whose
 * neighbours stay untouched, every result to the bit against a C reference
 * (NaN, -0, subnormals, overflow among the values), and the overflow flag
 * raised from the vectors and from the tail. */
START_TEST(test_half_kernels_at_vector_edges)
{
    static const int64_t sizes[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 97, 1031};
    static const int64_t offs[] = {0, 1, 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
            int64_t n = sizes[k], off = offs[o];
            uint64_t seed = 100 + 7 * k + o;
            float *a = clt_test_random_floats(n, seed), *b = clt_test_random_floats(n, seed + 50),
                  *f = clt_test_random_floats(n, seed + 99), *want = malloc((size_t)n * sizeof *want),
                  *relu = malloc((size_t)n * sizeof *relu);
            uint16_t *ah = malloc((size_t)n * sizeof *ah), *bh = malloc((size_t)n * sizeof *bh);
            ck_assert(want && relu && ah && bh);
            for (int64_t i = 0; i < n; i++) {
                /* Subnormal to past float16's range once scaled or summed. */
                ah[i] = clt_float_to_half(ldexpf(a[i], (int)(i % 37) - 22));
                bh[i] = clt_float_to_half(ldexpf(b[i], (int)(i % 17)));
                f[i] = ldexpf(f[i], (int)(i % 41) - 30);
            }
            ah[n / 2] = 0x8000; /* -0 */
            if (n > 2) ah[n - 2] = 0x7e00; /* NaN */
            for (int64_t i = 0; i < n; i++) {
                a[i] = clt_half_to_float(ah[i]);
                b[i] = clt_half_to_float(bh[i]);
            }
            clt_tensor *abase, *bbase, *fbase, *nbase, *a32, *y, *dx, *sum;
            clt_tensor *av = filled_view(CLT_FLOAT16, ah, n, off, &abase);
            clt_tensor *bv = filled_view(CLT_FLOAT16, bh, n, off + 1, &bbase);
            clt_tensor *fv = filled_view(CLT_FLOAT32, f, n, off + 2, &fbase);
            clt_tensor *nv = filled_view(CLT_FLOAT16, bh, n, off, &nbase);

            ck_assert_ok(clt_to_dtype(&a32, av, CLT_FLOAT32));
            float *got32 = clt_test_read(a32);
            assert_float_bits(got32, a, n, "f16_to_f32");
            free(got32);

            ck_assert_ok(clt_relu(&y, av));
            ck_assert_ok(clt_relu_backward(&dx, bv, y));
            ck_assert_ok(clt_add(&sum, av, bv));
            for (int64_t i = 0; i < n; i++) relu[i] = a[i] < 0.0f ? 0.0f : a[i];
            uint16_t *got = read_bits(y);
            assert_half_bits(got, relu, n, "relu_f16");
            free(got);
            for (int64_t i = 0; i < n; i++) want[i] = relu[i] > 0.0f ? b[i] : 0.0f;
            got = read_bits(dx);
            assert_half_bits(got, want, n, "relu_backward_f16");
            free(got);
            for (int64_t i = 0; i < n; i++) want[i] = a[i] + b[i];
            got = read_bits(sum);
            assert_half_bits(got, want, n, "add_f16");
            free(got);

            ck_assert_ok(clt__convert_to_half(nv, fv, 1024.0f));
            for (int64_t i = 0; i < n; i++) want[i] = f[i] * 1024.0f;
            got = read_view(nbase, n, off);
            assert_half_bits(got, want, n, "f32_to_f16");
            free(got);
            /* The scale read on the device, times the host's factor. */
            clt_tensor *scaler = scaler_of(256.0f);
            ck_assert_ok(clt__convert_to_half_by(nv, fv, scaler, 0.25f));
            for (int64_t i = 0; i < n; i++) want[i] = f[i] * (0.25f * 256.0f);
            got = read_view(nbase, n, off);
            assert_half_bits(got, want, n, "f32_to_f16_by");
            free(got);
            clt_tensor_release(scaler);

            ck_assert_ok(clt__accumulate_f16(av, fv));
            for (int64_t i = 0; i < n; i++) want[i] = a[i] + f[i];
            got = read_view(abase, n, off);
            assert_half_bits(got, want, n, "accumulate_f16");
            free(got);

            /* unscale_f16: the values, and the flag left alone while all are finite. */
            for (int64_t i = 0; i < n; i++)
                if (isnan(a[i])) ah[i] = 0x3c00;
            clt_tensor *sbase, *dbase, *flag;
            clt_tensor *sv = filled_view(CLT_FLOAT16, ah, n, off, &sbase);
            clt_tensor *dv = filled_view(CLT_FLOAT32, f, n, off + 1, &dbase);
            ck_assert_ok(clt_zeros(&flag, clt_test_cpu(), CLT_INT32, 1, (int64_t[]){1}));
            clt_tensor *half_scaler = scaler_of(2.0f);
            ck_assert_ok(clt__unscale_f16(dv, sv, half_scaler, flag, 0));
            for (int64_t i = 0; i < n; i++) want[i] = clt_half_to_float(ah[i]) * 0.5f;
            float *gotf = read_view(dbase, n, off + 1);
            assert_float_bits(gotf, want, n, "unscale_f16");
            free(gotf);
            int32_t fl;
            ck_assert_ok(clt_to_host(flag, &fl, sizeof fl));
            ck_assert_int_eq(fl, 0);
            /* Zeroing the source as it reads it (the gradients' zeroing,
             * folded), its neighbours untouched; the values as before. */
            ck_assert_ok(clt__unscale_f16(dv, sv, half_scaler, flag, 1));
            gotf = read_view(dbase, n, off + 1);
            assert_float_bits(gotf, want, n, "unscale_f16 (zeroing)");
            free(gotf);
            uint16_t *zeroed = read_view(sbase, n, off);
            for (int64_t i = 0; i < n; i++)
                CLT_TEST_REQUIRE(zeroed[i] == 0, "unscale_f16 of %lld left element %lld 0x%04x", (long long)n,
                                 (long long)i, zeroed[i]);
            free(zeroed);
            clt_tensor_release(half_scaler);
            clt_tensor_release(sv);
            clt_tensor_release(sbase);
            sv = filled_view(CLT_FLOAT16, ah, n, off, &sbase);
            /* An inf first (in a vector from 16 elements on) or last (the tail
             * unless n is a multiple of 16), or a NaN, raises it. */
            uint16_t keep = ah[0];
            ah[0] = 0xfc00;
            ck_assert_int_eq(unscale_flag(ah, n, off), 1);
            ah[0] = keep;
            keep = ah[n - 1];
            ah[n - 1] = 0x7c00;
            ck_assert_int_eq(unscale_flag(ah, n, off), 1);
            ah[n - 1] = 0x7e00;
            ck_assert_int_eq(unscale_flag(ah, n, off), 1);
            ah[n - 1] = keep;
            ck_assert_int_eq(unscale_flag(ah, n, off), 0);

            clt_tensor *ts[] = {av, abase, bv, bbase, fv, fbase, nv, nbase, a32,
                                y, dx, sum, sv, sbase, dv, dbase, flag};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
            free(a);
            free(b);
            free(f);
            free(want);
            free(relu);
            free(ah);
            free(bh);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_creation_fill_print_and_errors)
{
    int64_t shape[] = {2, 3};
    clt_tensor *t, *o, *i32, *x;
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_FLOAT16, 2, shape, 0.1));
    ck_assert_str_eq(clt_dtype_name(CLT_FLOAT16), "float16");
    ck_assert_int_eq(clt_dtype_size(CLT_FLOAT16), 2);
    float *v = read_half(t);
    for (int k = 0; k < 6; k++) ck_assert_float_eq(v[k], clt_half_to_float(clt_float_to_half(0.1f)));
    free(v);
    ck_assert_ok(clt_ones_like(&o, t));
    char buf[256];
    ck_assert_ok(clt_tensor_format(o, buf, sizeof buf));
    char want[128];
    snprintf(want, sizeof want, "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='%s', dtype=float16)",
             clt_test_cpu_name());
    ck_assert_str_eq(buf, want);
    ck_assert_ok(clt_fill_(o, -2.5));
    double item;
    clt_tensor *one;
    ck_assert_ok(clt_narrow(&one, o, 1, 1));
    ck_assert_ok(clt_reshape(&x, one, 1, (int64_t[]){3}));
    clt_tensor_release(one);
    ck_assert_ok(clt_narrow(&one, x, 2, 1));
    ck_assert_ok(clt_item(one, &item));
    ck_assert_double_eq(item, -2.5);
    clt_tensor_release(one);
    clt_tensor_release(x);
    /* Converting to its own dtype is the same tensor. */
    ck_assert_ok(clt_to_dtype(&x, t, CLT_FLOAT16));
    ck_assert_ptr_eq(x, t);
    clt_tensor_release(x);
    ck_assert_ok(clt_zeros(&i32, clt_test_cpu(), CLT_INT32, 2, shape));
    ck_assert_status(clt_to_dtype(&x, i32, CLT_FLOAT16), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(x);
    ck_assert_status(clt_to_dtype(&x, t, CLT_INT32), CLT_ERR_UNSUPPORTED);
    /* Elementwise ops take float16 pairs, not mixed ones or int32. */
    clt_tensor *f32;
    ck_assert_ok(clt_zeros(&f32, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    ck_assert_status(clt_add(&x, t, f32), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_add: a and b must both be float32 or both float16"));
    ck_assert_status(clt_relu_backward(&x, f32, t), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_relu(&x, i32), CLT_ERR_UNSUPPORTED);
    clt_tensor_release(f32);
    /* Copies between devices move the two-byte elements unchanged. */
    if (clt_num_gpus() > 0) {
        clt_tensor *g, *c;
        ck_assert_ok(clt_to(&g, o, clt_gpu(0)));
        ck_assert_ok(clt_to(&c, g, clt_test_cpu()));
        float *a = read_half(c), *b = read_half(o);
        ck_assert_mem_eq(a, b, 6 * sizeof(float));
        free(a);
        free(b);
        clt_tensor_release(g);
        clt_tensor_release(c);
    }
    clt_tensor_release(i32);
    clt_tensor_release(o);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_safetensors_writes_f16)
{
    float v[] = {1.0f, -0.333f, 65504.0f, ldexpf(3, -24), INFINITY};
    int64_t n = 5;
    clt_tensor *h = half_from(v, n), *back;
    char path[] = "/tmp/clt-test-half-XXXXXX";
    close(mkstemp(path));
    const char *names[] = {"h"};
    ck_assert_ok(clt_safetensors_save(path, 1, names, &h, 0, NULL, NULL));
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    clt_safetensors_info info;
    ck_assert_ok(clt_safetensors_tensor_info(f, 0, &info));
    ck_assert_str_eq(info.dtype, "F16");
    ck_assert_ok(clt_safetensors_read(f, "h", clt_test_cpu(), &back));
    float *got = clt_test_read(back), *want = read_half(h);
    ck_assert_mem_eq(got, want, sizeof v);
    free(got);
    /* Read into float16: the F16 entry exactly, an F32 one rounded. */
    clt_tensor *into, *wide;
    ck_assert_ok(clt_empty_like(&into, h));
    ck_assert_ok(clt_safetensors_read_into(f, "h", into));
    got = read_half(into);
    ck_assert_mem_eq(got, want, sizeof v);
    free(got);
    clt_safetensors_free(f);
    ck_assert_ok(clt_from_host(&wide, clt_test_cpu(), CLT_FLOAT32, 1, &n, v));
    ck_assert_ok(clt_safetensors_save(path, 1, names, &wide, 0, NULL, NULL));
    ck_assert_ok(clt_safetensors_open(&f, path));
    ck_assert_ok(clt_safetensors_read_into(f, "h", into));
    got = read_half(into);
    ck_assert_mem_eq(got, want, sizeof v);
    free(got);
    free(want);
    clt_tensor_release(into);
    clt_tensor_release(wide);
    clt_safetensors_free(f);
    remove(path);
    clt_tensor_release(back);
    clt_tensor_release(h);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Largest |a-b| / (atol + |b|) style check: |a-b| <= atol + rtol |b|. */
static void assert_close(const float *a, const float *b, int64_t n, double atol, double rtol, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        CLT_TEST_REQUIRE(fabs((double)a[i] - b[i]) <= atol + rtol * fabs(b[i]), "%s[%lld]: %g vs %g", what,
                         (long long)i, (double)a[i], (double)b[i]);
}

static clt_model *resmlp(int64_t h, int blocks, uint64_t seed)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, h, blocks, 10, seed));
    return m;
}

/* A float16 model's checkpoint keeps the loss scaler's whole state and
 * the optimizer's master weights; both come back on load. */
/* The end of a checkpoint test: its file, both models and optimizers. */
static void free_pair(const char *path, clt_model *m, clt_model *back, clt_optimizer *opt, clt_optimizer *opt_back)
{
    remove(path);
    clt_optimizer_free(opt);
    clt_optimizer_free(opt_back);
    clt_model_free(m);
    clt_model_free(back);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_checkpoint_keeps_scaler_and_master)
{
    clt_model *m, *back;
    clt_optimizer *opt, *opt_back;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 12, 8, 1, 3, 2));
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_model_set_loss_scale_state(m, 1024.0f, 1, 1999));
    ck_assert_status(clt_model_set_loss_scale_state(m, 1024.0f, 1, 2000), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_loss_scale_state(NULL, NULL, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.1f, 0.0f, 0.0f));
    ck_assert_int_eq(clt_optimizer_num_states(opt), 1);
    const char *name;
    clt_tensor *master;
    ck_assert_ok(clt_optimizer_init_state(opt));
    ck_assert_ok(clt_optimizer_state(opt, 0, &name, &master));
    ck_assert_str_eq(name, "master");
    ck_assert_int_eq(clt_tensor_dtype(master), CLT_FLOAT32);
    /* Master weights a little off the float16 parameters, as after steps. */
    ck_assert_ok(clt_scale_(master, 1.0001f));
    char path[] = "/tmp/clt-test-half-XXXXXX";
    close(mkstemp(path));
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = 8, .blocks = 1};
    ck_assert_ok(clt_checkpoint_save(path, m, opt, &info));

    ck_assert_ok(clt_model_create_resmlp(&back, clt_test_cpu(), 12, 8, 1, 3, 9));
    ck_assert_ok(clt_model_to_dtype(back, CLT_FLOAT16));
    ck_assert_ok(clt_optimizer_create_sgd(&opt_back, back, 0.1f, 0.0f, 0.0f));
    ck_assert_ok(clt_checkpoint_load(path, back, opt_back, NULL));
    float scale;
    int dynamic;
    int64_t clean;
    ck_assert_ok(clt_model_loss_scale_state(back, &scale, &dynamic, &clean));
    ck_assert_float_eq(scale, 1024.0f);
    ck_assert_int_eq(dynamic, 1);
    ck_assert_int_eq(clean, 1999);
    clt_tensor *master_back;
    ck_assert_ok(clt_optimizer_state(opt_back, 0, NULL, &master_back));
    float *want = clt_test_read(master), *got = clt_test_read(master_back);
    ck_assert_mem_eq(got, want, (size_t)clt_tensor_numel(master) * sizeof(float));
    free(want);
    free(got);
    free_pair(path, m, back, opt, opt_back);
}
END_TEST

/* One backward of a fixed batch and an optimizer step. */
static void half_step(clt_model *m, clt_optimizer *opt)
{
    float xv[4 * 12], dyv[4 * 3];
    clt_test_fill_uniform(xv, 48, 1, 0, 1);
    clt_test_fill_uniform(dyv, 12, 2, -1, 1);
    clt_tensor *x, *dy, *y;
    ck_assert_ok(clt_from_host(&x, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 12}, xv));
    ck_assert_ok(clt_from_host(&dy, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 3}, dyv));
    ck_assert_ok(clt_model_zero_grad(m));
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    ck_assert_ok(clt_optimizer_step(opt));
    clt_tensor_release(x);
    clt_tensor_release(dy);
    clt_tensor_release(y);
}

/* The scaler and the step count live on the device after steps: a
 * checkpoint saves what the device holds and a load puts it back there,
 * into a model and optimizer that have stepped (their device state
 * replaced), so both go on alike. */
START_TEST(test_checkpoint_after_device_steps)
{
    clt_model *m, *back;
    clt_optimizer *opt, *opt_back;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 12, 8, 1, 3, 2));
    ck_assert_ok(clt_model_create_resmlp(&back, clt_test_cpu(), 12, 8, 1, 3, 9));
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_model_to_dtype(back, CLT_FLOAT16));
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    ck_assert_ok(clt_optimizer_create_adam(&opt_back, back, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    /* m: one skipped step (2^40 overflows), then two clean ones at 512. */
    ck_assert_ok(clt_model_set_loss_scale(m, 1099511627776.0f, 1));
    half_step(m, opt);
    ck_assert_ok(clt_model_set_loss_scale_state(m, 1024.0f, 1, 3));
    half_step(m, opt);
    half_step(m, opt);
    half_step(back, opt_back);
    char path[] = "/tmp/clt-test-half-XXXXXX";
    close(mkstemp(path));
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = 8, .blocks = 1};
    ck_assert_ok(clt_checkpoint_save(path, m, opt, &info));
    ck_assert_ok(clt_checkpoint_load(path, back, opt_back, NULL));
    for (int k = 0; k < 2; k++) {
        float scale[2];
        int dynamic[2];
        int64_t clean[2];
        ck_assert_ok(clt_model_loss_scale_state(m, &scale[0], &dynamic[0], &clean[0]));
        ck_assert_ok(clt_model_loss_scale_state(back, &scale[1], &dynamic[1], &clean[1]));
        ck_assert_float_eq(scale[0], 1024.0f);
        ck_assert_float_eq(scale[1], 1024.0f);
        ck_assert_int_eq(clean[0], 5 + k);
        ck_assert_int_eq(clean[1], 5 + k);
        ck_assert_int_eq(clt_optimizer_steps(opt), 2 + k);
        ck_assert_int_eq(clt_optimizer_steps(opt_back), 2 + k);
        float *a = read_half(clt_model_parameters(m)), *b = read_half(clt_model_parameters(back));
        ck_assert_mem_eq(a, b, (size_t)clt_model_num_parameter_elements(m) * sizeof(float));
        free(a);
        free(b);
        half_step(m, opt);
        half_step(back, opt_back);
    }
    /* Set right after steps (the device ahead of the host): what is set wins. */
    ck_assert_ok(clt_optimizer_set_steps(opt_back, 7));
    ck_assert_ok(clt_model_set_loss_scale_state(back, 8.0f, 1, 5));
    ck_assert_int_eq(clt_optimizer_steps(opt_back), 7);
    float scale;
    int64_t clean;
    ck_assert_ok(clt_model_loss_scale_state(back, &scale, NULL, &clean));
    ck_assert_float_eq(scale, 8.0f);
    ck_assert_int_eq(clean, 5);
    half_step(back, opt_back);
    ck_assert_int_eq(clt_optimizer_steps(opt_back), 8);
    ck_assert_ok(clt_model_loss_scale_state(back, &scale, NULL, &clean));
    ck_assert_int_eq(clean, 6);
    free_pair(path, m, back, opt, opt_back);
}
END_TEST

START_TEST(test_half_model_matches_float_model)
{
    /* A half model and a float32 model holding the same (half-rounded)
     * weights agree on forward, dx and gradients to half's precision; the
     * awkward width 37 and batch 5 stress the product shapes. */
    clt_model *m32 = resmlp(37, 2, 3), *m16 = resmlp(37, 2, 3);
    ck_assert_ok(clt_model_to_dtype(m16, CLT_FLOAT16));
    ck_assert_int_eq(clt_model_dtype(m16), CLT_FLOAT16);
    ck_assert_int_eq(clt_model_dtype(m32), CLT_FLOAT32);
    int64_t n = clt_model_num_parameter_elements(m32);
    float *p32 = clt_test_read(clt_model_parameters(m32)), *p16 = read_half(clt_model_parameters(m16));
    for (int64_t i = 0; i < n; i++) {
        CLT_TEST_REQUIRE(p16[i] == clt_half_to_float(clt_float_to_half(p32[i])), "parameter %lld: %g, float32 %g",
                         (long long)i, (double)p16[i], (double)p32[i]);
        p32[i] = p16[i];
    }
    clt_tensor *rounded;
    ck_assert_ok(clt_from_host(&rounded, clt_test_cpu(), CLT_FLOAT32, 1, &n, p32));
    ck_assert_ok(clt_copy_(clt_model_parameters(m32), rounded));
    clt_tensor_release(rounded);
    free(p32);
    free(p16);

    int64_t B = 5, xs[] = {B, 784};
    float *xv = malloc(B * 784 * 4), *dyv = malloc(B * 10 * 4);
    clt_test_fill_uniform(xv, B * 784, 5, 0, 1);
    clt_test_fill_uniform(dyv, B * 10, 6, -0.1f, 0.1f);
    for (int64_t i = 0; i < B * 784; i++) xv[i] = clt_half_to_float(clt_float_to_half(xv[i]));
    clt_tensor *x, *dy, *y32, *y16, *dx32, *dx16;
    ck_assert_ok(clt_from_host(&x, clt_test_cpu(), CLT_FLOAT32, 2, xs, xv));
    ck_assert_ok(clt_from_host(&dy, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){B, 10}, dyv));
    ck_assert_ok(clt_model_set_loss_scale(m16, 1024.0f, 0));
    ck_assert_ok(clt_model_forward(m32, x, &y32));
    ck_assert_ok(clt_model_forward(m16, x, &y16));
    ck_assert_int_eq(clt_tensor_dtype(y16), CLT_FLOAT32);
    float *a = clt_test_read(y16), *b = clt_test_read(y32);
    assert_close(a, b, B * 10, 2e-3, 1e-2, "logits");
    free(a);
    free(b);
    ck_assert_ok(clt_model_backward(m32, dy, &dx32));
    ck_assert_ok(clt_model_backward(m16, dy, &dx16));
    ck_assert_int_eq(clt_tensor_dtype(dx16), CLT_FLOAT32);
    a = clt_test_read(dx16);
    b = clt_test_read(dx32);
    assert_close(a, b, B * 784, 1e-4, 2e-2, "dx");
    free(a);
    free(b);
    /* float16 gradients hold loss_scale times the true ones. */
    ck_assert_int_eq(clt_tensor_dtype(clt_model_gradients(m16)), CLT_FLOAT16);
    a = read_half(clt_model_gradients(m16));
    b = clt_test_read(clt_model_gradients(m32));
    for (int64_t i = 0; i < n; i++) a[i] /= 1024.0f;
    assert_close(a, b, n, 1e-4, 2e-2, "gradients");
    free(a);
    free(b);
    /* zero_grad fills float16 gradients. */
    ck_assert_ok(clt_model_zero_grad(m16));
    a = read_half(clt_model_gradients(m16));
    for (int64_t i = 0; i < n; i++) CLT_TEST_REQUIRE(a[i] == 0.0f, "gradient %lld: %g", (long long)i, (double)a[i]);
    free(a);
    free(xv);
    free(dyv);
    clt_tensor_release(x);
    clt_tensor_release(dy);
    clt_tensor_release(y32);
    clt_tensor_release(y16);
    clt_tensor_release(dx32);
    clt_tensor_release(dx16);
    clt_model_free(m32);
    clt_model_free(m16);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_half_checkpointing_gradients_identical)
{
    /* Recomputation runs the same float16 kernels: bit for bit. */
    float *g[2];
    int64_t xs[] = {3, 784};
    clt_tensor *x, *dy, *y;
    ck_assert_ok(clt_rand(&x, clt_test_cpu(), 2, xs, 9));
    ck_assert_ok(clt_randn(&dy, clt_test_cpu(), 2, (int64_t[]){3, 10}, 10));
    for (int k = 0; k < 2; k++) {
        clt_model *m = resmlp(24, 3, 5);
        ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
        ck_assert_ok(clt_model_set_recompute(m, k ? 1 : 0));
        ck_assert_ok(clt_model_forward(m, x, &y));
        clt_tensor_release(y);
        ck_assert_ok(clt_model_backward(m, dy, NULL));
        g[k] = read_half(clt_model_gradients(m));
        if (k) ck_assert_mem_eq(g[0], g[1], (size_t)clt_model_num_parameter_elements(m) * sizeof(float));
        clt_model_free(m);
    }
    free(g[0]);
    free(g[1]);
    clt_tensor_release(x);
    clt_tensor_release(dy);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_half_model_memory_is_half)
{
    clt_device cpu = clt_test_cpu();
    int64_t w[2], act[2];
    for (int half = 0; half < 2; half++) {
        clt_model *m = resmlp(256, 2, 1);
        if (half) ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
        w[half] = clt_memory_allocated_category(cpu, CLT_MEM_WEIGHTS);
        clt_tensor *x, *y;
        int64_t xs[] = {64, 784};
        ck_assert_ok(clt_rand(&x, cpu, 2, xs, 1));
        int64_t before = clt_memory_allocated_category(cpu, CLT_MEM_ACTIVATIONS);
        ck_assert_ok(clt_model_forward(m, x, &y));
        act[half] = clt_memory_allocated_category(cpu, CLT_MEM_ACTIVATIONS) - before;
        clt_tensor_release(y);
        clt_tensor_release(x);
        clt_model_free(m);
    }
    /* The float32 model's weights are 4N bytes (plus allocator rounding). */
    ck_assert_int_ge(w[0], 4 * (784 * 256 + 256 + 4 * (256 * 256 + 256) + 2570));
    double rw = (double)w[1] / (double)w[0];
    ck_assert_msg(rw > 0.45 && rw < 0.55, "weights: float16 %lld bytes, float32 %lld", (long long)w[1],
                  (long long)w[0]);
    /* The float32 model keeps the caller's input, which is not its
     * activation; the float16 one keeps its converted input (64 x 784
     * halves) as one. The rest is half the bytes. */
    double ra = (double)(act[1] - 64 * 784 * 2) / (double)act[0];
    ck_assert_msg(ra > 0.45 && ra < 0.55, "activations: float16 %lld bytes, float32 %lld", (long long)act[1],
                  (long long)act[0]);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_loss_scale_keeps_small_gradients)
{
    /* Gradients of order 1e-9 flush to zero in float16 without scaling and
     * survive with it, matching float32 after unscaling. */
    clt_model *m32, *m16;
    int64_t hid[] = {16};
    ck_assert_ok(clt_model_create_mlp(&m32, clt_test_cpu(), 8, 1, hid, 3, 4));
    ck_assert_ok(clt_model_create_mlp(&m16, clt_test_cpu(), 8, 1, hid, 3, 4));
    ck_assert_ok(clt_model_to_dtype(m16, CLT_FLOAT16));
    ck_assert_ok(clt_model_to_dtype(m32, CLT_FLOAT16));
    ck_assert_ok(clt_model_to_dtype(m32, CLT_FLOAT32)); /* the same rounded weights */
    float xv[4 * 8], dyv[4 * 3];
    clt_test_fill_uniform(xv, 32, 1, 0, 1);
    for (int i = 0; i < 12; i++) dyv[i] = (i % 2 ? 1e-9f : -2e-9f);
    clt_tensor *x, *dy, *y;
    ck_assert_ok(clt_from_host(&x, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 8}, xv));
    ck_assert_ok(clt_from_host(&dy, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 3}, dyv));
    int64_t n = clt_model_num_parameter_elements(m16);
    ck_assert_ok(clt_model_forward(m32, x, &y));
    clt_tensor_release(y);
    ck_assert_ok(clt_model_backward(m32, dy, NULL));
    float *ref = clt_test_read(clt_model_gradients(m32));
    const float scales[] = {1.0f, 1048576.0f};
    for (int k = 0; k < 2; k++) {
        ck_assert_ok(clt_model_set_loss_scale(m16, scales[k], 0));
        ck_assert_ok(clt_model_zero_grad(m16));
        ck_assert_ok(clt_model_forward(m16, x, &y));
        clt_tensor_release(y);
        ck_assert_ok(clt_model_backward(m16, dy, NULL));
        float *g = read_half(clt_model_gradients(m16));
        int nonzero = 0;
        for (int64_t i = 0; i < n; i++) {
            nonzero += g[i] != 0;
            g[i] /= scales[k];
        }
        if (k == 0) ck_assert_int_eq(nonzero, 0);
        else assert_close(g, ref, n, 1e-12, 2e-2, "unscaled gradients");
        free(g);
    }
    free(ref);
    ck_assert_status(clt_model_set_loss_scale(m16, 0.0f, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_set_loss_scale(m16, INFINITY, 1), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(x);
    clt_tensor_release(dy);
    clt_model_free(m32);
    clt_model_free(m16);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_overflow_skips_step_and_halves_scale)
{
    clt_model *m;
    int64_t hid[] = {16};
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 8, 1, hid, 3, 4));
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.1f, 0.9f, 0.0f));
    float xv[4 * 8], dyv[4 * 3];
    clt_test_fill_uniform(xv, 32, 1, 0, 1);
    clt_test_fill_uniform(dyv, 12, 2, -1, 1);
    clt_tensor *x, *dy, *y;
    ck_assert_ok(clt_from_host(&x, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 8}, xv));
    ck_assert_ok(clt_from_host(&dy, clt_test_cpu(), CLT_FLOAT32, 2, (int64_t[]){4, 3}, dyv));
    int64_t n = clt_model_num_parameter_elements(m);
    float *before = read_half(clt_model_parameters(m));
    /* dy * 2^20 overflows float16: the step is skipped and the scale halves. */
    ck_assert_ok(clt_model_set_loss_scale(m, 1048576.0f, 1));
    ck_assert_ok(clt_model_forward(m, x, &y));
    clt_tensor_release(y);
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    float *grads = read_half(clt_model_gradients(m));
    /* The device decides: the step waits for nothing; asking for its
     * outcome reads it back. */
    ck_assert_ok(clt_synchronize(clt_test_cpu()));
    uint64_t syncs = clt_sync_count(clt_test_cpu());
    ck_assert_ok(clt_optimizer_step(opt));
    ck_assert_uint_eq(clt_sync_count(clt_test_cpu()), syncs);
    ck_assert_int_eq(clt_optimizer_steps(opt), 0);
    ck_assert_float_eq(clt_model_loss_scale(m), 524288.0f);
    ck_assert_uint_gt(clt_sync_count(clt_test_cpu()), syncs);
    /* The public step leaves the gradients as they were. */
    float *grads_after = read_half(clt_model_gradients(m));
    ck_assert_mem_eq(grads, grads_after, (size_t)n * 4);
    free(grads);
    free(grads_after);
    /* The momentum buffer the skipped step made is still zero. */
    clt_tensor *state;
    ck_assert_ok(clt_optimizer_state(opt, 0, NULL, &state));
    float *mom = clt_test_read(state);
    for (int64_t i = 0; i < n; i++) CLT_TEST_REQUIRE(mom[i] == 0.0f, "momentum %lld: %g", (long long)i, (double)mom[i]);
    free(mom);
    float *after = read_half(clt_model_parameters(m));
    ck_assert_mem_eq(before, after, (size_t)n * 4);
    free(after);
    /* A sane scale steps: parameters move, the state is float32. */
    ck_assert_ok(clt_model_set_loss_scale(m, 256.0f, 1));
    ck_assert_ok(clt_model_zero_grad(m));
    ck_assert_ok(clt_model_forward(m, x, &y));
    clt_tensor_release(y);
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    double norm;
    ck_assert_ok(clt_model_clip_grad_norm(m, 1e6, &norm));
    ck_assert(norm > 0 && norm < 100);
    ck_assert_ok(clt_optimizer_step(opt));
    ck_assert_int_eq(clt_optimizer_steps(opt), 1);
    ck_assert_float_eq(clt_model_loss_scale(m), 256.0f);
    ck_assert_ok(clt_optimizer_state(opt, 0, NULL, &state));
    ck_assert_int_eq(clt_tensor_dtype(state), CLT_FLOAT32);
    after = read_half(clt_model_parameters(m));
    int moved = 0;
    for (int64_t i = 0; i < n; i++) moved += after[i] != before[i];
    ck_assert_int_gt(moved, n / 2);
    free(after);
    free(before);
    clt_tensor_release(x);
    clt_tensor_release(dy);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Classes told apart by a band whose contrast over the noise varies from
 * none to strong, so that accuracy lands short of 100% and precision could
 * show on the faint ones. */
static clt_dataset make_dataset(int64_t n, uint64_t seed)
{
    clt_dataset ds = {0};
    ds.n = n;
    ds.rows = ds.cols = 28;
    ds.num_classes = 10;
    ds.images = malloc((size_t)n * 784);
    ds.labels = malloc((size_t)n);
    ck_assert_ptr_nonnull(ds.images);
    ck_assert_ptr_nonnull(ds.labels);
    float noise[784];
    for (int64_t i = 0; i < n; i++) {
        int label = (int)((i * 7 + seed) % 10), contrast = (int)((i * 37 + seed) % 100);
        ds.labels[i] = (uint8_t)label;
        clt_test_fill_uniform(noise, 784, seed * 1000003u + (uint64_t)i, 0, 100);
        for (int p = 0; p < 784; p++) ds.images[i * 784 + p] = (uint8_t)noise[p];
        for (int p = label * 70; p < label * 70 + 70; p++) ds.images[i * 784 + p] = (uint8_t)(noise[p] + contrast);
    }
    return ds;
}

START_TEST(test_mixed_precision_training_matches_float32)
{
    clt_dataset train = make_dataset(2000, 1), test = make_dataset(3000, 2);
    double acc[2];
    for (int half = 0; half < 2; half++) {
        clt_model *m = resmlp(64, 2, 7);
        clt_trainer_options o = clt_trainer_default_options();
        o.log = NULL;
        o.progress = 0;
        o.batch_size = 50;
        o.max_epochs = 12; /* to the plateau, where the two runs are compared */
        o.lr = 0.1f;
        o.fp16 = half;
        clt_trainer_result r;
        ck_assert_ok(clt_trainer_fit(m, &train, NULL, &o, &r));
        ck_assert_int_eq(clt_model_dtype(m), half ? CLT_FLOAT16 : CLT_FLOAT32);
        double loss;
        ck_assert_ok(clt_trainer_evaluate(m, &test, 100, 0, &loss, &acc[half]));
        clt_model_free(m);
    }
    ck_assert_msg(acc[0] > 0.5 && acc[0] < 0.995, "float32 accuracy %g is not informative", acc[0]);
    ck_assert_msg(fabs(acc[1] - acc[0]) <= 0.01, "float16 accuracy %g, float32 %g", acc[1], acc[0]);
    clt_dataset_free(&train);
    clt_dataset_free(&test);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* clt__widen3: up to three float16 tensors (views at odd offsets, sizes
 * around the 16-element work-items, any one missing) widened exactly in
 * one launch. */
START_TEST(test_widen3_one_launch)
{
    static const int64_t sizes[][3] = {{1, 17, 33}, {16, 0, 5}, {0, 0, 0}, {100, 3, 16}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int missing = -1; missing < 3; missing++) {
            const clt_tensor *in[3] = {NULL, NULL, NULL};
            clt_tensor *base[3] = {NULL, NULL, NULL}, *view[3] = {NULL, NULL, NULL}, *w[3];
            clt_tensor **out[3] = {&w[0], &w[1], &w[2]};
            uint16_t *bits[3] = {NULL, NULL, NULL};
            for (int i = 0; i < 3; i++) {
                if (i == missing) continue;
                int64_t n = sizes[k][i] + 3;
                bits[i] = malloc((size_t)n * sizeof **bits);
                for (int64_t j = 0; j < n; j++) bits[i][j] = (uint16_t)((j * 7919 + k * 131 + (size_t)i) & 0x7bff);
                ck_assert_ok(clt_from_host(&base[i], clt_test_device(), CLT_FLOAT16, 1, &n, bits[i]));
                ck_assert_ok(clt_narrow(&view[i], base[i], 3, sizes[k][i]));
                in[i] = view[i];
            }
            ck_assert_ok(clt__widen3(in, out)); /* built before counting */
            for (int i = 0; i < 3; i++) clt_tensor_release(w[i]);
            clt_test_kernels_start();
            ck_assert_ok(clt__widen3(in, out));
            uint64_t launches = clt_test_kernels_stop();
            int any = 0;
            for (int i = 0; i < 3; i++) any |= in[i] && sizes[k][i] > 0;
            ck_assert_uint_eq(launches, (uint64_t)any);
            for (int i = 0; i < 3; i++) {
                if (i == missing) {
                    ck_assert_ptr_null(w[i]);
                    continue;
                }
                ck_assert_int_eq(clt_tensor_dtype(w[i]), CLT_FLOAT32);
                ck_assert_int_eq(clt_tensor_numel(w[i]), sizes[k][i]);
                float *got = clt_test_read(w[i]);
                for (int64_t j = 0; j < sizes[k][i]; j++)
                    CLT_TEST_REQUIRE(got[j] == clt_half_to_float(bits[i][3 + j]), "sizes %zu operand %d [%lld]: %g",
                                     k, i, (long long)j, (double)got[j]);
                free(got);
                free(bits[i]);
                clt_tensor_release(w[i]);
                clt_tensor_release(view[i]);
                clt_tensor_release(base[i]);
            }
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The float16 Linear's backward through float32 copies (CLT_DENSE=clblast),
 * on either device class: db adds the float32 column sums of dy (from zero,
 * rounded once: what clt_sum_rows gives on dy's float32 values) in one
 * launch, the only one that passing db adds. */
START_TEST(test_linear_f16_bias_gradient_one_launch)
{
    enum { B = 37, C = 5, OC = 19 };
    static const char *const classes[] = {"cpu", "gpu"};
    float x[B * C], w[OC * C], dy[B * OC], db[OC];
    clt_test_fill_uniform(x, B * C, 61, -1, 1);
    clt_test_fill_uniform(w, OC * C, 62, -1, 1);
    clt_test_fill_uniform(dy, B * OC, 63, -2, 2);
    clt_test_fill_uniform(db, OC, 64, -1, 1);
    int64_t sx[] = {B, C}, sw[] = {OC, C}, sy[] = {B, OC}, nb = OC;
    ck_assert_int_eq(setenv("CLT_DENSE", "clblast", 1), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(setenv("CLT_DEVICE_CLASS", classes[k], 1), 0);
        clt_tensor *x16, *w16, *dy16, *db16, *dw16, *dx = NULL, *x32, *w32, *dy32, *dw32;
        ck_assert_ok(clt_from_host(&x32, clt_test_device(), CLT_FLOAT32, 2, sx, x));
        ck_assert_ok(clt_from_host(&w32, clt_test_device(), CLT_FLOAT32, 2, sw, w));
        ck_assert_ok(clt_from_host(&dy32, clt_test_device(), CLT_FLOAT32, 2, sy, dy));
        ck_assert_ok(clt_from_host(&dw32, clt_test_device(), CLT_FLOAT32, 1, &nb, db)); /* db's float32 start */
        ck_assert_ok(clt_to_dtype(&x16, x32, CLT_FLOAT16));
        ck_assert_ok(clt_to_dtype(&w16, w32, CLT_FLOAT16));
        ck_assert_ok(clt_to_dtype(&dy16, dy32, CLT_FLOAT16));
        ck_assert_ok(clt_to_dtype(&db16, dw32, CLT_FLOAT16));
        clt_tensor_release(dw32);
        ck_assert_ok(clt_zeros(&dw16, clt_test_device(), CLT_FLOAT16, 2, sw));
        /* The expected db: half(db16 + the column sums of float(dy16)). */
        clt_tensor *dyw, *sums;
        ck_assert_ok(clt_to_dtype(&dyw, dy16, CLT_FLOAT32));
        ck_assert_ok(clt_sum_rows(&sums, dyw));
        float *start = read_half(db16), *add = clt_test_read(sums);
        uint16_t want[OC], got[OC];
        for (int i = 0; i < OC; i++) want[i] = clt_float_to_half(start[i] + add[i]);
        free(start);
        free(add);
        ck_assert_ok(clt__linear_backward_f16(&dx, dw16, NULL, dy16, x16, w16)); /* built before counting */
        clt_tensor_release(dx);
        clt_test_kernels_start();
        ck_assert_ok(clt__linear_backward_f16(&dx, dw16, NULL, dy16, x16, w16));
        uint64_t without = clt_test_kernels_stop();
        clt_tensor_release(dx);
        clt_test_kernels_start();
        ck_assert_ok(clt__linear_backward_f16(&dx, dw16, db16, dy16, x16, w16));
        uint64_t with = clt_test_kernels_stop();
        ck_assert_msg(with == without + 1, "%s class: %llu launches with db, %llu without", classes[k],
                      (unsigned long long)with, (unsigned long long)without);
        ck_assert_ok(clt_to_host(db16, got, sizeof got));
        for (int i = 0; i < OC; i++)
            ck_assert_msg(got[i] == want[i], "%s class: db[%d] is %#x, expected %#x", classes[k], i, got[i], want[i]);
        clt_tensor *ts[] = {x16, w16, dy16, db16, dw16, dx, x32, w32, dy32, dyw, sums};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    }
    unsetenv("CLT_DEVICE_CLASS");
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("half");
    TCase *tc = clt_test_tcase("half");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_host_conversion_exact_on_every_half);
    tcase_add_test(tc, test_device_round_trip_bounds_and_specials);
    tcase_add_test(tc, test_elementwise_ops_on_half);
    tcase_add_test(tc, test_half_kernels_at_vector_edges);
    tcase_add_test(tc, test_creation_fill_print_and_errors);
    tcase_add_test(tc, test_safetensors_writes_f16);
    tcase_add_test(tc, test_checkpoint_keeps_scaler_and_master);
    tcase_add_test(tc, test_checkpoint_after_device_steps);
    tcase_add_test(tc, test_half_model_matches_float_model);
    tcase_add_test(tc, test_half_checkpointing_gradients_identical);
    tcase_add_test(tc, test_half_model_memory_is_half);
    tcase_add_test(tc, test_loss_scale_keeps_small_gradients);
    tcase_add_test(tc, test_overflow_skips_step_and_halves_scale);
    tcase_add_test(tc, test_mixed_precision_training_matches_float32);
    tcase_add_test(tc, test_linear_f16_bias_gradient_one_launch);
    tcase_add_test(tc, test_widen3_one_launch);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
