/* SGD and Adam steps against a double-precision C reference of PyTorch's
 * formulas, over three steps, on awkward sizes and views; the float16
 * step's loss scaler update against the host's rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "ops/half.h"
#include "ops/optim_step.h"
#include "support.h"

static const int64_t sizes[] = {1, 13, 257};

/* A view of n elements at offset 2 in a padded tensor. */
static clt_tensor *upload(const float *x, int64_t n, clt_tensor **base)
{
    float *buf = malloc((size_t)(n + 4) * sizeof *buf);
    for (int i = 0; i < 2; i++) buf[i] = buf[n + 2 + i] = 77.0f;
    memcpy(buf + 2, x, (size_t)n * sizeof *x);
    int64_t shape[] = {n + 4};
    ck_assert_ok(clt_from_host(base, clt_test_device(), CLT_FLOAT32, 1, shape, buf));
    free(buf);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, 2, n));
    return v;
}

/* Within 1e-5 relative (plus 1e-8 absolute for values near zero) of the reference. */
static void expect(clt_tensor *t, const double *want, int64_t n, const char *what)
{
    float *got = clt_test_read(t);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * fabs(want[i]) + 1e-8, "%s[%lld] (n=%lld): %.9g, expected %.9g",
                      what, (long long)i, (long long)n, (double)got[i], want[i]);
    free(got);
}

static void check_sgd(int64_t n, float lr, float momentum, float wd)
{
    float *p0 = malloc((size_t)n * sizeof *p0), *g = malloc((size_t)n * sizeof *g);
    double *p = malloc((size_t)n * sizeof *p), *buf = calloc((size_t)n, sizeof *buf);
    clt_test_fill_uniform(p0, n, 1 + (uint64_t)n, -1, 1);
    for (int64_t i = 0; i < n; i++) p[i] = p0[i];
    clt_tensor *pb, *bb, *tp = upload(p0, n, &pb), *tbuf = upload(p0, n, &bb); /* buf starts as garbage */
    for (int step = 1; step <= 3; step++) {
        clt_test_fill_uniform(g, n, 10 * (uint64_t)step + (uint64_t)n, -1, 1);
        int64_t shape[] = {n};
        clt_tensor *tg;
        ck_assert_ok(clt_from_host(&tg, clt_test_device(), CLT_FLOAT32, 1, shape, g));
        ck_assert_ok(clt_sgd_step_(tp, tg, momentum != 0 ? tbuf : NULL, lr, momentum, wd, step == 1));
        clt_tensor_release(tg);
        for (int64_t i = 0; i < n; i++) {
            double d = g[i] + (double)wd * p[i];
            if (momentum != 0) buf[i] = d = step == 1 ? d : (double)momentum * buf[i] + d;
            p[i] -= (double)lr * d;
        }
    }
    expect(tp, p, n, "sgd param");
    if (momentum != 0) expect(tbuf, buf, n, "sgd momentum buffer");
    float *all = clt_test_read(pb);
    ck_assert_float_eq(all[0], 77.0f);
    ck_assert_float_eq(all[n + 3], 77.0f);
    free(all);
    free(p0);
    free(g);
    free(p);
    free(buf);
    clt_tensor_release(tp);
    clt_tensor_release(tbuf);
    clt_tensor_release(pb);
    clt_tensor_release(bb);
}

