/* CLT_CLBLAST_PARAMS: tuned CLBlast kernel parameters per device, from the
 * JSON files CLBlast's tuners write (src/ops/clblast_params.c). CLBlast keeps
 * overridden parameters for the rest of the process and the files are read
 * once per device, so each case runs in a new process: this binary runs
 * itself with CLT_DENSE=clblast, CLT_CLBLAST_PARAMS, and
 * CLT_TEST_CLBLAST_EXPECT saying what products there must do ("ok", or
 * "STATUS|text|text..." for a failure whose message holds each text). That
 * also holds when Check runs every test in one process (CK_FORK=no). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

#define TOL 1e-4


/* CLBlast 1.5's Xgemm and XgemmDirect parameters but the vector widths,
 * which each case adds; KWG, NDIMB, NDIMC, SA, SB, WGD and KWID differ from
 * CLBlast's values for pocl. */
#define XGEMM_PARAMS \
    "GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 NDIMC=8 NWG=32 SA=0 SB=0 STRM=0 STRN=0 "
#define DIRECT_PARAMS "KWID=1 MDIMAD=8 MDIMCD=8 NDIMBD=8 NDIMCD=8 PADA=1 PADB=1 WGD=8 "

/* ---- in the child ---- */

/* One product on dev against the reference; returns its status. */
static clt_status product(clt_device dev, int ta, int tb, int64_t m, int64_t n, int64_t k)
{
    float *a = clt_test_random_floats(m * k, (uint64_t)(m + 3 * k));
    float *b = clt_test_random_floats(k * n, (uint64_t)(n + 5 * k));
    float *c = clt_test_random_floats(m * n, 7);
    clt_tensor *at = clt_test_upload(dev, a, ta ? k : m, ta ? m : k);
    clt_tensor *bt = clt_test_upload(dev, b, tb ? n : k, tb ? k : n);
    clt_tensor *ct = clt_test_upload(dev, c, m, n);
    clt_status s = clt_gemm_(ta, tb, 0.5f, at, bt, 0.25f, ct);
    if (s == CLT_OK) {
        clt_test_ref_gemm(ta, tb, m, n, k, 0.5f, a, b, 0.25f, c);
        float *got = clt_test_read(ct);
        double err = clt_test_max_rel_err(got, c, m * n);
        ck_assert_msg(err < TOL, "ta=%d tb=%d m=%lld n=%lld k=%lld: error %g", ta, tb, (long long)m, (long long)n,
                      (long long)k, err);
        free(got);
    }
    clt_tensor_release(at);
    clt_tensor_release(bt);
    clt_tensor_release(ct);
    free(a);
    free(b);
    free(c);
    return s;
}

static void expect_failure(clt_device dev, const char *want, const char *texts)
{
    clt_status s = product(dev, 0, 1, 37, 29, 19);
    ck_assert_msg(strcmp(clt_status_string(s), want) == 0, "expected %s, got %s: %s", want, clt_status_string(s),
                  clt_last_error());
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", texts);
    char *save = NULL;
    for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        ck_assert_msg(strstr(clt_last_error(), t) != NULL, "\"%s\" is not in the message: %s", t, clt_last_error());
}

START_TEST(test_child)
{
    const char *expect = getenv("CLT_TEST_CLBLAST_EXPECT");
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device dev;
        ck_assert_ok(clt_device_list_entry(i, &dev));
        ck_assert_int_eq(setenv("CLT_DENSE", "clblast", 1), 0);
        if (strcmp(expect, "ok") == 0) {
            static const int64_t sizes[][3] = {{1, 1, 1}, {37, 29, 19}, {64, 48, 33}, {70, 130, 65}};
            for (int t = 0; t < 4; t++)
                for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
                    ck_assert_ok(product(dev, t & 1, t >> 1, sizes[z][0], sizes[z][1], sizes[z][2]));
        } else {
            const char *bar = strchr(expect, '|');
            char want[64];
            snprintf(want, sizeof want, "%.*s", bar ? (int)(bar - expect) : (int)strlen(expect), expect);
            const char *texts = bar ? bar + 1 : "";
            expect_failure(dev, want, texts);
            /* Every later CLBlast product on the device reports it again. */
            expect_failure(dev, want, texts);
            /* The device's own kernels still run. */
            ck_assert_int_eq(setenv("CLT_DENSE", "cpu", 1), 0);
            ck_assert_ok(product(dev, 0, 0, 13, 17, 5));
        }
    }
    unsetenv("CLT_DENSE");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- in the parent ---- */

