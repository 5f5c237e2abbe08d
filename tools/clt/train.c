/* clt train and clt eval: the chapter's capstone, a ResMLPClassifier on
 * Fashion-MNIST, and training on a data file of the user's (CSV, .npy/.npz,
 * IDX): classes or a regression, a validation split, standardisation; and
 * evaluating any saved model on either. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cltensor.h>

#include "commands.h"
#include "distributed.h"
#include "train_options.h"

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

/* Builds the model of width inputs and `outputs` outputs: an MLP for a
 * --hiddens list, else the ResMLP, taking its shape from the --load (or
 * --resume) file unless given; loads --load's parameters (the trainer loads
 * --resume's). */
static int make_model(const char *cmd, train_args *a, clt_device dev, int64_t width, int64_t outputs, clt_model **out)
{
    const char *from = a->load ? a->load : a->resume;
    if (a->hidden_layers > 1) {
        if (clt_model_create_mlp(out, dev, width, a->hidden_layers, a->hidden_list, outputs, a->seed) != CLT_OK)
            return fail(cmd, "building the model");
    } else if (from) {
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
    if (a->hidden_layers <= 1 &&
        clt_model_create_resmlp(out, dev, width, a->hiddens, (int)a->blocks, outputs, a->seed) != CLT_OK)
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

static clt_plan_options plan_options(const train_args *a, clt_task task)
{
    clt_plan_options o = clt_plan_default_options();
    o.task = task;
    o.batch_size = a->batch_size;
    o.optimizer = a->optimizer;
    o.recompute_blocks = a->recompute_blocks;
    o.dtype = a->fp16 ? CLT_FLOAT16 : CLT_FLOAT32;
    o.device = train_device(a, NULL);
    o.accumulate = a->accumulate;
    return o;
}

/* The GPUs a run of one process trains on: gpu:0..N-1, N = --num-gpus or
 * the GPUs there are, whichever is fewer; 1 with --device (one device). */
static int gpus_used(const train_args *a)
{
    int gpus = clt_num_gpus();
    return a->have_device ? 1 : a->num_gpus < gpus ? a->num_gpus : gpus;
}

/* With several GPUs (data parallel, --num-gpus N): each one's predicted
 * peak, from clt_parallel_plan. */
static clt_status plan_replicas(const train_args *a, const clt_model *model, const clt_plan_options *o)
{
    int use = gpus_used(a);
    if (use < 2 || a->plan_for) return CLT_OK;
    if (use > 64) use = 64;
    clt_device devices[64];
    int64_t peaks[64];
    for (int i = 0; i < use; i++) devices[i] = clt_gpu(i);
    clt_status s = clt_parallel_plan(model, o, devices, use, peaks);
    if (s != CLT_OK) return s;
    printf("data parallel on %d GPUs (clt_parallel_plan), predicted peak per device:", use);
    for (int i = 0; i < use; i++) printf("%s gpu:%d %.1f MiB", i ? "," : "", i, peaks[i] / 1048576.0);
    printf("\n");
    return CLT_OK;
}

/* --plan-for: the described device planned for, and a second one that the
 * model is built on, so that no device of this machine is needed: of the
 * same class, caches and tile, with the most memory and the largest buffer
 * a description may have and no cap, so that only the planner judges
 * whether the model fits the target (its report says what does not). */
static clt_status plan_for_devices(const train_args *a, clt_device *target, clt_device *model_dev)
{
    clt_device_description m = a->plan_for_device;
    clt_status s = clt_plan_device_describe(&a->plan_for_device, target);
    m.global_mem_bytes = m.max_alloc_bytes = CLT_PLAN_MAX_DESCRIBED_BYTES;
    m.cap_bytes = 0;
    snprintf(m.label, sizeof m.label, "clt-model");
    return s == CLT_OK ? clt_plan_device_describe(&m, model_dev) : s;
}

/* --plan: the memory planner's prediction for one step on the training
 * device, against its memory cap when one is set, else its memory; of the
 * model for a data file (task its data's), else (model NULL) of the
 * Fashion-MNIST model, made here and freed. */
static int plan_run(train_args *a, const clt_model *of, clt_task task)
{
    clt_model *model = NULL;
    clt_device dev = train_device(a, NULL), target = dev;
    if (a->plan_for && plan_for_devices(a, &target, &dev) != CLT_OK) return fail("train", "--plan-for");
    int rc = of ? 0 : make_model("train", a, dev, 784, 10, &model);
    if (rc) return rc;
    if (of) model = (clt_model *)of;
    clt_plan_options o = plan_options(a, task);
    o.device = target;
    int64_t budget = 0, largest = 0;
    clt_status s = budget_of(o.device, &budget);
    if (s == CLT_OK) s = clt_plan_report(model, &o, budget, (int64_t)1 << 24, stdout);
    if (s == CLT_OK) s = plan_replicas(a, model, &o);
    /* Exit 1 when the step does not fit, so that a script can test it. */
    if (s == CLT_OK && budget > 0) s = clt_plan_max_batch(model, &o, budget, a->batch_size, &largest);
    if (!of) clt_model_free(model);
    if (s != CLT_OK) return fail("train", "planning");
    return budget > 0 && largest < a->batch_size ? 1 : 0;
}

/* With several GPUs (data parallel): clt_parallel_plan_fit fits every GPU
 * the run uses, each within its own budget (its memory cap, else its
 * memory), and prints each one's predicted peak. */
static clt_status fit_gpus(const train_args *a, clt_model *model, const clt_plan_options *o, int used,
                           clt_plan_fit_result *r)
{
    clt_device devices[64];
    int64_t budgets[64], peaks[64];
    clt_status s = CLT_OK;
    for (int i = 0; s == CLT_OK && i < used; i++) {
        devices[i] = clt_gpu(i);
        s = budget_of(devices[i], &budgets[i]);
    }
    if (s == CLT_OK) s = clt_parallel_plan_fit(model, o, devices, used, budgets, a->fit == 2, r, peaks);
    if (s != CLT_OK) return s;
    printf("fit: data parallel on %d GPUs (clt_parallel_plan_fit), predicted peak of the steps per device:", used);
    for (int i = 0; i < used; i++)
        printf("%s gpu:%d %.1f MiB of %.1f MiB", i ? "," : "", i, peaks[i] / 1048576.0, budgets[i] / 1048576.0);
    printf("\n");
    return CLT_OK;
}

/* --fit: the planner picks micro-batches, checkpointing (and with
 * --fit=any float16) for the batch on the training device, or with several
 * GPUs on every one of them; prints it. */
static int fit_run(train_args *a, clt_model *model, const clt_dataset *train)
{
    clt_plan_options o = plan_options(a, train->task);
    o.whole_run = 1; /* the loaders' staging and the evaluation too */
    /* The examples the training loader uses and their stored type: a
     * GPU-class device may hold them (docs/data.md), and the plan counts it. */
    o.train_examples = a->train_limit > 0 && a->train_limit < train->n ? a->train_limit : train->n;
    o.train_value_bytes = train->images ? 1 : 4;
    int64_t budget = 0;
    clt_plan_fit_result r;
    int used = gpus_used(a);
    if (used > 64) used = 64;
    clt_status s = used > 1 ? fit_gpus(a, model, &o, used, &r) : budget_of(o.device, &budget);
    if (s == CLT_OK && used <= 1) s = clt_plan_fit(model, &o, budget, a->fit == 2, &r);
    if (s != CLT_OK) return fail("train", "--fit");
    char dev[32] = "";
    clt_device_name(o.device, dev, sizeof dev);
    /* used: the GPUs the run trains on, 0 without any: shards only with several. */
    int64_t micro = (a->batch_size + r.accumulate - 1) / r.accumulate;
    int64_t shard = used > 1 ? (a->batch_size + used - 1) / used : a->batch_size;
    if (used > 1) /* each GPU's shard in micro-batches */
        printf("fit: batch %lld in shards of up to %lld, each as %d micro-batch%s of up to %lld, ",
               (long long)a->batch_size, (long long)shard, r.accumulate, r.accumulate == 1 ? "" : "es",
               (long long)((shard + r.accumulate - 1) / r.accumulate));
    else
        printf("fit: batch %lld as %d micro-batch%s of %lld%s, ", (long long)a->batch_size, r.accumulate,
               r.accumulate == 1 ? "" : "es", (long long)micro,
               r.accumulate * micro == a->batch_size ? "" : " or one less");
    if (r.recompute_blocks) printf("checkpointed segments of %d blocks, ", r.recompute_blocks);
    else printf("no checkpointing, ");
    printf("%s; predicted peak %.1f MiB allocated, %.1f MiB reserved, of %.1f MiB on %s (%.1f MiB kept as a margin)\n",
           clt_dtype_name(r.dtype), r.plan.peak / 1048576.0, r.plan.reserved / 1048576.0, r.budget / 1048576.0, dev,
           r.margin / 1048576.0);
    clt_memory_stats pinned;
    int capped = clt_memory_get_stats(clt_pinned(), &pinned) == CLT_OK && pinned.cap > 0;
    printf("fit: evaluation in batches of %lld%s%s, predicted peak %.1f MiB allocated; the loaders' staging %.1f MiB "
           "of pinned memory", (long long)r.eval_batch_size, r.keep_packed ? "" : " without kept packed weights",
           used > 1 ? " on gpu:0" : "", r.plan.eval_peak / 1048576.0, r.plan.staging / 1048576.0);
    if (capped) printf(" (capped at %.1f MiB)", pinned.cap / 1048576.0);
    printf("\n");
    a->eval_batch_size = r.eval_batch_size; /* as the plan's evaluation */
    clt_model_set_keep_packed(model, r.keep_packed);
    a->accumulate = r.accumulate;
    a->recompute_blocks = r.recompute_blocks;
    a->fp16 = r.dtype == CLT_FLOAT16;
    return 0;
}

/* The signal that stopped training, for the exit status (128 + it). */
static volatile sig_atomic_t stop_signal;

/* The first SIGINT, SIGTERM (what mpirun turns Ctrl-C into for its ranks,
 * and what kill and batch systems send) or SIGHUP (a closed terminal) asks
 * the trainer to stop after its current step and save; a second one ends
 * the process as usual. */
static void on_stop_signal(int sig)
{
    if (!stop_signal) stop_signal = sig;
    clt_trainer_request_stop();
    signal(sig, SIG_DFL);
}

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { NSTOP = sizeof stop_signals / sizeof stop_signals[0] };
typedef void (*handler_fn)(int);

/* Which stop signals the process started with ignored (read at the first call). */
static int ignored[NSTOP], ignored_known;

/* Catches the stop signals, previous[] getting the old handlers. A SIGTERM
 * or SIGHUP ignored at the start stays ignored (nohup clt train survives a
 * hangup); SIGINT is caught even then, as a shell's background job has it
 * ignored. The signal that already stopped the run keeps its default. */
static void catch_stop_signals(handler_fn previous[NSTOP])
{
    for (int i = 0; i < NSTOP; i++) {
        int sig = stop_signals[i];
        previous[i] = signal(sig, on_stop_signal);
        if (!ignored_known) ignored[i] = previous[i] == SIG_IGN;
        if (sig == stop_signal) signal(sig, SIG_DFL);
        else if (ignored[i] && sig != SIGINT) signal(sig, SIG_IGN);
    }
    ignored_known = 1;
}

/* Puts the handlers back, but the signal that stopped the run keeps its
 * default action: a second one ends the process. */
static void restore_signals(handler_fn const previous[NSTOP])
{
    for (int i = 0; i < NSTOP; i++) signal(stop_signals[i], stop_signals[i] == stop_signal ? SIG_DFL : previous[i]);
}

static int data_is_folder(const train_args *a);

int clt_cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = clt_tool_train_parse_args(argc, argv, &a, 0);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = env_device("train", &a))) return rc;
    /* Fashion-MNIST's model plans without its data; a data file's, from it (train_run). */
    if (a.plan && data_is_folder(&a)) return plan_run(&a, NULL, CLT_TASK_CLASSIFY);
    clt_collective comm = {0, 1, NULL, NULL};
    if (a.distributed && clt_tool_mpi_start(&comm)) return 1;
    /* Caught from the start: a stop asked for while the data loads or the
     * kernels compile ends the run before its first step. */
    handler_fn previous[NSTOP];
    catch_stop_signals(previous);
    rc = train_run(a, a.distributed ? &comm : NULL);
    restore_signals(previous);
    if (a.distributed) clt_tool_mpi_stop();
    return rc;
}

