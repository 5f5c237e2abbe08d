/* The trainer on a regression: MSE loss, the errors evaluation reports, and
 * the options every task has (momentum, weight decay, the learning-rate
 * schedule, early stopping), each against a plain C reference of the same
 * steps: a linear model y = x W^T + b trained full-batch, in file order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "trainer/schedule.h"

#define N 64
#define D 3

static float xs[N * D], ys[N];

/* y = 2 x0 - x1 + 0.5 x2 + 1, and a little noise, from a fixed seed. */
static void make_data(clt_dataset *ds, int flip)
{
    clt_test_fill_uniform(xs, N * D, 3, -1.0f, 1.0f);
    float noise[N];
    clt_test_fill_uniform(noise, N, 4, -0.05f, 0.05f);
    for (int i = 0; i < N; i++) {
        float y = 2 * xs[i * D] - xs[i * D + 1] + 0.5f * xs[i * D + 2] + 1 + noise[i];
        ys[i] = flip ? -y : y;
    }
    ck_assert_ok(clt_dataset_from_host(ds, N, D, xs, NULL, 0, NULL, ys, 1));
}

static clt_model *linear(uint64_t seed)
{
    clt_model *m = NULL;
    ck_assert_ok(clt_model_create_mlp(&m, clt_test_cpu(), D, 0, NULL, 1, seed));
    return m;
}

/* The model's parameters: w (D) then b, as "0.weight" and "0.bias". */
static void params_of(const clt_model *m, double *w, double *b)
{
    float host[D + 1];
    clt_tensor *p = NULL;
    ck_assert_ok(clt_model_named_parameter(m, clt_model_find_parameter(m, "0.weight"), NULL, &p, NULL));
    ck_assert_ok(clt_to_host(p, host, D * sizeof(float)));
    ck_assert_ok(clt_model_named_parameter(m, clt_model_find_parameter(m, "0.bias"), NULL, &p, NULL));
    ck_assert_ok(clt_to_host(p, host + D, sizeof(float)));
    for (int j = 0; j < D; j++) w[j] = host[j];
    *b = host[D];
}

/* PyTorch's SGD on the mean squared error of the whole set, `steps` times,
 * the learning rate of step t from the schedule of o. */
static void reference(double *w, double *b, const clt_trainer_options *o, int steps, int64_t total)
{
    double buf[D + 1] = {0};
    for (int t = 0; t < steps; t++) {
        double g[D + 1] = {0};
        for (int i = 0; i < N; i++) {
            double pred = *b;
            for (int j = 0; j < D; j++) pred += w[j] * xs[i * D + j];
            double r = 2 * (pred - ys[i]) / N;
            for (int j = 0; j < D; j++) g[j] += r * xs[i * D + j];
            g[D] += r;
        }
        double lr = clt__schedule_active(o) ? clt__schedule_lr(o, t, total) : o->lr;
        for (int j = 0; j <= D; j++) {
            double *p = j < D ? &w[j] : b;
            g[j] += o->weight_decay * *p;
            buf[j] = t == 0 ? g[j] : o->momentum * buf[j] + g[j];
            *p -= lr * (o->momentum > 0 ? buf[j] : g[j]);
        }
    }
}

static clt_trainer_options full_batch(int epochs)
{
    clt_trainer_options o = clt_trainer_default_options();
    o.max_epochs = epochs;
    o.batch_size = N;
    o.shuffle = 0;
    o.lr = 0.1f;
    return o;
}

/* Trains a fresh linear model with o and compares it with the reference. */
static void check_against_reference(const clt_trainer_options *o, const char *what)
{
    clt_dataset ds;
    make_data(&ds, 0);
    clt_model *m = linear(5);
    double w[D], b, rw[D], rb;
    params_of(m, rw, &rb);
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &ds, &ds, o, &r));
    params_of(m, w, &b);
    reference(rw, &rb, o, (int)r.steps, r.steps);
    for (int j = 0; j < D; j++)
        ck_assert_msg(fabs(w[j] - rw[j]) < 1e-4, "%s: w[%d] %g, the reference's %g", what, j, w[j], rw[j]);
    ck_assert_msg(fabs(b - rb) < 1e-4, "%s: b %g, the reference's %g", what, b, rb);
    clt_model_free(m);
    clt_dataset_free(&ds);
}

