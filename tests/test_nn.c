/* Models: building, names and flat layout, initialisation, a whole ResMLP
 * training step against a hand-written host reference, gradient
 * accumulation, inference mode, placement and errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "device/device_internal.h"
#include "ops/ops_internal.h"
#include "ops/tune.h"

/* Bytes of the w^T panels an evaluating model keeps for its Linears when
 * the CPU kernels run its products (src/ops/dense.c: panels of the device's
 * default tile's columns, zero-padded), else 0. */
static int64_t kept_panels(const clt_model *m)
{
    int slot, cpu = 0;
    ck_assert_ok(clt__resolve(clt_model_device(m), &slot));
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    int64_t bytes = 0, tn = clt__cpu_tile_default(slot).tn;
    for (int i = 0; cpu && i < clt_model_num_parameter_tensors(m); i++) {
        clt_tensor *p;
        ck_assert_ok(clt_model_named_parameter(m, i, NULL, &p, NULL));
        if (clt_tensor_ndim(p) == 2) bytes += (clt_tensor_dim(p, 0) + tn - 1) / tn * tn * clt_tensor_dim(p, 1) * 4;
    }
    return bytes;
}

/* The test CPU, when it is a device other than clt_test_device(). */
static int cpu_apart(clt_device *out)
{
    *out = clt_test_cpu();
    return clt_device_exists(*out) && !clt_device_equal(*out, clt_test_device());
}

static int64_t numel_of(const clt_tensor *t) { return clt_tensor_numel(t); }

