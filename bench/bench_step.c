/* Host time per training step with and without replay (src/device/replay.h),
 * or with the loader's host path and with the data set resident.
 *
 *   bench_step [MODEL BATCH STEPS REPEATS [SIDES]]
 *
 * MODEL is mlp (784-64-10) or resmlp (the capstone's 784-256, 2 residual
 * blocks, 10); defaults: mlp 32 200 5 replay. Trains on clt_try_gpu(0)
 * with SGD lr 0.1 on random images, each step as the trainer runs it (a
 * batch from the loader, clt__train_step, through clt__replayed_step),
 * REPEATS runs of STEPS steps alternating the two sides, after 20 warm-up
 * steps each. SIDES replay (16 batches of images) alternates CLT_REPLAY=0
 * and 1; SIDES loader (60,000 images, Fashion-MNIST's training set)
 * alternates a loader on the host path (resident 0) and one with the set
 * resident (src/data/resident.c; a GPU-class device only, so on pocl run
 * it with CLT_DEVICE_CLASS=gpu), replay as CLT_REPLAY says. Per step it
 * times the host call that enqueues the step (host), that call less its
 * clt_loader_next (the batch's upload; on the resident path, the indices'
 * upload and the gather's launch, which a replay holds back and replays
 * with the step), the host thread's CPU time in that call (host CPU: less
 * lengthened by other processes' load than the others) and, after waiting
 * for the device (clt_synchronize), the whole step (wall); then STEPS
 * steps more enqueued one after the other with one wait at the end, as
 * training runs them (pipelined, per step). Prints the medians of each
 * side over every run and the steps replayed.
 * Set CLT_DEVICE_CLASS=gpu for the GPU-class branch. */
#define BENCH_NAME "bench_step"
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../src/device/replay.h"
#include "../src/trainer/engine.h"
#include "../src/trainer/step.h"

typedef struct trainer {
    clt_model *model;
    clt_optimizer *opt;
    clt_loader *loader; /* the side's: loaders[side] */
    clt_loader *loaders[2];
    clt_tensor *loss_sum;
    double batch_seconds; /* the last step's in clt_loader_next */
} trainer;

/* One step as the trainer's one-device backend runs it. */
static clt_status one_step(void *ctx, int64_t *n, int *stop)
{
    (void)stop;
    trainer *t = ctx;
    clt__step_tensors st = {0};
    double t0 = now();
    clt_status s = clt_loader_next(t->loader, &st.x, &st.y);
    if (s == CLT_OK && !st.x) s = clt_loader_next(t->loader, &st.x, &st.y); /* the next epoch */
    t->batch_seconds = now() - t0;
    *n = st.x ? clt_tensor_dim(st.x, 0) : 0;
    clt__step_options so = {0};
    if (s == CLT_OK) s = clt__train_step(t->model, t->opt, &st, t->loss_sum, 0, &so);
    clt__step_tensors_release(&st);
    return s;
}

/* STEPS steps enqueued one after the other, one wait at the end: the seconds per step. */
static double pipelined(trainer *t, clt_device dev, int steps)
{
    double t0 = now();
    for (int i = 0; i < steps; i++) {
        int64_t n;
        int stop = 0;
        CHECK(clt__replayed_step(t->model, 1, one_step, t, &n, &stop));
    }
    CHECK(clt_synchronize(dev));
    return (now() - t0) / steps;
}

/* Seconds of CPU the calling thread has used. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One side's seconds per step: host (the call), own (the call less the
 * batch's), wall (the call and the wait for the device), cpu (the host
 * thread's CPU time in the call). */
typedef struct samples {
    double *host, *own, *wall, *cpu;
} samples;

