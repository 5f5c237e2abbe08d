/* Both dense implementations (CLT_DENSE=cpu: the register-tiled kernels of
 * cl/gemm_cpu.cl; CLT_DENSE=clblast) through clt_gemm_ against a plain C
 * reference with double accumulation: every transpose combination on views
 * with offsets, sizes around the 12 x 16 and 12 x 32 tiles and their panels,
 * a leading dimension of 4 KiB, alpha/beta cases, empty sizes, the linear
 * layer, products large enough for this CPU's caches that the CPU kernels
 * run them blocked (several launches over blocks of depths, A and B packed),
 * and every tile `clt tune` or a device's default may pick. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "ops/tune.h"
#include "support.h"

#define TOL 1e-4

static const char *const impls[] = {"cpu", "clblast"};

/* The device under test: gpu:0 when CLT_CPU_AS_GPU presents one, else cpu:0. */
static void use_impl(const char *impl) { ck_assert_int_eq(setenv("CLT_DENSE", impl, 1), 0); }

/* The device's slot. */
static int test_slot(void)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    return slot;
}

/* The device's default tile (clt__cpu_tile_default). */
static clt__gemm_tile default_tile(void) { return clt__cpu_tile_default(test_slot()); }

/* One product through clt_gemm_ on padded views, checked against ref_gemm;
 * the rows around c's view stay untouched. c starts as NaN when beta is 0. */
static void check_gemm(const char *impl, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, float beta)
{
    use_impl(impl);
    float *a = clt_test_random_floats(m * k, 1 + (uint64_t)(m * 7 + k)), *b = clt_test_random_floats(k * n, 2 + (uint64_t)(n * 5 + k));
    float *c = clt_test_random_floats(m * n, 3 + (uint64_t)k);
    if (beta == 0.0f)
        for (int64_t i = 0; i < m * n; i++) c[i] = NAN;
    clt_tensor *ab, *bb, *cb;
    clt_tensor *va = clt_test_upload_view(clt_test_device(), a, ta ? k : m, ta ? m : k, 3, 9.0f, &ab);
    clt_tensor *vb = clt_test_upload_view(clt_test_device(), b, tb ? n : k, tb ? k : n, 1, 9.0f, &bb);
    clt_tensor *vc = clt_test_upload_view(clt_test_device(), c, m, n, 2, 7.0f, &cb);
    ck_assert_ok(clt_gemm_(ta, tb, alpha, va, vb, beta, vc));
    clt_test_ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    float *got = clt_test_read(vc);
    double err = clt_test_max_rel_err(got, c, m * n);
    ck_assert_msg(err < TOL, "%s gemm ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g: error %g", impl, ta, tb,
                  (long long)m, (long long)n, (long long)k, alpha, beta, err);
    float *all = clt_test_read(cb);
    for (int64_t i = 0; i < 2 * n; i++) ck_assert_float_eq(all[i], 7.0f);
    for (int64_t i = (m + 2) * n; i < (m + 4) * n; i++) ck_assert_float_eq(all[i], 7.0f);
    free(all);
    free(got);
    free(a);
    free(b);
    free(c);
    clt_tensor_release(va);
    clt_tensor_release(vb);
    clt_tensor_release(vc);
    clt_tensor_release(ab);
    clt_tensor_release(bb);
    clt_tensor_release(cb);
}

START_TEST(test_gemm_sizes_and_transposes)
{
    /* Around the tiles (12 rows, 16 or 32 columns), primes, one, many panels. */
    static const int64_t sizes[][3] = {{1, 1, 1},    {12, 16, 1},   {13, 17, 5},   {11, 15, 31}, {24, 32, 16},
                                       {13, 33, 9},  {12, 31, 3},   {1, 100, 7},   {100, 1, 7},  {37, 129, 64},
                                       {61, 47, 257}, {256, 80, 33}};
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 4; t++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                check_gemm(impls[i], t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2], 0.75f, 0.5f);
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Rows 4 KiB apart (1024 floats) in every operand, and a K past one panel's cache footprint; A
 * and B as is with such rows are packed. */
