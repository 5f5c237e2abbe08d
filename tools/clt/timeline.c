/* clt timeline: draws a trace written by CLT_TRACE (Chrome trace-event
 * JSON) as an SVG timeline, one row per device and one for the host. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cltensor.h>
#include <jansson.h>

#include "commands.h"

#define WIDTH 1200
#define LEFT 90
#define ROW 34
#define TOP 30

typedef struct span {
    double ts, dur;
    int row;
    const char *name, *cat;
} span;

static const char *color_of(const char *cat)
{
    if (!cat) return "#999";
    if (strcmp(cat, "kernel") == 0) return "#4c78a8";
    if (strcmp(cat, "copy") == 0) return "#54a24b";
    if (strcmp(cat, "sync") == 0) return "#e45756";
    return "#f58518";
}

/* Writes s through the library's escaper (clt_xml_escape, what the memory
 * SVG's names go through too); 0, or 1 out of memory. */
static int put_escaped(FILE *f, const char *s)
{
    char small[512], *buf = small;
    size_t n = clt_xml_escape(s, small, sizeof small);
    if (n >= sizeof small) {
        buf = n < SIZE_MAX ? malloc(n + 1) : NULL;
        if (!buf) return 1;
        clt_xml_escape(s, buf, n + 1);
    }
    fwrite(buf, 1, n, f);
    if (buf != small) free(buf);
    return 0;
}

static int usage(FILE *out, int rc)
{
    fprintf(out, "usage: clt timeline TRACE.json OUT.svg\n\n"
                 "Draws a trace recorded with CLT_TRACE=TRACE.json (or clt train --trace) as an SVG\n"
                 "timeline: kernels blue, copies green, synchronization points red, other host\n"
                 "waits orange. Hover a box for its name and duration.\n");
    return rc;
}

/* The spans of a trace's events, by row (tid): complete ("X") and instant
 * ("i") events become spans, thread_name metadata ("M") names rows; events of
 * tids outside 0..63 are skipped. */
typedef struct timeline {
    span *spans;
    int nspans;
    const char *rows[64]; /* names, by tid (pointers into the JSON) */
    int nrows;
    double t0, t1; /* the first start and the last end, in microseconds */
} timeline;

/* Names row tid after a thread_name metadata event. */
static void add_row_name(timeline *tl, json_t *e, json_int_t tid)
{
    json_t *args = json_object_get(e, "args");
    const char *name = json_string_value(json_object_get(args, "name"));
    const char *what = json_string_value(json_object_get(e, "name"));
    if (!name || !what || strcmp(what, "thread_name") != 0) return;
    tl->rows[tid] = name;
    if (tid + 1 > tl->nrows) tl->nrows = (int)tid + 1;
}

/* Adds event e as a span of row tid and widens the time range. */
static void add_span(timeline *tl, json_t *e, json_int_t tid)
{
    span *s = &tl->spans[tl->nspans++];
    s->ts = json_number_value(json_object_get(e, "ts"));
    s->dur = json_number_value(json_object_get(e, "dur"));
    s->row = (int)tid;
    s->name = json_string_value(json_object_get(e, "name"));
    s->cat = json_string_value(json_object_get(e, "cat"));
    if (tid + 1 > tl->nrows) tl->nrows = (int)tid + 1;
    if (tl->nspans == 1 || s->ts < tl->t0) tl->t0 = s->ts;
    if (tl->nspans == 1 || s->ts + s->dur > tl->t1) tl->t1 = s->ts + s->dur;
}

/* Reads the events array into tl (tl->spans allocated); 0, or 1 with a
 * message naming path. */
static int read_events(json_t *events, const char *path, timeline *tl)
{
    size_t n = json_array_size(events);
    tl->spans = calloc(n ? n : 1, sizeof *tl->spans);
    if (!tl->spans) {
        fprintf(stderr, "clt timeline: out of memory reading %s\n", path);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        json_int_t tid = json_integer_value(json_object_get(e, "tid"));
        if (!ph || tid < 0 || tid >= 64) continue;
        if (strcmp(ph, "M") == 0) add_row_name(tl, e, tid);
        else if (strcmp(ph, "X") == 0 || strcmp(ph, "i") == 0) add_span(tl, e, tid);
    }
    if (tl->nspans == 0) {
        fprintf(stderr, "clt timeline: %s: no commands recorded\n", path);
        return 1;
    }
    return 0;
}

