/* The Trainer of the chapter, redeemed: num_gpus is a ceiling, the model
 * moves to the device once before training, batches move at each step, and
 * the loss stays on the device during the epoch. Also model checkpoints in
 * safetensors with PyTorch's state_dict names. */
#ifndef CLTENSOR_TRAINER_H
#define CLTENSOR_TRAINER_H

#include "export.h"
#include <stdint.h>
#include <stdio.h>
#include "data.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata written beside the tensors (any field may be 0 / NULL). The
 * model's own layer list and parameter-name prefix are always written
 * (cltensor.layers, cltensor.prefix), so clt_model_load can rebuild it; the
 * fields from `task` on say what it is for. */
typedef struct clt_checkpoint_info {
    const char *arch;          /* "resmlp" */
    int64_t hiddens, blocks;
    int64_t epoch, steps;      /* epochs completed, optimizer steps taken */
    int64_t batch;             /* batches taken of the next epoch (a run stopped mid-epoch) */
    clt_task task;             /* CLT_TASK_CLASSIFY (0, the default) or CLT_TASK_REGRESS */
    int num_classes;           /* names in class_names (the model's outputs); 0: none recorded */
    const char *const *class_names; /* the classes' names, valid UTF-8, or NULL */
    int example_ndim;          /* dimensions of one input example; 0: not recorded */
    int64_t example_shape[CLT_DATASET_MAX_DIMS]; /* their sizes, whose product is the input width */
    const char *target;        /* the training data's target column (a name or an index); NULL: none */
    const clt_standardizer *standardizer; /* saved as the tensors preprocess.x_mean, preprocess.x_std (and
                                  preprocess.y_mean, preprocess.y_std for a regression's targets); NULL: none */
} clt_checkpoint_info;

/* How the learning rate changes over the optimizer steps (clt_trainer_options). */
typedef enum clt_lr_schedule {
    CLT_LR_CONSTANT = 0, /* lr throughout (after any warm-up) */
    CLT_LR_STEP = 1,     /* lr * lr_gamma^floor(u / lr_step_size), u the steps after the warm-up */
    CLT_LR_COSINE = 2    /* lr * (1 + cos(pi * u / (T - W))) / 2, PyTorch's CosineAnnealingLR over the T - W steps
                            after W warm-up steps, T the run's steps (max_steps, or max_epochs times the
                            batches of an epoch, whichever is fewer) */
} clt_lr_schedule;

typedef struct clt_trainer_options {
    int max_epochs;            /* epochs to run, >= 1 */
    int num_gpus;              /* a ceiling: min(num_gpus, clt_num_gpus()) GPUs; with none, cpu() */
    double gradient_clip_val;  /* clip gradients to this global L2 norm; 0 disables */
    int recompute_blocks;      /* recompute (activation checkpointing), residual blocks per segment
                                  (clt_model_set_recompute): 0 off, CLT_RECOMPUTE_AUTO about sqrt(blocks) */
    int fp16;                  /* 1: convert the model to float16 first and train in mixed precision
                                  with dynamic loss scaling (docs/half.md); clt_parallel_fit too */
    int use_device;            /* 1: train on `device`, whatever num_gpus says */
    clt_device device;
    int64_t batch_size;        /* global batch */
    int accumulate;            /* gradient accumulation: each optimizer step sums the gradients of this
                                  many micro-batches (row views of the batch; the first batch % accumulate
                                  get one more example), each scaled by its size over the batch's, so the
                                  step equals one on the whole batch; 0 or 1: none. clt_parallel_fit:
                                  each replica accumulates over its shard */
    float lr;
    clt_optimizer_kind optimizer;
    uint64_t seed;             /* shuffling order */
    int shuffle;               /* 0: batches in file order */
    int64_t max_steps;         /* stop after this many optimizer steps; 0: no limit */
    int64_t train_limit;       /* use the first examples only; 0: all */
    int64_t val_limit;
    int64_t eval_batch_size;   /* examples per evaluation batch; 0: batch_size (`clt train --fit` sets the
                                  micro-batch size it chose, so that evaluation fits as its steps do) */
    const char *metrics_path;  /* CSV, one row per epoch; NULL: none */
    const char *plot_path;     /* SVG of losses and accuracy per epoch; NULL: none */
    const char *save_path;     /* checkpoint (with the optimizer state) written atomically at
                                  each epoch's end and when stopped; NULL: none */
    clt_checkpoint_info save_info; /* its metadata (epoch, batch and steps are filled in) */
    const char *resume_path;   /* continue from this checkpoint: parameters, optimizer state and
                                  position, so an interrupted run ends as an uninterrupted one */
    const char *memory_plot_path; /* the memory of the first memory_plot_steps optimizer steps on the
                                  training device, recorded and drawn (clt_memory_record_write_svg);
                                  NULL: none. clt_trainer_fit only: clt_parallel_fit refuses it */
    int memory_plot_steps;     /* 0: 2 */
    int progress;              /* -1: a bar on stderr when it is a terminal; 0: never; 1: always */
    FILE *log;                 /* a line per epoch; NULL: silent */
    float momentum;            /* SGD's momentum (PyTorch's); 0: none. Adam refuses it (its betas are 0.9, 0.999) */
    float weight_decay;        /* L2 penalty: weight_decay * param added to the gradient, as PyTorch's SGD and
                                  Adam weight_decay; 0: none */
    clt_lr_schedule lr_schedule; /* CLT_LR_CONSTANT (0) */
    int64_t warmup_steps;      /* the first W steps take lr * (t + 1) / W at step t (from 0); 0: none */
    int64_t lr_step_size;      /* CLT_LR_STEP: steps between two multiplications by lr_gamma (>= 1) */
    double lr_gamma;           /* CLT_LR_STEP: the factor, in (0, 1]; 0 means 0.1 */
    int early_stopping;        /* patience: after this many epochs in a row without a lower validation loss
                                  than the best, stop; at the end the model's parameters become the best
                                  epoch's. save_path is then written at an epoch that is the best so far
                                  (and where a run stops mid-epoch, to resume from), so it holds the best
                                  model. A resumed run's best and patience start afresh. 0: off. Needs val
                                  data, and one process (clt_parallel_fit over ranks refuses it) */
    const clt_standardizer *standardizer; /* the one the data were standardised with, or NULL: a regression's
                                  val_mse and val_mae are then in its target's units (times y_std) */
} clt_trainer_options;

