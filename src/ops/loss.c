/* Softmax cross-entropy, fused with its gradient. */
#include "ops_internal.h"

clt_status clt_softmax_cross_entropy(clt_tensor **loss, clt_tensor **dlogits, const clt_tensor *logits,
                                     const clt_tensor *labels)
{
    const char *op = "clt_softmax_cross_entropy";
    CLT_TRY(clt__need(op, "loss", loss));
    *loss = NULL;
    if (dlogits) *dlogits = NULL;
    CLT_TRY(clt__need_f32(op, "logits", logits));
    CLT_TRY(clt__need_i32(op, "labels", labels));
    CLT_TRY(clt__same_device(op, logits, labels));
    CLT_TRY(clt__need_2d(op, "logits", logits));
    cl_ulong rows = (cl_ulong)logits->shape[0], cols = (cl_ulong)logits->shape[1];
    if (labels->ndim != 1 || (cl_ulong)labels->shape[0] != rows) {
        char sl[128], sb[128];
        return clt__fail(CLT_ERR_SHAPE, "%s: logits %s is (B,C) and labels must be (B), got %s", op,
                         clt__shape_str(logits, sl, sizeof sl), clt__shape_str(labels, sb, sizeof sb));
    }
    int slot = logits->st->slot;
    int64_t rshape[] = {(int64_t)rows};
    clt_tensor *out = NULL, *grad = NULL, *per_row = NULL;
    clt_status s = clt__tensor_new(&out, slot, CLT_FLOAT32, 0, NULL);
    if (s == CLT_OK) s = clt__tensor_new(&per_row, slot, CLT_FLOAT32, 1, rshape);
    if (s == CLT_OK && dlogits) s = clt__tensor_new(&grad, slot, CLT_FLOAT32, 2, logits->shape);
    if (s == CLT_OK) {
        clt__buf xb = clt__tensor_buf(logits), lb = clt__tensor_buf(labels), pb = clt__tensor_buf(per_row);
        /* Without a gradient the kernel never touches dlogits; per_row stands in. */
        clt__buf gb = grad ? clt__tensor_buf(grad) : pb;
        cl_int want = grad != NULL;
        clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(lb.mem), CLT_ARG(lb.off), CLT_ARG(rows),
                           CLT_ARG(cols), CLT_ARG(pb.mem), CLT_ARG(pb.off), CLT_ARG(gb.mem), CLT_ARG(gb.off),
                           CLT_ARG(want)};
        s = clt__launch1(slot, "loss", "softmax_xent_f32", 11, args, (size_t)rows, per_row);
        /* The gradient was written by the same launch. */
        if (s == CLT_OK && grad) clt__same_write(grad, per_row);
    }
    if (s == CLT_OK) s = clt__reduce_sum(out, per_row, (float)rows);
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
