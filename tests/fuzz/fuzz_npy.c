/* libFuzzer target: clt_dataset_load on arbitrary bytes, which it reads as
 * a .npy file or a .npz archive (x and y). */
#include "fuzz_dataset.h"

static int fuzz_npy(const uint8_t *data, size_t size) { return fuzz_dataset_load(data, size); }

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_npy(data, size); }
#endif
