/* Described planning devices (clt_plan_device_describe): a description equal
 * to this machine's device plans exactly as that device's planning twin
 * (clt_plan_device), in its class and in the GPU class; the described
 * memory, largest buffer and cap are the ones honoured, and its caches and
 * tile the ones the CPU products' blocking and packing follow; bad descriptions and
 * a full pool are refused by name; `clt train --plan-for` prints the plan
 * for hardware this machine does not have, with no OpenCL platform too.
 * Under CK_FORK=no (scripts/test --valgrind) the tests share one process
 * and its pool of CLT_PLAN_MAX_DESCRIBED described devices, which they
 * describe at most between them (the same description is the same device);
 * the pool's end is tested in a process of its own (test_pool). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device_internal.h"
#include "ops/gemm_cpu.h"
#include "ops/tune.h"
#include "support.h"
#include "trainer/step.h"

static char out[1 << 16];

/* The description of the test device as its planning twin sees it: its
 * limits, its class as clt__gpu_class decides it now, its cap, the caches
 * its CPU products follow, its tile from its float width. */
static clt_device_description describe_test_device(void)
{
    clt_device real = clt_test_device();
    int slot, gpu;
    ck_assert_ok(clt__resolve(clt_plan_device(real), &slot));
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    const clt__slot *s = clt__slot_get(slot);
    clt_memory_stats st;
    ck_assert_ok(clt_memory_get_stats(clt_plan_device(real), &st));
    clt_device_description d = clt_device_description_default(gpu ? CLT_DEVICE_GPU : CLT_DEVICE_CPU);
    d.global_mem_bytes = s->global_mem;
    d.max_alloc_bytes = s->max_alloc;
    d.max_work_group = s->max_work_group;
    d.float_width = s->float_width;
    d.cap_bytes = st.cap;
    size_t l1, l2;
    clt__cpu_cache_sizes(slot, &l1, &l2);
    d.l1_cache_bytes = l1;
    d.l2_cache_bytes = l2;
    return d;
}

static void assert_same_plan(const clt_plan *a, const clt_plan *b, const char *what)
{
    const int64_t x[] = {a->weights, a->gradients, a->optimizer, a->batch, a->activations, a->temporaries, a->peak,
                         a->peak_activations, a->reserved, a->eval_peak, a->staging, a->staging_reserved};
    const int64_t y[] = {b->weights, b->gradients, b->optimizer, b->batch, b->activations, b->temporaries, b->peak,
                         b->peak_activations, b->reserved, b->eval_peak, b->staging, b->staging_reserved};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        ck_assert_msg(x[i] == y[i], "%s: figure %zu of the plan: %lld described, %lld on the twin", what, i,
                      (long long)x[i], (long long)y[i]);
}

/* Plans of two models at two batches (one a whole run, one float16, one
 * with recompute and accumulation) on dev and on twin (the test device's,
 * or a described one), with no tuned tiles: equal to the byte. */
static void assert_plans_equal(clt_device dev, clt_device twin, const char *what)
{
    /* Every product its default tile: this machine's tuned ones are not the description's. */
    ck_assert_int_eq(setenv("CLT_TUNE", "0", 1), 0);
    clt_model *res, *mlp;
    int64_t widths[] = {300, 200, 100};
    ck_assert_ok(clt_model_create_resmlp(&res, clt_test_device(), 784, 128, 4, 10, 1));
    ck_assert_ok(clt_model_create_mlp(&mlp, clt_test_device(), 784, 3, widths, 10, 1));
    clt_model *models[] = {res, mlp};
    for (int k = 0; k < 4; k++) {
        clt_plan_options o = clt_plan_default_options();
        o.batch_size = k % 2 ? 1000 : 64;
        o.optimizer = k < 2 ? CLT_OPTIMIZER_ADAM : CLT_OPTIMIZER_SGD;
        o.whole_run = k == 0;
        o.dtype = k == 3 ? CLT_FLOAT16 : CLT_FLOAT32;
        o.recompute_blocks = k == 2 ? CLT_RECOMPUTE_AUTO : 0;
        o.accumulate = k == 2 ? 3 : 1;
        clt_plan want, got;
        o.device = twin;
        ck_assert_ok(clt_plan_step(models[k / 2], &o, &want));
        o.device = dev;
        ck_assert_ok(clt_plan_step(models[k / 2], &o, &got));
        assert_same_plan(&got, &want, what);
        ck_assert_int_gt(got.peak, 0);
    }
    clt_model_free(mlp);
    clt_model_free(res);
}

