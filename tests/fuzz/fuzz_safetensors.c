/* libFuzzer target: clt_safetensors_open on arbitrary bytes, then every
 * query and every tensor read onto the CPU device. */
#include <cltensor.h>
#include <string.h>

#include "fuzz_file.h"

static int fuzz_safetensors(const uint8_t *data, size_t size)
{
    clt_safetensors *f;
    clt_status s = clt_safetensors_open(&f, fuzz_file(data, size));
    if (s != CLT_OK) {
        FUZZ_REQUIRE(s == CLT_ERR_FORMAT);
        FUZZ_REQUIRE(clt_last_error()[0] != '\0');
        FUZZ_REQUIRE(f == NULL);
        return 0;
    }
    int64_t before = clt_memory_allocated(clt_cpu());
    for (int i = 0; i < clt_safetensors_num_metadata(f); i++) {
        const char *k, *v;
        FUZZ_REQUIRE(clt_safetensors_metadata_entry(f, i, &k, &v) == CLT_OK);
        FUZZ_REQUIRE(clt_safetensors_metadata(f, k) != NULL);
        (void)strlen(v);
    }
    uint64_t covered = 0;
    for (int i = 0; i < clt_safetensors_num_tensors(f); i++) {
        clt_safetensors_info info;
        FUZZ_REQUIRE(clt_safetensors_tensor_info(f, i, &info) == CLT_OK);
        FUZZ_REQUIRE(info.begin == covered && info.end >= info.begin);
        covered = info.end;
        FUZZ_REQUIRE(clt_safetensors_find(f, info.name) == i);
        FUZZ_REQUIRE(info.end - info.begin <= size);
        clt_tensor *t = NULL;
        s = clt_safetensors_read(f, info.name, clt_cpu(), &t);
        if (s == CLT_OK) {
            FUZZ_REQUIRE(clt_tensor_numel(t) == info.numel);
            clt_tensor_release(t);
        } else {
            /* Dtypes and ranks cltensor cannot hold, or tensors too large
             * for the device; never a crash. */
            FUZZ_REQUIRE(t == NULL && clt_last_error()[0] != '\0');
        }
    }
    FUZZ_REQUIRE(clt_memory_allocated(clt_cpu()) == before);
    clt_safetensors_free(f);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_safetensors(data, size); }
#endif
