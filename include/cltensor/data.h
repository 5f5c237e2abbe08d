/* Data: datasets held on the host (images or tables, classes or values),
 * their readers, splits and standardisation, and a loader that cuts them into
 * shuffled batches of device tensors.
 *
 * Fashion-MNIST is read from the four standard IDX files in a folder
 * (scripts/fetch-fashion-mnist puts them there); other data from CSV, NumPy
 * .npy/.npz, IDX files or host arrays (docs/data.md). */
#ifndef CLTENSOR_DATA_H
#define CLTENSOR_DATA_H

#include "export.h"
#include <stdint.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The two tasks a dataset can train: class ids (cross-entropy over
 * num_classes outputs) or float values (a regression over `outputs`). */
typedef enum clt_task { CLT_TASK_CLASSIFY = 0, CLT_TASK_REGRESS = 1 } clt_task;

#define CLT_DATASET_MAX_DIMS 7

/* Examples and their targets, on the host. Filled by a load function (or
 * clt_dataset_from_host), which owns every array until clt_dataset_free.
 *
 * Features are either unsigned bytes (`images`, scaled by 1/255 by the
 * loader, as Fashion-MNIST is) or float32 (`x`); each example holds
 * rows * cols values (the input width), rows 1 for a table. Targets are
 * either class ids (`labels` as bytes, as Fashion-MNIST stores them, or
 * `classes` as int32), with `num_classes`, or float32 values (`values`,
 * `outputs` per example) when task is CLT_TASK_REGRESS. A struct zeroed and
 * given n, rows, cols, images, labels and num_classes, as before this
 * generalisation, is a classification set of byte images. */
typedef struct clt_dataset {
    int64_t n;          /* examples */
    int64_t rows, cols; /* values per example: rows x cols (an image), or 1 x width (a table) */
    uint8_t *images;    /* n * rows * cols bytes, example after example, row-major; or NULL */
    uint8_t *labels;    /* n class ids as bytes; or NULL */
    int num_classes;    /* classes (0 when n is 0); 10 for Fashion-MNIST; 0 for a regression */
    float *x;           /* n * rows * cols float32 features when images is NULL */
    int32_t *classes;   /* n class ids 0..num_classes-1 when labels is NULL */
    float *values;      /* n * outputs float32 targets of a regression */
    int64_t outputs;    /* targets per example of a regression (K); 0 for classes */
    clt_task task;      /* CLT_TASK_CLASSIFY (0) or CLT_TASK_REGRESS */
    char **class_names; /* num_classes names (from a CSV's labels, or "0", "1", ...), or NULL */
    int example_ndim;   /* dimensions of one example, 0 when it is (rows, cols) */
    int64_t example_shape[CLT_DATASET_MAX_DIMS]; /* an example's shape (example_ndim of them) */
} clt_dataset;

/* Loads an IDX file of examples (n, ...) and an IDX file of targets (n) or
 * (n, K), of any element type. Unsigned-byte examples are kept as images
 * (rows = dims[1], cols = the product of the rest, 1 for a 2-D file);
 * other types become float32 features. Integer targets are class ids
 * (0..255 for bytes, 0..2^31-1 otherwise; num_classes is 1 + the largest),
 * float targets the values of a regression.
 * Errors: those of clt_idx_read, and CLT_ERR_FORMAT naming the files when
 * their dimensions do not fit (an example file of 1 dimension, a target
 * file of more than 2, different counts, a negative class id, a NaN or
 * infinite value, naming its index). On failure *out is zeroed. */
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

/* The input width (rows * cols) and the model's outputs (num_classes for
 * classes, outputs for a regression); 0 for NULL. */
CLT_API int64_t clt_dataset_width(const clt_dataset *ds);
CLT_API int64_t clt_dataset_num_outputs(const clt_dataset *ds);

/* A dataset of n examples of `width` float32 features copied from x
 * (row-major, n * width), and copied targets: class ids from `classes` (n
 * int32 in 0..num_classes-1; num_classes 0 takes 1 + the largest), or, when
 * classes is NULL, `outputs` float32 values per example from `values` for a
 * regression. class_names, when not NULL, holds num_classes names (copied).
 * Errors: CLT_ERR_INVALID_ARGUMENT for a NULL array, n < 1, width < 1, sizes
 * that overflow, both or neither of classes and values; CLT_ERR_FORMAT
 * naming the example and column of a NaN or infinite feature or value, or
 * the example of a class id out of range. On failure *out is zeroed. */
