/* The caching allocator: the chapter's allocated/reserved cell, peaks, cache
 * reuse without driver calls, splitting and merging, categories, the memory
 * cap (by API and by CLT_MEMORY_CAP), oversize tensors and clt_memory_get_info.
 * Every test starts from an empty cache, so the suite also holds when Check
 * runs all tests in one process (CK_FORK=no, as under valgrind). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "support.h"

#define MIB ((int64_t)1 << 20)


/* Empty cache, no cap, peaks reset: what a fresh process would see. */
static clt_device fresh(clt_device dev)
{
    ck_assert_ok(clt_memory_set_cap(dev, 0));
    ck_assert_ok(clt_memory_empty_cache(dev));
    ck_assert_ok(clt_memory_reset_peak(dev));
    ck_assert_int_eq(clt_memory_allocated(dev), 0);
    ck_assert_int_eq(clt_memory_reserved(dev), 0);
    return dev;
}

static clt_memory_stats stats(clt_device dev)
{
    clt_memory_stats s;
    ck_assert_ok(clt_memory_get_stats(dev, &s));
    return s;
}

/* A float32 tensor of `bytes` bytes (a multiple of 4). */
static clt_tensor *alloc_bytes(clt_device dev, int64_t bytes)
{
    clt_tensor *t;
    int64_t shape[] = {bytes / 4};
    ck_assert_ok(clt_empty(&t, dev, CLT_FLOAT32, 1, shape));
    return t;
}