START_TEST(test_gemm_power_of_two_strides)
{
    /* On a simulator 13 rows (a full panel and a partial one) instead of 25,
     * and 256 columns: A's rows (and a transposed B's) stay 4 KiB apart; B
     * as is with rows 4 KiB apart comes below. */
    int sim = clt_test_simulated();
    int64_t rows = sim ? 13 : 25, cols = sim ? 256 : 1024;
    for (int t = 0; t < 4; t++) check_gemm("cpu", t & 1, t >> 1, rows, cols, 1024, 1.0f, 1.0f);
    /* A packed into row panels: a partial last panel (37 rows) and depth block (k 29). */
    check_gemm("cpu", 0, 0, 37, 20, 1024, 1.0f, 0.5f);
    check_gemm("cpu", 0, 1, 37, 20, 1024, 1.0f, 0.0f);
    check_gemm("cpu", 1, 0, 1024, 19, 29, 0.5f, 1.0f);
    check_gemm("cpu", 1, 1, 1024, 19, 29, 1.0f, 0.0f);
    /* B as is with rows 4 KiB or 2 KiB (and 6 KiB) apart is packed too, with a k (40, 21) unlike its rows'
     * length; 520 floats apart it is read in place (with a 4 KiB way of L1, as on the CPUs measured). */
    clt__gemm_tile tile = default_tile();
    clt__cpu_l1_way_override(4096);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 512, 40, 512, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 7, 1536, 21, 1536, tile), 0);
    ck_assert_int_eq(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 520, 40, 520, tile), 0);
    clt__cpu_l1_way_override(0);
    check_gemm("cpu", 0, 0, 13, 1024, 40, 1.0f, 0.5f);
    check_gemm("cpu", 1, 0, 13, 1024, 40, 0.75f, 0.0f);
    check_gemm("cpu", 0, 0, 13, 512, 40, 1.0f, 0.5f);
    check_gemm("cpu", 1, 0, 7, 1536, 21, 0.75f, 0.0f);
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The packing rules follow L1's way (clt__cpu_l1_way): with an 8 KiB way
 * (a 64 KiB 8-way L1) an A as is whose rows are 4 KiB apart is read in
 * place and 8 KiB apart packed, a B as is 2 KiB apart read in place and
 * 4 KiB apart packed; with a 2 KiB way rows 2 KiB apart pack A and 1 KiB
 * apart pack B. Products match the reference either way. */
