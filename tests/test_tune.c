/* The autotuning cache of the CPU GEMM kernels: tiles forced through the
 * cache file are used (clt_tune_lookup) and give correct products against a
 * double-precision reference on awkward sizes, for every transposition and
 * every tile width; the default follows the device's native vector width;
 * damaged lines are ignored; clt_tune_gemm and CLT_TUNE=1
 * time the candidates and write the winner, which a later lookup reads
 * back. Runs in a private cache directory (tiles written here must not
 * reach other tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/cache.h"
#include "device/device_internal.h"
#include "kernels/program.h"
#include "ops/tune.h"
#include "support.h"

#define TOL 1e-4

static char cache_dir[] = "/tmp/clt-test-tune-XXXXXX";

typedef struct forced {
    int ta, tb;
    int64_t m, n, k;
    int tm, tn;
} forced;

/* Sizes around the tiles (1, primes, beyond one panel), each with a tile
 * that is no device's default (12 x 32, 6 x 16, 6 x 8 or 12 x 16). */
static const forced cases[] = {
    {0, 0, 37, 53, 29, 5, 8},  {0, 1, 13, 17, 131, 7, 16}, {1, 0, 1, 31, 3, 3, 8},
    {1, 1, 61, 1, 7, 16, 8},   {0, 1, 97, 41, 1, 1, 16},   {1, 0, 29, 67, 19, 9, 16},
    {1, 1, 23, 70, 11, 8, 32}, {0, 0, 14, 33, 40, 5, 32},
};

/* The default tile of a contiguous float32 product (clt__gemm_tile_default). */
static clt__gemm_tile default_tile(int ta, int64_t m, int64_t n, int64_t k)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    return clt__gemm_tile_default(slot, ta, (size_t)m, (size_t)n, (size_t)k, (size_t)(ta ? m : k), 0);
}

/* Writes the tuning cache as the library does (a cache entry: header, key,
 * checksum; src/core/cache.h): the forced cases, then extra. */
static void write_cache(const char *extra)
{
    char path[1024], text[4096];
    ck_assert_ok(clt_tune_cache_path(clt_test_device(), path, sizeof path));
    size_t n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const forced *c = &cases[i];
        n += (size_t)snprintf(text + n, sizeof text - n, "%d %d %lld %lld %lld %d %d\n", c->ta, c->tb,
                              (long long)c->m, (long long)c->n, (long long)c->k, c->tm, c->tn);
    }
    n += (size_t)snprintf(text + n, sizeof text - n, "%s", extra);
    ck_assert_uint_lt(n, sizeof text);
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    uint8_t key[32];
    clt__cache_key(slot, "tune", NULL, NULL, key);
    ck_assert_ok(clt__cache_entry_write(path, key, text, n));
}

/* clt_gemm_ of a random product of the shape, against clt_test_ref_gemm. */
static void check_product(int ta, int tb, int64_t m, int64_t n, int64_t k)
{
    float *a = malloc((size_t)(m * k) * sizeof *a), *b = malloc((size_t)(k * n) * sizeof *b);
    float *want = malloc((size_t)(m * n) * sizeof *want);
    clt_test_fill_uniform(a, m * k, 5 + (uint64_t)m, -1, 1);
    clt_test_fill_uniform(b, k * n, 7 + (uint64_t)n, -1, 1);
    clt_test_ref_gemm(ta, tb, m, n, k, 1.0f, a, b, 0.0f, want);
    int64_t sa[] = {ta ? k : m, ta ? m : k}, sb[] = {tb ? n : k, tb ? k : n}, sc[] = {m, n};
    clt_tensor *ta_, *tb_, *tc;
    ck_assert_ok(clt_from_host(&ta_, clt_test_device(), CLT_FLOAT32, 2, sa, a));
    ck_assert_ok(clt_from_host(&tb_, clt_test_device(), CLT_FLOAT32, 2, sb, b));
    ck_assert_ok(clt_full(&tc, clt_test_device(), CLT_FLOAT32, 2, sc, 3.0));
    ck_assert_ok(clt_gemm_(ta, tb, 1.0f, ta_, tb_, 0.0f, tc));
    float *got = clt_test_read(tc);
    double err = clt_test_max_rel_err(got, want, m * n);
    ck_assert_msg(err < TOL, "gemm ta=%d tb=%d %lldx%lldx%lld: max rel err %g", ta, tb, (long long)m, (long long)n,
                  (long long)k, err);
    free(got);
    free(a);
    free(b);
    free(want);
    clt_tensor_release(ta_);
    clt_tensor_release(tb_);
    clt_tensor_release(tc);
}