static void assert_message_has(const char *needle)
{
    ck_assert_msg(strstr(clt_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"", clt_last_error(),
                  needle);
}

START_TEST(test_chapter_cell)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_tensor *big;
    int64_t shape[] = {64, 1024, 1024}; /* 256 MiB of float32 */
    ck_assert_ok(clt_zeros(&big, dev, CLT_FLOAT32, 3, shape));
    ck_assert_int_eq(clt_memory_allocated(dev), 256 * MIB);
    ck_assert_int_ge(clt_memory_reserved(dev), 256 * MIB);
    int64_t reserved = clt_memory_reserved(dev);
    clt_tensor_release(big);
    /* Deleting it: allocated falls, reserved stays (the block is cached). */
    ck_assert_int_eq(clt_memory_allocated(dev), 0);
    ck_assert_int_eq(clt_memory_reserved(dev), reserved);
    ck_assert_int_eq(clt_memory_max_allocated(dev), 256 * MIB);
    ck_assert_int_eq(clt_memory_max_reserved(dev), reserved);
    /* empty_cache gives it back to the driver. */
    clt_memory_stats before = stats(dev);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_memory_stats after = stats(dev);
    ck_assert_int_eq(after.reserved, 0);
    ck_assert_int_eq(after.segments, 0);
    ck_assert_int_eq(after.cached_blocks, 0);
    ck_assert_uint_eq(after.driver_frees, before.driver_frees + (uint64_t)before.segments);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_peaks_and_reset)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_tensor *a = alloc_bytes(dev, 3 * MIB), *b = alloc_bytes(dev, 5 * MIB);
    ck_assert_int_eq(clt_memory_max_allocated(dev), 8 * MIB);
    clt_tensor_release(b);
    ck_assert_int_eq(clt_memory_allocated(dev), 3 * MIB);
    ck_assert_int_eq(clt_memory_max_allocated(dev), 8 * MIB);
    int64_t reserved = clt_memory_reserved(dev);
    ck_assert_int_eq(clt_memory_max_reserved(dev), reserved);
    ck_assert_ok(clt_memory_reset_peak(dev));
    ck_assert_int_eq(clt_memory_max_allocated(dev), 3 * MIB);
    ck_assert_int_eq(clt_memory_max_reserved(dev), reserved);
    clt_tensor_release(a);
    ck_assert_int_eq(clt_memory_max_allocated(dev), 3 * MIB);
    ck_assert_ok(clt_memory_empty_cache(dev));
    ck_assert_int_eq(clt_memory_max_reserved(dev), reserved); /* a peak, not the current value */
    ck_assert_ok(clt_memory_reset_peak(dev));
    ck_assert_int_eq(clt_memory_max_allocated(dev), 0);
    ck_assert_int_eq(clt_memory_max_reserved(dev), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_exact_bytes_and_rounding)
{
    clt_device dev = fresh(clt_try_gpu(0));
    /* allocated counts what tensors asked for; reserved counts driver buffers:
     * 2 MiB for the small pool, 20 MiB for a large request under 10 MiB, else
     * the request rounded to 2 MiB. */
    clt_tensor *s = alloc_bytes(dev, 28);
    ck_assert_int_eq(clt_memory_allocated(dev), 28);
    ck_assert_int_eq(clt_memory_reserved(dev), 2 * MIB);
    clt_tensor *m = alloc_bytes(dev, 3 * MIB + 4);
    ck_assert_int_eq(clt_memory_allocated(dev), 28 + 3 * MIB + 4);
    ck_assert_int_eq(clt_memory_reserved(dev), 22 * MIB);
    /* 11 MiB fits the rest of the 20 MiB segment; 17 MiB + 4 does not and
     * gets a segment of 18 MiB. */
    clt_tensor *l = alloc_bytes(dev, 11 * MIB);
    ck_assert_int_eq(clt_memory_reserved(dev), 22 * MIB);
    clt_tensor *x = alloc_bytes(dev, 17 * MIB + 4);
    ck_assert_int_eq(clt_memory_reserved(dev), 40 * MIB);
    ck_assert_int_eq(stats(dev).segments, 3);
    clt_tensor_release(s);
    clt_tensor_release(m);
    clt_tensor_release(l);
    clt_tensor_release(x);
    ck_assert_int_eq(clt_memory_allocated(dev), 0);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_cache_reuse_without_driver)
{
    static const int64_t sizes[] = {4, 1000, 512 * 1024, MIB, MIB + 4, 6 * MIB, 30 * MIB};
    for (int d = 0; d < clt_device_list_num_entries(); d++) {
        clt_device dev;
        ck_assert_ok(clt_device_list_entry(d, &dev));
        fresh(dev);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            clt_tensor *t = alloc_bytes(dev, sizes[k]);
            clt_tensor_release(t);
            clt_memory_stats before = stats(dev);
            for (int rep = 0; rep < 3; rep++) {
                t = alloc_bytes(dev, sizes[k]);
                ck_assert_int_eq(clt_memory_allocated(dev), sizes[k]);
                clt_tensor_release(t);
            }
            clt_memory_stats after = stats(dev);
            ck_assert_uint_eq(after.driver_allocs, before.driver_allocs);
            ck_assert_uint_eq(after.cache_hits, before.cache_hits + 3);
            ck_assert_int_eq(after.reserved, before.reserved);
            /* Slightly smaller requests are served from the cache too. */
            if (sizes[k] > 1024) {
                t = alloc_bytes(dev, sizes[k] - 1024);
                clt_tensor_release(t);
                ck_assert_uint_eq(stats(dev).driver_allocs, before.driver_allocs);
            }
        }
        ck_assert_ok(clt_memory_empty_cache(dev));
        ck_assert_int_eq(clt_memory_reserved(dev), 0);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_small_pool_packs_one_segment)
{
    clt_device dev = fresh(clt_try_gpu(0));
    uint64_t allocs0 = stats(dev).driver_allocs;
    enum { N = 64 };
    clt_tensor *t[N];
    for (int i = 0; i < N; i++) t[i] = alloc_bytes(dev, 4 * (i + 1) * 37); /* up to 9.5 KiB each */
    clt_memory_stats s = stats(dev);
    ck_assert_int_eq(s.segments, 1);
    ck_assert_uint_eq(s.driver_allocs, allocs0 + 1);
    ck_assert_int_eq(s.reserved, 2 * MIB);
    /* Each block is its own memory: write distinct values and read them back. */
    for (int i = 0; i < N; i++) {
        clt_tensor *f;
        ck_assert_ok(clt_full(&f, dev, CLT_FLOAT32, 1, (int64_t[]){clt_tensor_numel(t[i])}, i));
        ck_assert_ok(clt_copy_(t[i], f));
        clt_tensor_release(f);
    }
    for (int i = 0; i < N; i++) {
        float *x = clt_test_read(t[i]);
        ck_assert_float_eq(x[0], (float)i);
        ck_assert_float_eq(x[clt_tensor_numel(t[i]) - 1], (float)i);
        free(x);
    }
    /* Free every other one, then all: the free neighbours merge into one block. */
    for (int i = 0; i < N; i += 2) clt_tensor_release(t[i]);
    ck_assert_int_gt(stats(dev).cached_blocks, 1);
    for (int i = 1; i < N; i += 2) clt_tensor_release(t[i]);
    s = stats(dev);
    ck_assert_int_eq(s.cached_blocks, 1);
    ck_assert_int_eq(s.segments, 1);
    /* Now a 1 MiB request fits the merged segment. */
    clt_tensor *one = alloc_bytes(dev, MIB);
    ck_assert_uint_eq(stats(dev).driver_allocs, allocs0 + 1);
    clt_tensor_release(one);
    ck_assert_ok(clt_memory_empty_cache(dev));
    ck_assert_int_eq(clt_memory_reserved(dev), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_split_and_merge_large)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_memory_stats s0 = stats(dev);
    /* One 20 MiB segment, split three ways. */
    clt_tensor *a = alloc_bytes(dev, 2 * MIB), *b = alloc_bytes(dev, 4 * MIB), *c = alloc_bytes(dev, 3 * MIB);
    clt_memory_stats s = stats(dev);
    ck_assert_int_eq(s.segments, 1);
    ck_assert_int_eq(s.reserved, 20 * MIB);
    ck_assert_uint_eq(s.driver_allocs, s0.driver_allocs + 1);
    ck_assert_uint_eq(s.splits, s0.splits + 3);
    ck_assert_int_eq(s.cached_blocks, 1); /* the 11 MiB tail */
    /* A hole in the middle: the best fit for 4 MiB is the hole, not the tail. */
    clt_tensor_release(b);
    ck_assert_int_eq(stats(dev).cached_blocks, 2);
    clt_tensor *b2 = alloc_bytes(dev, 4 * MIB);
    ck_assert_int_eq(stats(dev).cached_blocks, 1);
    ck_assert_uint_eq(stats(dev).driver_allocs, s0.driver_allocs + 1);
    clt_tensor_release(b2);
    /* Fragmentation: 4 + 11 MiB are free but not adjacent to a 2 MiB hole
     * (a stays), so 16 MiB does not fit and needs a new segment. */
    clt_tensor *d = alloc_bytes(dev, 16 * MIB);
    s = stats(dev);
    ck_assert_uint_eq(s.driver_allocs, s0.driver_allocs + 2);
    ck_assert_int_eq(s.segments, 2);
    clt_tensor_release(d);
    /* Freeing c merges the 4 MiB hole, c and the tail into one 18 MiB block. */
    clt_tensor_release(c);
    clt_memory_stats before = stats(dev);
    clt_tensor *e = alloc_bytes(dev, 18 * MIB);
    clt_memory_stats after = stats(dev);
    ck_assert_uint_eq(after.driver_allocs, before.driver_allocs);
    /* It took the merged 18 MiB block; the 16 MiB segment stays cached. */
    ck_assert_int_eq(after.cached_blocks, 1);
    clt_tensor_release(e);
    /* empty_cache frees only whole free segments: the first still holds a. */
    ck_assert_ok(clt_memory_empty_cache(dev));
    s = stats(dev);
    ck_assert_int_eq(s.segments, 1);
    ck_assert_int_eq(s.reserved, 20 * MIB);
    clt_tensor_release(a);
    ck_assert_ok(clt_memory_empty_cache(dev));
    ck_assert_int_eq(clt_memory_reserved(dev), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_views_and_copies_keep_memory_right)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_tensor *t = alloc_bytes(dev, 400), *v, *c;
    ck_assert_ok(clt_narrow(&v, t, 10, 50));
    clt_tensor_release(t);
    ck_assert_int_eq(clt_memory_allocated(dev), 400); /* the view holds the storage */
    ck_assert_ok(clt_copy_to(&c, v, dev));
    ck_assert_int_eq(clt_memory_allocated(dev), 600);
    clt_tensor_release(v);
    ck_assert_int_eq(clt_memory_allocated(dev), 200);
    clt_tensor_release(c);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_categories)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_tensor *w = alloc_bytes(dev, 4000), *g = alloc_bytes(dev, 1200), *o = alloc_bytes(dev, 44);
    ck_assert_int_eq(clt_tensor_category(w), CLT_MEM_OTHER);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_OTHER), 5244);
    ck_assert_ok(clt_tensor_set_category(w, CLT_MEM_WEIGHTS));
    ck_assert_ok(clt_tensor_set_category(g, CLT_MEM_GRADIENTS));
    ck_assert_int_eq(clt_tensor_category(w), CLT_MEM_WEIGHTS);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_WEIGHTS), 4000);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_GRADIENTS), 1200);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_OTHER), 44);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_ACTIVATIONS), 0);
    /* A view shares its storage's category. */
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, w, 0, 10));
    ck_assert_int_eq(clt_tensor_category(v), CLT_MEM_WEIGHTS);
    ck_assert_ok(clt_tensor_set_category(v, CLT_MEM_OPTIMIZER));
    ck_assert_int_eq(clt_tensor_category(w), CLT_MEM_OPTIMIZER);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_WEIGHTS), 0);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_OPTIMIZER), 4000);
    ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_WEIGHTS), 4000);
    clt_tensor_release(v);
    clt_tensor_release(w);
    ck_assert_int_eq(clt_memory_allocated_category(dev, CLT_MEM_OPTIMIZER), 0);
    ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_OPTIMIZER), 4000);
    clt_memory_stats s = stats(dev);
    int64_t sum = 0;
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) sum += s.category_allocated[c];
    ck_assert_int_eq(sum, s.allocated);
    ck_assert_ok(clt_memory_reset_peak(dev));
    ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_OPTIMIZER), 0);
    ck_assert_int_eq(clt_memory_max_allocated_category(dev, CLT_MEM_GRADIENTS), 1200);
    /* The report shows every category. */
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_ok(clt_memory_report(dev, f));
    fclose(f);
    char name[16];
    ck_assert_ok(clt_device_name(dev, name, sizeof name));
    ck_assert_ptr_nonnull(strstr(buf, name));
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) ck_assert_ptr_nonnull(strstr(buf, clt_memory_category_name(c)));
    ck_assert_ptr_nonnull(strstr(buf, "allocated"));
    ck_assert_ptr_nonnull(strstr(buf, "reserved"));
    clt_tensor_release(g);
    clt_tensor_release(o);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_cap_by_api)
{
    clt_device dev = fresh(clt_try_gpu(0));
    char name[16];
    ck_assert_ok(clt_device_name(dev, name, sizeof name));
    ck_assert_ok(clt_memory_set_cap(dev, 64 * MIB));
    ck_assert_int_eq(stats(dev).cap, 64 * MIB);
    clt_tensor *a = alloc_bytes(dev, 40 * MIB), *b = (clt_tensor *)&a;
    int64_t shape[] = {10 * MIB};
    clt_memory_stats before = stats(dev);
    ck_assert_status(clt_zeros(&b, dev, CLT_FLOAT32, 1, shape), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(b);
    assert_message_has("tried to allocate 40.0 MiB");
    assert_message_has(name);
    assert_message_has("capped at 64.0 MiB");
    assert_message_has("40.0 MiB allocated");
    assert_message_has("40.0 MiB reserved");
    assert_message_has("device total");
    assert_message_has("smaller batch");
    clt_memory_stats after = stats(dev);
    ck_assert_int_eq(after.allocated, before.allocated);
    ck_assert_int_eq(after.reserved, before.reserved);
    ck_assert_uint_eq(after.oom_retries, before.oom_retries + 1);
    /* Still usable: what fits is served. */
    clt_tensor *c = alloc_bytes(dev, 20 * MIB);
    ck_assert_int_le(clt_memory_reserved(dev), 64 * MIB);
    clt_tensor_release(c);
    /* A cached block in the way is given back and the request retried. */
    clt_tensor_release(a);
    ck_assert_int_eq(clt_memory_reserved(dev), 60 * MIB);
    clt_tensor *d = alloc_bytes(dev, 50 * MIB);
    ck_assert_int_eq(clt_memory_reserved(dev), 50 * MIB);
    ck_assert_uint_eq(stats(dev).oom_retries, before.oom_retries + 2);
    clt_tensor_release(d);
    /* A fraction of the device. */
    clt_device_info info;
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device x;
        ck_assert_ok(clt_device_list_entry(i, &x));
        if (!clt_device_equal(x, dev)) continue;
        ck_assert_ok(clt_device_list_info(i, &info));
        ck_assert_ok(clt_memory_set_fraction(dev, 0.25));
        ck_assert_int_eq(stats(dev).cap, (int64_t)(0.25 * (double)info.global_mem_bytes));
    }
    ck_assert_ok(clt_memory_set_cap(dev, 0));
    ck_assert_int_eq(stats(dev).cap, 0);
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_test_assert_no_live_tensors();
}
END_TEST

