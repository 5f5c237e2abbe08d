/* Model checkpoints: safetensors with PyTorch's state_dict names, plus the
 * optimizer's state under "optimizer.<state>.<parameter>". */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../optim/optim_internal.h"
#include "checkpoint.h"
#include "cltensor/io.h"
#include "description.h"
#include "cltensor/trainer.h"

#define OPT_PREFIX "optimizer."

typedef struct entry_list {
    const char **names;
    clt_tensor **tensors;
    char **owned; /* names built here */
    clt_tensor **views;
    int n, nowned, nviews, cap;
} entry_list;

static void list_free(entry_list *l)
{
    for (int i = 0; i < l->nowned; i++) free(l->owned[i]);
    for (int i = 0; i < l->nviews; i++) clt_tensor_release(l->views[i]);
    free(l->names);
    free(l->tensors);
    free(l->owned);
    free(l->views);
}

static clt_status list_reserve(entry_list *l, int cap)
{
    l->names = calloc((size_t)cap, sizeof *l->names);
    l->tensors = calloc((size_t)cap, sizeof *l->tensors);
    l->owned = calloc((size_t)cap, sizeof *l->owned);
    l->views = calloc((size_t)cap, sizeof *l->views);
    l->cap = cap;
    if (!l->names || !l->tensors || !l->owned || !l->views)
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory listing checkpoint tensors");
    return CLT_OK;
}

/* The view of a flat state buffer that lines up with parameter i. */
static clt_status state_view(const clt_model *m, clt_tensor *flat, int i, clt_tensor **out)
{
    clt_tensor *param;
    CLT_TRY(clt_model_named_parameter(m, i, NULL, &param, NULL));
    /* Parameters are laid out in order in the flat buffer: find the offset
     * by summing the sizes of those before. */
    int64_t offset = 0;
    for (int j = 0; j < i; j++) {
        clt_tensor *p;
        CLT_TRY(clt_model_named_parameter(m, j, NULL, &p, NULL));
        offset += clt_tensor_numel(p);
    }
    clt_tensor *row;
    CLT_TRY(clt_narrow(&row, flat, offset, clt_tensor_numel(param)));
    int64_t shape[CLT_MAX_DIMS];
    int nd = clt_tensor_shape(param, shape);
    clt_status s = clt_reshape(out, row, nd, shape);
    clt_tensor_release(row);
    return s;
}

