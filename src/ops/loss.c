/* The losses, each fused with its gradient: softmax cross-entropy and the
 * mean squared error (with the mean absolute error as a metric). */
#include "loss.h"

#include "../device/device_internal.h"
#include "ops_internal.h"

/* The loss kernel for `rows` rows: XENT_ROWS the per-row kernel (then the
 * two passes of the mean), else one launch of one work-group of
 * CLT__XENT_WG_ROWS work-items that also takes the mean, for batches of 1
 * to CLT__XENT_WG_ROWS rows: XENT_WG on GPU-class devices whose
 * work-groups hold them (clt__reduce_wg), the tree of the _wg sums;
 * XENT_SEQ on the CPU class (its work-groups as large), the order of its
 * sums. */
typedef enum { XENT_ROWS, XENT_WG, XENT_SEQ } xent_form;

static clt_status xent_one_launch(int slot, cl_ulong rows, xent_form *out)
{
    int wg, gpu;
    CLT_TRY(clt__reduce_wg(slot, &wg));
    CLT_TRY(clt__gpu_class(slot, &gpu));
    int wide = clt__slot_get(slot)->max_work_group >= CLT__XENT_WG_ROWS;
    *out = XENT_ROWS;
    if (rows >= 1 && rows <= CLT__XENT_WG_ROWS && (wg || (!gpu && wide))) *out = wg ? XENT_WG : XENT_SEQ;
    return CLT_OK;
}

/* The loss kernel: in one launch (XENT_WG, XENT_SEQ), it writes the
 * mean loss into out (a scalar), and adds rows times it to sum unless sum
 * is NULL; else softmax_xent_f32 the per-row losses into out (rows), and
 * sum must be NULL. grad (NULL: not computed) gets the gradient from the
 * same launch. */
static clt_status xent_launch(clt_tensor *out, clt_tensor *grad, const clt_tensor *logits, const clt_tensor *labels,
                              xent_form form, clt_tensor *sum)
{
    cl_ulong rows = (cl_ulong)logits->shape[0], cols = (cl_ulong)logits->shape[1];
    clt__buf xb = clt__tensor_buf(logits), lb = clt__tensor_buf(labels), ob = clt__tensor_buf(out);
    /* Without a gradient the kernel never touches dlogits; out stands in. */
    clt__buf gb = grad ? clt__tensor_buf(grad) : ob, sb = sum ? clt__tensor_buf(sum) : ob;
    cl_int want = grad != NULL, want_sum = sum != NULL;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(lb.mem), CLT_ARG(lb.off), CLT_ARG(rows),
                       CLT_ARG(cols), CLT_ARG(ob.mem), CLT_ARG(ob.off), CLT_ARG(gb.mem), CLT_ARG(gb.off),
                       CLT_ARG(want), CLT_ARG(sb.mem), CLT_ARG(sb.off), CLT_ARG(want_sum)};
    size_t size = CLT__XENT_WG_ROWS;
    int slot = out->st->slot;
    if (sum) CLT_TRY(clt__wait_foreign_read(slot, sum));
    if (form != XENT_ROWS)
        CLT_TRY(clt__launch(slot, "loss", form == XENT_WG ? "softmax_xent_mean_wg_f32" : "softmax_xent_mean_seq_f32",
                            14, args, 1, &size, &size, out));
    else CLT_TRY(clt__launch1(slot, "loss", "softmax_xent_f32", 11, args, (size_t)rows, out));
    if (grad) clt__same_write(grad, out);
    if (sum) clt__same_write(sum, out);
    return CLT_OK;
}

/* logits a float32 (B, C), labels an int32 (B) on its device. */
static clt_status need_logits_labels(const char *op, const clt_tensor *logits, const clt_tensor *labels)
{
    CLT_TRY(clt__need_f32(op, "logits", logits));
    CLT_TRY(clt__need_i32(op, "labels", labels));
    CLT_TRY(clt__same_device(op, logits, labels));
    CLT_TRY(clt__need_2d(op, "logits", logits));
    if (labels->ndim != 1 || labels->shape[0] != logits->shape[0]) {
        char sl[128], sb[128];
        return clt__fail(CLT_ERR_SHAPE, "%s: logits %s is (B,C) and labels must be (B), got %s", op,
                         clt__shape_str(logits, sl, sizeof sl), clt__shape_str(labels, sb, sizeof sb));
    }
    return CLT_OK;
}

/* clt_softmax_cross_entropy, and sum += rows * the loss when sum is not
 * NULL (in the loss's launch where it is one launch). */
