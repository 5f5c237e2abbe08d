/* A small XML checker for the SVG writers' tests (test_record, test_xml),
 * written apart from the escaper it checks (src/io/xml.c): the text is
 * well-formed UTF-8 of characters XML 1.0 allows, every element closes in
 * order, attributes are quoted, and neither text nor an attribute value
 * holds a raw '<' or a '&' outside one of the five predefined entities. */
#ifndef CLT_TEST_XML_CHECK_H
#define CLT_TEST_XML_CHECK_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The code point of the UTF-8 sequence at s and its length in *len, or -1
 * when it is not well-formed (a bad lead or continuation byte, an overlong
 * form, a surrogate, a code point above U+10FFFF). */
static long xml_check_decode(const unsigned char *s, int *len)
{
    static const long least[] = {0, 0, 0x80, 0x800, 0x10000};
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!n) return -1;
    long c = n == 1 ? s[0] : s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return -1;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return -1;
    *len = n;
    return c;
}

/* XML 1.0's Char production. */
static int xml_check_char(long c)
{
    return c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) ||
           (c >= 0x10000 && c <= 0x10ffff);
}

/* NULL when s is well-formed UTF-8 of XML characters, else what is wrong. */
static const char *xml_check_chars(const char *s)
{
    static char why[96];
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = 0;
        long c = xml_check_decode(p, &n);
        if (c < 0) {
            snprintf(why, sizeof why, "ill-formed UTF-8 at byte %ld (0x%02x)", (long)(p - (const unsigned char *)s),
                     *p);
            return why;
        }
        if (!xml_check_char(c)) {
            snprintf(why, sizeof why, "U+%04lX, which XML forbids, at byte %ld", c,
                     (long)(p - (const unsigned char *)s));
            return why;
        }
        p += n;
    }
    return NULL;
}

static int xml_check_entity(const char *p)
{
    static const char *const known[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (strncmp(p, known[i], strlen(known[i])) == 0) return 1;
    return 0;
}

/* Returns NULL when s is a well-formed document, else what is wrong. */
static const char *xml_problem(const char *s)
{
    static char why[160];
    const char *bad = xml_check_chars(s);
    if (bad) return bad;
    char stack[64][32];
    int depth = 0, root_seen = 0;
    for (const char *p = s; *p;) {
        if (*p != '<') {
            if (*p == '&' && !xml_check_entity(p)) return "a raw '&' in text";
            if (!depth && !isspace((unsigned char)*p)) return "text outside the root element";
            p++;
            continue;
        }
        int closing = p[1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " \t\n/>");
        if (len == 0 || len >= 32) return "a bad element name";
        const char *q = name + len;
        while (*q && *q != '>') {
            if (*q == '"') {
                const char *e = strchr(q + 1, '"');
                if (!e) return "an unclosed attribute value";
                for (const char *v = q + 1; v < e; v++) {
                    if (*v == '<') return "a '<' in an attribute";
                    if (*v == '&' && !xml_check_entity(v)) return "a raw '&' in an attribute";
                }
                q = e + 1;
            } else if (*q == '=' && q[1] != '"') {
                return "an unquoted attribute";
            } else {
                q++;
            }
        }
        if (!*q) return "an unclosed tag";
        int empty = q[-1] == '/';
        if (closing) {
            if (!depth || strlen(stack[depth - 1]) != len || strncmp(stack[depth - 1], name, len) != 0) {
                snprintf(why, sizeof why, "</%.*s> closes nothing open", (int)len, name);
                return why;
            }
            depth--;
        } else if (!empty) {
            if (depth == 0 && root_seen) return "two root elements";
            if (depth == 64) return "nesting too deep";
            memcpy(stack[depth], name, len);
            stack[depth++][len] = '\0';
            root_seen = 1;
        }
        p = q + 1;
    }
    return depth ? "an element left open" : root_seen ? NULL : "no root element";
}

#endif