static char *join(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* A view of flat (an optimizer state to save, or a staging buffer to load
 * into) at the i-th parameter, named prefix + "." + that parameter's name
 * (prefix NULL: the parameter's own name, not copied). */
static clt_status stage_entry(entry_list *l, const clt_model *m, clt_tensor *flat, int i, const char *prefix)
{
    const char *pname;
    CLT_TRY(clt_model_named_parameter(m, i, &pname, NULL, NULL));
    const char *name = pname;
    if (prefix) {
        char *full = join(prefix, ".", pname);
        if (!full) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory naming checkpoint tensors");
        l->owned[l->nowned++] = full;
        name = full;
    }
    clt_tensor *v;
    CLT_TRY(state_view(m, flat, i, &v));
    l->views[l->nviews++] = v;
    l->names[l->n] = name;
    l->tensors[l->n++] = v;
    return CLT_OK;
}

/* Every tensor a checkpoint of (model, opt) holds, in file order. */
static clt_status collect(entry_list *l, const clt_model *m, const clt_optimizer *opt)
{
    int np = clt_model_num_parameter_tensors(m);
    int ns = opt ? clt_optimizer_num_states(opt) : 0;
    CLT_TRY(list_reserve(l, np * (1 + ns) + 5)); /* and a standardizer's 4 */
    for (int i = 0; i < np; i++) {
        clt_tensor *p;
        CLT_TRY(clt_model_named_parameter(m, i, &l->names[l->n], &p, NULL));
        l->tensors[l->n++] = p;
    }
    for (int s = 0; s < ns; s++) {
        const char *sname;
        clt_tensor *flat;
        CLT_TRY(clt_optimizer_state(opt, s, &sname, &flat));
        if (!flat) continue;
        char *prefix = join(OPT_PREFIX, sname, "");
        if (!prefix) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory naming checkpoint tensors");
        clt_status st = CLT_OK;
        for (int i = 0; st == CLT_OK && i < np; i++) st = stage_entry(l, m, flat, i, prefix);
        free(prefix);
        CLT_TRY(st);
    }
    return CLT_OK;
}

clt_status clt__checkpoint_save(const char *path, const clt_model *model, const clt_optimizer *opt,
                                const clt_checkpoint_info *info, const clt__partial_epoch *partial)
{
    if (!path || !model) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_checkpoint_save: path or model is NULL");
    entry_list l = {0};
    clt_status s = collect(&l, model, opt);
    char nums[6][32], scaler[3][32], sums[2][40], *described[7] = {NULL};
    const char *keys[19], *values[19];
    int nm = 0, nd = 0, npre = 0;
    if (s == CLT_OK) s = clt__description_format(model, info, keys, values, described, &nd);
    nm = nd;
    /* The standardizer's tensors, made on the model's device, after the rest. */
    if (s == CLT_OK && info && info->standardizer &&
        (s = clt__standardizer_tensors(info->standardizer, clt_model_device(model), l.names + l.n, l.tensors + l.n,
                                       &npre)) == CLT_OK) {
        for (int i = 0; i < npre; i++) l.views[l.nviews++] = l.tensors[l.n + i];
        l.n += npre;
    }
    keys[nm] = "format";
    values[nm++] = "pt";
    if (info && info->arch) {
        keys[nm] = "cltensor.arch";
        values[nm++] = info->arch;
    }
    const struct {
        const char *key;
        int64_t v;
    } fields[] = {{"cltensor.hiddens", info ? info->hiddens : 0},
                  {"cltensor.blocks", info ? info->blocks : 0},
                  {"cltensor.epoch", info ? info->epoch : 0},
                  {"cltensor.steps", info ? info->steps : 0},
                  {"cltensor.batch", info ? info->batch : 0},
                  {"cltensor.optimizer_steps", opt ? clt_optimizer_steps(opt) : 0}};
    for (int i = 0; i < 6; i++) {
        snprintf(nums[i], sizeof nums[i], "%lld", (long long)fields[i].v);
        keys[nm] = fields[i].key;
        values[nm++] = nums[i];
    }
    /* A float16 model's loss scaler, so that a resumed run scales as this one would have. */
    float scale;
    int dynamic;
    int64_t clean;
    if (s == CLT_OK && clt_model_dtype(model) == CLT_FLOAT16 &&
        (s = clt_model_loss_scale_state(model, &scale, &dynamic, &clean)) == CLT_OK) {
        snprintf(scaler[0], sizeof scaler[0], "%.9g", (double)scale);
        snprintf(scaler[1], sizeof scaler[1], "%d", dynamic);
        snprintf(scaler[2], sizeof scaler[2], "%lld", (long long)clean);
        static const char *const skeys[3] = {"cltensor.loss_scale", "cltensor.loss_scale_dynamic",
                                             "cltensor.loss_scale_clean_steps"};
        for (int i = 0; i < 3; i++) {
            keys[nm] = skeys[i];
            values[nm++] = scaler[i];
        }
    }
    /* Only a partial epoch has partial sums: an epoch's end writes what it always did. */
    if (partial && info && info->batch > 0) {
        snprintf(sums[0], sizeof sums[0], "%.17g", partial->loss_sum);
        snprintf(sums[1], sizeof sums[1], "%.17g", partial->seconds);
        keys[nm] = "cltensor.epoch_loss_sum";
        values[nm++] = sums[0];
        if (partial->seconds > 0) {
            keys[nm] = "cltensor.epoch_seconds";
            values[nm++] = sums[1];
        }
    }
    if (s == CLT_OK) s = clt_safetensors_save(path, l.n, l.names, l.tensors, nm, keys, values);
    for (int i = 0; described[i]; i++) free(described[i]);
    list_free(&l);
    return s;
}

clt_status clt_checkpoint_save(const char *path, const clt_model *model, const clt_optimizer *opt,
                               const clt_checkpoint_info *info)
{
    return clt__checkpoint_save(path, model, opt, info, NULL);
}

/* ---- Metadata, parsed strictly: a value outside its range is an error naming the key ---- */

#define MAX_COUNT ((int64_t)1 << 53) /* steps, batches: exact in a double, far from overflow */

static int starts_number(const char *v) { return v[0] == '-' || (v[0] >= '0' && v[0] <= '9'); }

/* *out = the integer under key (0 when absent), which must lie in [lo, hi]. */
static clt_status meta_int(const char *path, const clt_safetensors *f, const char *key, int64_t lo, int64_t hi,
                           int64_t *out)
{
    *out = 0;
    const char *v = clt_safetensors_metadata(f, key);
    if (!v) return CLT_OK;
    char *end = NULL;
    errno = 0;
    long long n = starts_number(v) ? strtoll(v, &end, 10) : 0;
    if (!end || *end != '\0' || errno != 0 || n < lo || n > hi)
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata %s is \"%.40s\"%s; it must be an integer in [%lld, %lld]", path,
                         key, v, strlen(v) > 40 ? "..." : "", (long long)lo, (long long)hi);
    *out = n;
    return CLT_OK;
}

/* *out = the finite number under key (0 when absent), in [0, hi]. */
static clt_status meta_real(const char *path, const clt_safetensors *f, const char *key, double hi, double *out)
{
    *out = 0;
    const char *v = clt_safetensors_metadata(f, key);
    if (!v) return CLT_OK;
    char *end = NULL;
    double d = starts_number(v) ? strtod(v, &end) : NAN;
    if (!end || *end != '\0' || !isfinite(d) || d < 0 || d > hi)
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata %s is \"%.40s\"%s; it must be a number in [0, %g]", path, key, v,
                         strlen(v) > 40 ? "..." : "", hi);
    *out = d;
    return CLT_OK;
}

