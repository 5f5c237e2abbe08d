/* Counter-based random numbers: element i of a seeded tensor depends only on
 * (seed, i), in any order. The uniform values are the same bits on every
 * device; the normal ones go through log, sqrt and cos, which OpenCL bounds
 * in ulps without fixing their rounding, so devices may differ in the last
 * bits. */

static ulong mix64(ulong z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    return z ^ (z >> 31);
}

/* 24 random bits as a float in [0, 1). */
static float uniform_at(ulong seed, ulong i)
{
    ulong z = mix64(seed + (i + 1) * 0x9e3779b97f4a7c15UL);
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

__kernel void rand_uniform_f32(__global float *y, ulong yo, ulong seed, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) y[yo + i] = uniform_at(seed, i);
}

/* Box-Muller over the counter pair (2i, 2i+1). */
__kernel void rand_normal_f32(__global float *y, ulong yo, ulong seed, ulong n)
{
    size_t i = get_global_id(0);
    if (i >= n) return;
    float u1 = 1.0f - uniform_at(seed, 2 * i); /* in (0, 1] */
    float u2 = uniform_at(seed, 2 * i + 1);
    y[yo + i] = sqrt(-2.0f * log(u1)) * cos(6.283185307179586f * u2);
}
