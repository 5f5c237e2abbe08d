/* The option parser of clt train and clt eval (train_options.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "train_options.h"

/* What `clt train --help` adds to --distributed. */
#ifdef CLT_HAVE_MPI
#define CLT_TOOL_MPI_NOTE ""
#else
#define CLT_TOOL_MPI_NOTE " (unavailable: built without MPI)"
#endif

static const char *train_usage =
    "usage: clt train [options]\n"
    "\n"
    "Trains a model on Fashion-MNIST (a folder of its IDX files: the chapter's\n"
    "ResMLPClassifier, evaluated on the test split after each epoch) or on your\n"
    "own data (a CSV, .npy/.npz or IDX file: classes with cross-entropy or a\n"
    "regression with MSE, the input width and outputs taken from the data,\n"
    "evaluated on a validation split; docs/own-data.md).\n"
    "\n"
    "  --data DIR|FILE         Fashion-MNIST's IDX files (default data/fashion-mnist; docs/data.md says\n"
    "                          where to get them), or a data file, read by its content\n"
    "  --target NAME|INDEX     CSV: the target column (default the last)\n"
    "  --delimiter C           CSV: the delimiter: , ; tab or space (default detected from the first line)\n"
    "  --header yes|no|auto    CSV: whether the first row names the columns (default auto: detected)\n"
    "  --labels FILE           IDX or .npy: the targets' file\n"
    "  --x-name NAME           .npz: the features' array (default x)\n"
    "  --y-name NAME           .npz: the targets' array (default y)\n"
    "  --task classify|regress override the task inferred from the targets\n"
    "  --test FILE             a test set of the same layout, evaluated at the end\n"
    "  --test-labels FILE      IDX or .npy: the --test file's targets' file\n"
    "  --val-split F           the fraction of the training data kept apart for validation\n"
    "                          (seeded, stratified for classes; default 0.2 for a data file)\n"
    "  --standardize           per-feature mean and deviation (and a regression target's) of the\n"
    "                          training split, applied to validation and test data\n"
    "  --weight-decay W        L2 penalty added to the gradient, as PyTorch's weight_decay (default 0)\n"
    "  --momentum M            SGD momentum, as PyTorch's (default 0)\n"
    "  --lr-schedule step|cosine  the learning rate over the steps (default constant)\n"
    "  --warmup-steps N        linear warm-up of the learning rate over the first N steps\n"
    "  --lr-step-size N        step schedule: multiply the learning rate by --lr-gamma every N steps\n"
    "  --lr-gamma G            step schedule's factor (default 0.1)\n"
    "  --early-stopping P      stop after P epochs without a lower validation loss; keep (and\n"
    "                          --save) the best epoch's model\n"
    "  --epochs N              epochs (default 1)\n"
    "  --batch-size B          global batch size (default 256)\n"
    "  --lr LR                 learning rate (default 0.1)\n"
    "  --optimizer sgd|adam    optimizer (default sgd)\n"
    "  --hiddens H|H1,H2,...   hidden width of the ResMLP (default 256, or the --load file's); a list\n"
    "                          of two or more widths: an MLP of that many hidden layers (a data file)\n"
    "  --blocks K              residual blocks (default 2, or the --load file's)\n"
    "  --num-gpus N            use up to N GPUs, data parallel when N > 1; the CPU when there is none\n"
    "                          (default 1)\n"
    "  --distributed           one process per device under mpirun: rank r trains on gpu:<r % GPUs>"
    CLT_TOOL_MPI_NOTE "\n"
    "  --device D              train on D: cpu, gpu:i, or P:D from `clt devices` (default: CLT_DEVICE\n"
    "                          when set, unless --num-gpus N > 1 or --distributed)\n"
    "  --recompute N|auto      activation checkpointing (recompute): N residual blocks per segment,\n"
    "                          auto about sqrt(blocks); default 0, off\n"
    "  --plan                  print the predicted peak memory of a training step, whether\n"
    "                          it fits the device (or its memory cap), the largest batch\n"
    "                          that fits with and without checkpointing; train nothing\n"
    "  --plan-for SPEC         --plan for a device this machine need not have: SPEC is cpu or gpu,\n"
    "                          then ,memory=SIZE ,max-alloc=SIZE ,cap=SIZE ,workgroup=N ,width=N\n"
    "                          ,l1=SIZE ,l2=SIZE (its caches) ,tile=TMxTN (the CPU products' tile)\n"
    "                          (SIZE as CLT_MEMORY_CAP: 80G, 1.5GiB, 4096); the rest as\n"
    "                          clt_device_description_default gives (docs/planner.md)\n"
    "  --fp16                  float16 weights and activations, float32 master weights\n"
    "  --accumulate N          gradient accumulation: each step sums N micro-batches of about\n"
    "                          batch-size/N examples, equal to one step on the whole batch\n"
    "  --fit                   before training, pick the fewest micro-batches (then no\n"
    "                          checkpointing, then the segment size) predicted to fit the\n"
    "                          device or its cap (with --num-gpus N, each GPU within its\n"
    "                          own) with the evaluation and the loader's staging, print\n"
    "                          the choice; fail when nothing fits\n"
    "  --fit=any               the same, and float16 when no float32 configuration fits\n"
    "  --seed S                initialisation and shuffling seed (default 0)\n"
    "  --no-shuffle            batches in file order\n"
    "  --steps N               stop after N optimizer steps\n"
    "  --train-limit N         train on the first N examples only\n"
    "  --val-limit N           evaluate on the first N test examples only\n"
    "  --load FILE             start from a safetensors checkpoint (PyTorch names)\n"
    "  --resume FILE           continue an interrupted run from its --save checkpoint (any number of\n"
    "                          devices, --distributed too; same options as the run that saved it)\n"
    "  --save FILE             write a safetensors checkpoint (with the optimizer state) at every\n"
    "                          epoch's end (even when --metrics or --plot cannot be written) and\n"
    "                          on Ctrl-C, SIGTERM or SIGHUP, for --resume\n"
    "  --metrics FILE          per-epoch metrics as CSV\n"
    "  --plot FILE             per-epoch losses and accuracy as an SVG chart\n"
    "  --trace FILE            a Chrome trace-event timeline of every command\n"
    "  --memory-plot FILE      record the memory of the first 2 steps and draw it as an SVG\n"
    "                          (allocated by category, reserved, the cap, the peak and its phase)\n"
    "\n"
    "The output files are checked before the data is read: each must be writable, its name short\n"
    "enough for the temporary file written first (NAME.tmp-<16 hex digits>), no two outputs the\n"
    "same file, and none but --save the --resume or --load file.\n";

