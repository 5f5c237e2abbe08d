/* clt timeline: draws a trace written by CLT_TRACE (Chrome trace-event
 * JSON) as an SVG timeline, one row per device and one for the host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cltensor.h>
#include <jansson.h>

#include "commands.h"
#include "core/file.h"

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

static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static int usage(FILE *out, int rc)
{
    fprintf(out, "usage: clt timeline TRACE.json OUT.svg\n\n"
                 "Draws a trace recorded with CLT_TRACE=TRACE.json (or clt train --trace) as an SVG\n"
                 "timeline: kernels blue, copies green, synchronization points red, other host\n"
                 "waits orange. Hover a box for its name and duration.\n");
    return rc;
}

int clt_cmd_timeline(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return usage(stdout, 0);
    if (argc != 3) return usage(stderr, 2);
    json_error_t jerr;
    json_t *root = json_load_file(argv[1], 0, &jerr);
    if (!root) {
        fprintf(stderr, "clt timeline: %s:%d: %s\n", argv[1], jerr.line, jerr.text);
        return 1;
    }
    json_t *events = json_is_object(root) ? json_object_get(root, "traceEvents") : root;
    if (!json_is_array(events)) {
        fprintf(stderr, "clt timeline: %s: no traceEvents array\n", argv[1]);
        json_decref(root);
        return 1;
    }
    size_t n = json_array_size(events);
    span *spans = calloc(n ? n : 1, sizeof *spans);
    const char *rows[64] = {0}; /* by tid; events of other tids are skipped */
    int nrows = 0, nspans = 0;
    double t0 = 0, t1 = 0;
    int rc = spans ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *e = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        json_int_t tid = json_integer_value(json_object_get(e, "tid"));
        if (!ph || tid < 0 || tid >= 64) continue;
        if (strcmp(ph, "M") == 0) {
            json_t *args = json_object_get(e, "args");
            const char *name = json_string_value(json_object_get(args, "name"));
            const char *what = json_string_value(json_object_get(e, "name"));
            if (name && what && strcmp(what, "thread_name") == 0) {
                rows[tid] = name;
                if (tid + 1 > nrows) nrows = (int)tid + 1;
            }
            continue;
        }
        if (strcmp(ph, "X") != 0 && strcmp(ph, "i") != 0) continue;
        span *s = &spans[nspans++];
        s->ts = json_number_value(json_object_get(e, "ts"));
        s->dur = json_number_value(json_object_get(e, "dur"));
        s->row = (int)tid;
        s->name = json_string_value(json_object_get(e, "name"));
        s->cat = json_string_value(json_object_get(e, "cat"));
        if (tid + 1 > nrows) nrows = (int)tid + 1;
        if (nspans == 1 || s->ts < t0) t0 = s->ts;
        if (nspans == 1 || s->ts + s->dur > t1) t1 = s->ts + s->dur;
    }
    if (rc == 0 && nspans == 0) {
        fprintf(stderr, "clt timeline: %s: no commands recorded\n", argv[1]);
        rc = 1;
    }
    /* Drawn in memory, then written by the library's safe writer
     * (src/core/file.h): a link, FIFO or device at OUT.svg is refused. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = NULL;
    if (rc == 0) {
        f = open_memstream(&text, &text_len);
        if (!f) {
            fprintf(stderr, "clt timeline: out of memory drawing %s\n", argv[2]);
            rc = 1;
        }
    }
    if (rc == 0) {
        double span_us = t1 > t0 ? t1 - t0 : 1, plot = WIDTH - LEFT - 20;
        int height = TOP + nrows * ROW + 40;
        fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, height);
        for (int r = 0; r < nrows; r++) {
            fprintf(f, "<text x=\"8\" y=\"%d\">", TOP + r * ROW + ROW / 2 + 4);
            put_escaped(f, rows[r] ? rows[r] : "?");
            fprintf(f, "</text>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", LEFT,
                    TOP + (r + 1) * ROW, WIDTH - 20, TOP + (r + 1) * ROW);
        }
        for (int k = 0; k <= 10; k++) {
            double x = LEFT + plot * k / 10;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, TOP, x,
                    TOP + nrows * ROW);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.2f ms</text>\n", x, TOP + nrows * ROW + 16,
                    span_us * k / 10 / 1000.0);
        }
        for (int i = 0; i < nspans; i++) {
            const span *s = &spans[i];
            double x = LEFT + plot * (s->ts - t0) / span_us, w = plot * s->dur / span_us;
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x,
                    TOP + s->row * ROW + 4, w < 0.5 ? 0.5 : w, ROW - 8, color_of(s->cat));
            put_escaped(f, s->name);
            fprintf(f, " (%.1f us)</title></rect>\n", s->dur);
        }
        fprintf(f, "<text x=\"%d\" y=\"18\">kernels blue, copies green, synchronization points red, other host waits "
                   "orange; %d commands over %.2f ms</text>\n</svg>\n", LEFT, nspans, span_us / 1000.0);
        int bad = ferror(f);
        bad |= fclose(f) != 0;
        if (bad) {
            fprintf(stderr, "clt timeline: out of memory drawing %s\n", argv[2]);
            rc = 1;
        } else if (clt__file_write(argv[2], text, text_len) != CLT_OK) {
            fprintf(stderr, "clt timeline: %s\n", clt_last_error());
            rc = 1;
        }
        free(text);
    }
    free(spans);
    json_decref(root);
    return rc;
}
