/* clt train and clt eval: the chapter's capstone, a ResMLPClassifier on
 * Fashion-MNIST. */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltensor.h>

#include "commands.h"
#include "distributed.h"

typedef struct train_args {
    const char *data, *load, *save, *metrics, *plot, *trace, *resume, *memory_plot;
    int epochs, num_gpus, have_device, shuffle, distributed;
    int hiddens_given, blocks_given, recompute_blocks, plan, fp16, accumulate, fit;
    clt_device device;
    int64_t batch_size, hiddens, blocks, steps, train_limit, val_limit;
    double lr;
    uint64_t seed;
    clt_optimizer_kind optimizer;
} train_args;

static const char *train_usage =
    "usage: clt train [options]\n"
    "\n"
    "Trains the chapter's ResMLPClassifier on Fashion-MNIST and evaluates it on\n"
    "the test split after each epoch.\n"
    "\n"
    "  --data DIR              Fashion-MNIST's IDX files (default data/fashion-mnist; docs/data.md says\n"
    "                          where to get them)\n"
    "  --epochs N              epochs (default 1)\n"
    "  --batch-size B          global batch size (default 256)\n"
    "  --lr LR                 learning rate (default 0.1)\n"
    "  --optimizer sgd|adam    optimizer (default sgd)\n"
    "  --hiddens H             hidden width (default 256, or the --load file's)\n"
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
    "  --fp16                  float16 weights and activations, float32 master weights\n"
    "  --accumulate N          gradient accumulation: each step sums N micro-batches of about\n"
    "                          batch-size/N examples, equal to one step on the whole batch\n"
    "  --fit                   before training, pick the fewest micro-batches (then no\n"
    "                          checkpointing, then the segment size) predicted to fit the\n"
    "                          device or its cap, print the choice; fail when nothing fits\n"
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
    "                          epoch's end and on Ctrl-C, for --resume\n"
    "  --metrics FILE          per-epoch metrics as CSV\n"
    "  --plot FILE             per-epoch losses and accuracy as an SVG chart\n"
    "  --trace FILE            a Chrome trace-event timeline of every command\n"
    "  --memory-plot FILE      record the memory of the first 2 steps and draw it as an SVG\n"
    "                          (allocated by category, reserved, the cap, the peak and its phase)\n";

static const char *eval_usage =
    "usage: clt eval --load FILE [--data DIR] [--hiddens H --blocks K] [--device D] [--batch-size B]\n"
    "\n"
    "Prints the test loss and accuracy of a ResMLP checkpoint. The architecture\n"
    "is read from the checkpoint; --hiddens and --blocks, when given, must agree.\n"
    "The device is --device, else CLT_DEVICE when set, else gpu:0 when there is one, else cpu.\n";

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

static int opt_data(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->data = v; return 1; }
static int opt_load(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->load = v; return 1; }
static int opt_resume(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->resume = v; return 1; }
static int opt_save(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->save = v; return 1; }
static int opt_metrics(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->metrics = v; return 1; }
static int opt_plot(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->plot = v; return 1; }
static int opt_trace(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->trace = v; return 1; }
static int opt_memory_plot(train_args *a, const char *c, const char *o, const char *v) { (void)c, (void)o; a->memory_plot = v; return 1; }

static int opt_hiddens(train_args *a, const char *c, const char *o, const char *v)
{
    a->hiddens_given = 1;
    return parse_int(c, o, v, 1, &a->hiddens);
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
    {"--fp16", 0, 0, opt_fp16},
    {"--accumulate", 1, 0, opt_accumulate},
    {"--fit", 0, 0, opt_fit},
    {"--fit=any", 0, 0, opt_fit_any},
    {"--no-shuffle", 0, 0, opt_no_shuffle},
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
    a->lr = 0.1;
}

/* What the options say together (after all of them are read). */
static int check_args(const train_args *a, const char *cmd, int eval)
{
    if (a->load && a->resume) {
        fprintf(stderr, "clt %s: --load and --resume exclude each other (--resume restores the optimizer too)\n", cmd);
        return 2;
    }
    if (eval && !a->load) {
        fprintf(stderr, "clt %s: --load FILE is required\n%s", cmd, eval_usage);
        return 2;
    }
    return 0;
}

/* Returns 0 to go on, -1 after --help, else the exit status (2). */
static int parse_args(int argc, char **argv, train_args *a, int eval)
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