/* (a) Equal to the machine's device: the same plans, to the byte. */
START_TEST(test_as_the_device)
{
    clt_device_description d = describe_test_device();
    clt_device dev;
    ck_assert_ok(clt_plan_device_describe(&d, &dev));
    ck_assert(clt_device_exists(dev));
    ck_assert(clt_device_equal(clt_plan_device(dev), dev));
    assert_plans_equal(dev, clt_test_device(), "described as the test device");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* (b) The GPU class: a described GPU with the test device's limits plans as
 * the twin does under CLT_DEVICE_CLASS=gpu, which does not change the
 * described device's own class. */
START_TEST(test_gpu_class)
{
    clt_device_description d = describe_test_device();
    d.type = CLT_DEVICE_GPU;
    clt_device dev;
    ck_assert_ok(clt_plan_device_describe(&d, &dev));
    const char *was = getenv("CLT_DEVICE_CLASS");
    char before[16];
    snprintf(before, sizeof before, "%s", was ? was : "");
    ck_assert_int_eq(setenv("CLT_DEVICE_CLASS", "gpu", 1), 0);
    assert_plans_equal(dev, clt_test_device(), "a described GPU");
    int slot, gpu;
    ck_assert_ok(clt__resolve(dev, &slot));
    ck_assert_int_eq(setenv("CLT_DEVICE_CLASS", "cpu", 1), 0);
    ck_assert_ok(clt__gpu_class(slot, &gpu));
    ck_assert_int_eq(gpu, 1);
    ck_assert_int_eq(was ? setenv("CLT_DEVICE_CLASS", before, 1) : unsetenv("CLT_DEVICE_CLASS"), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* (c) Its memory is the budget, its cap the cap, its largest buffer the limit. */
START_TEST(test_memory_honoured)
{
    clt_device_description d = clt_device_description_default(CLT_DEVICE_GPU);
    d.global_mem_bytes = 64ull << 20;
    d.max_alloc_bytes = 16ull << 20;
    clt_device small, big;
    ck_assert_ok(clt_plan_device_describe(&d, &small));
    char name[32];
    ck_assert_ok(clt_device_name(small, name, sizeof name));
    ck_assert_str_eq(name, "plan:gpu(64M)");
    int64_t free_bytes, total;
    ck_assert_ok(clt_memory_get_info(small, &free_bytes, &total));
    ck_assert_int_eq(total, 64 << 20);
    ck_assert_int_eq(free_bytes, -1);
    d.global_mem_bytes = 256ull << 20;
    d.max_alloc_bytes = 64ull << 20;
    d.cap_bytes = 200ll << 20;
    ck_assert_ok(clt_plan_device_describe(&d, &big));
    ck_assert(!clt_device_equal(small, big));
    clt_memory_stats st;
    ck_assert_ok(clt_memory_get_stats(big, &st));
    ck_assert_int_eq(st.cap, 200 << 20);
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_device(), 784, 256, 2, 10, 1));
    clt_plan_options o = clt_plan_default_options();
    int64_t b_small, b_big;
    o.device = small;
    ck_assert_ok(clt_plan_max_batch(m, &o, 64 << 20, 1 << 16, &b_small));
    o.device = big;
    ck_assert_ok(clt_plan_max_batch(m, &o, 200 << 20, 1 << 16, &b_big));
    ck_assert_msg(b_small > 100 && b_big > 3 * b_small, "largest batches %lld in 64 MiB, %lld in 200 MiB",
                  (long long)b_small, (long long)b_big);
    /* The largest buffer: 16 MiB on the small one. */
    clt_tensor *t = NULL;
    int64_t n = (16 << 20) / 4 + 1;
    ck_assert_status(clt_empty(&t, small, CLT_FLOAT32, 1, &n), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "plan:gpu(64M)"));
    ck_assert_ok(clt_empty(&t, big, CLT_FLOAT32, 1, &n));
    clt_tensor_release(t);
    clt_model_free(m);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* A step (a whole run when whole) of an MLP with one hidden layer of 512
 * at batch 256 on dev, every product its default tile. Its first product, x w^T (256 x 784 ->
 * 512), is blocked with an L2 of 64 KiB (x, 784 KiB, is past twice that)
 * and not with 1 MiB or more. */
static void plan_wide(clt_device dev, int whole, clt_plan *p)
{
    ck_assert_int_eq(setenv("CLT_TUNE", "0", 1), 0);
    clt_model *m;
    int64_t width = 512;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_device(), 784, 1, &width, 10, 1));
    clt_plan_options o = clt_plan_default_options();
    o.batch_size = 256;
    o.whole_run = whole;
    o.device = dev;
    ck_assert_ok(clt_plan_step(m, &o, p));
    clt_model_free(m);
}

