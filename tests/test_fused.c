/* Fused epilogues. clt_linear_relu_forward (bias and ReLU in the GEMM's
 * store on CPU devices, a ReLU pass after CLBlast elsewhere) against a C
 * reference on awkward sizes, with and without bias, NaN passing through as
 * in clt_relu; clt_relu_backward_bias_ (the ReLU mask and the bias gradient
 * in one pass) against a C reference and bit for bit against the two passes
 * it replaces; and whole-model gradients of ResMLPs and residual stacks,
 * fused and with CLT_FUSE=0, checkpointed or not, against a plain C
 * forward and backward in double precision, also on a GPU-class device,
 * where a traced step shows which passes cl/gemm_gpu.cl's store replaced;
 * and a float16 ResMLP there, fused as float32 is, against its unfused
 * passes and the CPU class. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "ops/gemm_gpu.h"
#include "support.h"

#define TOL 1e-4

static const char *const impls[] = {"cpu", "clblast"};

static void check_linear_relu(const char *impl, int64_t B, int64_t C, int64_t OC, int with_bias, int nan_row)
{
    ck_assert_int_eq(setenv("CLT_DENSE", impl, 1), 0);
    float *x = malloc((size_t)(B * C) * sizeof *x), *w = malloc((size_t)(OC * C) * sizeof *w);
    float *bias = malloc((size_t)OC * sizeof *bias), *want = malloc((size_t)(B * OC) * sizeof *want);
    clt_test_fill_uniform(x, B * C, 11 + (uint64_t)B, -1, 1);
    clt_test_fill_uniform(w, OC * C, 13 + (uint64_t)C, -1, 1);
    clt_test_fill_uniform(bias, OC, 17 + (uint64_t)OC, -1, 1);
    if (nan_row) x[(B - 1) * C] = NAN; /* the last row of y is NaN */
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < OC; j++) {
            double s = with_bias ? bias[j] : 0.0;
            for (int64_t p = 0; p < C; p++) s += (double)x[i * C + p] * (double)w[j * C + p];
            want[i * OC + j] = s < 0 ? 0.0f : (float)s;
        }
    int64_t xs[] = {B, C}, ws[] = {OC, C}, bs[] = {OC};
    clt_tensor *tx, *tw, *tb, *ty;
    ck_assert_ok(clt_from_host(&tx, clt_test_device(), CLT_FLOAT32, 2, xs, x));
    ck_assert_ok(clt_from_host(&tw, clt_test_device(), CLT_FLOAT32, 2, ws, w));
    ck_assert_ok(clt_from_host(&tb, clt_test_device(), CLT_FLOAT32, 1, bs, bias));
    ck_assert_ok(clt_linear_relu_forward(&ty, tx, tw, with_bias ? tb : NULL));
    ck_assert_int_eq(clt_tensor_ndim(ty), 2);
    ck_assert_int_eq(clt_tensor_dim(ty, 0), B);
    ck_assert_int_eq(clt_tensor_dim(ty, 1), OC);
    float *got = clt_test_read(ty);
    int64_t rows = nan_row ? B - 1 : B;
    double err = clt_test_max_rel_err(got, want, rows * OC);
    ck_assert_msg(err < TOL, "%s %lldx%lld->%lld bias %d: max rel err %g", impl, (long long)B, (long long)C,
                  (long long)OC, with_bias, err);
    for (int64_t j = 0; nan_row && j < OC; j++)
        ck_assert_msg(isnan(got[(B - 1) * OC + j]), "%s: NaN became %g", impl, got[(B - 1) * OC + j]);
    free(got);
    free(x);
    free(w);
    free(bias);
    free(want);
    clt_tensor_release(tx);
    clt_tensor_release(tw);
    clt_tensor_release(tb);
    clt_tensor_release(ty);
    unsetenv("CLT_DENSE");
}