/* Trains on one device, data parallel on several GPUs, or as one rank of
 * comm; every way saves each epoch, stops on Ctrl-C and resumes. */
static clt_status fit(clt_model *model, const clt_dataset *train, const clt_dataset *test, const train_args *a,
                      const clt_trainer_options *o, const clt_collective *comm, clt_trainer_result *r)
{
    int use = gpus_used(a);
    /* Again: the OpenCL driver's LLVM may have put its own handlers in front since. */
    handler_fn previous[NSTOP];
    catch_stop_signals(previous);
    clt_status s;
    if (comm) {
        clt_device dev = train_device(a, comm);
        s = clt_parallel_fit(model, train, test, o, &dev, 1, comm, r);
    } else if (use > 1) {
        s = clt_parallel_fit(model, train, test, o, NULL, use, NULL, r);
    } else {
        s = clt_trainer_fit(model, train, test, o, r);
    }
    restore_signals(previous);
    return s;
}

/* The run's files, checked before the data is read: every output can be
 * written (its temporary name too), no two name one file however spelled,
 * and none but --save is the --resume or --load file. Returns 0 or the exit
 * status after the message (2 for a clash, 1 for an unwritable path). */
static int check_files(const train_args *a)
{
    const clt_file_use uses[] = {
        {"--save", a->save, CLT_FILE_REPLACES_INPUT},   {"--metrics", a->metrics, CLT_FILE_OUTPUT},
        {"--plot", a->plot, CLT_FILE_OUTPUT},           {"--trace", a->trace, CLT_FILE_OUTPUT},
        {"--memory-plot", a->memory_plot, CLT_FILE_OUTPUT}, {"--resume", a->resume, CLT_FILE_INPUT},
        {"--load", a->load, CLT_FILE_INPUT},
    };
    clt_status s = clt_file_check_uses(uses, sizeof uses / sizeof uses[0]);
    if (s == CLT_OK) return 0;
    fail("train", "checking the output files");
    return s == CLT_ERR_INVALID_ARGUMENT ? 2 : 1;
}