/* One epoch, batch 256, SGD lr 0.1, shuffled with seed 0, num_gpus 1, no
 * progress bar and no log (the library prints nothing unless asked: set
 * progress and log). */
CLT_API clt_trainer_options clt_trainer_default_options(void);

typedef struct clt_trainer_result {
    int epochs;                /* completed */
    int64_t steps;
    double train_loss;         /* mean over the last epoch's examples */
    double val_loss, val_accuracy; /* NaN without validation data; val_accuracy NaN for a regression */
    double seconds;            /* training time over all epochs, evaluation excluded */
    double images_per_second;
    char device[32];           /* where it trained, e.g. "gpu:0" */
    int stopped;               /* 1 when clt_trainer_request_stop ended training early */
    int64_t skipped_steps;     /* steps a float16 run skipped (gradients overflowed), of `steps` */
    double val_mse, val_mae;   /* a regression's validation errors (NaN for classes or without val data) */
    int best_epoch;            /* with early_stopping: the epoch whose parameters the model holds; else 0 */
    int early_stopped;         /* 1 when early_stopping's patience ran out before the last epoch */
    int saves;                 /* checkpoints this call wrote to save_path: 0 when it is as it was
                                  (stopped before the first epoch's end, during the warm-up say) */
    double best_val_loss, best_val_accuracy; /* with early_stopping: the validation figures of best_epoch,
                                  the model's (val_loss and the rest are the last epoch's); NaN otherwise,
                                  and best_val_accuracy NaN for a regression */
    double best_val_mse, best_val_mae; /* the same for a regression's errors; NaN for classes */
} clt_trainer_result;

/* Trains model on train (and evaluates on val after each epoch; val may be
 * NULL) with the options. The model is moved to the training device first
 * and stays there. out may be NULL.
 * Errors: CLT_ERR_INVALID_ARGUMENT for bad options (named) or a training
 * set without examples, device and memory errors from the step, CLT_ERR_IO
 * writing metrics, plot, checkpoint or memory plot (the four output paths
 * are checked before any work as clt_file_check_uses does: directory
 * writable, target absent or a regular file, temporary name within NAME_MAX;
 * a bad one is CLT_ERR_IO naming it, before the first epoch; a metrics or
 * plot write that fails at an epoch's end is reported after that epoch's
 * checkpoint is saved all the same), CLT_ERR_INVALID_ARGUMENT
 * when two of them, or one and the running trace (clt_trace_start), name
 * the same file, or one other than save_path is resume_path's file,
 * CLT_ERR_FORMAT for a resume_path
 * whose metadata is out of range or does not fit this run (the key and value
 * named), CLT_ERR_DIVERGED when the loss read at a progress update or an
 * epoch's end is not finite, when the epoch's validation loss is not (its
 * last steps broke the model: their losses, read before the update, were
 * finite), without val data when a parameter is not finite at the epoch's
 * end, or when every step of a float16 epoch was skipped: that epoch writes
 * nothing (no metrics row, no checkpoint), so save_path keeps the last
 * finite epoch. */