static char dir[128];

static void setup(void) { clt_test_make_temp_dir(dir, sizeof dir, "clblast-params"); }
static void teardown(void) { clt_test_remove_dir(dir); }

/* CL_DEVICE_NAME of the device under test (every device in the
 * two-device configuration has the same one). */
static const char *device_name(void)
{
    static clt_device_info info;
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        if (clt_device_equal(d, clt_try_gpu(0))) {
            ck_assert_ok(clt_device_list_info(i, &info));
            return info.device_name;
        }
    }
    ck_abort_msg("no device");
    return NULL;
}

/* Writes text to DIR/name, whose path goes to path. */
static void write_text(char *path, size_t len, const char *name, const char *text)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A tuner's file as CLBlast writes it (the results trimmed to one). */
static void write_tuner_file(char *path, size_t len, const char *name, const char *device, const char *family,
                             const char *precision, const char *best)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\n  \"kernel_family\": \"%s\",\n  \"precision\": \"%s\",\n  \"best_kernel\": \"Xgemm\",\n"
             "  \"best_time\": \"1.25\",\n  \"best_parameters\": \"%s\",\n  \"arg_m\": \"1024\",\n"
             "  \"clblast_device_type\": \"CPU\",\n  \"clblast_device_name\": \"%s\",\n  \"device\": \"%s\",\n"
             "  \"platform_vendor\": \"The pocl project\",\n  \"device_compute_units\": \"2\",\n"
             "  \"results\": [\n    {\n      \"kernel\": \"Xgemm\",\n      \"time\": 1.250,\n"
             "      \"parameters\": {\"MWG\": 32, \"PRECISION\": %s}\n    }\n  ]\n}\n",
             family, precision, best, device, device, precision);
    write_text(path, len, name, text);
}

/* Runs this binary with CLT_DENSE=clblast, CLT_CLBLAST_PARAMS=params and
 * the expectation; returns its exit status. Its output (with pocl's and
 * CLBlast's build logs) goes to a file, shown when it fails. */
static int run_child(const char *params, const char *expect)
{
    char pvar[4096], evar[1024], dvar[] = "CLT_DENSE=clblast";
    snprintf(pvar, sizeof pvar, "CLT_CLBLAST_PARAMS=%s", params);
    snprintf(evar, sizeof evar, "CLT_TEST_CLBLAST_EXPECT=%s", expect);
    const char *set[] = {pvar, evar, dvar, NULL};
    char **env = clt_test_environ_with(set);
    char log[256];
    snprintf(log, sizeof log, "%s/child.log", dir);
    int code = clt_test_run_self(NULL, env, log, 600);
    free(env);
    FILE *f = code ? fopen(log, "r") : NULL;
    char line[512];
    while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
    if (f) fclose(f);
    fflush(stdout);
    return code;
}

#define EXPECT_CHILD(params, expect) \
    ck_assert_msg(run_child(params, expect) == 0, "CLT_CLBLAST_PARAMS=%s: expected %s", params, expect)

/* A routine file whose switch point sends every product to one kernel, a
 * full parameter set for that kernel (the products stay right), and the
 * same set with one value CLBlast accepts but cannot compile (the product
 * fails: the parameters reach the program CLBlast builds). */
static void check_reaches_kernel(const char *family, const char *good, const char *bad, const char *min_indirect,
                                 const char *bad_expect)
{
    char good_file[256], bad_file[256], routine[256], both[600], name[64], params[64];
    snprintf(name, sizeof name, "clblast_%s_32.json", family);
    write_tuner_file(good_file, sizeof good_file, name, device_name(), family, "32", good);
    write_tuner_file(bad_file, sizeof bad_file, "bad.json", device_name(), family, "32", bad);
    snprintf(params, sizeof params, "XGEMM_MIN_INDIRECT_SIZE=%s PRECISION=32", min_indirect);
    write_tuner_file(routine, sizeof routine, "clblast_routine_gemm_32.json", device_name(), "gemm_routine", "32",
                     params);
    snprintf(both, sizeof both, "%s:%s", good_file, routine);
    EXPECT_CHILD(both, "ok");
    snprintf(both, sizeof both, "%s::%s", routine, bad_file);
    EXPECT_CHILD(both, bad_expect);
}

