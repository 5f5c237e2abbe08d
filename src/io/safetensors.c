/* safetensors: https://github.com/huggingface/safetensors (format described
 * in include/cltensor/io.h). The header is parsed by jansson. */
#include "cltensor/io.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/error.h"
#include "../ops/half.h"
#include "../tensor/tensor_internal.h"
#include "../core/file.h"
#include "../core/input.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this host is not"
#endif

/* The format's dtypes that a header may name here (any other is refused as unknown), with
 * their element sizes; only F32, F16, BF16 and I32 can be read into tensors (host_dtype). */
static const struct dtype_desc {
    const char *name;
    size_t size;
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4},  {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
};

static const struct dtype_desc *dtype_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
    return NULL;
}

typedef struct entry {
    char *name;
    const char *dtype; /* points into dtypes[] */
    size_t elem_size;
    int ndim;
    int64_t *shape;
    int64_t numel;
    uint64_t begin, end;
} entry;

struct clt_safetensors {
    int fd;
    char *path;
    uint64_t data_start, data_len;
    int n;
    entry *entries; /* sorted by offset */
    int n_meta;
    char **meta_keys, **meta_values;
};

void clt_safetensors_free(clt_safetensors *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) {
        free(f->entries[i].name);
        free(f->entries[i].shape);
    }
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->entries);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    free(f);
}

/* Reads exactly n bytes at offset; short reads mean the file changed or ended. */
static clt_status read_at(const clt_safetensors *f, void *buf, size_t n, uint64_t offset, const char *what)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(f->fd, p, n, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return clt__fail(CLT_ERR_IO, "%s: cannot read %s: %s", f->path, what, strerror(errno));
        if (got == 0)
            return clt__fail(CLT_ERR_FORMAT, "%s: file ends inside %s (was it changed while open?)", f->path,
                             what);
        p += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return CLT_OK;
}

static clt_status bad(const clt_safetensors *f, const char *tensor, const char *problem)
{
    if (tensor) return clt__fail(CLT_ERR_FORMAT, "%s: tensor '%s': %s", f->path, tensor, problem);
    return clt__fail(CLT_ERR_FORMAT, "%s: %s", f->path, problem);
}

/* A JSON integer that is >= 0 (jansson has already refused ones past 64 bits). */
static int get_count(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static clt_status parse_metadata(clt_safetensors *f, json_t *meta)
{
    if (json_is_null(meta)) return CLT_OK;
    if (!json_is_object(meta)) return bad(f, NULL, "__metadata__ is not an object of strings");
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", f->path);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v)) {
            char msg[160];
            snprintf(msg, sizeof msg, "__metadata__ value of '%.100s' is not a string", key);
            return bad(f, NULL, msg);
        }
        f->meta_keys[f->n_meta] = strdup(key);
        f->meta_values[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1])
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", f->path);
    }
    return CLT_OK;
}

/* Only dtype, shape and data_offsets, all three. */
static clt_status check_fields(clt_safetensors *f, const char *name, json_t *v)
{
    const char *field;
    json_t *fv;
    json_object_foreach(v, field, fv) {
        if (strcmp(field, "dtype") != 0 && strcmp(field, "shape") != 0 && strcmp(field, "data_offsets") != 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "unexpected field '%.100s' (only dtype, shape, data_offsets)", field);
            return bad(f, name, msg);
        }
    }
    if (!json_object_get(v, "dtype") || !json_object_get(v, "shape") || !json_object_get(v, "data_offsets"))
        return bad(f, name, "entry lacks dtype, shape or data_offsets");
    return CLT_OK;
}

static clt_status parse_dtype(clt_safetensors *f, const char *name, json_t *dt, entry *e)
{
    if (!json_is_string(dt)) return bad(f, name, "dtype is not a string");
    const struct dtype_desc *d = dtype_lookup(json_string_value(dt));
    if (!d) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown dtype '%.60s'", json_string_value(dt));
        return bad(f, name, msg);
    }
    e->dtype = d->name;
    e->elem_size = d->size;
    return CLT_OK;
}