START_TEST(test_resmlp_names_and_layout)
{
    enum { IN = 784, H = 16, OUT = 10 };
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), IN, H, 2, OUT, 1));
    const char *want[] = {"net.1.weight",        "net.1.bias",          "net.3.body.0.weight", "net.3.body.0.bias",
                          "net.3.body.2.weight", "net.3.body.2.bias",   "net.4.body.0.weight", "net.4.body.0.bias",
                          "net.4.body.2.weight", "net.4.body.2.bias",   "net.5.weight",        "net.5.bias"};
    int64_t shapes[][2] = {{H, IN}, {H, 0}, {H, H}, {H, 0}, {H, H},   {H, 0},
                           {H, H},  {H, 0}, {H, H}, {H, 0}, {OUT, H}, {OUT, 0}};
    ck_assert_int_eq(clt_model_num_parameter_tensors(m), 12);
    int64_t N = (int64_t)H * IN + H + 4 * ((int64_t)H * H + H) + (int64_t)OUT * H + OUT;
    ck_assert_int_eq(clt_model_num_parameter_elements(m), N);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_WEIGHTS), 4 * N);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), 4 * N);

    float *flat = clt_test_read(clt_model_parameters(m));
    int64_t offset = 0;
    for (int i = 0; i < 12; i++) {
        const char *name;
        clt_tensor *p, *g;
        ck_assert_ok(clt_model_named_parameter(m, i, &name, &p, &g));
        ck_assert_str_eq(name, want[i]);
        ck_assert_ptr_null(g);
        ck_assert_int_eq(clt_model_find_parameter(m, want[i]), i);
        int is_bias = shapes[i][1] == 0;
        ck_assert_int_eq(clt_tensor_ndim(p), is_bias ? 1 : 2);
        ck_assert_int_eq(clt_tensor_dim(p, 0), shapes[i][0]);
        if (!is_bias) ck_assert_int_eq(clt_tensor_dim(p, 1), shapes[i][1]);
        ck_assert_int_eq(clt_tensor_category(p), CLT_MEM_WEIGHTS);
        /* Each parameter is the next slice of the flat buffer. */
        float *v = clt_test_read(p);
        ck_assert_mem_eq(v, flat + offset, (size_t)numel_of(p) * sizeof(float));
        offset += numel_of(p);
        free(v);
    }
    ck_assert_int_eq(offset, N);
    ck_assert_int_eq(clt_model_find_parameter(m, "net.2.weight"), -1);
    ck_assert_int_eq(clt_model_find_parameter(m, NULL), -1);
    ck_assert_status(clt_model_named_parameter(m, 12, NULL, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    free(flat);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The structure as listed by clt_model_layer, enough to rebuild the model. */
START_TEST(test_resmlp_structure)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 784, 16, 2, 10, 1));
    ck_assert_str_eq(clt_model_prefix(m), "net");
    ck_assert_int_eq(clt_model_num_layers(m), 6);
    static const clt_layer_kind kinds[] = {CLT_LAYER_FLATTEN,  CLT_LAYER_LINEAR,   CLT_LAYER_RELU,
                                           CLT_LAYER_RESIDUAL, CLT_LAYER_RESIDUAL, CLT_LAYER_LINEAR};
    static const int64_t features[][2] = {{0, 0}, {784, 16}, {0, 0}, {16, 16}, {16, 16}, {16, 10}};
    for (int i = 0; i < 6; i++) {
        clt_layer_info l;
        ck_assert_ok(clt_model_layer(m, i, &l));
        char name[16];
        snprintf(name, sizeof name, "net.%d", i);
        ck_assert_int_eq(l.kind, kinds[i]);
        ck_assert_str_eq(l.name, name);
        ck_assert_int_eq(l.in_features, features[i][0]);
        ck_assert_int_eq(l.out_features, features[i][1]);
    }
    clt_layer_info l;
    ck_assert_status(clt_model_layer(m, 6, &l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "index 6 outside the model's 6 layers"));
    ck_assert_status(clt_model_layer(m, -1, &l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_layer(NULL, 0, &l), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_layer(m, 0, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(clt_model_num_layers(NULL), 0);
    ck_assert_ptr_null(clt_model_prefix(NULL));
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_mlp_names)
{
    int64_t hiddens[] = {7, 3};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 5, 2, hiddens, 2, 1));
    const char *want[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    ck_assert_int_eq(clt_model_num_parameter_tensors(m), 6);
    for (int i = 0; i < 6; i++) {
        const char *name;
        ck_assert_ok(clt_model_named_parameter(m, i, &name, NULL, NULL));
        ck_assert_str_eq(name, want[i]);
    }
    ck_assert_int_eq(clt_model_num_parameter_elements(m), 5 * 7 + 7 + 7 * 3 + 3 + 3 * 2 + 2);
    clt_model_free(m);
    clt_model *single;
    ck_assert_ok(clt_model_create_mlp(&single, clt_test_device(), 4, 0, NULL, 3, 1));
    ck_assert_int_eq(clt_model_num_parameter_elements(single), 15);
    clt_model_free(single);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_init_pytorch_default)
{
    int64_t hiddens[] = {300};
    clt_model *a, *b, *c;
    ck_assert_ok(clt_model_create_mlp(&a, clt_test_device(), 50, 1, hiddens, 7, 42));
    ck_assert_ok(clt_model_create_mlp(&b, clt_test_device(), 50, 1, hiddens, 7, 42));
    ck_assert_ok(clt_model_create_mlp(&c, clt_test_device(), 50, 1, hiddens, 7, 43));
    int64_t fan_in[] = {50, 50, 300, 300};
    for (int i = 0; i < 4; i++) {
        clt_tensor *p;
        ck_assert_ok(clt_model_named_parameter(a, i, NULL, &p, NULL));
        float *v = clt_test_read(p);
        double bound = 1.0 / sqrt((double)fan_in[i]), lo = 1, hi = -1, mean = 0;
        int64_t n = numel_of(p);
        for (int64_t k = 0; k < n; k++) {
            CLT_TEST_REQUIRE(v[k] >= -bound && v[k] < bound, "parameter %d [%lld]: %g outside [-%g, %g)", i,
                             (long long)k, (double)v[k], bound, bound);
            lo = fmin(lo, v[k]);
            hi = fmax(hi, v[k]);
            mean += v[k] / (double)n;
        }
        /* Uniform over the whole range, centred. */
        ck_assert(lo < -0.5 * bound && hi > 0.5 * bound);
        ck_assert(fabs(mean) < 0.2 * bound);
        free(v);
    }
    int64_t N = clt_model_num_parameter_elements(a);
    float *va = clt_test_read(clt_model_parameters(a)), *vb = clt_test_read(clt_model_parameters(b)),
          *vc = clt_test_read(clt_model_parameters(c));
    ck_assert_mem_eq(va, vb, (size_t)N * sizeof(float));
    ck_assert(memcmp(va, vc, (size_t)N * sizeof(float)) != 0);
    free(va);
    free(vb);
    free(vc);
    clt_model_free(a);
    clt_model_free(b);
    clt_model_free(c);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- Hand-written host reference of a ResMLP step ---- */

// x is (B,in), w (out,in), b (out); y is (B,out)
static void r_linear(const double *x, const double *w, const double *b, double *y, int B, int in, int out)
{
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double acc = b[o];
            for (int i = 0; i < in; i++) acc += x[r * in + i] * w[o * in + i];
            y[r * out + o] = acc;
        }
}

// dy is (B,out); dw (out,in) += dy^T x; db += colsum dy; dx (B,in) = dy w when not NULL
static void r_linear_back(const double *dy, const double *x, const double *w, double *dw, double *db, double *dx,
                          int B, int in, int out)
{
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            db[o] += dy[r * out + o];
            for (int i = 0; i < in; i++) dw[o * in + i] += dy[r * out + o] * x[r * in + i];
        }
    if (!dx) return;
    for (int r = 0; r < B; r++)
        for (int i = 0; i < in; i++) {
            double acc = 0;
            for (int o = 0; o < out; o++) acc += dy[r * out + o] * w[o * in + i];
            dx[r * in + i] = acc;
        }
}

