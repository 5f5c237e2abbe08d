/* The chapter's activation-checkpointing table (section 5.7.3.2) in C: a
 * stack of 16 residual blocks of width 1024 at batch 8192, one forward and
 * backward of run_stack(blocks, X).sum() without and with checkpointing
 * (segments of sqrt(16) = 4 blocks), peak memory and seconds of each.
 * --small runs width 256 at batch 1024 for slow devices; --blocks N,
 * --width H, --batch B and --segment S set the sizes. Uses CLT_DEVICE when
 * set, else try_gpu(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltensor.h>

#include "example.h"

#define MIB (1024.0 * 1024.0)

/* One run_stack(...).sum().backward(): dy is all ones. */
static void step(clt_model *m, clt_tensor *x)
{
    clt_tensor *y, *dy;
    CHECK(clt_model_forward(m, x, &y));
    CHECK(clt_ones_like(&dy, y));
    clt_tensor_release(y);
    CHECK(clt_model_backward(m, dy, NULL));
    clt_tensor_release(dy);
}

static long arg_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s needs a value\n", argv[*i]);
        exit(2);
    }
    return strtol(argv[++*i], NULL, 10);
}

int main(int argc, char **argv)
{
    long blocks = 16, width = 1024, batch = 8192, segment = CLT_RECOMPUTE_AUTO;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0) {
            width = 256;
            batch = 1024;
        } else if (strcmp(argv[i], "--blocks") == 0) blocks = arg_value(argc, argv, &i);
        else if (strcmp(argv[i], "--width") == 0) width = arg_value(argc, argv, &i);
        else if (strcmp(argv[i], "--batch") == 0) batch = arg_value(argc, argv, &i);
        else if (strcmp(argv[i], "--segment") == 0) segment = arg_value(argc, argv, &i);
        else {
            fprintf(stderr, "usage: %s [--small] [--blocks N] [--width H] [--batch B] [--segment S]\n", argv[0]);
            return 2;
        }
    }
    if (blocks < 1 || width < 1 || batch < 1) {
        fprintf(stderr, "blocks, width and batch must be positive\n");
        return 2;
    }
    clt_device dev = getenv("CLT_DEVICE") ? clt_device_get_default() : clt_try_gpu(0);
    char name[32];
    CHECK(clt_device_name(dev, name, sizeof name));

    clt_model *m;
    CHECK(clt_model_create(&m, ""));
    for (long i = 0; i < blocks; i++) CHECK(clt_model_add_residual(m, width));
    CHECK(clt_model_init(m, dev, 0));
    /* A few rows first: builds the kernels and creates the gradients, which
     * every later step has, outside the measurement. */
    clt_tensor *x;
    int64_t warm_shape[2] = {8, width};
    CHECK(clt_randn(&x, dev, 2, warm_shape, 1));
    step(m, x);
    clt_tensor_release(x);
    int64_t shape[2] = {batch, width};
    CHECK(clt_randn(&x, dev, 2, shape, 1));
    CHECK(clt_synchronize(dev));

    /* What CLT_RECOMPUTE_AUTO picks, spelled out for the label. */
    int seg = segment == CLT_RECOMPUTE_AUTO ? (int)lround(sqrt((double)blocks)) : (int)segment;
    printf("%ld residual blocks of width %ld, batch %ld, on %s; weights %.0f MiB, X %.0f MiB\n", blocks, width,
           batch, name, clt_memory_allocated_category(dev, CLT_MEM_WEIGHTS) / MIB,
           (double)batch * width * 4 / MIB);
    double peak[2], sec[2], act[2];
    for (int use = 0; use < 2; use++) {
        CHECK(clt_model_set_recompute(m, use ? seg : 0));
        CHECK(clt_model_zero_grad(m));
        CHECK(clt_synchronize(dev));
        CHECK(clt_memory_reset_peak(dev));
        double t = now();
        step(m, x);
        CHECK(clt_synchronize(dev));
        sec[use] = now() - t;
        peak[use] = clt_memory_max_allocated(dev) / MIB;
        act[use] = clt_memory_max_allocated_category(dev, CLT_MEM_ACTIVATIONS) / MIB;
        printf("checkpointing=%-5s peak %6.0f MiB (activations %6.0f MiB), %.2f sec\n", use ? "True" : "False",
               peak[use], act[use], sec[use]);
    }
    printf("segments of %d blocks: peak ratio %.2f, activation ratio %.2f, time ratio %.2f\n", seg,
           peak[1] / peak[0], act[1] / act[0], sec[1] / sec[0]);
    clt_tensor_release(x);
    clt_model_free(m);
    return 0;
}
