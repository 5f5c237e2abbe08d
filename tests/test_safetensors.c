/* safetensors: exact round trips, files laid out as Python's safetensors
 * writes them, hostile headers, and atomic saving. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "support.h"

/* For helpers and loops that run thousands of times: Check's ck_assert
 * records its location on every call, which costs more than the work. */
#define require(cond, ...)                                                                                  \
    do {                                                                                                   \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                            \
    } while (0)

static char dir[256];

static void make_dir(void) { clt_test_make_temp_dir(dir, sizeof dir, "safetensors"); }

static void remove_dir(void) { clt_test_remove_dir(dir); }

static int count_entries(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* A file as the format lays it out: the header padded with spaces to a
 * multiple of 8 (as Python's safetensors pads it), then the buffer. */
static void write_st(const char *path, const char *header, const void *buf, size_t buflen)
{
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;
    uint8_t *file = calloc(1, 8 + padded + buflen + 1);
    for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(file + 8, header, len);
    memset(file + 8 + len, ' ', padded - len);
    if (buflen) memcpy(file + 8 + padded, buf, buflen);
    clt_test_write_bytes(path, file, 8 + padded + buflen);
    free(file);
}

START_TEST(test_round_trip_is_exact)
{
    make_dir();
    char path[512];
    path_of(path, sizeof path, "model.safetensors");
    /* Awkward shapes, a scalar, an empty tensor, and float bit patterns that
     * a conversion would change (NaN payload, -0, subnormal). */
    int64_t s0[] = {7, 13}, s1[] = {1}, s2[] = {3, 5, 2}, s4[] = {0, 4}, s5[] = {11};
    float a[91], c[30];
    clt_test_fill_uniform(a, 91, 1, -3, 3);
    clt_test_fill_uniform(c, 30, 2, -1, 1);
    uint32_t specials[] = {0x7fc01234u, 0x80000000u, 0x00000001u, 0xff800000u};
    memcpy(&a[0], specials, sizeof specials);
    float b[1] = {42.5f}, scalar = -1.25f;
    int32_t ints[11];
    for (int i = 0; i < 11; i++) ints[i] = (i - 5) * 1000003;
    clt_tensor *t[6];
    ck_assert_ok(clt_from_host(&t[0], clt_test_cpu(), CLT_FLOAT32, 2, s0, a));
    ck_assert_ok(clt_from_host(&t[1], clt_test_cpu(), CLT_FLOAT32, 1, s1, b));
    ck_assert_ok(clt_from_host(&t[2], clt_test_cpu(), CLT_FLOAT32, 3, s2, c));
    ck_assert_ok(clt_from_host(&t[3], clt_test_cpu(), CLT_FLOAT32, 0, NULL, &scalar));
    ck_assert_ok(clt_empty(&t[4], clt_test_cpu(), CLT_FLOAT32, 2, s4));
    ck_assert_ok(clt_from_host(&t[5], clt_test_cpu(), CLT_INT32, 1, s5, ints));
    const char *names[] = {"net.1.weight", "net.1.bias", "net.3.body.0.weight", "step", "empty", "counts"};
    const char *keys[] = {"format", "arch"}, *values[] = {"pt", "ResMLPClassifier(h=7, k=1)"};
    ck_assert_ok(clt_safetensors_save(path, 6, names, t, 2, keys, values));

    size_t n;
    uint8_t *file = clt_test_read_bytes(path, &n);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | file[i];
    ck_assert_uint_eq(hlen % 8, 0);
    ck_assert_int_eq(file[8], '{');
    ck_assert_uint_eq(n, 8 + hlen + (91 + 1 + 30 + 1 + 0) * 4 + 11 * 4);
    free(file);

    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    ck_assert_int_eq(clt_safetensors_num_tensors(f), 6);
    ck_assert_int_eq(clt_safetensors_num_metadata(f), 2);
    ck_assert_str_eq(clt_safetensors_metadata(f, "arch"), "ResMLPClassifier(h=7, k=1)");
    ck_assert_str_eq(clt_safetensors_metadata(f, "format"), "pt");
    ck_assert_ptr_null(clt_safetensors_metadata(f, "missing"));
    for (int i = 0; i < 6; i++) {
        int k = clt_safetensors_find(f, names[i]);
        ck_assert_int_ge(k, 0);
        clt_safetensors_info info;
        ck_assert_ok(clt_safetensors_tensor_info(f, k, &info));
        ck_assert_str_eq(info.name, names[i]);
        ck_assert_str_eq(info.dtype, i == 5 ? "I32" : "F32");
        ck_assert_int_eq(info.ndim, clt_tensor_ndim(t[i]));
        for (int d = 0; d < info.ndim; d++) ck_assert_int_eq(info.shape[d], clt_tensor_dim(t[i], d));
        ck_assert_uint_eq(info.end - info.begin, clt_tensor_nbytes(t[i]));

        clt_tensor *r;
        ck_assert_ok(clt_safetensors_read(f, names[i], clt_test_cpu(), &r));
        ck_assert_int_eq(clt_tensor_dtype(r), clt_tensor_dtype(t[i]));
        ck_assert_int_eq(clt_tensor_numel(r), clt_tensor_numel(t[i]));
        size_t nb = clt_tensor_nbytes(t[i]);
        uint8_t *want = malloc(nb + 1), *got = malloc(nb + 1);
        ck_assert_ok(clt_to_host(t[i], want, nb));
        ck_assert_ok(clt_to_host(r, got, nb));
        ck_assert_int_eq(memcmp(want, got, nb), 0);

        /* Into an existing tensor of the same shape. */
        clt_tensor *into;
        ck_assert_ok(clt_zeros_like(&into, t[i]));
        ck_assert_ok(clt_safetensors_read_into(f, names[i], into));
        memset(got, 0, nb);
        ck_assert_ok(clt_to_host(into, got, nb));
        ck_assert_int_eq(memcmp(want, got, nb), 0);
        free(want);
        free(got);
        clt_tensor_release(r);
        clt_tensor_release(into);
    }
    ck_assert_int_eq(clt_safetensors_find(f, "net.9.weight"), -1);
    clt_tensor *r = NULL;
    ck_assert_status(clt_safetensors_read(f, "net.9.weight", clt_test_cpu(), &r), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "net.9.weight"));
    ck_assert_ptr_null(r);
    ck_assert_status(clt_safetensors_read_into(f, "net.1.weight", t[2]), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "(7, 13)"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "(3, 5, 2)"));
    clt_tensor *wrong_dtype;
    ck_assert_ok(clt_zeros(&wrong_dtype, clt_test_cpu(), CLT_INT32, 1, s1));
    ck_assert_status(clt_safetensors_read_into(f, "net.1.bias", wrong_dtype), CLT_ERR_SHAPE);
    clt_tensor_release(wrong_dtype);
    clt_safetensors_free(f);
    clt_safetensors_free(NULL);

    /* Saving with no tensors gives a valid empty file. */
    ck_assert_ok(clt_safetensors_save(path, 0, NULL, NULL, 0, NULL, NULL));
    ck_assert_ok(clt_safetensors_open(&f, path));
    ck_assert_int_eq(clt_safetensors_num_tensors(f), 0);
    clt_safetensors_free(f);

    for (int i = 0; i < 6; i++) clt_tensor_release(t[i]);
    ck_assert_int_eq(count_entries(), 1);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The layout Python's safetensors writes for a PyTorch state_dict:
 * metadata {"format": "pt"}, tensors sorted by name, header padded with
 * spaces; also F16, BF16 and an I64 counter. */
START_TEST(test_reads_python_layout)
{
    make_dir();
    char path[512];
    path_of(path, sizeof path, "torch.safetensors");
    const char *header =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"net.1.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
        "\"net.1.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[12,36]},"
        "\"half\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[36,48]},"
        "\"brain\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[48,52]},"
        "\"num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[52,60]}}";
    uint8_t buf[60];
    float bias[3] = {0.5f, -1.0f, 2.25f}, weight[6] = {1, 2, 3, 4, 5, 6};
    /* 1.0, -2.0, 65504 (largest), 2^-24 (smallest subnormal), inf, 0.5+2^-11 */
    uint16_t half[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x3801};
    float half_want[6] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, INFINITY, 0.50048828125f};
    uint16_t brain[2] = {0x3f80, 0xc0a0}; /* 1.0, -5.0 */
    int64_t counter = 12345;
    memcpy(buf, bias, 12);
    memcpy(buf + 12, weight, 24);
    memcpy(buf + 36, half, 12);
    memcpy(buf + 48, brain, 4);
    memcpy(buf + 52, &counter, 8);
    write_st(path, header, buf, sizeof buf);

    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    ck_assert_int_eq(clt_safetensors_num_tensors(f), 5);
    ck_assert_str_eq(clt_safetensors_metadata(f, "format"), "pt");
    clt_tensor *w;
    ck_assert_ok(clt_safetensors_read(f, "net.1.weight", clt_test_cpu(), &w));
    ck_assert_int_eq(clt_tensor_dim(w, 0), 3);
    ck_assert_int_eq(clt_tensor_dim(w, 1), 2);
    float *x = clt_test_read(w);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(x[i], weight[i]);
    free(x);
    clt_tensor_release(w);

    ck_assert_ok(clt_safetensors_read(f, "half", clt_test_cpu(), &w));
    ck_assert_int_eq(clt_tensor_dtype(w), CLT_FLOAT32);
    x = clt_test_read(w);
    for (int i = 0; i < 6; i++) ck_assert_msg(x[i] == half_want[i], "half[%d] = %g, want %g", i, x[i], half_want[i]);
    free(x);
    clt_tensor_release(w);

    ck_assert_ok(clt_safetensors_read(f, "brain", clt_test_cpu(), &w));
    x = clt_test_read(w);
    ck_assert_float_eq(x[0], 1.0f);
    ck_assert_float_eq(x[1], -5.0f);
    free(x);
    clt_tensor_release(w);

    ck_assert_status(clt_safetensors_read(f, "num_batches_tracked", clt_test_cpu(), &w), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "I64"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "num_batches_tracked"));
    clt_safetensors_free(f);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Opens a file with this header and buffer; it must fail with `want` and a
 * message containing the path and each of the `expect` strings. */