START_TEST(test_regression_matches_reference_and_loss_drops)
{
    clt_dataset ds;
    make_data(&ds, 0);
    clt_model *m = linear(5);
    clt_evaluation before, after;
    ck_assert_ok(clt_model_to(m, clt_test_cpu()));
    ck_assert_ok(clt_trainer_evaluate_metrics(m, &ds, 16, 0, NULL, &before));
    clt_trainer_options o = full_batch(30);
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &ds, &ds, &o, &r));
    ck_assert_ok(clt_trainer_evaluate_metrics(m, &ds, 16, 0, NULL, &after));
    ck_assert_msg(after.loss < before.loss / 10, "loss %g -> %g", before.loss, after.loss);
    ck_assert_msg(isnan(after.accuracy) && isnan(r.val_accuracy), "a regression has no accuracy");
    ck_assert_msg(fabs(r.val_mse - after.mse) < 1e-6 && fabs(r.val_loss - after.loss) < 1e-6, "result %g %g", r.val_mse,
                  after.mse);
    /* The errors, from the host. */
    double w[D], b, se = 0, ae = 0;
    params_of(m, w, &b);
    for (int i = 0; i < N; i++) {
        double pred = b;
        for (int j = 0; j < D; j++) pred += w[j] * xs[i * D + j];
        se += (pred - ys[i]) * (pred - ys[i]);
        ae += fabs(pred - ys[i]);
    }
    ck_assert_msg(fabs(after.mse - se / N) < 1e-5 && fabs(after.mae - ae / N) < 1e-5, "mse %g (%g) mae %g (%g)",
                  after.mse, se / N, after.mae, ae / N);
    ck_assert_msg(fabs(after.loss - after.mse) < 1e-6, "the loss is the MSE");
    ck_assert_int_eq(after.examples, N);
    /* A standardizer's y_std scales the errors into the target's units. */
    float mean = 0, sd = 3;
    float zero[D] = {0}, one[D] = {1, 1, 1};
    clt_standardizer st;
    ck_assert_ok(clt_standardizer_from_host(&st, D, zero, one, 1, &mean, &sd));
    clt_evaluation scaled;
    ck_assert_ok(clt_trainer_evaluate_metrics(m, &ds, 16, 0, &st, &scaled));
    ck_assert_msg(fabs(scaled.mae - 3 * after.mae) < 1e-5 && fabs(scaled.mse - 9 * after.mse) < 1e-4,
                  "scaled mae %g mse %g", scaled.mae, scaled.mse);
    ck_assert_msg(fabs(scaled.loss - after.loss) < 1e-6, "the loss stays in the model's units");
    clt_standardizer_free(&st);
    clt_model_free(m);
    clt_dataset_free(&ds);
    clt_trainer_options plain = full_batch(5);
    check_against_reference(&plain, "plain SGD");
}
END_TEST

START_TEST(test_momentum_and_weight_decay_match_reference)
{
    clt_trainer_options o = full_batch(6);
    o.momentum = 0.9f;
    check_against_reference(&o, "momentum 0.9");
    o.momentum = 0;
    o.weight_decay = 0.5f;
    check_against_reference(&o, "weight decay 0.5");
    o.momentum = 0.5f;
    check_against_reference(&o, "both");
    o.optimizer = CLT_OPTIMIZER_ADAM;
    clt_dataset ds;
    make_data(&ds, 0);
    clt_model *m = linear(5);
    ck_assert_status(clt_trainer_fit(m, &ds, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "momentum"), "%s", clt_last_error());
    o.momentum = 1;
    o.optimizer = CLT_OPTIMIZER_SGD;
    ck_assert_status(clt_trainer_fit(m, &ds, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    o.momentum = 0;
    o.weight_decay = -1;
    ck_assert_status(clt_trainer_fit(m, &ds, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    clt_model_free(m);
    clt_dataset_free(&ds);
}
END_TEST

START_TEST(test_lr_schedules)
{
    clt_trainer_options o = full_batch(1);
    o.lr = 1.0f;
    ck_assert(!clt__schedule_active(&o));
    o.warmup_steps = 4;
    ck_assert(clt__schedule_active(&o));
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 0, 10), 0.25, 1e-12);
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 3, 10), 1.0, 1e-12);
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 9, 10), 1.0, 1e-12);
    o.lr_schedule = CLT_LR_STEP;
    o.lr_step_size = 2;
    o.lr_gamma = 0.5;
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 4, 10), 1.0, 1e-12);
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 5, 10), 1.0, 1e-12);
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 6, 10), 0.5, 1e-12);
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 9, 10), 0.25, 1e-12);
    o.lr_gamma = 0; /* 0.1 */
    ck_assert_double_eq_tol(clt__schedule_lr(&o, 6, 10), 0.1, 1e-12);
    /* PyTorch's CosineAnnealingLR(T_max = 6) after 4 warm-up steps. */
    o.lr_schedule = CLT_LR_COSINE;
    for (int u = 0; u < 6; u++)
        ck_assert_double_eq_tol(clt__schedule_lr(&o, 4 + u, 10), 0.5 * (1 + cos(M_PI * u / 6)), 1e-12);
    /* Through the trainer: warm-up then cosine over 8 full-batch steps. */
    o = full_batch(8);
    o.lr = 0.2f;
    o.warmup_steps = 2;
    o.lr_schedule = CLT_LR_COSINE;
    check_against_reference(&o, "warm-up and cosine");
    o.lr_schedule = CLT_LR_STEP;
    o.lr_step_size = 3;
    o.lr_gamma = 0.5;
    check_against_reference(&o, "warm-up and step");
    o.lr_step_size = 0;
    clt_dataset ds;
    make_data(&ds, 0);
    clt_model *m = linear(5);
    ck_assert_status(clt_trainer_fit(m, &ds, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "lr_step_size"), "%s", clt_last_error());
    clt_model_free(m);
    clt_dataset_free(&ds);
}
END_TEST

