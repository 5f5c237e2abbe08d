/* clt_xml_escape: names made safe for the SVG writers (memory_svg.c here,
 * `clt timeline` in the tool). */
#include <stdint.h>
#include <string.h>

#include "cltensor/io.h"

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

/* The length of the well-formed UTF-8 sequence at s, 1..4, or 0 when it is
 * ill-formed, with *bad the length of its maximal ill-formed subpart (the
 * bytes up to the first that cannot continue it, at least 1). The ranges
 * are Unicode's table of well-formed byte sequences (3.9, table 3-7). */
static size_t utf8_length(const unsigned char *s, size_t *bad)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t need;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) need = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef) need = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) need = 4;
    else {
        *bad = 1;
        return 0;
    }
    if (s[0] == 0xe0) lo = 0xa0;      /* no overlong forms */
    else if (s[0] == 0xed) hi = 0x9f; /* no surrogates */
    else if (s[0] == 0xf0) lo = 0x90;
    else if (s[0] == 0xf4) hi = 0x8f; /* nothing above U+10FFFF */
    for (size_t i = 1; i < need; i++, lo = 0x80, hi = 0xbf) {
        if (s[i] < lo || s[i] > hi) { /* the NUL at the end included */
            *bad = i;
            return 0;
        }
    }
    return need;
}

/* The code point of the well-formed sequence of n bytes at s. */
static uint32_t code_point(const unsigned char *s, size_t n)
{
    static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t c = s[0] & lead_mask[n];
    for (size_t i = 1; i < n; i++) c = c << 6 | (s[i] & 0x3f);
    return c;
}

static int forbidden(uint32_t c)
{
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || (c >= 0x7f && c <= 0x9f) || c == 0xfffe ||
           c == 0xffff;
}

static const char *entity(unsigned char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&apos;";
    default: return NULL;
    }
}

size_t clt_xml_escape(const char *in, char *out, size_t outlen)
{
    const unsigned char *s = (const unsigned char *)(in ? in : "");
    size_t total = 0, o = 0;
    int full = !out || outlen == 0; /* nothing more is written once a unit does not fit */
    while (*s) {
        size_t bad = 0, n = utf8_length(s, &bad);
        const char *unit = n == 1 ? entity(*s) : NULL;
        if (!unit && (n == 0 || forbidden(code_point(s, n)))) unit = replacement;
        size_t ulen = unit ? strlen(unit) : n;
        if (!full && o + ulen < outlen) {
            memcpy(out + o, unit ? unit : (const char *)s, ulen);
            o += ulen;
        } else {
            full = 1;
        }
        total = total > SIZE_MAX - ulen ? SIZE_MAX : total + ulen; /* stays at SIZE_MAX */
        s += n ? n : bad;
    }
    if (out && outlen) out[o] = '\0';
    return total;
}
