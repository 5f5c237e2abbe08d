/* The GPU-class devices' own GEMM (cl/gemm_gpu.cl, src/ops/gemm_gpu.c):
 * every transpose, odd edges, work-groups of side 16 and 8 (256 and 64
 * work-items), a mask on a's reads and each epilogue alone and together,
 * against the plain C reference and against CLBlast; its float16 form
 * (gemm_gpu_f16) bit for bit against the float32 kernel on the widened
 * operands, rounded once, and near the C reference; which products take
 * it; a Linear's backward with both ReLU masks folded in
 * (clt__linear_backward_fold) on it, the CPU kernels and CLBlast alike;
 * and the float16 Linear on it, without float32 copies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "ops/gemm_gpu.h"
#include "ops/linear_f16.h"
#include "support.h"

#define TOL 1e-4

enum { BIAS = 1, RELU = 2, MASK = 4, ROWSUM = 8, AMASK = 16, ROUND = 32, RESID = 64 };

static int test_slot(void)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    return slot;
}

/* The epilogue of cl/gemm_gpu.cl on the reference's c (m, n). */
static void ref_epilogue(int flags, int ta, int64_t m, int64_t n, int64_t k, const float *a, const float *bias,
                         const float *mask, float *c, float *rowsum)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float v = c[i * n + j];
            if (flags & BIAS) v += bias[j];
            if ((flags & RELU) && v < 0.0f) v = 0.0f;
            if ((flags & MASK) && !(mask[i * n + j] > 0.0f)) v = 0.0f;
            c[i * n + j] = v;
        }
    if (!(flags & ROWSUM)) return;
    for (int64_t i = 0; i < m; i++) {
        double s = rowsum[i];
        for (int64_t p = 0; p < k; p++) s += ta ? a[p * m + i] : a[i * k + p];
        rowsum[i] = (float)s;
    }
}

/* One product through clt__gemm_gpu with work-groups of side wgs, against
 * the C reference; a, b and c are views at nonzero offsets. */
static void check_one(int wgs, int ta, int tb, int64_t m, int64_t n, int64_t k, int flags)
{
    float beta = flags & (BIAS | RELU) ? 0.0f : 0.5f;
    float *a = clt_test_random_floats(m * k, 1 + (uint64_t)m), *b = clt_test_random_floats(k * n, 2 + (uint64_t)n);
    float *c = clt_test_random_floats(m * n, 3 + (uint64_t)k), *bias = clt_test_random_floats(n, 4);
    float *mask = clt_test_random_floats(m * n, 5), *rowsum = clt_test_random_floats(m, 6);
    clt_device dev = clt_test_device();
    clt_tensor *ab, *bb, *cb;
    clt_tensor *ta_ = clt_test_upload_view(dev, a, ta ? k : m, ta ? m : k, 2, 9.0f, &ab);
    clt_tensor *tb_ = clt_test_upload_view(dev, b, tb ? n : k, tb ? k : n, 1, 9.0f, &bb);
    clt_tensor *tc = clt_test_upload_view(dev, c, m, n, 3, 7.0f, &cb);
    clt_tensor *tbias = clt_test_upload(dev, bias, 1, n), *tmask = clt_test_upload(dev, mask, m, n);
    clt_tensor *trs = clt_test_upload(dev, rowsum, 1, m);
    float *amask = clt_test_random_floats(m * k, 7);
    clt_tensor *tam = clt_test_upload(dev, amask, ta ? k : m, ta ? m : k);
    if (flags & AMASK)
        for (int64_t i = 0; i < m * k; i++) a[i] = amask[i] > 0.0f ? a[i] : 0.0f;
    clt__gemm_fusion ep = {.a_mask = flags & AMASK ? tam : NULL,
                           .bias = flags & BIAS ? tbias : NULL,
                           .relu = (flags & RELU) != 0,
                           .mask = flags & MASK ? tmask : NULL,
                           .rowsum = flags & ROWSUM ? trs : NULL};
    ck_assert_ok(clt__gemm_gpu(test_slot(), wgs, ta, tb, (size_t)m, (size_t)n, (size_t)k, 0.75f, ta_,
                               (size_t)(ta ? m : k), tb_, (size_t)(tb ? k : n), beta, tc, (size_t)n, &ep));
    clt_test_ref_gemm(ta, tb, m, n, k, 0.75f, a, b, beta, c);
    ref_epilogue(flags, ta, m, n, k, a, bias, mask, c, rowsum);
    float *got = clt_test_read(tc), *got_rs = clt_test_read(trs), *all = clt_test_read(cb);
    double err = clt_test_max_rel_err(got, c, m * n), rs_err = clt_test_max_rel_err(got_rs, rowsum, m);
    ck_assert_msg(err < TOL && rs_err < TOL, "wgs %d ta=%d tb=%d m=%lld n=%lld k=%lld flags %d: error %g, row sums %g",
                  wgs, ta, tb, (long long)m, (long long)n, (long long)k, flags, err, rs_err);
    /* The rows around c's view are untouched. */
    for (int64_t i = 0; i < (m + 6) * n; i++)
        CLT_TEST_REQUIRE((i >= 3 * n && i < (m + 3) * n) || all[i] == 7.0f, "beside the view: [%lld] %g, not 7",
                         (long long)i, all[i]);
    free(all);
    free(got_rs);
    free(got);
    free(a);
    free(b);
    free(c);
    free(bias);
    free(mask);
    free(rowsum);
    free(amask);
    clt_tensor *ts[] = {ta_, tb_, tc, ab, bb, cb, tbias, tmask, trs, tam};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
}

