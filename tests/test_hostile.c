/* Hostile files beyond those of test_safetensors and test_idx: encodings
 * jansson must refuse, nesting deep enough to exhaust a recursive parser,
 * shapes with a zero dimension beside a huge one, more dimensions than a
 * tensor holds, and a gzip bomb behind a small IDX header. Each is refused
 * with a status and a message naming the file, or read correctly, without
 * allocating what the file merely claims. Then hostile sizes (issue 12):
 * model widths and depths whose parameter count wraps, batch sizes near
 * INT64_MAX for the loader, the planner and `clt train`, a checkpoint whose
 * shape is (H, 0) or that holds 80,000 empty blocks, and the tensor calls
 * that took NULL, x twice or a (2^60, 0) shape badly. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "support.h"

static char dir[256];

static void make_dir(void) { clt_test_make_temp_dir(dir, sizeof dir, "hostile"); }

static void remove_dir(void) { clt_test_remove_dir(dir); }

/* A safetensors file: 8-byte length, header, then buflen zero bytes. */
static void write_st(const char *path, const char *header, size_t hlen, size_t buflen)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    ck_assert_uint_eq(fwrite(le, 1, 8, f), 8);
    ck_assert_uint_eq(fwrite(header, 1, hlen, f), hlen);
    for (size_t i = 0; i < buflen; i++) ck_assert_int_ne(fputc(0, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

static void expect_format(const char *header, size_t hlen, size_t buflen, const char *expect)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    write_st(path, header, hlen, buflen);
    clt_safetensors *f = (clt_safetensors *)1;
    ck_assert_status(clt_safetensors_open(&f, path), CLT_ERR_FORMAT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(clt_last_error(), path), "message '%s' does not name the file", clt_last_error());
    ck_assert_msg(!expect || strstr(clt_last_error(), expect), "message '%s' lacks '%s'", clt_last_error(), expect);
}

#define ENTRY "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"

START_TEST(test_safetensors_encodings)
{
    make_dir();
    static const char *const headers[] = {
        "{\"\xc0\xaf\":" ENTRY "}",                                /* overlong '/' */
        "{\"\xed\xa0\x80\":" ENTRY "}",                            /* UTF-8 of a surrogate */
        "{\"\xf4\x90\x80\x80\":" ENTRY "}",                        /* past U+10FFFF */
        "{\"a\x80\":" ENTRY "}",                                   /* lone continuation */
        "{\"\\ud800\":" ENTRY "}",                                 /* unpaired surrogate escape */
        "{\"__metadata__\":{\"k\":\"\xff\"},\"a\":" ENTRY "}",     /* bad metadata value */
        "{\"a\":" ENTRY ",\"b\":" ENTRY ",\"a\":" ENTRY "}",       /* duplicate, not adjacent */
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++)
        expect_format(headers[i], strlen(headers[i]), 4, NULL);
    remove_dir();
}
END_TEST

START_TEST(test_safetensors_deep_nesting)
{
    make_dir();
    /* 200000 nested arrays: a parser without a depth limit would overflow
     * its stack. */
    size_t depth = 200000, n = 0;
    char *h = malloc(2 * depth + 64);
    ck_assert_ptr_nonnull(h);
    n += (size_t)sprintf(h, "{\"a\":");
    for (size_t i = 0; i < depth; i++) h[n++] = '[';
    for (size_t i = 0; i < depth; i++) h[n++] = ']';
    h[n++] = '}';
    expect_format(h, n, 0, "not valid JSON");
    free(h);
    remove_dir();
}
END_TEST

START_TEST(test_safetensors_claimed_shapes)
{
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/claims.safetensors", dir);
    /* A zero dimension beside 2^62: no bytes, a valid file. Reading it
     * must not multiply its way into a huge allocation. */
    const char *h = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904],\"data_offsets\":[0,0]},"
                    "\"deep\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                    "\"data_offsets\":[0,4]}}";
    write_st(path, h, strlen(h), 4);
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    clt_tensor *t = NULL;
    clt_status s = clt_safetensors_read(f, "z", clt_test_cpu(), &t);
    if (s == CLT_OK) {
        ck_assert_int_eq(clt_tensor_numel(t), 0);
        ck_assert_uint_eq(clt_tensor_nbytes(t), 0);
        clt_tensor_release(t);
    } else {
        ck_assert_msg(clt_last_error()[0] != '\0', "no message");
        ck_assert_ptr_null(t);
    }
    /* More dimensions than a tensor holds: refused when read, named. */
    ck_assert_status(clt_safetensors_read(f, "deep", clt_test_cpu(), &t), CLT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "'deep'"));
    ck_assert_ptr_null(t);
    clt_safetensors_free(f);
    clt_test_assert_no_live_tensors();
    remove_dir();
}
END_TEST

