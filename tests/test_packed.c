/* Persistent packed weights (src/ops/dense.c, clt__packed_weight): an
 * evaluating model's Linears keep w^T packed between forwards, and every
 * kind of write to w (an optimizer step, a copy into a parameter, a fill, a
 * host upload, a checkpoint load) makes the next forward pack it again.
 * Products are checked against a double-precision C reference, and a
 * product through kept panels bit for bit against clt_linear_forward, which
 * packs for the call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "device/device_internal.h"
#include "ops/ops_internal.h"
#include "ops/tune.h"
#include "nn/nn_internal.h"

/* 1 when dev's products run the CPU kernels, the only ones that pack. */
static int cpu_kernels(void)
{
    int slot, cpu = 0;
    ck_assert_ok(clt__resolve(clt_test_cpu(), &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    return cpu;
}

/* y = x w^T + b (b may be NULL), then ReLU when relu, in double. */
static void ref_linear(int64_t m, int64_t n, int64_t k, const float *x, const float *w, const float *b, int relu,
                       float *y)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = b ? b[j] : 0.0;
            for (int64_t p = 0; p < k; p++) acc += (double)x[i * k + p] * w[j * k + p];
            y[i * n + j] = (float)(relu && acc < 0 ? 0.0 : acc);
        }
}

static void assert_close(const float *got, const float *want, int64_t count, int64_t k)
{
    for (int64_t i = 0; i < count; i++)
        CLT_TEST_REQUIRE(fabs((double)got[i] - want[i]) <= 1e-5 * (double)k * (1.0 + fabs((double)want[i])),
                         "element %lld: %g, reference %g", (long long)i, (double)got[i], (double)want[i]);
}

/* One product through pw against the reference and, bit for bit, against
 * clt_linear_forward (panels packed for the call). */
static void check_product(clt_tensor *x, clt_tensor *w, clt_tensor *b, int relu, clt__packed_weight *pw)
{
    int64_t m = clt_tensor_dim(x, 0), k = clt_tensor_dim(x, 1), n = clt_tensor_dim(w, 0);
    clt_tensor *y, *y0;
    ck_assert_ok(clt__linear_forward_packed(&y, x, w, b, relu, pw));
    ck_assert_ok(relu ? clt_linear_relu_forward(&y0, x, w, b) : clt_linear_forward(&y0, x, w, b));
    float *hx = clt_test_read(x), *hw = clt_test_read(w), *hb = b ? clt_test_read(b) : NULL;
    float *got = clt_test_read(y), *plain = clt_test_read(y0), *want = malloc((size_t)(m * n) * sizeof *want);
    ck_assert_ptr_nonnull(want);
    ref_linear(m, n, k, hx, hw, hb, relu, want);
    assert_close(got, want, m * n, k);
    ck_assert_mem_eq(got, plain, (size_t)(m * n) * sizeof(float));
    free(hx);
    free(hw);
    free(hb);
    free(got);
    free(plain);
    free(want);
    clt_tensor_release(y);
    clt_tensor_release(y0);
}

/* w (n, k) as a view at element `at` of a flat tensor, as a model's weight. */
static clt_tensor *weight_view(clt_tensor *flat, int64_t at, int64_t n, int64_t k)
{
    clt_tensor *line, *row, *w;
    int64_t shape[] = {n, k}, all = clt_tensor_numel(flat);
    ck_assert_ok(clt_reshape(&line, flat, 1, &all));
    ck_assert_ok(clt_narrow(&row, line, at, n * k));
    clt_tensor_release(line);
    ck_assert_ok(clt_reshape(&w, row, 2, shape));
    clt_tensor_release(row);
    return w;
}

static clt_tensor *random_tensor(int64_t rows, int64_t cols, uint64_t seed)
{
    float *h = clt_test_random_floats(rows * cols, seed);
    clt_tensor *t = clt_test_upload(clt_test_cpu(), h, rows, cols);
    free(h);
    return t;
}

/* Awkward shapes (1, primes, N not a multiple of the panel width, a weight
 * at an offset) and a blocked one, whose blocks of depths the product reads
 * from the whole-depth kept panels; each product twice, the second from
 * the panels of the first. */