/* 1 when the --data path is Fashion-MNIST's folder: not given, a folder, or
 * missing with no extension (a missing x.csv is a data file's error). */
static int data_is_folder(const train_args *a)
{
    struct stat st;
    if (!a->data_given) return 1;
    if (stat(a->data, &st) == 0) return S_ISDIR(st.st_mode);
    const char *base = strrchr(a->data, '/');
    return strchr(base ? base + 1 : a->data, '.') == NULL;
}

/* The data of a run: Fashion-MNIST's training and test splits, or a data
 * file's training and validation splits and its --test file; standardised
 * with --standardize. */
typedef struct run_data {
    clt_dataset train, val, test;
    int file, have_test;
    clt_standardizer st;
    int standardized;
} run_data;

static void run_data_free(run_data *d)
{
    clt_dataset_free(&d->train);
    clt_dataset_free(&d->val);
    clt_dataset_free(&d->test);
    clt_standardizer_free(&d->st);
}

/* A data file's message: bad data is exit 2, before anything is written. */
static int bad_data(const char *what)
{
    fprintf(stderr, "clt train: %s: %s\n", what, clt_last_error());
    return 2;
}

/* clt_dataset_load's options for a's data files (--labels is the caller's to set). */
static clt_data_options file_options(const train_args *a)
{
    clt_data_options o = clt_data_default_options();
    o.target = a->target;
    o.task = a->task;
    o.x_name = a->x_name;
    o.y_name = a->y_name;
    o.delimiter = a->delimiter;
    o.header = a->header;
    return o;
}