typedef struct file_meta {
    clt_checkpoint_info info;
    clt__partial_epoch partial;
    int64_t optimizer_steps, scale_dynamic, scale_clean;
    clt__description desc;
} file_meta;

/* What the metadata says must agree with the file's own tensors and with itself. */
static clt_status meta_against_tensors(const char *path, const clt_safetensors *f, const file_meta *m)
{
    int k = clt_safetensors_find(f, "net.1.weight");
    clt_safetensors_info fi;
    if (m->info.hiddens > 0 && k >= 0 && clt_safetensors_tensor_info(f, k, &fi) == CLT_OK && fi.ndim == 2 &&
        fi.shape[0] != m->info.hiddens)
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.hiddens is %lld but net.1.weight has %lld rows", path,
                         (long long)m->info.hiddens, (long long)fi.shape[0]);
    if (m->info.batch > 0 && m->info.steps < m->info.batch)
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.steps is %lld, fewer than cltensor.batch (%lld)", path,
                         (long long)m->info.steps, (long long)m->info.batch);
    return CLT_OK;
}

static clt_status read_meta(const char *path, const clt_safetensors *f, file_meta *m)
{
    memset(m, 0, sizeof *m);
    CLT_TRY(meta_int(path, f, "cltensor.hiddens", 0, INT32_MAX, &m->info.hiddens));
    CLT_TRY(meta_int(path, f, "cltensor.blocks", 0, INT32_MAX, &m->info.blocks));
    CLT_TRY(meta_int(path, f, "cltensor.epoch", 0, INT32_MAX - 1, &m->info.epoch));
    CLT_TRY(meta_int(path, f, "cltensor.steps", 0, MAX_COUNT, &m->info.steps));
    CLT_TRY(meta_int(path, f, "cltensor.batch", 0, MAX_COUNT, &m->info.batch));
    CLT_TRY(meta_int(path, f, "cltensor.optimizer_steps", 0, MAX_COUNT, &m->optimizer_steps));
    CLT_TRY(meta_int(path, f, "cltensor.loss_scale_dynamic", 0, 1, &m->scale_dynamic));
    CLT_TRY(meta_int(path, f, "cltensor.loss_scale_clean_steps", 0, MAX_COUNT, &m->scale_clean));
    CLT_TRY(meta_real(path, f, "cltensor.epoch_loss_sum", 1e300, &m->partial.loss_sum));
    CLT_TRY(meta_real(path, f, "cltensor.epoch_seconds", 1e12, &m->partial.seconds));
    CLT_TRY(meta_against_tensors(path, f, m));
    CLT_TRY(clt__description_read(&m->desc, path, f));
    m->info.task = m->desc.task;
    m->info.num_classes = m->desc.num_classes;
    m->info.example_ndim = m->desc.example_ndim;
    memcpy(m->info.example_shape, m->desc.example_shape, sizeof m->info.example_shape);
    return CLT_OK;
}