/* docs/memory.md: under a cap, allocations fail exactly as if the device
 * were that small, also when the cache could serve them. */
START_TEST(test_cap_below_what_is_cached)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_tensor *big = alloc_bytes(dev, 64 * MIB);
    clt_tensor_release(big);
    ck_assert_int_ge(clt_memory_reserved(dev), 64 * MIB); /* cached */
    int64_t cap = 48 * MIB / 10;                         /* 4.8 MiB */
    ck_assert_ok(clt_memory_set_cap(dev, cap));
    int64_t shape[] = {16 * MIB};
    clt_tensor *t = (clt_tensor *)&big;
    ck_assert_status(clt_empty(&t, dev, CLT_FLOAT32, 1, shape), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(t);
    assert_message_has("over the memory cap");
    assert_message_has("capped at 4.8 MiB");
    ck_assert_int_le(clt_memory_reserved(dev), cap); /* the cache beyond the cap went back */
    clt_tensor *small = alloc_bytes(dev, 2 * MIB);    /* what fits is served */
    ck_assert_int_le(clt_memory_reserved(dev), cap);
    clt_tensor_release(small);
    ck_assert_ok(clt_memory_set_cap(dev, 0));
    ck_assert_ok(clt_memory_empty_cache(dev));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_cap_is_per_device)
{
    clt_test_skip_if(clt_num_gpus() < 2, "two-gpus", "needs two GPUs, found %d", clt_num_gpus());
    fresh(clt_gpu(0));
    fresh(clt_gpu(1));
    ck_assert_ok(clt_memory_set_cap(clt_gpu(0), 8 * MIB));
    clt_tensor *t;
    int64_t shape[] = {4 * MIB};
    ck_assert_status(clt_zeros(&t, clt_gpu(0), CLT_FLOAT32, 1, shape), CLT_ERR_OUT_OF_MEMORY);
    assert_message_has("gpu:0");
    ck_assert_ok(clt_zeros(&t, clt_gpu(1), CLT_FLOAT32, 1, shape));
    ck_assert_int_eq(clt_memory_allocated(clt_gpu(1)), 16 * MIB);
    ck_assert_int_eq(clt_memory_allocated(clt_gpu(0)), 0);
    ck_assert_int_eq(clt_memory_reserved(clt_gpu(0)), 0);
    clt_tensor_release(t);
    ck_assert_ok(clt_memory_set_cap(clt_gpu(0), 0));
    ck_assert_ok(clt_memory_empty_cache(clt_gpu(1)));
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_larger_than_max_allocation)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_device_info info;
    ck_assert_ok(clt_device_list_info(0, &info));
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device x;
        ck_assert_ok(clt_device_list_entry(i, &x));
        if (clt_device_equal(x, dev)) ck_assert_ok(clt_device_list_info(i, &info));
    }
    clt_memory_stats before = stats(dev);
    clt_tensor *t = (clt_tensor *)&t;
    int64_t shape[] = {(int64_t)(info.max_alloc_bytes / 4) + 1};
    ck_assert_status(clt_zeros(&t, dev, CLT_FLOAT32, 1, shape), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(t);
    assert_message_has("exceeds the largest single allocation");
    int64_t huge[] = {(int64_t)1 << 40, 4};
    ck_assert_status(clt_ones(&t, dev, CLT_FLOAT32, 2, huge), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_status(clt_rand(&t, dev, 2, huge, 1), CLT_ERR_OUT_OF_MEMORY);
    clt_memory_stats after = stats(dev);
    ck_assert_uint_eq(after.driver_allocs, before.driver_allocs);
    ck_assert_int_eq(after.reserved, before.reserved);
    ck_assert_uint_eq(after.oom_retries, before.oom_retries);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_zero_size_allocates_nothing)
{
    clt_device dev = fresh(clt_try_gpu(0));
    clt_memory_stats before = stats(dev);
    clt_tensor *t;
    int64_t shape[] = {0, 1 << 20};
    ck_assert_ok(clt_ones(&t, dev, CLT_FLOAT32, 2, shape));
    clt_memory_stats after = stats(dev);
    ck_assert_uint_eq(after.driver_allocs + after.cache_hits, before.driver_allocs + before.cache_hits);
    ck_assert_int_eq(after.allocated, 0);
    clt_tensor_release(t);
    clt_test_assert_no_live_tensors();
}
END_TEST

START_TEST(test_mem_get_info)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device dev;
        clt_device_info info;
        ck_assert_ok(clt_device_list_entry(i, &dev));
        ck_assert_ok(clt_device_list_info(i, &info));
        int64_t free_bytes = 0, total = 0;
        ck_assert_ok(clt_memory_get_info(dev, &free_bytes, &total));
        ck_assert_int_eq(total, (int64_t)info.global_mem_bytes);
        /* pocl's devices are CPUs: free is the host's MemAvailable, capped at total. */
        ck_assert(free_bytes == -1 || (free_bytes > 0 && free_bytes <= total));
        /* A CPU-class device (docs/gpu.md) reports the host's available memory. */
        const char *cls = getenv("CLT_DEVICE_CLASS");
        int gpu_class = cls && strcasecmp(cls, "gpu") == 0;
        if (strcmp(info.type, "cpu") == 0 && !gpu_class) {
            ck_assert_int_gt(free_bytes, 0);
            long long kb = -1;
            char line[256];
            FILE *f = fopen("/proc/meminfo", "r");
            while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
            if (f) fclose(f);
            /* With a GiB to spare either way, free is exactly total. */
            if (kb * 1024 > total + ((int64_t)1 << 30)) ck_assert_int_eq(free_bytes, total);
            if (kb >= 0 && kb * 1024 + ((int64_t)1 << 30) < total)
                ck_assert_int_lt(free_bytes, total);
        }
    }
}
END_TEST

