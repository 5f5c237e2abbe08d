/* The resident loader's gather (src/data/resident.c, cl/gather.cl; on the
 * GPU class, here forced with CLT_DEVICE_CLASS=gpu) runs at one
 * work-group size for every batch, the last partial one included, and is
 * compiled when the loader is made, before a run's clock starts. pocl
 * compiles a kernel once for each work-group size it is launched with and
 * keeps one folder per size in its cache (POCL_CACHE_DIR/../gather_batch/),
 * so the test counts those folders: one after clt_loader_create, still one
 * after an epoch of batches of 32, 32, 32 and 4. Another driver keeps no
 * such folders: the test then skips. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static char cache[128];
static int sizes;   /* entries in the gather_batch folders seen */
static int folders; /* gather_batch folders seen */

/* 1 when the folder holding the entry at path (its name at path + base) is
 * named `name`. */
static int parent_named(const char *path, int base, const char *name)
{
    size_t n = strlen(name);
    if (base < (int)n + 1 || strncmp(path + base - 1 - n, name, n) != 0) return 0;
    return base == (int)n + 1 || path[base - 2 - n] == '/';
}

static int count_sizes(const char *path, const struct stat *st, int type, struct FTW *at)
{
    (void)st;
    if (type == FTW_D && strcmp(path + at->base, "gather_batch") == 0) folders++;
    if (type == FTW_D && parent_named(path, at->base, "gather_batch")) sizes++;
    return 0;
}

static int gather_sizes(void)
{
    sizes = folders = 0;
    nftw(cache, count_sizes, 16, FTW_PHYS);
    return sizes;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *at)
{
    (void)st, (void)at;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

START_TEST(test_one_size_compiled_at_creation)
{
    enum { N = 100, ROWS = 28, COLS = 28 };
    clt_dataset ds = {.n = N, .rows = ROWS, .cols = COLS, .num_classes = 10};
    ds.images = malloc(N * ROWS * COLS);
    ds.labels = malloc(N);
    for (int i = 0; i < N * ROWS * COLS; i++) ds.images[i] = (uint8_t)(i * 7);
    for (int i = 0; i < N; i++) ds.labels[i] = (uint8_t)(i % 10);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = 32;
    clt_device dev = clt_test_device();
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, dev, &o));
    ck_assert_ok(clt_synchronize(dev));
    int made = gather_sizes();
    int64_t batches = 0;
    for (;;) {
        clt_tensor *x, *y;
        ck_assert_ok(clt_loader_next(l, &x, &y));
        if (!x) break;
        batches++;
        clt_tensor_release(x);
        clt_tensor_release(y);
    }
    ck_assert_int_eq(batches, 4);
    ck_assert_ok(clt_synchronize(dev));
    int after = gather_sizes();
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_skip_if(folders == 0, "pocl", "no gather_batch folder in POCL_CACHE_DIR: not pocl's cache");
    ck_assert_msg(made == 1, "%d work-group sizes of gather_batch compiled by clt_loader_create, not 1", made);
    ck_assert_msg(after == 1, "%d work-group sizes of gather_batch compiled over an epoch, not 1", after);
}
END_TEST

int main(void)
{
    /* pocl reads POCL_CACHE_DIR when it loads, before the first device. A
     * binary from cltensor's cache (scripts/test fills it with clt warmup
     * --all) holds every size pocl compiled for it: built from source here. */
    snprintf(cache, sizeof cache, "/tmp/clt-test-gather-compile-XXXXXX");
    if (!mkdtemp(cache)) return EXIT_FAILURE;
    setenv("POCL_CACHE_DIR", cache, 1);
    setenv("CLT_CACHE_DIR", "off", 1);
    setenv("CLT_DEVICE_CLASS", "gpu", 1); /* where the loader keeps the set resident */
    Suite *s = suite_create("gather_compile");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_one_size_compiled_at_creation);
    suite_add_tcase(s, tc);
    int rc = clt_test_run(s);
    nftw(cache, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
