/* Datasets from IDX files and the batch loader: counts, partial batches,
 * shuffling, scaling, subsets and shards. Fixtures are generated here. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

/* Example i carries its index in its first two pixels and label i % 10. */
static clt_dataset make_dataset(int64_t n, int64_t rows, int64_t cols)
{
    clt_dataset ds = {.n = n, .rows = rows, .cols = cols, .num_classes = 10};
    ds.images = malloc((size_t)(n * rows * cols) + 1);
    ds.labels = malloc((size_t)n + 1);
    for (int64_t i = 0; i < n; i++) {
        uint8_t *img = ds.images + i * rows * cols;
        for (int64_t p = 0; p < rows * cols; p++) img[p] = (uint8_t)((i * 31 + p * 7) & 255);
        img[0] = (uint8_t)(i & 255);
        img[1] = (uint8_t)(i >> 8);
        ds.labels[i] = (uint8_t)(i % 10);
    }
    return ds;
}

typedef struct batch {
    int64_t count;
    int64_t index[512];
} batch;

/* Reads one batch back, checks every pixel's scaling and every label, and
 * records which examples it holds. */
static void read_batch(const clt_dataset *ds, clt_tensor *x, clt_tensor *y, int flatten, batch *out)
{
    int64_t b = clt_tensor_dim(y, 0), pixels = ds->rows * ds->cols;
    ck_assert_int_eq(clt_tensor_ndim(y), 1);
    ck_assert_int_eq(clt_tensor_dtype(y), CLT_INT32);
    ck_assert_int_eq(clt_tensor_dtype(x), CLT_FLOAT32);
    if (flatten) {
        ck_assert_int_eq(clt_tensor_ndim(x), 2);
        ck_assert_int_eq(clt_tensor_dim(x, 1), pixels);
    } else {
        ck_assert_int_eq(clt_tensor_ndim(x), 4);
        ck_assert_int_eq(clt_tensor_dim(x, 1), 1);
        ck_assert_int_eq(clt_tensor_dim(x, 2), ds->rows);
        ck_assert_int_eq(clt_tensor_dim(x, 3), ds->cols);
    }
    ck_assert_int_eq(clt_tensor_dim(x, 0), b);
    float *xs = clt_test_read(x);
    int32_t *ys = malloc((size_t)b * sizeof *ys + 1);
    ck_assert_ok(clt_to_host(y, ys, (size_t)b * sizeof *ys));
    out->count = b;
    for (int64_t k = 0; k < b; k++) {
        const float *img = xs + k * pixels;
        int64_t idx = (int64_t)(img[0] * 255.0f + 0.5f) + 256 * (int64_t)(img[1] * 255.0f + 0.5f);
        ck_assert_int_lt(idx, ds->n);
        out->index[k] = idx;
        ck_assert_int_eq(ys[k], ds->labels[idx]);
        const uint8_t *src = ds->images + idx * pixels;
        /* One report per failure, not a passing ck_assert (a write to the
         * file Check's parent process reads) per pixel. */
        for (int64_t p = 0; p < pixels; p++)
            if (img[p] != (float)src[p] / 255.0f || !(img[p] >= 0.0f && img[p] <= 1.0f))
                ck_abort_msg("example %lld, pixel %lld: %.9g, not %.9g", (long long)idx, (long long)p, img[p],
                             (double)((float)src[p] / 255.0f));
    }
    free(xs);
    free(ys);
}

/* Runs one epoch and returns its batches (nb of them). */
static void run_epoch(clt_loader *l, const clt_dataset *ds, int flatten, batch *batches, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        clt_tensor *x, *y;
        ck_assert_ok(clt_loader_next(l, &x, &y));
        ck_assert_ptr_nonnull(x);
        read_batch(ds, x, y, flatten, &batches[i]);
        clt_tensor_release(x);
        clt_tensor_release(y);
    }
    clt_tensor *x = (clt_tensor *)1, *y = (clt_tensor *)1;
    int64_t epoch = clt_loader_epoch(l);
    ck_assert_ok(clt_loader_next(l, &x, &y));
    ck_assert_ptr_null(x);
    ck_assert_ptr_null(y);
    ck_assert_int_eq(clt_loader_epoch(l), epoch + 1);
}

