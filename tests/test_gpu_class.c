/* The device class (CLT_DEVICE_CLASS, clt__gpu_class) and the GPU-shaped
 * kernels it selects. Each GPU-class reduction (column sums, the fused
 * ReLU backward and bias gradient, the float16 column sums, whole-tensor
 * sums) is checked bit for bit against a C emulation of its fixed tree
 * order, which differs from the CPU kernels' row order, so the test also
 * shows which kernel ran; the CPU class is checked bit for bit against the
 * row order; both against double-precision references at awkward sizes.
 * Also the other class decisions: dense implementation, tuning refusal,
 * free-memory source, and a bad CLT_DEVICE_CLASS value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "device/device_internal.h"
#include "ops/linear_f16.h"
#include "ops/ops_internal.h"
#include "support.h"

static int slot_of(clt_device d)
{
    int slot;
    ck_assert_ok(clt__resolve(d, &slot));
    return slot;
}

/* The GPU-class kernels need work-groups of 256; a device with smaller ones
 * keeps the CPU-shaped kernels, and the tests expect those there. */
static int wide_groups(void) { return clt__slot_get(slot_of(clt_device_get_default()))->max_work_group >= 256; }

static void set_class(const char *v)
{
    if (v) setenv("CLT_DEVICE_CLASS", v, 1);
    else unsetenv("CLT_DEVICE_CLASS");
}

static const int64_t row_sizes[] = {1, 2, 15, 16, 17, 100, 257};
static const int64_t col_sizes[] = {1, 3, 16, 17, 33, 100};
#define NR (sizeof row_sizes / sizeof row_sizes[0])
#define NC (sizeof col_sizes / sizeof col_sizes[0])

/* Lane j of 16 adds rows j, j + 16, ... in order; then the tree
 * t[j] += t[j + h] for h = 8, 4, 2, 1 (cl/reduce.cl sum_rows_wg_f32). */
static float tree_col(const float *x, int64_t rows, int64_t cols, int64_t c)
{
    float t[16];
    for (int j = 0; j < 16; j++) {
        float s = 0.0f;
        for (int64_t r = j; r < rows; r += 16) s += x[r * cols + c];
        t[j] = s;
    }
    for (int h = 8; h > 0; h /= 2)
        for (int j = 0; j < h; j++) t[j] += t[j + h];
    return t[0];
}

static float row_order_col(const float *x, int64_t rows, int64_t cols, int64_t c)
{
    float s = 0.0f;
    for (int64_t r = 0; r < rows; r++) s += x[r * cols + c];
    return s;
}

static double double_col(const float *x, int64_t rows, int64_t cols, int64_t c, double *abs_sum)
{
    double s = 0.0;
    *abs_sum = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        s += x[r * cols + c];
        *abs_sum += fabs(x[r * cols + c]);
    }
    return s;
}

/* Distance in units in the last place between two finite floats of one sign. */
static int64_t ulps_apart(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void bits_eq(float got, float want, const char *what, int64_t rows, int64_t cols, int64_t c)
{
    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s (%lld x %lld) column %lld: %.9g, expected %.9g", what,
                  (long long)rows, (long long)cols, (long long)c, got, want);
}

/* clt_sum_rows on each class: the kernel's order exactly, close to double. */
static void check_sum_rows(const char *cls)
{
    set_class(cls);
    int gpu = strcmp(cls, "gpu") == 0 && wide_groups();
    for (size_t a = 0; a < NR; a++)
        for (size_t b = 0; b < NC; b++) {
            int64_t rows = row_sizes[a], cols = col_sizes[b];
            float *x = clt_test_random_floats(rows * cols, (uint64_t)(rows * 131 + cols));
            clt_tensor *base, *tx = clt_test_upload_view(clt_device_get_default(), x, rows, cols, 2, 1000.0f, &base), *ty, *ty2;
            ck_assert_ok(clt_sum_rows(&ty, tx));
            ck_assert_ok(clt_sum_rows(&ty2, tx));
            float *y = clt_test_read(ty), *y2 = clt_test_read(ty2);
            for (int64_t c = 0; c < cols; c++) {
                float want = gpu ? tree_col(x, rows, cols, c) : row_order_col(x, rows, cols, c);
                bits_eq(y[c], want, gpu ? "sum_rows (GPU class)" : "sum_rows (CPU class)", rows, cols, c);
                bits_eq(y2[c], y[c], "sum_rows run twice", rows, cols, c);
                double abs_sum, ref = double_col(x, rows, cols, c, &abs_sum);
                ck_assert_msg(fabs(y[c] - ref) <= 1e-6 * (abs_sum + 1), "sum_rows: %.9g vs %.9g", y[c], ref);
            }
            free(x);
            free(y);
            free(y2);
            clt_tensor_release(tx);
            clt_tensor_release(base);
            clt_tensor_release(ty);
            clt_tensor_release(ty2);
        }
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_sum_rows_gpu_tree)
{
    check_sum_rows("gpu");
}
END_TEST