static void expect_refused(const char *header, size_t buflen, clt_status want, const char *expect1,
                           const char *expect2)
{
    char path[512];
    path_of(path, sizeof path, "bad.safetensors");
    uint8_t *buf = calloc(1, buflen + 1);
    write_st(path, header, buf, buflen);
    free(buf);
    clt_safetensors *f = (clt_safetensors *)1;
    clt_test_limit_memory();
    clt_status s = clt_safetensors_open(&f, path);
    clt_test_unlimit_memory();
    ck_assert_msg(s == want, "header %s: got %s (%s), want %s", header, clt_status_string(s), clt_last_error(),
                  clt_status_string(want));
    ck_assert_ptr_null(f);
    const char *msg = clt_last_error();
    ck_assert_msg(strstr(msg, path), "message '%s' does not name the file", msg);
    ck_assert_msg(!expect1 || strstr(msg, expect1), "message '%s' lacks '%s'", msg, expect1);
    ck_assert_msg(!expect2 || strstr(msg, expect2), "message '%s' lacks '%s'", msg, expect2);
}

#define T(name, body) "\"" name "\":" body

START_TEST(test_hostile_headers)
{
    make_dir();
    const clt_status F = CLT_ERR_FORMAT;
    /* Syntax, and what jansson refuses for us. */
    expect_refused("{\"a\": {", 0, F, "not valid JSON", NULL);
    expect_refused("[1, 2]", 0, F, "not a JSON object", NULL);
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} trailing", 4, F,
                   "not valid JSON", NULL);
    expect_refused("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "not valid JSON",
                   "decode byte 0xff");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   8, F, "duplicate", NULL);
    expect_refused("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "not valid JSON",
                   NULL);
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}", 4, F,
                   "not valid JSON", NULL);
    /* Entries. */
    expect_refused("{" T("a", "[1]") "}", 0, F, "'a'", "not an object");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[1]}") "}", 4, F, "'a'", "lacks");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}") "}", 4, F, "'a'",
                   "unexpected field 'x'");
    expect_refused("{" T("w", "{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}") "}", 4, F, "'w'",
                   "unknown dtype 'F33'");
    expect_refused("{" T("w", "{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}") "}", 4, F, "'w'", "dtype");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}") "}", 4, F, "'w'",
                   "shape[0]");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]}") "}", 4, F, "'w'",
                   "shape[0]");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":7,\"data_offsets\":[0,4]}") "}", 4, F, "'w'",
                   "not an array");
    /* Sizes that overflow 64 bits, and huge claims with a tiny file. */
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}") "}", 4,
                   F, "'w'", "overflows");
    expect_refused("{" T("w", "{\"dtype\":\"F64\",\"shape\":[1152921504606846976],\"data_offsets\":[0,4]}") "}", 4,
                   F, "'w'", "overflows");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[1099511627776],"
                              "\"data_offsets\":[0,4398046511104]}") "}",
                   4, F, "'w'", "past the end");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,9223372036854775807]}") "}", 8,
                   F, "'w'", "past the end");
    /* Offsets. */
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}") "}", 4, F, "'w'",
                   "past the end of the 4-byte data buffer");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}") "}", 8, F, "'w'",
                   "end before they begin");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}") "}", 4, F, "'w'",
                   "need 8 bytes");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}") "}", 4, F, "'w'",
                   "data_offsets");
    expect_refused("{" T("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}") "}", 4, F, "'w'",
                   "data_offsets");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}") ","
                   T("b", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}") "}",
                   12, F, "'b'", "overlap tensor 'a'");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}") ","
                   T("b", "{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}") "}",
                   8, F, "'b'", "overlap tensor 'a'");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}") ","
                   T("b", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}") "}",
                   12, F, "'b'", "belong to no tensor");
    expect_refused("{" T("a", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}") "}", 12, F,
                   "trailing bytes", NULL);
    /* Metadata. */
    expect_refused("{\"__metadata__\":{\"format\":1}}", 0, F, "__metadata__", "'format'");
    expect_refused("{\"__metadata__\":[\"pt\"]}", 0, F, "__metadata__", NULL);

    /* Header lengths: past the file, past the limit, zero, and a file too
     * short to hold one. */
    char path[512];
    path_of(path, sizeof path, "bad.safetensors");
    uint8_t claim[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    clt_test_write_bytes(path, claim, sizeof claim);
    clt_safetensors *f;
    clt_test_limit_memory();
    ck_assert_status(clt_safetensors_open(&f, path), F);
    clt_test_unlimit_memory();
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "larger than the 8 bytes"));
    uint8_t zero[8] = {0};
    clt_test_write_bytes(path, zero, 8);
    ck_assert_status(clt_safetensors_open(&f, path), F);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "empty"));
    clt_test_write_bytes(path, zero, 5);
    ck_assert_status(clt_safetensors_open(&f, path), F);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "fewer than"));
    /* A sparse 200 MB file claiming a 150 MB header: refused before reading. */
    uint8_t big[8] = {0x80, 0xf0, 0xfa, 0x08, 0, 0, 0, 0}; /* 150000000 */
    clt_test_write_bytes(path, big, 8);
    ck_assert_int_eq(truncate(path, 200000000), 0);
    clt_test_limit_memory();
    ck_assert_status(clt_safetensors_open(&f, path), F);
    clt_test_unlimit_memory();
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "exceeds the limit"));

    path_of(path, sizeof path, "missing.safetensors");
    ck_assert_status(clt_safetensors_open(&f, path), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), strerror(ENOENT)));
    remove_dir();
}
END_TEST