START_TEST(test_devices_count_separately)
{
    clt_test_skip_if(clt_num_gpus() < 1, "gpu", "needs a GPU besides the CPU, found none");
    clt_device g = fresh(clt_gpu(0)), c = fresh(clt_test_cpu());
    clt_tensor *t = alloc_bytes(g, 3 * MIB), *u;
    ck_assert_int_eq(clt_memory_allocated(c), 0);
    ck_assert_ok(clt_copy_to(&u, t, c));
    ck_assert_int_eq(clt_memory_allocated(c), 3 * MIB);
    ck_assert_int_eq(clt_memory_allocated(g), 3 * MIB);
    clt_tensor_release(t);
    ck_assert_int_eq(clt_memory_allocated(g), 0);
    ck_assert_int_eq(clt_memory_allocated(c), 3 * MIB);
    clt_tensor_release(u);
    ck_assert_ok(clt_memory_empty_cache(g));
    ck_assert_ok(clt_memory_empty_cache(c));
    clt_test_assert_no_live_tensors();
}
END_TEST

/* CLT_MEMORY_CAP is read when a device's allocator is first used, so it is
 * tested in a new process: this binary runs itself with the variable set. */
static int run_child(const char *cap)
{
    char capvar[128], rolevar[] = "CLT_TEST_MEMCAP_CHILD=1";
    snprintf(capvar, sizeof capvar, "CLT_MEMORY_CAP=%s", cap);
    const char *set[] = {capvar, rolevar, NULL};
    char **env = clt_test_environ_with(set);
    int code = clt_test_run_self(NULL, env, NULL, 0);
    free(env);
    return code;
}

