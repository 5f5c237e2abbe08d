/* Hostile files beyond those of test_safetensors and test_idx: encodings
 * jansson must refuse, nesting deep enough to exhaust a recursive parser,
 * shapes with a zero dimension beside a huge one, more dimensions than a
 * tensor holds, and a gzip bomb behind a small IDX header. Each is refused
 * with a status and a message naming the file, or read correctly, without
 * allocating what the file merely claims. */
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
    clt_status s = clt_safetensors_read(f, "z", clt_cpu(), &t);
    if (s == CLT_OK) {
        ck_assert_int_eq(clt_tensor_numel(t), 0);
        ck_assert_uint_eq(clt_tensor_nbytes(t), 0);
        clt_tensor_release(t);
    } else {
        ck_assert_msg(clt_last_error()[0] != '\0', "no message");
        ck_assert_ptr_null(t);
    }
    /* More dimensions than a tensor holds: refused when read, named. */
    ck_assert_status(clt_safetensors_read(f, "deep", clt_cpu(), &t), CLT_ERR_UNSUPPORTED);
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

int main(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = clt_test_tcase("files");
    tcase_add_test(tc, test_safetensors_encodings);
    tcase_add_test(tc, test_safetensors_deep_nesting);
    tcase_add_test(tc, test_safetensors_claimed_shapes);
    tcase_add_test(tc, test_idx_gzip_bomb);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
