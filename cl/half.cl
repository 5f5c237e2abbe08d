/* Half-precision storage: float16 tensors are read with vload_half and
 * written with vstore_half (round to nearest even), which every OpenCL
 * device has, with or without cl_khr_fp16; arithmetic is float32. Every
 * tensor argument is a buffer and an element offset into it.
 *
 * The elementwise kernels take 16 elements a work-item (launched by
 * clt__launch_half16 in src/ops/half.c; fill_u16 one, by clt__launch1):
 * pocl compiles vload_half16 and vstore_half16 to one conversion
 * instruction, the scalar forms to a software conversion of about ten
 * integer operations. The last work-item takes the partial tail one element
 * at a time; both forms convert alike (exact widening, round to nearest even
 * narrowing), so results do not depend on the split. The (0, p + i) form
 * needs p + i aligned to a half only. */

/* Work-item g's 16 elements of y = half(x * scale) (n elements). */
static void narrow16(__global const float *x, ulong xo, __global half *y, ulong yo, float scale, ulong n, ulong g)
{
    ulong i = g * 16;
    x += xo;
    y += yo;
    if (i + 16 <= n) vstore_half16(vload16(0, x + i) * scale, 0, y + i);
    else
        for (; i < n; i++) vstore_half(x[i] * scale, 0, y + i);
}

/* y = half(x * scale) */
__kernel void f32_to_f16(__global const float *x, ulong xo, __global half *y, ulong yo, float scale, ulong n)
{
    narrow16(x, xo, y, yo, scale, n, get_global_id(0));
}

/* y = half(x * (mul * s[so])): f32_to_f16 with its scale read on the device
 * (a float16 model's loss scale, src/ops/half.h's CLT__SCALER_SCALE word)
 * times mul from the host. */
__kernel void f32_to_f16_by(__global const float *x, ulong xo, __global half *y, ulong yo, __global const float *s,
                            ulong so, float mul, ulong n)
{
    narrow16(x, xo, y, yo, mul * s[so], n, get_global_id(0));
}

/* Work-item g's 16 elements of y = float(x) (n elements). */
static void widen16(__global const half *x, ulong xo, __global float *y, ulong yo, ulong n, ulong g)
{
    ulong i = g * 16;
    x += xo;
    y += yo;
    if (i + 16 <= n) vstore16(vload_half16(0, x + i), 0, y + i);
    else
        for (; i < n; i++) y[i] = vload_half(0, x + i);
}

__kernel void f16_to_f32(__global const half *x, ulong xo, __global float *y, ulong yo, ulong n)
{
    widen16(x, xo, y, yo, n, get_global_id(0));
}

/* f16_to_f32 of three tensors in one launch (the float16 Linear's operands,
 * src/ops/half.c clt__widen3): the first ceil(n0 / 16) work-items widen
 * x0 into y0, the next ceil(n1 / 16) x1 into y1, the rest x2 into y2. An
 * operand of 0 elements takes no work-item. */
__kernel void f16_to_f32_3(__global const half *x0, ulong xo0, __global float *y0, ulong yo0, ulong n0,
                           __global const half *x1, ulong xo1, __global float *y1, ulong yo1, ulong n1,
                           __global const half *x2, ulong xo2, __global float *y2, ulong yo2, ulong n2)
{
    ulong g = get_global_id(0), g0 = (n0 + 15) / 16, g1 = (n1 + 15) / 16;
    if (g < g0) widen16(x0, xo0, y0, yo0, n0, g);
    else if (g < g0 + g1) widen16(x1, xo1, y1, yo1, n1, g - g0);
    else widen16(x2, xo2, y2, yo2, n2, g - g0 - g1);
}

/* y = x * inv[io], in float32 (inv: 1 / a float16 model's loss scale, the
 * CLT__SCALER_INV word of src/ops/half.h). flags: 1, flag[fo] = 1 when any
 * result is inf or NaN (every writer stores the same value, so the race is
 * harmless); 2, x is zeroed once read (the gradients' zeroing, folded). */
__kernel void unscale_f16(__global half *x, ulong xo, __global float *y, ulong yo, __global const float *inv,
                          ulong io, __global int *flag, ulong fo, int flags, ulong n)
{
    ulong i = get_global_id(0) * 16;
    float scale = inv[io];
    x += xo;
    y += yo;
    if (i + 16 <= n) {
        float16 v = vload_half16(0, x + i) * scale;
        vstore16(v, 0, y + i);
        if (flags & 2) vstore_half16((float16)(0.0f), 0, x + i);
        if ((flags & 1) && !all(isfinite(v))) flag[fo] = 1;
        return;
    }
    for (; i < n; i++) {
        float v = vload_half(0, x + i) * scale;
        y[i] = v;
        if (flags & 2) vstore_half(0.0f, 0, x + i);
        if ((flags & 1) && !isfinite(v)) flag[fo] = 1;
    }
}

