#include "cltensor/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/error.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/io.h"

clt_status clt_dataset_load_idx(clt_dataset *out, const char *images_path, const char *labels_path)
{
    const char *op = "clt_dataset_load_idx";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "images_path", images_path));
    CLT_TRY(clt__need(op, "labels_path", labels_path));
    clt_idx im, lb;
    CLT_TRY(clt_idx_read(images_path, &im));
    clt_status s = clt_idx_read(labels_path, &lb);
    if (s != CLT_OK) {
        clt_idx_free(&im);
        return s;
    }
    if (im.ndim != 3)
        s = clt__fail(CLT_ERR_FORMAT, "%s: an image file has 3 dimensions (n, rows, cols), this one %d", images_path,
                      im.ndim);
    else if (lb.ndim != 1)
        s = clt__fail(CLT_ERR_FORMAT, "%s: a label file has 1 dimension, this one %d", labels_path, lb.ndim);
    else if (im.dims[0] != lb.dims[0])
        s = clt__fail(CLT_ERR_FORMAT, "%s has %lld images but %s has %lld labels", images_path,
                      (long long)im.dims[0], labels_path, (long long)lb.dims[0]);
    if (s != CLT_OK) {
        clt_idx_free(&im);
        clt_idx_free(&lb);
        return s;
    }
    out->n = im.dims[0];
    out->rows = im.dims[1];
    out->cols = im.dims[2];
    out->images = im.data;
    out->labels = lb.data;
    for (int64_t i = 0; i < out->n; i++)
        if (out->labels[i] + 1 > out->num_classes) out->num_classes = out->labels[i] + 1;
    return CLT_OK;
}

void clt_dataset_free(clt_dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

/* dir/name, or dir/name.gz when only that exists; NULL (with the error set)
 * when neither does. The caller frees the result. */
static char *find_file(const char *dir, const char *name, clt_status *s)
{
    size_t len = strlen(dir) + strlen(name) + 8;
    char *path = malloc(len);
    if (!path) {
        *s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    struct stat st;
    snprintf(path, len, "%s/%s", dir, name);
    if (stat(path, &st) == 0) return path;
    snprintf(path, len, "%s/%s.gz", dir, name);
    if (stat(path, &st) == 0) return path;
    *s = clt__fail(CLT_ERR_IO,
                   "no %s or %s.gz in %s: %s. Fashion-MNIST is four IDX files (train-images-idx3-ubyte, "
                   "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each may be .gz) from "
                   "https://github.com/zalandoresearch/fashion-mnist; in a cltensor source tree, "
                   "scripts/fetch-fashion-mnist %s fetches them",
                   name, name, dir, strerror(errno), dir);
    free(path);
    return NULL;
}

clt_status clt_fashion_mnist_load(clt_dataset *out, const char *dir, clt_split split)
{
    const char *op = "clt_fashion_mnist_load";
    CLT_TRY(clt__need(op, "out", out));
    memset(out, 0, sizeof *out);
    CLT_TRY(clt__need(op, "dir", dir));
    if (split != CLT_SPLIT_TRAIN && split != CLT_SPLIT_TEST)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: unknown split %d", op, (int)split);
    const char *prefix = split == CLT_SPLIT_TRAIN ? "train" : "t10k";
    char images_name[64], labels_name[64];
    snprintf(images_name, sizeof images_name, "%s-images-idx3-ubyte", prefix);
    snprintf(labels_name, sizeof labels_name, "%s-labels-idx1-ubyte", prefix);
    clt_status s = CLT_OK;
    char *images = find_file(dir, images_name, &s);
    char *labels = images ? find_file(dir, labels_name, &s) : NULL;
    if (labels) s = clt_dataset_load_idx(out, images, labels);
    if (s == CLT_OK && (out->rows != 28 || out->cols != 28))
        s = clt__fail(CLT_ERR_FORMAT, "%s: Fashion-MNIST images are 28x28, these %lldx%lld", images,
                      (long long)out->rows, (long long)out->cols);
    if (s == CLT_OK && out->num_classes > 10)
        s = clt__fail(CLT_ERR_FORMAT, "%s: Fashion-MNIST labels are 0..9, this file has %d", labels,
                      out->num_classes - 1);
    if (s == CLT_OK) out->num_classes = 10;
    if (s != CLT_OK) clt_dataset_free(out);
    free(images);
    free(labels);
    return s;
}

const char *clt_fashion_mnist_label_name(int label)
{
    static const char *const names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    return label >= 0 && label < 10 ? names[label] : "?";
}