/* The shape and its element count; e->elem_size is known. */
static clt_status parse_shape(clt_safetensors *f, const char *name, json_t *shape, entry *e)
{
    char msg[256];
    if (!json_is_array(shape)) return bad(f, name, "shape is not an array");
    size_t ndim = json_array_size(shape);
    if (ndim > 1024) return bad(f, name, "shape has more than 1024 dimensions");
    e->shape = malloc((ndim ? ndim : 1) * sizeof *e->shape);
    if (!e->shape) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", f->path);
    e->ndim = (int)ndim;
    /* Bytes, not elements, must fit in 64 bits, so the product is bounded by
     * INT64_MAX / element size. */
    int64_t numel = 1, limit = INT64_MAX / (int64_t)e->elem_size;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t s;
        if (!get_count(json_array_get(shape, i), &s)) {
            snprintf(msg, sizeof msg, "shape[%zu] is not a non-negative integer", i);
            return bad(f, name, msg);
        }
        e->shape[i] = (int64_t)s;
        if (s > 0 && numel > limit / (int64_t)s) {
            snprintf(msg, sizeof msg, "shape overflows 64 bits at dimension %zu (%llu)", i, (unsigned long long)s);
            return bad(f, name, msg);
        }
        numel *= (int64_t)s;
    }
    e->numel = numel;
    return CLT_OK;
}

/* The data offsets: ordered, inside the data buffer, exactly the bytes the
 * shape and dtype need. */
static clt_status parse_offsets(clt_safetensors *f, const char *name, json_t *offs, entry *e)
{
    char msg[256];
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !get_count(json_array_get(offs, 0), &e->begin) ||
        !get_count(json_array_get(offs, 1), &e->end))
        return bad(f, name, "data_offsets is not a pair of non-negative integers");
    if (e->begin > e->end) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu) end before they begin", (unsigned long long)e->begin,
                 (unsigned long long)e->end);
        return bad(f, name, msg);
    }
    if (e->end > f->data_len) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu) run past the end of the %llu-byte data buffer",
                 (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)f->data_len);
        return bad(f, name, msg);
    }
    uint64_t want = (uint64_t)e->numel * e->elem_size;
    if (e->end - e->begin != want) {
        snprintf(msg, sizeof msg, "shape and dtype %s need %llu bytes but data_offsets [%llu, %llu) hold %llu",
                 e->dtype, (unsigned long long)want, (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)(e->end - e->begin));
        return bad(f, name, msg);
    }
    return CLT_OK;
}

static clt_status parse_entry(clt_safetensors *f, const char *name, json_t *v, entry *e)
{
    if (!json_is_object(v)) return bad(f, name, "entry is not an object");
    CLT_TRY(check_fields(f, name, v));
    CLT_TRY(parse_dtype(f, name, json_object_get(v, "dtype"), e));
    CLT_TRY(parse_shape(f, name, json_object_get(v, "shape"), e));
    CLT_TRY(parse_offsets(f, name, json_object_get(v, "data_offsets"), e));
    e->name = strdup(name);
    if (!e->name) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", f->path);
    return CLT_OK;
}

static int by_offset(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors must cover the data buffer exactly once, as the reference
 * implementation requires. */
static clt_status check_tiling(clt_safetensors *f)
{
    char msg[320];
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_offset);
    uint64_t covered = 0;
    const entry *prev = NULL;
    for (int i = 0; i < f->n; i++) {
        const entry *e = &f->entries[i];
        if (e->begin < covered) {
            snprintf(msg, sizeof msg, "data_offsets [%llu, %llu) overlap tensor '%.100s' [%llu, %llu)",
                     (unsigned long long)e->begin, (unsigned long long)e->end, prev->name,
                     (unsigned long long)prev->begin, (unsigned long long)prev->end);
            return bad(f, e->name, msg);
        }
        if (e->begin > covered) {
            snprintf(msg, sizeof msg, "bytes [%llu, %llu) of the data buffer before it belong to no tensor",
                     (unsigned long long)covered, (unsigned long long)e->begin);
            return bad(f, e->name, msg);
        }
        covered = e->end;
        prev = e;
    }
    if (covered != f->data_len) {
        snprintf(msg, sizeof msg, "the data buffer has %llu bytes but the tensors cover %llu (trailing bytes)",
                 (unsigned long long)f->data_len, (unsigned long long)covered);
        return bad(f, NULL, msg);
    }
    return CLT_OK;
}