/* Reads path with o; a failure is exit 2 after the message. An .npy or IDX
 * file without its targets' file (the only CLT_ERR_INVALID_ARGUMENT the tool's
 * options can cause) names the option that gives it. */
static int load_file(const char *cmd, const char *what, clt_dataset *ds, const char *path, const clt_data_options *o,
                     const char *labels_option)
{
    clt_status s = clt_dataset_load(ds, path, o);
    if (s == CLT_OK) return 0;
    fprintf(stderr, "clt %s: %s: %s\n", cmd, what, clt_last_error());
    if (s == CLT_ERR_INVALID_ARGUMENT && !o->labels_path)
        fprintf(stderr, "clt %s: give the targets' file of %s with %s FILE\n", cmd, path, labels_option);
    return 2;
}

static int load_file_data(const train_args *a, run_data *d)
{
    clt_data_options o = file_options(a);
    o.labels_path = a->labels;
    clt_dataset all = {0};
    if (load_file("train", "reading the data", &all, a->data, &o, "--labels")) return 2;
    int rc = clt_dataset_check(&all, a->data) != CLT_OK ? bad_data("checking the data") : 0;
    double f = a->val_split > 0 ? a->val_split : 0.2;
    if (rc == 0 && clt_dataset_split(&d->train, &d->val, &all, f, a->seed) != CLT_OK)
        rc = bad_data("splitting the data");
    clt_dataset_free(&all);
    if (rc == 0 && a->test) {
        o.like = &d->train;
        o.labels_path = a->test_labels;
        if (load_file("train", "reading the test data", &d->test, a->test, &o, "--test-labels")) return 2;
        if (clt_dataset_check(&d->test, a->test) != CLT_OK) return bad_data("checking the test data");
        d->have_test = 1;
    }
    if (rc == 0 && a->standardize) {
        if (clt_standardizer_fit(&d->st, &d->train) != CLT_OK) return bad_data("standardizing");
        d->standardized = 1;
        if (clt_standardizer_apply(&d->st, &d->train) != CLT_OK || clt_standardizer_apply(&d->st, &d->val) != CLT_OK ||
            (d->have_test && clt_standardizer_apply(&d->st, &d->test) != CLT_OK))
            return bad_data("standardizing");
    }
    return rc;
}