CLT_API clt_status clt_dataset_from_host(clt_dataset *out, int64_t n, int64_t width, const float *x,
                                         const int32_t *classes, int num_classes, const char *const *class_names,
                                         const float *values, int64_t outputs);

/* Whether ds can be trained on; name (a file, "the training set") goes into
 * the message. Checks that it has examples, that its arrays are there,
 * that every feature and value is finite (naming example and column), that
 * every class id is in 0..num_classes-1 and that at least two classes occur.
 * Errors: CLT_ERR_FORMAT (CLT_ERR_INVALID_ARGUMENT for a NULL ds). */
CLT_API clt_status clt_dataset_check(const clt_dataset *ds, const char *name);

/* A new dataset of the examples idx[0..count-1] of ds, in that order, with
 * ds's layout, task and class names (copied).
 * Errors: CLT_ERR_INVALID_ARGUMENT for an index out of range;
 * CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_dataset_subset(clt_dataset *out, const clt_dataset *ds, const int64_t *idx, int64_t count);

/* Splits ds into *train and *val: val takes round(fraction * n) examples
 * (at least 1, and at least 1 left for training), drawn by a permutation
 * from seed; for classes the draw is stratified: each class gives
 * round(fraction * its count) examples (at most all but one of them), so the
 * classes keep their proportions. Both keep ds's order among themselves.
 * Errors: CLT_ERR_INVALID_ARGUMENT for a fraction outside (0, 1) or a
 * dataset of fewer than 2 examples; those of clt_dataset_subset. */
CLT_API clt_status clt_dataset_split(clt_dataset *train, clt_dataset *val, const clt_dataset *ds, double fraction,
                                     uint64_t seed);

/* ---- reading any data file ---- */

typedef struct clt_data_options {
    const char *target;      /* CSV: the target column, by header name or index (0 first, -1 last); NULL: the last */
    char delimiter;          /* CSV: ',', ';', '\t' or ' ' (runs of blanks); 0: detected from the first line */
    int header;              /* CSV: 1 the first row names the columns, 0 it does not, -1 detect */
    const char *x_name;      /* .npz: the features' array (NULL: "x") */
    const char *y_name;      /* .npz: the targets' array (NULL: "y") */
    const char *labels_path; /* IDX or .npy: the targets' file (required for IDX, optional for .npy) */
    int task;                /* -1: inferred; CLT_TASK_CLASSIFY or CLT_TASK_REGRESS: forced */
    int max_classes;         /* inferring: integer targets with at most this many distinct values are classes
                              * (0: 50) */
    const clt_dataset *like; /* a test set's training set: its task, width and classes are required */
    int no_target;           /* 1: the file holds features only (prediction input); no target column is taken */
} clt_data_options;

/* Target column the last, delimiter and header detected, "x" and "y",
 * task inferred, at most 50 classes, no training set, a target. */
CLT_API clt_data_options clt_data_default_options(void);

/* Reads a dataset from path: a NumPy .npy (features; targets from
 * labels_path, a second .npy, or none with no_target) or .npz (arrays
 * x_name and y_name), an IDX file (targets from labels_path), else CSV
 * (plain or gzip-compressed), told apart by their first bytes (the
 * extension only breaks no tie). The task, when inferred: string labels
 * are classes; targets of an integer or bool array type with at most
 * max_classes distinct values are classes, and so are integer-valued
 * numbers (in a CSV or a float array) with at most max_classes distinct
 * values and at most half as many as examples (or two); other numbers, and
 * arrays (n, K) of K > 1 targets, are a regression. Class labels become ids in sorted order (numbers by
 * value, strings byte-wise), their text kept in class_names; with `like`,
 * the training set's ids are used and a label it lacks is an error.
 * Errors: CLT_ERR_IO (cannot open or read), CLT_ERR_FORMAT naming the file,
 * the line and the column (CSV) or the index (arrays) of what is wrong: a
 * ragged row, an empty or non-numeric field, a NaN or infinite value, an
 * unknown target column, an empty file, a class a training set lacks, a
 * class label that is not valid UTF-8 text (a saved model's metadata
 * names the classes), a width other than the training set's; CLT_ERR_UNSUPPORTED for arrays of a
 * kind not read (named). On failure *out is zeroed. */