/* Every truncation and every single-byte corruption of a valid file either
 * opens (a corruption can stay valid, e.g. inside a name or the data) or
 * fails with CLT_ERR_FORMAT; reading what opens never crashes. */
START_TEST(test_every_truncation_and_byte_flip)
{
    make_dir();
    char path[512], bad[512];
    path_of(path, sizeof path, "good.safetensors");
    path_of(bad, sizeof bad, "bad.safetensors");
    int64_t s0[] = {2, 3}, s1[] = {2};
    float w[6] = {1, 2, 3, 4, 5, 6};
    int32_t k[2] = {7, 8};
    clt_tensor *t[2];
    ck_assert_ok(clt_from_host(&t[0], clt_test_cpu(), CLT_FLOAT32, 2, s0, w));
    ck_assert_ok(clt_from_host(&t[1], clt_test_cpu(), CLT_INT32, 1, s1, k));
    const char *names[] = {"w", "k"}, *keys[] = {"m"}, *values[] = {"v"};
    ck_assert_ok(clt_safetensors_save(path, 2, names, t, 1, keys, values));
    clt_tensor_release(t[0]);
    clt_tensor_release(t[1]);
    size_t n;
    uint8_t *good = clt_test_read_bytes(path, &n);
    for (size_t len = 0; len < n; len++) {
        clt_test_write_bytes(bad, good, len);
        clt_safetensors *f;
        clt_status s = clt_safetensors_open(&f, bad);
        require(s == CLT_ERR_FORMAT && strstr(clt_last_error(), bad), "cut to %zu of %zu bytes: %s (%s)", len, n,
                clt_status_string(s), clt_last_error());
    }
    static const uint8_t values_to_try[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '"', '[', '9'};
    for (size_t pos = 0; pos < n; pos++) {
        for (size_t v = 0; v < sizeof values_to_try; v++) {
            if (good[pos] == values_to_try[v]) continue;
            uint8_t saved = good[pos];
            good[pos] = values_to_try[v];
            clt_test_write_bytes(bad, good, n);
            good[pos] = saved;
            clt_safetensors *f;
            clt_status s = clt_safetensors_open(&f, bad);
            require(s == CLT_OK || s == CLT_ERR_FORMAT, "byte %zu = 0x%02x: %s (%s)", pos, values_to_try[v],
                    clt_status_string(s), clt_last_error());
            if (s != CLT_OK) continue;
            for (int i = 0; i < clt_safetensors_num_tensors(f); i++) {
                clt_safetensors_info info;
                require(clt_safetensors_tensor_info(f, i, &info) == CLT_OK, "info %d", i);
                clt_tensor *r;
                if (clt_safetensors_read(f, info.name, clt_test_cpu(), &r) == CLT_OK) clt_tensor_release(r);
            }
            clt_safetensors_free(f);
        }
    }
    free(good);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_file_shrinking_after_open)
{
    make_dir();
    char path[512];
    path_of(path, sizeof path, "shrinks.safetensors");
    int64_t s0[] = {64};
    clt_tensor *t;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, s0));
    const char *names[] = {"w"};
    ck_assert_ok(clt_safetensors_save(path, 1, names, &t, 0, NULL, NULL));
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    size_t n;
    free(clt_test_read_bytes(path, &n));
    ck_assert_int_eq(truncate(path, (off_t)n - 10), 0);
    clt_tensor *r;
    ck_assert_status(clt_safetensors_read(f, "w", clt_test_cpu(), &r), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "'w'"));
    ck_assert_status(clt_safetensors_read_into(f, "w", t), CLT_ERR_FORMAT);
    clt_safetensors_free(f);
    clt_tensor_release(t);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

