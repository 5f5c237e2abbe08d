/* Gradient checks: every layer, the loss and a whole ResMLP against central
 * finite differences of a float64 host reference of the same network. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* The host mirror of a model: 'L' Linear(in,out), 'R' ReLU, 'F' Flatten,
 * 'S' ResidualBlock(in). Parameters are read from the model's flat buffer,
 * which holds each Linear's weight (out,in) then bias (out) in order. */
typedef struct spec {
    char kind;
    int64_t in, out;
} spec;

static double *dup(const double *x, int64_t n)
{
    double *y = malloc((size_t)n * sizeof *y + 1);
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

// x is (B,in), p holds w (out,in) then b (out); returns y (B,out)
static double *h_linear(const double *p, int64_t in, int64_t out, const double *x, int64_t B)
{
    double *y = malloc((size_t)(B * out) * sizeof *y + 1);
    ck_assert_ptr_nonnull(y);
    for (int64_t r = 0; r < B; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = p[in * out + o];
            for (int64_t i = 0; i < in; i++) acc += x[r * in + i] * p[o * in + i];
            y[r * out + o] = acc;
        }
    return y;
}

static void h_relu(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}

/* Runs the layers on x (B,F); returns (B, *f_out). */
static double *h_forward(const spec *sp, int n, const double *p, const double *x, int64_t B, int64_t F,
                         int64_t *f_out)
{
    double *cur = dup(x, B * F);
    int64_t f = F, off = 0;
    for (int i = 0; i < n; i++) {
        if (sp[i].kind == 'L') {
            double *y = h_linear(p + off, sp[i].in, sp[i].out, cur, B);
            off += sp[i].in * sp[i].out + sp[i].out;
            free(cur);
            cur = y;
            f = sp[i].out;
        } else if (sp[i].kind == 'R') {
            h_relu(cur, B * f);
        } else if (sp[i].kind == 'S') {
            double *h1 = h_linear(p + off, f, f, cur, B);
            off += f * f + f;
            h_relu(h1, B * f);
            double *h2 = h_linear(p + off, f, f, h1, B);
            off += f * f + f;
            h_relu(h2, B * f);
            for (int64_t k = 0; k < B * f; k++) cur[k] += h2[k];
            free(h1);
            free(h2);
        }
    }
    *f_out = f;
    return cur;
}

/* Mean softmax cross-entropy of logits (B,C). */
static double h_cross_entropy(const double *z, const int32_t *labels, int64_t B, int64_t C)
{
    double total = 0;
    for (int64_t r = 0; r < B; r++) {
        double mx = z[r * C];
        for (int64_t c = 1; c < C; c++) mx = fmax(mx, z[r * C + c]);
        double se = 0;
        for (int64_t c = 0; c < C; c++) se += exp(z[r * C + c] - mx);
        total += mx + log(se) - z[r * C + labels[r]];
    }
    return total / (double)B;
}

typedef struct objective {
    const spec *sp;
    int n;
    int64_t B, F;
    const double *r;         /* sum(r * y) when labels is NULL */
    const int32_t *labels;   /* else cross-entropy of y */
} objective;

static double h_objective(const objective *o, const double *p, const double *x)
{
    int64_t f;
    double *y = h_forward(o->sp, o->n, p, x, o->B, o->F, &f);
    double v = 0;
    if (o->labels) {
        v = h_cross_entropy(y, o->labels, o->B, f);
    } else {
        for (int64_t k = 0; k < o->B * f; k++) v += o->r[k] * y[k];
    }
    free(y);
    return v;
}

/* Central differences of the objective along every element of v (the
 * parameters or the input), compared with the device's gradient g. */
static void check_fd(const objective *o, double *p, double *x, double *v, int64_t n, const float *g,
                     const char *what)
{
    const double h = 1e-6;
    for (int64_t j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + h;
        double up = h_objective(o, p, x);
        v[j] = keep - h;
        double down = h_objective(o, p, x);
        v[j] = keep;
        double fd = (up - down) / (2 * h);
        ck_assert_msg(fabs((double)g[j] - fd) <= 2e-4 * fmax(1.0, fabs(fd)),
                      "%s[%lld]: device gradient %.7g, finite difference %.7g", what, (long long)j, (double)g[j], fd);
    }
}

static double *to_double(const float *x, int64_t n)
{
    double *y = malloc((size_t)n * sizeof *y + 1);
    ck_assert_ptr_nonnull(y);
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* Forward, backward and finite differences for one model. labels NULL: the
 * objective is sum(r * y), so backward gets dy = r; else the loss layer
 * supplies dy. */
static void gradcheck(clt_model *m, const spec *sp, int n, int ndim, const int64_t *xshape, const int32_t *labels,
                      uint64_t seed)
{
    clt_device dev = clt_model_device(m);
    int64_t B = xshape[0], F = 1;
    for (int i = 1; i < ndim; i++) F *= xshape[i];
    float *xf = malloc((size_t)(B * F) * sizeof *xf + 1);
    ck_assert_ptr_nonnull(xf);
    clt_test_fill_uniform(xf, B * F, seed, -1, 1);
    clt_tensor *x, *y, *dy, *dx, *loss = NULL;
    ck_assert_ok(clt_from_host(&x, dev, CLT_FLOAT32, ndim, xshape, xf));
    ck_assert_ok(clt_model_forward(m, x, &y));

    float *pf = clt_test_read(clt_model_parameters(m));
    int64_t N = clt_model_num_parameter_elements(m);
    double *p = to_double(pf, N);
    double *xd = to_double(xf, B * F);
    int64_t f;
    double *yh = h_forward(sp, n, p, xd, B, F, &f);
    ck_assert_int_eq(clt_tensor_dim(y, 0), B);
    ck_assert_int_eq(clt_tensor_dim(y, 1), f);
    float *yd = clt_test_read(y);
    for (int64_t k = 0; k < B * f; k++)
        ck_assert_msg(fabs(yd[k] - yh[k]) <= 1e-5 * fmax(1.0, fabs(yh[k])), "y[%lld] = %g, host %g", (long long)k,
                      (double)yd[k], yh[k]);

    double *r = NULL;
    if (labels) {
        int64_t lshape[1] = {B};
        clt_tensor *lab;
        ck_assert_ok(clt_from_host(&lab, dev, CLT_INT32, 1, lshape, labels));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dy, y, lab));
        clt_tensor_release(lab);
        double lv;
        ck_assert_ok(clt_item(loss, &lv));
        double want = h_cross_entropy(yh, labels, B, f);
        ck_assert_msg(fabs(lv - want) <= 1e-5 * fmax(1.0, fabs(want)), "loss %g, host %g", lv, want);
    } else {
        float *rf = malloc((size_t)(B * f) * sizeof *rf + 1);
        ck_assert_ptr_nonnull(rf);
        clt_test_fill_uniform(rf, B * f, seed + 1, -1, 1);
        r = to_double(rf, B * f);
        int64_t yshape[2] = {B, f};
        ck_assert_ok(clt_from_host(&dy, dev, CLT_FLOAT32, 2, yshape, rf));
        free(rf);
    }
    ck_assert_ok(clt_model_backward(m, dy, &dx));
    /* Backward freed every kept activation; only the loss's dlogits, ours, remains. */
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_ACTIVATIONS),
                     labels ? (int64_t)clt_tensor_nbytes(dy) : 0);
    int64_t dxshape[CLT_MAX_DIMS];
    ck_assert_int_eq(clt_tensor_shape(dx, dxshape), ndim);
    for (int i = 0; i < ndim; i++) ck_assert_int_eq(dxshape[i], xshape[i]);

    objective o = {sp, n, B, F, r, labels};
    float *g = clt_test_read(clt_model_gradients(m));
    check_fd(&o, p, xd, p, N, g, "parameter gradient");
    float *gx = clt_test_read(dx);
    check_fd(&o, p, xd, xd, B * F, gx, "input gradient");

    free(g);
    free(gx);
    free(pf);
    free(p);
    free(xd);
    free(yh);
    free(yd);
    free(r);
    free(xf);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(dy);
    clt_tensor_release(dx);
    clt_tensor_release(loss);
}