START_TEST(test_sgd)
{
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        check_sgd(sizes[s], 0.1f, 0.0f, 0.0f);
        check_sgd(sizes[s], 0.05f, 0.9f, 0.01f);
        check_sgd(sizes[s], 0.2f, 0.0f, 0.1f);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

static void check_adam(int64_t n, float lr, float wd, int decoupled)
{
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float *p0 = malloc((size_t)n * sizeof *p0), *g = malloc((size_t)n * sizeof *g);
    float *zero = calloc((size_t)n, sizeof *zero);
    double *p = malloc((size_t)n * sizeof *p), *m = calloc((size_t)n, sizeof *m), *v = calloc((size_t)n, sizeof *v);
    clt_test_fill_uniform(p0, n, 3 + (uint64_t)n, -1, 1);
    for (int64_t i = 0; i < n; i++) p[i] = p0[i];
    clt_tensor *pb, *mb, *vb, *tp = upload(p0, n, &pb), *tm = upload(zero, n, &mb), *tv = upload(zero, n, &vb);
    for (int step = 1; step <= 3; step++) {
        clt_test_fill_uniform(g, n, 20 * (uint64_t)step + (uint64_t)n, -1, 1);
        int64_t shape[] = {n};
        clt_tensor *tg;
        ck_assert_ok(clt_from_host(&tg, clt_test_device(), CLT_FLOAT32, 1, shape, g));
        ck_assert_ok(clt_adam_step_(tp, tg, tm, tv, lr, b1, b2, eps, wd, decoupled, step));
        clt_tensor_release(tg);
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        for (int64_t i = 0; i < n; i++) {
            double d = g[i];
            if (decoupled) p[i] *= 1 - (double)lr * wd;
            else d += (double)wd * p[i];
            m[i] = b1 * m[i] + (1 - (double)b1) * d;
            v[i] = b2 * v[i] + (1 - (double)b2) * d * d;
            p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
        }
    }
    expect(tp, p, n, "adam param");
    expect(tm, m, n, "adam m");
    expect(tv, v, n, "adam v");
    free(p0);
    free(g);
    free(zero);
    free(p);
    free(m);
    free(v);
    clt_tensor *all[] = {tp, tm, tv, pb, mb, vb};
    for (int i = 0; i < 6; i++) clt_tensor_release(all[i]);
}

START_TEST(test_adam)
{
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        check_adam(sizes[s], 1e-3f, 0.0f, 0);
        check_adam(sizes[s], 1e-2f, 0.1f, 0);
        check_adam(sizes[s], 1e-2f, 0.1f, 1);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The end of a float16 step on the device (cl/optim.cl scaler_update)
 * against the host's rules it replaces (PyTorch GradScaler's): on
 * overflow the clean steps restart, a dynamic scale halves to 2^-16 at
 * the least, the step is not counted; else it is, and a dynamic scale
 * doubles after CLT__SCALE_GROWTH clean steps when the double is finite.
 * The reciprocal word stays 1 / scale; the flag is cleared. */
START_TEST(test_scaler_update)
{
    static const struct {
        float scale;
        int dynamic, overflow;
        int32_t clean;
    } cases[] = {
        {65536.0f, 1, 1, 7},   {1.0f / 32768.0f, 1, 1, 0}, {1.0f / 65536.0f, 1, 1, 3}, {1.5e-5f, 1, 1, 0},
        {1000.0f, 0, 1, 12},   {1024.0f, 1, 0, 7},        {1024.0f, 1, 0, CLT__SCALE_GROWTH - 1},
        {3e38f, 1, 0, CLT__SCALE_GROWTH - 1}, {1000.0f, 0, 0, 12}, {3.0f, 1, 0, CLT__SCALE_GROWTH - 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float scale = cases[i].scale, inv = 1.0f / scale;
        int32_t s[CLT__SCALER_WORDS], a[CLT__AMP_WORDS] = {0};
        memcpy(&s[CLT__SCALER_SCALE], &scale, 4);
        memcpy(&s[CLT__SCALER_INV], &inv, 4);
        s[CLT__SCALER_CLEAN] = cases[i].clean;
        a[CLT__AMP_OVERFLOW] = cases[i].overflow;
        a[CLT__AMP_TAKEN] = 41;
        clt_tensor *ts, *ta;
        ck_assert_ok(clt_from_host(&ts, clt_test_device(), CLT_INT32, 1, (int64_t[]){CLT__SCALER_WORDS}, s));
        ck_assert_ok(clt_from_host(&ta, clt_test_device(), CLT_INT32, 1, (int64_t[]){CLT__AMP_WORDS}, a));
        ck_assert_ok(clt__scaler_update(ts, ta, cases[i].dynamic, CLT__SCALE_GROWTH));
        ck_assert_ok(clt_to_host(ts, s, sizeof s));
        ck_assert_ok(clt_to_host(ta, a, sizeof a));
        /* The host's rules (src/optim/optim.c before the device took them). */
        float want = scale;
        int32_t clean = cases[i].clean, taken = 41;
        if (cases[i].overflow) {
            if (cases[i].dynamic) want = fmaxf(scale * 0.5f, 1.0f / 65536.0f);
            clean = 0;
        } else {
            taken++;
            if (cases[i].dynamic && ++clean >= CLT__SCALE_GROWTH) {
                clean = 0;
                if (isfinite(scale * 2.0f)) want = scale * 2.0f;
            }
        }
        float got, got_inv, want_inv = 1.0f / want;
        memcpy(&got, &s[CLT__SCALER_SCALE], 4);
        memcpy(&got_inv, &s[CLT__SCALER_INV], 4);
        ck_assert_msg(got == want && got_inv == want_inv && s[CLT__SCALER_CLEAN] == clean,
                      "case %zu: scale %a, 1/scale %a, %d clean; expected %a, %a, %d", i, (double)got,
                      (double)got_inv, s[CLT__SCALER_CLEAN], (double)want, (double)want_inv, clean);
        ck_assert_int_eq(a[CLT__AMP_OVERFLOW], 0);
        ck_assert_int_eq(a[CLT__AMP_TAKEN], taken);
        clt_tensor_release(ts);
        clt_tensor_release(ta);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* One run of chunk_bits's case: two steps of `kind` (0 SGD, 1 SGD with
 * momentum and weight decay, 2 Adam, 3 AdamW) on n elements at an odd
 * offset, under device class cls, the second with the gradients zeroed and,
 * with amp, as a float16 step (its overflow word `overflow`). Returns every
 * buffer the steps write, side by side: param, the two states, the
 * gradient, the float16 parameters. */
static uint8_t *chunk_run(const char *cls, int64_t n, int kind, int amp, int overflow, size_t *bytes)
{
    setenv("CLT_DEVICE_CLASS", cls, 1);
    float *x = malloc((size_t)n * sizeof *x);
    clt_tensor *base[4], *t[4]; /* param, state 0, state 1, gradient */
    for (int i = 0; i < 4; i++) {
        clt_test_fill_uniform(x, n, 7 * (uint64_t)i + (uint64_t)n, i == 2 ? 0 : -1, 1);
        t[i] = upload(x, n, &base[i]);
    }
    int32_t words[CLT__AMP_WORDS] = {0};
    words[CLT__AMP_OVERFLOW] = overflow;
    words[CLT__AMP_TAKEN] = 5;
    clt_tensor *ta, *th;
    ck_assert_ok(clt_from_host(&ta, clt_test_device(), CLT_INT32, 1, (int64_t[]){CLT__AMP_WORDS}, words));
    ck_assert_ok(clt_zeros(&th, clt_test_device(), CLT_FLOAT16, 1, &n));
    for (int step = 1; step <= 2; step++) {
        clt__update u = {.zero_grad = step == 2, .amp = amp && step == 2 ? ta : NULL, .half = th, .base = 3};
        if (kind < 2)
            ck_assert_ok(clt__sgd_step(t[0], t[3], t[1], 0.05f, kind ? 0.9f : 0.0f, kind ? 0.01f : 0.0f, step == 1,
                                       &u));
        else
            ck_assert_ok(clt__adam_step(t[0], t[3], t[1], t[2], 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, kind == 3, step,
                                        &u));
    }
    *bytes = (size_t)n * (4 * sizeof(float) + 2);
    uint8_t *out = malloc(*bytes);
    for (int i = 0; i < 4; i++) ck_assert_ok(clt_to_host(t[i], out + (size_t)i * (size_t)n * 4, (size_t)n * 4));
    ck_assert_ok(clt_to_host(th, out + (size_t)n * 16, (size_t)n * 2));
    for (int i = 0; i < 4; i++) {
        clt_tensor_release(t[i]);
        clt_tensor_release(base[i]);
    }
    clt_tensor_release(ta);
    clt_tensor_release(th);
    free(x);
    unsetenv("CLT_DEVICE_CLASS");
    return out;
}

/* The CPU class's chunked steps (cl/optim.cl's _chunk_f32: sixteen elements
 * at a time, then one by one) write the bits of the GPU class's one element
 * a work-item, which test_sgd and test_adam check against the references:
 * on lengths around the vector width and the chunk, for every SGD mode,
 * Adam and AdamW, with the gradients zeroed and a float16 step taken or
 * skipped. */
START_TEST(test_chunk_bits)
{
    static const int64_t lengths[] = {1, 15, 16, 17, 511, 512, 513, 1031, 5000};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (int kind = 0; kind < 4; kind++)
            for (int amp = 0; amp < 3; amp++) {
                size_t nc, ng;
                uint8_t *cpu = chunk_run("cpu", lengths[l], kind, amp != 0, amp == 2, &nc);
                uint8_t *gpu = chunk_run("gpu", lengths[l], kind, amp != 0, amp == 2, &ng);
                ck_assert_msg(nc == ng && memcmp(cpu, gpu, nc) == 0,
                              "n %lld, kind %d, amp %d: the CPU class's step differs from the GPU class's",
                              (long long)lengths[l], kind, amp);
                free(cpu);
                free(gpu);
            }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_empty_param)
{
    int64_t shape[] = {0};
    clt_tensor *p, *g, *m, *v;
    ck_assert_ok(clt_empty(&p, clt_test_device(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_empty(&g, clt_test_device(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_empty(&m, clt_test_device(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_empty(&v, clt_test_device(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_sgd_step_(p, g, m, 0.1f, 0.9f, 0, 1));
    ck_assert_ok(clt_adam_step_(p, g, m, v, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 1));
    clt_tensor_release(p);
    clt_tensor_release(g);
    clt_tensor_release(m);
    clt_tensor_release(v);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors)
{
    int64_t s3[] = {3}, s4[] = {4};
    clt_tensor *p, *g4, *m, *i;
    ck_assert_ok(clt_zeros(&p, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_ok(clt_zeros(&g4, clt_test_device(), CLT_FLOAT32, 1, s4));
    ck_assert_ok(clt_zeros(&m, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_ok(clt_zeros(&i, clt_test_device(), CLT_INT32, 1, s3));
    ck_assert_status(clt_sgd_step_(NULL, m, NULL, 0.1f, 0, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_sgd_step_(p, g4, NULL, 0.1f, 0, 0, 1), CLT_ERR_SHAPE);
    ck_assert_status(clt_sgd_step_(p, i, NULL, 0.1f, 0, 0, 1), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_sgd_step_(p, m, NULL, 0.1f, 0.9f, 0, 1), CLT_ERR_INVALID_ARGUMENT); /* no buffer */
    ck_assert_status(clt_sgd_step_(p, m, g4, 0.1f, 0.9f, 0, 1), CLT_ERR_SHAPE);
    ck_assert_status(clt_sgd_step_(p, m, NULL, -0.1f, 0, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_adam_step_(p, m, m, NULL, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_adam_step_(p, m, m, m, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_adam_step_(p, m, m, m, 0.1f, 1.0f, 0.999f, 1e-8f, 0, 0, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_adam_step_(p, m, g4, m, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 1), CLT_ERR_SHAPE);
    ck_assert_status(clt_adam_step_(p, m, i, m, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 1), CLT_ERR_UNSUPPORTED);
    clt_device other;
    if (clt_test_other_device(&other)) {
        clt_tensor *far;
        ck_assert_ok(clt_zeros(&far, other, CLT_FLOAT32, 1, s3));
        ck_assert_status(clt_sgd_step_(p, far, NULL, 0.1f, 0, 0, 1), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_status(clt_adam_step_(p, m, m, far, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0, 1), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(far);
    }
    clt_tensor_release(p);
    clt_tensor_release(g4);
    clt_tensor_release(m);
    clt_tensor_release(i);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim_kernels");
    TCase *tc = clt_test_tcase("steps");
    tcase_add_test(tc, test_sgd);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_chunk_bits);
    tcase_add_test(tc, test_empty_param);
    tcase_add_test(tc, test_scaler_update);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