/* The epoch's order, flattened. */
static void order_of(const batch *batches, int64_t nb, int64_t *order)
{
    int64_t k = 0;
    for (int64_t i = 0; i < nb; i++)
        for (int64_t j = 0; j < batches[i].count; j++) order[k++] = batches[i].index[j];
}

START_TEST(test_batches_and_shuffling)
{
    enum { N = 23, B = 5, NB = 5 };
    clt_dataset ds = make_dataset(N, 5, 3);
    clt_loader_options o = clt_loader_default_options();
    ck_assert_int_eq(o.batch_size, 256);
    ck_assert_int_eq(o.shuffle, 1);
    ck_assert_int_eq(o.world, 1);
    o.batch_size = B;
    o.seed = 7;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    ck_assert_int_eq(clt_loader_num_examples(l), N);
    ck_assert_int_eq(clt_loader_num_batches(l), NB);
    ck_assert_int_eq(clt_loader_epoch(l), 0);

    batch e0[NB], e1[NB], again[NB];
    int64_t o0[N], o1[N], oa[N];
    run_epoch(l, &ds, 0, e0, NB);
    run_epoch(l, &ds, 0, e1, NB);
    for (int i = 0; i < NB - 1; i++) ck_assert_int_eq(e0[i].count, B);
    ck_assert_int_eq(e0[NB - 1].count, N - (NB - 1) * B); /* the last partial batch is kept */
    order_of(e0, NB, o0);
    order_of(e1, NB, o1);
    /* Each epoch is a permutation, shuffled, and different from the last. */
    int seen[N] = {0}, identity = 1, same = 1;
    for (int i = 0; i < N; i++) {
        seen[o0[i]]++;
        identity &= o0[i] == i;
        same &= o0[i] == o1[i];
    }
    for (int i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
    ck_assert(!identity);
    ck_assert(!same);

    /* Same seed: same orders, also when starting at epoch 1 directly. */
    clt_loader *l2;
    ck_assert_ok(clt_loader_create(&l2, &ds, clt_test_cpu(), &o));
    run_epoch(l2, &ds, 0, again, NB);
    order_of(again, NB, oa);
    for (int i = 0; i < N; i++) ck_assert_int_eq(oa[i], o0[i]);
    ck_assert_ok(clt_loader_set_epoch(l2, 1));
    run_epoch(l2, &ds, 0, again, NB);
    order_of(again, NB, oa);
    for (int i = 0; i < N; i++) ck_assert_int_eq(oa[i], o1[i]);
    /* set_epoch rewinds mid-epoch. */
    clt_tensor *x, *y;
    ck_assert_ok(clt_loader_next(l2, &x, &y));
    clt_tensor_release(x);
    clt_tensor_release(y);
    ck_assert_ok(clt_loader_set_epoch(l2, 0));
    run_epoch(l2, &ds, 0, again, NB);
    order_of(again, NB, oa);
    for (int i = 0; i < N; i++) ck_assert_int_eq(oa[i], o0[i]);
    ck_assert_status(clt_loader_set_epoch(l2, -1), CLT_ERR_INVALID_ARGUMENT);
    clt_loader_free(l2);

    /* Another seed: another order. */
    o.seed = 8;
    ck_assert_ok(clt_loader_create(&l2, &ds, clt_test_cpu(), &o));
    run_epoch(l2, &ds, 0, again, NB);
    order_of(again, NB, oa);
    same = 1;
    for (int i = 0; i < N; i++) same &= oa[i] == o0[i];
    ck_assert(!same);
    clt_loader_free(l2);
    clt_loader_free(l);
    clt_loader_free(NULL);

    /* The order for a given seed is part of reproducibility across
     * versions: resuming a run must see the same batches. */
    clt_dataset ten = make_dataset(10, 1, 2);
    o = clt_loader_default_options();
    o.batch_size = 10;
    o.seed = 1234;
    ck_assert_ok(clt_loader_create(&l, &ten, clt_test_cpu(), &o));
    run_epoch(l, &ten, 0, again, 1);
    const int64_t pinned[10] = {4, 5, 9, 6, 3, 2, 1, 8, 7, 0};
    for (int i = 0; i < 10; i++) ck_assert_int_eq(again[0].index[i], pinned[i]);
    clt_loader_free(l);
    clt_dataset_free(&ten);
    clt_dataset_free(&ds);
    clt_dataset_free(NULL);
    ck_assert_ptr_null(ds.images);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_file_order_subset_and_flatten)
{
    clt_dataset ds = make_dataset(300, 28, 28);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = 64;
    o.shuffle = 0;
    o.flatten = 1;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    ck_assert_int_eq(clt_loader_num_batches(l), 5);
    batch b[5];
    int64_t order[300];
    for (int epoch = 0; epoch < 2; epoch++) {
        run_epoch(l, &ds, 1, b, 5);
        ck_assert_int_eq(b[4].count, 300 - 4 * 64);
        order_of(b, 5, order);
        for (int i = 0; i < 300; i++) ck_assert_int_eq(order[i], i);
    }
    clt_loader_free(l);

    /* The first 37 examples only, shuffled among themselves; batch larger
     * than the subset gives one batch. */
    o.shuffle = 1;
    o.flatten = 0;
    o.limit = 37;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    ck_assert_int_eq(clt_loader_num_examples(l), 37);
    ck_assert_int_eq(clt_loader_num_batches(l), 1);
    run_epoch(l, &ds, 0, b, 1);
    ck_assert_int_eq(b[0].count, 37);
    int seen[37] = {0};
    for (int i = 0; i < 37; i++) seen[b[0].index[i]]++;
    for (int i = 0; i < 37; i++) ck_assert_int_eq(seen[i], 1);
    clt_loader_free(l);

    /* A limit past the end means everything. */
    o.limit = 1000;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    ck_assert_int_eq(clt_loader_num_examples(l), 300);
    clt_loader_free(l);

    o = clt_loader_default_options();
    o.batch_size = 0;
    ck_assert_status(clt_loader_create(&l, &ds, clt_test_cpu(), &o), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(l);
    o = clt_loader_default_options();
    o.rank = 2;
    o.world = 2;
    ck_assert_status(clt_loader_create(&l, &ds, clt_test_cpu(), &o), CLT_ERR_INVALID_ARGUMENT);
    o = clt_loader_default_options();
    o.limit = -1;
    ck_assert_status(clt_loader_create(&l, &ds, clt_test_cpu(), &o), CLT_ERR_INVALID_ARGUMENT);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Every byte value scales to v / 255.0f exactly, in the runs of 16 pixels
 * the host path converts together (src/data/loader.c) and in the one pixel
 * left of a 17x17 row: with 256 examples, (31 i + 7 p) mod 256 takes every
 * value at every pixel p >= 2. */
START_TEST(test_scaling_every_byte)
{
    clt_dataset ds = make_dataset(256, 17, 17);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = 100;
    o.flatten = 1;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
    batch b[3];
    run_epoch(l, &ds, 1, b, 3);
    ck_assert_int_eq(b[2].count, 56);
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* With world w, the shards of each global batch are disjoint, cover it in
 * order, and follow the same epoch order on every rank. */
START_TEST(test_shards)
{
    enum { N = 29, B = 8, NB = 4 };
    clt_dataset ds = make_dataset(N, 2, 2);
    for (int world = 1; world <= 4; world++) {
        clt_loader_options o = clt_loader_default_options();
        o.batch_size = B;
        o.seed = 99;
        clt_loader *whole;
        ck_assert_ok(clt_loader_create(&whole, &ds, clt_test_cpu(), &o));
        batch full[NB], part[4][NB];
        run_epoch(whole, &ds, 0, full, NB);
        clt_loader_free(whole);
        o.world = world;
        for (int r = 0; r < world; r++) {
            o.rank = r;
            clt_loader *l;
            ck_assert_ok(clt_loader_create(&l, &ds, clt_test_cpu(), &o));
            ck_assert_int_eq(clt_loader_num_batches(l), NB);
            run_epoch(l, &ds, 0, part[r], NB);
            clt_loader_free(l);
        }
        for (int b = 0; b < NB; b++) {
            int64_t k = 0;
            for (int r = 0; r < world; r++) {
                int64_t len = full[b].count;
                ck_assert_int_eq(part[r][b].count, len * (r + 1) / world - len * r / world);
                for (int64_t j = 0; j < part[r][b].count; j++)
                    ck_assert_int_eq(part[r][b].index[j], full[b].index[k++]);
            }
            ck_assert_int_eq(k, full[b].count);
        }
    }
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

static char dir[256];

static void remove_dir(void) { clt_test_remove_dir(dir); }

static void write_split(const char *prefix, const clt_dataset *ds, int gzip_images, int gzip_labels)
{
    char path[512];
    int64_t img[] = {ds->n, ds->rows, ds->cols}, lab[] = {ds->n};
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gzip_images ? ".gz" : "");
    ck_assert_ok(clt_idx_write(path, 3, img, ds->images, gzip_images));
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gzip_labels ? ".gz" : "");
    ck_assert_ok(clt_idx_write(path, 1, lab, ds->labels, gzip_labels));
}

START_TEST(test_fashion_mnist_files)
{
    snprintf(dir, sizeof dir, "/tmp/clt-test-loader-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    clt_dataset train = make_dataset(23, 28, 28), test = make_dataset(11, 28, 28), got;
    write_split("train", &train, 1, 0);
    write_split("t10k", &test, 0, 1);
    for (int split = 0; split < 2; split++) {
        const clt_dataset *want = split ? &test : &train;
        ck_assert_ok(clt_fashion_mnist_load(&got, dir, split ? CLT_SPLIT_TEST : CLT_SPLIT_TRAIN));
        ck_assert_int_eq(got.n, want->n);
        ck_assert_int_eq(got.rows, 28);
        ck_assert_int_eq(got.cols, 28);
        ck_assert_int_eq(got.num_classes, 10);
        ck_assert_int_eq(memcmp(got.images, want->images, (size_t)(want->n * 784)), 0);
        ck_assert_int_eq(memcmp(got.labels, want->labels, (size_t)want->n), 0);
        clt_dataset_free(&got);
    }
    ck_assert_str_eq(clt_fashion_mnist_label_name(0), "T-shirt/top");
    ck_assert_str_eq(clt_fashion_mnist_label_name(9), "Ankle boot");
    ck_assert_str_eq(clt_fashion_mnist_label_name(10), "?");

    /* Mismatched counts, a label past 9, other image sizes, missing files. */
    char path[512];
    int64_t lab[] = {10};
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    ck_assert_ok(clt_idx_write(path, 1, lab, test.labels, 1));
    ck_assert_status(clt_fashion_mnist_load(&got, dir, CLT_SPLIT_TEST), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "11 images"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "10 labels"));
    ck_assert_ptr_null(got.images);
    test.labels[3] = 12;
    write_split("t10k", &test, 0, 1);
    ck_assert_status(clt_fashion_mnist_load(&got, dir, CLT_SPLIT_TEST), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "0..9"));
    clt_dataset odd = make_dataset(4, 27, 28);
    write_split("t10k", &odd, 0, 1);
    ck_assert_status(clt_fashion_mnist_load(&got, dir, CLT_SPLIT_TEST), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "27x28"));
    /* Image and label files swapped. */
    char images[512], labels[512];
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte", dir);
    ck_assert_status(clt_dataset_load_idx(&got, labels, images), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "2 dimensions or more"));
    unlink(labels);
    ck_assert_status(clt_fashion_mnist_load(&got, dir, CLT_SPLIT_TRAIN), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "train-labels-idx1-ubyte"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "fetch-fashion-mnist"));
    clt_dataset_free(&odd);
    clt_dataset_free(&train);
    clt_dataset_free(&test);
    remove_dir();
}
END_TEST

