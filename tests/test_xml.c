/* Names in SVG: clt_xml_escape against written-out expectations and, over
 * every string of one or two bytes and many random ones, against the
 * checker of tests/support/xml_check.h; and `clt timeline` drawing a trace
 * whose names are hostile. (The memory SVG's hostile labels are in
 * test_record.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "xml_check.h"

#define FFFD "\xef\xbf\xbd"

static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static char *escaped(const char *in)
{
    static char buf[1024];
    size_t n = clt_xml_escape(in, buf, sizeof buf);
    CLT_TEST_REQUIRE(n < sizeof buf && n == strlen(buf), "'%s' escapes to %zu bytes, '%s'", in, n, buf);
    return buf;
}

#define ck_escapes(in, want) ck_assert_str_eq(escaped(in), want)

START_TEST(test_escapes_the_five_specials)
{
    ck_escapes("a<b>&\"'c", "a&lt;b&gt;&amp;&quot;&apos;c");
    ck_escapes("&amp;", "&amp;amp;"); /* an entity in a name is text, escaped again */
    ck_escapes("plain name, 0-9 ~", "plain name, 0-9 ~");
    ck_escapes("", "");
    ck_escapes(NULL, "");
}
END_TEST

START_TEST(test_replaces_control_characters)
{
    ck_escapes("\x01x\x1f", FFFD "x" FFFD);
    ck_escapes("\t\n\r", "\t\n\r"); /* the three XML allows below 0x20 */
    ck_escapes("\x7f", FFFD);
    ck_escapes("\xc2\x80\xc2\x85\xc2\x9f", FFFD FFFD FFFD); /* C1 controls */
    ck_escapes("\xc2\xa0", "\xc2\xa0");                     /* U+00A0 is not one */
    ck_escapes("\xef\xbf\xbe\xef\xbf\xbf", FFFD FFFD);      /* U+FFFE, U+FFFF: not XML characters */
    ck_escapes("\xef\xbf\xbd", FFFD);
}
END_TEST

START_TEST(test_keeps_well_formed_utf8)
{
    const char *kept[] = {"\xc3\xa9", "\xe2\x82\xac", "\xed\x9f\xbf", "\xee\x80\x80", "\xf0\x9f\x98\x80",
                          "\xf4\x8f\xbf\xbf", "\xef\xb7\x90"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) ck_escapes(kept[i], kept[i]);
}
END_TEST

/* One U+FFFD per maximal ill-formed subpart (Unicode 3.9, "U+FFFD
 * Substitution of Maximal Subparts"), the example of table 3-8 included. */