START_TEST(test_linear_relu_sizes)
{
    const int64_t sizes[][3] = {{1, 1, 1}, {1, 7, 13}, {13, 17, 19}, {37, 131, 61}, {97, 64, 16}, {12, 3, 16}};
    for (int i = 0; i < 2; i++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int bias = 0; bias < 2; bias++)
                check_linear_relu(impls[i], sizes[s][0], sizes[s][1], sizes[s][2], bias, 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_linear_relu_nan_passes)
{
    for (int i = 0; i < 2; i++) {
        check_linear_relu(impls[i], 5, 9, 16, 1, 1);
        check_linear_relu(impls[i], 14, 9, 21, 1, 1);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_linear_relu_errors)
{
    int64_t xs[] = {4, 5}, ws[] = {3, 6}, bs[] = {4};
    clt_tensor *x, *w, *b, *y = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&x, clt_test_device(), CLT_FLOAT32, 2, xs));
    ck_assert_ok(clt_zeros(&w, clt_test_device(), CLT_FLOAT32, 2, ws));
    ck_assert_ok(clt_zeros(&b, clt_test_device(), CLT_FLOAT32, 1, bs));
    ck_assert_status(clt_linear_relu_forward(&y, x, w, NULL), CLT_ERR_SHAPE);
    ck_assert_ptr_null(y);
    ck_assert(strstr(clt_last_error(), "clt_linear_relu_forward") != NULL);
    ck_assert_status(clt_linear_relu_forward(&y, x, NULL, b), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_linear_relu_forward(NULL, x, w, b), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(x);
    clt_tensor_release(w);
    clt_tensor_release(b);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* dx = dy where y > 0, db += column sums of dx, in double. */
static void ref_relu_bias(const float *dy, const float *y, int64_t rows, int64_t cols, float *dx, double *db)
{
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t i = r * cols + c;
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
            db[c] += dx[i];
        }
}

static void check_relu_bias(int64_t rows, int64_t cols, int64_t pad)
{
    int64_t n = rows * cols;
    float *dy = clt_test_random_floats(n, 31 + (uint64_t)n), *y = clt_test_random_floats(n, 37 + (uint64_t)cols);
    float *db0 = clt_test_random_floats(cols, 41), *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    double *want_db = malloc((size_t)(cols ? cols : 1) * sizeof *want_db);
    for (int64_t c = 0; c < cols; c++) want_db[c] = db0[c];
    if (n > 2) y[2] = 0.0f; /* exactly 0: masked, as in clt_relu_backward */
    ref_relu_bias(dy, y, rows, cols, want, want_db);
    clt_tensor *dyb, *yb, *tdb, *tdx, *two, *sums;
    /* Views at a nonzero offset; the rows around them are NaN. */
    clt_tensor *tdy = clt_test_upload_view(clt_test_device(), dy, rows, cols, pad, NAN, &dyb);
    clt_tensor *ty = clt_test_upload_view(clt_test_device(), y, rows, cols, pad, NAN, &yb);
    ck_assert_ok(clt_from_host(&tdb, clt_test_device(), CLT_FLOAT32, 1, &cols, db0));
    ck_assert_ok(clt_relu_backward_bias_(&tdx, tdb, tdy, ty));
    ck_assert_int_eq(clt_tensor_ndim(tdx), 2);
    ck_assert_int_eq(clt_tensor_dim(tdx, 0), rows);
    ck_assert_int_eq(clt_tensor_dim(tdx, 1), cols);
    float *got = clt_test_read(tdx), *got_db = clt_test_read(tdb);
    ck_assert_msg(n == 0 || memcmp(got, want, (size_t)n * sizeof *got) == 0, "%lldx%lld: dx differs",
                  (long long)rows, (long long)cols);
    float *want_dbf = malloc((size_t)(cols ? cols : 1) * sizeof *want_dbf);
    for (int64_t c = 0; c < cols; c++) want_dbf[c] = (float)want_db[c];
    double err = clt_test_max_rel_err(got_db, want_dbf, cols);
    ck_assert_msg(err < TOL, "%lldx%lld: db max rel err %g", (long long)rows, (long long)cols, err);
    /* The two passes it replaces give the same bits. */
    ck_assert_ok(clt_relu_backward(&two, tdy, ty));
    float *got_two = clt_test_read(two);
    ck_assert(n == 0 || memcmp(got_two, got, (size_t)n * sizeof *got) == 0);
    if (rows > 0) {
        ck_assert_ok(clt_sum_rows(&sums, two));
        float *s2 = clt_test_read(sums);
        for (int64_t c = 0; c < cols; c++) {
            float acc = db0[c] + s2[c];
            ck_assert_msg(memcmp(&acc, &got_db[c], sizeof acc) == 0, "%lldx%lld column %lld: %a, two passes %a",
                          (long long)rows, (long long)cols, (long long)c, (double)got_db[c], (double)acc);
        }
        free(s2);
        clt_tensor_release(sums);
    } else {
        ck_assert(cols == 0 || memcmp(got_db, db0, (size_t)cols * sizeof *db0) == 0);
    }
    free(got_two);
    clt_tensor_release(two);
    free(got);
    free(got_db);
    free(want_dbf);
    free(want_db);
    free(want);
    free(db0);
    free(dy);
    free(y);
    clt_tensor_release(tdx);
    clt_tensor_release(tdb);
    clt_tensor_release(tdy);
    clt_tensor_release(ty);
    clt_tensor_release(dyb);
    clt_tensor_release(yb);
}

START_TEST(test_relu_bias_sizes)
{
    const int64_t sizes[][2] = {{1, 1}, {1, 257}, {7, 1}, {13, 17}, {37, 257}, {97, 61}, {3, 16}, {0, 5}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int64_t pad = 0; pad < 2; pad++) check_relu_bias(sizes[s][0], sizes[s][1], pad * 3);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* As clt_relu_backward: y NaN masks (NaN > 0 is false); dy NaN where y > 0
 * passes into dx and its column's sum. */
START_TEST(test_relu_bias_nan)
{
    const float dy[] = {1, 2, NAN, 4, 5, 6}, y[] = {NAN, 1, 1, 0, 2, -1}, db0[] = {10, 20, 30};
    clt_tensor *tdy = clt_test_upload(clt_test_device(), dy, 2, 3), *ty = clt_test_upload(clt_test_device(), y, 2, 3), *tdb, *tdx;
    int64_t cols = 3;
    ck_assert_ok(clt_from_host(&tdb, clt_test_device(), CLT_FLOAT32, 1, &cols, db0));
    ck_assert_ok(clt_relu_backward_bias_(&tdx, tdb, tdy, ty));
    float *dx = clt_test_read(tdx), *db = clt_test_read(tdb);
    ck_assert(dx[0] == 0.0f && dx[1] == 2.0f && isnan(dx[2]) && dx[3] == 0.0f && dx[4] == 5.0f && dx[5] == 0.0f);
    ck_assert(db[0] == 10.0f && db[1] == 27.0f && isnan(db[2]));
    free(dx);
    free(db);
    clt_tensor_release(tdx);
    clt_tensor_release(tdb);
    clt_tensor_release(tdy);
    clt_tensor_release(ty);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_relu_bias_errors)
{
    int64_t s23[] = {2, 3}, s32[] = {3, 2}, s3[] = {3}, s2[] = {2}, s6[] = {6};
    clt_tensor *dy, *y, *y32, *y1d, *db, *db2, *dbi, *dx = (clt_tensor *)1;
    ck_assert_ok(clt_zeros(&dy, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&y, clt_test_device(), CLT_FLOAT32, 2, s23));
    ck_assert_ok(clt_zeros(&y32, clt_test_device(), CLT_FLOAT32, 2, s32));
    ck_assert_ok(clt_zeros(&y1d, clt_test_device(), CLT_FLOAT32, 1, s6));
    ck_assert_ok(clt_zeros(&db, clt_test_device(), CLT_FLOAT32, 1, s3));
    ck_assert_ok(clt_zeros(&db2, clt_test_device(), CLT_FLOAT32, 1, s2));
    ck_assert_ok(clt_zeros(&dbi, clt_test_device(), CLT_INT32, 1, s3));
    ck_assert_status(clt_relu_backward_bias_(&dx, db, dy, y32), CLT_ERR_SHAPE);
    ck_assert_ptr_null(dx);
    ck_assert(strstr(clt_last_error(), "clt_relu_backward_bias_") != NULL);
    ck_assert_status(clt_relu_backward_bias_(&dx, db, dy, y1d), CLT_ERR_SHAPE);
    ck_assert_status(clt_relu_backward_bias_(&dx, db2, dy, y), CLT_ERR_SHAPE);
    ck_assert_status(clt_relu_backward_bias_(&dx, db, y1d, y1d), CLT_ERR_SHAPE);
    ck_assert_status(clt_relu_backward_bias_(&dx, dbi, dy, y), CLT_ERR_UNSUPPORTED);
    ck_assert_status(clt_relu_backward_bias_(&dx, NULL, dy, y), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_relu_backward_bias_(NULL, db, dy, y), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(dy);
    clt_tensor_release(y);
    clt_tensor_release(y32);
    clt_tensor_release(y1d);
    clt_tensor_release(db);
    clt_tensor_release(db2);
    clt_tensor_release(dbi);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- Whole models against a C reference. ---- */

/* A ResMLP without Flatten (its input is already (B,IN)): Linear(IN,H) +
 * ReLU when `head`, `blocks` residual blocks of width H, Linear(H,OUT) when
 * `tail`. Parameters in state_dict order, as the model lays them out. */
typedef struct net {
    int64_t B, in, h, out;
    int blocks, head, tail;
} net;

static double *dbl(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(double)); }

/* y (B,o) = x (B,i) w^T + b, then ReLU when relu. */
static void ref_linear(const double *x, const float *w, const float *b, int64_t B, int64_t i, int64_t o, int relu,
                       double *y)
{
    for (int64_t r = 0; r < B; r++)
        for (int64_t j = 0; j < o; j++) {
            double s = b[j];
            for (int64_t p = 0; p < i; p++) s += x[r * i + p] * w[j * i + p];
            y[r * o + j] = relu && s < 0 ? 0.0 : s;
        }
}

/* dw += dy^T x, db += column sums of dy, dx = dy w (when dx). */
static void ref_linear_back(const double *dy, const double *x, const float *w, int64_t B, int64_t i, int64_t o,
                            double *dw, double *db, double *dx)
{
    for (int64_t r = 0; r < B; r++)
        for (int64_t j = 0; j < o; j++) {
            db[j] += dy[r * o + j];
            for (int64_t p = 0; p < i; p++) dw[j * i + p] += dy[r * o + j] * x[r * i + p];
        }
    for (int64_t r = 0; dx && r < B; r++)
        for (int64_t p = 0; p < i; p++) {
            double s = 0;
            for (int64_t j = 0; j < o; j++) s += dy[r * o + j] * w[j * i + p];
            dx[r * i + p] = s;
        }
}

static void ref_mask(double *d, const double *y, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        if (!(y[k] > 0)) d[k] = 0;
}

/* Gradients (flat, the model's layout) and dx of sum(y * dy). */
static void ref_grads(const net *a, const float *p, const float *x, const float *dyf, float *grad, float *dxf)
{
    int64_t B = a->B, H = a->h, n0 = a->head ? a->in : H, nh = B * H, nout = a->tail ? a->out : H;
    ck_assert_int_le(a->blocks, 8);
    /* Parameter offsets in state_dict order: head, two Linears per block, tail. */
    int64_t offs[2 * 8 + 2], np = 0;
    int nl = 0;
    if (a->head) offs[nl++] = np, np += H * a->in + H;
    for (int k = 0; k < 2 * a->blocks; k++) offs[nl++] = np, np += H * H + H;
    if (a->tail) offs[nl++] = np, np += a->out * H + a->out;
    const float *head = p + offs[0], *tail = p + offs[nl - 1];
    int first = a->head;
    /* Forward, keeping each block's input and first ReLU output: x[k] is
     * block k's input (x[blocks] the last output), r[k] that ReLU's. */
    double *X = dbl(B * n0), *xs = dbl(nh * (a->blocks + 1)), *rs = dbl(nh * a->blocks), *c = dbl(nh);
    for (int64_t q = 0; q < B * n0; q++) X[q] = x[q];
    if (a->head) ref_linear(X, head, head + H * a->in, B, a->in, H, 1, xs);
    else memcpy(xs, X, (size_t)nh * sizeof *xs);
    for (int k = 0; k < a->blocks; k++) {
        const float *w1 = p + offs[first + 2 * k], *w2 = p + offs[first + 2 * k + 1];
        double *in = xs + k * nh, *r = rs + k * nh;
        ref_linear(in, w1, w1 + H * H, B, H, H, 1, r);
        ref_linear(r, w2, w2 + H * H, B, H, H, 1, c);
        for (int64_t q = 0; q < nh; q++) in[nh + q] = in[q] + c[q];
    }
    /* Backward. */
    double *g = dbl(np), *dy = dbl(B * nout), *dh = dbl(nh), *t = dbl(nh), *t2 = dbl(nh), *dx = dbl(B * n0);
    for (int64_t q = 0; q < B * nout; q++) dy[q] = dyf[q];
    if (a->tail) ref_linear_back(dy, xs + a->blocks * nh, tail, B, H, a->out, g + offs[nl - 1],
                                 g + offs[nl - 1] + a->out * H, dh);
    else memcpy(dh, dy, (size_t)nh * sizeof *dh);
    for (int k = a->blocks - 1; k >= 0; k--) {
        int64_t o1 = offs[first + 2 * k], o2 = offs[first + 2 * k + 1];
        double *in = xs + k * nh, *r = rs + k * nh;
        ref_linear(r, p + o2, p + o2 + H * H, B, H, H, 1, c); /* the second ReLU's output, for its mask */
        memcpy(t, dh, (size_t)nh * sizeof *t);
        ref_mask(t, c, nh);
        ref_linear_back(t, r, p + o2, B, H, H, g + o2, g + o2 + H * H, t2);
        ref_mask(t2, r, nh);
        ref_linear_back(t2, in, p + o1, B, H, H, g + o1, g + o1 + H * H, t);
        for (int64_t q = 0; q < nh; q++) dh[q] += t[q];
    }
    if (a->head) {
        ref_mask(dh, xs, nh);
        ref_linear_back(dh, X, head, B, a->in, H, g, g + H * a->in, dx);
    } else {
        memcpy(dx, dh, (size_t)nh * sizeof *dx);
    }
    for (int64_t q = 0; q < np; q++) grad[q] = (float)g[q];
    for (int64_t q = 0; q < B * n0; q++) dxf[q] = (float)dx[q];
    free(X);
    free(xs);
    free(rs);
    free(c);
    free(g);
    free(dy);
    free(dh);
    free(t);
    free(t2);
    free(dx);
}

static clt_model *build(const net *a, uint64_t seed)
{
    clt_model *m;
    ck_assert_ok(clt_model_create(&m, "net"));
    if (a->head) {
        ck_assert_ok(clt_model_add_linear(m, a->in, a->h));
        ck_assert_ok(clt_model_add_relu(m));
    }
    for (int k = 0; k < a->blocks; k++) ck_assert_ok(clt_model_add_residual(m, a->h));
    if (a->tail) ck_assert_ok(clt_model_add_linear(m, a->h, a->out));
    ck_assert_ok(clt_model_init(m, clt_test_device(), seed));
    return m;
}

/* One forward and backward (dy the caller's, dx asked for or not) fused or
 * not, checkpointed with `segments`: gradients and dx against the reference;
 * dy is left as it was. */
static void check_net(const net *a, int fused, int segments, int with_dx)
{
    ck_assert_int_eq(setenv("CLT_FUSE", fused ? "1" : "0", 1), 0);
    clt_model *m = build(a, 5);
    int64_t n0 = a->head ? a->in : a->h, nout = a->tail ? a->out : a->h, np = clt_model_num_parameter_elements(m);
    float *x = clt_test_random_floats(a->B * n0, 3), *dy = clt_test_random_floats(a->B * nout, 4);
    float *p = clt_test_read(clt_model_parameters(m));
    float *want = malloc((size_t)np * sizeof *want), *ref_dx = malloc((size_t)(a->B * n0) * sizeof *ref_dx);
    ref_grads(a, p, x, dy, want, ref_dx);
    clt_tensor *tx = clt_test_upload(clt_test_device(), x, a->B, n0), *tdy = clt_test_upload(clt_test_device(), dy, a->B, nout), *ty, *tdx;
    ck_assert_ok(clt_model_set_recompute(m, segments));
    ck_assert_ok(clt_model_forward(m, tx, &ty));
    ck_assert_ok(clt_model_backward(m, tdy, with_dx ? &tdx : NULL));
    float *g = clt_test_read(clt_model_gradients(m)), *dy_after = clt_test_read(tdy);
    double err = clt_test_max_rel_err(g, want, np);
    ck_assert_msg(err < TOL, "fused %d, segments %d, blocks %d: gradients max rel err %g", fused, segments,
                  a->blocks, err);
    ck_assert_msg(memcmp(dy_after, dy, (size_t)(a->B * nout) * sizeof *dy) == 0, "fused %d: backward changed dy",
                  fused);
    if (with_dx) {
        float *gx = clt_test_read(tdx);
        err = clt_test_max_rel_err(gx, ref_dx, a->B * n0);
        ck_assert_msg(err < TOL, "fused %d, segments %d: dx max rel err %g", fused, segments, err);
        free(gx);
        clt_tensor_release(tdx);
    }
    ck_assert_int_eq(clt_memory_allocated_category(clt_test_device(), CLT_MEM_ACTIVATIONS), 0);
    free(g);
    free(dy_after);
    free(p);
    free(want);
    free(ref_dx);
    free(x);
    free(dy);
    clt_tensor_release(tx);
    clt_tensor_release(tdy);
    clt_tensor_release(ty);
    clt_model_free(m);
    unsetenv("CLT_FUSE");
}

/* The wide net: its products span several 64 x 64 blocks of the GPU
 * class's GEMM (cl/gemm_gpu.cl), and several of the CPU kernels' tiles, with
 * a partial one in each dimension, and depths past the 16-deep steps with a
 * partial last. On a simulator (scripts/oclgrind) it is 65 wide, one whole
 * block and a partial one: the same kernels and edges in under a tenth of
 * the multiply-adds. */
static net wide_net(void)
{
    return (net){.B = 33, .in = 20, .h = clt_test_simulated() ? 65 : 257, .out = 3, .blocks = 2, .head = 1,
                 .tail = 1};
}

/* Linear + ReLU, three blocks, Linear: every residual block but one gets a
 * dy that only backward holds, so its first Linear adds into it in place. */
START_TEST(test_resmlp_grads)
{
    const net a = {.B = 5, .in = 13, .h = 11, .out = 7, .blocks = 3, .head = 1, .tail = 1};
    const net wide = wide_net();
    int segments[] = {0, 1, CLT_RECOMPUTE_AUTO};
    for (int fused = 0; fused < 2; fused++)
        for (int k = 0; k < 3; k++)
            for (int with_dx = 0; with_dx < 2; with_dx++) check_net(&a, fused, segments[k], with_dx);
    check_net(&wide, 1, 0, 1);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Residual blocks alone: the last block's dy is the caller's, so its first
 * Linear adds into a copy and the caller's dy stays as it was. */
START_TEST(test_residual_stack_grads)
{
    const net a = {.B = 7, .h = 16, .blocks = 3};
    const net one = {.B = 1, .h = 1, .blocks = 1};
    for (int fused = 0; fused < 2; fused++) {
        check_net(&a, fused, 0, 1);
        check_net(&a, fused, 2, 1);
        check_net(&one, fused, 0, 1);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

static int count(const char *text, const char *word)
{
    int c = 0;
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) c++;
    return c;
}

/* On a GPU-class device the products take cl/gemm_gpu.cl with every
 * epilogue in their store: the gradients match the reference, and a traced
 * step of the ResMLP (3 blocks, dx asked for) makes its 24 products as
 * gemm_gpu_f32 (or its 8 x 8 shape) and no bias, ReLU, mask, column-sum or
 * add pass: each ReLU's backward is in the products of a Linear next to it,
 * each residual sum in its block's last product. */
START_TEST(test_resmlp_gpu_class)
{
    clt_device dev = clt_test_device();
    int slot;
    ck_assert_ok(clt__resolve(dev, &slot));
    clt_test_skip_if(!clt__gemm_gpu_side(slot, 1, 1), "wide-work-groups", "work-groups of fewer than 64 work-items");
    ck_assert_int_eq(setenv("CLT_DEVICE_CLASS", "gpu", 1), 0);
    const net a = {.B = 5, .in = 13, .h = 11, .out = 7, .blocks = 3, .head = 1, .tail = 1};
    const net wide = wide_net();
    check_net(&wide, 1, 0, 1);
    check_net(&a, 1, 1, 1);
    check_net(&a, 0, 0, 1);
    char dir[256], path[512];
    clt_test_make_temp_dir(dir, sizeof dir, "fused");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    ck_assert_ok(clt_trace_start(path));
    check_net(&a, 1, 0, 1);
    ck_assert_ok(clt_trace_stop());
    char *trace = clt_test_read_file(path);
    /* gemm_gpu_f32, or gemm_gpu_f32_wg8 for so small a C: either shape. */
    ck_assert_int_eq(count(trace, "\"gemm_gpu_f32\"") + count(trace, "\"gemm_gpu_f32_wg8\""), 24);
    const char *gone[] = {"bias_relu_f32", "sum_rows", "relu_backward", "relu_f32", "\"add_f32\"", "CLBlast"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        ck_assert_msg(!strstr(trace, gone[i]), "%s ran in a GPU-class step", gone[i]);
    free(trace);
    clt_test_remove_dir(dir);
    unsetenv("CLT_DEVICE_CLASS");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* One forward and backward of the float16 form of `a` (x and dy given in
 * float16, so that no conversion runs on the way in) on the device class
 * cls, fused or not, traced into trace when not NULL: the gradients and dx
 * as float32. */
static void half_grads(const net *a, const char *cls, int fused, const char *trace, float **grads, float **dx)
{
    ck_assert_int_eq(setenv("CLT_DEVICE_CLASS", cls, 1), 0);
    ck_assert_int_eq(setenv("CLT_FUSE", fused ? "1" : "0", 1), 0);
    clt_model *m = build(a, 5);
    ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    int64_t n0 = a->head ? a->in : a->h, nout = a->tail ? a->out : a->h;
    float *x = clt_test_random_floats(a->B * n0, 3), *dy = clt_test_random_floats(a->B * nout, 4);
    clt_tensor *tx = clt_test_upload(clt_test_device(), x, a->B, n0);
    clt_tensor *tdy = clt_test_upload(clt_test_device(), dy, a->B, nout), *hx, *hdy, *ty, *tdx, *g;
    ck_assert_ok(clt_to_dtype(&hx, tx, CLT_FLOAT16));
    ck_assert_ok(clt_to_dtype(&hdy, tdy, CLT_FLOAT16));
    if (trace) ck_assert_ok(clt_trace_start(trace));
    ck_assert_ok(clt_model_forward(m, hx, &ty));
    ck_assert_ok(clt_model_backward(m, hdy, &tdx));
    if (trace) ck_assert_ok(clt_trace_stop());
    ck_assert_ok(clt_to_dtype(&g, clt_model_gradients(m), CLT_FLOAT32));
    *grads = clt_test_read(g);
    *dx = clt_test_read(tdx);
    clt_tensor *ts[] = {tx, tdy, hx, hdy, ty, tdx, g};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clt_tensor_release(ts[i]);
    free(x);
    free(dy);
    clt_model_free(m);
    unsetenv("CLT_FUSE");
    unsetenv("CLT_DEVICE_CLASS");
}

/* A float16 ResMLP on a GPU-class device: its products take gemm_gpu_f16
 * with what float32 fuses, and since each fused store rounds where the
 * pass it replaces would (the ReLU's output, the residual sum, the input
 * gradient before a residual gradient is added), its gradients and dx
 * equal those of CLT_FUSE=0, the same products with the ReLU, mask and add
 * passes of their own; they lie within float16's precision of the CPU
 * class's (the CPU kernels' order). A traced step makes its 24 products as
 * gemm_gpu_f16 and no float32 copy, ReLU, mask, add, accumulation or
 * column-sum pass. */
START_TEST(test_resmlp_half_gpu_class)
{
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    clt_test_skip_if(!clt__gemm_gpu_side(slot, 1, 1), "wide-work-groups", "work-groups of fewer than 64 work-items");
    const net nets[] = {{.B = 5, .in = 13, .h = 11, .out = 7, .blocks = 3, .head = 1, .tail = 1}, wide_net()};
    /* On a simulator (scripts/oclgrind) the small one only. */
    for (int k = 0; k < (clt_test_simulated() ? 1 : 2); k++) {
        const net *a = &nets[k];
        int64_t np = a->h * (a->in + 1) + 2 * a->blocks * a->h * (a->h + 1) + a->out * (a->h + 1),
                nx = a->B * a->in;
        float *g[3], *dx[3];
        half_grads(a, "gpu", 1, NULL, &g[0], &dx[0]);
        half_grads(a, "gpu", 0, NULL, &g[1], &dx[1]);
        half_grads(a, "cpu", 1, NULL, &g[2], &dx[2]);
        for (int64_t i = 0; i < np; i++)
            CLT_TEST_REQUIRE(g[0][i] == g[1][i], "h %lld: gradient %lld fused %.9g, unfused %.9g", (long long)a->h,
                             (long long)i, g[0][i], g[1][i]);
        for (int64_t i = 0; i < nx; i++)
            CLT_TEST_REQUIRE(dx[0][i] == dx[1][i], "h %lld: dx[%lld] fused %.9g, unfused %.9g", (long long)a->h,
                             (long long)i, dx[0][i], dx[1][i]);
        double eg = clt_test_max_rel_err(g[0], g[2], np), ex = clt_test_max_rel_err(dx[0], dx[2], nx);
        ck_assert_msg(eg < 2e-2 && ex < 2e-2, "h %lld: GPU class against CPU class: gradients %g, dx %g",
                      (long long)a->h, eg, ex);
        for (int i = 0; i < 3; i++) {
            free(g[i]);
            free(dx[i]);
        }
    }
    char dir[256], path[512];
    clt_test_make_temp_dir(dir, sizeof dir, "fused-half");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    float *g, *dx;
    half_grads(&nets[0], "gpu", 1, path, &g, &dx);
    free(g);
    free(dx);
    char *trace = clt_test_read_file(path);
    ck_assert_int_eq(count(trace, "\"gemm_gpu_f16\"") + count(trace, "\"gemm_gpu_f16_wg8\""), 24);
    const char *gone[] = {"gemm_gpu_f32", "\"f16_to_f32_3\"", "\"f32_to_f16\"", "relu_f16", "relu_backward",
                          "\"add_f16\"", "accumulate_f16", "sum_rows", "CLBlast"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        ck_assert_msg(!strstr(trace, gone[i]), "%s ran in a GPU-class float16 step", gone[i]);
    free(trace);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = clt_test_tcase("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_linear_relu_sizes);
    tcase_add_test(tc, test_linear_relu_nan_passes);
    tcase_add_test(tc, test_linear_relu_errors);
    tcase_add_test(tc, test_relu_bias_sizes);
    tcase_add_test(tc, test_relu_bias_nan);
    tcase_add_test(tc, test_relu_bias_errors);
    tcase_add_test(tc, test_resmlp_grads);
    tcase_add_test(tc, test_residual_stack_grads);
    tcase_add_test(tc, test_resmlp_gpu_class);
    tcase_add_test(tc, test_resmlp_half_gpu_class);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