static clt_model *build(const spec *sp, int n, uint64_t seed)
{
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, "net"));
    for (int i = 0; i < n; i++) {
        switch (sp[i].kind) {
        case 'L': ck_assert_ok(clt_model_add_linear(m, sp[i].in, sp[i].out)); break;
        case 'R': ck_assert_ok(clt_model_add_relu(m)); break;
        case 'F': ck_assert_ok(clt_model_add_flatten(m)); break;
        case 'S': ck_assert_ok(clt_model_add_residual(m, sp[i].in)); break;
        }
    }
    ck_assert_ok(clt_model_init(m, clt_try_gpu(0), seed));
    return m;
}

static void run(const spec *sp, int n, int ndim, const int64_t *xshape, const int32_t *labels, uint64_t seed)
{
    clt_model *m = build(sp, n, seed);
    gradcheck(m, sp, n, ndim, xshape, labels, seed + 100);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_linear)
{
    spec sp[] = {{'L', 7, 5}};
    int64_t xs[] = {3, 7};
    run(sp, 1, 2, xs, NULL, 1);
    int64_t one[] = {1, 7};
    run(sp, 1, 2, one, NULL, 2);
}
END_TEST

START_TEST(test_relu)
{
    spec sp[] = {{'R', 0, 0}};
    int64_t xs[] = {4, 13};
    run(sp, 1, 2, xs, NULL, 3);
}
END_TEST