/* A file's layer list must be the model's: the same tensors in another
 * arrangement of layers would compute something else. */
static clt_status layers_against_model(const char *path, const clt__description *d, const clt_model *m)
{
    if (!d->has_layers) return CLT_OK;
    if (d->nlayers != clt_model_num_layers(m))
        return clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.layers has %d layers, the model %d", path, d->nlayers,
                         clt_model_num_layers(m));
    for (int i = 0; i < d->nlayers; i++) {
        clt_layer_info li;
        CLT_TRY(clt_model_layer(m, i, &li));
        if (li.kind != d->layers[i].kind || li.in_features != d->layers[i].in || li.out_features != d->layers[i].out ||
            (li.custom && strcmp(li.custom, d->layers[i].custom) != 0))
            return clt__fail(CLT_ERR_FORMAT, "%s: metadata cltensor.layers: layer %d differs from the model's %s", path,
                             i, li.name);
    }
    return CLT_OK;
}

static int same_shape(const clt_safetensors_info *fi, const clt_tensor *t)
{
    int64_t shape[CLT_MAX_DIMS];
    int nd = clt_tensor_shape(t, shape);
    if (nd != fi->ndim) return 0;
    for (int i = 0; i < nd; i++)
        if (shape[i] != fi->shape[i]) return 0;
    return 1;
}

static void shape_text(char *buf, size_t len, int nd, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < nd && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < len) snprintf(buf + used, len - used, ")");
}

/* Every entry in the file is expected, every expected one is there, shapes
 * agree and dtypes are floating point. */
