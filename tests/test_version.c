/* The version: one number, project()'s in the top CMakeLists.txt, seen the
 * same by the headers (CLT_VERSION_*), the library (clt_version), `clt
 * --version` and `clt devices`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* The VERSION of the project() line in $CLT_SOURCE_DIR/CMakeLists.txt. */
static void project_version(char *out, size_t len)
{
    const char *src = getenv("CLT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/CMakeLists.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[512];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        const char *v = strncmp(line, "project(", 8) == 0 ? strstr(line, " VERSION ") : NULL;
        if (v && sscanf(v, " VERSION %63[0-9.]", out) == 1) break;
    }
    fclose(f);
    ck_assert_msg(out[0] != '\0' && len > 0, "no project(... VERSION x.y.z) line in %s", path);
}

START_TEST(test_headers_and_library_agree_with_cmake)
{
    char want[64];
    project_version(want, sizeof want);
    ck_assert_str_eq(CLT_VERSION_STRING, want);
    char built[64];
    snprintf(built, sizeof built, "%d.%d.%d", CLT_VERSION_MAJOR, CLT_VERSION_MINOR, CLT_VERSION_PATCH);
    ck_assert_str_eq(built, want);
    ck_assert_int_eq(CLT_VERSION_NUMBER, CLT_VERSION_MAJOR * 10000 + CLT_VERSION_MINOR * 100 + CLT_VERSION_PATCH);
    int major = -1, minor = -1, patch = -1;
    ck_assert_str_eq(clt_version(&major, &minor, &patch), want);
    ck_assert_int_eq(major, CLT_VERSION_MAJOR);
    ck_assert_int_eq(minor, CLT_VERSION_MINOR);
    ck_assert_int_eq(patch, CLT_VERSION_PATCH);
    ck_assert_str_eq(clt_version(NULL, NULL, NULL), want);
}
END_TEST

START_TEST(test_clt_version_and_devices_print_it)
{
    char want[64], line[128], out[8192];
    project_version(want, sizeof want);
    snprintf(line, sizeof line, "clt (cltensor) %s\n", want);
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "'%s' --version", clt_test_clt_path()), 0);
    ck_assert_str_eq(out, line);
    snprintf(line, sizeof line, "cltensor %s\n", want);
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "'%s' devices", clt_test_clt_path()), 0);
    ck_assert_msg(strncmp(out, line, strlen(line)) == 0, "clt devices does not start with '%s': %s", line, out);
    ck_assert_int_eq(clt_test_shell(out, sizeof out, "'%s' --help", clt_test_clt_path()), 0);
    ck_assert_msg(strstr(out, "clt --version") != NULL, "clt --help does not mention --version: %s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("version");
    TCase *tc = clt_test_tcase("version");
    tcase_add_test(tc, test_headers_and_library_agree_with_cmake);
    tcase_add_test(tc, test_clt_version_and_devices_print_it);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