static clt_status parse_header(clt_safetensors *f, const char *text, size_t len)
{
    char msg[400];
    json_error_t err;
    /* jansson checks the syntax and UTF-8, refuses NUL in names and, with
     * this flag, duplicate names. */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        snprintf(msg, sizeof msg, "header is not valid JSON: %s (line %d, column %d)", err.text, err.line,
                 err.column);
        return bad(f, NULL, msg);
    }
    clt_status s = CLT_OK;
    if (!json_is_object(root)) {
        s = bad(f, NULL, "header is not a JSON object");
        goto done;
    }
    size_t n = json_object_size(root);
    f->entries = calloc(n ? n : 1, sizeof *f->entries);
    if (!f->entries) {
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", f->path);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0)
            s = parse_metadata(f, v);
        else {
            /* Counted before parsing so that a failed entry's memory is freed. */
            s = parse_entry(f, key, v, &f->entries[f->n++]);
        }
        if (s != CLT_OK) goto done;
    }
    s = check_tiling(f);
done:
    json_decref(root);
    return s;
}

clt_status clt_safetensors_open(clt_safetensors **out, const char *path)
{
    CLT_TRY(clt__need("clt_safetensors_open", "out", out));
    *out = NULL;
    CLT_TRY(clt__need("clt_safetensors_open", "path", path));
    clt_safetensors *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(path);
    if (!f || !f->path) {
        free(f);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory opening %s", path);
    }
    struct stat st;
    clt_status s = clt__input_open(path, &f->fd, &st);
    if (s != CLT_OK) {
        clt_safetensors_free(f);
        return s;
    }
    char msg[200];
    char *header = NULL;
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        snprintf(msg, sizeof msg, "file has %llu bytes, fewer than the 8-byte header length",
                 (unsigned long long)size);
        s = bad(f, NULL, msg);
        goto done;
    }
    uint8_t le[8];
    if ((s = read_at(f, le, 8, 0, "the header length")) != CLT_OK) goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | le[i];
    /* Checked against the file before anything of that size is allocated. */
    if (hlen > size - 8) {
        snprintf(msg, sizeof msg, "header length %llu is larger than the %llu bytes that follow it",
                 (unsigned long long)hlen, (unsigned long long)(size - 8));
        s = bad(f, NULL, msg);
        goto done;
    }
    if (hlen > CLT_SAFETENSORS_MAX_HEADER) {
        snprintf(msg, sizeof msg, "header length %llu exceeds the limit of %d bytes", (unsigned long long)hlen,
                 CLT_SAFETENSORS_MAX_HEADER);
        s = bad(f, NULL, msg);
        goto done;
    }
    if (hlen == 0) {
        s = bad(f, NULL, "header is empty");
        goto done;
    }
    header = malloc(hlen);
    if (!header) {
        s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a %llu-byte header", path,
                      (unsigned long long)hlen);
        goto done;
    }
    if ((s = read_at(f, header, hlen, 8, "the header")) != CLT_OK) goto done;
    f->data_start = 8 + hlen;
    f->data_len = size - f->data_start;
    s = parse_header(f, header, hlen);
done:
    free(header);
    if (s != CLT_OK) {
        clt_safetensors_free(f);
        return s;
    }
    *out = f;
    return CLT_OK;
}

int clt_safetensors_num_tensors(const clt_safetensors *f) { return f ? f->n : 0; }

