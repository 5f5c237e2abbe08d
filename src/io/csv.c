/* CSV as users have it (csv.h): quoted fields, CRLF, a byte order mark,
 * the delimiter and a header row detected. */
#include "csv.h"

#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/error.h"

typedef struct parser {
    const char *path;
    const uint8_t *p, *end;
    int64_t line;   /* the line p is on */
    char delim;
    char *text;
    size_t text_len, text_cap;
    int64_t *cells;
    int64_t ncells, cells_cap;
    int64_t *lines;
    int64_t nrows, rows_cap;
} parser;

static int is_blank(int c) { return c == ' ' || c == '\t'; }

static clt_status oom(const parser *ps) { return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", ps->path); }

static clt_status put_char(parser *ps, char c)
{
    if (ps->text_len == ps->text_cap) {
        size_t cap = ps->text_cap ? ps->text_cap * 2 : 4096;
        char *t = cap > ps->text_cap ? realloc(ps->text, cap) : NULL;
        if (!t) return oom(ps);
        ps->text = t;
        ps->text_cap = cap;
    }
    ps->text[ps->text_len++] = c;
    return CLT_OK;
}

static clt_status begin_cell(parser *ps)
{
    if (ps->ncells == ps->cells_cap) {
        int64_t cap;
        if (clt__mul_i64(ps->cells_cap ? ps->cells_cap : 512, 2, &cap) != 0 || (uint64_t)cap > SIZE_MAX / 8) return oom(ps);
        int64_t *c = realloc(ps->cells, (size_t)cap * sizeof *c);
        if (!c) return oom(ps);
        ps->cells = c;
        ps->cells_cap = cap;
    }
    ps->cells[ps->ncells++] = (int64_t)ps->text_len;
    return CLT_OK;
}

static clt_status add_row(parser *ps, int64_t line)
{
    if (ps->nrows == ps->rows_cap) {
        int64_t cap;
        if (clt__mul_i64(ps->rows_cap ? ps->rows_cap : 256, 2, &cap) != 0 || (uint64_t)cap > SIZE_MAX / 8) return oom(ps);
        int64_t *l = realloc(ps->lines, (size_t)cap * sizeof *l);
        if (!l) return oom(ps);
        ps->lines = l;
        ps->rows_cap = cap;
    }
    ps->lines[ps->nrows++] = line;
    return CLT_OK;
}

/* At a line end (LF, CR or CRLF)? Consumes it and counts the line. */
static int eat_eol(parser *ps)
{
    if (ps->p < ps->end && *ps->p == '\r') {
        ps->p++;
        if (ps->p < ps->end && *ps->p == '\n') ps->p++;
        ps->line++;
        return 1;
    }
    if (ps->p < ps->end && *ps->p == '\n') {
        ps->p++;
        ps->line++;
        return 1;
    }
    return 0;
}

static int at_eol(const parser *ps) { return ps->p >= ps->end || *ps->p == '\n' || *ps->p == '\r'; }

/* One field from p: stores it and leaves p at the delimiter or line end. */
static clt_status parse_field(parser *ps)
{
    CLT_TRY(begin_cell(ps));
    int64_t start_line = ps->line;
    while (ps->p < ps->end && is_blank(*ps->p) && *ps->p != ps->delim) ps->p++;
    if (ps->p < ps->end && *ps->p == '"') {
        ps->p++;
        for (;;) {
            if (ps->p >= ps->end)
                return clt__fail(CLT_ERR_FORMAT, "%s: line %lld: a quoted field is not closed before the end of the file",
                                 ps->path, (long long)start_line);
            char c = (char)*ps->p;
            if (c == '"') {
                if (ps->p + 1 < ps->end && ps->p[1] == '"') {
                    CLT_TRY(put_char(ps, '"'));
                    ps->p += 2;
                    continue;
                }
                ps->p++;
                break;
            }
            if (c == '\0') return clt__fail(CLT_ERR_FORMAT, "%s: line %lld: a NUL byte", ps->path, (long long)ps->line);
            if (c == '\r' || c == '\n') {
                /* A line break inside quotes is part of the field (as "\n"). */
                eat_eol(ps);
                CLT_TRY(put_char(ps, '\n'));
                continue;
            }
            CLT_TRY(put_char(ps, c));
            ps->p++;
        }
        while (ps->p < ps->end && is_blank(*ps->p) && *ps->p != ps->delim) ps->p++;
        if (!at_eol(ps) && *ps->p != ps->delim && !(ps->delim == ' ' && is_blank(*ps->p)))
            return clt__fail(CLT_ERR_FORMAT, "%s: line %lld: text after the closing quote of a field", ps->path,
                             (long long)ps->line);
        return put_char(ps, '\0');
    }
    size_t field_start = ps->text_len, last_solid = ps->text_len;
    while (!at_eol(ps)) {
        char c = (char)*ps->p;
        if (c == ps->delim || (ps->delim == ' ' && is_blank(c))) break;
        if (c == '\0') return clt__fail(CLT_ERR_FORMAT, "%s: line %lld: a NUL byte", ps->path, (long long)ps->line);
        CLT_TRY(put_char(ps, c));
        if (!is_blank(c)) last_solid = ps->text_len;
        ps->p++;
    }
    (void)field_start;
    ps->text_len = last_solid; /* trailing blanks dropped */
    return put_char(ps, '\0');
}

/* One record: fields until the line end; returns its field count in *n. */
static clt_status parse_record(parser *ps, int64_t *n)
{
    *n = 0;
    if (ps->delim == ' ')
        while (ps->p < ps->end && is_blank(*ps->p)) ps->p++;
    for (;;) {
        CLT_TRY(parse_field(ps));
        (*n)++;
        if (ps->delim == ' ') {
            while (ps->p < ps->end && is_blank(*ps->p)) ps->p++;
            if (at_eol(ps)) break;
            continue;
        }
        if (at_eol(ps)) break;
        ps->p++; /* the delimiter */
    }
    eat_eol(ps);
    return CLT_OK;
}

static char detect_delimiter(const uint8_t *p, const uint8_t *end)
{
    int64_t comma = 0, semi = 0, tab = 0, blank = 0;
    int quoted = 0;
    for (; p < end; p++) {
        if (*p == '"') quoted = !quoted;
        if (quoted) continue;
        if (*p == '\n' || *p == '\r') break;
        comma += *p == ',';
        semi += *p == ';';
        tab += *p == '\t';
        blank += *p == ' ';
    }
    if (comma == 0 && semi == 0 && tab == 0) return blank ? ' ' : ',';
    if (comma >= semi && comma >= tab) return ',';
    return semi >= tab ? ';' : '\t';
}

int clt__csv_number(const char *s, double *out)
{
    while (is_blank(*s)) s++;
    if (!*s) return 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s) return 0;
    while (is_blank(*end)) end++;
    if (*end) return 0;
    *out = v;
    return 1;
}