START_TEST(test_packed_products)
{
    clt_test_skip_if(!cpu_kernels(), "the CPU GEMM kernels", "products on %s run CLBlast, which packs nothing",
                     clt_test_cpu_name());
    size_t l1, l2;
    int slot;
    ck_assert_ok(clt__resolve(clt_test_cpu(), &slot));
    clt__cpu_cache_sizes(slot, &l1, &l2);
    /* Blocked: n >= 512, k one and a half blocks of depths and a few more,
     * A beyond twice L2 (a quarter of this CPU's, so that the product stays
     * small). */
    clt__cpu_cache_sizes_override(l1, l2 / 4);
    l2 /= 4;
    clt__gemm_tile tile = clt__cpu_tile_default(slot);
    int64_t kc = (int64_t)clt__cpu_gemm_blocking(slot, 1 << 20, 1 << 20, 1 << 20, tile).kc;
    int64_t bk = kc + kc / 2 + 7, bm = (int64_t)(2 * l2 / ((size_t)bk * sizeof(float))) + 13;
    int64_t tn = tile.tn;
    ck_assert_uint_gt(clt__cpu_gemm_blocking(slot, (size_t)bm, 520, (size_t)bk, tile).kc, 0);
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 37, 19}, {33, 16, 64}, {5, 17, 300}, {bm, 520, bk}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        clt_tensor *flat = random_tensor(1, 3 + n * k, 10 + i), *x = random_tensor(m, k, 20 + i);
        clt_tensor *b = random_tensor(1, n, 30 + i), *b1, *w = weight_view(flat, 3, n, k);
        ck_assert_ok(clt_reshape(&b1, b, 1, &n));
        clt__packed_weight pw;
        memset(&pw, 0, sizeof pw);
        for (int relu = 0; relu < 2; relu++) {
            check_product(x, w, relu ? b1 : NULL, relu, &pw);
            check_product(x, w, b1, relu, &pw);
        }
        ck_assert_int_eq(pw.packs, 1);
        ck_assert_int_eq(clt_tensor_category(pw.panels), CLT_MEM_WEIGHTS);
        ck_assert_int_eq(clt_tensor_numel(pw.panels), (n + tn - 1) / tn * tn * k);
        clt__packed_weight_drop(&pw);
        ck_assert_ptr_null(pw.panels);
        clt_tensor_release(b1);
        clt_tensor_release(b);
        clt_tensor_release(w);
        clt_tensor_release(x);
        clt_tensor_release(flat);
    }
    clt__cpu_cache_sizes_override(0, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Each kind of write to the weight's storage, or to another part of it,
 * makes the next product pack again (and give the new product); a product
 * with nothing written in between does not. */
START_TEST(test_packed_refresh_after_writes)
{
    clt_test_skip_if(!cpu_kernels(), "the CPU GEMM kernels", "products on %s run CLBlast, which packs nothing",
                     clt_test_cpu_name());
    enum { M = 9, N = 21, K = 13, AT = 5 };
    int64_t total = AT + N * K + 7;
    clt_tensor *flat = random_tensor(1, total, 1), *x = random_tensor(M, K, 2), *w = weight_view(flat, AT, N, K);
    int64_t fs[] = {total};
    clt_tensor *params, *grads, *buf, *m1, *v1, *src;
    ck_assert_ok(clt_reshape(&params, flat, 1, fs));
    clt_tensor *g2 = random_tensor(1, total, 3);
    ck_assert_ok(clt_reshape(&grads, g2, 1, fs));
    ck_assert_ok(clt_zeros(&buf, clt_test_cpu(), CLT_FLOAT32, 1, fs));
    ck_assert_ok(clt_zeros(&m1, clt_test_cpu(), CLT_FLOAT32, 1, fs));
    ck_assert_ok(clt_zeros(&v1, clt_test_cpu(), CLT_FLOAT32, 1, fs));
    src = random_tensor(N, K, 4);
    clt__packed_weight pw;
    memset(&pw, 0, sizeof pw);
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 1);
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 1);
    /* SGD (plain, then with momentum), Adam: one launch over the flat buffer. */
    ck_assert_ok(clt_sgd_step_(params, grads, NULL, 0.1f, 0.0f, 0.0f, 1));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 2);
    ck_assert_ok(clt_sgd_step_(params, grads, buf, 0.1f, 0.9f, 0.01f, 1));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 3);
    ck_assert_ok(clt_adam_step_(params, grads, m1, v1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 4);
    /* A copy into the parameter, a fill, a scale, a write elsewhere in its storage. */
    ck_assert_ok(clt_copy_(w, src));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 5);
    ck_assert_ok(clt_fill_(w, 0.25));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 6);
    ck_assert_ok(clt_scale_(params, -2.0f));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 7);
    clt_tensor *tail;
    ck_assert_ok(clt_narrow(&tail, params, total - 7, 7));
    ck_assert_ok(clt_fill_(tail, 3.0));
    check_product(x, w, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 8);
    /* The same storage through another view of the same place still hits. */
    clt_tensor *w2 = weight_view(flat, AT, N, K);
    check_product(x, w2, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 8);
    /* A view at another offset, or another shape, is another weight. */
    clt_tensor *w3 = weight_view(flat, AT + 1, N, K);
    check_product(x, w3, NULL, 0, &pw);
    ck_assert_int_eq(pw.packs, 9);
    clt_tensor_release(tail);
    clt_tensor_release(w2);
    clt_tensor_release(w3);
    clt__packed_weight_drop(&pw);
    clt_tensor_release(src);
    clt_tensor_release(buf);
    clt_tensor_release(m1);
    clt_tensor_release(v1);
    clt_tensor_release(grads);
    clt_tensor_release(g2);
    clt_tensor_release(params);
    clt_tensor_release(w);
    clt_tensor_release(x);
    clt_tensor_release(flat);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Packs made by a model's Linears so far, nested ones included. */
