/* A failed call changes nothing: a float16 conversion that fails leaves the
 * model and its optimizer's bookkeeping as they were; a checkpoint load that
 * fails (truncated file, wrong shape or dtype, bad metadata, a fault in the
 * middle) leaves the parameters and the optimizer state byte-identical; an
 * optimizer step that fails leaves the float16 loss scaler's counters
 * alone. And every host wait is a counted synchronization point: the
 * fallback where a completion callback cannot be set, and clt_trace_stop's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "nn/nn_internal.h"
#include "support.h"

#define B 6
#define IN 12
#define HIDDENS 8
#define CLASSES 4

typedef struct fixture {
    clt_device dev;
    clt_model *model;
    clt_optimizer *opt;
    clt_tensor *x, *y;
} fixture;

static void fixture_make(fixture *f, int half)
{
    memset(f, 0, sizeof *f);
    f->dev = clt_test_cpu();
    float xs[B * IN];
    int32_t ys[B];
    clt_test_fill_uniform(xs, B * IN, 3, -1.0f, 1.0f);
    for (int i = 0; i < B; i++) ys[i] = i % CLASSES;
    int64_t xshape[] = {B, IN}, yshape[] = {B};
    ck_assert_ok(clt_model_create_resmlp(&f->model, f->dev, IN, HIDDENS, 1, CLASSES, 5));
    if (half) ck_assert_ok(clt_model_to_dtype(f->model, CLT_FLOAT16));
    ck_assert_ok(clt_optimizer_create_adam(&f->opt, f->model, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    ck_assert_ok(clt_from_host(&f->x, f->dev, CLT_FLOAT32, 2, xshape, xs));
    ck_assert_ok(clt_from_host(&f->y, f->dev, CLT_INT32, 1, yshape, ys));
}

static void fixture_free(fixture *f)
{
    clt_optimizer_free(f->opt);
    clt_model_free(f->model);
    clt_tensor_release(f->x);
    clt_tensor_release(f->y);
    memset(f, 0, sizeof *f);
}

/* Zero grad, forward, loss, backward: the gradients of one batch. */
static clt_status gradients(fixture *f)
{
    clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
    clt_status s = clt_model_zero_grad(f->model);
    if (s == CLT_OK) s = clt_model_forward(f->model, f->x, &logits);
    if (s == CLT_OK) s = clt_softmax_cross_entropy(&loss, &dlogits, logits, f->y);
    if (s == CLT_OK) s = clt_model_backward(f->model, dlogits, NULL);
    clt_tensor_release(dlogits);
    clt_tensor_release(loss);
    clt_tensor_release(logits);
    return s;
}

static void train(fixture *f, int steps)
{
    for (int i = 0; i < steps; i++) {
        ck_assert_ok(gradients(f));
        ck_assert_ok(clt_optimizer_step(f->opt));
    }
}

