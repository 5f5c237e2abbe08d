/* libFuzzer target: a CLT_CLBLAST_PARAMS tuner file (JSON) read and checked
 * for a device named "fuzz" (src/ops/clblast_params.c), without CLBlast. */
#include <cltensor.h>
#include <string.h>

#include "../../src/ops/clblast_params.h"
#include "fuzz_file.h"

static int fuzz_clblast_params(const uint8_t *data, size_t size)
{
    clt_status s = clt__clblast_params_check(fuzz_file(data, size), "fuzz");
    FUZZ_REQUIRE(s == CLT_OK || s == CLT_ERR_FORMAT);
    if (s != CLT_OK) FUZZ_REQUIRE(strncmp(clt_last_error(), "CLT_CLBLAST_PARAMS: ", 20) == 0);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_clblast_params(data, size); }
#endif