/* A validation set whose targets are the training set's negated: the better
 * the model fits, the worse its validation loss, so the best epoch is the
 * first and patience 2 stops after the third. */
START_TEST(test_early_stopping_keeps_the_best)
{
    clt_dataset train, val;
    make_data(&val, 1);
    make_data(&train, 0);
    char dir[64], path[128], metrics[128];
    clt_test_make_temp_dir(dir, sizeof dir, "early");
    snprintf(path, sizeof path, "%s/best.st", dir);
    snprintf(metrics, sizeof metrics, "%s/m.csv", dir);
    clt_model *m = linear(5), *one = linear(5);
    clt_trainer_options o = full_batch(20);
    o.early_stopping = 2;
    o.save_path = path;
    o.metrics_path = metrics;
    clt_trainer_result r;
    ck_assert_ok(clt_trainer_fit(m, &train, &val, &o, &r));
    ck_assert_int_eq(r.early_stopped, 1);
    ck_assert_int_eq(r.epochs, 3);
    ck_assert_int_eq(r.best_epoch, 1);
    /* The kept epoch's figures are the returned model's; the last epoch's are worse. */
    clt_evaluation ev;
    ck_assert_ok(clt_trainer_evaluate_metrics(m, &val, val.n, 0, NULL, &ev));
    ck_assert_msg(fabs(r.best_val_loss - ev.loss) <= 1e-6 * ev.loss && fabs(r.best_val_mse - ev.mse) <= 1e-6 * ev.mse &&
                      fabs(r.best_val_mae - ev.mae) <= 1e-6 * ev.mae && isnan(r.best_val_accuracy),
                  "kept: loss %g, mse %g, mae %g; the model's %g, %g, %g", r.best_val_loss, r.best_val_mse,
                  r.best_val_mae, ev.loss, ev.mse, ev.mae);
    ck_assert_msg(r.val_loss > r.best_val_loss, "last %g, kept %g", r.val_loss, r.best_val_loss);
    clt_trainer_options first = full_batch(1);
    ck_assert_ok(clt_trainer_fit(one, &train, NULL, &first, NULL));
    double w[D], b, w1[D], b1;
    params_of(m, w, &b);
    params_of(one, w1, &b1);
    for (int j = 0; j < D; j++) ck_assert_msg(w[j] == w1[j], "w[%d] %g is not epoch 1's %g", j, w[j], w1[j]);
    ck_assert(b == b1);
    /* The checkpoint holds epoch 1's model too. */
    clt_model *loaded = linear(9);
    clt_checkpoint_info info;
    ck_assert_ok(clt_checkpoint_load(path, loaded, NULL, &info));
    ck_assert_int_eq(info.epoch, 1);
    params_of(loaded, w1, &b1);
    for (int j = 0; j < D; j++) ck_assert(w[j] == w1[j]);
    /* The metrics have a regression's columns, one row per epoch run. */
    FILE *f = fopen(metrics, "r");
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "epoch,steps,train_loss,val_loss,val_mse,val_mae,seconds,images_per_second\n");
    int rows = 0;
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    ck_assert_int_eq(rows, 3);
    /* Without validation data it is refused. */
    ck_assert_status(clt_trainer_fit(m, &train, NULL, &o, NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(clt_last_error(), "early_stopping"), "%s", clt_last_error());
    clt_model_free(loaded);
    clt_model_free(m);
    clt_model_free(one);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer_regress");
    TCase *tc = clt_test_tcase("trainer_regress");
    tcase_add_test(tc, test_regression_matches_reference_and_loss_drops);
    tcase_add_test(tc, test_momentum_and_weight_decay_match_reference);
    tcase_add_test(tc, test_lr_schedules);
    tcase_add_test(tc, test_early_stopping_keeps_the_best);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