/* The bytes of a tensor (any dtype), malloc'd; NULL for NULL. */
static unsigned char *bytes_of(const clt_tensor *t, size_t *n)
{
    *n = t ? clt_tensor_nbytes(t) : 0;
    if (!t) return NULL;
    unsigned char *b = malloc(*n ? *n : 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_ok(clt_to_host(t, b, *n));
    return b;
}

/* Everything a failed call must leave alone. */
typedef struct snapshot {
    clt_dtype dtype;
    unsigned char *params, *grads, *state[3];
    size_t nparams, ngrads, nstate[3];
    int nstates;
    int64_t steps, conversions, clean_steps, allocated;
    float scale;
    int dynamic;
} snapshot;

static void take(snapshot *s, const fixture *f)
{
    memset(s, 0, sizeof *s);
    s->dtype = clt_model_dtype(f->model);
    s->params = bytes_of(clt_model_parameters(f->model), &s->nparams);
    s->grads = bytes_of(clt_model_gradients(f->model), &s->ngrads);
    s->nstates = clt_optimizer_num_states(f->opt);
    for (int i = 0; i < s->nstates; i++) {
        clt_tensor *t;
        ck_assert_ok(clt_optimizer_state(f->opt, i, NULL, &t));
        s->state[i] = bytes_of(t, &s->nstate[i]);
    }
    s->steps = clt_optimizer_steps(f->opt);
    s->conversions = f->model->conversions;
    ck_assert_ok(clt_model_loss_scale_state(f->model, &s->scale, &s->dynamic, &s->clean_steps));
    s->allocated = clt_memory_allocated(f->dev);
}

static void drop(snapshot *s)
{
    free(s->params);
    free(s->grads);
    for (int i = 0; i < 3; i++) free(s->state[i]);
    memset(s, 0, sizeof *s);
}

static void same_bytes(const char *what, const char *part, const unsigned char *a, size_t na, const unsigned char *b,
                       size_t nb)
{
    ck_assert_msg((a == NULL) == (b == NULL), "%s: %s %s", what, part, a ? "vanished" : "was created");
    ck_assert_msg(na == nb && (na == 0 || memcmp(a, b, na) == 0), "%s: %s changed (%zu bytes, then %zu)", what, part,
                  na, nb);
}

/* The fixture now is exactly the snapshot. */
static void unchanged(const char *what, const snapshot *before, const fixture *f)
{
    snapshot now;
    take(&now, f);
    ck_assert_msg(now.dtype == before->dtype, "%s: dtype changed", what);
    same_bytes(what, "the parameters", before->params, before->nparams, now.params, now.nparams);
    same_bytes(what, "the gradients", before->grads, before->ngrads, now.grads, now.ngrads);
    ck_assert_int_eq(now.nstates, before->nstates);
    for (int i = 0; i < now.nstates; i++) {
        const char *name;
        ck_assert_ok(clt_optimizer_state(f->opt, i, &name, NULL));
        same_bytes(what, name, before->state[i], before->nstate[i], now.state[i], now.nstate[i]);
    }
    ck_assert_msg(now.steps == before->steps, "%s: optimizer steps %lld, then %lld", what, (long long)before->steps,
                  (long long)now.steps);
    ck_assert_msg(now.conversions == before->conversions, "%s: conversions %lld, then %lld", what,
                  (long long)before->conversions, (long long)now.conversions);
    ck_assert_msg(now.scale == before->scale && now.dynamic == before->dynamic &&
                      now.clean_steps == before->clean_steps,
                  "%s: loss scaler (%g, %d, %lld), then (%g, %d, %lld)", what, (double)before->scale,
                  before->dynamic, (long long)before->clean_steps, (double)now.scale, now.dynamic,
                  (long long)now.clean_steps);
    ck_assert_msg(now.allocated == before->allocated, "%s: %lld bytes allocated, then %lld", what,
                  (long long)before->allocated, (long long)now.allocated);
    drop(&now);
}

/* ---- clt_model_to_dtype ---- */

START_TEST(test_failed_conversion_changes_nothing)
{
    /* host:1 fails binding the new parameters' views, host:2 the gradients';
     * alloc:1 and alloc:2 fail making the converted buffers. */
    static const char *const specs[] = {"host:1", "host:2", "alloc:1", "alloc:2", "host:1+", "alloc:1+"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        fixture f;
        fixture_make(&f, 0);
        train(&f, 1);
        ck_assert_ok(gradients(&f));
        snapshot before;
        take(&before, &f);
        char what[64];
        snprintf(what, sizeof what, "clt_model_to_dtype with CLT_FAULT=%s", specs[k]);
        ck_assert_int_eq(clt__fault_set(specs[k]), 0);
        clt_status s = clt_model_to_dtype(f.model, CLT_FLOAT16);
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        ck_assert_msg(s == CLT_ERR_OUT_OF_MEMORY && strstr(clt_last_error(), "injected by CLT_FAULT"),
                      "%s: %s (%s)", what, clt_status_string(s), clt_last_error());
        unchanged(what, &before, &f);
        /* The optimizer built before still fits the model: it steps. */
        ck_assert_ok(clt_optimizer_step(f.opt));
        drop(&before);
        fixture_free(&f);
    }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- clt_checkpoint_load ---- */

static char dir[64];

static const char *path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

/* Rewrites the checkpoint src as dst: every tensor and metadata pair, with
 * tensor `victim` replaced by `replacement` (NULL: left out), and metadata
 * `key` given `value` (NULL key: as it was). */
static void rewrite(const char *src, const char *dst, const char *victim, clt_tensor *replacement, const char *key,
                    const char *value)
{
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, src));
    int n = clt_safetensors_num_tensors(f), nm = clt_safetensors_num_metadata(f), k = 0, km = 0;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    clt_tensor **tensors = calloc((size_t)n + 1, sizeof *tensors);
    const char **keys = calloc((size_t)nm + 2, sizeof *keys), **values = calloc((size_t)nm + 2, sizeof *values);
    ck_assert(names && tensors && keys && values);
    for (int i = 0; i < n; i++) {
        clt_safetensors_info fi;
        ck_assert_ok(clt_safetensors_tensor_info(f, i, &fi));
        if (victim && strcmp(fi.name, victim) == 0) {
            if (!replacement) continue;
            tensors[k] = clt_tensor_retain(replacement);
        } else {
            ck_assert_ok(clt_safetensors_read(f, fi.name, clt_test_cpu(), &tensors[k]));
        }
        names[k++] = fi.name;
    }
    int had_key = 0;
    for (int i = 0; i < nm; i++) {
        ck_assert_ok(clt_safetensors_metadata_entry(f, i, &keys[km], &values[km]));
        if (key && strcmp(keys[km], key) == 0) {
            values[km] = value;
            had_key = 1;
        }
        km++;
    }
    if (key && !had_key) {
        keys[km] = key;
        values[km++] = value;
    }
    ck_assert_ok(clt_safetensors_save(dst, k, names, tensors, km, keys, values));
    for (int i = 0; i < k; i++) clt_tensor_release(tensors[i]);
    free(names);
    free(tensors);
    free(keys);
    free(values);
    clt_safetensors_free(f);
}