static int fail(const char *cmd, const char *what)
{
    fprintf(stderr, "clt %s: %s: %s\n", cmd, what, clt_last_error());
    return 1;
}

/* CLT_DEVICE=P:D (or a name) is the default device: it stands for --device
 * unless --device, --num-gpus N > 1 or --distributed chose. Returns 0 or
 * the exit status (2) after a message naming the value. */
static int env_device(const char *cmd, train_args *a)
{
    const char *env = getenv("CLT_DEVICE");
    if (a->have_device || a->distributed || a->num_gpus > 1 || !env || !env[0]) return 0;
    if (clt_device_parse(env, &a->device) != CLT_OK) {
        fprintf(stderr, "clt %s: CLT_DEVICE=%s: %s\n", cmd, env, clt_last_error());
        return 2;
    }
    a->have_device = 1;
    return 0;
}

/* Where clt train trains (the primary, data parallel) and builds the model:
 * --device (or CLT_DEVICE); rank r of --distributed on gpu:<r % GPUs>; else
 * gpu:0 when --num-gpus allows one and there is one; else the CPU. */
static clt_device train_device(const train_args *a, const clt_collective *comm)
{
    int gpus = clt_num_gpus();
    if (a->have_device) return a->device;
    if (comm) return gpus > 0 ? clt_gpu(comm->rank % gpus) : clt_cpu();
    return a->num_gpus > 0 && gpus > 0 ? clt_gpu(0) : clt_cpu();
}

/* Builds the ResMLP, taking its shape from the --load (or --resume) file
 * unless given, and loads --load's parameters (the trainer loads --resume's). */
static int make_model(const char *cmd, train_args *a, clt_device dev, clt_model **out)
{
    const char *from = a->load ? a->load : a->resume;
    if (from) {
        int64_t h, k;
        if (clt_checkpoint_resmlp_shape(from, &h, &k) != CLT_OK) return fail(cmd, "reading the checkpoint");
        if ((a->hiddens_given && a->hiddens != h) || (a->blocks_given && a->blocks != k)) {
            fprintf(stderr, "clt %s: %s holds a ResMLP with %lld hiddens and %lld blocks, not %lld and %lld\n", cmd,
                    from, (long long)h, (long long)k, (long long)a->hiddens, (long long)a->blocks);
            return 2;
        }
        a->hiddens = h;
        a->blocks = k;
    }
    if (a->blocks > 1000) {
        fprintf(stderr, "clt %s: --blocks %lld is too many\n", cmd, (long long)a->blocks);
        return 2;
    }
    /* On the device it will run on (the parameters are drawn on the host): no cpu:0 needed. */
    if (clt_model_create_resmlp(out, dev, 784, a->hiddens, (int)a->blocks, 10, a->seed) != CLT_OK)
        return fail(cmd, "building the model");
    if (a->load && clt_checkpoint_load(a->load, *out, NULL, NULL) != CLT_OK) {
        clt_model_free(*out);
        *out = NULL;
        return fail(cmd, "loading the checkpoint");
    }
    return 0;
}

static int train_run(train_args a, const clt_collective *comm);

/* Where training runs, and its budget: the memory cap when one is set, else the device's memory. */
static clt_status budget_of(clt_device dev, int64_t *budget)
{
    clt_memory_stats st;
    int64_t free_bytes, total = 0;
    clt_status s = clt_memory_get_stats(dev, &st);
    if (s == CLT_OK && !st.cap) s = clt_memory_get_info(dev, &free_bytes, &total);
    *budget = st.cap ? st.cap : total;
    return s;
}

static clt_plan_options plan_options(const train_args *a)
{
    clt_plan_options o = clt_plan_default_options();
    o.batch_size = a->batch_size;
    o.optimizer = a->optimizer;
    o.recompute_blocks = a->recompute_blocks;
    o.dtype = a->fp16 ? CLT_FLOAT16 : CLT_FLOAT32;
    o.device = train_device(a, NULL);
    o.accumulate = a->accumulate;
    return o;
}

/* --plan: the memory planner's prediction for one step on the training
 * device, against its memory cap when one is set, else its memory. */
