/* Internal: what the trainer's checkpoints carry beyond clt_checkpoint_info,
 * so that a run resumed mid-epoch reports that epoch as an uninterrupted
 * run would. */
#ifndef CLT_TRAINER_CHECKPOINT_H
#define CLT_TRAINER_CHECKPOINT_H

#include "cltensor/trainer.h"

typedef struct clt__partial_epoch {
    double loss_sum; /* the partial epoch's summed per-example loss (cltensor.epoch_loss_sum) */
    double seconds;  /* its training time so far (cltensor.epoch_seconds; 0: not written, which keeps
                        the file deterministic: same seed, same bytes) */
} clt__partial_epoch;

/* clt_checkpoint_save and _load with the partial epoch (NULL: none; a file
 * without those keys loads as zeros). */
clt_status clt__checkpoint_save(const char *path, const clt_model *model, const clt_optimizer *opt,
                                const clt_checkpoint_info *info, const clt__partial_epoch *partial);
clt_status clt__checkpoint_load(const char *path, clt_model *model, clt_optimizer *opt, clt_checkpoint_info *info,
                                clt__partial_epoch *partial);

#endif