static const int64_t sizes[][3] = {{1, 1, 1},    {3, 17, 5},   {17, 3, 257},   {64, 64, 16}, {65, 1, 130},
                                   {1, 257, 3},  {33, 10, 256}, {255, 257, 17}, {257, 255, 33}};

/* How many of sizes a test takes: on a simulator (scripts/oclgrind) the
 * last two, the only ones past 130 on both sides of C, are left out. */
static size_t num_sizes(void)
{
    return sizeof sizes / sizeof sizes[0] - (clt_test_simulated() ? 2 : 0);
}

/* Side 16 where the device allows 256 work-items (SHIM_MAXWG=64 does not). */
static int skip_side(int w)
{
    return w == 0 && clt__slot_get(test_slot())->max_work_group < 256;
}

typedef void check_fn(int wgs, int ta, int tb, int64_t m, int64_t n, int64_t k, int flags);

/* check at every size and work-group shape, for each of count combos (ta, tb, flags). */
static void each_combo(check_fn *check, const int (*combos)[3], size_t count)
{
    for (int w = skip_side(0); w < 2; w++)
        for (size_t e = 0; e < count; e++)
            for (size_t s = 0; s < num_sizes(); s++)
                check(w ? 8 : 16, combos[e][0], combos[e][1], sizes[s][0], sizes[s][1], sizes[s][2], combos[e][2]);
}

START_TEST(test_transposes_and_edges)
{
    static const int combos[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}};
    each_combo(check_one, combos, sizeof combos / sizeof combos[0]);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* What the layers fuse, with the transposes it comes with (forward: NT
 * with bias and ReLU; input gradient: NN with a mask on a and in the
 * store; weight gradient: TN with a mask on a and row sums), and each of
 * them alone and all together elsewhere. */