START_TEST(test_replaces_ill_formed_utf8)
{
    ck_escapes("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64", "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
    ck_escapes("\xc0\xaf", FFFD FFFD);            /* overlong '/' */
    ck_escapes("\xe0\x80\xaf", FFFD FFFD FFFD);   /* overlong, three bytes */
    ck_escapes("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD);
    ck_escapes("\xed\xa0\x80", FFFD FFFD FFFD);   /* a surrogate */
    ck_escapes("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* above U+10FFFF */
    ck_escapes("\xf5\xff\xfe", FFFD FFFD FFFD);
    ck_escapes("x\xe2\x82", "x" FFFD);            /* cut at the end */
    ck_escapes("\xe2\x82<", FFFD "&lt;");         /* cut before a special */
    ck_escapes("\xf0\x9f\x98", FFFD);
}
END_TEST

/* snprintf's contract: the whole length returned, out terminated, only
 * whole characters and entities written. */
START_TEST(test_truncates_at_whole_units)
{
    const char *in = "a&\xc3\xa9\x01z";
    const char *full = "a&amp;\xc3\xa9" FFFD "z";
    size_t len = strlen(full);
    char buf[32];
    for (size_t outlen = 0; outlen <= len + 2; outlen++) {
        memset(buf, '#', sizeof buf);
        ck_assert_uint_eq(clt_xml_escape(in, buf, outlen), len);
        if (outlen == 0) {
            ck_assert_int_eq(buf[0], '#'); /* nothing written */
            continue;
        }
        size_t got = strlen(buf);
        ck_assert_uint_lt(got, outlen);
        ck_assert_int_eq(buf[outlen], '#'); /* nothing past outlen */
        ck_assert_msg(strncmp(buf, full, got) == 0, "outlen %zu: '%s' is not a prefix of '%s'", outlen, buf, full);
        /* A prefix ending between units: a=1, &amp;=6, e acute=8, U+FFFD=11, z=12. */
        ck_assert_msg(got == 0 || got == 1 || got == 6 || got == 8 || got == 11 || got == 12,
                      "outlen %zu: cut inside a unit at %zu", outlen, got);
        /* Greedy: the next unit did not fit. */
        size_t next = got == 0 ? 1 : got == 1 ? 6 : got == 6 ? 8 : got == 8 ? 11 : 12;
        if (got < len) ck_assert_uint_ge(next, outlen);
    }
    ck_assert_uint_eq(clt_xml_escape(in, NULL, 100), len);
    ck_assert_uint_eq(clt_xml_escape(NULL, buf, 1), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

/* Asserts that the escape of in (n bytes) is text an element can hold, and
 * that in comes back as it is when it is well-formed UTF-8 holding no
 * special and no character the escaper replaces. */
static void check_escape(const unsigned char *in, size_t n)
{
    char s[16], doc[128];
    memcpy(s, in, n);
    s[n] = '\0';
    char *e = escaped(s);
    snprintf(doc, sizeof doc, "<t>%s</t>", e);
    const char *bad = xml_problem(doc);
    if (bad) {
        char hex[64] = "";
        for (size_t i = 0; i < n; i++) snprintf(hex + 3 * i, sizeof hex - 3 * i, " %02x", in[i]);
        ck_abort_msg("bytes%s escape to '%s': %s", hex, e, bad);
    }
    CLT_TEST_REQUIRE(!strpbrk(e, "<>\"'"), "'%s' escapes to '%s'", s, e);
    int plain = xml_check_chars(s) == NULL && strpbrk(s, "<>&\"'") == NULL;
    for (const unsigned char *p = (const unsigned char *)s; plain && *p;) {
        int len = 0;
        long c = xml_check_decode(p, &len);
        plain = c >= 0x20 ? !(c >= 0x7f && c <= 0x9f) : (c == '\t' || c == '\n' || c == '\r');
        p += len;
    }
    CLT_TEST_REQUIRE(!plain || strcmp(e, s) == 0, "'%s' escapes to '%s'", s, e);
}

START_TEST(test_every_short_string_escapes_to_valid_xml)
{
    unsigned char b[4];
    for (int x = 1; x < 256; x++) {
        b[0] = (unsigned char)x;
        check_escape(b, 1);
        for (int y = 1; y < 256; y++) {
            b[1] = (unsigned char)y;
            check_escape(b, 2);
        }
    }
    /* Three and four bytes: a lead byte each way, then bytes near the
     * continuation range's edges. */
    static const unsigned char edge[] = {0x01, 0x26, 0x3c, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf,
                                         0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
    for (int x = 0xc0; x < 256; x++)
        for (size_t i = 0; i < sizeof edge; i++)
            for (size_t j = 0; j < sizeof edge; j++)
                for (size_t k = 0; k < sizeof edge; k++) {
                    b[0] = (unsigned char)x, b[1] = edge[i], b[2] = edge[j], b[3] = edge[k];
                    check_escape(b, 3);
                    check_escape(b, 4);
                }
    /* Random strings of up to 12 bytes. */
    uint64_t state = 88172645463325252ull;
    for (int t = 0; t < 200000; t++) {
        unsigned char r[12];
        size_t n = 1 + t % 12;
        for (size_t i = 0; i < n; i++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            r[i] = (unsigned char)(state % 255 + 1);
        }
        check_escape(r, n);
    }
}
END_TEST

START_TEST(test_xml_checker_checks)
{
    ck_assert_ptr_null(xml_problem("<svg a=\"1\"><g><text>x &amp; y &apos;" FFFD "\t</text></g><rect/></svg>\n"));
    ck_assert_ptr_nonnull(xml_problem("<svg><g></svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg a=1></svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg><text>a & b</text></svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg a=\"&x;\"></svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\x01</svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\xef\xbf\xbe</svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\xc3</svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\xc0\xaf</svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\xed\xa0\x80</svg>"));
    ck_assert_ptr_nonnull(xml_problem("<svg>\xf4\x90\x80\x80</svg>"));
}
END_TEST

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A trace whose row and command names hold what JSON can carry and XML
 * cannot (control characters, U+FFFE, C1 controls) and all five specials:
 * `clt timeline` draws them as clt_xml_escape writes them, into a
 * well-formed SVG (parsed by Python's XML parser too where python3 runs).
 * Raw ill-formed UTF-8 in the trace is refused by the JSON reader, naming
 * the file, and nothing is drawn. */
START_TEST(test_timeline_escapes_hostile_names)
{
    char dir[64], trace[128], svg[128];
    clt_test_make_temp_dir(dir, sizeof dir, "xml-timeline");
    snprintf(trace, sizeof trace, "%s/t.json", dir);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    put(trace, "{\"traceEvents\":["
               "{\"ph\":\"M\",\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"h\\u0001<o>&\\\"'st\\u001b[31m\"}},"
               "{\"ph\":\"X\",\"tid\":0,\"ts\":1,\"dur\":2,\"name\":\"k\\u0007\\uffff\\u0085\\u00e9\\ud83d\\ude00\","
               "\"cat\":\"kernel\"},"
               "{\"ph\":\"i\",\"tid\":1,\"ts\":3,\"name\":\"w&amp;\\t\\n\",\"cat\":\"sync\"}]}");
    int rc = run("%s timeline %s %s", clt_test_clt_path(), trace, svg);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    char *text = clt_test_read_file(svg);
    const char *bad = xml_problem(text);
    ck_assert_msg(bad == NULL, "%s is not well-formed: %s\n%s", svg, bad, text);
    ck_assert_msg(strstr(text, ">h" FFFD "&lt;o&gt;&amp;&quot;&apos;st" FFFD "[31m</text>"), "row label:\n%s", text);
    ck_assert_msg(strstr(text, "<title>k" FFFD FFFD FFFD "\xc3\xa9\xf0\x9f\x98\x80 (2.0 us)</title>"), "title:\n%s",
                  text);
    ck_assert_msg(strstr(text, "<title>w&amp;amp;\t\n (0.0 us)</title>"), "title:\n%s", text);
    ck_assert_msg(strstr(text, ">?</text>"), "no '?' for the unnamed row:\n%s", text);
    free(text);
    if (system("python3 -c '' > /dev/null 2>&1") == 0) {
        rc = run("python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' %s", svg);
        ck_assert_msg(rc == 0, "Python's XML parser refuses %s:\n%s", svg, out);
    }

    unlink(svg);
    put(trace, "{\"traceEvents\":[{\"ph\":\"X\",\"tid\":0,\"ts\":1,\"dur\":2,\"name\":\"k\xff\xc0\"}]}");
    rc = run("%s timeline %s %s", clt_test_clt_path(), trace, svg);
    ck_assert_msg(rc == 1 && strstr(out, trace), "ill-formed UTF-8: exit %d:\n%s", rc, out);
    ck_assert_int_ne(access(svg, F_OK), 0);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("xml");
    TCase *tc = tcase_create("xml");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_escapes_the_five_specials);
    tcase_add_test(tc, test_replaces_control_characters);
    tcase_add_test(tc, test_keeps_well_formed_utf8);
    tcase_add_test(tc, test_replaces_ill_formed_utf8);
    tcase_add_test(tc, test_truncates_at_whole_units);
    tcase_add_test(tc, test_every_short_string_escapes_to_valid_xml);
    tcase_add_test(tc, test_xml_checker_checks);
    tcase_add_test(tc, test_timeline_escapes_hostile_names);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