/* The allocated peak of the second of two real training steps of
 * plan_wide's model on the test device, with SGD as plan_wide plans it. */
static int64_t measured_wide_peak(void)
{
    clt_device dev = clt_test_device();
    int64_t n = 256, xs[2] = {256, 784}, width = 512, one = 1;
    clt_model *m;
    ck_assert_ok(clt_model_create_mlp(&m, dev, xs[1], 1, &width, 10, 1));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_sgd(&opt, m, 0.01f, 0.0f, 0.0f));
    clt_tensor *loss_sum = NULL;
    ck_assert_ok(clt_zeros(&loss_sum, dev, CLT_FLOAT32, 1, &one));
    for (int step = 0; step < 2; step++) {
        if (step == 1) ck_assert_ok(clt_memory_reset_peak(dev));
        clt__step_tensors t = {0};
        ck_assert_ok(clt_zeros(&t.x, dev, CLT_FLOAT32, 2, xs));
        ck_assert_ok(clt_zeros(&t.y, dev, CLT_INT32, 1, &n));
        clt__step_options so = {0};
        ck_assert_ok(clt__train_step(m, opt, &t, loss_sum, 0, &so));
        clt__step_tensors_release(&t);
    }
    int64_t peak = clt_memory_max_allocated(dev);
    clt_tensor_release(loss_sum);
    clt_optimizer_free(opt);
    clt_model_free(m);
    return peak;
}

/* (f) The caches reach the blocking: a described device as the test
 * device (its class), with this machine's L1 and an L2 of 64 KiB, the
 * products on the CPU kernels (CLT_DENSE=cpu), plans as the test device does under
 * clt__cpu_cache_sizes_override with the same caches (every figure, to the
 * byte), and its peak is what a real step allocates there then; which is
 * not as it plans with its own caches: blocked, the first product
 * packs its A into panels of kc depths (kc = L1 / min(TN, 16) floats,
 * rounded down to 16, at least 64), which raises the whole run's peak by
 * at most those panels' bytes. */