START_TEST(test_forced_tiles_are_used_and_correct)
{
    write_cache("garbage line\n0 0 5 5 5 0 16\n0 0 6 6 6 4 12\n1 1 7 7 7 4 16 extra\n2 0 8 8 8 4 16\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const forced *c = &cases[i];
        int tm = 0, tn = 0, tuned = 0;
        ck_assert_ok(clt_tune_lookup(clt_test_device(), c->ta, c->tb, c->m, c->n, c->k, &tm, &tn, &tuned));
        ck_assert_int_eq(tuned, 1);
        ck_assert_int_eq(tm, c->tm);
        ck_assert_int_eq(tn, c->tn);
        check_product(c->ta, c->tb, c->m, c->n, c->k);
    }
    /* Invalid tiles, a trailing field and a bad transposition are ignored. */
    const int64_t bad[][4] = {{0, 5, 5, 5}, {0, 6, 6, 6}, {1, 7, 7, 7}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int tm, tn, tuned = 1;
        ck_assert_ok(clt_tune_lookup(clt_test_device(), (int)bad[i][0], (int)bad[i][0], bad[i][1], bad[i][2], bad[i][3], &tm, &tn,
                                     &tuned));
        ck_assert_int_eq(tuned, 0);
        clt__gemm_tile d = default_tile((int)bad[i][0], bad[i][1], bad[i][2], bad[i][3]);
        ck_assert_int_eq(tm, d.tm);
        ck_assert_int_eq(tn, d.tn);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A forced tile also runs the fused bias + ReLU store. */
START_TEST(test_forced_tile_linear_relu)
{
    write_cache("");
    enum { B = 13, C = 131, OC = 17 }; /* the {0, 1, 13, 17, 131} case: tile 7 x 16 */
    float *x = malloc(B * C * sizeof *x), *w = malloc(OC * C * sizeof *w), bias[OC], want[B * OC];
    clt_test_fill_uniform(x, B * C, 1, -1, 1);
    clt_test_fill_uniform(w, OC * C, 2, -1, 1);
    clt_test_fill_uniform(bias, OC, 3, -1, 1);
    clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, 0.0f, want);
    for (int i = 0; i < B * OC; i++) want[i] = want[i] + bias[i % OC] > 0 ? want[i] + bias[i % OC] : 0.0f;
    int64_t xs[] = {B, C}, ws[] = {OC, C}, bs[] = {OC};
    clt_tensor *tx, *tw, *tb, *ty;
    ck_assert_ok(clt_from_host(&tx, clt_test_device(), CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&tw, clt_test_device(), CLT_FLOAT32, 2, ws, w));
    ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_FLOAT32, 1, bs, bias));
    ck_assert_ok(clt_linear_relu_forward(&ty, tx, tw, tb));
    float *got = clt_test_read(ty);
    ck_assert_double_lt(clt_test_max_rel_err(got, want, B * OC), TOL);
    free(got);
    free(x);
    free(w);
    clt_tensor_release(tx);
    clt_tensor_release(tw);
    clt_tensor_release(tb);
    clt_tensor_release(ty);
}
END_TEST

static int file_has_line(const char *line)
{
    char path[1024], buf[256];
    ck_assert_ok(clt_tune_cache_path(clt_test_device(), path, sizeof path));
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int found = 0;
    while (!found && fgets(buf, sizeof buf, f)) found = strcmp(buf, line) == 0;
    fclose(f);
    return found;
}

/* The default tile (a shape without a cache entry) follows the native float
 * vector width OpenCL reports for the device: 12 x 32 at 16 floats
 * (AVX-512), 6 x 16 at 8 (AVX2), 6 x 8 at 4 (SSE, NEON), else 12 x 16; with
 * at most 6 rows where A is read in place as is (a small k here), not where
 * it is transposed and packed. */
