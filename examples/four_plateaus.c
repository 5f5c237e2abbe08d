/* The four plateaus of training memory (the chapter's section "What Fills
 * Memory During Training"): an MLP 1024 -> 4096 -> 4096 -> 4096 -> 10 with
 * ReLU between, a batch of 4096 and Adam, on clt_try_gpu(0). Reads
 * clt_memory_allocated at four points of one training step and prints each
 * reading beside the analytic accounting:
 *
 *   weights            4N bytes of parameters plus the batch (X and labels)
 *   + activations      what backward needs: each ReLU output (B x hidden),
 *                      the loss's dlogits (B x 10) and the loss itself
 *   + gradients        activations freed, 4N bytes of gradients
 *   + optimizer state  8N bytes: Adam's two moments, created at the first step
 *
 * Usage: four_plateaus [--batch N] [--hidden H] [--memory-plot FILE.svg]
 * (defaults 4096 and 4096). --memory-plot records the device's memory from
 * before the model is built to after the step (clt_memory_record_start)
 * and draws it (clt_memory_record_write_svg).
 * Exits with status 1 when a reading is more than 1% off the accounting. */
#include <cltensor.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

static int check(clt_status s, const char *what)
{
    if (s == CLT_OK) return 0;
    fprintf(stderr, "four_plateaus: %s failed: %s: %s\n", what, clt_status_string(s), clt_last_error());
    return 1;
}

static int parse_positive(const char *text, int64_t *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0' || v <= 0) return 1;
    *out = v;
    return 0;
}

/* One line: the reading, the accounting, and whether they agree within 1%. */
static int report(const char *label, int64_t measured, int64_t expected)
{
    double off = expected ? fabs((double)(measured - expected)) / (double)expected : 0.0;
    printf("%-18s %9.1f MiB   %9.1f MiB   %+.3f%%\n", label, measured / MIB, expected / MIB,
           100.0 * (double)(measured - expected) / (double)(expected ? expected : 1));
    return off > 0.01;
}

int main(int argc, char **argv)
{
    int64_t B = 4096, H = 4096;
    const int64_t IN = 1024, OUT = 10;
    const char *plot = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--batch") == 0 && parse_positive(argv[i + 1], &B) == 0) {
            i++;
        } else if (i + 1 < argc && strcmp(argv[i], "--hidden") == 0 && parse_positive(argv[i + 1], &H) == 0) {
            i++;
        } else if (i + 1 < argc && strcmp(argv[i], "--memory-plot") == 0) {
            plot = argv[++i];
        } else {
            fprintf(stderr, "usage: four_plateaus [--batch N] [--hidden H] [--memory-plot FILE.svg]\n");
            return 2;
        }
    }
    clt_device dev = clt_try_gpu(0);
    char name[32];
    clt_device_name(dev, name, sizeof name);

    int64_t hiddens[] = {H, H, H};
    clt_model *net = NULL;
    clt_optimizer *opt = NULL;
    clt_tensor *X = NULL, *y = NULL, *logits = NULL, *loss = NULL, *dlogits = NULL;
    int32_t *labels = malloc((size_t)B * sizeof *labels);
    int failed = labels == NULL;
    if (!failed && plot) failed = check(clt_memory_record_start(dev), "starting the memory record");
    if (!failed && plot) clt_memory_record_mark(dev, "model and batch");
    for (int64_t i = 0; labels && i < B; i++) labels[i] = (int32_t)((i * 7) % OUT);
    int64_t xs[] = {B, IN}, ys[] = {B};
    /* The model is built on the device directly (net.to(gpu()) in one step),
     * then the optimizer, whose state waits for the first step. */
    if (!failed) failed = check(clt_model_create_mlp(&net, dev, IN, 3, hiddens, OUT, 0), "building the model");
    if (!failed)
        failed = check(clt_optimizer_create_adam(&opt, net, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0), "creating Adam");
    if (!failed) failed = check(clt_randn(&X, dev, 2, xs, 1), "X = randn(B, 1024)");
    if (!failed) failed = check(clt_from_host(&y, dev, CLT_INT32, 1, ys, labels), "y = labels");
    free(labels);
    if (failed) goto out;

    const int64_t N = clt_model_num_parameter_elements(net);
    const int64_t batch = 4 * B * IN + 4 * B;
    const int64_t acts = 4 * B * 3 * H + 4 * B * OUT;
    const int64_t loss_bytes = 4;
    int64_t expect[4];
    expect[0] = 4 * N + batch;
    expect[1] = expect[0] + acts + loss_bytes;
    expect[2] = expect[0] + loss_bytes + 4 * N;
    expect[3] = expect[2] + 8 * N;

    int64_t read[4];
    read[0] = clt_memory_allocated(dev);
    clt_memory_record_mark(dev, "forward"); /* marks nothing unless recording */
    failed = check(clt_model_forward(net, X, &logits), "forward");
    clt_memory_record_mark(dev, "loss");
    if (!failed) failed = check(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y), "loss");
    clt_tensor_release(logits); /* backward needs dlogits, not the logits */
    logits = NULL;
    if (failed) goto out;
    read[1] = clt_memory_allocated(dev);
    clt_memory_record_mark(dev, "backward");
    failed = check(clt_model_backward(net, dlogits, NULL), "backward");
    clt_tensor_release(dlogits);
    dlogits = NULL;
    if (failed) goto out;
    read[2] = clt_memory_allocated(dev);
    clt_memory_record_mark(dev, "optimizer");
    if ((failed = check(clt_optimizer_step(opt), "optimizer step"))) goto out;
    read[3] = clt_memory_allocated(dev);
    double loss_value = 0;
    if ((failed = check(clt_item(loss, &loss_value), "reading the loss"))) goto out;

    printf("device %s; MLP %lld -> %lld -> %lld -> %lld -> %lld, N = %lld parameters, batch %lld, Adam\n", name,
           (long long)IN, (long long)H, (long long)H, (long long)H, (long long)OUT, (long long)N, (long long)B);
    printf("%-18s %13s   %13s   %s\n", "", "allocated", "accounting", "difference");
    const char *labels_out[4] = {"weights", "+ activations", "+ gradients", "+ optimizer state"};
    int off = 0;
    for (int i = 0; i < 4; i++) off |= report(labels_out[i], read[i], expect[i]);
    printf("accounting: 4N = %.1f MiB, batch = %.1f MiB, activations = %.1f MiB (3 ReLU outputs + dlogits), "
           "Adam = 8N = %.1f MiB\n", 4 * N / MIB, batch / MIB, acts / MIB, 8 * N / MIB);
    printf("peak allocated %.1f MiB; loss after one step %.4f\n\n", clt_memory_max_allocated(dev) / MIB,
           loss_value);
    if ((failed = check(clt_memory_report(dev, stdout), "memory report"))) goto out;
    if (off) {
        fprintf(stderr, "four_plateaus: a reading is more than 1%% off the accounting\n");
        failed = 1;
    }
out:
    if (plot) {
        clt_memory_record *rec = NULL;
        clt_status rs = clt_memory_record_stop(dev, &rec);
        if (rs == CLT_OK && !failed) rs = clt_memory_record_write_svg(rec, plot);
        if (!failed) failed = check(rs, "drawing the memory record");
        clt_memory_record_free(rec);
    }
    clt_tensor_release(X);
    clt_tensor_release(y);
    clt_tensor_release(logits);
    clt_tensor_release(loss);
    clt_tensor_release(dlogits);
    clt_optimizer_free(opt);
    clt_model_free(net);
    return failed ? 1 : 0;
}