static const char *eval_usage =
    "usage: clt eval --load FILE [--data DIR|FILE] [--target COLUMN] [--labels FILE]\n"
    "                [--delimiter C] [--header yes|no|auto] [--x-name NAME] [--y-name NAME]\n"
    "                [--hiddens H --blocks K] [--device D] [--batch-size B]\n"
    "\n"
    "Prints the test loss and accuracy (classes) or the loss, MSE and MAE (a\n"
    "regression, in the target's units) of any saved model: one made by clt train\n"
    "or through the C API, rebuilt from the file (clt_model_load), or a ResMLP\n"
    "checkpoint. The data is Fashion-MNIST's test split (a folder, default\n"
    "data/fashion-mnist) or a data file (CSV, .npy/.npz or IDX) in the training\n"
    "data's layout, its target the column the model records (or --target), its\n"
    "classes the training data's; the model's stored standardization is applied.\n"
    "--labels is the targets' file of an IDX or .npy file; --delimiter (, ; tab or\n"
    "space) and --header (yes, no or auto) read a CSV as clt train does, --x-name and\n"
    "--y-name name a .npz's arrays (default x and y). --hiddens and --blocks,\n"
    "when given, must agree with a ResMLP checkpoint's. The device is --device,\n"
    "else CLT_DEVICE when set, else gpu:0 when there is one, else cpu.\n";

/* The option handlers print their own message, prefixed with the command
 * ("clt train: ..."), and return 0 to refuse the value. */
