/* Fashion-MNIST: its four IDX files found in a folder and read with
 * clt_dataset_load_idx (load.c), and its class names. */
#include "cltensor/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/error.h"

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
    if (s == CLT_OK && (!out->images || !out->labels))
        s = clt__fail(CLT_ERR_FORMAT, "%s, %s: Fashion-MNIST images and labels are unsigned bytes", images, labels);
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
