/* clt_memory_record_write_svg: a memory record drawn as a stacked-area
 * chart, written through the one file writer (src/core/file.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../core/file.h"
#include "../memory/record.h"
#include "cltensor/io.h"
#include "cltensor/memory.h"

#define W 960
#define H 540
#define LEFT 70
#define RIGHT 200
#define TOP 56
#define BOTTOM 140
#define MAX_COLUMNS 600
#define MIB (1024.0 * 1024.0)

/* Bottom up: the plateaus that last, then what comes and goes. */
static const clt_memory_category order[CLT_MEM_CATEGORY_COUNT] = {CLT_MEM_WEIGHTS, CLT_MEM_OPTIMIZER,
                                                                 CLT_MEM_GRADIENTS, CLT_MEM_ACTIVATIONS, CLT_MEM_OTHER};
static const char *colors[CLT_MEM_CATEGORY_COUNT] = {"#4c72b0", "#8172b2", "#55a868", "#dd8452", "#c0c0c0"};

typedef struct chart {
    FILE *f;
    const clt_memory_record *r;
    int64_t n, stride; /* samples, and samples per drawn column */
    int columns;
    double ymax, pw, ph;
    int oom; /* a name could not be escaped */
} chart;

/* Writes s through clt_xml_escape (a name as the SVG can hold it); a name
 * too long for the stack is escaped into the heap, and c->oom set when
 * that fails. */
static void put_escaped(chart *c, const char *s)
{
    char small[512], *buf = small;
    size_t n = clt_xml_escape(s, small, sizeof small);
    if (n >= sizeof small) {
        buf = n < SIZE_MAX ? malloc(n + 1) : NULL;
        if (!buf) {
            c->oom = 1;
            return;
        }
        clt_xml_escape(s, buf, n + 1);
    }
    fwrite(buf, 1, n, c->f);
    if (buf != small) free(buf);
}

static double px(const chart *c, double column) { return LEFT + c->pw * column / c->columns; }
static double py(const chart *c, double bytes) { return TOP + c->ph - c->ph * bytes / c->ymax; }

/* The sample drawn for a column: the one with the most allocated in it. */
static clt_memory_sample column_sample(const chart *c, int col)
{
    clt_memory_sample best, s;
    int64_t lo = (int64_t)col * c->stride, hi = lo + c->stride < c->n ? lo + c->stride : c->n;
    clt_memory_record_sample(c->r, lo, &best);
    for (int64_t i = lo + 1; i < hi; i++)
        if (clt_memory_record_sample(c->r, i, &s) == CLT_OK && s.allocated > best.allocated) best = s;
    return best;
}

static double stacked(const clt_memory_sample *s, int upto)
{
    double v = 0;
    for (int k = 0; k <= upto; k++) v += (double)s->category[order[k]];
    return v;
}

/* One category's band between the sum of those below and its own top. */
static void draw_band(const chart *c, int k)
{
    fprintf(c->f, "<polygon fill=\"%s\" stroke=\"none\" points=\"", colors[k]);
    for (int col = 0; col < c->columns; col++) {
        clt_memory_sample s = column_sample(c, col);
        double y = py(c, stacked(&s, k));
        fprintf(c->f, "%.1f,%.1f %.1f,%.1f ", px(c, col), y, px(c, col + 1), y);
    }
    for (int col = c->columns - 1; col >= 0; col--) {
        clt_memory_sample s = column_sample(c, col);
        double y = py(c, k ? stacked(&s, k - 1) : 0);
        fprintf(c->f, "%.1f,%.1f %.1f,%.1f ", px(c, col + 1), y, px(c, col), y);
    }
    fputs("\"/>\n", c->f);
}

static void draw_reserved(const chart *c)
{
    fputs("<polyline fill=\"none\" stroke=\"#222\" stroke-width=\"1.5\" points=\"", c->f);
    for (int col = 0; col < c->columns; col++) {
        clt_memory_sample s = column_sample(c, col);
        double y = py(c, (double)s.reserved);
        fprintf(c->f, "%.1f,%.1f %.1f,%.1f ", px(c, col), y, px(c, col + 1), y);
    }
    fputs("\"/>\n", c->f);
}

