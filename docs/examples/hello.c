/* The README's example: tensors on the first GPU (or the CPU), an addition,
 * the result printed, and the memory counters. */
#include <stdio.h>
#include <cltensor.h>

int main(void)
{
    clt_device dev = clt_try_gpu(0); /* gpu:0 when there is one, else cpu:0 */
    int64_t shape[] = {2, 3};
    clt_tensor *x = NULL, *y = NULL, *z = NULL;
    clt_status s = clt_ones(&x, dev, CLT_FLOAT32, 2, shape);
    if (s == CLT_OK) s = clt_full(&y, dev, CLT_FLOAT32, 2, shape, 2.5);
    if (s == CLT_OK) s = clt_add(&z, x, y);
    if (s == CLT_OK) s = clt_tensor_print(z, stdout);
    if (s != CLT_OK) fprintf(stderr, "%s: %s\n", clt_status_string(s), clt_last_error());
    printf("allocated %lld B, reserved %lld B, peak %lld B\n", (long long)clt_memory_allocated(dev),
           (long long)clt_memory_reserved(dev), (long long)clt_memory_max_allocated(dev));
    clt_tensor_release(z);
    clt_tensor_release(y);
    clt_tensor_release(x);
    return s == CLT_OK ? 0 : 1;
}