static void save_filled(const char *path, int64_t n, float value, clt_status want)
{
    int64_t shape[] = {n};
    clt_tensor *t;
    ck_assert_ok(clt_full(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape, value));
    const char *names[] = {"w"};
    clt_status s = clt_safetensors_save(path, 1, names, &t, 0, NULL, NULL);
    ck_assert_msg(s == want, "save: %s (%s)", clt_status_string(s), clt_last_error());
    clt_tensor_release(t);
}

static void check_filled(const char *path, int64_t n, float value)
{
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    clt_tensor *r;
    ck_assert_ok(clt_safetensors_read(f, "w", clt_test_cpu(), &r));
    ck_assert_int_eq(clt_tensor_numel(r), n);
    float *x = clt_test_read(r);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(x[i], value);
    free(x);
    clt_tensor_release(r);
    clt_safetensors_free(f);
}

/* A tensor the device cannot hold is refused before its bytes are read:
 * the file is cut short after opening, so reading first would fail with
 * CLT_ERR_FORMAT, while allocating first fails with the cap's error. */
START_TEST(test_too_large_for_device_refused_before_reading)
{
    make_dir();
    char path[512];
    path_of(path, sizeof path, "large.safetensors");
    save_filled(path, 1 << 18, 1.0f, CLT_OK);
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    size_t n;
    free(clt_test_read_bytes(path, &n));
    ck_assert_int_eq(truncate(path, (off_t)n - 10), 0);
    ck_assert_ok(clt_memory_empty_cache(clt_test_cpu()));
    ck_assert_ok(clt_memory_set_cap(clt_test_cpu(), 256 << 10));
    clt_tensor *r = NULL;
    ck_assert_status(clt_safetensors_read(f, "w", clt_test_cpu(), &r), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(r);
    ck_assert_ok(clt_memory_set_cap(clt_test_cpu(), 0));
    ck_assert_status(clt_safetensors_read(f, "w", clt_test_cpu(), &r), CLT_ERR_FORMAT);
    ck_assert_ptr_null(r);
    clt_safetensors_free(f);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A save that fails part way (here the file size limit stops the write)
 * leaves the old file complete and no temporary file behind. */
START_TEST(test_failed_save_keeps_old_file)
{
    make_dir();
    char path[512];
    path_of(path, sizeof path, "ckpt.safetensors");
    save_filled(path, 1000, 1.0f, CLT_OK);
    check_filled(path, 1000, 1.0f);

    struct rlimit saved, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    lim = saved;
    lim.rlim_cur = 64 << 10;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    save_filled(path, 100000, 2.0f, CLT_ERR_IO);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
    signal(SIGXFSZ, old_handler);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
    check_filled(path, 1000, 1.0f);
    ck_assert_int_eq(count_entries(), 1);

    /* Bad arguments are refused before anything is written. */
    int64_t shape[] = {3};
    clt_tensor *t[2];
    ck_assert_ok(clt_zeros(&t[0], clt_test_cpu(), CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_zeros(&t[1], clt_test_cpu(), CLT_FLOAT32, 1, shape));
    const char *dup[] = {"w", "w"}, *reserved[] = {"w", "__metadata__"}, *empty[] = {"", "x"};
    const char *not_utf8[] = {"w", "\xc3\x28"};
    ck_assert_status(clt_safetensors_save(path, 2, dup, t, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "twice"));
    ck_assert_status(clt_safetensors_save(path, 2, reserved, t, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_safetensors_save(path, 2, empty, t, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_safetensors_save(path, 2, not_utf8, t, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "UTF-8"));
    const char *k2[] = {"a", "a"}, *v2[] = {"1", "2"};
    ck_assert_status(clt_safetensors_save(path, 1, dup, t, 2, k2, v2), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor *with_null[2] = {t[0], NULL};
    const char *ab[] = {"a", "b"};
    ck_assert_status(clt_safetensors_save(path, 2, ab, with_null, 0, NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.safetensors", dir);
    ck_assert_status(clt_safetensors_save(nodir, 1, dup, t, 0, NULL, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), nodir));
    clt_tensor_release(t[0]);
    clt_tensor_release(t[1]);
    check_filled(path, 1000, 1.0f);
    ck_assert_int_eq(count_entries(), 1);

    /* A successful save replaces the file whole. */
    save_filled(path, 100000, 3.0f, CLT_OK);
    check_filled(path, 100000, 3.0f);
    ck_assert_int_eq(count_entries(), 1);
    remove_dir();
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_round_trip_is_exact);
    tcase_add_test(tc, test_reads_python_layout);
    tcase_add_test(tc, test_hostile_headers);
    tcase_add_test(tc, test_every_truncation_and_byte_flip);
    tcase_add_test(tc, test_file_shrinking_after_open);
    tcase_add_test(tc, test_too_large_for_device_refused_before_reading);
    tcase_add_test(tc, test_failed_save_keeps_old_file);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