static int parse_int(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno || v < lo) {
        fprintf(stderr, "clt %s: %s needs an integer >= %lld, not '%s'\n", cmd, opt, (long long)lo, text);
        return 0;
    }
    *out = v;
    return 1;
}

/* An integer option clamped to `hi` (a ceiling the tool applies silently). */
static int parse_clamped(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi, int *out)
{
    int64_t n;
    if (!parse_int(cmd, opt, text, lo, &n)) return 0;
    *out = n > hi ? (int)hi : (int)n;
    return 1;
}

static int parse_double(const char *cmd, const char *opt, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*text == '\0' || *end != '\0' || errno || !isfinite(v) || v <= 0) {
        fprintf(stderr, "clt %s: %s needs a positive number, not '%s'\n", cmd, opt, text);
        return 0;
    }
    *out = v;
    return 1;
}

/* One handler per option: a takes the value v (NULL for a flag). */
typedef int (*option_fn)(train_args *a, const char *cmd, const char *opt, const char *v);

static int opt_data(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->data = v; a->data_given = 1; return 1; }
static int opt_load(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->load = v; return 1; }
static int opt_resume(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->resume = v; return 1; }
static int opt_save(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->save = v; return 1; }
static int opt_metrics(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->metrics = v; return 1; }
static int opt_plot(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->plot = v; return 1; }
static int opt_trace(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->trace = v; return 1; }
static int opt_memory_plot(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->memory_plot = v; return 1; }

/* A width or a comma-separated list of them. */
static int opt_hiddens(train_args *a, const char *c, const char *o, const char *v)
{
    a->hiddens_given = 1;
    a->hidden_layers = 0;
    const char *p = v;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (a->hidden_layers == TRAIN_MAX_HIDDEN_LAYERS || len == 0 || len >= sizeof item) {
            fprintf(stderr, "clt %s: %s needs a width or a list of at most %d widths (128,64), not '%s'\n", c, o,
                    TRAIN_MAX_HIDDEN_LAYERS, v);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        int64_t h;
        if (!parse_int(c, o, item, 1, &h)) return 0;
        if (h > ((int64_t)1 << 31) - 1) {
            fprintf(stderr, "clt %s: %s %lld is too wide\n", c, o, (long long)h);
            return 0;
        }
        a->hidden_list[a->hidden_layers++] = h;
        if (!comma) break;
        p = comma + 1;
    }
    a->hiddens = a->hidden_list[0];
    return 1;
}

static int opt_target(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->target = v; return 1; }
static int opt_labels(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->labels = v; return 1; }
static int opt_test(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->test = v; return 1; }
static int opt_test_labels(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->test_labels = v; return 1; }
static int opt_x_name(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->x_name = v; return 1; }
static int opt_y_name(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->y_name = v; return 1; }

static int opt_delimiter(train_args *a, const char *c, const char *o, const char *v)
{
    if (clt_tool_parse_delimiter(v, &a->delimiter)) return 1;
    fprintf(stderr, "clt %s: %s takes , ; tab or space, not '%s'\n", c, o, v);
    return 0;
}

static int opt_header(train_args *a, const char *c, const char *o, const char *v)
{
    if (clt_tool_parse_header(v, &a->header)) return 1;
    fprintf(stderr, "clt %s: %s takes yes, no or auto, not '%s'\n", c, o, v);
    return 0;
}

int clt_tool_parse_delimiter(const char *v, char *out)
{
    if (strcmp(v, ",") == 0 || strcmp(v, ";") == 0 || strcmp(v, "\t") == 0 || strcmp(v, " ") == 0) *out = v[0];
    else if (strcmp(v, "tab") == 0) *out = '\t';
    else if (strcmp(v, "space") == 0) *out = ' ';
    else return 0;
    return 1;
}

int clt_tool_parse_header(const char *v, int *out)
{
    if (strcmp(v, "yes") == 0) *out = 1;
    else if (strcmp(v, "no") == 0) *out = 0;
    else if (strcmp(v, "auto") == 0) *out = -1;
    else return 0;
    return 1;
}
static int opt_standardize(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->standardize = 1; return 1; }