static int64_t model_packs(const clt_model *m)
{
    int64_t n = 0;
    for (int i = 0; i < m->nlinears; i++) n += m->linears[i]->packed.packs;
    return n;
}

static float *forward(clt_model *m, clt_tensor *x)
{
    clt_tensor *y;
    ck_assert_ok(clt_model_forward(m, x, &y));
    float *h = clt_test_read(y);
    clt_tensor_release(y);
    return h;
}

/* A model's evaluating forward against a fresh model given the same
 * parameters (whose first forward packs from scratch), bit for bit. */
static void assert_fresh(clt_model *m, clt_tensor *x, int64_t rows, int64_t outs)
{
    clt_model *f;
    ck_assert_ok(clt_model_create_resmlp(&f, clt_test_cpu(), 12, 24, 2, 5, 99));
    ck_assert_ok(clt_copy_(clt_model_parameters(f), clt_model_parameters(m)));
    clt_model_set_training(f, 0);
    float *got = forward(m, x), *want = forward(f, x);
    ck_assert_mem_eq(got, want, (size_t)(rows * outs) * sizeof(float));
    free(got);
    free(want);
    clt_model_free(f);
}

/* At the model: evaluating forwards pack once per weight while nothing
 * writes; an optimizer step (SGD, Adam), a checkpoint load and a copy into
 * a named parameter each make the next forward pack every Linear again and
 * give what a fresh model with those parameters gives; training mode and
 * clt_model_to_dtype free the panels. */