START_TEST(test_flatten)
{
    spec sp[] = {{'F', 0, 0}, {'L', 10, 3}};
    int64_t xs[] = {3, 2, 5};
    run(sp, 2, 3, xs, NULL, 4);
}
END_TEST

START_TEST(test_residual)
{
    spec sp[] = {{'S', 6, 6}};
    int64_t xs[] = {3, 6};
    run(sp, 1, 2, xs, NULL, 5);
}
END_TEST

START_TEST(test_mlp_stack)
{
    spec sp[] = {{'L', 5, 11}, {'R', 0, 0}, {'L', 11, 7}, {'R', 0, 0}, {'L', 7, 2}};
    int64_t xs[] = {5, 5};
    run(sp, 5, 2, xs, NULL, 6);
}
END_TEST

START_TEST(test_loss)
{
    enum { B = 5, C = 7 };
    float z[B * C];
    int32_t labels[B] = {0, 6, 3, 3, 1};
    clt_test_fill_uniform(z, B * C, 7, -3, 3);
    int64_t shape[] = {B, C}, lshape[] = {B};
    clt_device dev = clt_try_gpu(0);
    clt_tensor *logits, *lab, *loss, *dz;
    ck_assert_ok(clt_from_host(&logits, dev, CLT_FLOAT32, 2, shape, z));
    ck_assert_ok(clt_from_host(&lab, dev, CLT_INT32, 1, lshape, labels));
    ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dz, logits, lab));
    ck_assert_int_eq(clt_tensor_category(dz), CLT_MEM_ACTIVATIONS);
    double zd[B * C];
    for (int i = 0; i < B * C; i++) zd[i] = z[i];
    double lv, want = h_cross_entropy(zd, labels, B, C);
    ck_assert_ok(clt_item(loss, &lv));
    ck_assert_msg(fabs(lv - want) <= 1e-5 * fmax(1.0, want), "loss %g, host %g", lv, want);
    float *g = clt_test_read(dz);
    for (int j = 0; j < B * C; j++) {
        const double h = 1e-6;
        double keep = zd[j];
        zd[j] = keep + h;
        double up = h_cross_entropy(zd, labels, B, C);
        zd[j] = keep - h;
        double down = h_cross_entropy(zd, labels, B, C);
        zd[j] = keep;
        double fd = (up - down) / (2 * h);
        ck_assert_msg(fabs(g[j] - fd) <= 1e-5, "dlogits[%d] = %g, finite difference %g", j, (double)g[j], fd);
    }
    free(g);
    clt_tensor *loss2;
    ck_assert_ok(clt_cross_entropy_loss_grad(&loss2, NULL, logits, lab));
    double lv2;
    ck_assert_ok(clt_item(loss2, &lv2));
    ck_assert_double_eq(lv, lv2);
    clt_tensor_release(loss2);
    clt_tensor_release(dz);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_ACTIVATIONS), 0);
    clt_tensor_release(logits);
    clt_tensor_release(lab);
    clt_tensor_release(loss);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_resmlp_with_loss)
{
    /* The chapter's ResMLPClassifier at toy size, gradient of the mean loss. */
    spec sp[] = {{'F', 0, 0}, {'L', 10, 6}, {'R', 0, 0}, {'S', 6, 6}, {'S', 6, 6}, {'L', 6, 4}};
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_try_gpu(0), 10, 6, 2, 4, 8));
    int64_t xs[] = {3, 2, 5};
    int32_t labels[] = {3, 0, 2};
    gradcheck(m, sp, 6, 3, xs, labels, 9);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* pocl compiles kernels lazily on its worker threads: a process that exits
 * with work queued can race LLVM's exit-time destructors. */
int main(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *tc = clt_test_tcase("layers");
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_flatten);
    tcase_add_test(tc, test_residual);
    tcase_add_test(tc, test_mlp_stack);
    tcase_add_test(tc, test_loss);
    tcase_add_test(tc, test_resmlp_with_loss);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