START_TEST(test_sum_rows_cpu_order) { check_sum_rows("cpu"); }
END_TEST

/* clt_relu_backward_bias_: dx exact, db = db0 + the column sums of dx in the
 * class's order. */
static void check_relu_bias(const char *cls)
{
    set_class(cls);
    int gpu = strcmp(cls, "gpu") == 0 && wide_groups();
    for (size_t a = 0; a < NR; a++)
        for (size_t b = 0; b < NC; b++) {
            int64_t rows = row_sizes[a], cols = col_sizes[b], n = rows * cols;
            float *dy = clt_test_random_floats(n, (uint64_t)n + 7), *y = clt_test_random_floats(n, (uint64_t)n + 8);
            float *db0 = clt_test_random_floats(cols, (uint64_t)cols + 9);
            float *g = malloc((size_t)n * sizeof *g);
            for (int64_t i = 0; i < n; i++) g[i] = y[i] > 0.0f ? dy[i] : 0.0f;
            clt_tensor *tdy = clt_test_upload(clt_device_get_default(), dy, rows, cols), *ty = clt_test_upload(clt_device_get_default(), y, rows, cols);
            clt_tensor *tdb, *tdx;
            ck_assert_ok(clt_from_host(&tdb, clt_device_get_default(), CLT_FLOAT32, 1, &cols, db0));
            ck_assert_ok(clt_relu_backward_bias_(&tdx, tdb, tdy, ty));
            float *dx = clt_test_read(tdx), *db = clt_test_read(tdb);
            ck_assert_int_eq(memcmp(dx, g, (size_t)n * sizeof *g), 0);
            for (int64_t c = 0; c < cols; c++) {
                float want = db0[c] + (gpu ? tree_col(g, rows, cols, c) : row_order_col(g, rows, cols, c));
                bits_eq(db[c], want, gpu ? "relu_backward_bias db (GPU class)" : "relu_backward_bias db (CPU class)",
                        rows, cols, c);
            }
            free(dy);
            free(y);
            free(db0);
            free(g);
            free(dx);
            free(db);
            clt_tensor *all[] = {tdy, ty, tdb, tdx};
            for (int i = 0; i < 4; i++) clt_tensor_release(all[i]);
        }
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_relu_bias_gpu_tree)
{
    check_relu_bias("gpu");
}
END_TEST

START_TEST(test_relu_bias_cpu_order) { check_relu_bias("cpu"); }
END_TEST

/* The work-group sum: groups of 256 work-items, G = ceil(n / 256) of them
 * (at most 256), work-item i adding elements i, i + 256 G, ...; each group's
 * tree, then one group's tree over the G partials (cl/reduce.cl). */
static float tree_256(float *t)
{
    for (int h = 128; h > 0; h /= 2)
        for (int j = 0; j < h; j++) t[j] += t[j + h];
    return t[0];
}

static float tree_sum(const float *x, int64_t n)
{
    int64_t groups = (n + 255) / 256;
    if (groups < 1) groups = 1;
    if (groups > 256) groups = 256;
    float part[256] = {0}, t[256];
    for (int64_t g = 0; g < groups; g++) {
        for (int l = 0; l < 256; l++) {
            float s = 0.0f;
            for (int64_t i = g * 256 + l; i < n; i += groups * 256) s += x[i];
            t[l] = s;
        }
        part[g] = tree_256(t);
    }
    for (int l = 0; l < 256; l++) t[l] = 0.0f + part[l];
    return tree_256(t);
}