static void truncate_copy(const char *src, const char *dst, long drop_bytes)
{
    size_t n;
    uint8_t *buf = clt_test_read_bytes(src, &n);
    ck_assert_uint_ge(n, (size_t)drop_bytes);
    clt_test_write_bytes(dst, buf, n - (size_t)drop_bytes);
    free(buf);
}

/* The name of the last tensor of the file that the optimizer keeps. */
static void last_state_name(const char *path, char *out, size_t len)
{
    clt_safetensors *f;
    ck_assert_ok(clt_safetensors_open(&f, path));
    out[0] = '\0';
    for (int i = 0; i < clt_safetensors_num_tensors(f); i++) {
        clt_safetensors_info fi;
        ck_assert_ok(clt_safetensors_tensor_info(f, i, &fi));
        if (strncmp(fi.name, "optimizer.", 10) == 0) snprintf(out, len, "%s", fi.name);
    }
    clt_safetensors_free(f);
    ck_assert_msg(out[0], "%s has no optimizer state", path);
}

/* Bad files made from the good checkpoint `good` of f. Returns their count. */
static int make_bad_files(const fixture *f, const char *good, char paths[][160], const char **whys)
{
    int n = 0;
    char victim[128];
    last_state_name(good, victim, sizeof victim);
    clt_tensor *t;

    whys[n] = "truncated by 4 bytes";
    truncate_copy(good, path_in_dir(paths[n], sizeof paths[n], "truncated.safetensors"), 4);
    n++;

    /* The last optimizer tensor with one element too few. */
    {
        clt_safetensors *sf;
        ck_assert_ok(clt_safetensors_open(&sf, good));
        clt_safetensors_info fi;
        ck_assert_ok(clt_safetensors_tensor_info(sf, clt_safetensors_find(sf, victim), &fi));
        int64_t shape[CLT_MAX_DIMS];
        memcpy(shape, fi.shape, (size_t)fi.ndim * sizeof *shape);
        shape[fi.ndim - 1] -= 1;
        ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, fi.ndim, shape));
        whys[n] = "the last optimizer tensor has the wrong shape";
        rewrite(good, path_in_dir(paths[n], sizeof paths[n], "shape.safetensors"), victim, t, NULL, NULL);
        clt_tensor_release(t);
        /* The same shape in int32: every check of presence and shape passes,
         * the read of that last tensor fails. */
        ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_INT32, fi.ndim, fi.shape));
        n++;
        whys[n] = "the last optimizer tensor is I32";
        rewrite(good, path_in_dir(paths[n], sizeof paths[n], "dtype.safetensors"), victim, t, NULL, NULL);
        clt_tensor_release(t);
        n++;
        clt_safetensors_free(sf);
    }
    whys[n] = "the last optimizer tensor is missing";
    rewrite(good, path_in_dir(paths[n], sizeof paths[n], "missing.safetensors"), victim, NULL, NULL, NULL);
    n++;
    whys[n] = "metadata cltensor.epoch is banana";
    rewrite(good, path_in_dir(paths[n], sizeof paths[n], "epoch.safetensors"), NULL, NULL, "cltensor.epoch",
            "banana");
    n++;
    if (clt_model_dtype(f->model) == CLT_FLOAT16) {
        /* Read after every tensor before the fix. */
        whys[n] = "metadata cltensor.loss_scale is banana";
        rewrite(good, path_in_dir(paths[n], sizeof paths[n], "scale.safetensors"), NULL, NULL, "cltensor.loss_scale",
                "banana");
        n++;
        whys[n] = "metadata cltensor.loss_scale is -1";
        rewrite(good, path_in_dir(paths[n], sizeof paths[n], "scale2.safetensors"), NULL, NULL,
                "cltensor.loss_scale", "-1");
        n++;
    }
    return n;
}