static int plan_run(train_args *a)
{
    clt_model *model = NULL;
    clt_device dev = train_device(a, NULL);
    int rc = make_model("train", a, dev, &model);
    if (rc) return rc;
    clt_plan_options o = plan_options(a);
    int64_t budget = 0, largest = 0;
    clt_status s = budget_of(o.device, &budget);
    if (s == CLT_OK) s = clt_plan_report(model, &o, budget, (int64_t)1 << 24, stdout);
    /* Exit 1 when the step does not fit, so that a script can test it. */
    if (s == CLT_OK && budget > 0) s = clt_plan_max_batch(model, &o, budget, a->batch_size, &largest);
    clt_model_free(model);
    if (s != CLT_OK) return fail("train", "planning");
    return budget > 0 && largest < a->batch_size ? 1 : 0;
}

/* --fit: the planner picks micro-batches, checkpointing (and with
 * --fit=any float16) for the batch on the training device; prints it. */
static int fit_run(train_args *a, const clt_model *model)
{
    clt_plan_options o = plan_options(a);
    int64_t budget = 0;
    clt_plan_fit_result r;
    if (budget_of(o.device, &budget) != CLT_OK || clt_plan_fit(model, &o, budget, a->fit == 2, &r) != CLT_OK)
        return fail("train", "--fit");
    char dev[32] = "";
    clt_device_name(o.device, dev, sizeof dev);
    printf("fit: batch %lld as %d micro-batch%s of %lld%s, ", (long long)a->batch_size, r.accumulate,
           r.accumulate == 1 ? "" : "es", (long long)((a->batch_size + r.accumulate - 1) / r.accumulate),
           r.accumulate * ((a->batch_size + r.accumulate - 1) / r.accumulate) == a->batch_size ? "" : " or one less");
    if (r.recompute_blocks) printf("checkpointed segments of %d blocks, ", r.recompute_blocks);
    else printf("no checkpointing, ");
    printf("%s; predicted peak %.1f MiB allocated, %.1f MiB reserved, of %.1f MiB on %s (%.1f MiB kept as a margin)\n",
           clt_dtype_name(r.dtype), r.plan.peak / 1048576.0, r.plan.reserved / 1048576.0, budget / 1048576.0, dev,
           r.margin / 1048576.0);
    a->accumulate = r.accumulate;
    a->recompute_blocks = r.recompute_blocks;
    a->fp16 = r.dtype == CLT_FLOAT16;
    return 0;
}

int clt_cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse_args(argc, argv, &a, 0);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = env_device("train", &a))) return rc;
    if (a.plan) return plan_run(&a);
    clt_collective comm = {0, 1, NULL, NULL};
    if (a.distributed && clt_tool_mpi_start(&comm)) return 1;
    rc = train_run(a, a.distributed ? &comm : NULL);
    if (a.distributed) clt_tool_mpi_stop();
    return rc;
}

/* The first SIGINT (or, under mpirun, which turns Ctrl-C into SIGTERM for
 * its ranks, SIGTERM) asks the trainer to stop after its current step and
 * save; a second one ends the process as usual. */
static void on_stop_signal(int sig)
{
    clt_trainer_request_stop();
    signal(sig, SIG_DFL);
}

/* Trains on one device, data parallel on several GPUs, or as one rank of
 * comm; every way saves each epoch, stops on Ctrl-C and resumes. */
static clt_status fit(clt_model *model, const clt_dataset *train, const clt_dataset *test, const train_args *a,
                      const clt_trainer_options *o, const clt_collective *comm, clt_trainer_result *r)
{
    int gpus = clt_num_gpus(), use = a->num_gpus < gpus ? a->num_gpus : gpus;
    void (*previous)(int) = signal(SIGINT, on_stop_signal);
    void (*previous_term)(int) = comm ? signal(SIGTERM, on_stop_signal) : SIG_DFL;
    clt_status s;
    if (comm) {
        clt_device dev = train_device(a, comm);
        s = clt_parallel_fit(model, train, test, o, &dev, 1, comm, r);
    } else if (!a->have_device && use > 1) {
        s = clt_parallel_fit(model, train, test, o, NULL, use, NULL, r);
    } else {
        s = clt_trainer_fit(model, train, test, o, r);
    }
    signal(SIGINT, previous);
    if (comm) signal(SIGTERM, previous_term);
    return s;
}

