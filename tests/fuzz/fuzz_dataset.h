/* Fuzz targets of the dataset readers: what clt_dataset_load returns must
 * agree with itself, whichever reader produced it. */
#ifndef CLT_FUZZ_DATASET_H
#define CLT_FUZZ_DATASET_H

#include <cltensor.h>
#include <math.h>

#include "fuzz_file.h"

/* Loads data as a file with the default options and checks the result: on
 * success, examples and features, finite values, class ids in range and
 * named; on failure, a reader's status, a message and a zeroed dataset. */
static inline int fuzz_dataset_load(const uint8_t *data, size_t size)
{
    clt_dataset ds;
    clt_data_options o = clt_data_default_options();
    clt_status s = clt_dataset_load(&ds, fuzz_file(data, size), &o);
    if (s != CLT_OK) {
        FUZZ_REQUIRE(s == CLT_ERR_FORMAT || s == CLT_ERR_UNSUPPORTED || s == CLT_ERR_INVALID_ARGUMENT);
        FUZZ_REQUIRE(clt_last_error()[0] != '\0');
        FUZZ_REQUIRE(ds.n == 0 && ds.x == NULL && ds.images == NULL);
        return 0;
    }
    int64_t w = clt_dataset_width(&ds);
    FUZZ_REQUIRE(ds.n >= 1 && w >= 1);
    FUZZ_REQUIRE((ds.x != NULL) != (ds.images != NULL));
    for (int64_t i = 0; ds.x && i < ds.n * w; i++) FUZZ_REQUIRE(isfinite(ds.x[i]));
    if (ds.task == CLT_TASK_CLASSIFY) {
        FUZZ_REQUIRE(ds.num_classes >= 1);
        for (int64_t i = 0; i < ds.n; i++) {
            int c = ds.classes ? ds.classes[i] : ds.labels[i];
            FUZZ_REQUIRE(c >= 0 && c < ds.num_classes);
        }
        for (int c = 0; ds.class_names && c < ds.num_classes; c++) FUZZ_REQUIRE(ds.class_names[c]);
    } else {
        FUZZ_REQUIRE(ds.task == CLT_TASK_REGRESS && ds.outputs >= 1 && ds.values);
        for (int64_t i = 0; i < ds.n * ds.outputs; i++) FUZZ_REQUIRE(isfinite(ds.values[i]));
    }
    clt_dataset_free(&ds);
    return 0;
}

#endif