/* A model trained a few steps, saved, trained on; then every bad file, and
 * every allocation and enqueue of a good load made to fail, must leave it
 * as it was. */
static void check_failed_loads(int half)
{
    clt_test_make_temp_dir(dir, sizeof dir, "rollback");
    fixture f;
    fixture_make(&f, half);
    train(&f, 3);
    char good[160], bad[8][160];
    const char *whys[8];
    path_in_dir(good, sizeof good, "good.safetensors");
    clt_checkpoint_info info = {.arch = "resmlp", .hiddens = HIDDENS, .blocks = 1, .epoch = 1, .steps = 3};
    ck_assert_ok(clt_checkpoint_save(good, f.model, f.opt, &info));
    train(&f, 2);
    if (half) ck_assert_ok(clt_model_set_loss_scale_state(f.model, 512.0f, 1, 7));
    int nbad = make_bad_files(&f, good, bad, whys);
    snapshot before;
    take(&before, &f);
    for (int i = 0; i < nbad; i++) {
        char what[1600];
        snprintf(what, sizeof what, "loading %s (%s)", bad[i], whys[i]);
        clt_status s = clt_checkpoint_load(bad[i], f.model, f.opt, NULL);
        ck_assert_msg(s != CLT_OK, "%s succeeded", what);
        ck_assert_msg(clt_last_error()[0], "%s: no message", what);
        unchanged(what, &before, &f);
    }
    /* Faults at every allocation and enqueue of a good load. */
    static const clt__fault_kind kinds[] = {CLT__FAULT_ALLOC, CLT__FAULT_ENQUEUE};
    static const char *const kind_names[] = {"alloc", "enqueue"};
    for (int k = 0; k < 2; k++) {
        int failures = 0;
        for (int n = 1; n < 200; n++) {
            char spec[32], what[512];
            snprintf(spec, sizeof spec, "%s:%d", kind_names[k], n);
            snprintf(what, sizeof what, "loading %s with CLT_FAULT=%s", good, spec);
            ck_assert_int_eq(clt__fault_set(spec), 0);
            clt_status s = clt_checkpoint_load(good, f.model, f.opt, NULL);
            int64_t events = clt__fault_count(kinds[k]);
            ck_assert_int_eq(clt__fault_set(NULL), 0);
            if (s == CLT_OK) {
                ck_assert_msg(events < n, "%s: the fault was not surfaced", what);
                break;
            }
            failures++;
            ck_assert_msg(strstr(clt_last_error(), "injected by CLT_FAULT"), "%s: %s", what, clt_last_error());
            unchanged(what, &before, &f);
        }
        printf("%s checkpoint load (%d bad files), CLT_FAULT=%s:N: %d faults injected, each left the model and "
               "optimizer unchanged\n", half ? "float16" : "float32", nbad, kind_names[k], failures);
        /* Every tensor of the file is read through its own temporary. */
        if (kinds[k] == CLT__FAULT_ALLOC) ck_assert_int_gt(failures, before.nstates + 2);
        /* The good load changed the model: restore the state before for the next kind. */
        drop(&before);
        take(&before, &f);
    }
    drop(&before);
    fixture_free(&f);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}

