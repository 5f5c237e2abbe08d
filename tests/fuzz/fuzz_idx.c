/* libFuzzer target: clt_idx_read on arbitrary bytes (raw or gzip). */
#include <cltensor.h>
#include <string.h>

#include "fuzz_file.h"

static int fuzz_idx(const uint8_t *data, size_t size)
{
    clt_idx idx;
    clt_status s = clt_idx_read(fuzz_file(data, size), &idx);
    if (s == CLT_OK) {
        /* What the reader returns must agree with itself. */
        FUZZ_REQUIRE(idx.ndim >= 1 && idx.ndim <= CLT_IDX_MAX_DIMS);
        uint64_t n = 1;
        for (int i = 0; i < idx.ndim; i++) n *= (uint64_t)idx.dims[i];
        FUZZ_REQUIRE(idx.elem_size == 1 || idx.elem_size == 2 || idx.elem_size == 4 || idx.elem_size == 8);
        FUZZ_REQUIRE(n * (uint64_t)idx.elem_size == idx.nbytes);
        volatile double v = idx.nbytes ? clt_idx_value(&idx, (int64_t)n - 1) : 0;
        (void)v;
        FUZZ_REQUIRE(idx.nbytes == 0 || idx.data);
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < idx.nbytes; i++) sum += idx.data[i];
        (void)sum;
        clt_idx_free(&idx);
    } else {
        FUZZ_REQUIRE(s == CLT_ERR_FORMAT || s == CLT_ERR_UNSUPPORTED);
        FUZZ_REQUIRE(clt_last_error()[0] != '\0');
        FUZZ_REQUIRE(idx.data == NULL && idx.ndim == 0);
    }
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_idx(data, size); }
#endif