START_TEST(test_gemm_l1_way)
{
    clt__gemm_tile tile = default_tile();
    int slot = test_slot();
    clt__cpu_l1_way_override(8192);
    ck_assert_uint_eq(clt__cpu_l1_way(slot), 8192);
    ck_assert_int_eq(clt__cpu_gemm_pack_a_bytes(slot, 0, 13, 20, 1024, 1024, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_a_bytes(slot, 0, 13, 20, 40, 2048, tile), 0);
    ck_assert_int_eq(clt__cpu_gemm_pack_b_bytes(slot, 0, 13, 512, 40, 512, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(slot, 0, 13, 1024, 40, 1024, tile), 0);
    check_gemm("cpu", 0, 0, 13, 1024, 40, 1.0f, 0.5f);
    check_gemm("cpu", 0, 0, 13, 20, 2048, 1.0f, 0.0f);
    clt__cpu_l1_way_override(2048);
    ck_assert_int_gt(clt__cpu_gemm_pack_a_bytes(slot, 0, 13, 20, 512, 512, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(slot, 0, 13, 256, 40, 256, tile), 0);
    check_gemm("cpu", 0, 0, 13, 20, 512, 0.75f, 0.5f);
    check_gemm("cpu", 0, 0, 13, 256, 40, 1.0f, 0.0f);
    clt__cpu_l1_way_override(0);
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A transposed A (rows not a multiple of L1's way apart) is read in place
 * by up to 8 column panels and packed for more (clt__cpu_gemm_pack_a_bytes):
 * products on both sides of that width, partial row tiles and panels, match
 * the reference. */
START_TEST(test_gemm_transposed_a_panels)
{
    clt__gemm_tile tile = default_tile();
    int slot = test_slot();
    int64_t wide = 8 * tile.tn;
    clt__cpu_l1_way_override(4096);
    ck_assert_int_eq(clt__cpu_gemm_pack_a_bytes(slot, 1, 37, (size_t)wide, 100, 37, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_a_bytes(slot, 1, 37, (size_t)wide + 1, 100, 37, tile), 0);
    ck_assert_int_eq(clt__cpu_gemm_pack_a_bytes(slot, 1, 256, (size_t)wide - 5, 256, 256, tile), 0);
    clt__cpu_l1_way_override(0);
    for (int tb = 0; tb < 2; tb++) {
        check_gemm("cpu", 1, tb, 37, wide - 5, 100, 0.75f, 0.5f);
        check_gemm("cpu", 1, tb, 37, wide + 1, 100, 1.0f, 0.0f);
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* An unblocked product's work-item computes row tiles of its column panel
 * for 2^16 fmas, while the launch keeps 8 work-items a compute unit
 * (clt__cpu_gemm_row_tiles): one tile a work-item when a tile is deep
 * enough; products whose work-items take several tiles in uneven row
 * blocks, the last tile partial and C NaN (beta 0) or kept (beta 0.5),
 * match the reference. */
START_TEST(test_gemm_row_tiles)
{
    clt__gemm_tile tile = default_tile();
    int slot = test_slot();
    cl_uint units = 0;
    ck_assert_int_eq(clGetDeviceInfo(clt__slot_get(slot)->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                                     NULL), CL_SUCCESS);
    size_t tm = (size_t)tile.tm, tn = (size_t)tile.tn, fmas = tm * tn, deep = (((size_t)1 << 16) + fmas - 1) / fmas;
    ck_assert_uint_eq(clt__cpu_gemm_row_tiles(slot, 1000, 1000, deep, tile), 1);
    /* Panels enough for 8 work-items a unit in one row block: the tiles
     * that make 2^16 fmas at depth 16, all 40 when fewer. */
    size_t n = 8 * units * tn, want = (((size_t)1 << 16) + fmas * 16 - 1) / (fmas * 16);
    ck_assert_uint_eq(clt__cpu_gemm_row_tiles(slot, 40 * tm, n, 16, tile), want < 40 ? want : 40);
    /* One panel: 8 units' worth of row blocks of 2 tiles each out of 16 units' worth of tiles. */
    ck_assert_uint_eq(clt__cpu_gemm_row_tiles(slot, 16 * units * tm, tn, 1, tile), 2);
    for (int t = 0; t < 4; t++) {
        check_gemm("cpu", t & 1, t >> 1, (int64_t)(9 * tm - 5), (int64_t)n + 5, 16, 1.0f, 0.0f);
        check_gemm("cpu", t & 1, t >> 1, (int64_t)(16 * units * tm + 7), (int64_t)tn - 3, 5, 0.75f, 0.5f);
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A B as is whose panel of k rows cannot stay in L2 for the rows' stride
 * (k times its largest power-of-two factor in bytes past L2's size) is
 * packed: with L2 at 64 KiB, rows 1 KiB apart (256 floats) from k 65 on,
 * rows 3136 bytes apart (784 floats, a factor of 64) not at k 500. */
START_TEST(test_gemm_deep_b_packed)
{
    size_t l1, l2;
    clt__cpu_cache_sizes_override(0, 0);
    clt__cpu_cache_sizes(test_slot(), &l1, &l2);
    clt__cpu_cache_sizes_override(l1, 64 * 1024);
    clt__gemm_tile tile = default_tile();
    ck_assert_int_eq(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 256, 64, 256, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 256, 65, 256, tile), 0);
    ck_assert_int_eq(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 784, 500, 784, tile), 0);
    ck_assert_int_gt(clt__cpu_gemm_pack_b_bytes(test_slot(), 0, 13, 768, 65, 768, tile), 0);
    for (int t = 0; t < 2; t++) {
        check_gemm("cpu", t, 0, 13, 256, 100, 1.0f, 0.5f);
        check_gemm("cpu", t, 0, 25, 768, 70, 0.75f, 0.0f);
    }
    clt__cpu_cache_sizes_override(0, 0);
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Caches that block products of half the size the CPU's own caches would
 * (L2 half of this CPU's, so that a row block still holds several tiles),
 * or 8 KiB and 16 KiB on a simulator,
 * until clt__cpu_cache_sizes_override(0, 0). */
static void small_caches(void)
{
    size_t l1, l2;
    clt__cpu_cache_sizes_override(0, 0);
    clt__cpu_cache_sizes(test_slot(), &l1, &l2);
    if (clt_test_simulated()) clt__cpu_cache_sizes_override(8 * 1024, 16 * 1024);
    else clt__cpu_cache_sizes_override(l1, l2 / 2);
}

/* A shape the current cache sizes make blocked (clt__cpu_gemm_blocking,
 * default tile): A past twice L2, k two blocks of depths and a partial
 * third, n >= 512 and not a multiple of 16 or 32, m not a multiple of the
 * tile or of a row block. */
static void blocked_shape(int64_t *m, int64_t *n, int64_t *k, int64_t *kc)
{
    size_t l1, l2;
    clt__cpu_cache_sizes(test_slot(), &l1, &l2);
    clt__gemm_tile tile = default_tile();
    clt__gemm_blocking bl = clt__cpu_gemm_blocking(test_slot(), 1 << 20, 1 << 20, 1 << 20, tile);
    ck_assert_uint_gt(bl.kc, 0);
    *kc = (int64_t)bl.kc;
    *k = (int64_t)(2 * bl.kc + 37);
    *m = (int64_t)(2 * l2 / sizeof(float) / (size_t)*k) + 13;
    *n = 531;
    bl = clt__cpu_gemm_blocking(test_slot(), (size_t)*m, (size_t)*n, (size_t)*k, tile);
    ck_assert_msg(bl.kc > 0 && (size_t)*m % (bl.mtiles * (size_t)tile.tm) != 0, "m=%lld n=%lld k=%lld is not blocked",
                  (long long)*m, (long long)*n, (long long)*k);
}

/* Blocked products over several counts of row tiles, the last tile partial:
 * the kernel splits ceil(tiles / mtiles) row blocks as evenly as the tiles
 * allow, and every tile must be computed (a tile missed keeps -0.5 C). A
 * row block's A (mtiles x tm x kc floats) is the most whole tiles that fit
 * a quarter of L2 (with a 4 MiB L2, several). */
START_TEST(test_gemm_row_blocks)
{
    int64_t m, n, k, kc;
    size_t l1, l2;
    clt__gemm_tile tile = default_tile();
    clt__cpu_cache_sizes_override(0, 0);
    clt__cpu_cache_sizes(test_slot(), &l1, &l2);
    clt__cpu_cache_sizes_override(l1, (size_t)4 << 20);
    clt__gemm_blocking big = clt__cpu_gemm_blocking(test_slot(), 1 << 20, 1 << 20, 1 << 20, tile);
    size_t tile_bytes = (size_t)tile.tm * big.kc * sizeof(float);
    ck_assert_msg(big.mtiles > 1 && big.mtiles * tile_bytes <= (1u << 20) && (big.mtiles + 1) * tile_bytes > (1u << 20),
                  "%zu tiles of %zu bytes in a row block with a 4 MiB L2", big.mtiles, tile_bytes);
    small_caches();
    blocked_shape(&m, &n, &k, &kc);
    size_t most = clt__cpu_gemm_blocking(test_slot(), (size_t)m, (size_t)n, (size_t)k, tile).mtiles;
    /* q blocks of tiles reach past m, the smallest blocked height. */
    size_t tiles = ((size_t)m + (size_t)tile.tm - 1) / (size_t)tile.tm, q = (tiles + most - 1) / most;
    if (q < 2) q = 2;
    size_t counts[] = {q * most + 1, (q + 1) * most - 1, (q + 1) * most + 1};
    int checked = 0;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t rows = (int64_t)(counts[i] * (size_t)tile.tm) - 5;
        if (clt__cpu_gemm_blocking(test_slot(), (size_t)rows, (size_t)n, (size_t)k, tile).kc == 0) continue;
        check_gemm("cpu", 0, 0, rows, n, k, 1.0f, -0.5f);
        checked++;
    }
    ck_assert_int_ge(checked, 2);
    clt__cpu_cache_sizes_override(0, 0);
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Blocked products: every transpose, beta 0 over NaN and beta accumulating,
 * a fused bias + ReLU whose bias goes in with the first block of depths
 * and the ReLU with the last; and a K that just fits one block, unblocked. */
START_TEST(test_gemm_blocked)
{
    int64_t m, n, k, kc;
    /* Smaller caches block a smaller product the same way (two blocks of
     * depths and a partial third): 221 x 531 x 1573 with an Ice Lake's
     * 48 KiB and half of its 1.25 MiB, 40 x 531 x 293 on a simulator,
     * against 429 x 531 x 1573 with the whole L2. */
    small_caches();
    blocked_shape(&m, &n, &k, &kc);
    for (int t = 0; t < 4; t++) check_gemm("cpu", t & 1, t >> 1, m, n, k, 0.75f, t == 3 ? 0.0f : -0.5f);
    ck_assert_uint_eq(clt__cpu_gemm_blocking(test_slot(), (size_t)m, (size_t)n, (size_t)kc, default_tile()).kc, 0);
    check_gemm("cpu", 0, 0, m, n, kc, 1.0f, 1.0f);
    /* y = relu(x w^T + b), x (m,k), w (n,k). */
    float *x = clt_test_random_floats(m * k, 51), *w = clt_test_random_floats(n * k, 52), *b = clt_test_random_floats(n, 53);
    clt_tensor *tx = clt_test_upload(clt_test_device(), x, m, k), *tw = clt_test_upload(clt_test_device(), w, n, k), *tb, *y;
    ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_FLOAT32, 1, &n, b));
    use_impl("cpu");
    ck_assert_ok(clt_linear_relu_forward(&y, tx, tw, tb));
    float *want = malloc((size_t)(m * n) * sizeof *want);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) want[i * n + j] = b[j];
    clt_test_ref_gemm(0, 1, m, n, k, 1.0f, x, w, 1.0f, want);
    int64_t negative = 0;
    for (int64_t i = 0; i < m * n; i++)
        if (want[i] < 0.0f) {
            want[i] = 0.0f;
            negative++;
        }
    ck_assert_int_gt(negative, m * n / 10);
    float *got = clt_test_read(y);
    ck_assert_msg(clt_test_max_rel_err(got, want, m * n) < TOL, "blocked linear + relu forward");
    free(got);
    free(want);
    free(x);
    free(w);
    free(b);
    clt_tensor_release(tx);
    clt_tensor_release(tw);
    clt_tensor_release(tb);
    clt_tensor_release(y);
    unsetenv("CLT_DENSE");
    clt__cpu_cache_sizes_override(0, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* beta = 0 ignores c even when it holds NaN; beta = 1 accumulates; negative alpha. */
START_TEST(test_gemm_alpha_beta)
{
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-2.0f, 0.0f}, {0.5f, -1.5f}};
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < sizeof ab / sizeof ab[0]; j++) {
            check_gemm(impls[i], 0, 1, 29, 35, 19, ab[j][0], ab[j][1]);
            check_gemm(impls[i], 1, 0, 14, 18, 40, ab[j][0], ab[j][1]);
        }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* One product through clt__cpu_gemm with a given tile (bias and ReLU when
 * relu), against the reference. */
static void check_tile(clt__gemm_tile tile, int ta, int tb, int64_t m, int64_t n, int64_t k, float beta, int relu)
{
    float *a = clt_test_random_floats(m * k, 61), *b = clt_test_random_floats(k * n, 62);
    float *c = clt_test_random_floats(m * n, 63), *bias = clt_test_random_floats(n, 64);
    clt_tensor *ta_ = clt_test_upload(clt_test_device(), a, ta ? k : m, ta ? m : k), *tb_ = clt_test_upload(clt_test_device(), b, tb ? n : k, tb ? k : n);
    clt_tensor *tc = clt_test_upload(clt_test_device(), c, m, n), *tbias = NULL;
    if (relu) ck_assert_ok(clt_from_host(&tbias, clt_test_device(), CLT_FLOAT32, 1, &n, bias));
    ck_assert_ok(clt__cpu_gemm(ta_->st->slot, tile, ta, tb, (size_t)m, (size_t)n, (size_t)k, 0.75f, ta_,
                               (size_t)(ta ? m : k), tb_, (size_t)(tb ? k : n), beta, tc, (size_t)n, tbias, relu));
    clt_test_ref_gemm(ta, tb, m, n, k, 0.75f, a, b, beta, c);
    for (int64_t i = 0; relu && i < m * n; i++) {
        float v = c[i] + bias[i % n];
        c[i] = v < 0.0f ? 0.0f : v;
    }
    float *got = clt_test_read(tc);
    double err = clt_test_max_rel_err(got, c, m * n);
    ck_assert_msg(err < TOL, "tile %dx%d ta=%d tb=%d m=%lld n=%lld k=%lld beta=%g relu=%d: error %g", tile.tm, tile.tn,
                  ta, tb, (long long)m, (long long)n, (long long)k, beta, relu, err);
    free(got);
    free(a);
    free(b);
    free(c);
    free(bias);
    clt_tensor_release(ta_);
    clt_tensor_release(tb_);
    clt_tensor_release(tc);
    clt_tensor_release(tbias);
}

/* Every tile a device's default (clt__cpu_tile_default) or `clt tune` may
 * pick, each a program of its own except 12 x 32 and, over an A in place,
 * 6 x 32 (the built-in program's kernels): partial row and column tiles, every
 * transpose, beta, the bias + ReLU epilogue; and one blocked product with
 * AVX2's default 6 x 16, whose depth blocks follow the tile's width. */
START_TEST(test_gemm_every_tile)
{
    static const clt__gemm_tile tiles[] = {{12, 32}, {8, 32}, {6, 32}, {12, 16}, {6, 16}, {4, 16}, {8, 8}, {6, 8}, {5, 32}};
    use_impl("cpu");
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
        for (int t = 0; t < 4; t++) {
            check_tile(tiles[i], t & 1, t >> 1, 29, 71, 19, 0.5f, 0);
            check_tile(tiles[i], t & 1, t >> 1, 13, 33, 7, 0.0f, 1);
        }
    /* With a 16-byte way of L1 (clt__cpu_l1_way), rows 52 floats apart pack
     * A and B as is: every tile's pack_a_f32 over whole blocks and a last
     * partial one. */
    clt__cpu_l1_way_override(16);
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) check_tile(tiles[i], 0, 0, 29, 40, 52, 0.5f, 0);
    clt__cpu_l1_way_override(0);
    if (!clt_test_simulated()) {
        int64_t m, n, k, kc;
        small_caches();
        blocked_shape(&m, &n, &k, &kc);
        check_tile((clt__gemm_tile){6, 16}, 0, 1, m, n, k, 0.0f, 1);
        clt__cpu_cache_sizes_override(0, 0);
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* K = 0 makes c = beta c; M = 0 or N = 0 leaves c alone. */
START_TEST(test_gemm_empty_sizes)
{
    for (int i = 0; i < 2; i++) {
        use_impl(impls[i]);
        float c[6] = {1, 2, 3, 4, 5, 6};
        clt_tensor *a, *b, *tc = clt_test_upload(clt_test_device(), c, 2, 3), *a0, *c0;
        int64_t sa[] = {2, 0}, sb[] = {0, 3}, sa0[] = {0, 4}, sb4[] = {4, 3}, sc0[] = {0, 3};
        ck_assert_ok(clt_empty(&a, clt_test_device(), CLT_FLOAT32, 2, sa));
        ck_assert_ok(clt_empty(&b, clt_test_device(), CLT_FLOAT32, 2, sb));
        ck_assert_ok(clt_gemm_(0, 0, 1.0f, a, b, -2.0f, tc));
        float *got = clt_test_read(tc);
        for (int j = 0; j < 6; j++) ck_assert_float_eq(got[j], -2.0f * c[j]);
        free(got);
        clt_tensor *b4;
        ck_assert_ok(clt_empty(&a0, clt_test_device(), CLT_FLOAT32, 2, sa0));
        ck_assert_ok(clt_ones(&b4, clt_test_device(), CLT_FLOAT32, 2, sb4));
        ck_assert_ok(clt_empty(&c0, clt_test_device(), CLT_FLOAT32, 2, sc0));
        ck_assert_ok(clt_gemm_(0, 0, 1.0f, a0, b4, 0.0f, c0));
        clt_tensor_release(a0);
        clt_tensor_release(b4);
        clt_tensor_release(c0);
        clt_tensor_release(a);
        clt_tensor_release(b);
        clt_tensor_release(tc);
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The linear layer on each implementation against the reference. */
static void check_linear(const char *impl, int64_t B, int64_t C, int64_t OC)
{
    use_impl(impl);
    float *x = clt_test_random_floats(B * C, 41), *w = clt_test_random_floats(OC * C, 42), *bias = clt_test_random_floats(OC, 43);
    float *dy = clt_test_random_floats(B * OC, 44), *dw = clt_test_random_floats(OC * C, 45);
    clt_tensor *tx = clt_test_upload(clt_test_device(), x, B, C), *tw = clt_test_upload(clt_test_device(), w, OC, C), *tdy = clt_test_upload(clt_test_device(), dy, B, OC), *tdw = clt_test_upload(clt_test_device(), dw, OC, C);
    clt_tensor *tb, *y, *dx;
    ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_FLOAT32, 1, &OC, bias));
    ck_assert_ok(clt_linear_forward(&y, tx, tw, tb));
    ck_assert_ok(clt_linear_backward_(&dx, tdw, NULL, tdy, tx, tw));
    float *want = malloc((size_t)(B * OC) * sizeof *want);
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < OC; j++) want[i * OC + j] = bias[j];
    clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, 1.0f, want);
    float *got = clt_test_read(y);
    ck_assert_msg(clt_test_max_rel_err(got, want, B * OC) < TOL, "%s linear forward", impl);
    free(got);
    free(want);
    clt_test_ref_gemm(1, 0, OC, C, B, 1.0f, dy, x, 1.0f, dw);
    got = clt_test_read(tdw);
    ck_assert_msg(clt_test_max_rel_err(got, dw, OC * C) < TOL, "%s linear dw", impl);
    free(got);
    want = malloc((size_t)(B * C) * sizeof *want);
    clt_test_ref_gemm(0, 0, B, C, OC, 1.0f, dy, w, 0.0f, want);
    got = clt_test_read(dx);
    ck_assert_msg(clt_test_max_rel_err(got, want, B * C) < TOL, "%s linear dx", impl);
    free(got);
    free(want);
    free(x);
    free(w);
    free(bias);
    free(dy);
    free(dw);
    clt_tensor_release(tx);
    clt_tensor_release(tw);
    clt_tensor_release(tdy);
    clt_tensor_release(tdw);
    clt_tensor_release(tb);
    clt_tensor_release(y);
    clt_tensor_release(dx);
}

START_TEST(test_linear_both)
{
    for (int i = 0; i < 2; i++) {
        check_linear(impls[i], 37, 53, 10);
        check_linear(impls[i], 1, 7, 19);
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_dense_env_invalid)
{
    clt_tensor *a, *c;
    int64_t s[] = {2, 2};
    ck_assert_ok(clt_ones(&a, clt_test_device(), CLT_FLOAT32, 2, s));
    ck_assert_ok(clt_zeros(&c, clt_test_device(), CLT_FLOAT32, 2, s));
    use_impl("cuda");
    ck_assert_status(clt_gemm_(0, 0, 1.0f, a, a, 0.0f, c), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "CLT_DENSE=\"cuda\""));
    unsetenv("CLT_DENSE");
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, a, a, 0.0f, c));
    float *got = clt_test_read(c);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], 2.0f);
    free(got);
    clt_tensor_release(a);
    clt_tensor_release(c);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_cpu");
    TCase *tc = clt_test_tcase("gemm_cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_sizes_and_transposes);
    tcase_add_test(tc, test_gemm_power_of_two_strides);
    tcase_add_test(tc, test_gemm_deep_b_packed);
    tcase_add_test(tc, test_gemm_l1_way);
    tcase_add_test(tc, test_gemm_transposed_a_panels);
    tcase_add_test(tc, test_gemm_row_tiles);
    tcase_add_test(tc, test_gemm_row_blocks);
    tcase_add_test(tc, test_gemm_alpha_beta);
    tcase_add_test(tc, test_gemm_blocked);
    tcase_add_test(tc, test_gemm_every_tile);
    tcase_add_test(tc, test_gemm_empty_sizes);
    tcase_add_test(tc, test_linear_both);
    tcase_add_test(tc, test_dense_env_invalid);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