clt_status clt_safetensors_tensor_info(const clt_safetensors *f, int i, clt_safetensors_info *out)
{
    CLT_TRY(clt__need("clt_safetensors_tensor_info", "f", f));
    CLT_TRY(clt__need("clt_safetensors_tensor_info", "out", out));
    if (i < 0 || i >= f->n)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tensor index %d outside 0..%d", f->path, i, f->n - 1);
    const entry *e = &f->entries[i];
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    out->shape = e->shape;
    out->numel = e->numel;
    out->begin = e->begin;
    out->end = e->end;
    return CLT_OK;
}

int clt_safetensors_find(const clt_safetensors *f, const char *name)
{
    if (!f || !name) return -1;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0) return i;
    return -1;
}

int clt_safetensors_num_metadata(const clt_safetensors *f) { return f ? f->n_meta : 0; }

clt_status clt_safetensors_metadata_entry(const clt_safetensors *f, int i, const char **key, const char **value)
{
    CLT_TRY(clt__need("clt_safetensors_metadata_entry", "f", f));
    if (i < 0 || i >= f->n_meta)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: metadata index %d outside 0..%d", f->path, i,
                         f->n_meta - 1);
    if (key) *key = f->meta_keys[i];
    if (value) *value = f->meta_values[i];
    return CLT_OK;
}

const char *clt_safetensors_metadata(const clt_safetensors *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { /* subnormal: normalise the mantissa */
        int shift = 0;
        while (!(man & 0x400)) {
            man <<= 1;
            shift++;
        }
        bits = sign | (uint32_t)(113 - shift) << 23 | (man & 0x3ff) << 13;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* The cltensor dtype a file dtype is read as; widen is 1 for F16, 2 for BF16. */
static clt_status host_dtype(const clt_safetensors *f, const entry *e, clt_dtype *dt, int *widen)
{
    *widen = strcmp(e->dtype, "F16") == 0 ? 1 : strcmp(e->dtype, "BF16") == 0 ? 2 : 0;
    if (*widen || strcmp(e->dtype, "F32") == 0)
        *dt = CLT_FLOAT32;
    else if (strcmp(e->dtype, "I32") == 0)
        *dt = CLT_INT32;
    else
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; cltensor reads F32, F16, BF16 and I32",
                         f->path, e->name, e->dtype);
    if (e->ndim > CLT_MAX_DIMS)
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions; cltensor holds at most %d",
                         f->path, e->name, e->ndim, CLT_MAX_DIMS);
    return CLT_OK;
}

static clt_status find(const clt_safetensors *f, const char *op, const char *name, const entry **out)
{
    CLT_TRY(clt__need(op, "f", f));
    CLT_TRY(clt__need(op, "name", name));
    int i = clt_safetensors_find(f, name);
    if (i < 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: no tensor named '%s'", f->path, name);
    *out = &f->entries[i];
    return CLT_OK;
}

/* Reads the tensor's bytes as float32 (widened) or int32 into a new host buffer. */
static clt_status load_host(const clt_safetensors *f, const entry *e, int widen, void **host)
{
    *host = NULL;
    size_t nbytes = (size_t)(e->end - e->begin);
    /* nbytes lies within the file, so this allocation is bounded by its size. */
    uint8_t *raw = malloc(nbytes ? nbytes : 1);
    if (!raw)
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory reading '%s' (%zu bytes)", f->path, e->name,
                         nbytes);
    char what[160];
    snprintf(what, sizeof what, "tensor '%.100s'", e->name);
    clt_status s = read_at(f, raw, nbytes, f->data_start + e->begin, what);
    if (s != CLT_OK) {
        free(raw);
        return s;
    }
    if (widen) {
        float *wide = malloc((size_t)e->numel * sizeof *wide + 1);
        if (!wide) {
            free(raw);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory widening '%s'", f->path, e->name);
        }
        for (int64_t k = 0; k < e->numel; k++) {
            uint16_t h = (uint16_t)(raw[2 * k] | raw[2 * k + 1] << 8);
            if (widen == 1) {
                wide[k] = half_to_float(h);
            } else {
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&wide[k], &bits, sizeof bits);
            }
        }
        free(raw);
        raw = (uint8_t *)wide;
    }
    *host = raw;
    return CLT_OK;
}

