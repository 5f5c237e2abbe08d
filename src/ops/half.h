/* Internal: float16 storage with float32 arithmetic (docs/half.md):
 * conversions, fills, accumulation and unscaling (the float16 Linear a half
 * model's layers call is linear_f16.h's). */
#ifndef CLT_OPS_HALF_H
#define CLT_OPS_HALF_H

#include "../kernels/program.h"
#include "cltensor/tensor.h"

/* *out = dt(t * scale): float32 <-> float16 (scale applies to float32 -> float16 only). */
clt_status clt__to_dtype_scaled(clt_tensor **out, const clt_tensor *t, clt_dtype dt, float scale);
/* Converts float32 to float16 into an existing tensor: dst = half(src *
 * scale), dst float16 and src float32 of the same shape (clt__same_shape)
 * and device. (The widening direction with a scale is clt__unscale_f16.) */
clt_status clt__convert_to_half(clt_tensor *dst, const clt_tensor *src, float scale);
/* *out[i] = float32 copies of the float16 tensors in[i] (NULL stays NULL; all
 * on one device) in one launch (f16_to_f32_3). On failure none is made. */
clt_status clt__widen3(const clt_tensor *const in[3], clt_tensor **out[3]);
/* Launches one of cl/half.cl's elementwise kernels over n elements, 16 to a
 * work-item. */
clt_status clt__launch_half16(int slot, const char *name, int nargs, const clt__arg *args, cl_ulong n,
                              clt_tensor *written);
/* Fills a float16 tensor with value (rounded to half). */
clt_status clt__fill_f16(clt_tensor *t, double value);
/* dst (float16) += src (float32), same shape (clt__same_shape) and device. */
clt_status clt__accumulate_f16(clt_tensor *dst, const clt_tensor *src);
/* A float16 model's loss scaler on the device (src/nn/model.c keeps it; a
 * step's end updates it, clt__scaler_update): an int32 tensor of
 * CLT__SCALER_WORDS words, the scale, its float32 reciprocal (the floats by
 * their bits) and the clean steps in a row. */
enum { CLT__SCALER_SCALE, CLT__SCALER_INV, CLT__SCALER_CLEAN, CLT__SCALER_WORDS };
/* dst = half(src * (mul * the scale of scaler)), as clt__convert_to_half
 * with the scale read on the device. */
clt_status clt__convert_to_half_by(clt_tensor *dst, const clt_tensor *src, const clt_tensor *scaler, float mul);
/* *out = a new float16 copy of the float32 t times the scale of scaler. */
clt_status clt__to_half_by(clt_tensor **out, const clt_tensor *t, const clt_tensor *scaler);
/* dst (float32) = src (float16) times scaler's CLT__SCALER_INV word. With
 * flag (int32; NULL: none) its first element is set to 1 when a result is
 * inf or NaN, and left alone otherwise; with zero_src, src is zeroed once
 * read, by the same launch. Same shape (clt__same_shape) and device. */
clt_status clt__unscale_f16(clt_tensor *dst, clt_tensor *src, const clt_tensor *scaler, clt_tensor *flag,
                            int zero_src);

#endif
