/* libFuzzer target: clt_dataset_load on arbitrary bytes, which it reads as
 * CSV text (or gzip-compressed CSV). */
#include "fuzz_dataset.h"

static int fuzz_csv(const uint8_t *data, size_t size) { return fuzz_dataset_load(data, size); }

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_csv(data, size); }
#endif
