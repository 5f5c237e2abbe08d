#include "progress.h"

#include <math.h>
#include <string.h>

#include "../core/clock.h"

#define INTERVAL 0.25
#define WIDTH 24

void clt__progress_init(clt__progress *p, FILE *out, const char *device, const char *unit)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    snprintf(p->device, sizeof p->device, "%s", device);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
}

void clt__progress_begin(clt__progress *p, int epoch, int epochs, int64_t total_batches)
{
    p->epoch = epoch;
    p->epochs = epochs;
    p->total = total_batches;
    p->start = p->last = clt__now_seconds();
}

int clt__progress_due(clt__progress *p) { return p->out && clt__now_seconds() - p->last >= INTERVAL; }

void clt__progress_update(clt__progress *p, int64_t batch, int64_t images, double running_loss)
{
    if (!p->out) return;
    double t = clt__now_seconds(), elapsed = t - p->start;
    p->last = t;
    int filled = p->total ? (int)(WIDTH * batch / p->total) : WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '=' : ' ';
    bar[WIDTH] = '\0';
    double eta = batch ? elapsed * (double)(p->total - batch) / (double)batch : 0;
    fprintf(p->out, "\repoch %d/%d [%s] %lld/%lld  %.0f %s/s  loss %.4f  ETA %.0fs  %s ", p->epoch, p->epochs, bar,
            (long long)batch, (long long)p->total, elapsed > 0 ? (double)images / elapsed : 0.0, p->unit,
            running_loss, eta, p->device);
    fflush(p->out);
}

void clt__progress_compiling(clt__progress *p)
{
    if (!p->out) return;
    fprintf(p->out, "\rpreparing kernels for %s (compiled on a first run, then cached) ...", p->device);
    fflush(p->out);
}

void clt__progress_warmup_log(FILE *log, const char *device, const clt_warmup_result *w)
{
    if (!log) return;
    if (w->programs_built > 0)
        fprintf(log, "kernels for %s: %d program(s) compiled in %.2f s, %d loaded from the cache\n", device,
                w->programs_built, w->build_seconds, w->programs_loaded);
    fprintf(log, "first-step overhead on %s: %.2f s (kernel compilation and first launches, outside the epoch's "
            "time)\n", device, w->seconds);
}

void clt__progress_end(clt__progress *p)
{
    if (!p->out) return;
    fprintf(p->out, "\r%*s\r", 100, "");
    fflush(p->out);
}
