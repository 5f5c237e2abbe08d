/* Internal: a data set resident on a GPU-class device, for the loader
 * (loader.c). The examples are uploaded once in their stored element type
 * (bytes stay bytes), the labels as int32 and a regression's targets as
 * float32; each batch is then one kernel (cl/gather.cl) over the batch's
 * int32 example indices, giving the host loader's values to the bit. */
#ifndef CLT_DATA_RESIDENT_H
#define CLT_DATA_RESIDENT_H

#include "cltensor/data.h"

typedef struct clt__resident clt__resident;

/* The device-resident copy of the first n examples of ds on dev, or NULL in
 * *out when the loader keeps to the host path: a CPU-class device (see
 * docs/data.md), world > 1 (data parallel), no examples, or a copy
 * (clt__resident_bytes) past a sixteenth of the device's budget: its memory
 * cap when it has one, else its global memory (on a planning device, those
 * of the device it plans for, or its description's). */
clt_status clt__resident_create(clt__resident **out, const clt_dataset *ds, int64_t n, int world, clt_device dev);
void clt__resident_free(clt__resident *r);

/* Bytes the resident copy of n examples of ds takes on the device: the
 * examples (bytes, or float32 features) and their labels or targets, each
 * rounded up to whole 4-byte words. */
int64_t clt__resident_bytes(const clt_dataset *ds, int64_t n);

/* The batch of examples idx (count int32 indices, already on the device or
 * on its way there): x (count, rows*cols) float32 and y (count) int32 or
 * (count, outputs) float32, made by one kernel without waiting. */
clt_status clt__resident_gather(const clt__resident *r, const clt_tensor *idx, int64_t count, clt_tensor **x,
                                clt_tensor **y);

#endif