static int load_data(const train_args *a, run_data *d)
{
    memset(d, 0, sizeof *d);
    if (!data_is_folder(a)) {
        d->file = 1;
        return load_file_data(a, d);
    }
    if (a->target || a->labels || a->task >= 0 || a->test || a->val_split > 0 || a->standardize || a->x_name ||
        a->y_name || a->delimiter || a->header >= 0) {
        fprintf(stderr, "clt train: --target, --labels, --task, --test, --val-split, --standardize, --x-name, "
                        "--y-name, --delimiter and --header take a data file as --data, not the folder %s\n", a->data);
        return 2;
    }
    if (a->hidden_layers > 1) {
        fprintf(stderr, "clt train: Fashion-MNIST trains the ResMLP: --hiddens takes one width with a folder\n");
        return 2;
    }
    if (clt_fashion_mnist_load(&d->train, a->data, CLT_SPLIT_TRAIN) != CLT_OK) return fail("train", "loading the data");
    if (clt_fashion_mnist_load(&d->val, a->data, CLT_SPLIT_TEST) != CLT_OK) return fail("train", "loading the data");
    return 0;
}

/* What a saved model records of its data (clt_checkpoint_info): the task,
 * the class names, an example's shape, the --target column given and the
 * standardizer, so that clt predict, clt eval and clt_model_load need
 * nothing else. The pointers are d's and a's. */
