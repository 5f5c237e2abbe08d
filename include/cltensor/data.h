/* Data: image classification datasets held on the host, and a loader that
 * cuts them into shuffled batches of device tensors.
 *
 * Fashion-MNIST is read from the four standard IDX files in a folder
 * (scripts/fetch-fashion-mnist puts them there). */
#ifndef CLTENSOR_DATA_H
#define CLTENSOR_DATA_H

#include "export.h"
#include <stdint.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Images and labels as unsigned bytes. Filled by a load function, which
 * owns the arrays until clt_dataset_free. */
typedef struct clt_dataset {
    int64_t n;          /* examples */
    int64_t rows, cols; /* pixels per image */
    uint8_t *images;    /* n * rows * cols pixels, image after image, row-major */
    uint8_t *labels;    /* n labels */
    int num_classes;    /* 1 + the largest label (0 when n is 0); 10 for Fashion-MNIST */
} clt_dataset;

/* Loads an IDX image file (n, rows, cols) and an IDX label file (n).
 * Errors: those of clt_idx_read, and CLT_ERR_FORMAT naming the files when
 * their dimensions do not fit (image file not 3-D, label file not 1-D,
 * different counts). On failure *out is zeroed. */
CLT_API clt_status clt_dataset_load_idx(clt_dataset *out, const char *images_path, const char *labels_path);

typedef enum clt_split {
    CLT_SPLIT_TRAIN = 0, /* 60000 images: train-images-idx3-ubyte, train-labels-idx1-ubyte */
    CLT_SPLIT_TEST = 1   /* 10000 images: t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte */
} clt_split;

/* Loads a Fashion-MNIST (or MNIST) split from dir, taking each file raw or
 * with a .gz suffix (the raw file when both exist). Requires 28x28 images
 * and labels 0..9.
 * Errors: CLT_ERR_IO naming the missing file (and the script that fetches
 * it), else those of clt_dataset_load_idx, and CLT_ERR_FORMAT for other
 * image sizes or labels. */
CLT_API clt_status clt_fashion_mnist_load(clt_dataset *out, const char *dir, clt_split split);

/* "T-shirt/top", "Trouser", ..., "Ankle boot"; "?" outside 0..9. */
CLT_API const char *clt_fashion_mnist_label_name(int label);

/* Frees the arrays and zeroes the struct; NULL does nothing. */
CLT_API void clt_dataset_free(clt_dataset *ds);

typedef struct clt_loader_options {
    int64_t batch_size; /* examples per global batch (over all ranks), >= 1 */
    int shuffle;        /* 1: a new order each epoch, from seed and the epoch number; 0: file order */
    uint64_t seed;
    int64_t limit;      /* use only the first `limit` examples; 0 for all */
    int rank, world;    /* shard: rank of world takes its contiguous share of each global batch */
    int flatten;        /* 1: x is (B, rows*cols); 0: x is (B, 1, rows, cols) */
} clt_loader_options;

/* batch 256, shuffled, seed 0, every example, rank 0 of 1, not flattened. */
CLT_API clt_loader_options clt_loader_default_options(void);

/* Batches of a dataset as device tensors: x float32 pixels scaled to [0, 1],
 * y int32 labels. Every epoch has ceil(n / batch_size) global batches; the
 * last is smaller when batch_size does not divide n. With world w, global
 * batch b of length L gives rank r the examples [L*r/w, L*(r+1)/w) of it, so
 * the shards of one batch are disjoint and cover it (a shard may be empty). */
typedef struct clt_loader clt_loader;

/* The loader borrows ds, which must outlive it, and starts at epoch 0.
 * Errors: CLT_ERR_INVALID_ARGUMENT for bad options (named) or a malformed
 * dataset; those of allocating its first pinned staging buffers. */
CLT_API clt_status clt_loader_create(clt_loader **out, const clt_dataset *ds, clt_device dev,
                             const clt_loader_options *opt);
/* NULL does nothing. Tensors already handed out stay valid. */
CLT_API void clt_loader_free(clt_loader *l);

/* Examples used (after limit, before sharding) and global batches per epoch. */
CLT_API int64_t clt_loader_num_examples(const clt_loader *l);
CLT_API int64_t clt_loader_num_batches(const clt_loader *l);
/* The epoch being iterated. */
CLT_API int64_t clt_loader_epoch(const clt_loader *l);

/* Starts epoch `epoch` (>= 0) from its first batch; resuming a run picks the
 * same order as the uninterrupted run. */
CLT_API clt_status clt_loader_set_epoch(clt_loader *l, int64_t epoch);

/* Continues epoch `epoch` from global batch `batch` (0..batches per epoch),
 * as if the batches before it had been taken: how a resumed run picks up
 * exactly where an interrupted one stopped. */
CLT_API clt_status clt_loader_set_position(clt_loader *l, int64_t epoch, int64_t batch);

/* The next batch of the current epoch: *x (B,1,rows,cols) or (B,rows*cols),
 * *y (B), new tensors on the loader's device (the caller releases both).
 * The batch is prepared in a pinned host buffer and copied to the device
 * without waiting, so the host prepares the next batch while the device
 * computes on this one. A buffer is reused once its copy has finished; while
 * all are in flight a new one is added, so the host does not wait for a
 * copy. Only once the ring is full (256 MiB of staging buffers, but at least
 * 2 and at most 4096 of them) does it wait for the oldest (a
 * synchronization point of clt_loader_next). After the epoch's last batch, sets
 * *x and *y to NULL, returns CLT_OK and moves to the next epoch.
 * Errors: device errors; nothing is handed out then. */
CLT_API clt_status clt_loader_next(clt_loader *l, clt_tensor **x, clt_tensor **y);

#ifdef __cplusplus
}
#endif
#endif
