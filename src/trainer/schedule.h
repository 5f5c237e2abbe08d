/* Internal: the learning rate of each optimizer step (clt_trainer_options'
 * lr_schedule, warmup_steps, lr_step_size and lr_gamma). */
#ifndef CLT_TRAINER_SCHEDULE_H
#define CLT_TRAINER_SCHEDULE_H

#include "cltensor/trainer.h"

/* Checks the schedule's options (op names the message). */
clt_status clt__schedule_check(const char *op, const clt_trainer_options *o);

/* 1 when the options change the learning rate at all. */
int clt__schedule_active(const clt_trainer_options *o);

/* The learning rate of step t (from 0) of a run of total steps. */
double clt__schedule_lr(const clt_trainer_options *o, int64_t t, int64_t total);

#endif
