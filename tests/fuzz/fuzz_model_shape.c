/* libFuzzer target: a ResMLP's shape read from a checkpoint
 * (clt_checkpoint_resmlp_shape) and the capstone's ResMLP of that shape
 * (784 inputs, 10 outputs): a shape is refused with a status or
 * gives a model whose parameter count is the checked one, never a wrapped
 * count. Models too large to build in a fuzzer's memory are only counted. */
#include <cltensor.h>
#include <string.h>

#include "../../src/core/checked.h"
#include "fuzz_file.h"

/* The ResMLP's parameters: Linear(784, h), k blocks of two Linear(h, h),
 * Linear(h, 10); -1 when the count's bytes overflow an int64_t. */
static int64_t resmlp_params(int64_t h, int64_t k)
{
    int64_t n = 0, per_block = 0;
    if (clt__muladd_i64(&n, 784 + 1, h) != 0 || clt__muladd_i64(&per_block, h + 1, h) != 0 ||
        clt__muladd_i64(&n, 2 * k, per_block) != 0 || clt__muladd_i64(&n, h + 1, 10) != 0 ||
        n > INT64_MAX / 4)
        return -1;
    return n;
}

static int fuzz_model_shape(const uint8_t *data, size_t size)
{
    int64_t h = -1, k = -1;
    clt_status s = clt_checkpoint_resmlp_shape(fuzz_file(data, size), &h, &k);
    if (s != CLT_OK) {
        FUZZ_REQUIRE(s == CLT_ERR_FORMAT && clt_last_error()[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(h >= 1 && h <= INT32_MAX && k >= 0 && k <= CLT_RESMLP_MAX_BLOCKS);
    int64_t want = resmlp_params(h, k);
    clt_model *m = NULL;
    if (want < 0) {
        /* Refused before any allocation. */
        s = clt_model_create_resmlp(&m, clt_device_get_default(), 784, h, (int)k, 10, 1);
        FUZZ_REQUIRE(s == CLT_ERR_INVALID_ARGUMENT && m == NULL);
    } else if (want <= (1 << 20)) {
        s = clt_model_create_resmlp(&m, clt_device_get_default(), 784, h, (int)k, 10, 1);
        FUZZ_REQUIRE(s == CLT_OK);
        FUZZ_REQUIRE(clt_model_num_parameter_elements(m) == want);
        clt_model_free(m);
    }
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_model_shape(data, size); }
#endif