static uint64_t total_syncs(void)
{
    uint64_t n = clt_sync_count(clt_pinned());
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        n += clt_sync_count(d);
    }
    return n;
}

static void reset_syncs(void)
{
    clt_sync_reset_count(clt_pinned());
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        clt_sync_reset_count(d);
    }
}

/* One step on a loader batch; adds loss * batch to total. */
static void step(clt_model *m, clt_optimizer *opt, clt_loader *l, clt_tensor *total)
{
    clt_tensor *x, *y, *logits, *loss, *dlogits;
    ck_assert_ok(clt_loader_next(l, &x, &y));
    ck_assert_ptr_nonnull(x);
    ck_assert_ok(clt_model_zero_grad(m));
    ck_assert_ok(clt_model_forward(m, x, &logits));
    ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
    ck_assert_ok(clt_model_backward(m, dlogits, NULL));
    ck_assert_ok(clt_optimizer_step(opt));
    ck_assert_ok(clt_axpy_(total, (float)clt_tensor_dim(x, 0), loss));
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
}

/* A hand-written loop over the loader and a model needs no synchronization
 * point until the loss is read, on the host path and with the set resident
 * (_i: o.resident, which keeps it on a GPU-class device): with the device held back (a gate) no copy finishes,
 * so the loader must stage every batch in a buffer of its own rather than
 * wait to reuse one. */
