/* The chapter's exercises 1 and 2 with the memory planner (cltensor/plan.h).
 * 1: predicted vs measured peak of a training step of the four-plateau MLP
 *    (1024 -> 4096 x 3 -> 10 with Adam; --small: 256 -> 512 x 3 -> 10) at
 *    batch 64, 256 and 1024.
 * 2: a ResMLP of 16 blocks (width 128) with Adam under a memory cap (--cap
 *    MiB, default 24): the largest batch each variant, without and with
 *    checkpointing, trains at, found by bisection on real steps, against the
 *    planner's largest batch for that cap.
 * Uses CLT_DEVICE when set, else try_gpu(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "example.h"

#define MIB (1024.0 * 1024.0)

static clt_device dev;

/* The trainer's step on a random batch made on the device; its status. */
static clt_status step(clt_model *m, clt_optimizer *opt, int64_t rows, int64_t in, int classes)
{
    int64_t shape[2] = {rows, in};
    int32_t *lab = malloc((size_t)rows * sizeof *lab);
    if (!lab) return CLT_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < rows; i++) lab[i] = (int32_t)(i % classes);
    clt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_randn(&x, dev, 2, shape, 1);
    if (s == CLT_OK) s = clt_from_host(&y, dev, CLT_INT32, 1, &rows, lab);
    free(lab);
    if (s == CLT_OK) s = clt_model_forward(m, x, &logits);
    if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y);
    if (s == CLT_OK) s = clt_model_zero_grad(m);
    if (s == CLT_OK) s = clt_model_backward(m, dlogits, NULL);
    if (s == CLT_OK) s = clt_optimizer_step(opt);
    if (s == CLT_OK) s = clt_synchronize(dev);
    /* In the trainer's order: it decides which cached blocks serve next. */
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    return s;
}

static clt_plan_options adam_plan(int64_t batch, int segments)
{
    clt_plan_options o = clt_plan_default_options();
    o.batch_size = batch;
    o.optimizer = CLT_OPTIMIZER_ADAM;
    o.recompute_blocks = segments;
    o.device = dev;
    return o;
}

static void exercise1(int small)
{
    int64_t in = small ? 256 : 1024, h = small ? 512 : 4096, hiddens[3] = {h, h, h};
    clt_model *m;
    clt_optimizer *opt;
    CHECK(clt_model_create_mlp(&m, dev, in, 3, hiddens, 10, 0));
    CHECK(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    printf("exercise 1: MLP %lld -> %lld x 3 -> 10, Adam\n", (long long)in, (long long)h);
    printf("  batch  predicted MiB  measured MiB   error  (weights+grads+Adam %.1f MiB)\n",
           4.0 * 4 * clt_model_num_parameter_elements(m) / MIB);
    const int64_t batches[] = {64, 256, 1024};
    for (int k = 0; k < 3; k++) {
        clt_plan p;
        clt_plan_options o = adam_plan(batches[k], 0);
        CHECK(clt_plan_step(m, &o, &p));
        CHECK(step(m, opt, batches[k], in, 10)); /* creates gradients and state */
        CHECK(clt_memory_reset_peak(dev));
        CHECK(step(m, opt, batches[k], in, 10));
        int64_t peak = clt_memory_max_allocated(dev);
        printf("  %5lld  %13.2f  %12.2f  %+5.2f%%\n", (long long)batches[k], p.peak / MIB, peak / MIB,
               100.0 * ((double)p.peak - (double)peak) / (double)peak);
    }
    clt_optimizer_free(opt);
    clt_model_free(m);
}

enum { IN = 32, H = 128, BLOCKS = 16 };

/* Training from scratch under the cap, as `clt train` with CLT_MEMORY_CAP
 * would: the model made, then two steps at the batch (the first makes the
 * gradients and Adam's state). Whether all of it fits. */
static int trains(int64_t cap, int segments, int64_t batch)
{
    CHECK(clt_memory_empty_cache(dev));
    CHECK(clt_memory_set_cap(dev, cap));
    clt_model *m = NULL;
    clt_optimizer *opt = NULL;
    clt_status s = clt_model_create_resmlp(&m, dev, IN, H, BLOCKS, 10, 0);
    if (s == CLT_OK) s = clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0);
    if (s == CLT_OK) s = clt_model_set_recompute(m, segments);
    for (int k = 0; k < 2 && s == CLT_OK; k++) s = step(m, opt, batch, IN, 10);
    clt_optimizer_free(opt);
    clt_model_free(m);
    CHECK(clt_memory_set_cap(dev, 0));
    CHECK(clt_memory_empty_cache(dev));
    if (s != CLT_ERR_OUT_OF_MEMORY) CHECK(s);
    return s == CLT_OK;
}

/* Largest batch in [lo, hi] that trains under the cap (lo known to fit). */
static int64_t bisect(int64_t cap, int segments, int64_t lo, int64_t hi)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (trains(cap, segments, mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static void exercise2(int64_t cap)
{
    printf("exercise 2: ResMLP %d blocks of width %d, Adam, memory cap %.0f MiB\n", BLOCKS, H, cap / MIB);
    int64_t found[2] = {0, 0};
    for (int ck = 0; ck < 2; ck++) {
        int segments = ck ? CLT_RECOMPUTE_AUTO : 0;
        clt_model *m;
        CHECK(clt_model_create_resmlp(&m, dev, IN, H, BLOCKS, 10, 0));
        clt_plan_options o = adam_plan(1, segments);
        int64_t predicted;
        CHECK(clt_plan_max_batch(m, &o, cap, 1 << 22, &predicted));
        /* The planner touches no device memory, but the model has some. */
        clt_model_free(m);
        found[ck] = bisect(cap, segments, 0, predicted + predicted / 4 + 1);
        CHECK(clt_model_create_resmlp(&m, dev, IN, H, BLOCKS, 10, 0));
        o.batch_size = found[ck] > 0 ? found[ck] : 1;
        clt_plan p;
        CHECK(clt_plan_step(m, &o, &p));
        printf("  checkpointing=%-5s largest batch: predicted %6lld, measured %6lld; "
               "at it %.1f MiB allocated, %.1f MiB reserved uncapped, of %.0f MiB\n",
               ck ? "True" : "False", (long long)predicted, (long long)found[ck], p.peak / MIB, p.reserved / MIB,
               cap / MIB);
        clt_model_free(m);
    }
    if (found[0] > 0) printf("  checkpointing goes %.2fx as far\n", (double)found[1] / (double)found[0]);
}

int main(int argc, char **argv)
{
    int small = 0;
    int64_t cap = 24ll << 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0) small = 1;
        else if (strcmp(argv[i], "--cap") == 0 && i + 1 < argc) cap = (int64_t)(atof(argv[++i]) * MIB);
        else {
            fprintf(stderr, "usage: %s [--small] [--cap MiB]\n", argv[0]);
            return 2;
        }
    }
    dev = getenv("CLT_DEVICE") ? clt_device_get_default() : clt_try_gpu(0);
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    printf("device %s\n", name);
    exercise1(small);
    exercise2(cap);
    return 0;
}
