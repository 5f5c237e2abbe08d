/* Float16 storage with float32 arithmetic: device conversions, fills and
 * the float16 accumulation and unscaling the optimizers use (the float16
 * Linear is linear_f16.c's; clt_relu and clt_add take float16 themselves).
 * The host's scalar conversions are in src/core/half.c. */
#include <math.h>
#include <string.h>

#include "cltensor/half.h"
#include "half.h"
#include "ops_internal.h"

static int floating(clt_dtype dt) { return dt == CLT_FLOAT32 || dt == CLT_FLOAT16; }

clt_status clt__to_dtype_scaled(clt_tensor **out, const clt_tensor *t, clt_dtype dt, float scale)
{
    const char *op = "clt_to_dtype";
    CLT_TRY(clt__need(op, "out", out));
    *out = NULL;
    CLT_TRY(clt__need(op, "t", t));
    if (!floating(t->dtype) || !floating(dt))
        return clt__fail(CLT_ERR_UNSUPPORTED, "%s: converts between float32 and float16 only, not %s to %s", op,
                         clt_dtype_name(t->dtype), clt_dtype_name(dt));
    if (t->dtype == dt && scale == 1.0f) {
        *out = clt_tensor_retain((clt_tensor *)t);
        return CLT_OK;
    }
    if (t->dtype == dt)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: scaling needs a float32 to float16 conversion", op);
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, t->st->slot, dt, t->ndim, t->shape));
    clt_status s;
    if (dt == CLT_FLOAT16) {
        s = clt__convert_to_half(y, t, scale);
    } else {
        clt__buf xb = clt__tensor_buf(t), yb = clt__tensor_buf(y);
        cl_ulong n = (cl_ulong)t->numel;
        clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(n)};
        s = clt__launch_half16(t->st->slot, "f16_to_f32", 5, args, n, y);
    }
    return clt__finish(s, y, out);
}

clt_status clt__widen3(const clt_tensor *const in[3], clt_tensor **out[3])
{
    const char *op = "float16 op";
    for (int i = 0; i < 3; i++) *out[i] = NULL;
    clt_tensor *made[3] = {NULL, NULL, NULL}, *last = NULL;
    const clt_tensor *last_in = NULL;
    cl_ulong groups = 0;
    clt_status s = CLT_OK;
    for (int i = 0; i < 3 && s == CLT_OK; i++) {
        if (!in[i]) continue;
        s = clt__need_f16(op, "operand", in[i]);
        if (s == CLT_OK && last_in) s = clt__same_device(op, last_in, in[i]);
        if (s == CLT_OK) s = clt__tensor_new(&made[i], in[i]->st->slot, CLT_FLOAT32, in[i]->ndim, in[i]->shape);
        if (s != CLT_OK) break;
        last = made[i];
        last_in = in[i];
        groups += ((cl_ulong)in[i]->numel + 15) / 16;
    }
    if (s == CLT_OK && groups > 0) {
        /* A missing operand is an empty one over the last operand's buffers. */
        clt__buf xb[3], yb[3];
        cl_ulong n[3];
        for (int i = 0; i < 3; i++) {
            xb[i] = clt__tensor_buf(in[i] ? in[i] : last_in);
            yb[i] = clt__tensor_buf(made[i] ? made[i] : last);
            n[i] = in[i] ? (cl_ulong)in[i]->numel : 0;
        }
        clt__arg args[] = {
            CLT_ARG(xb[0].mem), CLT_ARG(xb[0].off), CLT_ARG(yb[0].mem), CLT_ARG(yb[0].off), CLT_ARG(n[0]),
            CLT_ARG(xb[1].mem), CLT_ARG(xb[1].off), CLT_ARG(yb[1].mem), CLT_ARG(yb[1].off), CLT_ARG(n[1]),
            CLT_ARG(xb[2].mem), CLT_ARG(xb[2].off), CLT_ARG(yb[2].mem), CLT_ARG(yb[2].off), CLT_ARG(n[2])};
        s = clt__launch1(last->st->slot, "half", "f16_to_f32_3", 15, args, (size_t)groups, last);
        /* The other outputs were written by the same launch. */
        for (int i = 0; i < 3 && s == CLT_OK; i++)
            if (made[i] && made[i] != last) clt__same_write(made[i], last);
    }
    for (int i = 0; i < 3; i++) {
        if (s == CLT_OK) *out[i] = made[i];
        else clt_tensor_release(made[i]);
    }
    return s;
}

