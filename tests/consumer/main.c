/* A program outside the tree, built against an installed cltensor. */
#include <stdio.h>

#include <cltensor.h>

int main(void)
{
    clt_tensor *t = NULL;
    int64_t shape[] = {2, 3};
    if (clt_ones(&t, clt_device_get_default(), CLT_FLOAT32, 2, shape) != CLT_OK ||
        clt_tensor_print(t, stdout) != CLT_OK) {
        fprintf(stderr, "consumer: %s\n", clt_last_error());
        clt_tensor_release(t);
        return 1;
    }
    clt_tensor_release(t);
    return 0;
}
