/* The loader's batch from a data set resident on the device
 * (src/data/resident.c): row k of the batch is example idx[k], and every
 * value is the host loader's to the bit. A byte pixel v becomes v / 255.0f
 * rounded once: the quotient q = v * (1 / 255.0f) corrected by one fused
 * multiply-add of its remainder v - 255 q, which fma computes exactly,
 * gives the correctly rounded quotient for each of the 256 bytes
 * (tests/test_loader.c compares them all). A float32 feature is copied as
 * it is, and y takes `width` 32-bit words per example (an int32 class id,
 * or a regression's float32 targets). Offsets are in elements of the
 * buffer's declared type, xs_off in bytes. A two-dimensional range:
 * dimension 0 is the example k, so that consecutive work-items read
 * different rows and a CPU's loop over them has many rows' reads in
 * flight; dimension 1 the runs of 16 values of its row
 * (src/data/resident.c's GATHER_RUN), one work-item each, then one
 * work-item for its y. */
static float16 scale16(uchar16 b)
{
    float16 v = convert_float16(b), q = v * (1.0f / 255.0f);
    return fma(fma(-q, (float16)255.0f, v), (float16)(1.0f / 255.0f), q);
}

static float scale1(uchar b)
{
    float v = (float)b, q = v * (1.0f / 255.0f);
    return fma(fma(-q, 255.0f, v), 1.0f / 255.0f, q);
}

__kernel void gather_batch(__global const uchar *xs, ulong xs_off, int byte_pixels, __global const uint *ys,
                           ulong ys_off, ulong width, __global const int *idx, ulong idx_off, __global uint *x,
                           ulong x_off, __global uint *y, ulong y_off, ulong count, ulong pixels)
{
    ulong c = get_global_id(1), k = get_global_id(0), runs = (pixels + 15) / 16;
    if (k >= count || c > runs) return;
    ulong src = (ulong)idx[idx_off + k], lo = c * 16, hi = lo + 16 < pixels ? lo + 16 : pixels;
    __global uint *dst = x + x_off + k * pixels;
    if (c == runs) {
        for (ulong j = 0; j < width; j++) y[y_off + k * width + j] = ys[ys_off + src * width + j];
    } else if (byte_pixels) {
        __global const uchar *row = xs + xs_off + src * pixels;
        if (hi - lo == 16) vstore16(as_uint16(scale16(vload16(0, row + lo))), 0, dst + lo);
        else for (ulong v = lo; v < hi; v++) dst[v] = as_uint(scale1(row[v]));
    } else {
        __global const uint *row = (__global const uint *)(xs + xs_off) + src * pixels;
        for (ulong v = lo; v < hi; v++) dst[v] = row[v];
    }
}
