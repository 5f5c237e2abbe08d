/* Start-up cost: the time from main() to the end of the first training step
 * of the capstone (ResMLP 784-256-2x256-10, batch 256, SGD), split into
 * device set-up, model creation, the warm-up (clt_model_warmup, as
 * clt_trainer_fit runs it: builds or loads every kernel program the step
 * uses and launches each kernel once) and the first step after it. Run it
 * with empty caches (POCL_CACHE_DIR, CLT_CACHE_DIR) for the cold start, then
 * again with the same ones for the warm start of issue 8. The warm-up is
 * split into the programs' builds (clBuildProgram) and the rest, mostly the
 * driver's compilation of each kernel at its first launch; the CPU seconds
 * are the process's threads' and its children's (pocl runs the linker once
 * per kernel it compiles). bench/run also times the whole process.
 * Usage: bench_start [device]   (default cpu:0) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "bench_start"
#include "bench.h"

enum { B = 256, IN = 784, H = 256, OUT = 10 };

/* CPU seconds (user + system) of the process's threads, or of its children. */
static double cpu_seconds(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char **argv)
{
    double t0 = now();
    clt_device dev = clt_cpu();
    if (argc > 1) CHECK(clt_device_parse(argv[1], &dev));
    clt_tensor *X, *y;
    int64_t xs[] = {B, IN}, ys[] = {B};
    int32_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = i % OUT;
    CHECK(clt_zeros(&X, dev, CLT_FLOAT32, 2, xs));
    CHECK(clt_from_host(&y, dev, CLT_INT32, 1, ys, labels));
    CHECK(clt_synchronize(dev));
    double t1 = now();
    clt_model *net;
    clt_optimizer *opt;
    CHECK(clt_model_create_resmlp(&net, dev, IN, H, 2, OUT, 0));
    CHECK(clt_optimizer_create_sgd(&opt, net, 0.1f, 0.0f, 0.0f));
    CHECK(clt_synchronize(dev));
    double t2 = now();
    clt_warmup_result w;
    CHECK(clt_model_warmup(net, B, CLT_OPTIMIZER_SGD, 0.0, 0, &w));
    double tw = now();
    clt_tensor *logits, *loss, *dlogits;
    CHECK(clt_model_zero_grad(net));
    CHECK(clt_model_forward(net, X, &logits));
    CHECK(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
    CHECK(clt_model_backward(net, dlogits, NULL));
    CHECK(clt_optimizer_step(opt));
    double l;
    CHECK(clt_item(loss, &l));
    double t3 = now();
    printf("device and data %.3f s, model %.3f s, warm-up %.3f s (%d programs compiled in %.3f s, %d loaded; "
           "first launches and the rest %.3f s), first step %.3f s; main() to first step done %.3f s, "
           "CPU %.3f s in the process and %.3f s in its children\n",
           t1 - t0, t2 - t1, tw - t2, w.programs_built, w.build_seconds, w.programs_loaded, tw - t2 - w.build_seconds,
           t3 - tw, t3 - t0, cpu_seconds(RUSAGE_SELF), cpu_seconds(RUSAGE_CHILDREN));
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    clt_tensor_release(X);
    clt_tensor_release(y);
    clt_optimizer_free(opt);
    clt_model_free(net);
    return 0;
}
