/* libFuzzer target: resume metadata. The input is "key=value" lines (the
 * first byte picks float16 and Adam); they become the metadata of a real
 * checkpoint of a small ResMLP, which clt_checkpoint_load reads and
 * clt_trainer_fit resumes from, training on to 3 epochs of 8 examples.
 * Either the metadata is refused with CLT_ERR_FORMAT and a message naming
 * the key, or the run ends in range: no overflow, no crash, no leak. */
#include <cltensor.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"

#define RESUME_MAX_KEYS 16
#define RESUME_EXAMPLES 8

/* The checkpoint's path, in the private directory (fuzz_file.h), which is
 * removed with what it holds when the process exits. */
static const char *resume_path(void)
{
    static char path[4200];
    if (!path[0]) fuzz_private_path("resume.st", path);
    return path;
}

/* RESUME_EXAMPLES images of class i % 10, each lighting its own band. */
static clt_dataset resume_dataset(void)
{
    clt_dataset ds = {.n = RESUME_EXAMPLES, .rows = 28, .cols = 28, .images = malloc(RESUME_EXAMPLES * 784),
                      .labels = malloc(RESUME_EXAMPLES), .num_classes = 10};
    FUZZ_REQUIRE(ds.images && ds.labels);
    memset(ds.images, 0, RESUME_EXAMPLES * 784);
    for (int i = 0; i < RESUME_EXAMPLES; i++) {
        ds.labels[i] = (uint8_t)(i % 10);
        memset(ds.images + i * 784 + (i % 10) * 78, 200, 78);
    }
    return ds;
}

/* Splits text (NUL-terminated, modified) into at most RESUME_MAX_KEYS
 * key=value pairs; lines without '=' are skipped. */
static int resume_pairs(char *text, const char **keys, const char **values)
{
    int n = 0;
    for (char *line = text; line && n < RESUME_MAX_KEYS;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *eq = strchr(line, '=');
        if (eq && eq != line) {
            *eq = '\0';
            keys[n] = line;
            values[n++] = eq + 1;
        }
        line = next;
    }
    return n;
}

/* Saves model's parameters with the given metadata (what a trainer's
 * checkpoint holds, with values from the input). The writer may refuse
 * metadata (a duplicate key): then there is nothing to resume from. */
static clt_status resume_save(const clt_model *m, int nm, const char **keys, const char **values)
{
    int np = clt_model_num_parameter_tensors(m);
    const char *names[64];
    clt_tensor *tensors[64];
    FUZZ_REQUIRE(np <= 64);
    for (int i = 0; i < np; i++) FUZZ_REQUIRE(clt_model_named_parameter(m, i, &names[i], &tensors[i], NULL) == CLT_OK);
    return clt_safetensors_save(resume_path(), np, names, tensors, nm, keys, values);
}

static int fuzz_resume(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int64_t before = clt_memory_allocated(clt_device_get_default());
    int half = data[0] & 1, adam = (data[0] >> 1) & 1;
    char *text = malloc(size);
    FUZZ_REQUIRE(text);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    const char *keys[RESUME_MAX_KEYS], *values[RESUME_MAX_KEYS];
    int nm = resume_pairs(text, keys, values);
    clt_model *m = NULL;
    FUZZ_REQUIRE(clt_model_create_resmlp(&m, clt_device_get_default(), 784, 8, 1, 10, 0) == CLT_OK);
    if (half) FUZZ_REQUIRE(clt_model_to_dtype(m, CLT_FLOAT16) == CLT_OK);
    clt_status s = resume_save(m, nm, keys, values);
    if (s != CLT_OK) {
        FUZZ_REQUIRE(clt_last_error()[0] != '\0');
        clt_model_free(m);
        free(text);
        return 0;
    }

    clt_checkpoint_info info;
    s = clt_checkpoint_load(resume_path(), m, NULL, &info);
    FUZZ_REQUIRE(s == CLT_OK || s == CLT_ERR_FORMAT);
    if (s == CLT_OK) {
        /* Whatever loads is in range. */
        FUZZ_REQUIRE(info.epoch >= 0 && info.epoch < INT32_MAX);
        FUZZ_REQUIRE(info.steps >= 0 && info.steps <= ((int64_t)1 << 53));
        FUZZ_REQUIRE(info.batch >= 0 && info.batch <= info.steps);
        FUZZ_REQUIRE(info.hiddens >= 0 && info.blocks >= 0);
    } else {
        FUZZ_REQUIRE(strstr(clt_last_error(), resume_path()) != NULL);
    }

    clt_dataset train = resume_dataset();
    clt_trainer_options o = clt_trainer_default_options();
    o.max_epochs = 3;
    o.batch_size = 4;
    o.fp16 = half;
    o.optimizer = adam ? CLT_OPTIMIZER_ADAM : CLT_OPTIMIZER_SGD;
    o.lr = 0.01f;
    o.resume_path = resume_path();
    clt_trainer_result r;
    memset(&r, 0, sizeof r);
    s = clt_trainer_fit(m, &train, NULL, &o, &r);
    /* Refused metadata, or a run that went on from where it said, in range
     * (a loss scale from the input may overflow every float16 step). */
    FUZZ_REQUIRE(s == CLT_OK || s == CLT_ERR_FORMAT || s == CLT_ERR_DIVERGED);
    FUZZ_REQUIRE(s == CLT_OK || clt_last_error()[0] != '\0');
    if (s == CLT_OK) {
        FUZZ_REQUIRE(r.steps >= 0 && r.skipped_steps >= 0 && r.skipped_steps <= r.steps);
        FUZZ_REQUIRE(r.epochs >= 0);
    }
    clt_dataset_free(&train);
    clt_model_free(m);
    FUZZ_REQUIRE(clt_memory_allocated(clt_device_get_default()) == before);
    free(text);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_resume(data, size); }
#endif