static int train_run(train_args a, const clt_collective *comm)
{
    int rc;
    clt_dataset train = {0}, test = {0};
    if (clt_fashion_mnist_load(&train, a.data, CLT_SPLIT_TRAIN) != CLT_OK) return fail("train", "loading the data");
    if (clt_fashion_mnist_load(&test, a.data, CLT_SPLIT_TEST) != CLT_OK) {
        clt_dataset_free(&train);
        return fail("train", "loading the data");
    }
    clt_model *model = NULL;
    /* Before the model: queues made while tracing carry kernel times. */
    rc = a.trace && clt_trace_start(a.trace) != CLT_OK ? fail("train", "starting the trace") : 0;
    if (rc == 0) rc = make_model("train", &a, train_device(&a, comm), &model);
    if (rc == 0 && a.fit) rc = fit_run(&a, model);
    if (rc == 0) {
        clt_trainer_options o = clt_trainer_default_options();
        o.max_epochs = a.epochs;
        o.recompute_blocks = a.recompute_blocks;
        o.fp16 = a.fp16;
        o.accumulate = a.accumulate;
        o.num_gpus = a.num_gpus;
        o.use_device = a.have_device;
        o.device = a.device;
        o.batch_size = a.batch_size;
        o.lr = (float)a.lr;
        o.optimizer = a.optimizer;
        o.seed = a.seed;
        o.shuffle = a.shuffle;
        o.max_steps = a.steps;
        o.train_limit = a.train_limit;
        o.val_limit = a.val_limit;
        o.metrics_path = a.metrics;
        o.save_path = a.save;
        o.save_info = (clt_checkpoint_info){.arch = "resmlp", .hiddens = a.hiddens, .blocks = a.blocks};
        o.resume_path = a.resume;
        o.plot_path = a.plot;
        o.memory_plot_path = a.memory_plot;
        o.log = stdout;
        clt_trainer_result r;
        if (a.memory_plot && (comm || (!a.have_device && a.num_gpus > 1 && clt_num_gpus() > 1))) {
            fprintf(stderr, "clt train: --memory-plot works on one device, not with --distributed or several GPUs\n");
            rc = 2;
        } else if (fit(model, &train, &test, &a, &o, comm, &r) != CLT_OK) {
            rc = fail("train", "training");
        }
        if (rc == 0 && r.stopped) {
            printf("interrupted after %lld steps%s%s%s\n", (long long)r.steps, a.save ? "; saved " : "",
                   a.save ? a.save : "", a.save ? ": continue with --resume" : " (no --save file to resume from)");
            rc = 130;
        } else if (rc == 0 && (!comm || comm->rank == 0)) {
            printf("trained %d epoch(s), %lld steps on %s: %.0f images/s; test loss %.4f, test accuracy %.4f",
                   r.epochs, (long long)r.steps, r.device, r.images_per_second, r.val_loss, r.val_accuracy);
            if (r.skipped_steps)
                printf("; %lld of the steps skipped (float16 gradients overflowed)", (long long)r.skipped_steps);
            putchar('\n');
        }
    }
    if (a.trace && clt_trace_stop() != CLT_OK && rc == 0) rc = fail("train", "writing the trace");
    clt_model_free(model);
    clt_dataset_free(&train);
    clt_dataset_free(&test);
    return rc;
}

int clt_cmd_eval(int argc, char **argv)
{
    train_args a;
    int rc = parse_args(argc, argv, &a, 1);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = env_device("eval", &a))) return rc;
    clt_dataset test = {0};
    if (clt_fashion_mnist_load(&test, a.data, CLT_SPLIT_TEST) != CLT_OK) return fail("eval", "loading the data");
    clt_model *model = NULL;
    clt_device dev = a.have_device ? a.device : clt_try_gpu(0);
    rc = make_model("eval", &a, dev, &model);
    double loss = 0, acc = 0;
    if (rc == 0 && clt_model_to(model, dev) != CLT_OK) rc = fail("eval", "moving the model");
    if (rc == 0 && clt_trainer_evaluate(model, &test, a.batch_size, 0, &loss, &acc) != CLT_OK)
        rc = fail("eval", "evaluating");
    if (rc == 0) {
        char name[32] = "";
        clt_device_name(dev, name, sizeof name);
        printf("test loss %.4f, test accuracy %.4f (%lld images, %s)\n", loss, acc, (long long)test.n, name);
    }
    clt_model_free(model);
    clt_dataset_free(&test);
    return rc;
}