CLT_API clt_status clt_dataset_load(clt_dataset *out, const char *path, const clt_data_options *opt);

/* ---- standardisation ---- */

/* Per-feature mean and standard deviation of a training set (of the values
 * the loader gives: bytes already scaled by 1/255), and of each regression
 * target. A constant column gets std 1, so it maps to 0. */
typedef struct clt_standardizer {
    int64_t width;  /* features */
    float *x_mean;  /* width values */
    float *x_std;   /* width values, each > 0 */
    int64_t outputs; /* regression targets standardised; 0 for classes */
    float *y_mean;  /* outputs values, or NULL */
    float *y_std;   /* outputs values, or NULL */
} clt_standardizer;

/* Fits on ds (mean and population std, computed in double).
 * Errors: CLT_ERR_INVALID_ARGUMENT for an empty dataset. */
CLT_API clt_status clt_standardizer_fit(clt_standardizer *out, const clt_dataset *ds);

/* Makes a standardizer from given arrays (copied; y_mean and y_std may be
 * NULL with outputs 0), as a saved model restores it.
 * Errors: CLT_ERR_INVALID_ARGUMENT for NULL arrays or a std that is not a
 * positive finite number. */
CLT_API clt_status clt_standardizer_from_host(clt_standardizer *out, int64_t width, const float *x_mean,
                                              const float *x_std, int64_t outputs, const float *y_mean,
                                              const float *y_std);

/* Standardises ds in place: its features become float32 (x - mean) / std
 * (images are replaced by x), and, for a regression the standardizer has
 * targets for, its values too.
 * Errors: CLT_ERR_SHAPE naming both widths (or target counts) when they
 * differ. */
CLT_API clt_status clt_standardizer_apply(const clt_standardizer *s, clt_dataset *ds);

/* Standardises n rows of width features in place (prediction input). */
CLT_API clt_status clt_standardizer_apply_rows(const clt_standardizer *s, float *x, int64_t n, int64_t width);

/* Turns n rows of `outputs` standardised predictions back into the
 * target's units: y * std + mean. Does nothing when s has no targets. */
CLT_API clt_status clt_standardizer_invert_targets(const clt_standardizer *s, float *y, int64_t n, int64_t outputs);

/* Frees the arrays and zeroes the struct; NULL does nothing. */
CLT_API void clt_standardizer_free(clt_standardizer *s);

typedef struct clt_loader_options {
    int64_t batch_size; /* examples per global batch (over all ranks), >= 1 */
    int shuffle;        /* 1: a new order each epoch, from seed and the epoch number; 0: file order */
    uint64_t seed;
    int64_t limit;      /* use only the first `limit` examples; 0 for all */
    int rank, world;    /* shard: rank of world takes its contiguous share of each global batch */
    int flatten;        /* 1: x is (B, rows*cols); 0: x is (B, 1, rows, cols) */
    int resident;       /* 1: on a GPU-class device, with world 1, the examples used are uploaded once at
                           creation when they take at most a sixteenth of the device's memory cap, or of
                           its global memory without one, and each batch is made there from its indices
                           (docs/data.md); 0: the host path */
} clt_loader_options;

/* batch 256, shuffled, seed 0, every example, rank 0 of 1, not flattened,
 * resident where it may be. */
CLT_API clt_loader_options clt_loader_default_options(void);

/* Batches of a dataset as device tensors: x float32 (bytes scaled to
 * [0, 1], float features as they are), y int32 class ids, or float32 (B, K)
 * values for a regression. Every epoch has ceil(n / batch_size) global batches; the
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

/* The next batch of the current epoch: *x (B,1,rows,cols) or (B,rows*cols)
 * (an example of more than two dimensions: (B, its shape...) unflattened),
 * *y (B) class ids or (B, outputs) values, new tensors on the loader's device (the caller releases both).
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