/* STEPS steps, each one's seconds appended to s at *at (s NULL: none kept). */
static void run(trainer *t, clt_device dev, int steps, const samples *s, int *at)
{
    for (int i = 0; i < steps; i++) {
        int64_t n;
        int stop = 0;
        double t0 = now(), c0 = thread_cpu();
        CHECK(clt__replayed_step(t->model, 1, one_step, t, &n, &stop));
        double t1 = now(), c1 = thread_cpu();
        CHECK(clt_synchronize(dev));
        if (!s) continue;
        s->host[*at] = t1 - t0;
        s->own[*at] = t1 - t0 - t->batch_seconds;
        s->wall[*at] = now() - t0;
        s->cpu[(*at)++] = c1 - c0;
    }
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "mlp";
    int64_t batch = argc > 2 ? atoll(argv[2]) : 32;
    int steps = argc > 3 ? atoi(argv[3]) : 200, repeats = argc > 4 ? atoi(argv[4]) : 5;
    const char *sides = argc > 5 ? argv[5] : "replay";
    int resmlp = strcmp(model, "resmlp") == 0, loaders = strcmp(sides, "loader") == 0;
    if ((!resmlp && strcmp(model, "mlp") != 0) || batch < 1 || steps < 1 || repeats < 1 ||
        (!loaders && strcmp(sides, "replay") != 0)) {
        fprintf(stderr, "usage: bench_step [mlp|resmlp BATCH STEPS REPEATS [replay|loader]]\n");
        return 2;
    }
    clt_device dev = clt_try_gpu(0);
    clt_dataset ds = {.n = loaders ? 60000 : batch * 16, .rows = 28, .cols = 28, .num_classes = 10};
    ds.images = malloc((size_t)ds.n * 784);
    ds.labels = malloc((size_t)ds.n);
    if (!ds.images || !ds.labels) return 1;
    for (int64_t i = 0; i < ds.n * 784; i++) ds.images[i] = (uint8_t)(i * 2654435761u >> 24);
    for (int64_t i = 0; i < ds.n; i++) ds.labels[i] = (uint8_t)(i % 10);
    trainer t = {0};
    int64_t hidden = 64, one = 1;
    if (resmlp) CHECK(clt_model_create_resmlp(&t.model, dev, 784, 256, 2, 10, 1));
    else CHECK(clt_model_create_mlp(&t.model, dev, 784, 1, &hidden, 10, 1));
    clt_model_set_training(t.model, 1);
    CHECK(clt_optimizer_create_sgd(&t.opt, t.model, 0.1f, 0, 0));
    clt_loader_options lo = clt_loader_default_options();
    lo.batch_size = batch;
    lo.flatten = 1;
    for (int side = 0; side < 1 + loaders; side++) {
        lo.resident = loaders ? side : 1;
        CHECK(clt_loader_create(&t.loaders[side], &ds, dev, &lo));
    }
    CHECK(clt_zeros(&t.loss_sum, dev, CLT_FLOAT32, 1, &one));
    size_t per = (size_t)steps * (size_t)repeats;
    samples sm[2];
    double *pipe[2];
    int at[2] = {0, 0};
    uint64_t replayed = 0;
    for (int side = 0; side < 2; side++) {
        sm[side] = (samples){malloc(per * sizeof(double)), malloc(per * sizeof(double)),
                             malloc(per * sizeof(double)), malloc(per * sizeof(double))};
        pipe[side] = malloc((size_t)repeats * sizeof(double));
        if (!sm[side].host || !sm[side].own || !sm[side].wall || !sm[side].cpu || !pipe[side]) return 1;
    }
    for (int r = 0; r < repeats; r++)
        for (int side = 0; side < 2; side++) {
            if (!loaders) setenv("CLT_REPLAY", side ? "1" : "0", 1);
            t.loader = t.loaders[loaders ? side : 0];
            run(&t, dev, 20, NULL, NULL); /* warm-up: compilation, recordings */
            uint64_t before = clt__replay_count();
            run(&t, dev, steps, &sm[side], &at[side]);
            replayed += clt__replay_count() - before;
            pipe[side][r] = pipelined(&t, dev, steps);
        }
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));
    double h[2], o[2], w[2], c[2], pl[2];
    for (int side = 0; side < 2; side++) {
        h[side] = 1e6 * median(sm[side].host, (int)per);
        o[side] = 1e6 * median(sm[side].own, (int)per);
        w[side] = 1e6 * median(sm[side].wall, (int)per);
        c[side] = 1e6 * median(sm[side].cpu, (int)per);
        pl[side] = 1e6 * median(pipe[side], repeats);
    }
    printf("%s batch %lld on %s, %d x %d steps, median us/step %s:\n"
           "  host %.1f / %.1f (%.2fx), host less the batch's %.1f / %.1f (%.2fx), host CPU %.1f / %.1f (%.2fx), "
           "wall %.1f / %.1f (%.2fx), pipelined %.1f / %.1f (%.2fx); %llu of %zu steps replayed\n",
           resmlp ? "resmlp 784-256x2-10" : "mlp 784-64-10", (long long)batch, name, repeats, steps,
           loaders ? "host path / resident set" : "without / with replay", h[0], h[1], h[0] / h[1], o[0], o[1],
           o[0] / o[1], c[0], c[1], c[0] / c[1], w[0], w[1], w[0] / w[1], pl[0], pl[1], pl[0] / pl[1],
           (unsigned long long)replayed, loaders ? 2 * per : per); /* the sides that may replay */
    return 0;
}