static void r_relu(double *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}

/* dx = dy where y > 0. */
static void r_relu_back(double *d, const double *y, int n)
{
    for (int i = 0; i < n; i++) d[i] = y[i] > 0 ? d[i] : 0;
}

enum { RB = 7, RF = 12, RH = 9, RK = 2, RO = 5 };
/* Offsets of the flat layout: net.1, then per block body.0 and body.2, then net.5. */
enum {
    R_W1 = 0,
    R_B1 = R_W1 + RH * RF,
    R_BLK = R_B1 + RH,
    R_BLKSZ = 2 * (RH * RH + RH),
    R_WO = R_BLK + RK * R_BLKSZ,
    R_BO = R_WO + RO * RH,
    R_N = R_BO + RO
};

/* One forward and backward of the ResMLP in double: returns the loss,
 * accumulates the gradient into g (flat layout). */
static double r_step(const double *p, double *g, const double *x, const int32_t *y)
{
    static double a[RB * RH], u[RK][RB * RH], v[RK][RB * RH], cur[RK + 1][RB * RH], z[RB * RO];
    r_linear(x, p + R_W1, p + R_B1, a, RB, RF, RH);
    r_relu(a, RB * RH);
    memcpy(cur[0], a, sizeof a);
    for (int k = 0; k < RK; k++) {
        const double *q = p + R_BLK + k * R_BLKSZ;
        r_linear(cur[k], q, q + RH * RH, u[k], RB, RH, RH);
        r_relu(u[k], RB * RH);
        r_linear(u[k], q + RH * RH + RH, q + 2 * RH * RH + RH, v[k], RB, RH, RH);
        r_relu(v[k], RB * RH);
        for (int i = 0; i < RB * RH; i++) cur[k + 1][i] = cur[k][i] + v[k][i];
    }
    r_linear(cur[RK], p + R_WO, p + R_BO, z, RB, RH, RO);
    double loss = 0, dz[RB * RO];
    for (int r = 0; r < RB; r++) {
        double mx = z[r * RO], se = 0;
        for (int c = 1; c < RO; c++) mx = fmax(mx, z[r * RO + c]);
        for (int c = 0; c < RO; c++) se += exp(z[r * RO + c] - mx);
        loss += mx + log(se) - z[r * RO + y[r]];
        for (int c = 0; c < RO; c++) dz[r * RO + c] = (exp(z[r * RO + c] - mx) / se - (c == y[r])) / RB;
    }
    double dcur[RB * RH], du[RB * RH], dv[RB * RH], dtmp[RB * RH];
    r_linear_back(dz, cur[RK], p + R_WO, g + R_WO, g + R_BO, dcur, RB, RH, RO);
    for (int k = RK - 1; k >= 0; k--) {
        const double *q = p + R_BLK + k * R_BLKSZ;
        double *gq = g + R_BLK + k * R_BLKSZ;
        memcpy(dv, dcur, sizeof dv);
        r_relu_back(dv, v[k], RB * RH);
        r_linear_back(dv, u[k], q + RH * RH + RH, gq + RH * RH + RH, gq + 2 * RH * RH + RH, du, RB, RH, RH);
        r_relu_back(du, u[k], RB * RH);
        r_linear_back(du, cur[k], q, gq, gq + RH * RH, dtmp, RB, RH, RH);
        for (int i = 0; i < RB * RH; i++) dcur[i] += dtmp[i];
    }
    r_relu_back(dcur, a, RB * RH);
    r_linear_back(dcur, x, p + R_W1, g + R_W1, g + R_B1, NULL, RB, RF, RH);
    return loss / RB;
}

