/* The chapter's exercise 3 (section 5.7.7): one epoch of the capstone model
 * (ResMLPClassifier, 256 hiddens, 2 residual blocks, SGD lr 0.1, batch 256
 * on Fashion-MNIST) reading the loss on the host after every step, then
 * again keeping the running loss on the device and reading it once per
 * epoch. Prints both times and the synchronization points each one hit.
 *
 *   sync_points [--data DIR] [--limit N] [--device NAME]
 *
 * DIR defaults to $CLT_DATA_DIR, else data/fashion-mnist (fetched by
 * scripts/fetch-fashion-mnist); without it the example trains on random
 * images so that it still runs. CLT_SYNC_DEBUG=warn names every sync point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

#include "example.h"

/* Random 28x28 images with labels, when the real data is absent. */
static void synthetic(clt_dataset *ds, int64_t n)
{
    ds->n = n;
    ds->rows = ds->cols = 28;
    ds->num_classes = 10;
    ds->images = malloc((size_t)n * 784);
    ds->labels = malloc((size_t)n);
    if (!ds->images || !ds->labels) exit(1);
    uint64_t s = 42;
    for (int64_t i = 0; i < n * 784; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ds->images[i] = (uint8_t)(s >> 56);
    }
    for (int64_t i = 0; i < n; i++) ds->labels[i] = (uint8_t)(i % 10);
}

/* One epoch; per_step = 1 reads the loss after every step (loss.item()),
 * 0 adds it to a device-side total read once at the end. Prints the result
 * unless quiet. */
static void epoch(const clt_dataset *ds, clt_device dev, int64_t limit, int per_step, int quiet)
{
    clt_model *m;
    clt_optimizer *opt;
    CHECK(clt_model_create_resmlp(&m, dev, 784, 256, 2, 10, 0));
    CHECK(clt_optimizer_create_sgd(&opt, m, 0.1f, 0.0f, 0.0f));
    clt_loader_options o = clt_loader_default_options();
    o.limit = limit;
    clt_loader *loader;
    CHECK(clt_loader_create(&loader, ds, dev, &o));
    int64_t one[] = {1};
    clt_tensor *total;
    CHECK(clt_zeros(&total, dev, CLT_FLOAT32, 1, one));
    CHECK(clt_synchronize(dev));
    clt_sync_reset_count(dev);

    double t = now(), sum = 0;
    int64_t steps = 0;
    for (;;) {
        clt_tensor *x, *y, *logits, *loss, *dlogits;
        CHECK(clt_loader_next(loader, &x, &y));
        if (!x) break;
        CHECK(clt_model_zero_grad(m));
        CHECK(clt_model_forward(m, x, &logits));
        CHECK(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
        CHECK(clt_model_backward(m, dlogits, NULL));
        CHECK(clt_optimizer_step(opt));
        if (per_step) {
            double v;
            CHECK(clt_item(loss, &v)); /* the synchronization point */
            sum += v;
        } else {
            int64_t shape1[] = {1};
            clt_tensor *l1;
            CHECK(clt_reshape(&l1, loss, 1, shape1));
            CHECK(clt_add_(total, l1));
            clt_tensor_release(l1);
        }
        steps++;
        clt_tensor_release(x);
        clt_tensor_release(y);
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
    }
    if (!per_step) CHECK(clt_item(total, &sum));
    CHECK(clt_synchronize(dev));
    double elapsed = now() - t;
    unsigned long long syncs = (unsigned long long)clt_sync_count(dev);
    if (!quiet)
        printf("%-32s %7.2f sec, mean loss %.4f, %lld steps, %llu synchronization points\n",
           per_step ? "loss read after every step:" : "loss read once per epoch:", elapsed,
           steps ? sum / (double)steps : 0.0, (long long)steps, syncs);
    clt_tensor_release(total);
    clt_loader_free(loader);
    clt_optimizer_free(opt);
    clt_model_free(m);
}

int main(int argc, char **argv)
{
    const char *dir = getenv("CLT_DATA_DIR");
    if (!dir || !*dir) dir = "data/fashion-mnist";
    clt_device dev = clt_try_gpu(0);
    int64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            limit = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            CHECK(clt_device_parse(argv[++i], &dev));
        } else {
            fprintf(stderr, "usage: %s [--data DIR] [--limit N] [--device NAME]\n", argv[0]);
            return 2;
        }
    }
    clt_dataset ds;
    if (clt_fashion_mnist_load(&ds, dir, CLT_SPLIT_TRAIN) != CLT_OK) {
        printf("no Fashion-MNIST in %s (%s): training on random images\n", dir, clt_last_error());
        synthetic(&ds, limit > 0 ? limit : 6000);
    }
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("one epoch of ResMLP (256 hiddens, 2 blocks) on %lld examples, batch 256, on %s\n",
           (long long)(limit > 0 && limit < ds.n ? limit : ds.n), name);
    epoch(&ds, dev, 512, 0, 1); /* warm up: kernels built, memory cached */
    epoch(&ds, dev, limit, 1, 0);
    epoch(&ds, dev, limit, 0, 0);
    clt_dataset_free(&ds);
    return 0;
}