clt_status clt__launch_half16(int slot, const char *name, int nargs, const clt__arg *args, cl_ulong n,
                              clt_tensor *written)
{
    return clt__launch1(slot, "half", name, nargs, args, (size_t)((n + 15) / 16), written);
}

clt_status clt__convert_to_half(clt_tensor *dst, const clt_tensor *src, float scale)
{
    const char *op = "clt_to_dtype";
    CLT_TRY(clt__need_f16(op, "dst", dst));
    CLT_TRY(clt__need_f32(op, "src", src));
    CLT_TRY(clt__same_device(op, dst, src));
    CLT_TRY(clt__same_shape(op, dst, src));
    clt__buf xb = clt__tensor_buf(src), yb = clt__tensor_buf(dst);
    cl_ulong n = (cl_ulong)src->numel;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(yb.mem), CLT_ARG(yb.off), CLT_ARG(scale),
                       CLT_ARG(n)};
    return clt__launch_half16(dst->st->slot, "f32_to_f16", 6, args, n, dst);
}

clt_status clt_to_dtype(clt_tensor **out, clt_tensor *t, clt_dtype dt)
{
    return clt__to_dtype_scaled(out, t, dt, 1.0f);
}

clt_status clt__fill_f16(clt_tensor *t, double value)
{
    CLT_TRY(clt__need_f16("clt_fill_", "t", t));
    cl_ushort bits = clt_float_to_half((float)value);
    clt__buf tb = clt__tensor_buf(t);
    cl_ulong n = (cl_ulong)t->numel;
    clt__arg args[] = {CLT_ARG(tb.mem), CLT_ARG(tb.off), CLT_ARG(bits), CLT_ARG(n)};
    return clt__launch1(t->st->slot, "half", "fill_u16", 4, args, (size_t)n, t);
}

clt_status clt__accumulate_f16(clt_tensor *dst, const clt_tensor *src)
{
    const char *op = "accumulate_f16";
    CLT_TRY(clt__need_f16(op, "dst", dst));
    CLT_TRY(clt__need_f32(op, "src", src));
    CLT_TRY(clt__same_device(op, dst, src));
    CLT_TRY(clt__same_shape(op, dst, src));
    clt__buf db = clt__tensor_buf(dst), sb = clt__tensor_buf(src);
    cl_ulong n = (cl_ulong)dst->numel;
    clt__arg args[] = {CLT_ARG(db.mem), CLT_ARG(db.off), CLT_ARG(sb.mem), CLT_ARG(sb.off), CLT_ARG(n)};
    return clt__launch_half16(dst->st->slot, "accumulate_f16", 5, args, n, dst);
}

/* The element offset of word `word` of a loss scaler (CLT__SCALER_*). */
static clt_status scaler_word(const char *op, const clt_tensor *scaler, int word, clt__buf *out)
{
    CLT_TRY(clt__need_i32(op, "scaler", scaler));
    if (scaler->numel != CLT__SCALER_WORDS)
        return clt__fail(CLT_ERR_SHAPE, "%s: a loss scaler has %d words, not %lld", op, CLT__SCALER_WORDS,
                         (long long)scaler->numel);
    *out = clt__tensor_buf(scaler);
    out->off += (cl_ulong)word;
    return CLT_OK;
}