static void describe_data(clt_checkpoint_info *info, const train_args *a, const run_data *d)
{
    const clt_dataset *t = &d->train;
    info->task = t->task;
    if (t->task == CLT_TASK_CLASSIFY && t->class_names) {
        info->num_classes = t->num_classes;
        info->class_names = (const char *const *)t->class_names;
    }
    if (t->example_ndim > 0) {
        info->example_ndim = t->example_ndim;
        memcpy(info->example_shape, t->example_shape, sizeof info->example_shape);
    } else if (t->rows > 1) {
        info->example_ndim = 2;
        info->example_shape[0] = t->rows;
        info->example_shape[1] = t->cols;
    } else {
        info->example_ndim = 1;
        info->example_shape[0] = t->cols;
    }
    info->target = d->file ? a->target : NULL;
    info->standardizer = d->standardized ? &d->st : NULL;
}

/* The figures of one evaluation, as "NAME loss L, NAME accuracy A" or a regression's errors. */
static void print_figures(const char *name, const clt_dataset *ds, double loss, double acc, double mse, double mae)
{
    if (ds->task == CLT_TASK_REGRESS) printf("%s loss %.4f, %s mse %.6g, %s mae %.6g", name, loss, name, mse, name, mae);
    else printf("%s loss %.4f, %s accuracy %.4f", name, loss, name, acc);
}

