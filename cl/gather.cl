/* The loader's batch from a data set resident on the device
 * (src/data/resident.c): row k of the batch is example idx[k]. Every value
 * is copied as 32 bits, never computed: a byte pixel becomes the float32
 * bits of table[pixel] (the host loader's scale table, v / 255.0f), a
 * float32 feature is copied as it is, and y takes `width` 32-bit words per
 * example (an int32 class id, or a regression's float32 targets). So the
 * batch is the host loader's to the bit. Offsets are in elements of the
 * buffer's declared type, xs_off in bytes. One work-item per value: the
 * first count * pixels make x, the next count * width make y. */
__kernel void gather_batch(__global const uchar *xs, ulong xs_off, int byte_pixels, __global const uint *table,
                           ulong table_off, __global const uint *ys, ulong ys_off, ulong width,
                           __global const int *idx, ulong idx_off, __global uint *x, ulong x_off, __global uint *y,
                           ulong y_off, ulong count, ulong pixels)
{
    ulong i = get_global_id(0);
    ulong nx = count * pixels;
    if (i < nx) {
        ulong k = i / pixels;
        ulong at = (ulong)idx[idx_off + k] * pixels + (i - k * pixels);
        x[x_off + i] = byte_pixels ? table[table_off + xs[xs_off + at]] : ((__global const uint *)(xs + xs_off))[at];
    } else if (i < nx + count * width) {
        ulong j = i - nx;
        ulong k = j / width;
        y[y_off + j] = ys[ys_off + (ulong)idx[idx_off + k] * width + (j - k * width)];
    }
}
