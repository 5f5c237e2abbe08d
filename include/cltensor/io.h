/* Files: safetensors checkpoints (the format of Hugging Face's safetensors
 * library, which PyTorch's save_file/load_file write and read) and IDX
 * arrays (the format MNIST and Fashion-MNIST ship in).
 *
 * Readers treat every file as hostile: a malformed file fails with
 * CLT_ERR_FORMAT and a message naming the file and what is wrong, and no
 * reader allocates more than the file can hold. A file that cannot be opened
 * or read fails with CLT_ERR_IO naming the path and the system's reason.
 * Writers replace their target atomically: they write a new temporary file
 * (random name, exclusive creation) in the target's directory, flush it to
 * disk and rename it over the target, so the target is always either the
 * old or the new complete file, with the old file's mode. A target that is
 * not a regular file (a symbolic link, FIFO, device or directory) is refused
 * with CLT_ERR_IO naming it and is left as it is. */
#ifndef CLTENSOR_IO_H
#define CLTENSOR_IO_H

#include "export.h"
#include <stddef.h>
#include <stdint.h>
#include "file.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors ----
 * Layout: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *    "__metadata__": {"key": "value", ...}}
 * then the data buffer; offsets count from the buffer's start and tensors are
 * contiguous, row-major, little-endian. */

/* Largest header accepted, as in the reference implementation. */
#define CLT_SAFETENSORS_MAX_HEADER 100000000

/* Writes n tensors (float32 as "F32", int32 as "I32") under the given names,
 * in the given order, and n_meta string pairs as "__metadata__" (n_meta may
 * be 0 with NULL arrays). Reads each tensor from its device (a
 * synchronization point). The header is padded with spaces to a multiple of
 * 8 bytes, as the reference implementation does. float16 tensors are
 * written as F16. Names must be non-empty,
 * distinct, not "__metadata__", and valid UTF-8.
 * Errors: CLT_ERR_INVALID_ARGUMENT for bad names or NULL arguments, CLT_ERR_IO
 * when the file cannot be written (the old file, if any, is left intact and
 * no temporary file remains). */
CLT_API clt_status clt_safetensors_save(const char *path, int n, const char *const *names, clt_tensor *const *tensors,
                                int n_meta, const char *const *meta_keys, const char *const *meta_values);

/* An open safetensors file whose header has been checked. */
typedef struct clt_safetensors clt_safetensors;

/* What the header says about one tensor. Pointers stay valid until the file
 * is closed. */
typedef struct clt_safetensors_info {
    const char *name;
    const char *dtype;      /* as in the file: "F32", "I32", "F16", "BF16", "I64", ... */
    int ndim;
    const int64_t *shape;   /* ndim sizes */
    int64_t numel;
    uint64_t begin, end;    /* byte range in the data buffer */
} clt_safetensors_info;

/* Opens path and validates the whole header: JSON syntax (with duplicate
 * names refused), header length against the file size, each entry's dtype
 * (one of the safetensors dtypes), shape (non-negative integers whose
 * product fits in 64 bits) and offsets (begin <= end, end-begin equal to
 * the shape's byte size), and that the tensors tile the data buffer exactly:
 * no overlap, no gap, nothing past the end, no trailing bytes. Metadata must
 * map strings to strings. Tensors of dtypes cltensor cannot hold still open
 * (they fail only when read). The file stays open until clt_safetensors_free.
 * Errors: CLT_ERR_IO (cannot open or read), CLT_ERR_FORMAT (any problem
 * above; the message names the file, the tensor and the problem). */
CLT_API clt_status clt_safetensors_open(clt_safetensors **out, const char *path);

/* Closes the file and frees the handle; NULL does nothing. */
CLT_API void clt_safetensors_free(clt_safetensors *f);

/* Number of tensors (metadata excluded), in the order of their offsets. */
CLT_API int clt_safetensors_num_tensors(const clt_safetensors *f);
/* The i-th tensor's description (CLT_ERR_INVALID_ARGUMENT when out of range). */
CLT_API clt_status clt_safetensors_tensor_info(const clt_safetensors *f, int i, clt_safetensors_info *out);
/* Index of the tensor called name, or -1. */
CLT_API int clt_safetensors_find(const clt_safetensors *f, const char *name);

/* Number of metadata pairs, the i-th pair, and the value for a key (NULL if
 * absent). Strings stay valid until the file is closed. */
CLT_API int clt_safetensors_num_metadata(const clt_safetensors *f);
CLT_API clt_status clt_safetensors_metadata_entry(const clt_safetensors *f, int i, const char **key, const char **value);
CLT_API const char *clt_safetensors_metadata(const clt_safetensors *f, const char *key);

/* Reads the tensor called name into a new tensor on dev: F32 and I32 as they
 * are; F16 and BF16 widened exactly to float32.
 * Errors: CLT_ERR_INVALID_ARGUMENT (no such tensor; the message names it and
 * the file), CLT_ERR_UNSUPPORTED (another dtype, named), CLT_ERR_FORMAT (the
 * file shrank after opening), CLT_ERR_IO (it cannot be read), and device
 * errors from creating the tensor (CLT_ERR_OUT_OF_MEMORY when the device or
 * its cap cannot hold it), which come before any of the tensor's bytes are
 * read. */