static clt_status xent(const char *op, clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                       const clt_tensor *labels, clt_tensor *sum)
{
    CLT_TRY(clt__need(op, "loss", loss));
    *loss = NULL;
    if (dlogits) *dlogits = NULL;
    CLT_TRY(need_logits_labels(op, logits, labels));
    cl_ulong rows = (cl_ulong)logits->shape[0];
    int slot = logits->st->slot;
    xent_form form;
    CLT_TRY(xent_one_launch(slot, rows, &form));
    int one_launch = form != XENT_ROWS;
    int64_t rshape[] = {(int64_t)rows};
    clt_tensor *out = NULL, *grad = NULL, *per_row = NULL;
    clt_status s = clt__tensor_new(&out, slot, CLT_FLOAT32, 0, NULL);
    if (s == CLT_OK && !one_launch) s = clt__tensor_new(&per_row, slot, CLT_FLOAT32, 1, rshape);
    if (s == CLT_OK && dlogits) s = clt__tensor_new(&grad, slot, CLT_FLOAT32, 2, logits->shape);
    clt_tensor *in_launch = one_launch ? sum : NULL;
    if (s == CLT_OK) s = xent_launch(one_launch ? out : per_row, grad, logits, labels, form, in_launch);
    if (s == CLT_OK && !one_launch) s = clt__reduce_sum(out, per_row, (float)rows);
    if (s == CLT_OK && !one_launch && sum) s = clt_axpy_(sum, (float)rows, out);
    clt_tensor_release(per_row);
    if (s != CLT_OK) {
        clt_tensor_release(out);
        clt_tensor_release(grad);
        return s;
    }
    *loss = out;
    if (dlogits) *dlogits = grad;
    return CLT_OK;
}

clt_status clt_softmax_cross_entropy(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                     const clt_tensor *labels)
{
    return xent("clt_softmax_cross_entropy", loss, dlogits, logits, labels, NULL);
}

clt_status clt__softmax_cross_entropy_sum(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                          const clt_tensor *labels, clt_tensor *sum)
{
    const char *op = "clt_softmax_cross_entropy";
    CLT_TRY(clt__need(op, "sum", sum));
    CLT_TRY(clt__need_f32(op, "sum", sum));
    CLT_TRY(clt__same_device(op, logits ? logits : sum, sum));
    if (sum->numel != 1)
        return clt__fail(CLT_ERR_SHAPE, "%s: the loss sum has %lld elements, not 1", op, (long long)sum->numel);
    return xent(op, loss, dlogits, logits, labels, sum);
}

/* sum += the rows of logits whose argmax is their label: count_hits_f32
 * where the loss's kernel would take the batch in one launch
 * (xent_one_launch), else clt_argmax_rows, clt_count_equal and clt_add_. */
clt_status clt__count_hits_(clt_tensor *sum, const clt_tensor *logits, const clt_tensor *labels)
{
    const char *op = "clt__count_hits_";
    CLT_TRY(need_logits_labels(op, logits, labels));
    CLT_TRY(clt__need_f32(op, "sum", sum));
    CLT_TRY(clt__same_device(op, logits, sum));
    int slot = logits->st->slot;
    cl_ulong rows = (cl_ulong)logits->shape[0], cols = (cl_ulong)logits->shape[1];
    xent_form form;
    CLT_TRY(xent_one_launch(slot, rows, &form));
    if (form == XENT_ROWS || cols == 0) {
        clt_tensor *pred = NULL, *hits = NULL;
        clt_status s = clt_argmax_rows(&pred, logits);
        if (s == CLT_OK) s = clt_count_equal(&hits, pred, labels);
        if (s == CLT_OK) s = clt_add_(sum, hits);
        clt_tensor_release(pred);
        clt_tensor_release(hits);
        return s;
    }
    clt__buf xb = clt__tensor_buf(logits), lb = clt__tensor_buf(labels), sb = clt__tensor_buf(sum);
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(rows),  CLT_ARG(cols),
                       CLT_ARG(lb.mem), CLT_ARG(lb.off), CLT_ARG(sb.mem), CLT_ARG(sb.off)};
    size_t size = CLT__XENT_WG_ROWS;
    return clt__launch(slot, "reduce", "count_hits_f32", 8, args, 1, &size, &size, sum);
}

/* The regression errors of pred against target in one launch (mse_f32):
 * the per-row sums of squared and absolute errors (each column's error times
 * scale[c] when scale is not NULL), reduced to their means over every
 * element, and the gradient of the MSE when dpred is not NULL. */
