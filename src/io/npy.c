/* NumPy .npy arrays and .npz archives (npy.h). */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../core/checked.h"
#include "../core/error.h"

int clt__npy_is_npy(const uint8_t *d, size_t len) { return len >= 6 && memcmp(d, "\x93NUMPY", 6) == 0; }

int clt__npy_is_zip(const uint8_t *d, size_t len)
{
    return len >= 4 && (memcmp(d, "PK\3\4", 4) == 0 || memcmp(d, "PK\5\6", 4) == 0);
}

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* The value of 'key' in the header dict: a pointer just after its colon and blanks. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    for (int q = 0; q < 2; q++) {
        snprintf(pat, sizeof pat, q ? "\"%s\"" : "'%s'", key);
        const char *k = strstr(h, pat);
        if (!k) continue;
        k += strlen(pat);
        while (*k == ' ') k++;
        if (*k != ':') return NULL;
        k++;
        while (*k == ' ') k++;
        return k;
    }
    return NULL;
}

static int host_little(void)
{
    uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void swap_bytes(uint8_t *d, int64_t numel, int size)
{
    for (int64_t i = 0; i < numel; i++) {
        uint8_t *e = d + i * size;
        for (int a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = e[a];
            e[a] = e[b];
            e[b] = t;
        }
    }
}

/* Fortran order into C order: element (i0..in) is at sum i_k * prod_{j<k} s_j. */
static int to_c_order(clt__array *a)
{
    if (a->ndim < 2 || a->numel == 0) return 0;
    uint8_t *dst = malloc((size_t)a->numel * (size_t)a->itemsize);
    if (!dst) return -1;
    int64_t idx[CLT__ARRAY_MAX_DIMS] = {0}, fstride[CLT__ARRAY_MAX_DIMS];
    fstride[0] = 1;
    for (int k = 1; k < a->ndim; k++) fstride[k] = fstride[k - 1] * a->shape[k - 1];
    const uint8_t *src = a->data;
    for (int64_t c = 0; c < a->numel; c++) {
        int64_t f = 0;
        for (int k = 0; k < a->ndim; k++) f += idx[k] * fstride[k];
        memcpy(dst + c * a->itemsize, src + f * a->itemsize, (size_t)a->itemsize);
        for (int k = a->ndim - 1; k >= 0; k--) {
            if (++idx[k] < a->shape[k]) break;
            idx[k] = 0;
        }
    }
    free(a->data);
    a->data = dst;
    return 0;
}

clt_status clt__npy_parse(clt__array *out, const char *name, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    if (!clt__npy_is_npy(data, len))
        return clt__fail(CLT_ERR_FORMAT, "%s: not a NumPy .npy file (no \\x93NUMPY magic)", name);
    if (len < 10) return clt__fail(CLT_ERR_FORMAT, "%s: truncated inside the .npy preamble", name);
    int major = data[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = le16(data + 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return clt__fail(CLT_ERR_FORMAT, "%s: truncated inside the .npy preamble", name);
        hlen = le32(data + 8);
        hstart = 12;
    } else {
        return clt__fail(CLT_ERR_FORMAT, "%s: .npy format version %d.%d; versions 1 to 3 are read", name, major,
                         data[7]);
    }
    if (hlen > len - hstart)
        return clt__fail(CLT_ERR_FORMAT, "%s: the .npy header claims %zu bytes, the file has %zu after the preamble",
                         name, hlen, len - hstart);
    char *h = malloc(hlen + 1);
    if (!h) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", name);
    memcpy(h, data + hstart, hlen);
    h[hlen] = 0;
    if (strlen(h) != hlen) {
        free(h);
        return clt__fail(CLT_ERR_FORMAT, "%s: a NUL byte in the .npy header", name);
    }
    clt_status s = CLT_OK;
    const char *descr = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"), *sh = dict_value(h, "shape");
    if (!descr || !fo || !sh) {
        s = clt__fail(CLT_ERR_FORMAT, "%s: the .npy header lacks 'descr', 'fortran_order' or 'shape': %.200s", name, h);
        goto done;
    }
    /* descr: '<f4', '|u1', '|b1', ... */
    char q = *descr;
    if (q != '\'' && q != '"') {
        s = clt__fail(CLT_ERR_UNSUPPORTED, "%s: dtype %.60s (a structured dtype); a plain number type is read", name,
                      descr);
        goto done;
    }
    const char *dend = strchr(descr + 1, q);
    size_t dlen = dend ? (size_t)(dend - descr - 1) : 0;
    char dt[16] = "";
    if (dend && dlen < sizeof dt) memcpy(dt, descr + 1, dlen), dt[dlen] = 0;
    char order = dt[0], kind = dt[1];
    int itemsize = dt[0] && dt[1] && dt[2] && !dt[3] && dt[2] >= '1' && dt[2] <= '8' ? dt[2] - '0' : 0;
    int known = (order == '<' || order == '>' || order == '|' || order == '=') &&
                ((kind == 'f' && (itemsize == 4 || itemsize == 8)) ||
                 ((kind == 'i' || kind == 'u') && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) ||
                 (kind == 'b' && itemsize == 1));
    if (!known) {
        s = clt__fail(CLT_ERR_UNSUPPORTED,
                      "%s: dtype '%s'; float32/64, int8-64, uint8-64 and bool are read (convert with astype)", name,
                      dt);
        goto done;
    }
    int fortran;
    if (strncmp(fo, "True", 4) == 0)
        fortran = 1;
    else if (strncmp(fo, "False", 5) == 0)
        fortran = 0;
    else {
        s = clt__fail(CLT_ERR_FORMAT, "%s: fortran_order is neither True nor False", name);
        goto done;
    }
    if (*sh != '(') {
        s = clt__fail(CLT_ERR_FORMAT, "%s: the shape is not a tuple", name);
        goto done;
    }
    const char *p = sh + 1;
    int ndim = 0;
    for (;;) {
        while (*p == ' ') p++;
        if (*p == ')') break;
        if (*p < '0' || *p > '9') {
            s = clt__fail(CLT_ERR_FORMAT, "%s: a malformed shape in the .npy header", name);
            goto done;
        }
        if (ndim == CLT__ARRAY_MAX_DIMS) {
            s = clt__fail(CLT_ERR_UNSUPPORTED, "%s: more than %d dimensions", name, CLT__ARRAY_MAX_DIMS);
            goto done;
        }
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (clt__mul_i64(v, 10, &v) != 0 || clt__add_i64(v, *p - '0', &v) != 0) {
                s = clt__fail(CLT_ERR_FORMAT, "%s: a dimension past 64 bits", name);
                goto done;
            }
            p++;
        }
        out->shape[ndim++] = v;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ')') {
            s = clt__fail(CLT_ERR_FORMAT, "%s: a malformed shape in the .npy header", name);
            goto done;
        }
    }
    int64_t numel, nbytes;
    if (clt__shape_bytes(ndim, out->shape, itemsize, &numel, &nbytes) != 0) {
        s = clt__fail(CLT_ERR_FORMAT, "%s: the shape's size passes 64 bits", name);
        goto done;
    }
    size_t body = len - hstart - hlen;
    if ((uint64_t)nbytes != body) {
        s = clt__fail(CLT_ERR_FORMAT, "%s: the shape calls for %lld data bytes, the file holds %zu", name,
                      (long long)nbytes, body);
        goto done;
    }
    out->data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!out->data) {
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes", name, (long long)nbytes);
        goto done;
    }
    memcpy(out->data, data + hstart + hlen, (size_t)nbytes);
    out->kind = kind;
    out->itemsize = itemsize;
    out->ndim = ndim;
    out->numel = numel;
    if (itemsize > 1 && ((order == '<') != host_little()) && order != '|' && order != '=')
        swap_bytes(out->data, numel, itemsize);
    if (fortran && to_c_order(out) != 0) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", name);
