/* The float16 forms of the CPU GEMM kernels (cl/gemm_cpu_f16.cl, _f16) and the
 * float16 Linear built on them (clt__linear_forward_f16 / _backward_f16):
 * float16 operands read directly, float32 accumulation, float16 results.
 * Each product is checked twice: bit for bit against the float32 kernel of
 * the same tile on the widened operands, rounded to float16 on the host
 * (the path float16 took before, whose accumulation order is the same), and
 * against a plain C reference to float16's precision. Awkward sizes (1,
 * primes, non-multiples of the tile), every transposition, beta = 1
 * accumulation into float16, bias and ReLU, and tiles other than the
 * default; views at nonzero offsets whose neighbouring rows stay untouched;
 * the operand checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linear_f16.h"
#include "ops/ops_internal.h"
#include "ops/tune.h"
#include "support.h"

/* Against the reference: float16 rounding (2^-11 relative) and float32 sums. */
#define TOL 1e-3

#define FILL 0x4700 /* 7.0 in float16, in the rows around each view */

/* n random values that float16 holds exactly. */
static float *random_halves(int64_t n, uint64_t seed)
{
    float *x = clt_test_random_floats(n, seed);
    for (int64_t i = 0; i < n; i++) x[i] = clt_half_to_float(clt_float_to_half(x[i]));
    return x;
}

/* As clt_test_upload_view, in float16: the view of rows at row 1 of a
 * (rows + 2, cols) tensor whose other rows are FILL. */
static clt_tensor *upload_half_view(const float *x, int64_t rows, int64_t cols, clt_tensor **base)
{
    int64_t total = (rows + 2) * cols, shape[] = {rows + 2, cols};
    uint16_t *h = malloc((size_t)total * sizeof *h + 2);
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < total; i++)
        h[i] = i >= cols && i < (rows + 1) * cols ? clt_float_to_half(x[i - cols]) : FILL;
    ck_assert_ok(clt_from_host(base, clt_test_device(), CLT_FLOAT16, 2, shape, h));
    free(h);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, 1, rows));
    return v;
}

static uint16_t *read_bits(const clt_tensor *t)
{
    size_t n = (size_t)clt_tensor_numel(t);
    uint16_t *h = malloc(n * sizeof *h + 2);
    ck_assert_ptr_nonnull(h);
    ck_assert_ok(clt_to_host(t, h, n * sizeof *h));
    return h;
}

/* A float32 tensor's values rounded to float16 on the host, as f32_to_f16. */
static uint16_t *read_narrowed(const clt_tensor *t)
{
    float *f = clt_test_read(t);
    size_t n = (size_t)clt_tensor_numel(t);
    uint16_t *h = malloc(n * sizeof *h + 2);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < n; i++) h[i] = clt_float_to_half(f[i]);
    free(f);
    return h;
}

static void assert_same_bits(const uint16_t *got, const uint16_t *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        CLT_TEST_REQUIRE(got[i] == want[i], "%s: element %lld is 0x%04x, the float32 path's 0x%04x", what,
                         (long long)i, got[i], want[i]);
}