START_TEST(test_epilogues)
{
    static const int combos[][3] = {{0, 1, BIAS | RELU},  {0, 1, BIAS},   {0, 1, RELU},
                                    {0, 0, MASK},         {0, 0, MASK | AMASK}, {1, 0, ROWSUM},
                                    {1, 0, ROWSUM | AMASK}, {0, 0, ROWSUM}, {1, 1, BIAS | RELU | MASK | ROWSUM | AMASK}};
    each_combo(check_one, combos, sizeof combos / sizeof combos[0]);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* n random values in [-1, 1) that float16 holds exactly. */
static float *half_values(int64_t n, uint64_t seed)
{
    float *x = clt_test_random_floats(n, seed);
    for (int64_t i = 0; i < n; i++) x[i] = clt_half_to_float(clt_float_to_half(x[i]));
    return x;
}

/* The float16 copy of a float32 tensor, and a view of it at rows [pad, pad + rows) when pad >= 0. */
static clt_tensor *to_half(clt_tensor *t, int64_t pad, int64_t rows, clt_tensor **base)
{
    clt_tensor *h, *v;
    ck_assert_ok(clt_to_dtype(&h, t, CLT_FLOAT16));
    if (pad < 0) return h;
    ck_assert_ok(clt_narrow(&v, h, pad, rows));
    *base = h;
    return v;
}

static uint16_t *read_half(const clt_tensor *t)
{
    size_t n = clt_tensor_nbytes(t);
    uint16_t *x = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(x);
    ck_assert_ok(clt_to_host(t, x, n));
    return x;
}

/* One product by gemm_gpu_f16 (alpha 1, beta 0 with a bias or ReLU, else
 * 1, as the layers make them), a, b and c views at nonzero offsets: c, the
 * row sums and the residual sum bit for bit the float32 kernel's on the
 * same values, rounded once to float16; with ROUND c is half(half(the
 * product) + c), with RESID the sum half(c's float16 + res); and c within
 * float16's precision of the C reference. The rows around c's view stay. */
static void check_half(int wgs, int ta, int tb, int64_t m, int64_t n, int64_t k, int flags)
{
    float beta = flags & (BIAS | RELU) ? 0.0f : 1.0f;
    float *a = half_values(m * k, 1 + (uint64_t)m), *b = half_values(k * n, 2 + (uint64_t)n);
    float *c = half_values(m * n, 3 + (uint64_t)k), *bias = half_values(n, 4), *mask = half_values(m * n, 5);
    float *rowsum = half_values(m, 6), *amask = half_values(m * k, 7), *res = half_values(m * n, 8);
    clt_device dev = clt_test_device();
    int slot = test_slot();
    clt_tensor *ab, *bb, *cb, *hab, *hbb, *hcb;
    clt_tensor *ta32 = clt_test_upload_view(dev, a, ta ? k : m, ta ? m : k, 2, 9.0f, &ab);
    clt_tensor *tb32 = clt_test_upload_view(dev, b, tb ? n : k, tb ? k : n, 1, 9.0f, &bb);
    clt_tensor *tc32 = clt_test_upload_view(dev, c, m, n, 3, 7.0f, &cb);
    clt_tensor *ta16 = to_half(ab, 2, ta ? k : m, &hab), *tb16 = to_half(bb, 1, tb ? n : k, &hbb);
    clt_tensor *tc16 = to_half(cb, 3, m, &hcb);
    clt_tensor *t32[] = {clt_test_upload(dev, bias, 1, n), clt_test_upload(dev, mask, m, n),
                         clt_test_upload(dev, rowsum, 1, m), clt_test_upload(dev, amask, ta ? k : m, ta ? m : k),
                         clt_test_upload(dev, res, m, n), clt_test_upload(dev, c, m, n)};
    clt_tensor *t16[6];
    for (int i = 0; i < 6; i++) t16[i] = to_half(t32[i], -1, 0, NULL);
    clt_tensor *sum16;
    int64_t shape[] = {m, n};
    ck_assert_ok(clt_zeros(&sum16, dev, CLT_FLOAT16, 2, shape));
    clt__gemm_fusion ep16 = {.a_mask = flags & AMASK ? t16[3] : NULL,
                             .round = (flags & ROUND) != 0,
                             .bias = flags & BIAS ? t16[0] : NULL,
                             .relu = (flags & RELU) != 0,
                             .mask = flags & MASK ? t16[1] : NULL,
                             .rowsum = flags & ROWSUM ? t16[2] : NULL,
                             .residual = flags & RESID ? t16[4] : NULL,
                             .sum = sum16};
    ck_assert_ok(clt__gemm_gpu(slot, wgs, ta, tb, (size_t)m, (size_t)n, (size_t)k, 1.0f, ta16, (size_t)(ta ? m : k),
                               tb16, (size_t)(tb ? k : n), beta, tc16, (size_t)n, &ep16));
    /* The float32 kernel on the same values; with ROUND its bare product (t32[5] is a scratch c). */
    clt__gemm_fusion ep32 = ep16;
    ep32.a_mask = flags & AMASK ? t32[3] : NULL;
    ep32.bias = flags & BIAS ? t32[0] : NULL;
    ep32.mask = flags & MASK && !(flags & ROUND) ? t32[1] : NULL;
    ep32.rowsum = flags & ROWSUM ? t32[2] : NULL;
    ep32.round = 0;
    ep32.residual = NULL;
    clt_tensor *out32 = flags & ROUND ? t32[5] : tc32;
    ck_assert_ok(clt__gemm_gpu(slot, wgs, ta, tb, (size_t)m, (size_t)n, (size_t)k, 1.0f, ta32, (size_t)(ta ? m : k),
                               tb32, (size_t)(tb ? k : n), flags & ROUND ? 0.0f : beta, out32, (size_t)n, &ep32));
    float *p = clt_test_read(out32), *rs32 = clt_test_read(t32[2]);
    uint16_t *got = read_half(tc16), *all = read_half(hcb), *rs16 = read_half(t16[2]), *sum = read_half(sum16);
    for (int64_t i = 0; i < m * n; i++) {
        float v = p[i];
        if (flags & ROUND) {
            v = clt_half_to_float(clt_float_to_half(v)) + c[i];
            if ((flags & MASK) && !(mask[i] > 0.0f)) v = 0.0f;
        }
        uint16_t want = clt_float_to_half(v);
        CLT_TEST_REQUIRE(got[i] == want, "wgs %d ta=%d tb=%d m=%lld n=%lld k=%lld flags %d: c[%lld] %#x, expected %#x",
                         wgs, ta, tb, (long long)m, (long long)n, (long long)k, flags, (long long)i, got[i], want);
        uint16_t want_sum = clt_float_to_half(clt_half_to_float(want) + res[i]);
        CLT_TEST_REQUIRE(!(flags & RESID) || sum[i] == want_sum, "flags %d: sum[%lld] %#x, expected %#x", flags,
                         (long long)i, sum[i], want_sum);
    }
    for (int64_t i = 0; i < m; i++)
        CLT_TEST_REQUIRE(rs16[i] == clt_float_to_half(rs32[i]), "flags %d: row sum %lld %#x, expected %#x", flags,
                         (long long)i, rs16[i], clt_float_to_half(rs32[i]));
    for (int64_t i = 0; i < (m + 6) * n; i++)
        CLT_TEST_REQUIRE((i >= 3 * n && i < (m + 3) * n) || all[i] == clt_float_to_half(7.0f),
                         "beside the view: [%lld] %#x, not 7", (long long)i, all[i]);
    /* Near the C reference. */
    if (flags & AMASK)
        for (int64_t i = 0; i < m * k; i++) a[i] = amask[i] > 0.0f ? a[i] : 0.0f;
    float *ref = malloc((size_t)(m * n) * sizeof *ref), *gotf = malloc((size_t)(m * n) * sizeof *gotf);
    memcpy(ref, c, (size_t)(m * n) * sizeof *ref);
    clt_test_ref_gemm(ta, tb, m, n, k, 1.0f, a, b, beta, ref);
    ref_epilogue(flags, ta, m, n, k, a, bias, mask, ref, rowsum);
    for (int64_t i = 0; i < m * n; i++) gotf[i] = clt_half_to_float(got[i]);
    double err = clt_test_max_rel_err(gotf, ref, m * n);
    ck_assert_msg(err < 2e-3, "flags %d: %g from the C reference", flags, err);
    free(ref);
    free(gotf);
    void *bufs[] = {a, b, c, bias, mask, rowsum, amask, res, p, rs32, got, all, rs16, sum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    clt_tensor *ts[] = {ta32, tb32, tc32, ab, bb, cb, ta16, tb16, tc16, hab, hbb, hcb, sum16};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    for (int i = 0; i < 6; i++) {
        clt_tensor_release(t32[i]);
        clt_tensor_release(t16[i]);
    }
}

/* The float16 form: every transpose plain (beta 1: a gradient's
 * accumulation), then what the float16 layers fuse: forward NT with bias
 * and ReLU, and the residual sum; input gradient NN with the masks, and
 * rounded before a residual gradient is added; weight gradient TN with a
 * mask on a and row sums; and all together. */
START_TEST(test_half_form)
{
    static const int combos[][3] = {{0, 0, 0},
                                    {1, 0, 0},
                                    {0, 1, 0},
                                    {1, 1, 0},
                                    {0, 1, BIAS | RELU},
                                    {0, 1, BIAS | RELU | RESID},
                                    {0, 0, MASK | AMASK},
                                    {0, 0, ROUND},
                                    {0, 0, ROUND | MASK | AMASK},
                                    {1, 0, ROWSUM | AMASK},
                                    {1, 1, BIAS | RELU | MASK | ROWSUM | AMASK | RESID}};
    each_combo(check_half, combos, sizeof combos / sizeof combos[0]);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The same product by the kernel and by CLBlast (CLT_DENSE=clblast), at the
 * capstone's shapes (batch 256, 784-256-256-10) and odd ones. */
START_TEST(test_against_clblast)
{
    clt_test_skip_if(clt_test_simulated(), "clblast", "CLBlast does not run on the simulator");
    int64_t shapes[][5] = {/* ta, tb, m, n, k */
                           {0, 1, 256, 256, 784}, {0, 1, 256, 10, 256}, {1, 0, 256, 784, 256}, {1, 0, 10, 256, 256},
                           {0, 0, 256, 256, 256}, {0, 0, 256, 256, 10}, {0, 1, 17, 255, 257}, {1, 0, 3, 1, 255}};
    clt_device dev = clt_test_device();
    int slot = test_slot();
    for (size_t s = 0; s < 2 * (sizeof shapes / sizeof shapes[0]); s++) {
        int wgs = s % 2 ? 8 : 16;
        if (skip_side(s % 2)) continue;
        int ta = (int)shapes[s / 2][0], tb = (int)shapes[s / 2][1];
        int64_t m = shapes[s / 2][2], n = shapes[s / 2][3], k = shapes[s / 2][4];
        float *a = clt_test_random_floats(m * k, 7), *b = clt_test_random_floats(k * n, 8);
        clt_tensor *tav = clt_test_upload(dev, a, ta ? k : m, ta ? m : k);
        clt_tensor *tbv = clt_test_upload(dev, b, tb ? n : k, tb ? k : n);
        clt_tensor *own, *lib;
        int64_t shape[] = {m, n};
        ck_assert_ok(clt_zeros(&own, dev, CLT_FLOAT32, 2, shape));
        ck_assert_ok(clt_zeros(&lib, dev, CLT_FLOAT32, 2, shape));
        ck_assert_ok(clt__gemm_gpu(slot, wgs, ta, tb, (size_t)m, (size_t)n, (size_t)k, 1.0f, tav,
                                   (size_t)(ta ? m : k), tbv, (size_t)(tb ? k : n), 0.0f, own, (size_t)n, NULL));
        clt_test_setenv("CLT_DENSE", "clblast");
        ck_assert_ok(clt_gemm_(ta, tb, 1.0f, tav, tbv, 0.0f, lib));
        clt_test_setenv("CLT_DENSE", NULL);
        float *x = clt_test_read(own), *y = clt_test_read(lib);
        double err = clt_test_max_rel_err(x, y, m * n);
        ck_assert_msg(err < TOL, "wgs %d ta=%d tb=%d m=%lld n=%lld k=%lld: kernel and CLBlast differ by %g", wgs, ta,
                      tb, (long long)m, (long long)n, (long long)k, err);
        free(x);
        free(y);
        free(a);
        free(b);
        clt_tensor_release(own);
        clt_tensor_release(lib);
        clt_tensor_release(tav);
        clt_tensor_release(tbv);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Which products take the kernel: GPU-class devices, 0 < m n k <= 2^27,
 * work-groups of 64 or more; CLT_DENSE=clblast keeps CLBlast. Which
 * work-group shape: 64 x 64 blocks where C has enough of them. */
START_TEST(test_choice)
{
    ck_assert_int_eq(clt__gemm_gpu_fits(256, 256, 784), 1);
    ck_assert_int_eq(clt__gemm_gpu_fits(512, 512, 512), 1);
    ck_assert_int_eq(clt__gemm_gpu_fits(512, 512, 513), 0);
    ck_assert_int_eq(clt__gemm_gpu_fits(256, 256, 0), 0);
    ck_assert_int_eq(clt__gemm_gpu_fits(0, 256, 1), 0);
    ck_assert_int_eq(clt__gemm_gpu_fits((size_t)1 << 40, (size_t)1 << 40, 1), 0);
    int slot = test_slot(), fused = -1;
    const char *was = getenv("CLT_DEVICE_CLASS");
    char *class = was ? strdup(was) : NULL;
    clt_test_setenv("CLT_DEVICE_CLASS", "gpu");
    ck_assert_ok(clt__dense_fuses_backward(slot, 256, 256, 784, &fused));
    ck_assert_int_eq(fused, clt__gemm_gpu_side(slot, 256, 256) != 0);
    ck_assert_ok(clt__dense_fuses_backward(slot, 1024, 1024, 1024, &fused));
    ck_assert_int_eq(fused, 0);
    clt_test_setenv("CLT_DENSE", "clblast");
    ck_assert_ok(clt__dense_fuses_backward(slot, 256, 256, 784, &fused));
    ck_assert_int_eq(fused, 0);
    clt_test_setenv("CLT_DENSE", NULL);
    clt_test_setenv("CLT_DEVICE_CLASS", "cpu");
    ck_assert_ok(clt__dense_fuses_backward(slot, 256, 256, 784, &fused));
    ck_assert_int_eq(fused, 0);
    if (class) clt_test_setenv("CLT_DEVICE_CLASS", class);
    else clt_test_setenv("CLT_DEVICE_CLASS", NULL);
    free(class);
    /* 32 x 32 blocks for a C of one block, 64 x 64 for one of more blocks than any device has units. */
    size_t most = clt__slot_get(slot)->max_work_group;
    ck_assert_int_eq(clt__gemm_gpu_side(slot, 1, 1), most >= 64 ? 8 : 0);
    ck_assert_int_eq(clt__gemm_gpu_side(slot, (size_t)1 << 20, (size_t)1 << 20), most >= 256 ? 16 : most >= 64 ? 8 : 0);
}
END_TEST

/* dw += (dy . ym)^T x, db += column sums of dy . ym, dx = ((dy . ym) w) . xm,
 * where . keeps the values whose mask is > 0; on this device's dense
 * implementation `impl` (NULL: the GPU class's choice, the kernel). */
static void check_linear_fold(const char *impl, int64_t B, int64_t C, int64_t OC)
{
    if (impl) clt_test_setenv("CLT_DENSE", impl);
    else clt_test_setenv("CLT_DEVICE_CLASS", "gpu");
    float *dy = clt_test_random_floats(B * OC, 1), *ym = clt_test_random_floats(B * OC, 2);
    float *x = clt_test_random_floats(B * C, 3), *xm = clt_test_random_floats(B * C, 4);
    float *w = clt_test_random_floats(OC * C, 5), *dw = clt_test_random_floats(OC * C, 6);
    float *db = clt_test_random_floats(OC, 7), *dx = calloc((size_t)(B * C), sizeof *dx);
    clt_device dev = clt_test_device();
    clt_tensor *tdy = clt_test_upload(dev, dy, B, OC), *tym = clt_test_upload(dev, ym, B, OC);
    clt_tensor *tx = clt_test_upload(dev, x, B, C), *txm = clt_test_upload(dev, xm, B, C);
    clt_tensor *tw = clt_test_upload(dev, w, OC, C), *tdw = clt_test_upload(dev, dw, OC, C), *tdb, *tdx;
    ck_assert_ok(clt_from_host(&tdb, dev, CLT_FLOAT32, 1, &OC, db));
    clt__linear_fold f = {.dy_mask = tym, .dx_mask = txm};
    ck_assert_ok(clt__linear_backward_fold(&tdx, &f, tdw, tdb, tdy, tx, tw));
    for (int64_t i = 0; i < B * OC; i++) dy[i] = ym[i] > 0.0f ? dy[i] : 0.0f;
    clt_test_ref_gemm(1, 0, OC, C, B, 1.0f, dy, x, 1.0f, dw);
    clt_test_ref_gemm(0, 0, B, C, OC, 1.0f, dy, w, 0.0f, dx);
    for (int64_t i = 0; i < B * C; i++) dx[i] = xm[i] > 0.0f ? dx[i] : 0.0f;
    for (int64_t o = 0; o < OC; o++) {
        double sum = db[o];
        for (int64_t r = 0; r < B; r++) sum += dy[r * OC + o];
        db[o] = (float)sum;
    }
    float *gdw = clt_test_read(tdw), *gdb = clt_test_read(tdb), *gdx = clt_test_read(tdx);
    double e1 = clt_test_max_rel_err(gdw, dw, OC * C), e2 = clt_test_max_rel_err(gdb, db, OC),
           e3 = clt_test_max_rel_err(gdx, dx, B * C);
    ck_assert_msg(e1 < TOL && e2 < TOL && e3 < TOL, "%s (%lld, %lld, %lld): dw %g, db %g, dx %g",
                  impl ? impl : "gemm_gpu", (long long)B, (long long)C, (long long)OC, e1, e2, e3);
    float *bufs[] = {dy, ym, x, xm, w, dw, db, dx, gdw, gdb, gdx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    clt_tensor *ts[] = {tdy, tym, tx, txm, tw, tdw, tdb, tdx};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    clt_test_setenv("CLT_DENSE", NULL);
}

START_TEST(test_linear_fold)
{
    const char *impls[] = {NULL, "cpu", "clblast"};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && clt_test_simulated()) break; /* CLBlast does not run on the simulator */
        check_linear_fold(impls[i], 5, 13, 7);
        check_linear_fold(impls[i], 33, 257, 65);
        check_linear_fold(impls[i], 0, 3, 2); /* an empty batch: dw and db stay, dx is empty */
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The float16 Linear on a GPU-class device (src/ops/linear_f16.c): its
 * forward is one launch of gemm_gpu_f16 (the bias in its store), its
 * backward two (dw with db's column sums, dx), with no float32 copy; y, dx,
 * dw and db are bit for bit the float32 Linear's (gemm_gpu_f32, the same
 * order) on the widened operands, rounded once to float16: dw and db read
 * in float32 and the sums added to them before that one rounding. */
START_TEST(test_linear_half)
{
    int slot = test_slot();
    clt_test_skip_if(!clt__gemm_gpu_side(slot, 1, 1), "wide-work-groups", "work-groups of fewer than 64 work-items");
    const char *was = getenv("CLT_DEVICE_CLASS");
    char *class = was ? strdup(was) : NULL;
    clt_test_setenv("CLT_DEVICE_CLASS", "gpu");
    static const int64_t shapes[][3] = {{5, 13, 7}, {33, 257, 65}, {256, 256, 10}}; /* B, C, OC */
    clt_device dev = clt_test_device();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t B = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *x = half_values(B * C, 1), *w = half_values(OC * C, 2), *b = half_values(OC, 3);
        float *dy = half_values(B * OC, 4), *dw = half_values(OC * C, 5), *db = half_values(OC, 6);
        clt_tensor *t32[] = {clt_test_upload(dev, x, B, C),  clt_test_upload(dev, w, OC, C),
                             clt_test_upload(dev, b, 1, OC), clt_test_upload(dev, dy, B, OC),
                             clt_test_upload(dev, dw, OC, C), clt_test_upload(dev, db, 1, OC)};
        clt_tensor *t16[6], *b32, *db32, *b16, *db16, *y32, *y16, *dx32, *dx16;
        for (int i = 0; i < 6; i++) t16[i] = to_half(t32[i], -1, 0, NULL);
        ck_assert_ok(clt_reshape(&b32, t32[2], 1, &OC));
        ck_assert_ok(clt_reshape(&db32, t32[5], 1, &OC));
        ck_assert_ok(clt_reshape(&b16, t16[2], 1, &OC));
        ck_assert_ok(clt_reshape(&db16, t16[5], 1, &OC));
        clt_test_kernels_start();
        ck_assert_ok(clt__linear_forward_f16(&y16, t16[0], t16[1], b16));
        ck_assert_uint_eq(clt_test_kernels_stop(), 1);
        clt_test_kernels_start();
        ck_assert_ok(clt__linear_backward_f16(&dx16, t16[4], db16, t16[3], t16[0], t16[1]));
        ck_assert_uint_eq(clt_test_kernels_stop(), 2);
        ck_assert_ok(clt_linear_forward(&y32, t32[0], t32[1], b32));
        ck_assert_ok(clt_linear_backward_(&dx32, t32[4], db32, t32[3], t32[0], t32[1]));
        clt_tensor *pairs[][2] = {{y16, y32}, {dx16, dx32}, {t16[4], t32[4]}, {db16, db32}};
        const char *names[] = {"y", "dx", "dw", "db"};
        for (int p = 0; p < 4; p++) {
            uint16_t *got = read_half(pairs[p][0]);
            float *want = clt_test_read(pairs[p][1]);
            for (int64_t i = 0; i < clt_tensor_numel(pairs[p][0]); i++)
                CLT_TEST_REQUIRE(got[i] == clt_float_to_half(want[i]), "(%lld, %lld, %lld) %s[%lld]: %#x, expected %#x",
                                 (long long)B, (long long)C, (long long)OC, names[p], (long long)i, got[i],
                                 clt_float_to_half(want[i]));
            free(got);
            free(want);
        }
        float *bufs[] = {x, w, b, dy, dw, db};
        for (int i = 0; i < 6; i++) {
            free(bufs[i]);
            clt_tensor_release(t32[i]);
            clt_tensor_release(t16[i]);
        }
        clt_tensor *ts[] = {b32, db32, b16, db16, y32, y16, dx32, dx16};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    }
    if (class) clt_test_setenv("CLT_DEVICE_CLASS", class);
    else clt_test_setenv("CLT_DEVICE_CLASS", NULL);
    free(class);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* max |got - want| / max(1, |want|) of a float16 tensor against float32 values. */
static double half_err(const clt_tensor *t, const float *want)
{
    uint16_t *h = read_half(t);
    int64_t n = clt_tensor_numel(t);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = clt_half_to_float(h[i]);
    double e = clt_test_max_rel_err(f, want, n);
    free(h);
    free(f);
    return e;
}

/* The float16 Linear's fused entry points on the class cls (gpu: in the
 * products' loads and stores; cpu: passes of their own) against a C
 * reference, within float16's precision: y = ReLU(x w^T + b) and sum = y +
 * res; dw += (dy . ym)^T x, db += the column sums of dy . ym, dx = (base +
 * (dy . ym) w) . xm, into a copy of base or, in_place, into base itself. */
static void check_half_folds(const char *cls, int in_place)
{
    enum { B = 33, C = 70, OC = 65 };
    clt_test_setenv("CLT_DEVICE_CLASS", cls);
    clt_device dev = clt_test_device();
    float *x = half_values(B * C, 1), *w = half_values(OC * C, 2), *b = half_values(OC, 3),
          *res = half_values(B * OC, 4), *dy = half_values(B * OC, 5), *ym = half_values(B * OC, 6),
          *xm = half_values(B * C, 7), *base = half_values(B * C, 8), *dw = half_values(OC * C, 9),
          *db = half_values(OC, 10);
    float *hosts[] = {x, w, b, res, dy, ym, xm, base, dw, db};
    int64_t rows[] = {B, OC, 1, B, B, B, B, B, OC, 1}, cols[] = {C, C, OC, OC, OC, OC, C, C, C, OC};
    clt_tensor *t[10];
    for (int i = 0; i < 10; i++) {
        clt_tensor *f = clt_test_upload(dev, hosts[i], rows[i], cols[i]);
        t[i] = to_half(f, -1, 0, NULL);
        clt_tensor_release(f);
    }
    int64_t noc = OC;
    clt_tensor *tb, *tdb, *y, *sum, *dx;
    ck_assert_ok(clt_reshape(&tb, t[2], 1, &noc));
    ck_assert_ok(clt_reshape(&tdb, t[9], 1, &noc));
    ck_assert_ok(clt__linear_relu_forward_f16(&y, &sum, t[0], t[1], tb, t[3]));
    clt__linear_fold f = {.base = t[7], .in_place = in_place, .dy_mask = t[5], .dx_mask = t[6]};
    ck_assert_ok(clt__linear_backward_fold_f16(&dx, &f, t[8], tdb, t[4], t[0], t[1]));
    ck_assert(!in_place || dx == t[7]);
    float *ry = calloc(B * OC, sizeof *ry), *rsum = malloc(B * OC * sizeof *rsum), *rdx = malloc(B * C * sizeof *rdx);
    clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, 0.0f, ry);
    for (int i = 0; i < B * OC; i++) {
        ry[i] = ry[i] + b[i % OC] > 0.0f ? ry[i] + b[i % OC] : 0.0f;
        rsum[i] = ry[i] + res[i];
        dy[i] = ym[i] > 0.0f ? dy[i] : 0.0f;
    }
    memcpy(rdx, base, B * C * sizeof *rdx);
    clt_test_ref_gemm(1, 0, OC, C, B, 1.0f, dy, x, 1.0f, dw);
    clt_test_ref_gemm(0, 0, B, C, OC, 1.0f, dy, w, 1.0f, rdx);
    for (int i = 0; i < B * C; i++) rdx[i] = xm[i] > 0.0f ? rdx[i] : 0.0f;
    for (int i = 0; i < B * OC; i++) db[i % OC] += dy[i];
    double e[] = {half_err(y, ry), half_err(sum, rsum), half_err(t[8], dw), half_err(tdb, db), half_err(dx, rdx)};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(e[i] < 1e-2, "%s class, in place %d: result %d (y, sum, dw, db, dx) %g from the reference", cls,
                      in_place, i, e[i]);
    for (int i = 0; i < 10; i++) {
        free(hosts[i]);
        clt_tensor_release(t[i]);
    }
    free(ry);
    free(rsum);
    free(rdx);
    clt_tensor *ts[] = {tb, tdb, y, sum, dx};
    for (int i = 0; i < 5; i++) clt_tensor_release(ts[i]);
    clt_test_setenv("CLT_DEVICE_CLASS", NULL);
}

START_TEST(test_linear_half_folds)
{
    int slot = test_slot();
    for (int in_place = 0; in_place < 2; in_place++) {
        check_half_folds("cpu", in_place);
        if (clt__gemm_gpu_side(slot, 1, 1)) check_half_folds("gpu", in_place);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_gpu");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_transposes_and_edges);
    tcase_add_test(tc, test_epilogues);
    tcase_add_test(tc, test_half_form);
    tcase_add_test(tc, test_against_clblast);
    tcase_add_test(tc, test_choice);
    tcase_add_test(tc, test_linear_fold);
    tcase_add_test(tc, test_linear_half);
    tcase_add_test(tc, test_linear_half_folds);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
