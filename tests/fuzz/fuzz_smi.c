/* libFuzzer target: the record reader of `clt smi` (clt__publish_parse) and
 * the escaping of the names it prints, on arbitrary bytes as a published
 * file (/dev/shm/cltensor.<pid>, which any local user can write). */
#include <stdint.h>
#include <string.h>

#include "../../src/memory/publish.h"
#include "fuzz_file.h"

/* Every byte printable ASCII, the string terminated within len. */
static void require_printable(const char *s, size_t len)
{
    size_t n = strnlen(s, len);
    FUZZ_REQUIRE(n < len);
    for (size_t i = 0; i < n; i++) FUZZ_REQUIRE(s[i] >= 0x20 && s[i] < 0x7f);
}

/* A name as smi prints it: escaped into a buffer of each size smi uses. */
static void check_escape(const char *s)
{
    char small[5], row[61], big[1024];
    clt_smi_escape(s, small, sizeof small);
    require_printable(small, sizeof small);
    clt_smi_escape(s, row, sizeof row);
    require_printable(row, sizeof row);
    clt_smi_escape(s, big, sizeof big);
    require_printable(big, sizeof big);
}

static void check_record(const uint8_t *data, size_t size, int pid, uint64_t start)
{
    clt_smi_process p;
    int r = clt__publish_parse(data, size, pid, start, &p);
    FUZZ_REQUIRE(r >= -1 && r <= 1);
    if (r != 1) {
        FUZZ_REQUIRE(p.pid == 0 && p.ndevices == 0);
        return;
    }
    FUZZ_REQUIRE(p.pid == pid && pid > 0);
    FUZZ_REQUIRE(p.ndevices >= 0 && p.ndevices <= CLT_SMI_MAX_DEVICES);
    FUZZ_REQUIRE(memchr(p.command, '\0', sizeof p.command));
    check_escape(p.command);
    int64_t sum = 0;
    for (int i = 0; i < p.ndevices; i++) {
        const clt_smi_device *d = &p.devices[i];
        FUZZ_REQUIRE(memchr(d->name, '\0', sizeof d->name) && memchr(d->device_name, '\0', sizeof d->device_name));
        check_escape(d->name);
        check_escape(d->device_name);
        FUZZ_REQUIRE((d->platform_index == -1 && d->device_index == -1) ||
                     (d->platform_index >= 0 && d->platform_index <= CLT__PUBLISH_MAX_INDEX &&
                      d->device_index >= 0 && d->device_index <= CLT__PUBLISH_MAX_INDEX));
        FUZZ_REQUIRE(d->allocated >= 0 && d->allocated <= CLT__PUBLISH_MAX_BYTES);
        FUZZ_REQUIRE(d->reserved >= 0 && d->reserved <= CLT__PUBLISH_MAX_BYTES);
        FUZZ_REQUIRE(d->peak_allocated >= 0 && d->peak_allocated <= CLT__PUBLISH_MAX_BYTES);
        /* One process's devices never overflow the sum smi makes. */
        FUZZ_REQUIRE(!__builtin_add_overflow(sum, d->reserved, &sum));
    }
}

static int fuzz_smi(const uint8_t *data, size_t size)
{
    /* The pid (bytes 8..11) and start time (16..23) the record claims, so
     * that the checks past them are reached; then a pid and a start time it
     * does not claim, which must never be accepted. */
    int32_t pid = 0;
    uint64_t start = 0;
    if (size >= 24) {
        memcpy(&pid, data + 8, sizeof pid);
        memcpy(&start, data + 16, sizeof start);
    }
    check_record(data, size, pid, start);
    clt_smi_process p;
    if (pid > 0 && pid < INT32_MAX) FUZZ_REQUIRE(clt__publish_parse(data, size, pid + 1, start, &p) != 1);
    if (start) FUZZ_REQUIRE(clt__publish_parse(data, size, pid, start + 1, &p) != 1);
    /* The escaper alone, on the input as a string. */
    char text[512];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    check_escape(text);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_smi(data, size); }
#endif