CLT_API clt_status clt_safetensors_read(const clt_safetensors *f, const char *name, clt_device dev, clt_tensor **out);

/* Reads the tensor called name into dst, which must have the same shape and
 * a matching dtype (float32 or float16 for F32, F16 and BF16, rounded to
 * nearest into float16; int32 for I32); the copy
 * runs on dst's device without waiting.
 * Errors: as clt_safetensors_read, plus CLT_ERR_SHAPE naming both shapes or
 * both dtypes when they differ. */
CLT_API clt_status clt_safetensors_read_into(const clt_safetensors *f, const char *name, clt_tensor *dst);

/* ---- IDX ----
 * Layout: bytes 0 0 T D (T the element type, D the number of dimensions),
 * D big-endian uint32 sizes, then the elements, big-endian. Every element
 * type is read: 0x08 unsigned bytes, 0x09 signed bytes, 0x0B int16, 0x0C
 * int32, 0x0D float32, 0x0E float64 (MNIST labels are (N), images
 * (N, rows, cols) of bytes). Files may be gzip-compressed or raw; both are
 * read transparently. */

#define CLT_IDX_MAX_DIMS 8

#define CLT_IDX_UBYTE 0x08
#define CLT_IDX_BYTE 0x09
#define CLT_IDX_SHORT 0x0B
#define CLT_IDX_INT 0x0C
#define CLT_IDX_FLOAT 0x0D
#define CLT_IDX_DOUBLE 0x0E

typedef struct clt_idx {
    int ndim;
    int64_t dims[CLT_IDX_MAX_DIMS];
    size_t nbytes;   /* product of dims times elem_size */
    uint8_t *data;   /* the elements in host byte order, owned; freed by clt_idx_free */
    int type;        /* CLT_IDX_UBYTE ... CLT_IDX_DOUBLE */
    int elem_size;   /* bytes per element: 1, 1, 2, 4, 4, 8 */
} clt_idx;

/* Reads a whole IDX file. Validates the magic, the element type, the number
 * of dimensions (1..CLT_IDX_MAX_DIMS), their byte size (overflow in 64
 * bits), that the data is exactly that long (no truncation, no trailing
 * bytes) and, for gzip, the stream's integrity. Memory grows with the data
 * actually read, never to a size the header merely claims.
 * Errors: CLT_ERR_IO (cannot open or read), CLT_ERR_FORMAT (malformed,
 * naming the file and the problem, an unknown element type among them). On
 * failure *out is zeroed and holds nothing. */
CLT_API clt_status clt_idx_read(const char *path, clt_idx *out);

/* Element i of a read file as a double (any element type). */
CLT_API double clt_idx_value(const clt_idx *idx, int64_t i);

/* Frees the data and zeroes the struct; NULL does nothing. */
CLT_API void clt_idx_free(clt_idx *idx);

/* Writes an IDX file of unsigned bytes, gzip-compressed when gzip is
 * non-zero, atomically. Each dimension must be in 0..UINT32_MAX.
 * Errors: CLT_ERR_INVALID_ARGUMENT, CLT_ERR_IO. */
CLT_API clt_status clt_idx_write(const char *path, int ndim, const int64_t *dims, const uint8_t *data, int gzip);

/* ---- any file ---- */


/* Reads the whole regular file at path into a new buffer the way every
 * cltensor reader opens its inputs (writing is file.h's, clt_file_write): without blocking, so a FIFO, a
 * directory or a device there is refused at once ("PATH is a FIFO, not a
 * regular file") instead of waiting for a writer or reading forever;
 * symbolic links are followed. *data holds *len bytes and a NUL byte after
 * them; release it with free(). Errors: CLT_ERR_INVALID_ARGUMENT (a NULL
 * argument), CLT_ERR_IO naming the path and the reason,
 * CLT_ERR_OUT_OF_MEMORY; on failure *data is NULL and *len 0. */
CLT_API clt_status clt_file_read(const char *path, char **data, size_t *len);


/* ---- text for XML ---- */

/* Copies in to out as text that an XML (SVG) element or quoted attribute
 * value can hold, as the library's memory SVG (clt_memory_record_write_svg)
 * and `clt timeline` write names: & < > " ' become &amp; &lt; &gt; &quot;
 * &apos;; well-formed UTF-8 is copied as it is, except control characters
 * (U+0001..U+001F other than tab, line feed and carriage return, and
 * U+007F..U+009F) and U+FFFE and U+FFFF, which XML 1.0 forbids or
 * discourages, each written as U+FFFD (EF BF BD); and each maximal
 * ill-formed UTF-8 subpart (a stray or truncated byte sequence, an overlong
 * form, a surrogate, a code point above U+10FFFF) is written as one U+FFFD,
 * as Unicode recommends. A NULL in is copied as "". Writes at most
 * outlen - 1 bytes and a terminating NUL, whole characters and entities only
 * (what does not fit is left out, from the first unit that does not); a
 * NULL out or an outlen of 0 writes nothing. Returns the length of the whole
 * escaped text without the NUL, as snprintf does: a result of outlen or more
 * means out was truncated. */
CLT_API size_t clt_xml_escape(const char *in, char *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif
