/* The options of `clt train` and `clt eval`: what they hold, and the one
 * parser that reads them (tools/clt/train_options.c). The argument fuzzer
 * (tests/fuzz/fuzz_args.c) links the same file. */
#ifndef CLT_TOOL_TRAIN_OPTIONS_H
#define CLT_TOOL_TRAIN_OPTIONS_H

#include <stdint.h>

#include <cltensor.h>

/* The most hidden layers --hiddens lists. */
#define TRAIN_MAX_HIDDEN_LAYERS 64

/* Every option's value, or its default. */
typedef struct train_args {
    const char *data, *load, *save, *metrics, *plot, *trace, *resume, *memory_plot;
    /* --data FILE: its target, labels file, test file and its labels, task (-1 inferred), validation split */
    const char *target, *labels, *test, *test_labels;
    /* --x-name, --y-name: a .npz's arrays (NULL: x, y); --delimiter (0 detected), --header (-1 detected) */
    const char *x_name, *y_name;
    char delimiter;
    int header;
    int task, standardize, data_given;
    double val_split;
    /* --hiddens as a list: hidden_layers widths (1 for a single number) */
    int hidden_layers;
    int64_t hidden_list[TRAIN_MAX_HIDDEN_LAYERS];
    /* trainer options */
    double momentum, weight_decay, lr_gamma;
    int lr_schedule, early_stopping;
    int64_t warmup_steps, lr_step_size;
    int epochs, num_gpus, have_device, shuffle, distributed;
    int hiddens_given, blocks_given, recompute_blocks, plan, fp16, accumulate, fit;
    clt_device device;
    int plan_for;                              /* --plan-for given */
    clt_device_description plan_for_device;    /* --plan-for's device */
    int64_t batch_size, hiddens, blocks, steps, train_limit, val_limit;
    int64_t eval_batch_size; /* 0: batch_size; --fit sets the micro-batch size it chose */
    double lr;
    uint64_t seed;
    clt_optimizer_kind optimizer;
} train_args;

/* Reads argv[1..argc) for `clt train` (eval 0) or `clt eval` (eval 1) into
 * a, after the defaults. Prints its own messages, prefixed with the command.
 * Returns 0 to go on, -1 after --help (printed), else the exit status (2). */
int clt_tool_train_parse_args(int argc, char **argv, train_args *a, int eval);

/* --delimiter's value (",", ";", "tab" or a tab, "space" or " ") into *out;
 * --header's (yes 1, no 0, auto -1). 0 for another value (clt predict shares them). */
int clt_tool_parse_delimiter(const char *v, char *out);
int clt_tool_parse_header(const char *v, int *out);

#endif