START_TEST(test_resmlp_step_matches_host)
{
    const float lr = 0.1f, momentum = 0.9f, wd = 0.01f;
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), RF, RH, RK, RO, 11));
    ck_assert_int_eq(clt_model_num_parameter_elements(m), R_N);
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, lr, momentum, wd));

    float pf[R_N];
    ck_assert_ok(clt_to_host(clt_model_parameters(m), pf, sizeof pf));
    static double p[R_N], g[R_N], buf[R_N];
    for (int i = 0; i < R_N; i++) p[i] = pf[i];

    for (int step = 0; step < 2; step++) {
        float xf[RB * RF];
        int32_t y[RB];
        clt_test_fill_uniform(xf, RB * RF, 20 + step, -2, 2);
        for (int r = 0; r < RB; r++) y[r] = (r * 3 + step) % RO;
        double xd[RB * RF];
        for (int i = 0; i < RB * RF; i++) xd[i] = xf[i];

        /* Device: the batch is (B, 3, 4) and Flatten makes it (B, 12). */
        int64_t xs[] = {RB, 3, 4}, ys[] = {RB};
        clt_tensor *x, *lab, *logits, *loss, *dlogits;
        ck_assert_ok(clt_from_host(&x, clt_test_device(), CLT_FLOAT32, 3, xs, xf));
        ck_assert_ok(clt_from_host(&lab, clt_test_device(), CLT_INT32, 1, ys, y));
        ck_assert_ok(clt_model_zero_grad(m));
        ck_assert_ok(clt_model_forward(m, x, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, lab));
        ck_assert_ok(clt_model_backward(m, dlogits, NULL));
        float gf[R_N];
        ck_assert_ok(clt_to_host(clt_model_gradients(m), gf, sizeof gf));
        ck_assert_ok(clt_optimizer_step(opt));

        memset(g, 0, sizeof g);
        double want = r_step(p, g, xd, y);
        double got;
        ck_assert_ok(clt_item(loss, &got));
        ck_assert_msg(fabs(got - want) < 1e-5 * fmax(1, fabs(want)), "step %d loss %g, host %g", step, got, want);
        for (int i = 0; i < R_N; i++)
            CLT_TEST_REQUIRE(fabs(gf[i] - g[i]) < 1e-5 * fmax(1, fabs(g[i])), "step %d grad[%d] %g, host %g", step, i,
                             (double)gf[i], g[i]);
        /* PyTorch's SGD: buf = g + wd p (first step), else momentum buf + that. */
        for (int i = 0; i < R_N; i++) {
            double d = g[i] + wd * p[i];
            buf[i] = step == 0 ? d : momentum * buf[i] + d;
            p[i] -= lr * buf[i];
        }
        clt_tensor_release(x);
        clt_tensor_release(lab);
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
    }
    ck_assert_ok(clt_to_host(clt_model_parameters(m), pf, sizeof pf));
    for (int i = 0; i < R_N; i++)
        CLT_TEST_REQUIRE(fabs(pf[i] - p[i]) < 1e-5 * fmax(1, fabs(p[i])), "param[%d] %g, host %g", i, (double)pf[i],
                         p[i]);
    ck_assert_int_eq(clt_optimizer_steps(opt), 2);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Forward with training on and backward with dy = ones; leaves gradients. */