START_TEST(test_failed_load_changes_nothing) { check_failed_loads(0); }
END_TEST

START_TEST(test_failed_load_changes_nothing_float16) { check_failed_loads(1); }
END_TEST

/* A fresh optimizer has no state; a failed load must not leave zeroed state
 * (or master weights) behind. */
START_TEST(test_failed_load_creates_no_state)
{
    clt_test_make_temp_dir(dir, sizeof dir, "rollback");
    fixture f;
    fixture_make(&f, 0);
    train(&f, 2);
    char good[160], bad[160];
    path_in_dir(good, sizeof good, "good.safetensors");
    ck_assert_ok(clt_checkpoint_save(good, f.model, f.opt, NULL));
    char victim[128];
    last_state_name(good, victim, sizeof victim);
    clt_safetensors *sf;
    ck_assert_ok(clt_safetensors_open(&sf, good));
    clt_safetensors_info fi;
    ck_assert_ok(clt_safetensors_tensor_info(sf, clt_safetensors_find(sf, victim), &fi));
    clt_tensor *t;
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_INT32, fi.ndim, fi.shape));
    clt_safetensors_free(sf);
    rewrite(good, path_in_dir(bad, sizeof bad, "dtype.safetensors"), victim, t, NULL, NULL);
    clt_tensor_release(t);
    clt_optimizer_free(f.opt);
    ck_assert_ok(clt_optimizer_create_adam(&f.opt, f.model, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0));
    snapshot before;
    take(&before, &f);
    ck_assert_int_ne(clt_checkpoint_load(bad, f.model, f.opt, NULL), CLT_OK);
    unchanged("a failed load into a fresh optimizer", &before, &f);
    for (int i = 0; i < clt_optimizer_num_states(f.opt); i++) {
        ck_assert_ok(clt_optimizer_state(f.opt, i, NULL, &t));
        ck_assert_ptr_null(t);
    }
    /* The good file loads, state and all. */
    ck_assert_ok(clt_checkpoint_load(good, f.model, f.opt, NULL));
    ck_assert_ok(clt_optimizer_state(f.opt, 0, NULL, &t));
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(clt_optimizer_steps(f.opt), 2);
    drop(&before);
    fixture_free(&f);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- the float16 loss scaler ---- */

