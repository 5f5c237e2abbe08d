/* Internal: CSV text as users have it, parsed into fields (csv.c). */
#ifndef CLT_IO_CSV_H
#define CLT_IO_CSV_H

#include <stddef.h>
#include <stdint.h>
#include "cltensor/status.h"

typedef struct clt__csv {
    int64_t nrows, ncols; /* data rows (the header excluded) and fields per row */
    char delimiter;       /* ',', ';', '\t' or ' ' (runs of blanks) */
    int has_header;
    int64_t header_line;  /* the header's line number (1-based), when has_header */
    char *text;           /* every field unquoted, each NUL-terminated */
    int64_t *cells;       /* offsets into text: the header's ncols fields (when has_header), then nrows * ncols */
    int64_t *lines;       /* the line number (1-based) of each data row */
} clt__csv;

/* Parses len bytes (data[len] must be readable and is ignored) named path in
 * messages. A UTF-8 byte order mark is skipped; lines end in LF, CRLF or
 * CR; empty lines are skipped; a field in double quotes may hold the
 * delimiter, line breaks and doubled quotes (""); blanks around an unquoted
 * field are dropped. delimiter 0 detects it from the first line: the most
 * frequent of ',', ';' and tab outside quotes, else blanks when it has any,
 * else ','. header -1 detects it: the first row is a header when one of its
 * fields is not a number while the same field of the second row is.
 * Errors: CLT_ERR_FORMAT naming path and line: an empty file (no rows), a
 * row with another number of fields than the first (both counts named), an
 * unterminated quote, text after a closing quote, a NUL byte. */
clt_status clt__csv_parse(clt__csv *out, const char *path, const uint8_t *data, size_t len, char delimiter,
                          int header);

/* Field col (0-based) of data row row, or of the header when row is -1. */
const char *clt__csv_field(const clt__csv *c, int64_t row, int64_t col);

/* Whether s is a whole number as strtod reads it (blanks around allowed);
 * stores it. NaN and infinities count as numbers here. */
int clt__csv_number(const char *s, double *out);

void clt__csv_free(clt__csv *c);

#endif