/* 64 MiB of zeros compressed to about 64 KiB behind a header that claims 16
 * bytes: refused as data past the dimensions after reading one byte more,
 * not after inflating everything. */
START_TEST(test_idx_gzip_bomb)
{
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/bomb-idx1-ubyte.gz", dir);
    gzFile gz = gzopen(path, "wb9");
    ck_assert_ptr_nonnull(gz);
    const uint8_t header[] = {0, 0, 8, 1, 0, 0, 0, 16};
    ck_assert_int_eq(gzwrite(gz, header, sizeof header), (int)sizeof header);
    uint8_t *zeros = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(zeros);
    for (int i = 0; i < 64; i++) ck_assert_int_eq(gzwrite(gz, zeros, 1 << 20), 1 << 20);
    free(zeros);
    ck_assert_int_eq(gzclose(gz), Z_OK);
    clt_idx idx;
    ck_assert_status(clt_idx_read(path, &idx), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "continues past the 16 bytes"));
    ck_assert_ptr_null(idx.data);
    remove_dir();
}
END_TEST

/* The sizes: each Linear fits the per-width check, but the flat
 * parameter count times 4 wraps. Refused before any allocation. */
START_TEST(test_model_size_overflow)
{
    clt_model *m = (clt_model *)1;
    ck_assert_status(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 49266653, 950, 10, 1), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "49266653 x 49266653"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "parameters"));
    int64_t hiddens[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    ck_assert_status(clt_model_create_mlp(&m, clt_test_cpu(), INT32_MAX, 3, hiddens, INT32_MAX, 1),
                     CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A batch larger than the data is one batch of all of it, not a wrapped
 * count of 0 batches. */
START_TEST(test_loader_huge_batch)
{
    clt_dataset ds = clt_test_make_dataset(10, 1);
    clt_loader_options o = clt_loader_default_options();
    int64_t sizes[] = {INT64_MAX, INT64_MAX - 1, INT64_MAX / 2 + 1, 11, 10};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        o.batch_size = sizes[i];
        clt_loader *l;
        ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
        ck_assert_int_eq(clt_loader_num_batches(l), 1);
        clt_tensor *x, *y;
        ck_assert_ok(clt_loader_next(l, &x, &y));
        ck_assert_int_eq(clt_tensor_dim(x, 0), 10);
        clt_tensor_release(x);
        clt_tensor_release(y);
        clt_loader_free(l);
    }
    o.batch_size = 3;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    ck_assert_int_eq(clt_loader_num_batches(l), 4);
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A batch near 2^62 is refused by the planner, never planned with wrapped
 * byte counts that "fit". */
START_TEST(test_plan_huge_batch)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 2, 10, 1));
    clt_plan_options o = clt_plan_default_options();
    o.device = clt_test_cpu();
    clt_plan p;
    int64_t sizes[] = {INT64_C(1) << 62, (INT64_C(1) << 62) + 12345, INT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        o.batch_size = sizes[i];
        ck_assert_status(clt_plan_step(m, &o, &p), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "too large to plan"));
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(out);
        ck_assert_status(clt_plan_report(m, &o, 64 << 20, 1 << 20, out), CLT_ERR_INVALID_ARGUMENT);
        fclose(out);
        ck_assert_msg(!strstr(text, "fits"), "the report says: %s", text);
        free(text);
    }
    /* The largest batch search stays below the batches it cannot plan. */
    o.batch_size = 64;
    int64_t best = -1;
    ck_assert_ok(clt_plan_max_batch(m, &o, INT64_C(1) << 40, INT64_MAX, &best));
    ck_assert_int_gt(best, 0);
    ck_assert_int_lt(best, INT64_C(1) << 40);
    clt_model_free(m);
}
END_TEST

START_TEST(test_narrow_message)
{
    clt_tensor *t, *v = (clt_tensor *)1;
    int64_t shape[2] = {4, 3};
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    ck_assert_status(clt_narrow(&v, t, INT64_MAX, INT64_MAX), CLT_ERR_SHAPE);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(clt_last_error(), "9223372036854775807 rows from row 9223372036854775807"), "'%s'",
                  clt_last_error());
    ck_assert_status(clt_narrow(&v, t, 2, INT64_MAX), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "9223372036854775807 rows from row 2"));
    ck_assert_status(clt_narrow(&v, t, 2, 5), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "rows [2, 7) outside 0..4"));
    clt_tensor_release(t);
}
END_TEST