START_TEST(test_default_tile_follows_vector_width)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    cl_uint w = 0;
    ck_assert_int_eq(clGetDeviceInfo(clt__slot_get(slot)->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof w, &w,
                                     NULL), CL_SUCCESS);
    int tm = 0, tn = 0, tuned = 1;
    ck_assert_ok(clt_tune_lookup(clt_test_device(), 1, 0, 40, 300, 64, &tm, &tn, &tuned));
    ck_assert_int_eq(tuned, 0);
    int want_tm = w == 16 ? 12 : w == 8 || w == 4 ? 6 : 12, want_tn = w == 16 ? 32 : w == 8 ? 16 : w == 4 ? 8 : 16;
    ck_assert_msg(tm == want_tm && tn == want_tn, "width %u: default tile %dx%d, expected %dx%d", w, tm, tn, want_tm,
                  want_tn);
    ck_assert_ok(clt_tune_lookup(clt_test_device(), 0, 0, 3, 5, 7, &tm, &tn, &tuned));
    ck_assert_int_eq(tuned, 0);
    ck_assert_msg(tm == (want_tm < 6 ? want_tm : 6) && tn == want_tn, "width %u: default tile %dx%d for an A in place",
                  w, tm, tn);
}
END_TEST

START_TEST(test_tune_gemm_writes_cache)
{
    int tm = 0, tn = 0;
    ck_assert_ok(clt_tune_gemm(clt_test_device(), 1, 0, 23, 19, 11, &tm, &tn));
    ck_assert(tm >= 1 && (tn == 8 || tn == 16 || tn == 32));
    char line[128];
    snprintf(line, sizeof line, "1 0 23 19 11 %d %d\n", tm, tn);
    ck_assert_msg(file_has_line(line), "the tuning cache lacks \"%s\"", line);
    int tm2, tn2, tuned = 0;
    ck_assert_ok(clt_tune_lookup(clt_test_device(), 1, 0, 23, 19, 11, &tm2, &tn2, &tuned));
    ck_assert_int_eq(tuned, 1);
    ck_assert_int_eq(tm2, tm);
    ck_assert_int_eq(tn2, tn);
    check_product(1, 0, 23, 19, 11);
    ck_assert_status(clt_tune_gemm(clt_test_device(), 0, 0, 0, 4, 4, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* CLT_TUNE=1: the first product of a new shape is tuned, cached on disk, and correct. */
START_TEST(test_tune_on_first_use)
{
    int tm, tn, tuned = 1;
    ck_assert_ok(clt_tune_lookup(clt_test_device(), 0, 1, 11, 21, 5, &tm, &tn, &tuned));
    ck_assert_int_eq(tuned, 0);
    ck_assert_int_eq(setenv("CLT_TUNE", "1", 1), 0);
    check_product(0, 1, 11, 21, 5);
    ck_assert_int_eq(unsetenv("CLT_TUNE"), 0);
    ck_assert_ok(clt_tune_lookup(clt_test_device(), 0, 1, 11, 21, 5, &tm, &tn, &tuned));
    ck_assert_int_eq(tuned, 1);
    char line[128];
    snprintf(line, sizeof line, "0 1 11 21 5 %d %d\n", tm, tn);
    ck_assert_msg(file_has_line(line), "the tuning cache lacks \"%s\"", line);
}
END_TEST

int main(void)
{
    const char *cls = getenv("CLT_DEVICE_CLASS");
    if (cls && strcasecmp(cls, "gpu") == 0)
        return clt_test_skip_all("cpu-class", "tuning is for CPU-class devices, and CLT_DEVICE_CLASS=gpu");
    /* The tuning cache and the kernel cache share the directory: start from
     * an empty one so no earlier tile is read. */
    if (!mkdtemp(cache_dir)) return 1;
    setenv("CLT_CACHE_DIR", cache_dir, 1);
    setenv("CLT_DENSE", "cpu", 1);
    Suite *s = suite_create("tune");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_forced_tiles_are_used_and_correct);
    tcase_add_test(tc, test_forced_tile_linear_relu);
    tcase_add_test(tc, test_default_tile_follows_vector_width);
    tcase_add_test(tc, test_tune_gemm_writes_cache);
    tcase_add_test(tc, test_tune_on_first_use);
    suite_add_tcase(s, tc);
    int rc = clt_test_run(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0) rc = 1;
    return rc;
}
