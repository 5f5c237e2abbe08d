/* IDX files: round trips raw and gzip, and every kind of damaged file. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include "support.h"

/* For helpers and loops that run thousands of times: Check's ck_assert
 * records its location on every call, which costs more than the work. */
#define require(cond, ...)                                                                                  \
    do {                                                                                                   \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                            \
    } while (0)

static char dir[256];

static void make_dir(void) { clt_test_make_temp_dir(dir, sizeof dir, "idx"); }

static void remove_dir(void) { clt_test_remove_dir(dir); }

static void write_gz(const char *path, const void *data, size_t n)
{
    gzFile gz = gzopen(path, "wb");
    ck_assert_ptr_nonnull(gz);
    ck_assert_int_eq(gzwrite(gz, data, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(gz), Z_OK);
}


static void check_read(const char *path, int ndim, const int64_t *dims, const uint8_t *data)
{
    clt_idx idx;
    ck_assert_ok(clt_idx_read(path, &idx));
    ck_assert_int_eq(idx.ndim, ndim);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        ck_assert_int_eq(idx.dims[i], dims[i]);
        n *= (size_t)dims[i];
    }
    ck_assert_uint_eq(idx.nbytes, n);
    ck_assert_int_eq(memcmp(idx.data, data, n), 0);
    clt_idx_free(&idx);
    ck_assert_ptr_null(idx.data);
    clt_idx_free(NULL);
}

START_TEST(test_round_trips)
{
    make_dir();
    char path[512];
    /* Images larger than the first read chunk, so the buffer grows. */
    int64_t img[] = {1409, 31, 29}, lab[] = {1409}, one[] = {1};
    size_t n = 1409 * 31 * 29;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int gzip = 0; gzip < 2; gzip++) {
        snprintf(path, sizeof path, "%s/images%s", dir, gzip ? ".gz" : "");
        ck_assert_ok(clt_idx_write(path, 3, img, data, gzip));
        size_t len;
        uint8_t *file = clt_test_read_bytes(path, &len);
        if (gzip) {
            ck_assert_int_eq(file[0], 0x1f);
            ck_assert_int_eq(file[1], 0x8b);
        } else {
            uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0x05, 0x81, 0, 0, 0, 31, 0, 0, 0, 29};
            ck_assert_uint_eq(len, 16 + n);
            ck_assert_int_eq(memcmp(file, head, 16), 0);
        }
        free(file);
        check_read(path, 3, img, data);
        snprintf(path, sizeof path, "%s/labels%s", dir, gzip ? ".gz" : "");
        ck_assert_ok(clt_idx_write(path, 1, lab, data, gzip));
        check_read(path, 1, lab, data);
        ck_assert_ok(clt_idx_write(path, 1, one, data, gzip));
        check_read(path, 1, one, data);
    }
    /* A file written by zlib's own gzip writer. */
    uint8_t small[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
    snprintf(path, sizeof path, "%s/zlib.gz", dir);
    write_gz(path, small, sizeof small);
    int64_t d23[] = {2, 3};
    check_read(path, 2, d23, small + 12);
    /* Empty dimensions are valid. */
    int64_t zero[] = {0, 28, 28};
    snprintf(path, sizeof path, "%s/empty", dir);
    ck_assert_ok(clt_idx_write(path, 3, zero, NULL, 0));
    clt_idx idx;
    ck_assert_ok(clt_idx_read(path, &idx));
    ck_assert_uint_eq(idx.nbytes, 0);
    clt_idx_free(&idx);

    int64_t bad[] = {-1}, huge[] = {(int64_t)1 << 32};
    ck_assert_status(clt_idx_write(path, 1, bad, data, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_idx_write(path, 1, huge, data, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_idx_write(path, 0, img, data, 0), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_status(clt_idx_write(path, 9, img, data, 0), CLT_ERR_INVALID_ARGUMENT);
    free(data);
    remove_dir();
}
END_TEST

/* Writes bytes raw and gzipped and expects both to fail with `want` and a
 * message naming the file and containing `expect`. */
static void expect_refused(const uint8_t *bytes, size_t n, clt_status want, const char *expect)
{
    char path[512];
    for (int gzip = 0; gzip < 2; gzip++) {
        snprintf(path, sizeof path, "%s/bad%s", dir, gzip ? ".gz" : "");
        if (gzip)
            write_gz(path, bytes, n);
        else
            clt_test_write_bytes(path, bytes, n);
        clt_idx idx;
        memset(&idx, 0xab, sizeof idx);
        clt_test_limit_memory();
        clt_status s = clt_idx_read(path, &idx);
        clt_test_unlimit_memory();
        ck_assert_msg(s == want, "%s: got %s (%s), want %s", path, clt_status_string(s), clt_last_error(),
                      clt_status_string(want));
        ck_assert_ptr_null(idx.data);
        ck_assert_int_eq(idx.ndim, 0);
        ck_assert_msg(strstr(clt_last_error(), path), "message '%s' does not name the file", clt_last_error());
        ck_assert_msg(strstr(clt_last_error(), expect), "message '%s' lacks '%s'", clt_last_error(), expect);
    }
}

START_TEST(test_hostile_files)
{
    make_dir();
    const clt_status F = CLT_ERR_FORMAT;
    uint8_t b[64] = {0};
    expect_refused(b, 0, F, "too short");
    expect_refused((const uint8_t *)"\0\0\x08", 3, F, "too short");
    expect_refused((const uint8_t *)"PK\x03\x04....", 8, F, "not an IDX file");
    expect_refused((const uint8_t *)"\0\0\x42\x01\0\0\0\0", 8, F, "unknown IDX element type 0x42");
    expect_refused((const uint8_t *)"\0\0\x0d\x01\0\0\0\x01", 8, F, "call for 4 data bytes, the file holds 0");
    expect_refused((const uint8_t *)"\0\0\x08\x00", 4, F, "0 dimensions");
    expect_refused((const uint8_t *)"\0\0\x08\x09", 4, F, "9 dimensions");
    expect_refused((const uint8_t *)"\0\0\x08\x03\0\0\0\x02\0\0", 10, F, "inside the 3 dimension sizes");
    /* Data shorter and longer than the dimensions say. */
    uint8_t lab[4 + 4 + 6] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5, 6};
    expect_refused(lab, 4 + 4 + 4, F, "truncated: dimensions (5) call for 5 data bytes, the file holds 4");
    expect_refused(lab, sizeof lab, F, "continues past the 5 bytes");
    /* Claims far beyond the file: 2^36 bytes, and products past 64 bits. */
    uint8_t claim[] = {0, 0, 8, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 16, 7, 7, 7};
    expect_refused(claim, sizeof claim, F, "call for 68719476736 data bytes, the file holds 3");
    uint8_t over[] = {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1};
    expect_refused(over, sizeof over, F, "multiply past 64 bits");
    uint8_t over8[4 + 32] = {0, 0, 8, 8};
    for (int i = 0; i < 8; i++) over8[4 + 4 * i] = 0x01; /* 2^24 each: 2^192 */
    expect_refused(over8, sizeof over8, F, "multiply past 64 bits");

    char path[512];
    snprintf(path, sizeof path, "%s/missing-idx1-ubyte", dir);
    clt_idx idx;
    ck_assert_status(clt_idx_read(path, &idx), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), strerror(ENOENT)));
    ck_assert_status(clt_idx_read(dir, &idx), CLT_ERR_IO);
    remove_dir();
}
END_TEST

