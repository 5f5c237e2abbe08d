/* Per-epoch metrics as CSV and as an SVG line chart of train loss,
 * validation loss and validation accuracy, or a regression's validation
 * mean absolute error (the chapter's ProgressBoard). */
#include "board.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/error.h"
#include "../core/file.h"

clt_status clt__board_add(clt__board *b, const clt__epoch_row *row)
{
    if (b->count == b->cap) {
        int ncap = b->cap ? 2 * b->cap : 16;
        clt__epoch_row *grown = realloc(b->rows, (size_t)ncap * sizeof *grown);
        if (!grown) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory recording metrics");
        b->rows = grown;
        b->cap = ncap;
    }
    b->rows[b->count++] = *row;
    return CLT_OK;
}

void clt__board_clear(clt__board *b)
{
    int regression = b->regression;
    free(b->rows);
    memset(b, 0, sizeof *b);
    b->regression = regression;
}

/* Text built in memory, then written by the safe writer (src/core/file.h):
 * the target is always the old or the new complete file. */
typedef struct text {
    FILE *f;
    char *buf;
    size_t len;
} text;

static clt_status text_open(text *t)
{
    t->buf = NULL;
    t->len = 0;
    t->f = open_memstream(&t->buf, &t->len);
    if (!t->f) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory formatting metrics");
    return CLT_OK;
}

static clt_status text_commit(text *t, const char *path)
{
    int bad = fclose(t->f) != 0;
    clt_status s = bad ? clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory formatting %s", path) : CLT_OK;
    if (s == CLT_OK) s = clt__file_write(path, t->buf, t->len);
    free(t->buf);
    return s;
}

static void put_number(FILE *f, double v)
{
    if (isnan(v)) fputs("", f);
    else fprintf(f, "%.6g", v);
}

clt_status clt__board_write_csv(const clt__board *b, const char *path)
{
    text t;
    CLT_TRY(text_open(&t));
    fprintf(t.f, "epoch,steps,train_loss,val_loss,%s,seconds,images_per_second\n",
            b->regression ? "val_mse,val_mae" : "val_accuracy");
    for (int i = 0; i < b->count; i++) {
        const clt__epoch_row *r = &b->rows[i];
        fprintf(t.f, "%d,%lld,", r->epoch, (long long)r->steps);
        put_number(t.f, r->train_loss);
        fputc(',', t.f);
        put_number(t.f, r->val_loss);
        fputc(',', t.f);
        if (b->regression) {
            put_number(t.f, r->val_mse);
            fputc(',', t.f);
            put_number(t.f, r->val_mae);
        } else {
            put_number(t.f, r->val_accuracy);
        }
        fprintf(t.f, ",%.3f,%.1f\n", r->seconds, r->images_per_second);
    }
    return text_commit(&t, path);
}

#define W 640
#define H 400
#define LEFT 60
#define RIGHT 160
#define TOP 20
#define BOTTOM 50

typedef struct series {
    const char *name, *color, *dash;
    size_t field; /* offset of the double in clt__epoch_row */
} series;

static double value_of(const clt__epoch_row *r, size_t field) { return *(const double *)((const char *)r + field); }

clt_status clt__board_write_svg(const clt__board *b, const char *path)
{
    const series all[] = {
        {"train_loss", "#1f77b4", "none", offsetof(clt__epoch_row, train_loss)},
        {"val_loss", "#ff7f0e", "6,4", offsetof(clt__epoch_row, val_loss)},
        {"val_acc", "#2ca02c", "2,3", offsetof(clt__epoch_row, val_accuracy)},
    };
    series shown[3] = {all[0], all[1], all[2]};
    if (b->regression) shown[2] = (series){"val_mae", "#2ca02c", "2,3", offsetof(clt__epoch_row, val_mae)};
    double ymax = 1.0;
    for (int i = 0; i < b->count; i++)
        for (size_t s = 0; s < sizeof shown / sizeof shown[0]; s++) {
            double v = value_of(&b->rows[i], shown[s].field);
            if (isfinite(v) && v > ymax) ymax = v;
        }
    ymax = ceil(ymax * 10) / 10;
    int xmax = b->count > 1 ? b->count : 1;
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    text t;
    CLT_TRY(text_open(&t));
    FILE *f = t.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#333\"/>\n", LEFT, TOP,
            pw, ph);
    for (int k = 0; k <= 5; k++) {
        double y = TOP + ph - ph * k / 5;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, y, LEFT + pw, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", LEFT - 6, y + 4, ymax * k / 5);
    }
    for (int e = 1; e <= xmax; e++) {
        double x = LEFT + (xmax > 1 ? pw * (e - 1) / (xmax - 1) : pw / 2);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, H - BOTTOM + 18, e);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\">epoch</text>\n", LEFT + pw / 2, H - 12);
    for (size_t s = 0; s < sizeof shown / sizeof shown[0]; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\" points=\"",
                shown[s].color, shown[s].dash);
        for (int i = 0; i < b->count; i++) {
            double v = value_of(&b->rows[i], shown[s].field);
            if (!isfinite(v)) continue;
            double x = LEFT + (xmax > 1 ? pw * i / (xmax - 1) : pw / 2);
            fprintf(f, "%.1f,%.1f ", x, TOP + ph - ph * v / ymax);
        }
        fprintf(f, "\"/>\n");
        double ly = TOP + 20 + 20.0 * (double)s;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\" "
                   "stroke-dasharray=\"%s\"/>\n", LEFT + pw + 12, ly, LEFT + pw + 42, ly, shown[s].color, shown[s].dash);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", LEFT + pw + 48, ly + 4, shown[s].name);
    }
    fprintf(f, "</svg>\n");
    return text_commit(&t, path);
}

/* One CSV field as a number; an empty field is NaN. */
static double field(char **p)
{
    char *end;
    double v = **p == ',' || **p == '\n' || **p == '\0' ? NAN : strtod(*p, &end);
    if (!isnan(v)) *p = end;
    if (**p == ',') (*p)++;
    return v;
}

clt_status clt__board_read_csv(clt__board *b, const char *path, int max_epoch)
{
    FILE *f = clt__file_open_read(path);
    if (!f) return CLT_OK;
    char line[512];
    clt_status s = CLT_OK;
    int header = 1, regression = 0;
    while (s == CLT_OK && fgets(line, sizeof line, f)) {
        if (header) {
            header = 0;
            regression = strstr(line, "val_mse") != NULL;
            continue;
        }
        char *p = line;
        clt__epoch_row r;
        r.epoch = (int)field(&p);
        r.steps = (int64_t)field(&p);
        r.train_loss = field(&p);
        r.val_loss = field(&p);
        r.val_accuracy = r.val_mse = r.val_mae = NAN;
        if (regression) {
            r.val_mse = field(&p);
            r.val_mae = field(&p);
        } else {
            r.val_accuracy = field(&p);
        }
        r.seconds = field(&p);
        r.images_per_second = field(&p);
        if (r.epoch >= 1 && r.epoch <= max_epoch) s = clt__board_add(b, &r);
    }
    fclose(f);
    return s;
}