const char *clt__csv_field(const clt__csv *c, int64_t row, int64_t col)
{
    int64_t base = c->has_header ? c->ncols : 0;
    int64_t i = row < 0 ? col : base + row * c->ncols + col;
    return c->text + c->cells[i];
}

void clt__csv_free(clt__csv *c)
{
    if (!c) return;
    free(c->text);
    free(c->cells);
    free(c->lines);
    memset(c, 0, sizeof *c);
}

clt_status clt__csv_parse(clt__csv *out, const char *path, const uint8_t *data, size_t len, char delimiter,
                          int header)
{
    memset(out, 0, sizeof *out);
    parser ps = {.path = path, .p = data, .end = data + len, .line = 1};
    if (len >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF) ps.p += 3;
    if (delimiter != 0 && delimiter != ',' && delimiter != ';' && delimiter != '\t' && delimiter != ' ')
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: delimiter 0x%02x: a CSV delimiter is ',', ';', tab or ' '", path,
                         (unsigned char)delimiter);
    /* The first non-empty line decides the delimiter. */
    const uint8_t *q = ps.p;
    while (q < ps.end && (*q == '\n' || *q == '\r')) q++;
    ps.delim = delimiter ? delimiter : detect_delimiter(q, ps.end);
    clt_status s = CLT_OK;
    int64_t ncols = -1, first_line = 0;
    while (s == CLT_OK && ps.p < ps.end) {
        if (eat_eol(&ps)) continue; /* an empty line */
        const uint8_t *rest = ps.p;
        while (rest < ps.end && is_blank(*rest)) rest++;
        if (rest == ps.end || *rest == '\n' || *rest == '\r') { /* a line of blanks */
            ps.p = rest;
            continue;
        }
        int64_t line = ps.line, n;
        s = parse_record(&ps, &n);
        if (s != CLT_OK) break;
        if (ncols < 0) {
            ncols = n;
            first_line = line;
        } else if (n != ncols) {
            s = clt__fail(CLT_ERR_FORMAT, "%s: line %lld has %lld fields, line %lld has %lld (a ragged row)", path,
                          (long long)line, (long long)n, (long long)first_line, (long long)ncols);
            break;
        }
        s = add_row(&ps, line);
    }
    if (s == CLT_OK && ps.nrows == 0) s = clt__fail(CLT_ERR_FORMAT, "%s: an empty file (no rows of data)", path);
    if (s != CLT_OK) {
        free(ps.text);
        free(ps.cells);
        free(ps.lines);
        return s;
    }
    out->ncols = ncols;
    out->delimiter = ps.delim;
    out->text = ps.text;
    out->cells = ps.cells;
    out->lines = ps.lines;
    out->nrows = ps.nrows;
    int has = header;
    if (has < 0) {
        /* One row of names only: a header (and then no data). */
        has = ps.nrows == 1;
        for (int64_t j = 0; j < ncols && has; j++) {
            double v;
            if (clt__csv_number(ps.text + ps.cells[j], &v)) has = 0;
        }
        for (int64_t j = 0; j < ncols && ps.nrows >= 2; j++) {
            double v;
            if (!clt__csv_number(ps.text + ps.cells[j], &v) && clt__csv_number(ps.text + ps.cells[ncols + j], &v))
                has = 1;
        }
    }
    if (has) {
        out->has_header = 1;
        out->header_line = ps.lines[0];
        out->nrows--;
        memmove(out->lines, out->lines + 1, (size_t)out->nrows * sizeof *out->lines);
        if (out->nrows == 0) {
            clt__csv_free(out);
            return clt__fail(CLT_ERR_FORMAT, "%s: an empty file (a header row and no rows of data)", path);
        }
    }
    return CLT_OK;
}
