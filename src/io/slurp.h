/* Internal: a whole input file in memory, for the readers that parse text
 * or containers (CSV, .npy, .npz). */
#ifndef CLT_IO_SLURP_H
#define CLT_IO_SLURP_H

#include <stddef.h>
#include <stdint.h>
#include "cltensor/status.h"

/* Reads the regular file at path (opened by clt__input_open, core/input.h:
 * without blocking, so a FIFO or device there is refused at once, "PATH is
 * a FIFO, not a regular file") into a new buffer, *len bytes plus a NUL byte
 * the caller may rely on. With gunzip, a gzip-compressed file is
 * decompressed (a raw one read as it is). Memory grows with the data read.
 * Errors: CLT_ERR_IO naming path and the reason, CLT_ERR_FORMAT for corrupt
 * gzip data, CLT_ERR_OUT_OF_MEMORY. On failure *data is NULL. */
clt_status clt__slurp(const char *path, int gunzip, uint8_t **data, size_t *len);

#endif