static int opt_task(train_args *a, const char *c, const char *o, const char *v)
{
    if (strcmp(v, "classify") == 0) a->task = CLT_TASK_CLASSIFY;
    else if (strcmp(v, "regress") == 0) a->task = CLT_TASK_REGRESS;
    else {
        fprintf(stderr, "clt %s: %s takes classify or regress, not '%s'\n", c, o, v);
        return 0;
    }
    return 1;
}

/* A number in [lo, hi) (lo < x when open_lo). */
static int parse_range(const char *cmd, const char *opt, const char *text, double lo, int open_lo, double hi,
                       double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*text == '\0' || *end != '\0' || errno || !isfinite(v) || v < lo || (open_lo && v == lo) || v >= hi) {
        fprintf(stderr, "clt %s: %s needs a number in %s%g, %g), not '%s'\n", cmd, opt, open_lo ? "(" : "[", lo, hi,
                text);
        return 0;
    }
    *out = v;
    return 1;
}

static int opt_val_split(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_range(c, o, v, 0, 1, 1, &a->val_split);
}

static int opt_weight_decay(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_range(c, o, v, 0, 0, 1e6, &a->weight_decay);
}

static int opt_momentum(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_range(c, o, v, 0, 0, 1, &a->momentum);
}

static int opt_lr_gamma(train_args *a, const char *c, const char *o, const char *v)
{
    if (!parse_double(c, o, v, &a->lr_gamma)) return 0;
    if (a->lr_gamma > 1) {
        fprintf(stderr, "clt %s: %s needs a number in (0, 1], not '%s'\n", c, o, v);
        return 0;
    }
    return 1;
}

static int opt_lr_schedule(train_args *a, const char *c, const char *o, const char *v)
{
    if (strcmp(v, "step") == 0) a->lr_schedule = CLT_LR_STEP;
    else if (strcmp(v, "cosine") == 0) a->lr_schedule = CLT_LR_COSINE;
    else if (strcmp(v, "constant") == 0) a->lr_schedule = CLT_LR_CONSTANT;
    else {
        fprintf(stderr, "clt %s: %s takes step, cosine or constant, not '%s'\n", c, o, v);
        return 0;
    }
    return 1;
}

static int opt_warmup_steps(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_int(c, o, v, 0, &a->warmup_steps);
}

static int opt_lr_step_size(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_int(c, o, v, 1, &a->lr_step_size);
}

static int opt_early_stopping(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_clamped(c, o, v, 1, 1000000, &a->early_stopping);
}

static int opt_blocks(train_args *a, const char *c, const char *o, const char *v)
{
    a->blocks_given = 1;
    return parse_int(c, o, v, 0, &a->blocks);
}

static int opt_batch_size(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_int(c, o, v, 1, &a->batch_size);
}

static int opt_device(train_args *a, const char *c, const char *o, const char *v)
{
    if (clt_device_parse(v, &a->device) != CLT_OK) {
        fprintf(stderr, "clt %s: %s: %s\n", c, o, clt_last_error());
        return 0;
    }
    a->have_device = 1;
    return 1;
}

static int opt_epochs(train_args *a, const char *c, const char *o, const char *v)
{
    int64_t n;
    if (!parse_int(c, o, v, 1, &n)) return 0;
    if (n > 1000000) {
        fprintf(stderr, "clt %s: %s %lld is too many\n", c, o, (long long)n);
        return 0;
    }
    a->epochs = (int)n;
    return 1;
}

static int opt_num_gpus(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_clamped(c, o, v, 0, 1024, &a->num_gpus);
}

static int opt_lr(train_args *a, const char *c, const char *o, const char *v) { return parse_double(c, o, v, &a->lr); }

static int opt_optimizer(train_args *a, const char *c, const char *o, const char *v)
{
    if (strcmp(v, "sgd") == 0) a->optimizer = CLT_OPTIMIZER_SGD;
    else if (strcmp(v, "adam") == 0) a->optimizer = CLT_OPTIMIZER_ADAM;
    else {
        fprintf(stderr, "clt %s: %s takes sgd or adam, not '%s'\n", c, o, v);
        return 0;
    }
    return 1;
}

