/* Your own data from C (docs/own-data.md): train on a CSV, save, reload from the file alone, predict. */
#include <stdio.h>
#include <cltensor.h>

#define TRY(x) do { if ((x) != CLT_OK) { fprintf(stderr, "%s\n", clt_last_error()); return 1; } } while (0)

int main(void)
{
    FILE *f = fopen("xor.csv", "w");
    fprintf(f, "x1,x2,class\n");
    for (int i = 0; i < 400; i++) fprintf(f, "%d,%d,%s\n", i % 2, i / 2 % 2, i % 2 != i / 2 % 2 ? "one" : "zero");
    fclose(f);
    clt_data_options dopt = clt_data_default_options();
    clt_dataset all, train, val;
    clt_standardizer st;
    TRY(clt_dataset_load(&all, "xor.csv", &dopt));
    TRY(clt_dataset_split(&train, &val, &all, 0.2, 0));
    TRY(clt_standardizer_fit(&st, &train));
    TRY(clt_standardizer_apply(&st, &train));
    TRY(clt_standardizer_apply(&st, &val));
    int64_t hiddens[] = {16, 16};
    clt_model *m;
    TRY(clt_model_create_mlp(&m, clt_try_gpu(0), 2, 2, hiddens, train.num_classes, 0));
    clt_trainer_options o = clt_trainer_default_options();
    o.max_epochs = 20, o.batch_size = 32, o.optimizer = CLT_OPTIMIZER_ADAM, o.lr = 0.01f, o.standardizer = &st;
    clt_checkpoint_info info = {.num_classes = 2, .class_names = (const char **)train.class_names, .standardizer = &st};
    o.save_path = "xor.safetensors", o.save_info = info; /* the model, its class names and standardizer */
    clt_trainer_result r;
    TRY(clt_trainer_fit(m, &train, &val, &o, &r));
    clt_model_free(m);
    clt_model_description d;
    TRY(clt_model_load(&m, "xor.safetensors", clt_try_gpu(0), &d)); /* rebuilt from the file alone */
    float p[4 * 2], *x = all.x; /* the first 4 rows, raw: the model standardises them as it was trained */
    int32_t c[4];
    TRY(clt_model_predict(m, &d, x, 4, 2, p, c));
    for (int i = 0; i < 4; i++) printf("%g %g: %s %.2f\n", x[2 * i], x[2 * i + 1], d.class_names[c[i]], p[2 * i + c[i]]);
    clt_model_free(m), clt_model_description_free(&d), clt_standardizer_free(&st);
    clt_dataset_free(&all), clt_dataset_free(&train), clt_dataset_free(&val);
    return 0;
}