/* c = alpha op(a) op(b) + beta c (+ bias, then ReLU) with the given tile. */
static void check_gemm(clt__gemm_tile tile, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                       int with_bias, int relu)
{
    uint64_t seed = (uint64_t)(m * 1000003 + n * 1009 + k);
    float *a = random_halves(m * k, seed), *b = random_halves(k * n, seed + 1), *c = random_halves(m * n, seed + 2);
    float *bias = random_halves(n, seed + 3);
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    clt_tensor *ab16, *bb16, *cb16, *ab32, *bb32, *cb32, *bias16 = NULL, *bias32 = NULL;
    clt_tensor *a16 = upload_half_view(a, ar, ac, &ab16), *b16 = upload_half_view(b, br, bc, &bb16);
    clt_tensor *c16 = upload_half_view(c, m, n, &cb16);
    clt_tensor *a32 = clt_test_upload_view(clt_test_device(), a, ar, ac, 1, 7.0f, &ab32);
    clt_tensor *b32 = clt_test_upload_view(clt_test_device(), b, br, bc, 1, 7.0f, &bb32);
    clt_tensor *c32 = clt_test_upload_view(clt_test_device(), c, m, n, 1, 7.0f, &cb32);
    if (with_bias) {
        uint16_t *h = malloc((size_t)n * sizeof *h);
        ck_assert_ptr_nonnull(h);
        for (int64_t j = 0; j < n; j++) h[j] = clt_float_to_half(bias[j]);
        ck_assert_ok(clt_from_host(&bias16, clt_test_device(), CLT_FLOAT16, 1, &n, h));
        ck_assert_ok(clt_from_host(&bias32, clt_test_device(), CLT_FLOAT32, 1, &n, bias));
        free(h);
    }
    int slot = a16->st->slot;
    ck_assert_ok(clt__cpu_gemm(slot, tile, ta, tb, (size_t)m, (size_t)n, (size_t)k, alpha, a16, (size_t)ac, b16,
                               (size_t)bc, beta, c16, (size_t)n, bias16, relu));
    ck_assert_ok(clt__cpu_gemm(slot, tile, ta, tb, (size_t)m, (size_t)n, (size_t)k, alpha, a32, (size_t)ac, b32,
                               (size_t)bc, beta, c32, (size_t)n, bias32, relu));
    char what[160];
    snprintf(what, sizeof what, "tile %dx%d ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g bias=%d relu=%d",
             tile.tm, tile.tn, ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, with_bias, relu);
    uint16_t *got = read_bits(c16), *want = read_narrowed(c32);
    assert_same_bits(got, want, m * n, what);

    clt_test_ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    float *gf = malloc((size_t)(m * n) * sizeof *gf);
    ck_assert_ptr_nonnull(gf);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float r = c[i * n + j] + (with_bias ? bias[j] : 0.0f);
            c[i * n + j] = relu && r < 0.0f ? 0.0f : r;
            gf[i * n + j] = clt_half_to_float(got[i * n + j]);
        }
    double err = clt_test_max_rel_err(gf, c, m * n);
    ck_assert_msg(err < TOL, "%s: error %g against the reference", what, err);

    uint16_t *all = read_bits(cb16);
    for (int64_t i = 0; i < n; i++)
        CLT_TEST_REQUIRE(all[i] == FILL, "%s: guard element %lld is 0x%04x", what, (long long)i, all[i]);
    for (int64_t i = (m + 1) * n; i < (m + 2) * n; i++)
        CLT_TEST_REQUIRE(all[i] == FILL, "%s: guard element %lld is 0x%04x", what, (long long)i, all[i]);
    free(all);
    free(got);
    free(want);
    free(gf);
    free(a);
    free(b);
    free(c);
    free(bias);
    clt_tensor *ts[] = {a16, b16, c16, a32, b32, c32, ab16, bb16, cb16, ab32, bb32, cb32, bias16, bias32};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
}

/* Around the built-in tile (12 rows, 32 columns), primes, one, many panels. */
static const int64_t sizes[][3] = {{1, 1, 1},   {12, 16, 1}, {13, 17, 5},   {11, 15, 31}, {13, 33, 9},
                                   {1, 100, 7}, {100, 1, 7}, {37, 129, 64}, {61, 47, 257}};