/* Six rows of a (2^60, 0) tensor are printed, not 2^60. */
START_TEST(test_format_huge_empty)
{
    clt_tensor *t;
    int64_t shape[2] = {INT64_C(1) << 60, 0};
    ck_assert_ok(clt_empty(&t, clt_test_cpu(), CLT_FLOAT32, 2, shape));
    char buf[256];
    ck_assert_ok(clt_tensor_format(t, buf, sizeof buf));
    char want[256];
    snprintf(want, sizeof want, "tensor([[],\n        [],\n        [],\n        ...,\n        [],\n        [],\n        []], "
             "device='%s')", clt_test_cpu_name());
    ck_assert_str_eq(buf, want);
    clt_tensor_release(t);
    /* Every dimension counts, a zero one as 1: (0, 2^62, 2^62) is refused. */
    int64_t wide[3] = {0, INT64_C(1) << 62, INT64_C(1) << 62};
    ck_assert_status(clt_empty(&t, clt_test_cpu(), CLT_FLOAT32, 3, wide), CLT_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "dimension 1"));
}
END_TEST

START_TEST(test_accessors_take_null)
{
    ck_assert_int_eq(clt_tensor_numel(NULL), 0);
    ck_assert_uint_eq(clt_tensor_nbytes(NULL), 0);
    ck_assert_int_eq(clt_tensor_ndim(NULL), 0);
    ck_assert_int_eq(clt_tensor_dim(NULL, 0), 0);
    ck_assert_int_eq(clt_tensor_dim(NULL, -1), 0);
    int64_t shape[1] = {7};
    ck_assert_int_eq(clt_tensor_shape(NULL, shape), 0);
    ck_assert_int_eq(shape[0], 7);
    ck_assert(clt_device_equal(clt_tensor_device(NULL), (clt_cpu)())); /* the value, not the test stand-in */
    ck_assert_int_eq(clt_tensor_dtype(NULL), CLT_FLOAT32);
    ck_assert_int_eq(clt_tensor_category(NULL), CLT_MEM_OTHER);
}
END_TEST

/* clt_copy_(x, x) and overlapping views are argument errors, not OpenCL's
 * CL_MEM_COPY_OVERLAP; disjoint views of one storage copy. */