START_TEST(test_model_keeps_panels)
{
    clt_test_skip_if(!cpu_kernels(), "the CPU GEMM kernels", "products on %s run CLBlast, which packs nothing",
                     clt_test_cpu_name());
    enum { ROWS = 6, OUTS = 5 };
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 12, 24, 2, OUTS, 7));
    int lin = m->nlinears;
    clt_tensor *x = random_tensor(ROWS, 12, 8);
    int64_t n = clt_model_num_parameter_elements(m);

    /* Training keeps nothing; backward leaves gradients for the steps below. */
    clt_tensor *y, *dy;
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_int_eq(model_packs(m), 0);
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    clt_tensor_release(y);
    clt_tensor_release(dy);

    clt_model_set_training(m, 0);
    free(forward(m, x));
    ck_assert_int_eq(model_packs(m), lin);
    free(forward(m, x));
    ck_assert_int_eq(model_packs(m), lin);
    int64_t kept = clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS) - 4 * n;
    ck_assert_int_gt(kept, 0);

    clt_optimizer *sgd, *adam;
    ck_assert_ok(clt_optimizer_create_sgd(&sgd, m, 0.5f, 0.9f, 0.0f));
    ck_assert_ok(clt_optimizer_step(sgd));
    assert_fresh(m, x, ROWS, OUTS);
    ck_assert_int_eq(model_packs(m), 2 * lin);
    ck_assert_ok(clt_optimizer_create_adam(&adam, m, 0.05f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    ck_assert_ok(clt_optimizer_step(adam));
    assert_fresh(m, x, ROWS, OUTS);
    ck_assert_int_eq(model_packs(m), 3 * lin);
    /* Repacking reuses the buffers. */
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS) - 4 * n, kept);

    /* A checkpoint saved now, then overwritten parameters, then the load. */
    char dir[256], path[300];
    clt_test_make_temp_dir(dir, sizeof dir, "packed");
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_ok(clt_checkpoint_save(path, m, NULL, NULL));
    float *saved = forward(m, x);
    ck_assert_int_eq(model_packs(m), 3 * lin);
    ck_assert_ok(clt_fill_(clt_model_parameters(m), 0.0));
    free(forward(m, x));
    ck_assert_int_eq(model_packs(m), 4 * lin);
    ck_assert_ok(clt_checkpoint_load(path, m, NULL, NULL));
    float *loaded = forward(m, x);
    ck_assert_int_eq(model_packs(m), 5 * lin);
    ck_assert_mem_eq(saved, loaded, (size_t)(ROWS * OUTS) * sizeof(float));
    free(saved);
    free(loaded);
    clt_test_remove_dir(dir);

    /* clt_copy_ into one named parameter (the first weight). */
    clt_tensor *p;
    const char *name;
    ck_assert_ok(clt_model_named_parameter(m, 0, &name, &p, NULL));
    ck_assert_str_eq(name, "net.1.weight");
    clt_tensor *src = random_tensor(clt_tensor_dim(p, 0), clt_tensor_dim(p, 1), 9);
    ck_assert_ok(clt_copy_(p, src));
    clt_tensor_release(src);
    assert_fresh(m, x, ROWS, OUTS);
    ck_assert_int_eq(model_packs(m), 6 * lin);

    /* Training mode frees them; so does a dtype conversion. */
    clt_model_set_training(m, 1);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 4 * n);
    clt_model_set_training(m, 0);
    free(forward(m, x));
    ck_assert_int_gt(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 4 * n);
    /* So does clt_model_set_keep_packed(m, 0), and an evaluation then keeps
     * none and computes the same; keeping them again packs anew. */
    float *kept_out = forward(m, x);
    clt_model_set_keep_packed(m, 0);
    ck_assert_int_eq(clt_model_keep_packed(m), 0);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 4 * n);
    float *unkept_out = forward(m, x);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 4 * n);
    ck_assert_mem_eq(kept_out, unkept_out, (size_t)(ROWS * OUTS) * sizeof(float));
    free(kept_out);
    free(unkept_out);
    clt_model_set_keep_packed(m, 1);
    free(forward(m, x));
    ck_assert_int_gt(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 4 * n);
    clt_optimizer_free(sgd);
    clt_optimizer_free(adam);
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 2 * n);
    /* A float16 model packs per call and keeps nothing. */
    clt_tensor *y16;
    ck_assert_ok(clt_model_forward(m, x, &y16));
    clt_tensor_release(y16);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_cpu(), CLT_MEM_WEIGHTS), 2 * n);

    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("packed");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_packed_products);
    tcase_add_test(tc, test_packed_refresh_after_writes);
    tcase_add_test(tc, test_model_keeps_panels);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