static int train_run(train_args a, const clt_collective *comm)
{
    int rc = check_files(&a);
    if (rc) return rc;
    run_data d;
    rc = load_data(&a, &d);
    if (rc) {
        run_data_free(&d);
        return rc;
    }
    clt_model *model = NULL;
    /* Before the model: queues made while tracing carry kernel times. */
    rc = a.trace && clt_trace_start(a.trace) != CLT_OK ? fail("train", "starting the trace") : 0;
    if (rc == 0)
        rc = make_model("train", &a, train_device(&a, comm), clt_dataset_width(&d.train),
                        clt_dataset_num_outputs(&d.train), &model);
    if (rc == 0 && a.plan) rc = plan_run(&a, model, d.train.task);
    else if (rc == 0 && a.fit) rc = fit_run(&a, model, &d.train);
    if (rc == 0 && !a.plan) {
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
        o.eval_batch_size = a.eval_batch_size;
        o.metrics_path = a.metrics;
        o.save_path = a.save;
        if (a.hidden_layers > 1) o.save_info = (clt_checkpoint_info){.arch = "mlp"};
        else o.save_info = (clt_checkpoint_info){.arch = "resmlp", .hiddens = a.hiddens, .blocks = a.blocks};
        describe_data(&o.save_info, &a, &d);
        o.resume_path = a.resume;
        o.plot_path = a.plot;
        o.memory_plot_path = a.memory_plot;
        o.momentum = (float)a.momentum;
        o.weight_decay = (float)a.weight_decay;
        o.lr_schedule = (clt_lr_schedule)a.lr_schedule;
        o.warmup_steps = a.warmup_steps;
        o.lr_step_size = a.lr_step_size;
        o.lr_gamma = a.lr_gamma;
        o.early_stopping = a.early_stopping;
        o.standardizer = d.standardized ? &d.st : NULL;
        o.log = stdout;
        clt_trainer_result r;
        if (a.memory_plot && (comm || (!a.have_device && a.num_gpus > 1 && clt_num_gpus() > 1))) {
            fprintf(stderr, "clt train: --memory-plot works on one device, not with --distributed or several GPUs\n");
            rc = 2;
        } else if (fit(model, &d.train, &d.val, &a, &o, comm, &r) != CLT_OK) {
            rc = fail("train", "training");
        }
        if (rc == 0 && r.stopped) {
            /* "saved" only after a save: a stop during the warm-up, before any step, saved nothing.
             * Rank 0 of --distributed saves, and says so. */
            if (!comm || comm->rank == 0) {
                if (r.saves)
                    printf("interrupted after %lld steps; saved %s: continue with --resume %s\n", (long long)r.steps, a.save,
                           a.save);
                else if (a.save && a.resume)
                    printf("interrupted before any step; nothing saved: %s is as it was, continue with --resume %s\n",
                           a.resume, a.resume);
                else if (a.save)
                    printf("interrupted before any step; nothing saved: %s was not written\n", a.save);
                else
                    printf("interrupted after %lld steps (no --save file to resume from)\n", (long long)r.steps);
            }
            rc = 128 + (stop_signal ? stop_signal : SIGINT);
        } else if (rc == 0 && (!comm || comm->rank == 0) && !d.file) {
            printf("trained %d epoch(s), %lld steps on %s: %.0f images/s; test loss %.4f, test accuracy %.4f",
                   r.epochs, (long long)r.steps, r.device, r.images_per_second, r.val_loss, r.val_accuracy);
            if (r.skipped_steps)
                printf("; %lld of the steps skipped (float16 gradients overflowed)", (long long)r.skipped_steps);
            putchar('\n');
        } else if (rc == 0 && (!comm || comm->rank == 0)) {
            printf("trained %d epoch(s), %lld steps on %s: %.0f examples/s; ", r.epochs, (long long)r.steps, r.device,
                   r.images_per_second);
            /* The figures of the model kept: the best epoch's with early stopping. */
            if (r.best_epoch && (r.early_stopped || r.best_epoch != r.epochs)) {
                printf("%skept epoch %d: ", r.early_stopped ? "stopped early, " : "", r.best_epoch);
                print_figures("val", &d.val, r.best_val_loss, r.best_val_accuracy, r.best_val_mse, r.best_val_mae);
            } else {
                print_figures("val", &d.val, r.val_loss, r.val_accuracy, r.val_mse, r.val_mae);
            }
            if (r.skipped_steps)
                printf("; %lld of the steps skipped (float16 gradients overflowed)", (long long)r.skipped_steps);
            putchar('\n');
            clt_evaluation ev;
            if (d.have_test) {
                int64_t eval_batch = a.eval_batch_size > 0 ? a.eval_batch_size : a.batch_size; /* --fit's */
                if (clt_trainer_evaluate_metrics(model, &d.test, eval_batch, 0, o.standardizer, &ev) != CLT_OK) {
                    rc = fail("train", "evaluating the test set");
                } else {
                    print_figures("test", &d.test, ev.loss, ev.accuracy, ev.mse, ev.mae);
                    printf(" (%lld examples)\n", (long long)ev.examples);
                }
            }
        }
    }
    if (a.trace && clt_trace_stop() != CLT_OK && rc == 0) rc = fail("train", "writing the trace");
    clt_model_free(model);
    run_data_free(&d);
    return rc;
}

/* clt eval's data: Fashion-MNIST's test split from a folder, or a data file
 * read as the model records (its target column, task and classes). Returns
 * 0, or the exit status after a message (2 for bad data). */
