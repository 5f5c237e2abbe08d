/* Internal: the progress bar on a terminal (steps, images/s or examples/s, running loss,
 * ETA). Reading the running loss is a synchronization point, so updates are
 * rate-limited rather than made every step. */
#ifndef CLT_TRAINER_PROGRESS_H
#define CLT_TRAINER_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "cltensor/warmup.h"

typedef struct clt__progress {
    FILE *out; /* NULL: no bar */
    char device[32];
    char unit[16]; /* what it counts per second: "images", or "examples" for tables */
    int epoch, epochs;
    int64_t total;
    double start, last;
} clt__progress;

/* unit: the per-epoch log line's, "images" or "examples" (the engine's one choice). */
void clt__progress_init(clt__progress *p, FILE *out, const char *device, const char *unit);
void clt__progress_begin(clt__progress *p, int epoch, int epochs, int64_t total_batches);
/* 1 when a bar is shown and the last update is old enough for another. */
int clt__progress_due(clt__progress *p);
void clt__progress_update(clt__progress *p, int64_t batch, int64_t images, double running_loss);
void clt__progress_end(clt__progress *p);
/* While clt_model_warmup runs: a bar-line saying kernels are being prepared
 * (cleared by clt__progress_end). */
void clt__progress_compiling(clt__progress *p);
/* The warm-up's lines in the log (NULL: none): programs compiled, when any,
 * and the first-step overhead, kept out of the epochs' times. */
void clt__progress_warmup_log(FILE *log, const char *device, const clt_warmup_result *w);

#endif
