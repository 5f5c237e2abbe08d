/* Replays every input of the fuzz targets' seed corpora and every input the
 * fuzzers once crashed on (tests/fuzz/corpus/<target>/ and
 * tests/fuzz/regressions/<target>/) through the same target code, built
 * here without libFuzzer: the normal suite (and its sanitizer build) keeps
 * the fixes fixed without clang. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The targets without their libFuzzer entry points. */
#define CLT_FUZZ_NO_ENTRY
#include "fuzz/fuzz_args.c"
#include "fuzz/fuzz_cache_entry.c"
#include "fuzz/fuzz_clblast_params.c"
#include "fuzz/fuzz_csv.c"
#include "fuzz/fuzz_env.c"
#include "fuzz/fuzz_idx.c"
#include "fuzz/fuzz_model_description.c"
#include "fuzz/fuzz_model_shape.c"
#include "fuzz/fuzz_npy.c"
#include "fuzz/fuzz_resume.c"
#include "fuzz/fuzz_safetensors.c"
#include "fuzz/fuzz_smi.c"
#include "fuzz/fuzz_tune_cache.c"

#include "support.h"

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);


/* Runs fn on each regular file of tests/fuzz/<kind>/<target>; returns how
 * many. A missing folder holds nothing. */
static int replay_dir(const char *kind, const char *target, fuzz_fn fn)
{
    const char *src = getenv("CLT_SOURCE_DIR");
    ck_assert_msg(src, "CLT_SOURCE_DIR is not set (ctest sets it)");
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s", src, kind, target);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        size_t size;
        uint8_t *data = clt_test_read_bytes(path, &size);
        /* Named first, so a crash below shows which input it was. */
        fprintf(stderr, "replaying %s\n", path);
        fn(data, size);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *target, fuzz_fn fn)
{
    int seeds = replay_dir("corpus", target, fn);
    ck_assert_msg(seeds > 0, "no seed inputs for %s in tests/fuzz/corpus/%s", target, target);
    replay_dir("regressions", target, fn);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_replay_idx) { replay("idx", fuzz_idx); }
END_TEST

START_TEST(test_replay_csv) { replay("csv", fuzz_csv); }
END_TEST

START_TEST(test_replay_npy) { replay("npy", fuzz_npy); }
END_TEST

START_TEST(test_replay_safetensors) { replay("safetensors", fuzz_safetensors); }
END_TEST

START_TEST(test_replay_args) { replay("args", fuzz_args); }
END_TEST

START_TEST(test_replay_clblast_params) { replay("clblast_params", fuzz_clblast_params); }
END_TEST

START_TEST(test_replay_env) { replay("env", fuzz_env); }
END_TEST

START_TEST(test_replay_model_shape) { replay("model_shape", fuzz_model_shape); }
END_TEST

START_TEST(test_replay_resume) { replay("resume", fuzz_resume); }
END_TEST

START_TEST(test_replay_smi) { replay("smi", fuzz_smi); }
END_TEST

START_TEST(test_replay_cache_entry) { replay("cache_entry", fuzz_cache_entry); }
END_TEST

START_TEST(test_replay_tune_cache) { replay("tune_cache", fuzz_tune_cache); }
END_TEST

START_TEST(test_replay_model_description) { replay("model_description", fuzz_model_description); }
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = clt_test_tcase("replay");
    tcase_add_test(tc, test_replay_idx);
    tcase_add_test(tc, test_replay_csv);
    tcase_add_test(tc, test_replay_npy);
    tcase_add_test(tc, test_replay_safetensors);
    tcase_add_test(tc, test_replay_args);
    tcase_add_test(tc, test_replay_clblast_params);
    tcase_add_test(tc, test_replay_resume);
    tcase_add_test(tc, test_replay_env);
    tcase_add_test(tc, test_replay_model_shape);
    tcase_add_test(tc, test_replay_smi);
    tcase_add_test(tc, test_replay_cache_entry);
    tcase_add_test(tc, test_replay_tune_cache);
    tcase_add_test(tc, test_replay_model_description);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