START_TEST(test_failed_step_keeps_scaler_counters)
{
    /* One clean step short of doubling: a step that fails must neither count
     * it nor double the scale. */
    int64_t growth = CLT__SCALE_GROWTH;
    fixture f;
    fixture_make(&f, 1);
    ck_assert_ok(clt_model_set_loss_scale_state(f.model, 256.0f, 1, growth - 1));
    ck_assert_ok(gradients(&f));
    int failures = 0;
    for (int n = 1; n < 50; n++) {
        char spec[32];
        snprintf(spec, sizeof spec, "enqueue:%d", n);
        float scale;
        int dynamic;
        int64_t clean;
        clt_sync_reset_count(f.dev);
        ck_assert_int_eq(clt__fault_set(spec), 0);
        clt_status s = clt_optimizer_step(f.opt);
        int64_t events = clt__fault_count(CLT__FAULT_ENQUEUE);
        ck_assert_int_eq(clt__fault_set(NULL), 0);
        ck_assert_ok(clt_model_loss_scale_state(f.model, &scale, &dynamic, &clean));
        if (s == CLT_OK) {
            ck_assert_int_lt(events, n);
            ck_assert_msg(scale == 512.0f && clean == 0, "the step that succeeded left scale %g, %lld clean steps",
                          (double)scale, (long long)clean);
            ck_assert_int_eq(clt_optimizer_steps(f.opt), 1);
            break;
        }
        failures++;
        ck_assert_msg(strstr(clt_last_error(), "injected by CLT_FAULT"), "enqueue:%d: %s", n, clt_last_error());
        ck_assert_msg(scale == 256.0f && clean == growth - 1,
                      "CLT_FAULT=%s: the failed step left scale %g and %lld clean steps (before: 256 and %lld)", spec,
                      (double)scale, (long long)clean, (long long)(growth - 1));
        ck_assert_int_eq(clt_optimizer_steps(f.opt), 0);
        /* The step decides on the device: no host wait, failed or not. */
        ck_assert_int_eq(clt_sync_count(f.dev), 0);
    }
    /* Every launch of the step failed in turn, the last the scaler's update,
     * after the update itself (the unscale, the update, the scaler's
     * update, and the first step's making of its state). */
    printf("float16 optimizer step, CLT_FAULT=enqueue:N: %d faults injected, the last at the scaler's update; "
           "scaler counters unchanged by each\n", failures);
    ck_assert_int_ge(failures, 3);
    fixture_free(&f);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* An optimizer's first step (or clt_optimizer_init_state) creates its
 * state: when any allocation of it fails, none of it is left. */
START_TEST(test_failed_first_step_creates_no_state)
{
    for (int half = 0; half <= 1; half++)
        for (int init = 0; init <= 1; init++) {
            int failures = 0;
            for (int n = 1; n < 60; n++) {
                fixture f;
                fixture_make(&f, half);
                ck_assert_ok(gradients(&f));
                snapshot before;
                take(&before, &f);
                char spec[32], what[96];
                snprintf(spec, sizeof spec, "alloc:%d", n);
                snprintf(what, sizeof what, "%s%s with CLT_FAULT=%s", half ? "float16 " : "",
                         init ? "clt_optimizer_init_state" : "a first step", spec);
                ck_assert_int_eq(clt__fault_set(spec), 0);
                clt_status s = init ? clt_optimizer_init_state(f.opt) : clt_optimizer_step(f.opt);
                int64_t events = clt__fault_count(CLT__FAULT_ALLOC);
                ck_assert_int_eq(clt__fault_set(NULL), 0);
                if (s == CLT_OK) {
                    ck_assert_int_lt(events, n);
                    drop(&before);
                    fixture_free(&f);
                    break;
                }
                failures++;
                ck_assert_msg(strstr(clt_last_error(), "injected by CLT_FAULT"), "%s: %s", what, clt_last_error());
                unchanged(what, &before, &f);
                drop(&before);
                fixture_free(&f);
            }
            printf("%s%s, CLT_FAULT=alloc:N: %d faults injected, no state left by any\n", half ? "float16 " : "",
                   init ? "clt_optimizer_init_state" : "first Adam step", failures);
            /* Adam's two buffers (and the master weights) are separate allocations. */
            ck_assert_int_ge(failures, 2);
        }
    clt_test_assert_no_live_tensors();
}
END_TEST

/* ---- host waits ---- */

START_TEST(test_trace_stop_is_a_sync_point)
{
    clt_test_make_temp_dir(dir, sizeof dir, "rollback");
    char path[160];
    path_in_dir(path, sizeof path, "trace.json");
    clt_device dev = clt_test_cpu();
    int64_t shape[] = {1024};
    clt_tensor *a;
    ck_assert_ok(clt_zeros(&a, dev, CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_synchronize(dev));
    ck_assert_ok(clt_trace_start(path));
    ck_assert_ok(clt_fill_(a, 1.0));
    clt_sync_reset_count(dev);
    /* Refused like any sync point, and the trace keeps running. */
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    ck_assert_status(clt_trace_stop(), CLT_ERR_SYNC);
    ck_assert_msg(strstr(clt_last_error(), "clt_trace_stop"), "message: %s", clt_last_error());
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    ck_assert_int_eq(clt_sync_count(dev), 0);
    ck_assert_ok(clt_trace_stop());
    ck_assert_int_eq(clt_sync_count(dev), 1);
    char *text = clt_test_read_file(path);
    ck_assert_msg(strstr(text, "\"name\":\"clt_trace_stop\",\"cat\":\"sync\""), "trace:\n%.3000s", text);
    free(text);
    clt_tensor_release(a);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

/* Where the driver refuses a completion callback, freeing a write's staging
 * copy waits for the write: a counted, traced synchronization point, which
 * CLT_SYNC_DEBUG=error cannot refuse (nothing would free the copy). */
START_TEST(test_callback_fallback_is_a_sync_point)
{
    clt_test_make_temp_dir(dir, sizeof dir, "rollback");
    char path[160];
    path_in_dir(path, sizeof path, "trace.json");
    clt_device dev = clt_test_cpu();
    float host[256] = {0};
    host[255] = 7.0f;
    int64_t shape[] = {256};
    clt_tensor *a;
    ck_assert_ok(clt_zeros(&a, dev, CLT_FLOAT32, 1, shape));
    ck_assert_ok(clt_synchronize(dev));
    clt_tensor_release(a);
    ck_assert_ok(clt_trace_start(path));
    clt_sync_reset_count(dev);
    ck_assert_int_eq(clt__fault_set("callback:1+"), 0);
    clt_sync_set_debug(CLT_SYNC_DEBUG_ERROR);
    clt_status s = clt_from_host(&a, dev, CLT_FLOAT32, 1, shape, host);
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    int64_t faults = clt__fault_count(CLT__FAULT_CALLBACK);
    ck_assert_int_eq(clt__fault_set(NULL), 0);
    ck_assert_ok(s);
    ck_assert_int_ge(faults, 1);
    ck_assert_int_eq(clt_sync_count(dev), (uint64_t)faults);
    float back[256];
    ck_assert_ok(clt_to_host(a, back, sizeof back));
    ck_assert_float_eq(back[255], 7.0f);
    ck_assert_ok(clt_trace_stop());
    char *text = clt_test_read_file(path);
    ck_assert_msg(strstr(text, "\"a host-to-device write (freeing its staging copy: no callback)\",\"cat\":\"sync\""),
                  "trace:\n%.3000s", text);
    free(text);
    clt_tensor_release(a);
    clt_test_remove_dir(dir);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rollback");
    TCase *tc = clt_test_tcase("core");
    tcase_add_test(tc, test_failed_conversion_changes_nothing);
    tcase_add_test(tc, test_failed_load_changes_nothing);
    tcase_add_test(tc, test_failed_load_changes_nothing_float16);
    tcase_add_test(tc, test_failed_load_creates_no_state);
    tcase_add_test(tc, test_failed_step_keeps_scaler_counters);
    tcase_add_test(tc, test_failed_first_step_creates_no_state);
    tcase_add_test(tc, test_trace_stop_is_a_sync_point);
    tcase_add_test(tc, test_callback_fallback_is_a_sync_point);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