/* The checks of a conversion by a loss scaler: dst and src of the same
 * shape, one float16 (half_dst says which) and the other float32, all
 * three on one device. */
static clt_status check_scaled(const char *op, const clt_tensor *dst, const clt_tensor *src, const clt_tensor *scaler,
                               int half_dst)
{
    CLT_TRY((half_dst ? clt__need_f16 : clt__need_f32)(op, "dst", dst));
    CLT_TRY((half_dst ? clt__need_f32 : clt__need_f16)(op, "src", src));
    CLT_TRY(clt__same_device(op, dst, src));
    CLT_TRY(clt__same_device(op, dst, scaler));
    return clt__same_shape(op, dst, src);
}

clt_status clt__convert_to_half_by(clt_tensor *dst, const clt_tensor *src, const clt_tensor *scaler, float mul)
{
    const char *op = "clt_model_backward (float16)";
    CLT_TRY(check_scaled(op, dst, src, scaler, 1));
    clt__buf xb = clt__tensor_buf(src), yb = clt__tensor_buf(dst), sb;
    CLT_TRY(scaler_word(op, scaler, CLT__SCALER_SCALE, &sb));
    cl_ulong n = (cl_ulong)src->numel;
    clt__arg args[] = {CLT_ARG(xb.mem), CLT_ARG(xb.off), CLT_ARG(yb.mem), CLT_ARG(yb.off),
                       CLT_ARG(sb.mem), CLT_ARG(sb.off), CLT_ARG(mul),    CLT_ARG(n)};
    return clt__launch_half16(dst->st->slot, "f32_to_f16_by", 8, args, n, dst);
}

clt_status clt__to_half_by(clt_tensor **out, const clt_tensor *t, const clt_tensor *scaler)
{
    *out = NULL;
    CLT_TRY(clt__need_f32("clt_model_backward (float16)", "dy", t));
    clt_tensor *y;
    CLT_TRY(clt__tensor_new(&y, t->st->slot, CLT_FLOAT16, t->ndim, t->shape));
    return clt__finish(clt__convert_to_half_by(y, t, scaler, 1.0f), y, out);
}

clt_status clt__unscale_f16(clt_tensor *dst, clt_tensor *src, const clt_tensor *scaler, clt_tensor *flag,
                            int zero_src)
{
    const char *op = "unscale_f16";
    CLT_TRY(check_scaled(op, dst, src, scaler, 0));
    clt__buf ib;
    CLT_TRY(scaler_word(op, scaler, CLT__SCALER_INV, &ib));
    if (flag) {
        CLT_TRY(clt__need_i32(op, "flag", flag));
        CLT_TRY(clt__same_device(op, dst, flag));
        /* The flag is written too, by the same launch. */
        CLT_TRY(clt__wait_foreign_read(dst->st->slot, flag));
    }
    if (zero_src) CLT_TRY(clt__wait_foreign_read(dst->st->slot, src));
    /* Without a flag the kernel never writes one; the scaler stands in. */
    clt__buf db = clt__tensor_buf(dst), sb = clt__tensor_buf(src), fb = flag ? clt__tensor_buf(flag) : ib;
    cl_int flags = (flag ? 1 : 0) | (zero_src ? 2 : 0);
    cl_ulong n = (cl_ulong)dst->numel;
    clt__arg args[] = {CLT_ARG(sb.mem), CLT_ARG(sb.off), CLT_ARG(db.mem), CLT_ARG(db.off), CLT_ARG(ib.mem),
                       CLT_ARG(ib.off), CLT_ARG(fb.mem), CLT_ARG(fb.off), CLT_ARG(flags),  CLT_ARG(n)};
    CLT_TRY(clt__launch_half16(dst->st->slot, "unscale_f16", 10, args, n, dst));
    if (flag) clt__same_write(flag, dst);
    if (zero_src) clt__same_write(src, dst);
    return CLT_OK;
}