/* A new tensor on dev holding the entry. The device memory comes first, so a
 * tensor the device cannot hold is refused before its bytes are read. */
static clt_status load_device(const clt_safetensors *f, const entry *e, clt_dtype dt, int widen, clt_device dev,
                              clt_tensor **out)
{
    CLT_TRY(clt_empty(out, dev, dt, e->ndim, e->shape));
    void *host;
    clt_status s = load_host(f, e, widen, &host);
    if (s == CLT_OK) {
        s = clt__write_host(*out, host, clt_tensor_nbytes(*out));
        free(host);
    }
    if (s != CLT_OK) {
        clt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

clt_status clt_safetensors_read(const clt_safetensors *f, const char *name, clt_device dev, clt_tensor **out)
{
    const char *op = "clt_safetensors_read";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    const entry *e = NULL;
    clt_dtype dt;
    int widen;
    CLT_TRY(find(f, op, name, &e));
    CLT_TRY(host_dtype(f, e, &dt, &widen));
    return load_device(f, e, dt, widen, dev, out);
}

static void format_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < len) snprintf(buf + used, len - used, ")");
}

clt_status clt_safetensors_read_into(const clt_safetensors *f, const char *name, clt_tensor *dst)
{
    const char *op = "clt_safetensors_read_into";
    CLT_TRY(clt__need(op, "dst", dst));
    const entry *e = NULL;
    clt_dtype dt;
    int widen;
    CLT_TRY(find(f, op, name, &e));
    int64_t shape[CLT_MAX_DIMS];
    int ndim = clt_tensor_shape(dst, shape);
    int same = ndim == e->ndim;
    for (int k = 0; same && k < ndim; k++) same = shape[k] == e->shape[k];
    if (!same) {
        char have[128], want[128];
        format_shape(have, sizeof have, e->ndim, e->shape);
        format_shape(want, sizeof want, ndim, shape);
        return clt__fail(CLT_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", f->path, name, have, want);
    }
    CLT_TRY(host_dtype(f, e, &dt, &widen));
    /* A float16 tensor takes any float entry, read as float32 and rounded (F16 exactly). */
    int narrow = clt_tensor_dtype(dst) == CLT_FLOAT16 && dt == CLT_FLOAT32;
    if (dt != clt_tensor_dtype(dst) && !narrow)
        return clt__fail(CLT_ERR_SHAPE, "%s: tensor '%s' has dtype %s, cannot read it into a %s tensor", f->path,
                         name, e->dtype, clt_dtype_name(clt_tensor_dtype(dst)));
    clt_tensor *tmp;
    CLT_TRY(load_device(f, e, dt, widen, clt_tensor_device(dst), &tmp));
    clt_status s = narrow ? clt__convert_to_half(dst, tmp, 1.0f) : clt_copy_(dst, tmp);
    clt_tensor_release(tmp);
    return s;
}

/* ---- writing ---- */

static clt_status save_header(json_t *root, int n, const char *const *names, clt_tensor *const *tensors, int n_meta,
                              const char *const *meta_keys, const char *const *meta_values, size_t *max_bytes)
{
    const char *op = "clt_safetensors_save";
    if (n_meta > 0) {
        if (!meta_keys || !meta_values)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %d metadata pairs but no keys or values", op, n_meta);
        json_t *meta = json_object();
        if (!meta || json_object_set_new(root, "__metadata__", meta) != 0)
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
        for (int i = 0; i < n_meta; i++) {
            if (!meta_keys[i] || !meta_values[i])
                return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: metadata pair %d is NULL", op, i);
            if (json_object_get(meta, meta_keys[i]))
                return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: metadata key '%s' given twice", op, meta_keys[i]);
            json_t *v = json_string(meta_values[i]);
            if (!v || json_object_set_new(meta, meta_keys[i], v) != 0)
                return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: metadata pair '%s' is not valid UTF-8", op,
                                 meta_keys[i]);
        }
    }
    uint64_t offset = 0;
    *max_bytes = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        if (!name || !name[0] || strcmp(name, "__metadata__") == 0)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tensor %d has no usable name ('%s')", op, i,
                             name ? name : "NULL");
        if (!tensors[i]) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is NULL", op, name);
        if (json_object_get(root, name))
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tensor name '%s' given twice", op, name);
        clt_dtype dt = clt_tensor_dtype(tensors[i]);
        if (dt != CLT_FLOAT32 && dt != CLT_INT32 && dt != CLT_FLOAT16)
            return clt__fail(CLT_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s", op, name, clt_dtype_name(dt));
        int64_t shape[CLT_MAX_DIMS];
        int ndim = clt_tensor_shape(tensors[i], shape);
        size_t nbytes = clt_tensor_nbytes(tensors[i]);
        json_t *e = json_object(), *js = json_array(), *jo = json_array();
        int fail = !e || !js || !jo;
        for (int k = 0; !fail && k < ndim; k++) fail = json_array_append_new(js, json_integer(shape[k])) != 0;
        fail = fail || json_array_append_new(jo, json_integer((json_int_t)offset)) != 0 ||
               json_array_append_new(jo, json_integer((json_int_t)(offset + nbytes))) != 0;
        json_t *jd = fail ? NULL : json_string(dt == CLT_FLOAT32 ? "F32" : dt == CLT_FLOAT16 ? "F16" : "I32");
        fail = fail || !jd || json_object_set_new(e, "dtype", jd) != 0 || json_object_set(e, "shape", js) != 0 ||
               json_object_set(e, "data_offsets", jo) != 0;
        json_decref(js);
        json_decref(jo);
        if (fail) {
            json_decref(e);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
        }
        /* json_object_set_new fails on keys that are not UTF-8. */
        if (json_object_set_new(root, name, e) != 0)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: tensor name %d is not valid UTF-8", op, i);
        offset += nbytes;
        if (nbytes > *max_bytes) *max_bytes = nbytes;
    }
    return CLT_OK;
}