/* xgemm_1 names Xgemm, which a switch point of 1 makes every product take. */
START_TEST(test_xgemm_parameters_reach_the_kernel)
{
    check_reaches_kernel("xgemm_1", XGEMM_PARAMS "PRECISION=32 VWM=2 VWN=2", XGEMM_PARAMS "PRECISION=32 VWM=3 VWN=2",
                         "1", "CLT_ERR_OPENCL|CLBlastSgemm|CL_BUILD_PROGRAM_FAILURE");
}
END_TEST

/* xgemm_direct_1 names XgemmDirect, which a switch point past every
 * product makes every product take. */
START_TEST(test_direct_parameters_reach_the_kernel)
{
    check_reaches_kernel("xgemm_direct_1", DIRECT_PARAMS "VWMD=1 VWND=1 PRECISION=32",
                         DIRECT_PARAMS "VWMD=3 VWND=1 PRECISION=32", "100000",
                         "CLT_ERR_OPENCL|CL_BUILD_PROGRAM_FAILURE");
}
END_TEST

/* Files for another device are skipped whatever they hold; an empty list applies nothing. */
START_TEST(test_other_device_ignored)
{
    char other[256], garbage[256], both[600];
    write_tuner_file(other, sizeof other, "other.json", "Some Other GPU", "xgemm_1", "32",
                     XGEMM_PARAMS "VWM=3 VWN=2");
    write_tuner_file(garbage, sizeof garbage, "garbage.json", "Some Other GPU", "no such family!", "7", "x y z");
    snprintf(both, sizeof both, "%s:%s", other, garbage);
    EXPECT_CHILD(both, "ok");
    EXPECT_CHILD("", "ok");
    EXPECT_CHILD("::", "ok");
}
END_TEST

/* CLBlast refuses an incomplete set and an unknown kernel. */
START_TEST(test_refused_by_clblast)
{
    char path[256], expect[600];
    write_tuner_file(path, sizeof path, "missing.json", device_name(), "xgemm_1", "32",
                     "GEMMK=0 KWG=16 KWI=2 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 NDIMC=8 NWG=32 SA=0 SB=0 STRM=0 STRN=0 "
                     "VWM=2 VWN=2 PRECISION=32");
    snprintf(expect, sizeof expect, "CLT_ERR_INVALID_ARGUMENT|CLT_CLBLAST_PARAMS: %s|Xgemm kernel|"
             "CLBlastMissingOverrideParameter", path);
    EXPECT_CHILD(path, expect);
    write_tuner_file(path, sizeof path, "unknown.json", device_name(), "xgemm_bogus_1", "32", "MWG=32");
    snprintf(expect, sizeof expect, "CLT_ERR_INVALID_ARGUMENT|%s|no kernel XgemmBogus|kernel_family \"xgemm_bogus_1\"",
             path);
    EXPECT_CHILD(path, expect);
}
END_TEST

/* Unreadable paths: missing, a directory, a FIFO (refused at once, not
 * waited on: the child has a time limit); a good file before one stops
 * nothing. */