START_TEST(test_f16_sizes_and_transposes)
{
    for (int t = 0; t < 4; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            check_gemm(CLT__TILE_BUILT_IN, t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2], 0.75f, 0.0f, 0, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* beta = 1 reads and rounds the float16 c once, as backward's dw += dy^T x;
 * other alpha and beta; rows 2 KiB apart (1024 halves). */
START_TEST(test_f16_accumulate)
{
    static const float ab[][2] = {{1.0f, 1.0f}, {-2.0f, 1.0f}, {0.5f, -1.5f}};
    for (int t = 0; t < 4; t++)
        for (size_t j = 0; j < sizeof ab / sizeof ab[0]; j++) {
            check_gemm(CLT__TILE_BUILT_IN, t & 1, t >> 1, 29, 35, 19, ab[j][0], ab[j][1], 0, 0);
            check_gemm(CLT__TILE_BUILT_IN, t & 1, t >> 1, 1, 7, 131, ab[j][0], ab[j][1], 0, 0);
        }
    check_gemm(CLT__TILE_BUILT_IN, 1, 0, 1024, 19, 29, 1.0f, 1.0f, 0, 0);
    check_gemm(CLT__TILE_BUILT_IN, 0, 0, 25, 1024, 1024, 1.0f, 1.0f, 0, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The forward's epilogue: float16 bias on every row, with and without ReLU. */
START_TEST(test_f16_bias_relu)
{
    for (int t = 0; t < 4; t++)
        for (int relu = 0; relu < 2; relu++) {
            check_gemm(CLT__TILE_BUILT_IN, t & 1, t >> 1, 37, 53, 10, 1.0f, 0.0f, 1, relu);
            check_gemm(CLT__TILE_BUILT_IN, t & 1, t >> 1, 1, 19, 7, 1.0f, 0.0f, 1, relu);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Tiles `clt tune` may pick: programs built with their own -DTM= -DTN=. */
START_TEST(test_f16_other_tiles)
{
    static const clt__gemm_tile tiles[] = {{5, 8}, {7, 16}, {3, 8}, {12, 16}, {6, 16}, {6, 32}};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
        for (int t = 0; t < 4; t++) {
            check_gemm(tiles[i], t & 1, t >> 1, 13, 17, 31, 1.0f, 1.0f, 0, 0);
            check_gemm(tiles[i], t & 1, t >> 1, 23, 9, 5, 1.0f, 0.0f, 1, 1);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* clt__dense_gemm_f16 refuses what it cannot do: k = 0, or CLT_DENSE=clblast. */
START_TEST(test_f16_gemm_unsupported)
{
    int64_t s[] = {3, 4};
    clt_tensor *a;
    ck_assert_ok(clt_zeros(&a, clt_test_device(), CLT_FLOAT16, 2, s));
    int slot = a->st->slot;
    ck_assert_status(clt__dense_gemm_f16(slot, 0, 0, 3, 4, 0, 1.0f, a, 4, a, 4, 0.0f, a, 4, NULL),
                     CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "k=0"));
    ck_assert_int_eq(setenv("CLT_DENSE", "clblast", 1), 0);
    ck_assert_status(clt__dense_gemm_f16(slot, 0, 0, 3, 4, 4, 1.0f, a, 4, a, 4, 0.0f, a, 4, NULL),
                     CLT_ERR_UNSUPPORTED);
    unsetenv("CLT_DENSE");
    clt_tensor_release(a);
    clt_test_assert_no_live_tensors();
}
END_TEST

static clt_tensor *upload_half(const float *x, int ndim, const int64_t *shape)
{
    int64_t n = ndim == 1 ? shape[0] : shape[0] * shape[1];
    uint16_t *h = malloc((size_t)n * sizeof *h + 2);
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++) h[i] = clt_float_to_half(x[i]);
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_FLOAT16, ndim, shape, h));
    free(h);
    return t;
}

static clt_tensor *upload_float(const float *x, int ndim, const int64_t *shape)
{
    clt_tensor *t;
    ck_assert_ok(clt_from_host(&t, clt_test_device(), CLT_FLOAT32, ndim, shape, x));
    return t;
}

/* h[i] = half(float(h[i]) + f[i]): a fresh float32 sum added to a float16
 * gradient once (accumulate_f16). */
static void add_into(uint16_t *h, const clt_tensor *f32, int64_t n)
{
    float *f = clt_test_read(f32);
    for (int64_t i = 0; i < n; i++) h[i] = clt_float_to_half(clt_half_to_float(h[i]) + f[i]);
    free(f);
}

/* The float16 Linear on the CPU kernels (no float32 copies) against the
 * float32 layer on the widened values, rounded as the float16 path did
 * before (bit for bit), and y against the plain C reference. */
static void check_linear(int64_t B, int64_t C, int64_t OC)
{
    uint64_t seed = (uint64_t)(B * 131 + C * 17 + OC);
    float *x = random_halves(B * C, seed), *w = random_halves(OC * C, seed + 1), *b = random_halves(OC, seed + 2);
    float *dy = random_halves(B * OC, seed + 3), *dw = random_halves(OC * C, seed + 4);
    float *db = random_halves(OC, seed + 5);
    int64_t sx[] = {B, C}, sw[] = {OC, C}, sy[] = {B, OC};
    clt_tensor *x16 = upload_half(x, 2, sx), *w16 = upload_half(w, 2, sw), *b16 = upload_half(b, 1, &OC);
    clt_tensor *dy16 = upload_half(dy, 2, sy), *dw16 = upload_half(dw, 2, sw), *db16 = upload_half(db, 1, &OC);
    clt_tensor *y16, *dx16;
    ck_assert_ok(clt__linear_forward_f16(&y16, x16, w16, b16));
    ck_assert_ok(clt__linear_backward_f16(&dx16, dw16, db16, dy16, x16, w16));
    ck_assert_int_eq(clt_tensor_dtype(y16), CLT_FLOAT16);
    ck_assert_int_eq(clt_tensor_dtype(dx16), CLT_FLOAT16);

    ck_assert_int_eq(setenv("CLT_DENSE", "cpu", 1), 0);
    clt_tensor *x32 = upload_float(x, 2, sx), *w32 = upload_float(w, 2, sw), *b32 = upload_float(b, 1, &OC);
    clt_tensor *dy32 = upload_float(dy, 2, sy), *dw32, *db32, *y32, *dx32;
    ck_assert_ok(clt_zeros(&dw32, clt_test_device(), CLT_FLOAT32, 2, sw));
    ck_assert_ok(clt_zeros(&db32, clt_test_device(), CLT_FLOAT32, 1, &OC));
    ck_assert_ok(clt_linear_forward(&y32, x32, w32, b32));
    ck_assert_ok(clt_linear_backward_(&dx32, dw32, db32, dy32, x32, w32));
    unsetenv("CLT_DENSE");

    char what[96];
    snprintf(what, sizeof what, "linear B=%lld C=%lld OC=%lld", (long long)B, (long long)C, (long long)OC);
    uint16_t *got = read_bits(y16), *want = read_narrowed(y32);
    assert_same_bits(got, want, B * OC, what);
    float *ref = malloc((size_t)(B * OC) * sizeof *ref), *gf = malloc((size_t)(B * OC) * sizeof *gf);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(gf);
    for (int64_t i = 0; i < B * OC; i++) {
        ref[i] = b[i % OC];
        gf[i] = clt_half_to_float(got[i]);
    }
    clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, 1.0f, ref);
    ck_assert_msg(clt_test_max_rel_err(gf, ref, B * OC) < TOL, "%s: y against the reference", what);
    free(got);
    free(want);
    free(ref);
    free(gf);

    got = read_bits(dx16);
    want = read_narrowed(dx32);
    assert_same_bits(got, want, B * C, what);
    free(got);
    free(want);
    want = malloc((size_t)(OC * C) * sizeof *want);
    ck_assert_ptr_nonnull(want);
    for (int64_t i = 0; i < OC * C; i++) want[i] = clt_float_to_half(dw[i]);
    add_into(want, dw32, OC * C);
    got = read_bits(dw16);
    assert_same_bits(got, want, OC * C, what);
    free(got);
    for (int64_t i = 0; i < OC; i++) want[i] = clt_float_to_half(db[i]);
    add_into(want, db32, OC);
    got = read_bits(db16);
    assert_same_bits(got, want, OC, what);
    free(got);
    free(want);

    free(x);
    free(w);
    free(b);
    free(dy);
    free(dw);
    free(db);
    clt_tensor *ts[] = {x16, w16, b16, dy16, dw16, db16, y16, dx16, x32, w32, b32, dy32, dw32, db32, y32, dx32};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
}

START_TEST(test_f16_linear)
{
    check_linear(37, 53, 10);
    check_linear(1, 7, 19);
    check_linear(64, 784, 16);
    check_linear(13, 1, 1);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The float16 Linear checks its operands as the float32 one does. */
START_TEST(test_f16_linear_errors)
{
    int64_t sx[] = {4, 3}, sw[] = {5, 2}, sb[] = {5}, sd[] = {4, 6};
    clt_tensor *x, *w, *b, *x32, *dy, *y = NULL, *dx = NULL;
    ck_assert_ok(clt_zeros(&x, clt_test_device(), CLT_FLOAT16, 2, sx));
    ck_assert_ok(clt_zeros(&w, clt_test_device(), CLT_FLOAT16, 2, sw));
    ck_assert_ok(clt_zeros(&b, clt_test_device(), CLT_FLOAT16, 1, sb));
    ck_assert_ok(clt_zeros(&x32, clt_test_device(), CLT_FLOAT32, 2, sx));
    ck_assert_ok(clt_zeros(&dy, clt_test_device(), CLT_FLOAT16, 2, sd));
    ck_assert_status(clt__linear_forward_f16(&y, x, w, b), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "w must be (OC,C)"));
    ck_assert_ptr_null(y);
    ck_assert_status(clt__linear_forward_f16(&y, x32, w, b), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "x must be float16"));
    clt_tensor *w3;
    int64_t sw3[] = {5, 3};
    ck_assert_ok(clt_zeros(&w3, clt_test_device(), CLT_FLOAT16, 2, sw3));
    ck_assert_status(clt__linear_backward_f16(&dx, w3, b, dy, x, w3), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "dy must be (B,OC)"));
    ck_assert_ptr_null(dx);
    clt_tensor *ts[] = {x, w, b, x32, dy, w3};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_f16");
    TCase *tc = clt_test_tcase("gemm_f16");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_f16_sizes_and_transposes);
    tcase_add_test(tc, test_f16_accumulate);
    tcase_add_test(tc, test_f16_bias_relu);
    tcase_add_test(tc, test_f16_other_tiles);
    tcase_add_test(tc, test_f16_gemm_unsupported);
    tcase_add_test(tc, test_f16_linear);
    tcase_add_test(tc, test_f16_linear_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