static int opt_recompute(train_args *a, const char *c, const char *o, const char *v)
{
    if (strcmp(v, "auto") == 0) {
        a->recompute_blocks = CLT_RECOMPUTE_AUTO;
        return 1;
    }
    return parse_clamped(c, o, v, 0, 1000000, &a->recompute_blocks);
}

/* The option's old spelling, refused with the new one named. */
static int opt_checkpoint_segments(train_args *a, const char *c, const char *o, const char *v)
{
    (void)a, (void)v;
    fprintf(stderr, "clt %s: %s is now --recompute N (activation checkpointing: N residual blocks per segment, "
                    "or auto)\n", c, o);
    return 0;
}

static int opt_seed(train_args *a, const char *c, const char *o, const char *v)
{
    int64_t n;
    if (!parse_int(c, o, v, 0, &n)) return 0;
    a->seed = (uint64_t)n;
    return 1;
}

static int opt_steps(train_args *a, const char *c, const char *o, const char *v) { return parse_int(c, o, v, 1, &a->steps); }

static int opt_train_limit(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_int(c, o, v, 1, &a->train_limit);
}

static int opt_val_limit(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_int(c, o, v, 1, &a->val_limit);
}

static int opt_distributed(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->distributed = 1; return 1; }
static int opt_plan(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->plan = 1; return 1; }
/* A byte count as clt_size_parse reads one ("80G", "1.5GiB"), ending at end. */
static int parse_bytes(const char *p, const char *end, unsigned long long *out)
{
    char text[64];
    int64_t v;
    size_t n = (size_t)(end - p);
    if (n >= sizeof text) return 0;
    memcpy(text, p, n);
    text[n] = '\0';
    if (clt_size_parse(text, &v) != CLT_OK) return 0;
    *out = (unsigned long long)v;
    return 1;
}

/* A plain number (no unit, no fraction) up to max, ending at end. */
static int parse_count(const char *p, const char *end, unsigned long long max, unsigned long long *out)
{
    for (const char *q = p; q < end; q++)
        if (*q < '0' || *q > '9') return 0;
    return parse_bytes(p, end, out) && *out <= max;
}

/* "TMxTN": two plain numbers; their ranges are clt_plan_device_describe's. */
static int parse_tile(const char *p, const char *end, clt_device_description *d)
{
    const char *x = memchr(p, 'x', (size_t)(end - p));
    unsigned long long tm, tn;
    if (!x || !parse_count(p, x, INT_MAX, &tm) || !parse_count(x + 1, end, INT_MAX, &tn)) return 0;
    d->tile_m = (int)tm;
    d->tile_n = (int)tn;
    return 1;
}

/* One key=value of --plan-for into d; 0 for an unknown key or a bad value. */
static int plan_for_field(const char *item, const char *end, clt_device_description *d, int *max_alloc_given)
{
    static const char *const keys[] = {"memory=", "max-alloc=", "cap=", "l1=", "l2=", "workgroup=", "width=",
                                       "tile="};
    for (int k = 0; k < 8; k++) {
        size_t n = strlen(keys[k]);
        if ((size_t)(end - item) < n || strncmp(item, keys[k], n) != 0) continue;
        unsigned long long v;
        if (k == 7) return parse_tile(item + n, end, d);
        /* workgroup and width: a plain number */
        if (k >= 5 ? !parse_count(item + n, end, UINT_MAX, &v) : !parse_bytes(item + n, end, &v)) return 0;
        if (k == 0) d->global_mem_bytes = v;
        if (k == 1) d->max_alloc_bytes = v, *max_alloc_given = 1;
        if (k == 2 && v > LLONG_MAX) return 0; /* past cap_bytes' range: a malformed value */
        if (k == 2) d->cap_bytes = (long long)v;
        if (k == 3) d->l1_cache_bytes = v;
        if (k == 4) d->l2_cache_bytes = v;
        if (k == 5) d->max_work_group = v;
        if (k == 6) d->float_width = (unsigned)v;
        return 1;
    }
    return 0;
}