static int eval_data(const train_args *a, const clt_model_description *desc, clt_dataset *ds)
{
    if (data_is_folder(a)) {
        if (a->target || a->labels || a->x_name || a->y_name || a->delimiter || a->header >= 0) {
            fprintf(stderr, "clt eval: --target, --labels, --x-name, --y-name, --delimiter and --header take a data "
                            "file as --data, not the folder %s\n", a->data);
            return 2;
        }
        if (desc->task != CLT_TASK_CLASSIFY || desc->num_inputs != 784 || desc->num_outputs != 10) {
            fprintf(stderr, "clt eval: %s is a %s of %lld inputs and %lld outputs, not a Fashion-MNIST classifier "
                            "(784 and 10): give its data file as --data\n", a->load,
                    desc->task == CLT_TASK_REGRESS ? "regression" : "classifier", (long long)desc->num_inputs,
                    (long long)desc->num_outputs);
            return 2;
        }
        return clt_fashion_mnist_load(ds, a->data, CLT_SPLIT_TEST) != CLT_OK ? fail("eval", "loading the data") : 0;
    }
    /* The training set as the model knows it: its width, task, outputs and class names. */
    clt_dataset like = {.rows = 1, .cols = desc->num_inputs, .task = desc->task, .num_classes = desc->num_classes,
                        .class_names = desc->class_names,
                        .outputs = desc->task == CLT_TASK_REGRESS ? desc->num_outputs : 0};
    clt_data_options o = file_options(a);
    o.target = a->target ? a->target : desc->target;
    o.task = -1;
    o.labels_path = a->labels;
    o.like = &like;
    return load_file("eval", "reading the data", ds, a->data, &o, "--labels");
}

/* With --hiddens or --blocks: they must be the ResMLP's of the --load file. */
static int eval_check_shape(const train_args *a)
{
    int64_t h, k;
    if (!a->hiddens_given && !a->blocks_given) return 0;
    if (a->hidden_layers > 1) {
        fprintf(stderr, "clt eval: --hiddens takes the ResMLP's one width; the model's layers are read from %s\n",
                a->load);
        return 2;
    }
    if (clt_checkpoint_resmlp_shape(a->load, &h, &k) != CLT_OK) return fail("eval", "reading the checkpoint");
    if ((a->hiddens_given && a->hiddens != h) || (a->blocks_given && a->blocks != k)) {
        fprintf(stderr, "clt eval: %s holds a ResMLP with %lld hiddens and %lld blocks, not %lld and %lld\n", a->load,
                (long long)h, (long long)k, (long long)a->hiddens, (long long)a->blocks);
        return 2;
    }
    return 0;
}

int clt_cmd_eval(int argc, char **argv)
{
    train_args a;
    int rc = clt_tool_train_parse_args(argc, argv, &a, 1);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = env_device("eval", &a)) || (rc = eval_check_shape(&a))) return rc;
    clt_device dev = a.have_device ? a.device : clt_try_gpu(0);
    clt_model *model = NULL;
    clt_model_description desc;
    if (clt_model_load(&model, a.load, dev, &desc) != CLT_OK) return fail("eval", "loading the model");
    clt_dataset test = {0};
    rc = eval_data(&a, &desc, &test);
    const clt_standardizer *st = desc.has_standardizer ? &desc.standardizer : NULL;
    if (rc == 0 && st && clt_standardizer_apply(st, &test) != CLT_OK) rc = fail("eval", "standardizing");
    clt_evaluation ev;
    if (rc == 0 && clt_trainer_evaluate_metrics(model, &test, a.batch_size, 0, st, &ev) != CLT_OK)
        rc = fail("eval", "evaluating");
    if (rc == 0) {
        char name[32] = "";
        clt_device_name(dev, name, sizeof name);
        print_figures("test", &test, ev.loss, ev.accuracy, ev.mse, ev.mae);
        printf(" (%lld %s, %s)\n", (long long)ev.examples, data_is_folder(&a) ? "images" : "examples", name);
    }
    clt_model_description_free(&desc);
    clt_model_free(model);
    clt_dataset_free(&test);
    return rc;
}