clt_status clt_safetensors_save(const char *path, int n, const char *const *names, clt_tensor *const *tensors,
                                int n_meta, const char *const *meta_keys, const char *const *meta_values)
{
    const char *op = "clt_safetensors_save";
    CLT_TRY(clt__need(op, "path", path));
    if (n < 0 || n_meta < 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %d tensors and %d metadata pairs", op, n, n_meta);
    if (n > 0) {
        CLT_TRY(clt__need(op, "names", names));
        CLT_TRY(clt__need(op, "tensors", tensors));
    }
    json_t *root = json_object();
    if (!root) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    size_t max_bytes = 0;
    clt_status s = save_header(root, n, names, tensors, n_meta, meta_keys, meta_values, &max_bytes);
    char *text = s == CLT_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (s != CLT_OK) return s;
    if (!text) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);

    /* Spaces pad the header so the data starts 8-byte aligned, as the
     * reference implementation writes it. */
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    static const char spaces[8] = "        ";
    void *host = malloc(max_bytes ? max_bytes : 1);
    if (!host) {
        free(text);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory staging %zu bytes", op, max_bytes);
    }
    clt__afile af;
    s = clt__afile_open(&af, path);
    if (s == CLT_OK) s = clt__afile_write(&af, le, 8);
    if (s == CLT_OK) s = clt__afile_write(&af, text, len);
    if (s == CLT_OK) s = clt__afile_write(&af, spaces, padded - len);
    for (int i = 0; s == CLT_OK && i < n; i++) {
        size_t nbytes = clt_tensor_nbytes(tensors[i]);
        s = clt_to_host(tensors[i], host, nbytes);
        if (s == CLT_OK) s = clt__afile_write(&af, host, nbytes);
    }
    if (s == CLT_OK)
        s = clt__afile_commit(&af);
    else
        clt__afile_abort(&af);
    free(host);
    free(text);
    return s;
}
