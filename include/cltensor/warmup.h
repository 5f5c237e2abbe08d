/* Warm-up: compiling the kernels a model's training needs before the first
 * step, so that compilation is neither counted as training time nor paid
 * inside the first epoch. */
#ifndef CLTENSOR_WARMUP_H
#define CLTENSOR_WARMUP_H

#include "export.h"
#include <stdint.h>
#include "nn.h"
#include "trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counts and times are the process's over the call (programs other threads
 * build meanwhile count too). */
typedef struct clt_warmup_result {
    double seconds;         /* the whole call */
    double build_seconds;   /* of which compiling programs from source (clBuildProgram) */
    double save_seconds;    /* of which fetching and writing program binaries */
    int programs_built;     /* kernel programs compiled from source by this call */
    int programs_loaded;    /* loaded from cltensor's binary cache by this call */
    int binaries_saved;     /* program binaries this call wrote to the cache */
    int binaries_not_saved; /* program binaries it was to write (CLT_WARMUP_SAVE_BINARIES) and could not */
} clt_warmup_result;

/* Flags of clt_model_warmup. */
enum {
    /* Write every program binary the warm-up built to cltensor's cache
     * ($CLT_CACHE_DIR, docs/performance.md), even on pocl, where fetching a
     * binary compiles every kernel of its program once more (several seconds)
     * and ordinary runs therefore leave caching to pocl. For packagers and
     * CI images: `clt warmup` sets it. */
    CLT_WARMUP_SAVE_BINARIES = 1,
    /* Also build (and with CLT_WARMUP_SAVE_BINARIES save) every program in
     * cl/, whether this model's step uses it or not. */
    CLT_WARMUP_ALL_PROGRAMS = 2,
    /* The model is trained as a regression: the step's loss is the MSE on
     * float32 targets, one per output, not the cross-entropy on int32
     * labels (clt_trainer_fit sets it for a regression's data). */
    CLT_WARMUP_REGRESSION = 4
};

/* Compiles every kernel that training `model` on its device needs, with
 * batches of batch_size rows, the given optimizer and gradient clipping
 * (0: none), in the model's dtype and recompute setting: it runs one
 * training step and one evaluation batch on a scratch copy of the model
 * (same layers, same device; zeros for data), so the driver also generates
 * the code it generates at a kernel's first launch. The model, its
 * gradients and any optimizer are untouched. clt_trainer_fit calls it
 * before its epoch clock starts. out may be NULL.
 * Errors: CLT_ERR_INVALID_ARGUMENT for a NULL or uninitialised model, a
 * model without a Linear, batch_size < 1 or an unknown optimizer; device and
 * memory errors of the step; with CLT_WARMUP_SAVE_BINARIES, CLT_ERR_IO when
 * a binary could not be written (a full disk, a cache directory that is not
 * the user's own: docs/performance.md), the message counting and naming
 * what was not saved, with *out filled in as on success. */
CLT_API clt_status clt_model_warmup(const clt_model *model, int64_t batch_size, clt_optimizer_kind optimizer,
                            double gradient_clip_val, int flags, clt_warmup_result *out);

#ifdef __cplusplus
}
#endif

#endif