START_TEST(test_unreadable_files)
{
    char good[256], list[600], expect[600], fifo[300];
    EXPECT_CHILD("/nonexistent/clblast_xgemm_1_32.json",
                 "CLT_ERR_IO|CLT_CLBLAST_PARAMS: cannot open /nonexistent/clblast_xgemm_1_32.json|No such file");
    snprintf(expect, sizeof expect, "CLT_ERR_IO|CLT_CLBLAST_PARAMS: %s is a directory, not a regular file", dir);
    EXPECT_CHILD(dir, expect);
    snprintf(fifo, sizeof fifo, "%s/clblast_xgemm_1_32.json", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    snprintf(expect, sizeof expect, "CLT_ERR_IO|CLT_CLBLAST_PARAMS: %s is a FIFO, not a regular file", fifo);
    EXPECT_CHILD(fifo, expect);
    ck_assert_int_eq(unlink(fifo), 0);
    write_tuner_file(good, sizeof good, "good.json", device_name(), "xgemm_1", "32", XGEMM_PARAMS "VWM=2 VWN=2");
    snprintf(list, sizeof list, "%s:%s/absent.json", good, dir);
    snprintf(expect, sizeof expect, "CLT_ERR_IO|cannot open %s/absent.json", dir);
    EXPECT_CHILD(list, expect);
}
END_TEST

/* Bad JSON and missing or wrong fields. */
START_TEST(test_malformed_files)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"{\"device\": ", "is not valid JSON"},
        {"", "is not valid JSON"},
        {"{\"a\": 1, \"a\": 2}", "is not valid JSON"},
        {"[1, 2]", "is not a JSON object"},
        {"{\"kernel_family\": \"xgemm_1\"}", "has no string \"device\""},
        {"{\"device\": 5}", "has no string \"device\""},
        {"{\"device\": \"@DEV@\", \"precision\": \"32\", \"best_parameters\": \"MWG=32\"}",
         "has no string \"kernel_family\""},
        {"{\"device\": \"@DEV@\", \"kernel_family\": \"../xgemm\", \"precision\": \"32\", "
         "\"best_parameters\": \"A=1\"}",
         "kernel_family \"../xgemm\" is not a tuner's family"},
        {"{\"device\": \"@DEV@\", \"kernel_family\": \"xgemm_1\", \"best_parameters\": \"A=1\"}",
         "\"precision\" is missing"},
        {"{\"device\": \"@DEV@\", \"kernel_family\": \"xgemm_1\", \"precision\": \"33\", \"best_parameters\": \"A=1\"}",
         "none of 16, 32, 64, 3232, 6464"},
        {"{\"device\": \"@DEV@\", \"kernel_family\": \"xgemm_1\", \"precision\": \"32\"}",
         "has no string \"best_parameters\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024], path[256], expect[600];
        const char *at = strstr(cases[i].text, "@DEV@");
        if (at)
            snprintf(text, sizeof text, "%.*s%s%s", (int)(at - cases[i].text), cases[i].text, device_name(), at + 5);
        else
            snprintf(text, sizeof text, "%s", cases[i].text);
        write_text(path, sizeof path, "malformed.json", text);
        snprintf(expect, sizeof expect, "CLT_ERR_FORMAT|%s|%s", path, cases[i].message);
        EXPECT_CHILD(path, expect);
    }
}
END_TEST

/* best_parameters that do not parse. */
START_TEST(test_garbage_parameters)
{
    char many[2048] = "", huge[600];
    for (int i = 0; i < 70; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "P%d=1 ", i);
    memset(huge, 'A', sizeof huge - 3);
    memcpy(huge + sizeof huge - 3, "=1", 3);
    static const char *const messages[] = {
        "is not NAME=VALUE", "is not NAME=VALUE", "is not NAME=VALUE", "is not NAME=VALUE", "is not NAME=VALUE",
        "has more than 9 digits", "gives MWG twice", "has PRECISION=64 but precision is 32",
        "names no parameter", "has more than 64 parameters", "is not NAME=VALUE"};
    const char *params[] = {"MWG", "MWG=", "=32", "MWG=-1", "MWG=0x20", "MWG=99999999999999999999",
                            "MWG=32 MWG=16", "MWG=32 PRECISION=64", "  PRECISION=32 ", many, huge};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char path[256], expect[600];
        write_tuner_file(path, sizeof path, "garbage.json", device_name(), "xgemm_1", "32", params[i]);
        snprintf(expect, sizeof expect, "CLT_ERR_FORMAT|%s: best_parameters|%s", path, messages[i]);
        EXPECT_CHILD(path, expect);
    }
}
END_TEST

int main(void)
{
    if (getenv("CLT_TEST_CLBLAST_EXPECT")) {
        Suite *s = suite_create("CLT_CLBLAST_PARAMS child");
        TCase *tc = clt_test_tcase("child");
        tcase_add_test(tc, test_child);
        suite_add_tcase(s, tc);
        return clt_test_run(s);
    }
    Suite *s = suite_create("CLT_CLBLAST_PARAMS");
    TCase *tc = clt_test_tcase("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_xgemm_parameters_reach_the_kernel);
    tcase_add_test(tc, test_direct_parameters_reach_the_kernel);
    tcase_add_test(tc, test_other_device_ignored);
    tcase_add_test(tc, test_refused_by_clblast);
    tcase_add_test(tc, test_unreadable_files);
    tcase_add_test(tc, test_malformed_files);
    tcase_add_test(tc, test_garbage_parameters);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
