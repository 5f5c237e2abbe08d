/* The chapter's device cells (section 5.7.1-5.7.2) in C: device values,
 * counting GPUs, tensors on a device, explicit copies and the error for
 * operands on two devices. On a CPU-only machine run it with
 * POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1 to see two "GPUs". */
#include <stdio.h>
#include <stdlib.h>

#include <cltensor.h>

#include "example.h"

/* The device's name, from one of four rotating buffers so a printf can take several. */
static const char *name(clt_device d)
{
    static char buf[4][32];
    static int next;
    char *b = buf[next++ % 4];
    CHECK(clt_device_name(d, b, sizeof buf[0]));
    return b;
}

static void print(const char *label, const clt_tensor *t)
{
    printf("%s\n", label);
    CHECK(clt_tensor_print(t, stdout));
}

int main(void)
{
    /* Device values are free to construct, whether or not the hardware exists. */
    printf("cpu(), gpu(0), gpu(1): %s %s %s\n", name(clt_cpu()), name(clt_gpu(0)), name(clt_gpu(1)));
    printf("num_gpus(): %d\n", clt_num_gpus());

    clt_device all[16];
    int n = clt_try_all_gpus(all, 16);
    printf("try_gpu(), try_gpu(10), try_all_gpus(): %s %s [", name(clt_try_gpu(0)), name(clt_try_gpu(10)));
    for (int i = 0; i < n && i < 16; i++) printf("%s%s", i ? ", " : "", name(all[i]));
    printf("]\n\n");

    /* Create tensors directly on a device. */
    int64_t shape[] = {2, 3};
    clt_tensor *x, *y, *z, *z2, *sum, *bad = NULL;
    CHECK(clt_ones(&x, clt_try_gpu(0), CLT_FLOAT32, 2, shape));
    print("X = ones(2, 3) on try_gpu():", x);
    CHECK(clt_rand(&y, clt_try_gpu(1), 2, shape, 0));
    print("Y = rand(2, 3) on try_gpu(1):", y);

    /* Operands on two devices: an error, never an implicit copy. */
    clt_status s = clt_add(&bad, x, y);
    if (s == CLT_OK) {
        printf("\nX + Y: X and Y share %s, so no copy is needed\n", name(clt_tensor_device(x)));
        clt_tensor_release(bad);
    } else {
        printf("\nX + Y: %s: %s\n", clt_status_string(s), clt_last_error());
    }

    /* Copy explicitly, then add on one device. */
    CHECK(clt_to(&z, x, clt_try_gpu(1)));
    printf("\nZ = clt_to(X, try_gpu(1))\n");
    print("X:", x);
    print("Z:", z);
    CHECK(clt_add(&sum, y, z));
    print("Y + Z:", sum);

    /* Already there: clt_to returns the tensor itself. */
    CHECK(clt_to(&z2, z, clt_try_gpu(1)));
    printf("clt_to(Z, try_gpu(1)) is Z: %s\n", z2 == z ? "true" : "false");

    clt_tensor_release(z2);
    clt_tensor_release(sum);
    clt_tensor_release(z);
    clt_tensor_release(y);
    clt_tensor_release(x);
    return 0;
}