START_TEST(test_caches)
{
    /* The CPU kernels in either class (the GPU class's own products follow no caches). */
    ck_assert_int_eq(setenv("CLT_DENSE", "cpu", 1), 0);
    clt_device_description d = describe_test_device();
    clt_device as_is, small;
    ck_assert_ok(clt_plan_device_describe(&d, &as_is));
    d.l2_cache_bytes = 64 << 10;
    ck_assert_ok(clt_plan_device_describe(&d, &small));
    ck_assert(!clt_device_equal(as_is, small)); /* another description, another device */
    clt_plan own, forced, described;
    plan_wide(clt_test_device(), 1, &own);
    clt__cpu_cache_sizes_override((size_t)d.l1_cache_bytes, (size_t)d.l2_cache_bytes);
    plan_wide(clt_test_device(), 1, &forced);
    int64_t measured = measured_wide_peak();
    clt__cpu_cache_sizes_override(0, 0);
    plan_wide(small, 1, &described);
    assert_same_plan(&described, &forced, "a 64 KiB L2, described and forced");
    clt_plan step; /* the step alone, as measured (a whole run may hold the training set too) */
    plan_wide(small, 0, &step);
    ck_assert_int_eq(step.peak, measured);
    int slot;
    ck_assert_ok(clt__resolve(small, &slot));
    clt__gemm_tile tile = clt__cpu_tile_default(slot);
    int64_t kc = (int64_t)d.l1_cache_bytes / (4 * (tile.tn < 16 ? tile.tn : 16)) / 16 * 16;
    int64_t panels = (256 + tile.tm - 1) / tile.tm * tile.tm * (kc < 64 ? 64 : kc) * 4;
    ck_assert_msg(described.peak > own.peak && described.peak - own.peak <= panels,
                  "peak %lld with a 64 KiB L2, %lld with this machine's; A's panels %lld bytes",
                  (long long)described.peak, (long long)own.peak, (long long)panels);
    ck_assert_int_eq(unsetenv("CLT_DENSE"), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* (g) The tile: a described CPU whose float width picks another tile but
 * whose tile is the test device's plans as the test device; one with the
 * test device's width and the tile 6 x 8 plans as a described width of 4
 * (whose tile that is), and not as the test device. */
START_TEST(test_tile)
{
    ck_assert_int_eq(setenv("CLT_DENSE", "cpu", 1), 0); /* as in test_caches */
    int slot;
    ck_assert_ok(clt__resolve(clt_test_device(), &slot));
    clt__gemm_tile own = clt__cpu_tile_default(slot);
    clt_device_description d = describe_test_device();
    d.float_width = own.tn == 8 ? 16 : 4; /* a tile of 12 x 32 or 6 x 8 */
    d.tile_m = own.tm;
    d.tile_n = own.tn;
    clt_device as_own, narrow, width4;
    ck_assert_ok(clt_plan_device_describe(&d, &as_own));
    assert_plans_equal(as_own, clt_test_device(), "the test device's tile, another width");
    d = describe_test_device();
    d.tile_m = 6;
    d.tile_n = 8;
    ck_assert_ok(clt_plan_device_describe(&d, &narrow));
    ck_assert_ok(clt__resolve(narrow, &slot));
    ck_assert_int_eq(clt__cpu_tile_default(slot).tm, 6);
    ck_assert_int_eq(clt__cpu_tile_default(slot).tn, 8);
    clt_device untiled;
    d.tile_m = d.tile_n = 0;
    ck_assert_ok(clt_plan_device_describe(&d, &untiled));
    ck_assert(!clt_device_equal(untiled, narrow));
    d.float_width = 4;
    ck_assert_ok(clt_plan_device_describe(&d, &width4));
    assert_plans_equal(narrow, width4, "the tile 6 x 8, given and from width 4");
    if (own.tn != 8) {
        clt_plan a, b;
        plan_wide(narrow, 1, &a);
        plan_wide(clt_test_device(), 1, &b);
        ck_assert_msg(a.peak != b.peak || a.eval_peak != b.eval_peak, "a 6 x 8 tile planned as %d x %d", own.tm,
                      own.tn);
    }
    ck_assert_int_eq(unsetenv("CLT_DENSE"), 0);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* (d) Each field out of range, named: a cap past the memory too, and the
 * labels that would name a built-in device's planning twin (plan:pinned is
 * pinned memory's, whatever is described). */
START_TEST(test_refused)
{
    static const char *const fields[] = {"type", "global_mem_bytes", "max_alloc_bytes", "max_work_group",
                                         "float_width", "cap_bytes", "label", "l1_cache_bytes",
                                         "l2_cache_bytes", "tile_m x tile_n", "cap_bytes"};
    for (int f = 0; f < 11; f++) {
        clt_device_description d = clt_device_description_default(CLT_DEVICE_CPU);
        clt_device dev;
        if (f == 0) d.type = CLT_DEVICE_PINNED;
        if (f == 1) d.global_mem_bytes = 1000;
        if (f == 2) d.max_alloc_bytes = d.global_mem_bytes + 1;
        if (f == 3) d.max_work_group = 0;
        if (f == 4) d.float_width = 3;
        if (f == 5) d.cap_bytes = -1;
        if (f == 6) snprintf(d.label, sizeof d.label, "a:b");
        if (f == 7) d.l1_cache_bytes = 1023;
        if (f == 8) d.l2_cache_bytes = (1ull << 30) + 1;
        if (f == 9) d.tile_n = 16; /* rows 0 */
        if (f == 10) d.cap_bytes = (long long)d.global_mem_bytes + 1;
        ck_assert_status(clt_plan_device_describe(&d, &dev), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(clt_last_error(), fields[f]) != NULL, "field %s: %s", fields[f], clt_last_error());
    }
    clt_device dev;
    static const char *const reserved[] = {"pinned", "Pinned", "cpu", "GPU"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        clt_device_description d = clt_device_description_default(CLT_DEVICE_GPU);
        snprintf(d.label, sizeof d.label, "%s", reserved[i]);
        ck_assert_status(clt_plan_device_describe(&d, &dev), CLT_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(clt_last_error(), "is reserved"), "%s: %s", reserved[i], clt_last_error());
    }
    char name[32];
    ck_assert_ok(clt_device_name(clt_plan_device(clt_pinned()), name, sizeof name));
    ck_assert_str_eq(name, "plan:pinned");
    ck_assert_status(clt_plan_device_describe(NULL, NULL), CLT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* The described devices this process holds: the numbers that exist. */
static int described_held(void)
{
    int n = 0;
    for (int i = 0; i < CLT_PLAN_MAX_DESCRIBED; i++)
        n += clt_device_exists((clt_device){CLT_DEVICE_PLAN, i, CLT_DEVICE_PLAN});
    return n;
}

/* (d) A device never described; the same description twice, one device;
 * a label, and another description under it refused; the pool's end (its
 * devices capped at all their memory, which a cap may be). In a process of
 * its own (test_pool), so that no other test's devices fill it first; any
 * it held before are counted all the same. */
START_TEST(test_pool_end)
{
    int held = described_held();
    ck_assert_int_lt(held, CLT_PLAN_MAX_DESCRIBED - 1);
    clt_device undescribed = {CLT_DEVICE_PLAN, CLT_PLAN_MAX_DESCRIBED - 1, CLT_DEVICE_PLAN};
    ck_assert(!clt_device_exists(undescribed));
    clt_memory_stats st;
    ck_assert_status(clt_memory_get_stats(undescribed, &st), CLT_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_plan_device_describe"));
    clt_device_description d = clt_device_description_default(CLT_DEVICE_CPU);
    snprintf(d.label, sizeof d.label, "box-1");
    clt_device first, again;
    ck_assert_ok(clt_plan_device_describe(&d, &first));
    ck_assert_ok(clt_plan_device_describe(&d, &again));
    ck_assert(clt_device_equal(first, again));
    char name[32];
    ck_assert_ok(clt_device_name(first, name, sizeof name));
    ck_assert_str_eq(name, "plan:box-1");
    ck_assert_int_eq(described_held(), held + 1);
    d.float_width = 16;
    ck_assert_status(clt_plan_device_describe(&d, &again), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "plan:box-1"));
    /* The pool: one more than it holds is refused, and the ones held still work. */
    d.label[0] = '\0';
    int added = 1;
    clt_status s = CLT_OK;
    for (unsigned long long mib = 1; s == CLT_OK && mib < 100; mib++, added += s == CLT_OK) {
        d.global_mem_bytes = mib << 20;
        d.max_alloc_bytes = d.global_mem_bytes;
        d.cap_bytes = (long long)d.global_mem_bytes;
        s = clt_plan_device_describe(&d, &again);
    }
    ck_assert_status(s, CLT_ERR_UNSUPPORTED);
    ck_assert_int_eq(held + added, CLT_PLAN_MAX_DESCRIBED);
    ck_assert_int_eq(described_held(), CLT_PLAN_MAX_DESCRIBED);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "8"));
    d.global_mem_bytes = d.max_alloc_bytes = 1 << 20;
    d.cap_bytes = 1 << 20;
    ck_assert_ok(clt_plan_device_describe(&d, &again));
    ck_assert_ok(clt_device_name(again, name, sizeof name));
    ck_assert_str_eq(name, "plan:cpu(1M)");
    clt_test_assert_no_live_tensors();
}
END_TEST

/* test_pool_end in a new process (this binary with --pool), whose pool
 * the other tests have not used. */
START_TEST(test_pool)
{
    const char *const none[] = {NULL};
    char **env = clt_test_environ_with(none);
    int code = clt_test_run_self("--pool", env, NULL, 300);
    free(env);
    ck_assert_int_eq(code, 0);
}
END_TEST

/* (e) The tool: --plan-for prints the plan for an 80 GiB GPU, and its exit
 * says whether the batch fits; with no OpenCL platform too; a malformed
 * value (a cap past a long long's range too) is refused with exit 2, a cap
 * past the memory with exit 1, naming it. */
START_TEST(test_cli)
{
    const char *clt = clt_test_clt_path();
    int rc = clt_test_shell(out, sizeof out, "%s train --plan-for gpu,memory=80G --batch-size 4096 2>&1", clt);
    ck_assert_msg(rc == 0 && strstr(out, "at batch 4096 on plan:gpu(80G)") &&
                      strstr(out, "fits: 81920.0 MiB available"),
                  "exit %d:\n%s", rc, out);
    /* A 64 MiB GPU capped at 32 MiB: batch 4096 does not fit (exit 1). */
    rc = clt_test_shell(out, sizeof out,
                        "%s train --plan-for gpu,memory=64M,max-alloc=64M,cap=32M,workgroup=256 --batch-size 4096 "
                        "2>&1", clt);
    ck_assert_msg(rc == 1 && strstr(out, "plan:gpu(64M)") && strstr(out, "DOES NOT FIT: 32.0 MiB available"),
                  "exit %d:\n%s", rc, out);
    static const char *const bad[] = {"tpu", "gpu,", "gpu,memory=", "gpu,memory=80X",
                                      "gpu,memory=99999999999999999999G", "gpu,width=8K", "gpu,colour=red",
                                      "gpu,memory=80G,,width=8", "gpu,cap=9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = clt_test_shell(out, sizeof out, "%s train --plan-for '%s' 2>&1", clt, bad[i]);
        ck_assert_msg(rc == 2 && strstr(out, "--plan-for needs cpu or gpu"), "%s: exit %d:\n%s", bad[i], rc, out);
    }
    /* Sizes as CLT_MEMORY_CAP writes them (clt_size_parse): 1.5GiB is 1536 MiB. */
    rc = clt_test_shell(out, sizeof out, "%s train --plan-for gpu,memory=1.5GiB 2>&1", clt);
    ck_assert_msg(rc == 0 && strstr(out, "plan:gpu(1536M)"), "exit %d:\n%s", rc, out);
    rc = clt_test_shell(out, sizeof out, "%s train --plan-for gpu,memory=512K 2>&1", clt);
    ck_assert_msg(rc == 1 && strstr(out, "global_mem_bytes 524288 is not between 1 MiB and 1 PiB"), "exit %d:\n%s",
                  rc, out);
    /* A cap past the memory is refused, not planned under. */
    rc = clt_test_shell(out, sizeof out, "%s train --plan-for gpu,memory=1G,cap=1T 2>&1", clt);
    ck_assert_msg(rc == 1 && strstr(out, "cap_bytes 1099511627776 is not between 0 (none) and global_mem_bytes "
                                         "(1073741824)") && !strstr(out, "fits"),
                  "exit %d:\n%s", rc, out);
    char dir[] = "/tmp/clt-noicd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    rc = clt_test_shell(out, sizeof out,
                        "OCL_ICD_VENDORS=%s %s train --plan-for cpu,memory=512M,max-alloc=512M,width=16 2>&1", dir, clt);
    rmdir(dir);
    ck_assert_msg(rc == 0 && strstr(out, "at batch 256 on plan:cpu(512M)"), "no platform: exit %d:\n%s", rc, out);
}
END_TEST

/* (h) --plan-for's caches and tile: an MLP 784-512-64-10 at batch 256 on a
 * CPU with a 48 KiB L1 and the tile 12 x 32 (or float width 16, which
 * picks it) plans 6.1 MiB with a 1 MiB L2, 6.9 MiB with 64 KiB (the first
 * product blocked, test_caches); with the tile 6 x 8, whose blocks of
 * depths (1536) are deeper than the product's 784, 6.1 MiB again. Bad
 * values are refused, the syntax with exit 2, ranges naming the field. */
START_TEST(test_cli_caches)
{
    const char *clt = clt_test_clt_path();
    static const char *const specs[] = {"cpu,width=16,l1=48K", "cpu,width=16,l1=48K,l2=64K",
                                        "cpu,l1=48K,l2=64K,tile=12x32", "cpu,l1=48K,l2=64K,tile=6x8"};
    static const char *const totals[] = {"total               6.1 MiB", "total               6.9 MiB",
                                         "total               6.9 MiB", "total               6.1 MiB"};
    static char first[sizeof out];
    for (int i = 0; i < 4; i++) {
        int rc = clt_test_shell(out, sizeof out, "%s train --plan-for %s --hiddens 512,64 2>&1", clt, specs[i]);
        ck_assert_msg(rc == 0 && strstr(out, totals[i]), "%s: exit %d:\n%s", specs[i], rc, out);
        if (i == 1) snprintf(first, sizeof first, "%s", out);
        /* The tile width 16 picks, given: the same plan, every line. */
        if (i == 2) ck_assert_str_eq(out, first);
    }
    static const char *const bad[] = {"cpu,l1=", "cpu,l2=1X", "cpu,tile=6", "cpu,tile=6x", "cpu,tile=x8",
                                      "cpu,tile=6Kx8", "cpu,tile=6x8K", "cpu,tile=6x8x8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = clt_test_shell(out, sizeof out, "%s train --plan-for '%s' 2>&1", clt, bad[i]);
        ck_assert_msg(rc == 2 && strstr(out, ",tile=TMxTN"), "%s: exit %d:\n%s", bad[i], rc, out);
    }
    static const char *const range[][2] = {{"cpu,l1=512", "l1_cache_bytes 512 is not between 1 KiB and 1 GiB"},
                                           {"cpu,l2=2G", "l2_cache_bytes 2147483648 is not"},
                                           {"cpu,tile=33x16", "tile_m x tile_n 33 x 16"},
                                           {"cpu,tile=6x12", "tile_m x tile_n 6 x 12"},
                                           {"cpu,tile=0x8", "tile_m x tile_n 0 x 8"}};
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        int rc = clt_test_shell(out, sizeof out, "%s train --plan-for '%s' 2>&1", clt, range[i][0]);
        ck_assert_msg(rc == 1 && strstr(out, range[i][1]), "%s: exit %d:\n%s", range[i][0], rc, out);
    }
}
END_TEST

/* (i) A batch past the largest buffer: with a 128 MiB largest buffer the
 * largest batches are bound by it, not by the 512 MiB; the report of a
 * batch that fits still says how far checkpointing goes (planned up to the
 * largest batch, not one past it), and one whose tensor is past the buffer
 * has no table, names the tensor, does not fit (exit 1) and says what
 * does. A model whose weights are past it is reported so too. */
START_TEST(test_cli_past_largest_buffer)
{
    const char *clt = clt_test_clt_path();
    const char *spec = "cpu,memory=512M,width=16 --hiddens 256";
    int rc = clt_test_shell(out, sizeof out, "%s train --plan-for %s 2>&1", clt, spec);
    ck_assert_msg(rc == 0 && strstr(out, "\nfits: 512.0 MiB") && strstr(out, "\ncheckpointing goes "), "exit %d:\n%s",
                  rc, out);
    long plain = 0, ckpt = 0;
    const char *at = strstr(out, "largest batch that fits: ");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at, "largest batch that fits: %ld without checkpointing, %ld with", &plain, &ckpt), 2);
    /* Bound by the buffer: x of plain + 1 examples is past 128 MiB. */
    ck_assert_msg(plain > 256 && (plain + 1) * 784 * 4 > (128 << 20) / 4, "largest batch %ld", plain);
    /* On a 32 MiB CPU (largest buffer 8 MiB), where the search for a
     * configuration that fits (which fails) allocates less. */
    rc = clt_test_shell(out, sizeof out, "%s train --plan-for cpu,memory=32M,width=16 --hiddens 256 --batch-size 4096 "
                        "2>&1", clt);
    at = strstr(out, "largest batch that fits: ");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at, "largest batch that fits: %ld without", &plain), 1);
    char lower[64];
    snprintf(lower, sizeof lower, "  - lower the batch size to %ld\n", plain);
    ck_assert_msg(rc == 1 && plain > 0 && plain < 4096 &&
                      strstr(out, "  no figures: the step stops at any budget: tensor of ") &&
                      strstr(out, "exceeds the largest single allocation of plan:cpu(32M) (8.0 MiB)") &&
                      strstr(out, "\nDOES NOT FIT: 32.0 MiB available, and no budget is enough at this batch\n") &&
                      strstr(out, lower) && !strstr(out, "  total ") && !strstr(out, "(--fit)"),
                  "exit %d:\n%s", rc, out);
    /* The model's weights (1.8 MiB) past a largest buffer of 1 MiB, a
     * quarter of 4 MiB or given: the model is built all the same (on the
     * tool's own device, plan:clt-model, which holds any model), and the
     * plan for the device asked for says so: no figures, does not fit,
     * and no batch does. */
    static const char *const small[][2] = {{"gpu,memory=4M", "plan:gpu(4M) (1.0 MiB)"},
                                           {"gpu,memory=80G,max-alloc=1M", "plan:gpu(80G) (1.0 MiB)"}};
    for (int i = 0; i < 2; i++) {
        rc = clt_test_shell(out, sizeof out, "%s train --plan-for %s 2>&1", clt, small[i][0]);
        ck_assert_msg(rc == 1 && strstr(out, "  no figures: the step stops at any budget: tensor of 1.8 MiB exceeds "
                                             "the largest single allocation of ") &&
                          strstr(out, small[i][1]) && strstr(out, "\nDOES NOT FIT: ") && !strstr(out, "clt-model") &&
                          strstr(out, "\nto fit:\n  - no batch fits, not even 1: use a smaller model or a larger "
                                      "device\n"),
                      "%s: exit %d:\n%s", small[i][0], rc, out);
    }
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--pool") == 0) {
        Suite *s = suite_create("plan_described pool");
        TCase *tc = clt_test_tcase("pool");
        tcase_add_test(tc, test_pool_end);
        suite_add_tcase(s, tc);
        return clt_test_run(s);
    }
    Suite *s = suite_create("plan_described");
    TCase *tc = clt_test_tcase("plan_described");
    tcase_add_test(tc, test_as_the_device);
    tcase_add_test(tc, test_gpu_class);
    tcase_add_test(tc, test_memory_honoured);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_pool);
    tcase_add_test(tc, test_cli);
    tcase_add_test(tc, test_caches);
    tcase_add_test(tc, test_tile);
    tcase_add_test(tc, test_cli_caches);
    tcase_add_test(tc, test_cli_past_largest_buffer);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