/* y += x, y half, x float32 */
__kernel void accumulate_f16(__global half *y, ulong yo, __global const float *x, ulong xo, ulong n)
{
    ulong i = get_global_id(0) * 16;
    y += yo;
    x += xo;
    if (i + 16 <= n) vstore_half16(vload_half16(0, y + i) + vload16(0, x + i), 0, y + i);
    else
        for (; i < n; i++) vstore_half(vload_half(0, y + i) + x[i], 0, y + i);
}

/* out += the column sums of x (rows, cols), each summed in float32 from
 * zero row by row (as sum_rows_f32) and added once; 16 columns a work-item. */
__kernel void sum_rows_add_f16(__global const half *x, ulong xo, ulong rows, ulong cols, __global half *out,
                               ulong oo)
{
    ulong c0 = get_global_id(0) * 16;
    if (c0 >= cols) return;
    x += xo + c0;
    out += oo + c0;
    if (c0 + 16 <= cols) {
        float16 s = (float16)(0.0f);
        for (ulong r = 0; r < rows; r++) s += vload_half16(0, x + r * cols);
        vstore_half16(vload_half16(0, out) + s, 0, out);
        return;
    }
    for (ulong c = 0; c < cols - c0; c++) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++) s += vload_half(r * cols + c, x);
        vstore_half(vload_half(c, out) + s, c, out);
    }
}

/* sum_rows_add_f16 on GPU-class devices: WG_COLS columns by WG_LANES lanes
 * a work-group, lane j adding rows j, j + WG_LANES, ... in float32, then the
 * lanes pairwise in a fixed tree; the total is added to out once. */
#define WG_COLS 16
#define WG_LANES 16
__kernel __attribute__((reqd_work_group_size(WG_COLS, WG_LANES, 1))) void
sum_rows_add_wg_f16(__global const half *x, ulong xo, ulong rows, ulong cols, __global half *out, ulong oo)
{
    __local float t[WG_LANES * WG_COLS];
    uint lc = (uint)get_local_id(0), j = (uint)get_local_id(1);
    ulong c = get_global_id(0);
    float s = 0.0f;
    if (c < cols)
        for (ulong r = j; r < rows; r += WG_LANES) s += vload_half(xo + r * cols + c, x);
    t[j * WG_COLS + lc] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = WG_LANES / 2; h > 0; h /= 2) {
        if (j < h) t[j * WG_COLS + lc] += t[(j + h) * WG_COLS + lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (j == 0 && c < cols) vstore_half(vload_half(oo + c, out) + t[lc], oo + c, out);
}

__kernel void fill_u16(__global ushort *y, ulong yo, ushort v, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] = v;
}

__kernel void add_f16(__global const half *a, ulong ao, __global const half *b, ulong bo, __global half *y,
                      ulong yo, ulong n)
{
    ulong i = get_global_id(0) * 16;
    a += ao;
    b += bo;
    y += yo;
    if (i + 16 <= n) vstore_half16(vload_half16(0, a + i) + vload_half16(0, b + i), 0, y + i);
    else
        for (; i < n; i++) vstore_half(vload_half(0, a + i) + vload_half(0, b + i), 0, y + i);
}

__kernel void relu_f16(__global const half *x, ulong xo, __global half *y, ulong yo, ulong n)
{
    ulong i = get_global_id(0) * 16;
    x += xo;
    y += yo;
    /* NaN passes through, as relu_f32 */
    if (i + 16 <= n) {
        float16 v = vload_half16(0, x + i);
        vstore_half16(v < 0.0f ? (float16)(0.0f) : v, 0, y + i);
        return;
    }
    for (; i < n; i++) {
        float v = vload_half(0, x + i);
        vstore_half(v < 0.0f ? 0.0f : v, 0, y + i);
    }
}

/* dx = dy where y > 0, else 0 */
__kernel void relu_backward_f16(__global const half *dy, ulong dyo, __global const half *y, ulong yo,
                                __global half *dx, ulong dxo, ulong n)
{
    ulong i = get_global_id(0) * 16;
    dy += dyo;
    y += yo;
    dx += dxo;
    if (i + 16 <= n)
        vstore_half16(vload_half16(0, y + i) > 0.0f ? vload_half16(0, dy + i) : (float16)(0.0f), 0, dx + i);
    else
        for (; i < n; i++) vstore_half(vload_half(0, y + i) > 0.0f ? vload_half(0, dy + i) : 0.0f, 0, dx + i);
}