START_TEST(test_copy_overlap)
{
    float host[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    clt_tensor *x = clt_test_upload(clt_test_cpu(), host, 8, 1), *a, *b;
    ck_assert_status(clt_copy_(x, x), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "overlap"));
    ck_assert_ok(clt_narrow(&a, x, 0, 4));
    ck_assert_ok(clt_narrow(&b, x, 2, 4));
    ck_assert_status(clt_copy_(a, b), CLT_ERR_INVALID_ARGUMENT);
    clt_tensor_release(b);
    ck_assert_ok(clt_narrow(&b, x, 4, 4));
    ck_assert_ok(clt_copy_(a, b));
    float *got = clt_test_read(x);
    float want[8] = {4, 5, 6, 7, 4, 5, 6, 7};
    for (int i = 0; i < 8; i++) ck_assert_float_eq(got[i], want[i]);
    free(got);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(x);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A checkpoint of empty tensors whose net.1.weight is (H, 0) is no model. */
START_TEST(test_resmlp_shape_zero_width)
{
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/zero.safetensors", dir);
    const char *h = "{\"net.1.weight\":{\"dtype\":\"F32\",\"shape\":[49266653,0],\"data_offsets\":[0,0]},"
                    "\"net.3.body.0.weight\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    write_st(path, h, strlen(h), 0);
    int64_t hid = -1, blocks = -1;
    ck_assert_status(clt_checkpoint_resmlp_shape(path, &hid, &blocks), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "(49266653, 0)"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
    remove_dir();
}
END_TEST

/* 80,000 empty block entries: refused as more blocks than a ResMLP has,
 * blaming the file (not a --blocks the user never gave), in one pass over
 * the names. */
START_TEST(test_resmlp_shape_many_blocks)
{
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/blocks.safetensors", dir);
    size_t cap = 80000 * 128 + 256, n = 0;
    char *h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    n += (size_t)sprintf(h, "{\"net.1.weight\":{\"dtype\":\"F32\",\"shape\":[1,784],\"data_offsets\":[0,3136]}");
    for (int b = 0; b < 80000; b++)
        n += (size_t)sprintf(h + n, ",\"net.%d.body.0.weight\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":"
                                    "[3136,3136]}", 3 + b);
    h[n++] = '}';
    write_st(path, h, n, 3136);
    free(h);
    int64_t hid = -1, blocks = -1;
    ck_assert_status(clt_checkpoint_resmlp_shape(path, &hid, &blocks), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "more than 1000 residual blocks"));
    clt_test_write_idx_split(dir, "t10k", 16, 2, 0);
    char out[4096];
    int rc = clt_test_shell(out, sizeof out, "'%s' eval --load '%s' --data '%s'", clt_test_clt_path(), path, dir);
    ck_assert_msg(rc >= 1 && rc <= 125, "exit %d: %s", rc, out);
    ck_assert_msg(!strstr(out, "--blocks") && strstr(out, "residual blocks"), "'%s'", out);
    /* 1000 blocks is a shape. */
    snprintf(path, sizeof path, "%s/thousand.safetensors", dir);
    h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    n = (size_t)sprintf(h, "{\"net.1.weight\":{\"dtype\":\"F32\",\"shape\":[1,784],\"data_offsets\":[0,3136]}");
    for (int b = 0; b < 1000; b++)
        n += (size_t)sprintf(h + n, ",\"net.%d.body.0.weight\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":"
                                    "[3136,3136]}", 3 + b);
    h[n++] = '}';
    write_st(path, h, n, 3136);
    free(h);
    ck_assert_ok(clt_checkpoint_resmlp_shape(path, &hid, &blocks));
    ck_assert_int_eq(hid, 1);
    ck_assert_int_eq(blocks, 1000);
    remove_dir();
}
END_TEST

/* `clt train` inherits the library's checks: the widths fail with
 * the message, a batch of INT64_MAX trains whole-data batches, --plan with
 * a batch near 2^62 does not print "fits". */
START_TEST(test_train_cli_sizes)
{
    make_dir();
    clt_test_write_idx_split(dir, "train", 64, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 16, 2, 0);
    const char *clt = clt_test_clt_path();
    char out[8192];
    int rc = clt_test_shell(out, sizeof out, "'%s' train --data '%s' --hiddens 49266653 --blocks 950 --device %s",
                            clt, dir, clt_test_cpu_name());
    ck_assert_msg(rc >= 1 && rc <= 125 && strstr(out, "parameters"), "exit %d: %s", rc, out);
    rc = clt_test_shell(out, sizeof out,
                        "'%s' train --data '%s' --batch-size 9223372036854775807 --epochs 2 --hiddens 8 --blocks 1 "
                        "--device %s", clt, dir, clt_test_cpu_name());
    ck_assert_msg(rc == 0 && strstr(out, "trained 2 epoch(s), 2 steps"), "exit %d: %s", rc, out);
    rc = clt_test_shell(out, sizeof out, "CLT_MEMORY_CAP=64M '%s' train --plan --batch-size 4611686018427387904 "
                        "--device %s", clt, clt_test_cpu_name());
    ck_assert_msg(rc >= 1 && rc <= 125 && !strstr(out, "fits") && strstr(out, "too large to plan"), "exit %d: %s",
                  rc, out);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = clt_test_tcase("files");
    tcase_add_test(tc, test_safetensors_encodings);
    tcase_add_test(tc, test_safetensors_deep_nesting);
    tcase_add_test(tc, test_safetensors_claimed_shapes);
    tcase_add_test(tc, test_idx_gzip_bomb);
    suite_add_tcase(s, tc);
    TCase *sizes = clt_test_tcase("sizes");
    tcase_add_test(sizes, test_model_size_overflow);
    tcase_add_test(sizes, test_loader_huge_batch);
    tcase_add_test(sizes, test_plan_huge_batch);
    tcase_add_test(sizes, test_narrow_message);
    tcase_add_test(sizes, test_format_huge_empty);
    tcase_add_test(sizes, test_accessors_take_null);
    tcase_add_test(sizes, test_copy_overlap);
    tcase_add_test(sizes, test_resmlp_shape_zero_width);
    tcase_add_test(sizes, test_resmlp_shape_many_blocks);
    tcase_add_test(sizes, test_train_cli_sizes);
    suite_add_tcase(s, sizes);
    return clt_test_run(s);
}