/* --plan-for cpu|gpu[,key=value...]: the described device; implies --plan.
 * Ranges are clt_plan_device_describe's to check, when the plan runs. */
static int opt_plan_for(train_args *a, const char *c, const char *o, const char *v)
{
    size_t head = strcspn(v, ",");
    int gpu = head == 3 && strncmp(v, "gpu", 3) == 0, max_alloc_given = 0;
    int ok = gpu || (head == 3 && strncmp(v, "cpu", 3) == 0);
    clt_device_description d = clt_device_description_default(gpu ? CLT_DEVICE_GPU : CLT_DEVICE_CPU);
    for (const char *p = v + head; ok && *p; p += strcspn(p + 1, ",") + 1)
        ok = plan_for_field(p + 1, p + 1 + strcspn(p + 1, ","), &d, &max_alloc_given);
    if (!ok) {
        fprintf(stderr, "clt %s: %s needs cpu or gpu, then ,memory=SIZE ,max-alloc=SIZE ,cap=SIZE ,l1=SIZE "
                ",l2=SIZE ,workgroup=N ,width=N or ,tile=TMxTN (SIZE as CLT_MEMORY_CAP: 80G, 1.5GiB, 4096), not '%s'\n",
                c, o, v);
        return 0;
    }
    /* A quarter of the memory, as clt_device_description_default's, unless that is under 1 MiB. */
    if (!max_alloc_given) d.max_alloc_bytes = d.global_mem_bytes / 4 >= (1u << 20) ? d.global_mem_bytes / 4
                                                                                   : d.global_mem_bytes;
    a->plan_for_device = d;
    a->plan_for = a->plan = 1;
    return 1;
}

static int opt_fit(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->fit = 1; return 1; }
static int opt_fit_any(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->fit = 2; return 1; }

static int opt_accumulate(train_args *a, const char *c, const char *o, const char *v)
{
    return parse_clamped(c, o, v, 1, 1 << 30, &a->accumulate);
}

static int opt_fp16(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->fp16 = 1; return 1; }
static int opt_no_shuffle(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o, (void)v; a->shuffle = 0; return 1; }

/* Every option of clt train; `eval` marks those clt eval takes too. Order
 * does not matter: a name appears once. */
static const struct option_spec {
    const char *name;
    int value; /* 1: takes the next argument */
    int eval;
    option_fn apply;
} options[] = {
    {"--data", 1, 1, opt_data},
    {"--load", 1, 1, opt_load},
    {"--hiddens", 1, 1, opt_hiddens},
    {"--blocks", 1, 1, opt_blocks},
    {"--batch-size", 1, 1, opt_batch_size},
    {"--device", 1, 1, opt_device},
    {"--resume", 1, 0, opt_resume},
    {"--save", 1, 0, opt_save},
    {"--metrics", 1, 0, opt_metrics},
    {"--plot", 1, 0, opt_plot},
    {"--trace", 1, 0, opt_trace},
    {"--memory-plot", 1, 0, opt_memory_plot},
    {"--epochs", 1, 0, opt_epochs},
    {"--num-gpus", 1, 0, opt_num_gpus},
    {"--lr", 1, 0, opt_lr},
    {"--optimizer", 1, 0, opt_optimizer},
    {"--recompute", 1, 0, opt_recompute},
    {"--checkpoint-segments", 0, 0, opt_checkpoint_segments},
    {"--seed", 1, 0, opt_seed},
    {"--steps", 1, 0, opt_steps},
    {"--train-limit", 1, 0, opt_train_limit},
    {"--val-limit", 1, 0, opt_val_limit},
    {"--distributed", 0, 0, opt_distributed},
    {"--plan", 0, 0, opt_plan},
    {"--plan-for", 1, 0, opt_plan_for},
    {"--fp16", 0, 0, opt_fp16},
    {"--accumulate", 1, 0, opt_accumulate},
    {"--fit", 0, 0, opt_fit},
    {"--fit=any", 0, 0, opt_fit_any},
    {"--no-shuffle", 0, 0, opt_no_shuffle},
    {"--target", 1, 1, opt_target},
    {"--labels", 1, 1, opt_labels},
    {"--task", 1, 0, opt_task},
    {"--test", 1, 0, opt_test},
    {"--test-labels", 1, 0, opt_test_labels},
    {"--x-name", 1, 1, opt_x_name},
    {"--y-name", 1, 1, opt_y_name},
    {"--delimiter", 1, 1, opt_delimiter},
    {"--header", 1, 1, opt_header},
    {"--val-split", 1, 0, opt_val_split},
    {"--standardize", 0, 0, opt_standardize},
    {"--weight-decay", 1, 0, opt_weight_decay},
    {"--momentum", 1, 0, opt_momentum},
    {"--lr-schedule", 1, 0, opt_lr_schedule},
    {"--warmup-steps", 1, 0, opt_warmup_steps},
    {"--lr-step-size", 1, 0, opt_lr_step_size},
    {"--lr-gamma", 1, 0, opt_lr_gamma},
    {"--early-stopping", 1, 0, opt_early_stopping},
};