/* Alternating bands behind the chart, one per major phase, labelled below
 * where a label has room (14 px from the one before). */
static void draw_phases(chart *c)
{
    int np = clt_memory_record_num_phases(c->r), band = 0;
    double last_label = -1e9;
    for (int i = 0; i < np; i++) {
        if (!clt__record_phase_is_major(c->r, i)) continue;
        int64_t start = clt__record_phase_start(c->r, i), end = c->n;
        for (int j = i + 1; j < np; j++)
            if (clt__record_phase_is_major(c->r, j)) {
                end = clt__record_phase_start(c->r, j);
                break;
            }
        if (end <= start) continue;
        double x0 = px(c, (double)start / (double)c->stride), x1 = px(c, (double)end / (double)c->stride);
        if (band++ % 2 == 0)
            fprintf(c->f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%.0f\" fill=\"#f2f2f2\"/>\n", x0, TOP,
                    x1 - x0, c->ph);
        fprintf(c->f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#bbb\"/>\n", x0, TOP, x0,
                TOP + c->ph + 4);
        double xm = (x0 + x1) / 2, yl = TOP + c->ph + 14;
        if (xm - last_label < 14) continue;
        last_label = xm;
        fprintf(c->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" "
                      "transform=\"rotate(-60 %.1f %.1f)\">", xm, yl, xm, yl);
        put_escaped(c, clt_memory_record_phase(c->r, i));
        fputs("</text>\n", c->f);
    }
}