/* The CPU kernels' sum: min(n, 4096) partials, partial p adding elements
 * p, p + parts, ...; then the partials in order. */
static float parts_sum(const float *x, int64_t n)
{
    int64_t parts = n < 4096 ? n : 4096;
    float s = 0.0f;
    for (int64_t p = 0; p < parts; p++) {
        float t = 0.0f;
        for (int64_t i = p; i < n; i += parts) t += x[i];
        s += t;
    }
    return s;
}

START_TEST(test_sum_gpu_tree)
{
    set_class("gpu");
    int wide = wide_groups();
    static const int64_t sizes[] = {1, 2, 255, 256, 257, 1000, 4097, 65537, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *x = clt_test_random_floats(n, (uint64_t)n + 3);
        clt_tensor *tx, *ts, *tm;
        ck_assert_ok(clt_from_host(&tx, clt_device_get_default(), CLT_FLOAT32, 1, &n, x));
        ck_assert_ok(clt_sum(&ts, tx));
        ck_assert_ok(clt_mean(&tm, tx));
        float got, mean, want = wide ? tree_sum(x, n) : parts_sum(x, n);
        ck_assert_ok(clt_to_host(ts, &got, sizeof got));
        ck_assert_ok(clt_to_host(tm, &mean, sizeof mean));
        bits_eq(got, want, "sum (GPU class)", n, 1, 0);
        /* The mean divides that sum on the device, and OpenCL allows a
         * float division 2.5 ulp of the exact quotient unless built with
         * -cl-fp32-correctly-rounded-divide-sqrt (NVIDIA's is not correctly
         * rounded): within 3 ulp of the correctly rounded one. */
        float q = want / (float)n;
        ck_assert_msg((mean > 0) == (q > 0) && ulps_apart(mean, q) <= 3, "mean (GPU class) of %lld: %.9g, expected %.9g",
                      (long long)n, mean, q);
        double ref = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; i++) {
            ref += x[i];
            abs_sum += fabs(x[i]);
        }
        ck_assert_msg(fabs(got - ref) <= 1e-5 * (abs_sum + 1), "sum of %lld: %.9g vs %.9g", (long long)n, got, ref);
        free(x);
        clt_tensor_release(tx);
        clt_tensor_release(ts);
        clt_tensor_release(tm);
    }
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The loss's mean over rows goes through the work-group sum: against a
 * double reference, and the same bits twice. */