static clt_status regression(const char *op, clt_tensor **mse, clt_tensor **mae, clt_tensor **dpred,
                             const clt_tensor *pred, const clt_tensor *target, const clt_tensor *scale)
{
    CLT_TRY(clt__need_f32(op, "pred", pred));
    CLT_TRY(clt__need_f32(op, "target", target));
    CLT_TRY(clt__same_device(op, pred, target));
    CLT_TRY(clt__need_2d(op, "pred", pred));
    cl_ulong rows = (cl_ulong)pred->shape[0], cols = (cl_ulong)pred->shape[1];
    /* A (B) target stands for (B, 1), as one value per row. */
    int column = target->ndim == 1 && cols == 1 && (cl_ulong)target->shape[0] == rows;
    if (!column) CLT_TRY(clt__same_shape(op, pred, target));
    if (scale) {
        CLT_TRY(clt__need_f32(op, "scale", scale));
        CLT_TRY(clt__same_device(op, pred, scale));
        if (scale->ndim != 1 || (cl_ulong)scale->shape[0] != cols) {
            char sp[128], ss[128];
            return clt__fail(CLT_ERR_SHAPE, "%s: pred %s has %llu columns but scale is %s; it must be (%llu)", op,
                             clt__shape_str(pred, sp, sizeof sp), (unsigned long long)cols,
                             clt__shape_str(scale, ss, sizeof ss), (unsigned long long)cols);
        }
    }
    int slot = pred->st->slot;
    int64_t rshape[] = {(int64_t)rows};
    clt_tensor *sq = NULL, *ab = NULL, *grad = NULL, *out2 = NULL, *out1 = NULL;
    clt_status s = clt__tensor_new(&sq, slot, CLT_FLOAT32, 1, rshape);
    if (s == CLT_OK) s = clt__tensor_new(&ab, slot, CLT_FLOAT32, 1, rshape);
    if (s == CLT_OK && mse) s = clt__tensor_new(&out2, slot, CLT_FLOAT32, 0, NULL);
    if (s == CLT_OK && mae) s = clt__tensor_new(&out1, slot, CLT_FLOAT32, 0, NULL);
    if (s == CLT_OK && dpred) s = clt__tensor_new(&grad, slot, CLT_FLOAT32, 2, pred->shape);
    if (s == CLT_OK) {
        clt__buf pb = clt__tensor_buf(pred), tb = clt__tensor_buf(target), qb = clt__tensor_buf(sq),
                 ab_ = clt__tensor_buf(ab);
        /* What the kernel is not asked to touch is stood in for by sq. */
        clt__buf gb = grad ? clt__tensor_buf(grad) : qb, sb = scale ? clt__tensor_buf(scale) : qb;
        cl_int want_grad = grad != NULL, want_scale = scale != NULL;
        clt__arg args[] = {CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(tb.mem), CLT_ARG(tb.off), CLT_ARG(rows),
                           CLT_ARG(cols), CLT_ARG(qb.mem), CLT_ARG(qb.off), CLT_ARG(ab_.mem), CLT_ARG(ab_.off),
                           CLT_ARG(gb.mem), CLT_ARG(gb.off), CLT_ARG(want_grad), CLT_ARG(sb.mem), CLT_ARG(sb.off),
                           CLT_ARG(want_scale)};
        s = clt__launch1(slot, "loss", "mse_f32", 16, args, (size_t)rows, sq);
        if (s == CLT_OK) clt__same_write(ab, sq);
        if (s == CLT_OK && grad) clt__same_write(grad, sq);
    }
    float elements = (float)rows * (float)cols;
    if (s == CLT_OK && out2) s = clt__reduce_sum(out2, sq, elements);
    if (s == CLT_OK && out1) s = clt__reduce_sum(out1, ab, elements);
    clt_tensor_release(sq);
    clt_tensor_release(ab);
    if (s != CLT_OK) {
        clt_tensor_release(out2);
        clt_tensor_release(out1);
        clt_tensor_release(grad);
        return s;
    }
    if (mse) *mse = out2;
    if (mae) *mae = out1;
    if (dpred) *dpred = grad;
    return CLT_OK;
}

clt_status clt_mse_loss(clt_tensor **loss, clt_tensor **dpred, const clt_tensor *pred, const clt_tensor *target)
{
    const char *op = "clt_mse_loss";
    CLT_TRY(clt__need(op, "loss", loss));
    *loss = NULL;
    if (dpred) *dpred = NULL;
    return regression(op, loss, NULL, dpred, pred, target, NULL);
}

clt_status clt_regression_errors(clt_tensor **mse, clt_tensor **mae, const clt_tensor *pred, const clt_tensor *target,
                                 const clt_tensor *scale)
{
    const char *op = "clt_regression_errors";
    if (mse) *mse = NULL;
    if (mae) *mae = NULL;
    if (!mse && !mae) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: mse and mae are both NULL", op);
    return regression(op, mse, mae, NULL, pred, target, scale);
}