done:
    free(h);
    if (s != CLT_OK) clt__array_free(out);
    return s;
}

/* Inflates a raw deflate stream of clen bytes into exactly ulen bytes. */
static clt_status inflate_member(const char *path, const char *member, const uint8_t *src, size_t clen, uint8_t *dst,
                                 size_t ulen)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of memory for zlib", path);
    clt_status s = CLT_OK;
    size_t in_done = 0, out_done = 0;
    int r = Z_OK;
    while (r == Z_OK) {
        size_t in_chunk = clen - in_done < (1u << 30) ? clen - in_done : (1u << 30);
        size_t out_chunk = ulen - out_done < (1u << 30) ? ulen - out_done : (1u << 30);
        z.next_in = (Bytef *)(src + in_done);
        z.avail_in = (uInt)in_chunk;
        uint8_t spare;
        z.next_out = out_chunk ? dst + out_done : &spare;
        z.avail_out = out_chunk ? (uInt)out_chunk : 1;
        r = inflate(&z, Z_NO_FLUSH);
        in_done += in_chunk - z.avail_in;
        out_done += (out_chunk ? out_chunk : 1) - z.avail_out;
        if (r == Z_BUF_ERROR || (r == Z_OK && in_chunk == 0 && z.avail_out != 0)) break;
        if (out_done > ulen) break;
    }
    if (r != Z_STREAM_END || out_done != ulen)
        s = clt__fail(CLT_ERR_FORMAT, "%s: member %s: corrupt deflate data (%s)", path, member,
                      r == Z_STREAM_END ? "another length than the archive says" : z.msg ? z.msg : "cut short");
    inflateEnd(&z);
    return s;
}

