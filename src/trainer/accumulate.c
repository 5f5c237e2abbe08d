/* Gradient accumulation: a batch in micro-batches whose scaled gradients
 * sum to the batch's. */
#include "accumulate.h"

#include <stdio.h>

#include "cltensor/memory.h"
#include "cltensor/ops.h"

int64_t clt__micro_rows(int64_t n, int micro, int k) { return n / micro + (k < n % micro ? 1 : 0); }

static void mark(clt_model *m, int64_t step, int k, const char *phase)
{
    char label[80];
    if (!step) return;
    snprintf(label, sizeof label, "step %lld micro %d %s", (long long)step, k + 1, phase);
    clt_memory_record_mark(clt_model_device(m), label);
}

static clt_status micro_pass(clt_model *m, clt_tensor *x, clt_tensor *y, int64_t start, int64_t rows, int64_t denom,
                             clt_tensor *loss_sum, int64_t step, int k)
{
    clt_tensor *xs = NULL, *ys = NULL, *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_narrow(&xs, x, start, rows);
    if (s == CLT_OK) s = clt_narrow(&ys, y, start, rows);
    mark(m, step, k, "forward");
    if (s == CLT_OK) s = clt_model_forward(m, xs, &logits);
    mark(m, step, k, "loss");
    if (s == CLT_OK) s = clt_cross_entropy_loss_grad(&loss, &dlogits, logits, ys);
    if (s == CLT_OK) s = clt_scale_(dlogits, (float)((double)rows / (double)denom));
    mark(m, step, k, "backward");
    if (s == CLT_OK) s = clt_model_backward(m, dlogits, NULL);
    if (s == CLT_OK) s = clt_axpy_(loss_sum, (float)rows, loss);
    mark(m, step, k, "frees");
    clt_tensor_release(xs);
    clt_tensor_release(ys);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    return s;
}

clt_status clt__accumulate(clt_model *m, clt_tensor *x, clt_tensor *y, int micro, int64_t denom, clt_tensor *loss_sum,
                           int64_t step)
{
    int64_t n = clt_tensor_dim(x, 0), start = 0;
    if (micro < 1 || denom < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "gradient accumulation: %d micro-batches over %lld examples", micro,
                         (long long)denom);
    for (int k = 0; k < micro && start < n; k++) {
        int64_t rows = clt__micro_rows(n, micro, k);
        CLT_TRY(micro_pass(m, x, y, start, rows, denom, loss_sum, step, k));
        start += rows;
    }
    return CLT_OK;
}