/* The row labels and lines, and the time axis in tenths of the range; 0,
 * or 1 out of memory. */
static int draw_axes(FILE *f, const timeline *tl, double span_us, double plot)
{
    int bad = 0;
    for (int r = 0; r < tl->nrows; r++) {
        fprintf(f, "<text x=\"8\" y=\"%d\">", TOP + r * ROW + ROW / 2 + 4);
        bad |= put_escaped(f, tl->rows[r] ? tl->rows[r] : "?");
        fprintf(f, "</text>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", LEFT,
                TOP + (r + 1) * ROW, WIDTH - 20, TOP + (r + 1) * ROW);
    }
    for (int k = 0; k <= 10; k++) {
        double x = LEFT + plot * k / 10;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, TOP, x,
                TOP + tl->nrows * ROW);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.2f ms</text>\n", x,
                TOP + tl->nrows * ROW + 16, span_us * k / 10 / 1000.0);
    }
    return bad;
}

/* The whole SVG: axes, one box per span with its name and duration as a
 * tooltip, and the legend; 0, or 1 out of memory. */
static int draw(FILE *f, const timeline *tl)
{
    double span_us = tl->t1 > tl->t0 ? tl->t1 - tl->t0 : 1, plot = WIDTH - LEFT - 20;
    int height = TOP + tl->nrows * ROW + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, height);
    int bad = draw_axes(f, tl, span_us, plot);
    for (int i = 0; i < tl->nspans; i++) {
        const span *s = &tl->spans[i];
        double x = LEFT + plot * (s->ts - tl->t0) / span_us, w = plot * s->dur / span_us;
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x,
                TOP + s->row * ROW + 4, w < 0.5 ? 0.5 : w, ROW - 8, color_of(s->cat));
        bad |= put_escaped(f, s->name);
        fprintf(f, " (%.1f us)</title></rect>\n", s->dur);
    }
    fprintf(f, "<text x=\"%d\" y=\"18\">kernels blue, copies green, synchronization points red, other host waits "
               "orange; %d commands over %.2f ms</text>\n</svg>\n", LEFT, tl->nspans, span_us / 1000.0);
    return bad;
}

/* Draws in memory, then writes through the library's safe writer
 * (clt_file_write): a link, FIFO or device at path is refused. 0 or 1. */
static int write_svg(const timeline *tl, const char *path)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    if (!f) {
        fprintf(stderr, "clt timeline: out of memory drawing %s\n", path);
        return 1;
    }
    int bad = draw(f, tl);
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    int rc = 0;
    if (bad) {
        fprintf(stderr, "clt timeline: out of memory drawing %s\n", path);
        rc = 1;
    } else if (clt_file_write(path, text, text_len) != CLT_OK) {
        fprintf(stderr, "clt timeline: %s\n", clt_last_error());
        rc = 1;
    }
    free(text);
    return rc;
}

int clt_cmd_timeline(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return usage(stdout, 0);
    if (argc != 3) return usage(stderr, 2);
    /* Read as every input is (clt_file_read: a FIFO or device there is
     * refused at once; jansson's json_load_file would block on a FIFO). */
    char *text = NULL;
    size_t text_len = 0;
    if (clt_file_read(argv[1], &text, &text_len) != CLT_OK) {
        fprintf(stderr, "clt timeline: %s\n", clt_last_error());
        return 1;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, text_len, 0, &jerr);
    free(text);
    if (!root) {
        fprintf(stderr, "clt timeline: %s:%d: %s\n", argv[1], jerr.line, jerr.text);
        return 1;
    }
    json_t *events = json_is_object(root) ? json_object_get(root, "traceEvents") : root;
    int rc = 1;
    timeline tl = {0};
    if (!json_is_array(events)) fprintf(stderr, "clt timeline: %s: no traceEvents array\n", argv[1]);
    else if (read_events(events, argv[1], &tl) == 0) rc = write_svg(&tl, argv[2]);
    free(tl.spans);
    json_decref(root);
    return rc;
}