clt_status clt__npz_parse(clt__array *out, const char *path, const uint8_t *d, size_t len, const char *array)
{
    memset(out, 0, sizeof *out);
    /* The end of central directory record: the last "PK\5\6" that fits. */
    if (len < 22) return clt__fail(CLT_ERR_FORMAT, "%s: too short for a zip archive (.npz)", path);
    size_t eocd = len - 22, lowest = len > 22 + 65535 ? len - 22 - 65535 : 0;
    while (memcmp(d + eocd, "PK\5\6", 4) != 0) {
        if (eocd == lowest) return clt__fail(CLT_ERR_FORMAT, "%s: no zip end-of-directory record (.npz)", path);
        eocd--;
    }
    uint64_t entries = le16(d + eocd + 10), cd_size = le32(d + eocd + 12), cd_off = le32(d + eocd + 16);
    if (cd_off == 0xFFFFFFFFu || entries == 0xFFFF) {
        /* zip64: the locator sits just before the record. */
        if (eocd < 20 || memcmp(d + eocd - 20, "PK\6\7", 4) != 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: a zip64 archive without its locator", path);
        uint64_t rec = le64(d + eocd - 20 + 8);
        if (rec > len - 56 || len < 56 || memcmp(d + rec, "PK\6\6", 4) != 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: a bad zip64 end-of-directory record", path);
        entries = le64(d + rec + 32);
        cd_size = le64(d + rec + 40);
        cd_off = le64(d + rec + 48);
    }
    if (cd_off > len || cd_size > len - cd_off)
        return clt__fail(CLT_ERR_FORMAT, "%s: the zip directory lies outside the file", path);
    char want[256];
    if (snprintf(want, sizeof want, "%s.npy", array) >= (int)sizeof want)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: array name too long", path);
    char names[512] = "";
    size_t names_len = 0;
    const uint8_t *p = d + cd_off, *end = d + cd_off + cd_size;
    for (uint64_t e = 0; e < entries; e++) {
        if ((size_t)(end - p) < 46 || memcmp(p, "PK\1\2", 4) != 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: a malformed zip directory entry %llu", path, (unsigned long long)e);
        uint32_t method = le16(p + 10), flags = le16(p + 8);
        uint64_t csize = le32(p + 20), usize = le32(p + 24), off = le32(p + 42);
        size_t nlen = le16(p + 28), xlen = le16(p + 30), clen = le16(p + 32);
        if ((size_t)(end - p) - 46 < nlen + xlen + clen)
            return clt__fail(CLT_ERR_FORMAT, "%s: a malformed zip directory entry %llu", path, (unsigned long long)e);
        const char *nm = (const char *)p + 46;
        /* zip64 sizes and offset, in that order, for the fields at 0xFFFFFFFF. */
        const uint8_t *x = p + 46 + nlen, *xend = x + xlen;
        while (xend - x >= 4) {
            uint32_t id = le16(x), sz = le16(x + 2);
            if ((size_t)(xend - x - 4) < sz) break;
            if (id == 1) {
                const uint8_t *v = x + 4, *vend = x + 4 + sz;
                if (usize == 0xFFFFFFFFu && vend - v >= 8) usize = le64(v), v += 8;
                if (csize == 0xFFFFFFFFu && vend - v >= 8) csize = le64(v), v += 8;
                if (off == 0xFFFFFFFFu && vend - v >= 8) off = le64(v), v += 8;
            }
            x += 4 + sz;
        }
        if (names_len + nlen + 3 < sizeof names) {
            if (names_len) memcpy(names + names_len, ", ", 2), names_len += 2;
            size_t shown = nlen > 4 && memcmp(nm + nlen - 4, ".npy", 4) == 0 ? nlen - 4 : nlen;
            memcpy(names + names_len, nm, shown);
            names_len += shown;
            names[names_len] = 0;
        }
        if (nlen == strlen(want) && memcmp(nm, want, nlen) == 0) {
            if (flags & 1) return clt__fail(CLT_ERR_UNSUPPORTED, "%s: member %s is encrypted", path, want);
            if (method != 0 && method != 8)
                return clt__fail(CLT_ERR_UNSUPPORTED, "%s: member %s uses zip method %u; stored (0) and deflated (8) are read",
                                 path, want, method);
            if (off > len || len - off < 30 || memcmp(d + off, "PK\3\4", 4) != 0)
                return clt__fail(CLT_ERR_FORMAT, "%s: member %s: no local header at offset %llu", path, want,
                                 (unsigned long long)off);
            uint64_t start = off + 30 + le16(d + off + 26) + le16(d + off + 28);
            if (start > len || csize > len - start)
                return clt__fail(CLT_ERR_FORMAT, "%s: member %s: its %llu bytes pass the end of the file", path, want,
                                 (unsigned long long)csize);
            char label[600];
            snprintf(label, sizeof label, "%s (array %s)", path, array);
            if (method == 0) {
                if (usize != csize)
                    return clt__fail(CLT_ERR_FORMAT, "%s: member %s: stored with two sizes", path, want);
                return clt__npy_parse(out, label, d + start, (size_t)csize);
            }
            if (usize > SIZE_MAX - 1 || usize > (uint64_t)csize * 1032 + 64)
                return clt__fail(CLT_ERR_FORMAT, "%s: member %s claims %llu bytes from %llu compressed", path, want,
                                 (unsigned long long)usize, (unsigned long long)csize);
            uint8_t *buf = malloc((size_t)usize + 1);
            if (!buf) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
            clt_status s = inflate_member(path, want, d + start, (size_t)csize, buf, (size_t)usize);
            if (s == CLT_OK) s = clt__npy_parse(out, label, buf, (size_t)usize);
            free(buf);
            return s;
        }
        p += 46 + nlen + xlen + clen;
    }
    return clt__fail(CLT_ERR_FORMAT, "%s: no array '%s' in the archive (it holds: %s)", path, array,
                     names_len ? names : "nothing");
}

double clt__array_get(const clt__array *a, int64_t i)
{
    const uint8_t *p = (const uint8_t *)a->data + i * a->itemsize;
    switch (a->kind) {
    case 'f':
        if (a->itemsize == 4) {
            float v;
            memcpy(&v, p, 4);
            return v;
        } else {
            double v;
            memcpy(&v, p, 8);
            return v;
        }
    case 'b': return *p != 0;
    case 'u':
        switch (a->itemsize) {
        case 1: return *p;
        case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
        case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
        default: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
        }
    default:
        switch (a->itemsize) {
        case 1: return (int8_t)*p;
        case 2: { int16_t v; memcpy(&v, p, 2); return v; }
        case 4: { int32_t v; memcpy(&v, p, 4); return v; }
        default: { int64_t v; memcpy(&v, p, 8); return (double)v; }
        }
    }
}

void clt__array_free(clt__array *a)
{
    if (!a) return;
    if (!a->borrowed) free(a->data);
    memset(a, 0, sizeof *a);
}