START_TEST(test_loss_gpu_class)
{
    set_class("gpu");
    static const int64_t shapes[][2] = {{1, 10}, {3, 7}, {256, 10}, {257, 13}, {1000, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = clt_test_random_floats(rows * cols, (uint64_t)rows + 11);
        int32_t *lab = malloc((size_t)rows * sizeof *lab);
        double ref = 0;
        for (int64_t r = 0; r < rows; r++) {
            lab[r] = (int32_t)((r * 5 + 1) % cols);
            double m = x[r * cols], z = 0;
            for (int64_t c = 1; c < cols; c++) m = fmax(m, x[r * cols + c]);
            for (int64_t c = 0; c < cols; c++) z += exp(x[r * cols + c] - m);
            ref += log(z) - (x[r * cols + lab[r]] - m);
        }
        ref /= (double)rows;
        clt_tensor *tx = clt_test_upload(clt_device_get_default(), x, rows, cols), *tl, *l1, *l2;
        ck_assert_ok(clt_from_host(&tl, clt_device_get_default(), CLT_INT32, 1, &rows, lab));
        ck_assert_ok(clt_softmax_cross_entropy(&l1, NULL, tx, tl));
        ck_assert_ok(clt_softmax_cross_entropy(&l2, NULL, tx, tl));
        float a, b;
        ck_assert_ok(clt_to_host(l1, &a, sizeof a));
        ck_assert_ok(clt_to_host(l2, &b, sizeof b));
        ck_assert_msg(fabs(a - ref) <= 1e-5 * (fabs(ref) + 1), "loss (%lld x %lld): %.9g vs %.9g", (long long)rows,
                      (long long)cols, a, ref);
        ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
        free(x);
        free(lab);
        clt_tensor *all[] = {tx, tl, l1, l2};
        for (int i = 0; i < 4; i++) clt_tensor_release(all[i]);
    }
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The float16 column sums (CPU kernels for the products, CLT_DENSE=cpu, so
 * the float16 Linear's backward sums db in float16; the GPU class's tree). */
START_TEST(test_f16_bias_grad_gpu_tree)
{
    set_class("gpu");
    setenv("CLT_DENSE", "cpu", 1);
    int wide = wide_groups();
    static const int64_t shapes[][2] = {{1, 1}, {17, 3}, {33, 17}, {100, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1], in = 5;
        float *dyf = clt_test_random_floats(rows * cols, (uint64_t)rows + 21);
        uint16_t *dyh = malloc((size_t)(rows * cols) * sizeof *dyh), db0[64];
        float *dyr = malloc((size_t)(rows * cols) * sizeof *dyr);
        for (int64_t i = 0; i < rows * cols; i++) {
            dyh[i] = clt_float_to_half(dyf[i]);
            dyr[i] = clt_half_to_float(dyh[i]);
        }
        for (int64_t c = 0; c < cols; c++) db0[c] = clt_float_to_half(0.25f * (float)c);
        int64_t dys[] = {rows, cols}, xs[] = {rows, in}, ws[] = {cols, in};
        clt_tensor *tdy, *tx, *tw, *tdw, *tdb;
        ck_assert_ok(clt_from_host(&tdy, clt_device_get_default(), CLT_FLOAT16, 2, dys, dyh));
        ck_assert_ok(clt_zeros(&tx, clt_device_get_default(), CLT_FLOAT16, 2, xs));
        ck_assert_ok(clt_zeros(&tw, clt_device_get_default(), CLT_FLOAT16, 2, ws));
        ck_assert_ok(clt_zeros(&tdw, clt_device_get_default(), CLT_FLOAT16, 2, ws));
        ck_assert_ok(clt_from_host(&tdb, clt_device_get_default(), CLT_FLOAT16, 1, &cols, db0));
        ck_assert_ok(clt__linear_backward_f16(NULL, tdw, tdb, tdy, tx, tw));
        uint16_t db[64];
        ck_assert_ok(clt_to_host(tdb, db, (size_t)cols * sizeof *db));
        for (int64_t c = 0; c < cols; c++) {
            uint16_t want = clt_float_to_half(clt_half_to_float(db0[c]) +
                                              (wide ? tree_col : row_order_col)(dyr, rows, cols, c));
            ck_assert_msg(db[c] == want, "float16 db (%lld x %lld) column %lld: 0x%04x, expected 0x%04x",
                          (long long)rows, (long long)cols, (long long)c, db[c], want);
        }
        free(dyf);
        free(dyh);
        free(dyr);
        clt_tensor *all[] = {tdy, tx, tw, tdw, tdb};
        for (int i = 0; i < 5; i++) clt_tensor_release(all[i]);
    }
    unsetenv("CLT_DENSE");
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The fused bias + ReLU epilogue after the CLBlast product (GPU class):
 * against the C reference, NaN passing through, and without ReLU. */
START_TEST(test_linear_bias_relu_gpu_class)
{
    set_class("gpu");
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 10, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t B = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *x = clt_test_random_floats(B * C, (uint64_t)B + 31), *w = clt_test_random_floats(OC * C, 32);
        float *b = clt_test_random_floats(OC, 33), *ref = malloc((size_t)(B * OC) * sizeof *ref);
        x[0] = NAN;
        clt_test_ref_gemm(0, 1, B, OC, C, 1.0f, x, w, 0.0f, ref);
        clt_tensor *tx = clt_test_upload(clt_device_get_default(), x, B, C), *tw = clt_test_upload(clt_device_get_default(), w, OC, C), *tb, *ty, *tz;
        ck_assert_ok(clt_from_host(&tb, clt_device_get_default(), CLT_FLOAT32, 1, &OC, b));
        ck_assert_ok(clt_linear_relu_forward(&ty, tx, tw, tb));
        ck_assert_ok(clt_linear_forward(&tz, tx, tw, tb));
        float *y = clt_test_read(ty), *z = clt_test_read(tz);
        for (int64_t i = 0; i < B * OC; i++) {
            float lin = ref[i] + b[i % OC], want = lin < 0.0f ? 0.0f : lin;
            if (i < OC) {
                /* x[0] is NaN: the first row is NaN, and ReLU lets it through. */
                ck_assert_msg(isnan(y[i]) && isnan(z[i]), "row 0 column %lld: %g %g", (long long)i, y[i], z[i]);
                continue;
            }
            ck_assert_msg(fabsf(y[i] - want) <= 1e-4f * (1 + fabsf(want)), "relu(xW'+b)[%lld] = %g, expected %g",
                          (long long)i, y[i], want);
            ck_assert_msg(fabsf(z[i] - lin) <= 1e-4f * (1 + fabsf(lin)), "xW'+b[%lld] = %g, expected %g",
                          (long long)i, z[i], lin);
        }
        free(x);
        free(w);
        free(b);
        free(ref);
        free(y);
        free(z);
        clt_tensor *all[] = {tx, tw, tb, ty, tz};
        for (int i = 0; i < 5; i++) clt_tensor_release(all[i]);
    }
    set_class(NULL);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Every class decision follows CLT_DEVICE_CLASS; CLT_DENSE still overrides
 * the dense one; a bad value is an error naming it. */
START_TEST(test_class_decisions)
{
    int slot = slot_of(clt_device_get_default()), cpu = -1, gpu = -1;
    set_class("gpu");
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    ck_assert_int_eq(gpu, 1);
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    ck_assert_int_eq(cpu, 0);
    int tm, tn, tuned;
    ck_assert_status(clt_tune_lookup(clt_device_get_default(), 0, 0, 8, 8, 8, &tm, &tn, &tuned), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "GPU-class"));
    int64_t free_bytes, total;
    ck_assert_ok(clt_memory_get_info(clt_device_get_default(), &free_bytes, &total));
    char ext[4096] = "";
    clGetDeviceInfo(clt__slot_get(slot)->device, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
    ext[sizeof ext - 1] = '\0';
    /* No AMD free-memory query (pocl, oclgrind): a GPU-class device says "unknown". */
    if (!strstr(ext, "cl_amd_device_attribute_query")) ck_assert_int_eq(free_bytes, -1);
    setenv("CLT_DENSE", "cpu", 1);
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    ck_assert_int_eq(cpu, 1);
    unsetenv("CLT_DENSE");

    set_class("cpu");
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    ck_assert_int_eq(gpu, 0);
    ck_assert_ok(clt__dense_cpu(slot, &cpu));
    ck_assert_int_eq(cpu, 1);
    ck_assert_ok(clt_tune_lookup(clt_device_get_default(), 0, 0, 8, 8, 8, &tm, &tn, &tuned));
    ck_assert_ok(clt_memory_get_info(clt_device_get_default(), &free_bytes, &total));
    if (!strstr(ext, "cl_amd_device_attribute_query")) ck_assert_int_ge(free_bytes, 0);

    /* GPU, CPU in any case; anything else is refused by the environment
     * check that every call using a device makes, naming the variable. */
    set_class("GPU");
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    ck_assert_int_eq(gpu, 1);
    set_class("banana");
    clt__env_forget();
    ck_assert_status(clt_memory_get_info(clt_device_get_default(), &free_bytes, &total), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "CLT_DEVICE_CLASS"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "cpu or gpu"));
    set_class(NULL);
    clt__env_forget();
    ck_assert_ok(clt_check_environment());
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_class");
    TCase *tc = clt_test_tcase("gpu_class");
    tcase_add_test(tc, test_sum_rows_gpu_tree);
    tcase_add_test(tc, test_sum_rows_cpu_order);
    tcase_add_test(tc, test_relu_bias_gpu_tree);
    tcase_add_test(tc, test_relu_bias_cpu_order);
    tcase_add_test(tc, test_sum_gpu_tree);
    tcase_add_test(tc, test_loss_gpu_class);
    tcase_add_test(tc, test_f16_bias_grad_gpu_tree);
    tcase_add_test(tc, test_linear_bias_relu_gpu_class);
    tcase_add_test(tc, test_class_decisions);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
