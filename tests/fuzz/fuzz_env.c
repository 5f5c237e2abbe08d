/* libFuzzer target: the environment parser (src/core/env.c). The first byte
 * picks a variable, the second the device memory a fraction is of; the rest
 * (up to a NUL) is the value, parsed alone and through the environment. */
#include <cltensor.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../src/core/env.h"
#include "../../src/core/fault.h"
#include "fuzz_file.h"

static void check_bool(const char *text)
{
    static const char *const words[] = {"1", "0", "true", "false", "yes", "no", "on", "off"};
    int v = -1, listed = -1;
    for (int i = 0; i < 8; i++)
        if (strcasecmp(text, words[i]) == 0) listed = i % 2 == 0;
    int ok = clt__parse_bool(text, &v) == 0;
    FUZZ_REQUIRE(ok == (listed >= 0));
    if (ok) FUZZ_REQUIRE(v == listed);
}

static void check_size(const char *text, int64_t total)
{
    int64_t v = -1;
    if (clt__parse_size(text, total, &v) != 0) return;
    FUZZ_REQUIRE(v >= 0);
    int unit = 0, point = 0;
    for (const char *p = text; *p; p++) {
        unit |= isalpha((unsigned char)*p);
        point |= *p == '.';
        /* No sign, exponent, space, inf or nan gets through. */
        FUZZ_REQUIRE(isdigit((unsigned char)*p) || *p == '.' || strchr("kKmMgGtTiIbB", *p));
    }
    if (point && !unit) FUZZ_REQUIRE(v <= total && v > 0); /* a fraction is never "no cap" */
    if (!point && !unit) {
        /* Plain bytes round-trip. */
        char back[32];
        snprintf(back, sizeof back, "%lld", (long long)v);
        const char *digits = text;
        while (*digits == '0' && digits[1]) digits++;
        FUZZ_REQUIRE(strcmp(back, digits) == 0);
    }
}

static int fuzz_env(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    clt__env_var var = (clt__env_var)(data[0] % CLT__ENV_COUNT);
    int64_t total = (int64_t)1 << (data[1] % 63);
    char *text = malloc(size - 1);
    FUZZ_REQUIRE(text);
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';

    check_bool(text);
    check_size(text, total);
    int64_t cap = -1;
    if (clt__parse_memory_cap(text, "gpu:0", total, &cap) == 0) FUZZ_REQUIRE(cap >= 0);
    (void)clt__fault_valid(text);
    clt_device d;
    clt_status ds = clt_device_parse(text, &d);
    FUZZ_REQUIRE(ds == CLT_OK || ds == CLT_ERR_INVALID_ARGUMENT);

    /* Through the environment: a clean answer naming the variable, and a
     * value getter that never returns something outside its grammar. */
    const char *name = clt__env_name(var);
    /* putenv of one buffer, not setenv: glibc keeps every value setenv was
     * given, which over millions of inputs looks like a leak. */
    static char assignment[16384];
    snprintf(assignment, sizeof assignment, "%s=%s", name, text);
    FUZZ_REQUIRE(putenv(assignment) == 0);
    clt__env_forget();
    clt_status s = clt_check_environment();
    FUZZ_REQUIRE(s == CLT_OK || s == CLT_ERR_INVALID_ARGUMENT);
    if (s != CLT_OK) {
        const char *msg = clt_last_error();
        FUZZ_REQUIRE(strncmp(msg, "environment variable ", 21) == 0 && strstr(msg, name) != NULL);
        for (const char *p = msg; *p; p++) FUZZ_REQUIRE(isprint((unsigned char)*p));
        FUZZ_REQUIRE(text[0] != '\0');
    }
    int v = clt__env_int(var, -7);
    FUZZ_REQUIRE(v == -7 || (v >= 0 && v < 16));
    if (s == CLT_OK && text[0] && (var == CLT__ENV_FUSE || var == CLT__ENV_TUNE))
        FUZZ_REQUIRE(v == 0 || v == 1);
    FUZZ_REQUIRE(clt_check_environment() == s); /* the first answer is kept */
    unsetenv(name);
    clt__env_forget();
    free(text);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_env(data, size); }
#endif