START_TEST(test_epoch_without_sync_points)
{
    enum { N = 1000, B = 50 };
    clt_dataset ds = make_dataset(N, 28, 28);
    clt_device dev = clt_try_gpu(0);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = B;
    o.flatten = 1;
    o.resident = _i;
    clt_loader *l;
    ck_assert_ok(clt_loader_create(&l, &ds, dev, &o));
    int64_t hidden[] = {16}, one = 1;
    clt_model *m;
    clt_optimizer *opt;
    clt_tensor *total;
    ck_assert_ok(clt_model_create_mlp(&m, dev, 28 * 28, 1, hidden, 10, 3));
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    ck_assert_ok(clt_zeros(&total, dev, CLT_FLOAT32, 1, &one));
    step(m, opt, l, total); /* kernels built, gradients and optimizer state made */
    ck_assert_ok(clt_synchronize_all());
    ck_assert_ok(clt_loader_set_epoch(l, 1));
    reset_syncs();

    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    cl_event gate = clt_test_close_gate(dev);
    for (int i = 0; i < N / B; i++) step(m, opt, l, total);
    ck_assert_int_eq(total_syncs(), 0);
    double v;
    ck_assert_status(clt_item(total, &v), CLT_ERR_SYNC);
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_test_open_gate(gate);
    ck_assert_ok(clt_item(total, &v));
    ck_assert_int_eq(total_syncs(), 1);
    ck_assert(v > 0 && v < 10.0 * (N + B));
    clt_tensor_release(total);
    clt_optimizer_free(opt);
    clt_model_free(m);
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* The bytes of a tensor, read back (nbytes of them, +1 so a size of 0 mallocs). */
static void *bytes_of(const clt_tensor *t)
{
    void *out = malloc(clt_tensor_nbytes(t) + 1);
    ck_assert_ok(clt_to_host(t, out, clt_tensor_nbytes(t)));
    return out;
}

static void same_tensor(const clt_tensor *a, const clt_tensor *b)
{
    ck_assert_int_eq(clt_tensor_dtype(a), clt_tensor_dtype(b));
    ck_assert_int_eq(clt_tensor_ndim(a), clt_tensor_ndim(b));
    for (int d = 0; d < clt_tensor_ndim(a); d++) ck_assert_int_eq(clt_tensor_dim(a, d), clt_tensor_dim(b, d));
    void *x = bytes_of(a), *y = bytes_of(b);
    ck_assert_msg(memcmp(x, y, clt_tensor_nbytes(a)) == 0, "the resident batch differs from the host loader's");
    free(x);
    free(y);
}

/* Two epochs of ds through a resident loader and a host one: the same
 * batches to the bit, the resident one launching one kernel
 * (cl/gather.cl) per batch. */
static void resident_matches_host(const clt_dataset *ds, clt_loader_options o)
{
    clt_device dev = clt_try_gpu(0);
    clt_loader *res, *host;
    clt_loader_options h = o;
    h.resident = 0;
    o.resident = 1;
    ck_assert_ok(clt_loader_create(&res, ds, dev, &o));
    ck_assert_ok(clt_loader_create(&host, ds, dev, &h));
    uint64_t kernels = 0, batches = 0;
    for (int k = 0; k < 2 * (clt_loader_num_batches(res) + 1); k++) {
        clt_tensor *x, *y, *hx, *hy;
        clt_test_kernels_start();
        ck_assert_ok(clt_loader_next(res, &x, &y));
        kernels += clt_test_kernels_stop();
        ck_assert_ok(clt_loader_next(host, &hx, &hy));
        ck_assert((x == NULL) == (hx == NULL));
        if (x) {
            batches++;
            same_tensor(x, hx);
            same_tensor(y, hy);
        }
        clt_tensor_release(x);
        clt_tensor_release(y);
        clt_tensor_release(hx);
        clt_tensor_release(hy);
    }
    ck_assert_int_eq(batches, 2 * clt_loader_num_batches(res));
    ck_assert_int_eq(kernels, batches);
    clt_loader_free(res);
    clt_loader_free(host);
    clt_test_assert_no_live_tensors();
}

/* On the GPU class (CLT_DEVICE_CLASS=gpu; a CPU-class device keeps the
 * host path, docs/data.md): images of 5x7 bytes (runs shorter than 16) and of
 * 16x16 holding all 256 byte values, a float32 table with int32 classes,
 * and a regression's targets, shuffled, with a limit and a partial last
 * batch, 4-D and flattened. */
START_TEST(test_resident_matches_host)
{
    const char *was = getenv("CLT_DEVICE_CLASS");
    char *old = was ? strdup(was) : NULL;
    setenv("CLT_DEVICE_CLASS", "gpu", 1);
    clt_dataset img = make_dataset(301, 5, 7);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = 64;
    o.seed = 11;
    resident_matches_host(&img, o);
    o.flatten = 1;
    o.limit = 200;
    resident_matches_host(&img, o);
    clt_dataset_free(&img);
    clt_dataset all = make_dataset(37, 16, 16);
    for (int64_t i = 0; i < all.n * 256; i++) all.images[i] = (uint8_t)(i + i / 256);
    o = clt_loader_default_options();
    o.batch_size = 8;
    resident_matches_host(&all, o);
    clt_dataset_free(&all);

    enum { N = 97, W = 6, K = 3 };
    clt_dataset tab = {.n = N, .rows = 1, .cols = W, .num_classes = 4};
    tab.x = malloc(N * W * sizeof *tab.x);
    tab.classes = malloc(N * sizeof *tab.classes);
    tab.values = malloc(N * K * sizeof *tab.values);
    for (int i = 0; i < N * W; i++) tab.x[i] = (float)i * 0.37f - 11.0f;
    for (int i = 0; i < N; i++) tab.classes[i] = i % 4;
    for (int i = 0; i < N * K; i++) tab.values[i] = (float)i / 7.0f;
    o = clt_loader_default_options();
    o.batch_size = 10;
    resident_matches_host(&tab, o);
    tab.task = CLT_TASK_REGRESS;
    tab.outputs = K;
    tab.num_classes = 0;
    resident_matches_host(&tab, o);
    clt_dataset_free(&tab);
    if (old) setenv("CLT_DEVICE_CLASS", old, 1);
    else unsetenv("CLT_DEVICE_CLASS");
    free(old);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_batches_and_shuffling);
    tcase_add_test(tc, test_file_order_subset_and_flatten);
    tcase_add_test(tc, test_shards);
    tcase_add_test(tc, test_scaling_every_byte);
    tcase_add_test(tc, test_fashion_mnist_files);
    tcase_add_loop_test(tc, test_epoch_without_sync_points, 0, 2);
    tcase_add_test(tc, test_resident_matches_host);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