static clt_status validate(const char *path, const clt_safetensors *f, const entry_list *l, int with_opt)
{
    for (int i = 0; i < l->n; i++) {
        int k = clt_safetensors_find(f, l->names[i]);
        if (k < 0) {
            int state = strncmp(l->names[i], OPT_PREFIX, strlen(OPT_PREFIX)) == 0;
            return clt__fail(CLT_ERR_FORMAT, "%s: %s %s is missing from the file", path,
                             state ? "the optimizer state" : "the model's parameter", l->names[i]);
        }
        clt_safetensors_info fi;
        CLT_TRY(clt_safetensors_tensor_info(f, k, &fi));
        if (!same_shape(&fi, l->tensors[i])) {
            char a[128], b[128];
            int64_t shape[CLT_MAX_DIMS];
            int nd = clt_tensor_shape(l->tensors[i], shape);
            shape_text(a, sizeof a, fi.ndim, fi.shape);
            shape_text(b, sizeof b, nd, shape);
            return clt__fail(CLT_ERR_FORMAT, "%s: tensor %s has shape %s in the file but %s in the model", path,
                             l->names[i], a, b);
        }
        if (strcmp(fi.dtype, "F32") && strcmp(fi.dtype, "F16") && strcmp(fi.dtype, "BF16"))
            return clt__fail(CLT_ERR_FORMAT, "%s: tensor %s has dtype %s in the file; parameters and optimizer state "
                             "are F32, F16 or BF16", path, l->names[i], fi.dtype);
    }
    int nf = clt_safetensors_num_tensors(f);
    for (int k = 0; k < nf; k++) {
        clt_safetensors_info fi;
        CLT_TRY(clt_safetensors_tensor_info(f, k, &fi));
        int known = 0;
        for (int i = 0; i < l->n && !known; i++) known = strcmp(l->names[i], fi.name) == 0;
        if (!known && strncmp(fi.name, CLT__PREPROCESS_PREFIX, strlen(CLT__PREPROCESS_PREFIX)) == 0) continue;
        if (!known && !(strncmp(fi.name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0 && !with_opt))
            return clt__fail(CLT_ERR_FORMAT, "%s: the file has a tensor %s that the model lacks", path, fi.name);
    }
    return CLT_OK;
}

/* The staging buffers a load reads into: the model's flat parameters and
 * each optimizer buffer, with the list of views the file's tensors fill. */
typedef struct staging {
    clt_tensor *params;
    clt_tensor *state[3];
    int nstate;
    entry_list l;
} staging;

static void staging_free(staging *st)
{
    clt_tensor_release(st->params);
    for (int i = 0; i < st->nstate; i++) clt_tensor_release(st->state[i]);
    list_free(&st->l);
}

/* New buffers shaped as the model's parameters and (opt not NULL) the
 * optimizer's state, and the entries a checkpoint of them holds, in the
 * order of collect. Nothing of the model or the optimizer changes. */
static clt_status stage(staging *st, clt_model *m, clt_optimizer *opt)
{
    memset(st, 0, sizeof *st);
    int np = clt_model_num_parameter_tensors(m);
    st->nstate = opt ? clt_optimizer_num_states(opt) : 0;
    CLT_TRY(clt_empty_like(&st->params, clt_model_parameters(m)));
    if (opt) CLT_TRY(clt__optimizer_stage_state(opt, st->state));
    CLT_TRY(list_reserve(&st->l, np * (1 + st->nstate) + 1));
    for (int i = 0; i < np; i++) CLT_TRY(stage_entry(&st->l, m, st->params, i, NULL));
    for (int k = 0; k < st->nstate; k++) {
        const char *sname;
        CLT_TRY(clt_optimizer_state(opt, k, &sname, NULL));
        char *prefix = join(OPT_PREFIX, sname, "");
        if (!prefix) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory naming checkpoint tensors");
        clt_status s = CLT_OK;
        for (int i = 0; i < np && s == CLT_OK; i++) s = stage_entry(&st->l, m, st->state[k], i, prefix);
        free(prefix);
        CLT_TRY(s);
    }
    return CLT_OK;
}

/* The float16 loss scaler's state from the file, set on a float16 model
 * (*set is 1 then). */
static clt_status load_scaler(const char *path, const clt_safetensors *f, const file_meta *meta, clt_model *model,
                              int *set)
{
    *set = 0;
    const char *scale = clt_safetensors_metadata(f, "cltensor.loss_scale");
    if (!scale || clt_model_dtype(model) != CLT_FLOAT16) return CLT_OK;
    char *end;
    double v = strtod(scale, &end);
    if (end == scale || *end)
        return clt__fail(CLT_ERR_FORMAT, "%s: cltensor.loss_scale \"%.40s\" is not a number", path, scale);
    if (clt_model_set_loss_scale_state(model, (float)v, meta->scale_dynamic != 0, meta->scale_clean) != CLT_OK)
        return clt__fail(CLT_ERR_FORMAT, "%s: the loss scaler's metadata is out of range (scale %.40s, %lld clean steps)",
                         path, scale, (long long)meta->scale_clean);
    *set = 1;
    return CLT_OK;
}

/* Everything is checked and read into new buffers before the model or the
 * optimizer changes: the metadata, every tensor's presence, shape and dtype,
 * then every tensor's bytes. Then the parameters are copied in with one
 * device copy, the optimizer takes the new state buffers, and the counters
 * are set; a failure at any step before leaves both as they were. */
clt_status clt__checkpoint_load(const char *path, clt_model *model, clt_optimizer *opt, clt_checkpoint_info *info,
                                clt__partial_epoch *partial)
{
    if (!path || !model) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_checkpoint_load: path or model is NULL");
    clt_safetensors *f;
    CLT_TRY(clt_safetensors_open(&f, path));
    int has_opt_state = 0;
    for (int k = 0; k < clt_safetensors_num_tensors(f) && !has_opt_state; k++) {
        clt_safetensors_info fi;
        if (clt_safetensors_tensor_info(f, k, &fi) == CLT_OK)
            has_opt_state = strncmp(fi.name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0;
    }
    int with_opt = opt && has_opt_state;
    file_meta meta;
    staging st = {0};
    clt_status s = read_meta(path, f, &meta);
    if (s == CLT_OK) s = stage(&st, model, with_opt ? opt : NULL);
    if (s == CLT_OK) s = validate(path, f, &st.l, with_opt);
    if (s == CLT_OK) s = layers_against_model(path, &meta.desc, model);
    for (int i = 0; s == CLT_OK && i < st.l.n; i++) s = clt_safetensors_read_into(f, st.l.names[i], st.l.tensors[i]);
    /* The commit: the scaler (checked, no device work), the one copy, then
     * what cannot fail. */
    float old_scale = 0;
    int old_dynamic = 0, scaler_set = 0;
    int64_t old_clean = 0;
    if (s == CLT_OK) s = clt_model_loss_scale_state(model, &old_scale, &old_dynamic, &old_clean);
    if (s == CLT_OK) s = load_scaler(path, f, &meta, model, &scaler_set);
    if (s == CLT_OK) s = clt_copy_(clt_model_parameters(model), st.params);
    if (s != CLT_OK && scaler_set) clt_model_set_loss_scale_state(model, old_scale, old_dynamic, old_clean);
    if (s == CLT_OK && with_opt) {
        clt__optimizer_adopt_state(opt, st.state);
        st.nstate = 0; /* taken */
    }
    if (s == CLT_OK && opt && clt_safetensors_metadata(f, "cltensor.optimizer_steps"))
        s = clt_optimizer_set_steps(opt, meta.optimizer_steps); /* in [0, 2^53]: cannot fail */
    if (s == CLT_OK && info) {
        *info = meta.info;
        info->arch = NULL;
    }
    if (s == CLT_OK && partial) *partial = meta.partial;
    clt__description_free(&meta.desc);
    staging_free(&st);
    clt_safetensors_free(f);
    return s;
}

clt_status clt_checkpoint_load(const char *path, clt_model *model, clt_optimizer *opt, clt_checkpoint_info *info)
{
    return clt__checkpoint_load(path, model, opt, info, NULL);
}

/* The block of a name "net.<3 + b>.body.0.weight", else -1. */
static int64_t block_of(const char *name)
{
    const char *p = name + 4, *tail = ".body.0.weight";
    if (strncmp(name, "net.", 4) != 0 || *p < '0' || *p > '9' || (*p == '0' && p[1] != '.')) return -1;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (v > CLT_RESMLP_MAX_BLOCKS + 3 || (v = v * 10 + (*p - '0')) < 0) return -1;
    return strcmp(p, tail) == 0 && v >= 3 ? v - 3 : -1;
}

clt_status clt_checkpoint_resmlp_shape(const char *path, int64_t *hiddens, int64_t *blocks)
{
    if (!path || !hiddens || !blocks)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_checkpoint_resmlp_shape: NULL argument");
    clt_safetensors *f;
    CLT_TRY(clt_safetensors_open(&f, path));
    clt_status s = CLT_OK;
    int k = clt_safetensors_find(f, "net.1.weight");
    clt_safetensors_info fi;
    if (k < 0 || clt_safetensors_tensor_info(f, k, &fi) != CLT_OK || fi.ndim != 2) {
        s = clt__fail(CLT_ERR_FORMAT, "%s: not a ResMLP checkpoint (no 2-D tensor net.1.weight)", path);
    } else if (fi.shape[0] < 1 || fi.shape[0] > INT32_MAX || fi.shape[1] < 1 || fi.shape[1] > INT32_MAX) {
        s = clt__fail(CLT_ERR_FORMAT, "%s: net.1.weight has shape (%lld, %lld), not a layer's (each side 1..%d)",
                      path, (long long)fi.shape[0], (long long)fi.shape[1], INT32_MAX);
    } else {
        /* One pass over the names (a lookup per block is quadratic): the
         * blocks are net.3 on, up to the first one missing. */
        unsigned char seen[CLT_RESMLP_MAX_BLOCKS + 2] = {0};
        for (int i = 0; i < clt_safetensors_num_tensors(f); i++) {
            clt_safetensors_info bi;
            int64_t b = clt_safetensors_tensor_info(f, i, &bi) == CLT_OK ? block_of(bi.name) : -1;
            if (b >= 0 && b <= CLT_RESMLP_MAX_BLOCKS) seen[b] = 1;
        }
        int64_t n = 0;
        while (n <= CLT_RESMLP_MAX_BLOCKS && seen[n]) n++;
        *hiddens = fi.shape[0];
        *blocks = n;
        if (n > CLT_RESMLP_MAX_BLOCKS)
            s = clt__fail(CLT_ERR_FORMAT, "%s holds more than %d residual blocks (net.3 to net.%d and on)", path,
                          CLT_RESMLP_MAX_BLOCKS, CLT_RESMLP_MAX_BLOCKS + 3);
    }
    clt_safetensors_free(f);
    return s;
}