START_TEST(test_cap_by_environment)
{
    ck_assert_int_eq(run_child("48M"), 0);
    ck_assert_int_eq(run_child("cpu:0=0.5,gpu:1=16M"), 0);
}
END_TEST

/* In the child: CLT_MEMORY_CAP is set as run_child says. */
START_TEST(test_child_env_cap)
{
    const char *cap = getenv("CLT_MEMORY_CAP");
    if (strcmp(cap, "48M") == 0) {
        for (int i = 0; i < clt_device_list_num_entries(); i++) {
            clt_device d;
            ck_assert_ok(clt_device_list_entry(i, &d));
            ck_assert_int_eq(stats(d).cap, 48 * MIB);
        }
        clt_device dev = clt_try_gpu(0);
        clt_tensor *a = alloc_bytes(dev, 32 * MIB), *b;
        int64_t shape[] = {8 * MIB};
        ck_assert_status(clt_zeros(&b, dev, CLT_FLOAT32, 1, shape), CLT_ERR_OUT_OF_MEMORY);
        assert_message_has("capped at 48.0 MiB");
        clt_tensor_release(a);
        ck_assert_ok(clt_zeros(&b, dev, CLT_FLOAT32, 1, shape)); /* usable after the failure */
        clt_tensor_release(b);
    } else {
        clt_device_info info;
        for (int i = 0; i < clt_device_list_num_entries(); i++) {
            clt_device d;
            ck_assert_ok(clt_device_list_entry(i, &d));
            ck_assert_ok(clt_device_list_info(i, &info));
            int64_t want = strcmp(info.name, "cpu:0") == 0   ? (int64_t)(0.5 * (double)info.global_mem_bytes)
                           : strcmp(info.name, "gpu:1") == 0 ? 16 * MIB
                                                              : 0;
            ck_assert_int_eq(stats(d).cap, want);
        }
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    if (getenv("CLT_TEST_MEMCAP_CHILD")) {
        Suite *s = suite_create("memory cap from the environment");
        TCase *tc = clt_test_tcase("child");
        tcase_add_test(tc, test_child_env_cap);
        suite_add_tcase(s, tc);
        return clt_test_run(s);
    }
    Suite *s = suite_create("memory");
    TCase *tc = clt_test_tcase("allocator");
    tcase_add_test(tc, test_chapter_cell);
    tcase_add_test(tc, test_peaks_and_reset);
    tcase_add_test(tc, test_exact_bytes_and_rounding);
    tcase_add_test(tc, test_cache_reuse_without_driver);
    tcase_add_test(tc, test_small_pool_packs_one_segment);
    tcase_add_test(tc, test_split_and_merge_large);
    tcase_add_test(tc, test_views_and_copies_keep_memory_right);
    tcase_add_test(tc, test_categories);
    tcase_add_test(tc, test_cap_by_api);
    tcase_add_test(tc, test_cap_below_what_is_cached);
    tcase_add_test(tc, test_larger_than_max_allocation);
    tcase_add_test(tc, test_zero_size_allocates_nothing);
    tcase_add_test(tc, test_mem_get_info);
    tcase_add_test(tc, test_cap_by_environment);
    suite_add_tcase(s, tc);
    TCase *gpus = clt_test_tcase("gpus"); /* a ctest entry of its own, which may skip */
    tcase_set_tags(gpus, "gpus");
    tcase_add_test(gpus, test_cap_is_per_device);
    tcase_add_test(gpus, test_devices_count_separately);
    suite_add_tcase(s, gpus);
    return clt_test_run(s);
}