static const struct option_spec *find_option(const char *name, int eval)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (strcmp(options[i].name, name) == 0 && (options[i].eval || !eval)) return &options[i];
    return NULL;
}

static void defaults(train_args *a)
{
    memset(a, 0, sizeof *a);
    a->data = "data/fashion-mnist";
    a->epochs = 1;
    a->num_gpus = 1;
    a->shuffle = 1;
    a->batch_size = 256;
    a->hiddens = 256;
    a->blocks = 2;
    a->hidden_layers = 1;
    a->hidden_list[0] = 256;
    a->lr = 0.1;
    a->task = -1;
    a->header = -1;
}

/* What the options say together (after all of them are read). */
static int check_args(const train_args *a, const char *cmd, int eval)
{
    if (a->load && a->resume) {
        fprintf(stderr, "clt %s: --load and --resume exclude each other (--resume restores the optimizer too)\n", cmd);
        return 2;
    }
    if (a->hidden_layers > 1 && a->blocks_given) {
        fprintf(stderr, "clt %s: --hiddens with a list of widths is an MLP; --blocks is the ResMLP's\n", cmd);
        return 2;
    }
    if (a->lr_schedule == CLT_LR_STEP && !a->lr_step_size) {
        fprintf(stderr, "clt %s: --lr-schedule step needs --lr-step-size N\n", cmd);
        return 2;
    }
    if (a->momentum > 0 && a->optimizer == CLT_OPTIMIZER_ADAM) {
        fprintf(stderr, "clt %s: --momentum is SGD's; Adam has its betas (0.9, 0.999)\n", cmd);
        return 2;
    }
    if (a->test_labels && !a->test) {
        fprintf(stderr, "clt %s: --test-labels FILE holds the --test file's targets: give --test FILE too\n", cmd);
        return 2;
    }
    if (eval && !a->load) {
        fprintf(stderr, "clt %s: --load FILE is required\n%s", cmd, eval_usage);
        return 2;
    }
    return 0;
}

/* Returns 0 to go on, -1 after --help, else the exit status (2). */
int clt_tool_train_parse_args(int argc, char **argv, train_args *a, int eval)
{
    const char *cmd = eval ? "eval" : "train";
    defaults(a);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(eval ? eval_usage : train_usage, stdout);
            return -1;
        }
        const struct option_spec *spec = find_option(o, eval);
        const char *v = spec && spec->value && i + 1 < argc ? argv[i + 1] : NULL;
        if (!spec || (spec->value && !v)) {
            if (spec) fprintf(stderr, "clt %s: %s needs a value\n%s", cmd, o, eval ? eval_usage : train_usage);
            else fprintf(stderr, "clt %s: unknown option '%s'\n%s", cmd, o, eval ? eval_usage : train_usage);
            return 2;
        }
        if (!spec->apply(a, cmd, o, v)) return 2;
        i += spec->value;
    }
    return check_args(a, cmd, eval);
}

