/* IDX arrays (http://yann.lecun.com/exdb/mnist/), gzip-compressed or raw. */
#include "cltensor/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../core/checked.h"
#include "../core/error.h"
#include "../tensor/tensor_internal.h"
#include "../core/file.h"
#include "../core/input.h"

#define IDX_UBYTE CLT_IDX_UBYTE
/* Memory grows from this size as data arrives. */
#define IDX_FIRST_CHUNK (1u << 20)

static void format_dims(char *buf, size_t len, int ndim, const int64_t *dims)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (used < len) snprintf(buf + used, len - used, ")");
}

/* A failed gzread: the system's error, or corrupt compressed data. */
static clt_status read_error(gzFile gz, const char *path)
{
    int err;
    const char *msg = gzerror(gz, &err);
    if (err == Z_ERRNO) return clt__fail(CLT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    return clt__fail(CLT_ERR_FORMAT, "%s: corrupt or truncated gzip data: %s", path, msg);
}

/* Reads up to n bytes; returns how many, or -1 on a read error. A gzip
 * stream cut short ends like a file ("unexpected end of file"), so a short
 * read with an error pending counts as an error. */
static int64_t read_some(gzFile gz, void *buf, size_t n)
{
    size_t total = 0;
    while (total < n) {
        size_t chunk = n - total < (1u << 30) ? n - total : (1u << 30);
        int got = gzread(gz, (uint8_t *)buf + total, (unsigned)chunk);
        if (got < 0) return -1;
        if (got == 0) break;
        total += (size_t)got;
    }
    int err;
    gzerror(gz, &err);
    return total < n && err != Z_OK ? -1 : (int64_t)total;
}

/* Bytes per element of an IDX element type; 0 for an unknown one. */
static int elem_size(int type)
{
    switch (type) {
    case CLT_IDX_UBYTE:
    case CLT_IDX_BYTE: return 1;
    case CLT_IDX_SHORT: return 2;
    case CLT_IDX_INT:
    case CLT_IDX_FLOAT: return 4;
    case CLT_IDX_DOUBLE: return 8;
    default: return 0;
    }
}

/* IDX elements are big-endian; the reader hands them out in host order. */
static void to_host_order(clt_idx *idx)
{
    uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    if (idx->elem_size == 1 || first == 0) return;
    int k = idx->elem_size;
    for (size_t i = 0; i + (size_t)k <= idx->nbytes; i += (size_t)k)
        for (int a = 0, b = k - 1; a < b; a++, b--) {
            uint8_t t = idx->data[i + a];
            idx->data[i + a] = idx->data[i + b];
            idx->data[i + b] = t;
        }
}

double clt_idx_value(const clt_idx *idx, int64_t i)
{
    const uint8_t *p = idx->data + (size_t)i * (size_t)idx->elem_size;
    switch (idx->type) {
    case CLT_IDX_UBYTE: return *p;
    case CLT_IDX_BYTE: return (int8_t)*p;
    case CLT_IDX_SHORT: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case CLT_IDX_INT: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case CLT_IDX_FLOAT: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static clt_status read_header(gzFile gz, const char *path, clt_idx *out)
{
    uint8_t magic[4];
    int64_t got = read_some(gz, magic, 4);
    if (got < 0) return read_error(gz, path);
    if (got < 4)
        return clt__fail(CLT_ERR_FORMAT, "%s: %lld bytes, too short for the 4-byte IDX magic number", path,
                         (long long)got);
    if (magic[0] != 0 || magic[1] != 0)
        return clt__fail(CLT_ERR_FORMAT, "%s: not an IDX file (magic %02x %02x %02x %02x, expected 00 00 08 nn)",
                         path, magic[0], magic[1], magic[2], magic[3]);
    int size = elem_size(magic[2]);
    if (size == 0) return clt__fail(CLT_ERR_FORMAT, "%s: unknown IDX element type 0x%02x", path, magic[2]);
    int ndim = magic[3];
    if (ndim < 1 || ndim > CLT_IDX_MAX_DIMS)
        return clt__fail(CLT_ERR_FORMAT, "%s: %d dimensions; an IDX file here has 1 to %d", path, ndim,
                         CLT_IDX_MAX_DIMS);
    uint8_t be[4 * CLT_IDX_MAX_DIMS];
    got = read_some(gz, be, (size_t)(4 * ndim));
    if (got < 0) return read_error(gz, path);
    if (got < 4 * ndim)
        return clt__fail(CLT_ERR_FORMAT, "%s: truncated inside the %d dimension sizes", path, ndim);
    for (int i = 0; i < ndim; i++)
        out->dims[i] = (int64_t)((uint64_t)be[4 * i] << 24 | (uint64_t)be[4 * i + 1] << 16 |
                                 (uint64_t)be[4 * i + 2] << 8 | be[4 * i + 3]);
    /* Every dimension counts, a zero one as 1 (core/checked.h), so that no
     * product of dimensions a reader forms later can overflow. */
    int64_t numel, total;
    if (clt__shape_bytes(ndim, out->dims, size, &numel, &total) != 0) {
        char dims[200];
        format_dims(dims, sizeof dims, ndim, out->dims);
        return clt__fail(CLT_ERR_FORMAT, "%s: dimensions %s multiply past 64 bits", path, dims);
    }
    out->ndim = ndim;
    out->nbytes = (size_t)total;
    out->type = magic[2];
    out->elem_size = size;
    return CLT_OK;
}

/* Reads exactly want bytes, growing the buffer only as data arrives. */
static clt_status read_data(gzFile gz, const char *path, clt_idx *out)
{
    size_t want = out->nbytes, have = 0, cap = want < IDX_FIRST_CHUNK ? want : IDX_FIRST_CHUNK;
    uint8_t *data = malloc(cap ? cap : 1);
    if (!data) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    while (have < want) {
        if (have == cap) {
            size_t grown = cap > want / 2 ? want : cap * 2;
            uint8_t *p = realloc(data, grown);
            if (!p) {
                free(data);
                return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory after %zu bytes", path, have);
            }
            data = p;
            cap = grown;
        }
        int64_t got = read_some(gz, data + have, cap - have);
        if (got < 0) {
            free(data);
            return read_error(gz, path);
        }
        if (got == 0) {
            char dims[200];
            format_dims(dims, sizeof dims, out->ndim, out->dims);
            free(data);
            return clt__fail(CLT_ERR_FORMAT, "%s: truncated: dimensions %s call for %zu data bytes, the file holds %zu",
                             path, dims, want, have);
        }
        have += (size_t)got;
    }
    /* One more read checks for trailing bytes and, for gzip, the stream's
     * checksum and length trailer. */
    uint8_t extra;
    int64_t got = read_some(gz, &extra, 1);
    if (got != 0) {
        free(data);
        if (got < 0) return read_error(gz, path);
        char dims[200];
        format_dims(dims, sizeof dims, out->ndim, out->dims);
        return clt__fail(CLT_ERR_FORMAT, "%s: data continues past the %zu bytes that dimensions %s call for", path,
                         want, dims);
    }
    out->data = data;
    to_host_order(out);
    return CLT_OK;
}

clt_status clt_idx_read(const char *path, clt_idx *out)
{
    CLT_TRY(clt__need("clt_idx_read", "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need("clt_idx_read", "path", path));
    int fd;
    CLT_TRY(clt__input_open(path, &fd, NULL));
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the gzip reader", path);
    }
    clt_status s = read_header(gz, path, out);
    if (s == CLT_OK) s = read_data(gz, path, out);
    gzclose(gz);
    if (s != CLT_OK) memset(out, 0, sizeof *out);
    return s;
}

void clt_idx_free(clt_idx *idx)
{
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* Compresses into the file as a gzip stream (no name, time 0: the output
 * depends only on the input). */
static clt_status write_gzip(clt__afile *af, const uint8_t *header, size_t hlen, const uint8_t *data, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the gzip writer", af->path);
    uint8_t buf[1 << 16];
    clt_status s = CLT_OK;
    const uint8_t *parts[2] = {header, data};
    size_t lens[2] = {hlen, n};
    for (int part = 0; part < 2 && s == CLT_OK; part++) {
        const uint8_t *p = parts[part];
        size_t left = lens[part];
        int flush;
        do {
            size_t chunk = left < (1u << 30) ? left : (1u << 30);
            z.next_in = (Bytef *)p;
            z.avail_in = (uInt)chunk;
            p += chunk;
            left -= chunk;
            flush = part == 1 && left == 0 ? Z_FINISH : Z_NO_FLUSH;
            do {
                z.next_out = buf;
                z.avail_out = sizeof buf;
                int r = deflate(&z, flush);
                if (r == Z_STREAM_ERROR) s = clt__fail(CLT_ERR_IO, "%s: gzip compression failed", af->path);
                if (s == CLT_OK) s = clt__afile_write(af, buf, sizeof buf - z.avail_out);
            } while (s == CLT_OK && z.avail_out == 0);
        } while (s == CLT_OK && left > 0);
    }
    deflateEnd(&z);
    return s;
}

clt_status clt_idx_write(const char *path, int ndim, const int64_t *dims, const uint8_t *data, int gzip)
{
    const char *op = "clt_idx_write";
    CLT_TRY(clt__need(op, "path", path));
    if (ndim < 1 || ndim > CLT_IDX_MAX_DIMS)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %d dimensions (1 to %d)", op, ndim, CLT_IDX_MAX_DIMS);
    CLT_TRY(clt__need(op, "dims", dims));
    uint8_t header[4 + 4 * CLT_IDX_MAX_DIMS] = {0, 0, IDX_UBYTE, (uint8_t)ndim};
    uint64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || dims[i] > (int64_t)UINT32_MAX)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: dimension %d is %lld (0 to %u)", op, i, (long long)dims[i],
                             UINT32_MAX);
        uint64_t d = (uint64_t)dims[i];
        if (d > 0 && total > SIZE_MAX / d)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: dimensions overflow", op);
        total *= d;
        for (int b = 0; b < 4; b++) header[4 + 4 * i + b] = (uint8_t)(d >> (24 - 8 * b));
    }
    if (total > 0) CLT_TRY(clt__need(op, "data", data));
    clt__afile af;
    CLT_TRY(clt__afile_open(&af, path));
    size_t hlen = 4 + 4 * (size_t)ndim;
    clt_status s;
    if (gzip) {
        s = write_gzip(&af, header, hlen, data, (size_t)total);
    } else {
        s = clt__afile_write(&af, header, hlen);
        if (s == CLT_OK) s = clt__afile_write(&af, data, (size_t)total);
    }
    if (s == CLT_OK) return clt__afile_commit(&af);
    clt__afile_abort(&af);
    return s;
}