/* Every prefix of a valid raw or gzip file is refused with a message; so
 * are damaged gzip streams (bad checksum, bad length, corrupt deflate
 * data), whatever the damage, without a crash. */
START_TEST(test_truncated_and_corrupt)
{
    make_dir();
    char good[512], bad[512];
    int64_t dims[] = {40, 7};
    uint8_t data[280];
    for (int i = 0; i < 280; i++) data[i] = (uint8_t)(i * 37);
    for (int gzip = 0; gzip < 2; gzip++) {
        snprintf(good, sizeof good, "%s/good%s", dir, gzip ? ".gz" : "");
        snprintf(bad, sizeof bad, "%s/bad%s", dir, gzip ? ".gz" : "");
        ck_assert_ok(clt_idx_write(good, 2, dims, data, gzip));
        size_t n;
        uint8_t *file = clt_test_read_bytes(good, &n);
        for (size_t len = 0; len < n; len++) {
            clt_test_write_bytes(bad, file, len);
            clt_idx idx;
            clt_status s = clt_idx_read(bad, &idx);
            require(s == CLT_ERR_FORMAT && strstr(clt_last_error(), bad), "%s cut to %zu of %zu bytes: %s (%s)",
                    gzip ? "gzip" : "raw", len, n, clt_status_string(s), clt_last_error());
        }
        if (gzip) {
            /* The trailer: CRC-32 then length. */
            for (size_t pos = n - 8; pos < n; pos++) {
                file[pos] ^= 0x5a;
                clt_test_write_bytes(bad, file, n);
                file[pos] ^= 0x5a;
                clt_idx idx;
                clt_status s = clt_idx_read(bad, &idx);
                require(s == CLT_ERR_FORMAT && strstr(clt_last_error(), "gzip"), "trailer byte %zu: %s (%s)", pos,
                        clt_status_string(s), clt_last_error());
            }
        }
        for (size_t pos = 0; pos < n; pos++) {
            for (int flip = 1; flip < 256; flip <<= 2) {
                file[pos] ^= (uint8_t)flip;
                clt_test_write_bytes(bad, file, n);
                file[pos] ^= (uint8_t)flip;
                clt_idx idx;
                clt_status s = clt_idx_read(bad, &idx);
                require(s == CLT_OK || s == CLT_ERR_FORMAT || s == CLT_ERR_UNSUPPORTED, "byte %zu ^ 0x%02x: %s (%s)",
                        pos, flip, clt_status_string(s), clt_last_error());
                if (s == CLT_OK) {
                    size_t prod = 1;
                    for (int i = 0; i < idx.ndim; i++) prod *= (size_t)idx.dims[i];
                    require(idx.nbytes == prod, "byte %zu ^ 0x%02x: %zu bytes for %zu", pos, flip, idx.nbytes, prod);
                    clt_idx_free(&idx);
                }
            }
        }
        free(file);
    }
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("idx");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_hostile_files);
    tcase_add_test(tc, test_truncated_and_corrupt);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