CLT_API clt_status clt_trainer_fit(clt_model *model, const clt_dataset *train, const clt_dataset *val,
                           const clt_trainer_options *opt, clt_trainer_result *out);

/* Asks a running clt_trainer_fit to stop after its current step and save
 * its checkpoint (with the position, for resume_path). Async-signal-safe:
 * meant for a SIGINT handler. The request is consumed by the fit it stops. */
CLT_API void clt_trainer_request_stop(void);

/* Mean loss and accuracy of model over the first `limit` examples of ds (all
 * when 0), in inference mode, on the model's device. The loss is ds's:
 * cross-entropy for classes, MSE for a regression (whose accuracy is NaN).
 * Two synchronization points in all, at the end. */
CLT_API clt_status clt_trainer_evaluate(clt_model *model, const clt_dataset *ds, int64_t batch_size, int64_t limit,
                                double *loss, double *accuracy);

/* Everything an evaluation measures. */
typedef struct clt_evaluation {
    int64_t examples;          /* evaluated */
    double loss;               /* mean loss (cross-entropy, or MSE of the values as the model sees them) */
    double accuracy;           /* classes: the fraction predicted right; NaN for a regression */
    double mse, mae;           /* a regression's mean squared and absolute errors over every value, in the
                                  target's units when a standardizer is given; NaN for classes */
} clt_evaluation;

/* clt_trainer_evaluate with every measure. standardizer (may be NULL) is the
 * one ds was standardised with: a regression's errors are multiplied by its
 * y_std (per target column) to be in the target's units. Errors: those of
 * clt_trainer_evaluate, and CLT_ERR_SHAPE when the standardizer's targets
 * are not ds's outputs. */
CLT_API clt_status clt_trainer_evaluate_metrics(clt_model *model, const clt_dataset *ds, int64_t batch_size,
                                                int64_t limit, const clt_standardizer *standardizer,
                                                clt_evaluation *out);

/* ---- Checkpoints ----
 * Parameters are saved under PyTorch's state_dict names ("net.1.weight",
 * ...), so a file from torch's safetensors loads here and the reverse. With
 * an optimizer, its state is saved too as "optimizer.<state>.<parameter>"
 * (e.g. "optimizer.exp_avg.net.1.weight") plus its step count in the
 * metadata; PyTorch ignores those when loading with strict=False. */

/* Writes atomically (the old file stays whole on failure). A
 * synchronization point: reads every tensor. info may be NULL.
 * Errors: CLT_ERR_INVALID_ARGUMENT (naming the field) when info describes
 * another model: class names other than the last layer's outputs in number
 * or not valid UTF-8, class names for a regression, an example shape whose
 * product is not the input width, a standardizer of another width or target
 * count; those of clt_safetensors_save. */
CLT_API clt_status clt_checkpoint_save(const char *path, const clt_model *model, const clt_optimizer *opt,
                               const clt_checkpoint_info *info);
/* Loads every parameter of model (and the optimizer state when opt is not
 * NULL and the file has it) after checking the whole file first: a tensor
 * the model lacks (other than the preprocess.* tensors of a standardizer,
 * which only clt_model_load reads), one it has that the file lacks, a
 * malformed model description (see clt_model_load), a shape that differs or
 * a dtype other than F32, F16 or BF16 fails with CLT_ERR_FORMAT naming the
 * tensor. The tensors are read into new buffers (memory for a second copy
 * of the parameters and the loaded state) before anything changes, so any
 * failure (these, bad metadata, a read or allocation error) leaves the
 * model's parameters, the optimizer's state, steps and the loss scaler as
 * they were. The loaded state replaces the optimizer's buffers (pointers
 * from clt_optimizer_state are invalid afterwards); the parameters are
 * copied into the model's own. info (may be NULL) receives the metadata's
 * numbers (task, num_classes and example shape too); its pointers are NULL. */
CLT_API clt_status clt_checkpoint_load(const char *path, clt_model *model, clt_optimizer *opt,
                               clt_checkpoint_info *info);
