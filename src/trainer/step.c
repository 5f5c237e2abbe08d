/* The training step, written once (step.h). */
#include "step.h"

#include <stdio.h>
#include <string.h>

#include "../optim/optim_internal.h"
#include "../tensor/tensor_internal.h"
#include "cltensor/memory.h"
#include "cltensor/ops.h"

void clt__step_tensors_release(clt__step_tensors *t)
{
    clt_tensor_release(t->x);
    clt_tensor_release(t->y);
    clt_tensor_release(t->out);
    clt_tensor_release(t->loss);
    clt_tensor_release(t->dout);
    memset(t, 0, sizeof *t);
}

int64_t clt__micro_rows(int64_t n, int micro, int k) { return n / micro + (k < n % micro ? 1 : 0); }

/* Names a phase in a memory record (clt_memory_record_mark); no label marks nothing. */
static void mark(clt_model *m, const char *label, const char *phase)
{
    char text[96];
    if (!label) return;
    snprintf(text, sizeof text, "%s %s", label, phase);
    clt_memory_record_mark(clt_model_device(m), text);
}

static const clt__loss *loss_or_default(const clt__loss *loss) { return loss ? loss : &clt__loss_cross_entropy; }

/* The memory-record label of a marked step ("step N" in buf, 32 bytes);
 * NULL, formatting nothing, for an unmarked one. */
static const char *step_label(char *buf, int64_t mark)
{
    if (!mark) return NULL;
    snprintf(buf, 32, "step %lld", (long long)mark);
    return buf;
}

/* *mean: the batch's mean loss of out against y (its gradient into *dout
 * unless dout is NULL), and sum += the batch's rows times it: in the
 * loss's launch where the loss can (loss_grad_sum), else by a clt_axpy_. */
static clt_status loss_and_sum(const clt__loss *loss, clt_tensor **mean, clt_tensor **dout, const clt_tensor *out,
                               const clt_tensor *y, clt_tensor *sum)
{
    if (loss->loss_grad_sum) return loss->loss_grad_sum(mean, dout, out, y, sum);
    CLT_TRY(loss->loss_grad(mean, dout, out, y));
    return clt_axpy_(sum, (float)clt_tensor_dim(out, 0), *mean);
}

clt_status clt__micro_step(clt_model *m, const clt__loss *loss, clt__step_tensors *t, double scale,
                           clt_tensor *loss_sum, const char *label)
{
    loss = loss_or_default(loss);
    mark(m, label, "forward");
    CLT_TRY(clt_model_forward(m, t->x, &t->out));
    mark(m, label, "loss");
    CLT_TRY(loss_and_sum(loss, &t->loss, &t->dout, t->out, t->y, loss_sum));
    if (scale != 0) CLT_TRY(clt_scale_(t->dout, (float)scale));
    mark(m, label, "backward");
    return clt_model_backward(m, t->dout, NULL);
}

clt_status clt__accumulate(clt_model *m, const clt__loss *loss, clt_tensor *x, clt_tensor *y, int micro, int64_t denom,
                           clt_tensor *loss_sum, int64_t step)
{
    int64_t n = clt_tensor_dim(x, 0), start = 0;
    if (micro < 1 || denom < 1)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "gradient accumulation: %d micro-batches over %lld examples", micro,
                         (long long)denom);
    clt_status s = CLT_OK;
    for (int k = 0; s == CLT_OK && k < micro && start < n; k++) {
        int64_t rows = clt__micro_rows(n, micro, k);
        char label[64];
        snprintf(label, sizeof label, "step %lld micro %d", (long long)step, k + 1);
        clt__step_tensors t = {0};
        s = clt_narrow(&t.x, x, start, rows);
        if (s == CLT_OK) s = clt_narrow(&t.y, y, start, rows);
        if (s == CLT_OK)
            s = clt__micro_step(m, loss, &t, (double)rows / (double)denom, loss_sum, step ? label : NULL);
        if (step) mark(m, label, "frees");
        clt__step_tensors_release(&t);
        start += rows;
    }
    return s;
}

clt_status clt__step_gradients(clt_model *m, clt__step_tensors *t, clt_tensor *loss_sum, const clt__step_options *o)
{
    CLT_TRY(clt_model_zero_grad(m));
    if (o->accumulate > 1) {
        int64_t denom = o->denom > 0 ? o->denom : clt_tensor_dim(t->x, 0);
        return clt__accumulate(m, o->loss, t->x, t->y, o->accumulate, denom, loss_sum, o->mark);
    }
    char label[32];
    double scale = o->denom > 0 ? (double)clt_tensor_dim(t->x, 0) / (double)o->denom : 0;
    return clt__micro_step(m, o->loss, t, scale, loss_sum, step_label(label, o->mark));
}

clt_status clt__train_step(clt_model *m, clt_optimizer *opt, clt__step_tensors *t, clt_tensor *loss_sum, double clip,
                           const clt__step_options *o)
{
    char label[32];
    const char *marks = step_label(label, o->mark);
    CLT_TRY(clt__step_gradients(m, t, loss_sum, o));
    mark(m, marks, "optimizer");
    if (clip > 0) CLT_TRY(clt_model_clip_grad_norm(m, clip, NULL));
    /* The update zeroes the gradients as it reads them, so the next step's
     * clt_model_zero_grad launches nothing. */
    CLT_TRY(clt__optimizer_step_zero(opt));
    mark(m, marks, "frees"); /* the step's tensors, released by the caller */
    return CLT_OK;
}

clt_status clt__eval_step(clt_model *m, const clt__loss *loss, clt_tensor *x, clt_tensor *y, const clt__eval_sums *sums)
{
    loss = loss_or_default(loss);
    float rows = (float)clt_tensor_dim(x, 0);
    clt_tensor *out = NULL, *mean = NULL, *mse = NULL, *mae = NULL;
    clt_status s = clt_model_forward(m, x, &out);
    if (s == CLT_OK) s = loss_and_sum(loss, &mean, NULL, out, y, sums->loss);
    if (s == CLT_OK && sums->correct && loss->correct) s = loss->correct(sums->correct, out, y);
    if (s == CLT_OK && (sums->mse || sums->mae) && loss->errors)
        s = loss->errors(sums->mse ? &mse : NULL, sums->mae ? &mae : NULL, out, y, sums->scale);
    if (s == CLT_OK && mse) s = clt_axpy_(sums->mse, rows, mse);
    if (s == CLT_OK && mae) s = clt_axpy_(sums->mae, rows, mae);
    clt_tensor_release(mse);
    clt_tensor_release(mae);
    clt_tensor_release(out);
    clt_tensor_release(mean);
    return s;
}

clt_status clt__step_read(const clt_tensor *t, double *out, const char *api)
{
    if (clt_tensor_dtype(t) != CLT_FLOAT32 || clt_tensor_numel(t) != 1) return clt_item(t, out);
    float v = 0;
    CLT_TRY(clt__read_host(t, &v, sizeof v, api));
    *out = v;
    return CLT_OK;
}