static void draw_axes(const chart *c)
{
    fprintf(c->f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#333\"/>\n", LEFT,
            TOP, c->pw, c->ph);
    for (int k = 0; k <= 5; k++) {
        double v = c->ymax * k / 5, y = py(c, v);
        fprintf(c->f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n", LEFT - 4, y, LEFT, y);
        fprintf(c->f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LEFT - 6, y + 4, v / MIB);
    }
    fprintf(c->f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">MiB</text>\n",
            TOP + c->ph / 2, TOP + c->ph / 2);
    fprintf(c->f, "<text x=\"%.0f\" y=\"%.0f\">allocator events: %lld</text>\n", LEFT + c->pw + 8,
            TOP + c->ph + 4, (long long)c->n);
}

static void legend_row(const chart *c, int row, const char *swatch, const char *name)
{
    double x = LEFT + c->pw + 14, y = TOP + 10 + 20.0 * row;
    fprintf(c->f, "%s", swatch);
    fprintf(c->f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", x + 26, y + 4, name);
}

static void draw_legend(const chart *c, int64_t cap)
{
    double x = LEFT + c->pw + 14;
    char sw[256];
    int row = 0;
    for (int k = CLT_MEM_CATEGORY_COUNT - 1; k >= 0; k--, row++) {
        double y = TOP + 10 + 20.0 * row;
        snprintf(sw, sizeof sw, "<rect x=\"%.0f\" y=\"%.0f\" width=\"20\" height=\"12\" fill=\"%s\"/>\n", x, y - 6,
                 colors[k]);
        legend_row(c, row, sw, clt_memory_category_name(order[k]));
    }
    double y = TOP + 10 + 20.0 * row;
    snprintf(sw, sizeof sw, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#222\" stroke-width=\"1.5\"/>\n",
             x, y, x + 20, y);
    legend_row(c, row++, sw, "reserved");
    if (cap) {
        y = TOP + 10 + 20.0 * row;
        snprintf(sw, sizeof sw, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#c44e52\" "
                                "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n", x, y, x + 20, y);
        legend_row(c, row++, sw, "memory cap");
    }
    y = TOP + 10 + 20.0 * row;
    snprintf(sw, sizeof sw, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4\" fill=\"none\" stroke=\"#c44e52\" "
                            "stroke-width=\"2\"/>\n", x + 10, y);
    legend_row(c, row, sw, "peak allocated");
}

/* The peak, circled, and named in the subtitle with its phase. */
static void draw_peak(chart *c)
{
    int64_t i = clt_memory_record_peak(c->r);
    clt_memory_sample s;
    if (i < 0 || clt_memory_record_sample(c->r, i, &s) != CLT_OK) return;
    double col = (double)(i / c->stride) + 0.5;
    fprintf(c->f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" stroke=\"#c44e52\" stroke-width=\"2\"/>\n",
            px(c, col), py(c, (double)s.allocated));
    const char *phase = clt_memory_record_phase(c->r, s.phase);
    fprintf(c->f, "<text id=\"peak\" x=\"%d\" y=\"44\">peak: %.1f MiB allocated at event %lld, in ", LEFT,
            (double)s.allocated / MIB, (long long)i);
    put_escaped(c, phase ? phase : "no phase marked");
    fprintf(c->f, " (");
    for (int k = CLT_MEM_CATEGORY_COUNT - 1, first = 1; k >= 0; k--) {
        if (!s.category[order[k]]) continue;
        fprintf(c->f, "%s%s %.1f", first ? "" : ", ", clt_memory_category_name(order[k]),
                (double)s.category[order[k]] / MIB);
        first = 0;
    }
    fprintf(c->f, ")</text>\n");
    int64_t most = 0;
    for (int64_t k = 0; k < c->n; k++)
        if (clt_memory_record_sample(c->r, k, &s) == CLT_OK && s.reserved > most) most = s.reserved;
    fprintf(c->f, "<text id=\"reserved\" x=\"%.0f\" y=\"22\" text-anchor=\"end\">reserved: at most %.1f MiB</text>\n",
            LEFT + c->pw, (double)most / MIB);
}

static void draw(chart *c)
{
    int64_t cap = clt_memory_record_cap(c->r);
    double top = (double)cap;
    for (int64_t i = 0; i < c->n; i++) {
        clt_memory_sample s;
        clt_memory_record_sample(c->r, i, &s);
        if ((double)s.reserved > top) top = (double)s.reserved;
        if ((double)s.allocated > top) top = (double)s.allocated;
    }
    /* Five ticks of 1, 2 or 5 times a power of ten MiB. */
    double step = 0.01 * MIB;
    for (int k = 0; top * 1.05 > 5 * step; k++) step *= k % 3 == 1 ? 2.5 : 2;
    c->ymax = 5 * step;
    fprintf(c->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                  "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(c->f, "<text x=\"%d\" y=\"22\" font-size=\"15\">memory on ", LEFT);
    put_escaped(c, clt_memory_record_device(c->r));
    fprintf(c->f, ": allocated by category, reserved%s</text>\n",
            clt_memory_record_dropped(c->r) ? " (the record filled up: later events are not drawn)" : "");
    draw_phases(c);
    for (int k = 0; k < CLT_MEM_CATEGORY_COUNT && c->n > 0; k++) draw_band(c, k);
    if (c->n > 0) draw_reserved(c);
    if (cap) {
        double y = py(c, (double)cap);
        fprintf(c->f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#c44e52\" stroke-width=\"1.5\" "
                      "stroke-dasharray=\"6,4\"/>\n", LEFT, y, LEFT + c->pw, y);
        fprintf(c->f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#c44e52\">cap %.1f MiB</text>\n",
                LEFT + c->pw - 4, y - 4, (double)cap / MIB);
    }
    draw_axes(c);
    draw_legend(c, cap);
    draw_peak(c);
    fputs("</svg>\n", c->f);
}

clt_status clt_memory_record_write_svg(const clt_memory_record *r, const char *path)
{
    if (!r || !path) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_record_write_svg: NULL argument");
    chart c = {.r = r, .n = clt_memory_record_num_samples(r), .pw = W - LEFT - RIGHT, .ph = H - TOP - BOTTOM};
    c.stride = c.n > MAX_COLUMNS ? (c.n + MAX_COLUMNS - 1) / MAX_COLUMNS : 1;
    c.columns = c.n > 0 ? (int)((c.n + c.stride - 1) / c.stride) : 1;
    char *buf = NULL;
    size_t len = 0;
    c.f = open_memstream(&buf, &len);
    if (!c.f) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory drawing %s", path);
    draw(&c);
    int bad = ferror(c.f) || c.oom;
    bad |= fclose(c.f) != 0;
    clt_status s = bad ? clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory drawing %s", path) : CLT_OK;
    if (s == CLT_OK) s = clt__file_write(path, buf, len);
    free(buf);
    return s;
}