static void forward_backward(clt_model *m, clt_tensor *x)
{
    clt_tensor *y, *dy;
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    clt_tensor_release(y);
    clt_tensor_release(dy);
}

START_TEST(test_zero_grad_and_accumulation)
{
    int64_t hiddens[] = {13};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 6, 1, hiddens, 3, 5));
    int64_t N = clt_model_num_parameter_elements(m);
    /* No gradients before the first backward, and zero_grad allocates none. */
    ck_assert_ok(clt_model_zero_grad(m));
    ck_assert_ptr_null(clt_model_gradients(m));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_GRADIENTS), 0);

    float xf[4 * 6];
    clt_test_fill_uniform(xf, 24, 3, -1, 1);
    int64_t xs[] = {4, 6};
    clt_tensor *x;
    ck_assert_ok(clt_from_host(&x, clt_test_device(), CLT_FLOAT32, 2, xs, xf));
    forward_backward(m, x);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_GRADIENTS), 4 * N);
    float *g1 = clt_test_read(clt_model_gradients(m));
    double norm = 0;
    for (int64_t i = 0; i < N; i++) norm += fabs(g1[i]);
    ck_assert(norm > 0);

    /* A second backward adds to the first. */
    forward_backward(m, x);
    float *g2 = clt_test_read(clt_model_gradients(m));
    for (int64_t i = 0; i < N; i++)
        CLT_TEST_REQUIRE(fabsf(2 * g1[i] - g2[i]) < 1e-5f * fmaxf(1, fabsf(g1[i])), "gradient %lld: %g, not twice %g",
                         (long long)i, (double)g2[i], (double)g1[i]);
    /* The named gradient views are slices of the flat gradient. */
    clt_tensor *gw;
    ck_assert_ok(clt_model_named_parameter(m, 2, NULL, NULL, &gw));
    ck_assert_int_eq(clt_tensor_category(gw), CLT_MEM_GRADIENTS);
    float *gv = clt_test_read(gw);
    ck_assert_mem_eq(gv, g2 + 6 * 13 + 13, (size_t)clt_tensor_numel(gw) * sizeof(float));
    free(gv);

    ck_assert_ok(clt_model_zero_grad(m));
    float *g0 = clt_test_read(clt_model_gradients(m));
    for (int64_t i = 0; i < N; i++) CLT_TEST_REQUIRE(g0[i] == 0.0f, "gradient %lld: %g", (long long)i, (double)g0[i]);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_GRADIENTS), 4 * N);
    forward_backward(m, x);
    float *g3 = clt_test_read(clt_model_gradients(m));
    ck_assert_mem_eq(g3, g1, (size_t)N * sizeof(float));
    free(g0);
    free(g1);
    free(g2);
    free(g3);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_activations_kept_and_freed)
{
    enum { B = 5, H = 8, K = 3 };
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 12, H, K, 4, 1));
    int64_t xs[] = {B, 3, 4};
    clt_tensor *x, *y, *dy;
    ck_assert_ok(clt_ones(&x, clt_test_device(), CLT_FLOAT32, 3, xs));
    int64_t base = clt_memory_allocated(clt_test_device());

    /* Training: ReLU outputs and block outputs are kept, B*H floats each:
     * the first ReLU, and per block its two ReLUs and its sum. */
    ck_assert_int_eq(clt_model_training(m), 1);
    ck_assert_ok(clt_model_forward(m, x, &y));
    int64_t kept = 4 * (int64_t)B * H * (1 + 3 * K);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), kept);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), base + kept + (int64_t)clt_tensor_nbytes(y));
    /* A second forward replaces what the first kept. */
    clt_tensor_release(y);
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), kept);
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    /* Backward consumed the forward. */
    ck_assert_status(clt_model_backward(m, dy, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    int64_t with_grads = clt_memory_allocated(clt_test_device());
    ck_assert_int_eq(with_grads, base + 4 * clt_model_num_parameter_elements(m));

    /* Inference (no_grad): nothing is kept beyond the output, and on CPU
     * kernels the Linears' packed w^T (weights). */
    clt_model_set_training(m, 0);
    ck_assert_int_eq(clt_model_training(m), 0);
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    int64_t panels = kept_panels(m);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_WEIGHTS),
                     4 * clt_model_num_parameter_elements(m) + panels);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), with_grads + panels + (int64_t)clt_tensor_nbytes(y));
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_status(clt_model_backward(m, dy, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(y);
    clt_tensor_release(dy);

    /* Training keeps no packed weights. */
    clt_model_set_training(m, 1);
    ck_assert_int_eq(clt_memory_allocated(clt_test_device()), with_grads);
    /* Leaving training mode drops a pending forward. */
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_int_gt(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    clt_model_set_training(m, 0);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    clt_tensor_release(y);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_output_kept_by_last_relu)
{
    /* A model ending in ReLU returns a tensor it also keeps: an activation
     * until backward, then only the caller's. */
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, NULL));
    ck_assert_ok(clt_model_add_linear(m, 3, 4));
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_init(m, clt_test_device(), 1));
    int64_t xs[] = {2, 3};
    clt_tensor *x, *y, *dy, *dx;
    ck_assert_ok(clt_ones(&x, clt_test_device(), CLT_FLOAT32, 2, xs));
    ck_assert_ok(clt_model_forward(m, x, &y));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 2 * 4 * 4);
    ck_assert_ok(clt_ones_like(&dy, y));
    ck_assert_ok(clt_model_backward(m, dy, &dx));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    ck_assert_int_eq(clt_tensor_category(y), CLT_MEM_OTHER);
    ck_assert_int_eq(clt_tensor_dim(dx, 1), 3);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    clt_tensor_release(dx);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_model_to)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 6, 5, 1, 3, 2));
    int64_t N = clt_model_num_parameter_elements(m);
    float *before = clt_test_read(clt_model_parameters(m));
    int64_t xs[] = {2, 6};
    clt_tensor *x, *y, *dy;
    ck_assert_ok(clt_ones(&x, clt_test_cpu(), CLT_FLOAT32, 2, xs));
    forward_backward(m, x);
    float *gbefore = clt_test_read(clt_model_gradients(m));

    ck_assert_ok(clt_model_to(m, clt_test_device()));
    ck_assert(clt_device_equal(clt_model_device(m), clt_test_device()));
    ck_assert(clt_device_equal(clt_tensor_device(clt_model_parameters(m)), clt_test_device()));
    ck_assert(clt_device_equal(clt_tensor_device(clt_model_gradients(m)), clt_test_device()));
    for (int i = 0; i < clt_model_num_parameter_tensors(m); i++) {
        clt_tensor *p, *g;
        ck_assert_ok(clt_model_named_parameter(m, i, NULL, &p, &g));
        ck_assert(clt_device_equal(clt_tensor_device(p), clt_test_device()));
        ck_assert(clt_device_equal(clt_tensor_device(g), clt_test_device()));
    }
    float *after = clt_test_read(clt_model_parameters(m)), *gafter = clt_test_read(clt_model_gradients(m));
    ck_assert_mem_eq(before, after, (size_t)N * sizeof(float));
    ck_assert_mem_eq(gbefore, gafter, (size_t)N * sizeof(float));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_WEIGHTS), 4 * N);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_GRADIENTS), 4 * N);

    clt_device other;
    if (cpu_apart(&other)) {
        /* Everything left the CPU; an input left behind is refused. */
        ck_assert_int_eq(clt_memory_allocated_category(other, CLT_MEM_WEIGHTS), 0);
        ck_assert_int_eq(clt_memory_allocated_category(other, CLT_MEM_GRADIENTS), 0);
        ck_assert_status(clt_model_forward(m, x, &y), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_ptr_null(y);
    }
    clt_tensor *xd;
    ck_assert_ok(clt_to(&xd, x, clt_test_device()));
    ck_assert_ok(clt_model_forward(m, xd, &y));
    ck_assert(clt_device_equal(clt_tensor_device(y), clt_test_device()));
    ck_assert_ok(clt_ones_like(&dy, y));
    if (cpu_apart(&other)) {
        clt_tensor *dy_other;
        ck_assert_ok(clt_to(&dy_other, dy, other));
        ck_assert_status(clt_model_backward(m, dy_other, NULL), CLT_ERR_DEVICE_MISMATCH);
        clt_tensor_release(dy_other);
        clt_tensor_release(y);
        ck_assert_ok(clt_model_forward(m, xd, &y));
    }
    ck_assert_ok(clt_model_backward(m, dy, NULL));
    /* Moving to where it is already is a no-op. */
    clt_tensor *flat = clt_model_parameters(m);
    ck_assert_ok(clt_model_to(m, clt_test_device()));
    ck_assert_ptr_eq(clt_model_parameters(m), flat);
    free(before);
    free(after);
    free(gbefore);
    free(gafter);
    clt_tensor_release(x);
    clt_tensor_release(xd);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_clip_grad_norm)
{
    int64_t hiddens[] = {9};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 7, 1, hiddens, 4, 3));
    double norm;
    ck_assert_ok(clt_model_clip_grad_norm(m, 1.0, &norm));
    ck_assert_double_eq(norm, 0.0);
    float xf[3 * 7];
    clt_test_fill_uniform(xf, 21, 8, -3, 3);
    int64_t xs[] = {3, 7};
    clt_tensor *x;
    ck_assert_ok(clt_from_host(&x, clt_test_device(), CLT_FLOAT32, 2, xs, xf));
    forward_backward(m, x);
    int64_t N = clt_model_num_parameter_elements(m);
    float *g = clt_test_read(clt_model_gradients(m));
    double want = 0;
    for (int64_t i = 0; i < N; i++) want += (double)g[i] * g[i];
    want = sqrt(want);
    ck_assert_ok(clt_model_clip_grad_norm(m, 10 * want, &norm));
    ck_assert_double_eq_tol(norm, want, 1e-5 * want);
    float *same = clt_test_read(clt_model_gradients(m));
    ck_assert_mem_eq(same, g, (size_t)N * sizeof(float));
    ck_assert_ok(clt_model_clip_grad_norm(m, want / 4, NULL));
    float *clipped = clt_test_read(clt_model_gradients(m));
    double coef = (want / 4) / (want + 1e-6);
    for (int64_t i = 0; i < N; i++) {
        float scaled = (float)(g[i] * coef);
        CLT_TEST_REQUIRE(fabsf(scaled - clipped[i]) < (float)1e-6, "gradient %lld: %g, not %g", (long long)i,
                         (double)clipped[i], (double)scaled);
    }
    ck_assert_status(clt_model_clip_grad_norm(m, 0, NULL), CLT_ERR_INVALID_ARGUMENT);
    free(g);
    free(same);
    free(clipped);
    clt_tensor_release(x);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_errors)
{
    clt_model *m;
    ck_assert_status(clt_model_create(NULL, "net"), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_model_create(&m, "net"));
    ck_assert_status(clt_model_add_linear(m, 0, 3), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_model_add_linear(m, 4, 3));
    ck_assert_status(clt_model_add_linear(m, 5, 2), CLT_ERR_SHAPE);
    ck_assert_status(clt_model_add_residual(m, 4), CLT_ERR_SHAPE);
    ck_assert_ok(clt_model_add_relu(m));
    ck_assert_ok(clt_model_add_residual(m, 3));
    int64_t xs[] = {2, 4};
    clt_tensor *x, *y = NULL;
    ck_assert_ok(clt_ones(&x, clt_test_device(), CLT_FLOAT32, 2, xs));
    ck_assert_status(clt_model_forward(m, x, &y), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_to(m, clt_test_device()), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ok(clt_model_init(m, clt_test_device(), 1));
    ck_assert_status(clt_model_init(m, clt_test_device(), 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_add_relu(m), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_forward(m, NULL, &y), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_forward(m, x, NULL), CLT_ERR_INVALID_ARGUMENT);

    /* A wrong input width names the layer. */
    int64_t bad[] = {2, 5};
    clt_tensor *xb;
    ck_assert_ok(clt_ones(&xb, clt_test_device(), CLT_FLOAT32, 2, bad));
    ck_assert_status(clt_model_forward(m, xb, &y), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "net.0"));
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    clt_tensor *xi;
    ck_assert_ok(clt_zeros(&xi, clt_test_device(), CLT_INT32, 2, xs));
    ck_assert_status(clt_model_forward(m, xi, &y), CLT_ERR_UNSUPPORTED);

    /* dy must match the forward output. */
    ck_assert_ok(clt_model_forward(m, x, &y));
    clt_tensor *dy;
    ck_assert_ok(clt_ones(&dy, clt_test_device(), CLT_FLOAT32, 2, (int64_t[]){3, 3}));
    ck_assert_status(clt_model_backward(m, dy, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    ck_assert_status(clt_model_backward(m, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_zero_grad(NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(clt_model_num_parameter_elements(NULL), 0);
    ck_assert_int_eq(clt_model_num_parameter_tensors(NULL), 0);
    ck_assert_ptr_null(clt_model_parameters(NULL));

    int64_t h[] = {3};
    clt_model *bad_mlp = (clt_model *)&h; /* a non-NULL sentinel: failures must reset it */
    ck_assert_status(clt_model_create_mlp(&bad_mlp, clt_test_device(), 4, 1, NULL, 2, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad_mlp);
    ck_assert_status(clt_model_create_resmlp(&bad_mlp, clt_test_device(), 4, 0, 1, 2, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_model_create_mlp(&bad_mlp, clt_gpu(97), 4, 1, h, 2, 1), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_null(bad_mlp);

    clt_tensor_release(x);
    clt_tensor_release(xb);
    clt_tensor_release(xi);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    clt_model_free(m);
    clt_model_free(NULL);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* pocl compiles kernels lazily on its worker threads: a process that exits
 * with work queued can race LLVM's exit-time destructors. */
/* Pinned memory holds host data for transfers; a model cannot live there. */
START_TEST(test_model_to_pinned_refused)
{
    int64_t hidden[] = {3};
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), 4, 1, hidden, 2, 1));
    ck_assert_status(clt_model_to(m, clt_pinned()), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "pinned"));
    ck_assert(clt_device_equal(clt_model_device(m), clt_test_cpu()));
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nn");
    TCase *tc = clt_test_tcase("models");
    tcase_add_test(tc, test_resmlp_names_and_layout);
    tcase_add_test(tc, test_resmlp_structure);
    tcase_add_test(tc, test_mlp_names);
    tcase_add_test(tc, test_init_pytorch_default);
    tcase_add_test(tc, test_resmlp_step_matches_host);
    tcase_add_test(tc, test_zero_grad_and_accumulation);
    tcase_add_test(tc, test_activations_kept_and_freed);
    tcase_add_test(tc, test_output_kept_by_last_relu);
    tcase_add_test(tc, test_model_to);
    tcase_add_test(tc, test_model_to_pinned_refused);
    tcase_add_test(tc, test_clip_grad_norm);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
