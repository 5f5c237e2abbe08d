/* Internal: the trainer's record of each epoch, written as CSV and as the
 * ProgressBoard's plot (an SVG file a browser shows). */
#ifndef CLT_TRAINER_BOARD_H
#define CLT_TRAINER_BOARD_H

#include <stdint.h>
#include "cltensor/status.h"

typedef struct clt__epoch_row {
    int epoch;            /* from 1 */
    int64_t steps;        /* optimizer steps so far */
    double train_loss;    /* mean over the epoch's examples */
    double val_loss;      /* NaN when there is no validation data */
    double val_accuracy;  /* in [0, 1], NaN when there is none */
    double val_mse, val_mae; /* a regression's validation errors, NaN when there are none */
    double seconds;       /* wall time of the epoch's training */
    double images_per_second;
} clt__epoch_row;

typedef struct clt__board {
    clt__epoch_row *rows;
    int count, cap;
    int regression; /* 1: the columns and lines are val_mse and val_mae, not val_accuracy */
} clt__board;

clt_status clt__board_add(clt__board *b, const clt__epoch_row *row);
void clt__board_clear(clt__board *b);

/* Appends the rows of epochs 1..max_epoch from a CSV that
 * clt__board_write_csv wrote (a resumed run keeps its history); a missing
 * file adds nothing. */
clt_status clt__board_read_csv(clt__board *b, const char *path, int max_epoch);

/* Both write atomically: `path` is always the old or the new complete file. */
clt_status clt__board_write_csv(const clt__board *b, const char *path);
clt_status clt__board_write_svg(const clt__board *b, const char *path);

#endif