/* Reads a ResMLP checkpoint's architecture (hidden width and block count)
 * from its tensor names and shapes, without loading it. CLT_ERR_FORMAT when
 * net.1.weight is not 2-D with each side 1..2^31-1, or the file holds more
 * than CLT_RESMLP_MAX_BLOCKS blocks. */
#define CLT_RESMLP_MAX_BLOCKS 1000
CLT_API clt_status clt_checkpoint_resmlp_shape(const char *path, int64_t *hiddens, int64_t *blocks);

/* ---- Self-describing models ---- */

/* The most layers a saved layer list may hold. */
#define CLT_MODEL_MAX_LAYERS 4096
/* The most classes a saved model may name. */
#define CLT_MODEL_MAX_CLASSES (1 << 20)

/* What clt_model_load found in a file besides the parameters: what the model
 * is for and how its inputs are prepared. Owned; clt_model_description_free. */
typedef struct clt_model_description {
    clt_task task;             /* CLT_TASK_CLASSIFY (also for a file that records none) or CLT_TASK_REGRESS */
    int64_t num_inputs;        /* the input width: features per example */
    int64_t num_outputs;       /* the last layer's outputs: classes, or values per example */
    int num_classes;           /* num_outputs for a classifier, 0 for a regression */
    char **class_names;        /* num_classes names (the file's, else "0", "1", ...); NULL for a regression */
    int example_ndim;          /* an example's shape: the file's, else (num_inputs) */
    int64_t example_shape[CLT_DATASET_MAX_DIMS];
    char *target;              /* the training data's target column, NULL when not recorded */
    int has_standardizer;      /* 1: the file holds preprocess.* tensors, in standardizer */
    clt_standardizer standardizer;
    clt_checkpoint_info info;  /* the metadata's numbers (epoch, steps, hiddens, blocks); pointers NULL */
} clt_model_description;

/* Frees what the description holds and zeroes it; NULL does nothing. */
CLT_API void clt_model_description_free(clt_model_description *d);

/* Rebuilds the model saved in path on dev, from its layer list
 * (cltensor.layers, written by clt_checkpoint_save for any model, whether
 * built by the tool or through the C API) or, for a file without one (a
 * capstone checkpoint, PyTorch's ResMLPClassifier), from the ResMLP shape of
 * its tensors (clt_checkpoint_resmlp_shape), and loads its parameters
 * (clt_checkpoint_load; the optimizer state is ignored). The model is in
 * inference mode (clt_model_set_training(m, 0)). desc (may be NULL)
 * receives the description; free it with clt_model_description_free.
 * Metadata is checked before anything is allocated: the layer list has
 * 1..CLT_MODEL_MAX_LAYERS known layers of sizes 1..2^31-1 whose widths
 * chain, and a parameter count equal to the file's parameter tensors'; the
 * task is "classify" or "regress"; class names are strings, as many as the
 * outputs; the example shape has 1..CLT_DATASET_MAX_DIMS sizes whose product
 * is the input width; the preprocess.* tensors are F32, shaped (width) and
 * (outputs), with finite means and positive finite deviations.
 * Errors: CLT_ERR_FORMAT naming the file and the key or tensor; those of
 * clt_safetensors_open and clt_checkpoint_load; device errors. On failure
 * *out is NULL and desc zeroed. */
CLT_API clt_status clt_model_load(clt_model **out, const char *path, clt_device dev, clt_model_description *desc);

/* Predictions of model for n rows of `width` float32 features x (row-major,
 * n * width; not modified), as clt_model_load's description d says: the
 * rows standardised first when d has a standardizer, then the forward pass
 * in inference mode, in batches of up to 1024 rows, on the model's device.
 * out receives n * clt_model_num_outputs(model) floats: for a classifier
 * the softmax probabilities of each class, for a regression the values in
 * the target's units (the standardizer's targets undone). classes (may be
 * NULL) receives n class ids, the most probable (the first of equals); for
 * a regression it is left alone. d NULL: the model's outputs as they are,
 * classes their argmax. A synchronization point. The training mode is
 * restored afterwards.
 * Errors: CLT_ERR_INVALID_ARGUMENT for NULL arrays or n < 1;
 * CLT_ERR_SHAPE naming both widths when width is not the model's input
 * width; device errors. */
CLT_API clt_status clt_model_predict(clt_model *model, const clt_model_description *d, const float *x, int64_t n,
                                     int64_t width, float *out, int32_t *classes);

#ifdef __cplusplus
}
#endif
#endif
