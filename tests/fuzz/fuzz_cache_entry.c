/* libFuzzer target: the kernel cache's entry check on arbitrary bytes, both
 * clt__cache_entry_parse (src/core/cache.h) on the bytes in memory and
 * clt__cache_entry_read, the reader src/kernels/program.c uses, on them as
 * a file of this user's (mode 0600, so that only the content decides):
 * against a fixed key and against the key the input's header names. An
 * accepted entry must hold: its content lies inside the input, within the
 * bound, and its SHA-256 is the header's; the reader agrees with the check
 * and hands out the same content. No OpenCL device is used. */
#include <stdlib.h>
#include <string.h>

#include "core/cache.h"
#include "core/sha256.h"
#include "fuzz_file.h"

static void check_entry(const uint8_t *data, size_t size, const uint8_t key[32], size_t max)
{
    const uint8_t *content = NULL;
    size_t len = 0;
    const char *why = NULL;
    int ok = clt__cache_entry_parse(data, size, key, max, &content, &len, &why);
    if (ok) {
        FUZZ_REQUIRE(len <= max);
        FUZZ_REQUIRE(content >= data && content + len == data + size);
        uint8_t sum[32];
        char hex[65];
        clt__sha256_of(content, len, sum);
        clt__cache_key_hex(sum, hex);
        FUZZ_REQUIRE(memcmp(content - 65, hex, 64) == 0);
        clt__cache_key_hex(key, hex);
        FUZZ_REQUIRE(memcmp(data + sizeof "cltensor-cache 1 " - 1, hex, 64) == 0);
    } else {
        FUZZ_REQUIRE(why != NULL && why[0] != '\0');
        FUZZ_REQUIRE(content == NULL && len == 0);
    }
    /* The same bytes as a file, through the reader. */
    uint8_t *file = NULL;
    const uint8_t *fcontent = NULL;
    size_t flen = 0;
    char fwhy[256] = "";
    int r = clt__cache_entry_read(fuzz_private_file(data, size), key, max, &file, &fcontent, &flen, fwhy, sizeof fwhy);
    if (ok) {
        FUZZ_REQUIRE(r == 1 && file != NULL && flen == len);
        FUZZ_REQUIRE(fcontent >= file && fcontent + flen == file + size);
        FUZZ_REQUIRE(len == 0 || memcmp(fcontent, content, len) == 0);
    } else {
        FUZZ_REQUIRE(r == -1 && file == NULL && fcontent == NULL && flen == 0 && fwhy[0] != '\0');
    }
    free(file);
}

static int fuzz_cache_entry(const uint8_t *data, size_t size)
{
    uint8_t key[32];
    clt__sha256_of("fuzz", 4, key);
    check_entry(data, size, key, CLT__CACHE_ENTRY_MAX);
    check_entry(data, size, key, 16);
    /* The key the header names, where it is 64 lowercase hex digits. */
    const size_t at = sizeof "cltensor-cache 1 " - 1;
    if (size >= at + 64) {
        int ok = 1;
        for (int i = 0; i < 32 && ok; i++) {
            unsigned v = 0;
            for (int j = 0; j < 2; j++) {
                uint8_t c = data[at + 2 * i + j];
                if (c >= '0' && c <= '9') v = v * 16 + (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f') v = v * 16 + (unsigned)(c - 'a' + 10);
                else ok = 0;
            }
            key[i] = (uint8_t)v;
        }
        if (ok) {
            check_entry(data, size, key, CLT__CACHE_ENTRY_MAX);
            check_entry(data, size, key, 0);
        }
    }
    /* No file there: no entry, not a failure. */
    uint8_t *file = NULL;
    const uint8_t *content = NULL;
    size_t len = 0;
    char why[256] = "";
    FUZZ_REQUIRE(clt__cache_entry_read(fuzz_private_file(NULL, 0), key, CLT__CACHE_ENTRY_MAX, &file, &content, &len,
                                       why, sizeof why) == 0 &&
                 file == NULL);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_cache_entry(data, size); }
#endif
