/* `mpirun -np 2 clt train --distributed` against `clt train` in one process
 * over the same global batches: the saved parameters agree within 1e-5
 * (SGD with an uneven split, and Adam). Each rank trains on gpu:<rank> when
 * two GPUs are present (POCL_DEVICES="pthread pthread" CLT_CPU_AS_GPU=1),
 * else both on the CPU. Skips, saying why, when mpirun is missing or clt was
 * built without MPI; then checks that --distributed says so. A distributed
 * run stopped part way and resumed ends as an uninterrupted one. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static char dir[] = "/tmp/clt-mpi-XXXXXX";
static char out[1 << 16];

/* Runs a shell command; its output lands in `out`. */
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static void setup(void)
{
    strcpy(dir, "/tmp/clt-mpi-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    clt_test_write_idx_split(dir, "train", 100, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 30, 2, 0);
    /* mpirun refuses root unless told; CI containers run as root. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The parameters saved at path, widened to float32 when half. */
static float *load_params(const char *path, int half, int64_t *n)
{
    clt_model *m;
    clt_tensor *wide;
    ck_assert_ok(clt_model_create_resmlp(&m, clt_test_cpu(), 784, 32, 1, 10, 0));
    if (half) ck_assert_ok(clt_model_to_dtype(m, CLT_FLOAT16));
    ck_assert_ok(clt_checkpoint_load(path, m, NULL, NULL));
    *n = clt_model_num_parameter_elements(m);
    ck_assert_ok(clt_to_dtype(&wide, clt_model_parameters(m), CLT_FLOAT32));
    float *p = clt_test_read(wide);
    clt_tensor_release(wide);
    clt_model_free(m);
    return p;
}

/* NULL when mpirun and an MPI-enabled clt are here; else why not, after
 * checking that a clt without MPI refuses --distributed. */
static const char *mpi_missing(void)
{
    ck_assert_int_eq(run("%s train --help", clt_test_clt_path()), 0);
    if (strstr(out, "built without MPI")) {
        ck_assert_int_eq(run("%s train --distributed --data %s", clt_test_clt_path(), dir), 1);
        ck_assert_msg(strstr(out, "--distributed needs MPI") != NULL, "%s", out);
        return "clt was built without MPI (install libopenmpi-dev and reconfigure)";
    }
    if (run("command -v mpirun") != 0) return "mpirun is not installed (apt-get install openmpi-bin)";
    return NULL;
}

static void compare(const char *args)
{
    int rc = run("%s train --data %s --hiddens 32 --blocks 1 %s --save %s/one.st", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "single process failed (%d): %s", rc, out);
    rc = run("mpirun -np 2 --oversubscribe --mca btl self,vader %s train --distributed --data %s --hiddens 32 "
             "--blocks 1 %s --save %s/two.st", clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "mpirun failed (%d): %s", rc, out);
    /* Rank 0 alone logs: one epoch line, one summary, naming two ranks. */
    ck_assert_msg(strstr(out, "x 2 ranks") != NULL, "no rank count in: %s", out);
    const char *first = strstr(out, "trained ");
    ck_assert_msg(first && !strstr(first + 1, "trained "), "summary not printed once: %s", out);
    char one[600], two[600];
    snprintf(one, sizeof one, "%s/one.st", dir);
    snprintf(two, sizeof two, "%s/two.st", dir);
    int64_t n1, n2;
    int half = strstr(args, "--fp16") != NULL;
    float *a = load_params(one, half, &n1), *b = load_params(two, half, &n2);
    ck_assert_int_eq(n1, n2);
    /* float16: each rank's gradient is rounded to float16 before the sum
     * (docs/multi-device.md), so the float16 parameters may differ by a
     * step of 2^-10 relative and the master weights' small drift (see
     * test_data_parallel's tolerances). */
    for (int64_t i = 0; half && i < n1; i++)
        ck_assert_msg(fabs((double)a[i] - b[i]) <= 1e-4 + fabs(a[i]) / 1024, "parameter %lld: %g and %g after %s",
                      (long long)i, a[i], b[i], args);
    double err = clt_test_max_rel_err(b, a, n1);
    ck_assert_msg(half || err < 1e-5, "parameters differ by %g after %s", err, args);
    clt_model *init;
    ck_assert_ok(clt_model_create_resmlp(&init, clt_test_cpu(), 784, 32, 1, 10, 0));
    float *c = clt_test_read(clt_model_parameters(init));
    ck_assert_msg(clt_test_max_rel_err(a, c, n1) > 1e-3, "training changed nothing");
    clt_model_free(init);
    free(a);
    free(b);
    free(c);
}

/* 100 examples in batches of 24: shards of 12 and a last batch of 4, and
 * with --no-shuffle, batches in file order. */
START_TEST(test_mpi_sgd_uneven)
{
    const char *missing = mpi_missing();
    clt_test_skip_if(missing, "mpi", "%s", missing);
    compare("--epochs 2 --batch-size 24 --lr 0.1 --val-limit 10");
    compare("--epochs 1 --batch-size 33 --no-shuffle --val-limit 10");
}
END_TEST

START_TEST(test_mpi_adam)
{
    const char *missing = mpi_missing();
    clt_test_skip_if(missing, "mpi", "%s", missing);
    compare("--epochs 1 --batch-size 32 --optimizer adam --lr 0.001 --seed 4 --val-limit 10");
}
END_TEST

/* float16 over two ranks: the gradients summed in float32 through the
 * collective; uneven shards (batches of 24 and a last one of 4). */
START_TEST(test_mpi_fp16)
{
    const char *missing = mpi_missing();
    clt_test_skip_if(missing, "mpi", "%s", missing);
    compare("--fp16 --epochs 2 --batch-size 24 --lr 0.1 --val-limit 10");
}
END_TEST

/* A checkpoint loaded by every rank: resuming under MPI matches resuming
 * in one process. */
START_TEST(test_mpi_load)
{
    const char *missing = mpi_missing();
    clt_test_skip_if(missing, "mpi", "%s", missing);
    int rc = run("%s train --data %s --hiddens 32 --blocks 1 --steps 2 --batch-size 20 --save %s/start.st", clt_test_clt_path(),
                 dir, dir);
    ck_assert_msg(rc == 0, "%s", out);
    char args[800];
    snprintf(args, sizeof args, "--load %s/start.st --epochs 1 --batch-size 21 --seed 7 --val-limit 10", dir);
    compare(args);
}
END_TEST

/* --distributed saves every epoch and resumes: stopped by --steps part way
 * through epoch 2 and resumed under mpirun, it ends with the bytes of an
 * uninterrupted distributed run (Adam: its state is in the file too). */
START_TEST(test_mpi_resume)
{
    const char *missing = mpi_missing();
    clt_test_skip_if(missing, "mpi", "%s", missing);
    const char *mpi = "mpirun -np 2 --oversubscribe --mca btl self,vader";
    const char *args = "--distributed --hiddens 32 --blocks 1 --epochs 2 --batch-size 24 --optimizer adam --lr 0.001 "
                       "--val-limit 10";
    int rc = run("%s %s train --data %s %s --save %s/full.st", mpi, clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    rc = run("%s %s train --data %s %s --steps 7 --save %s/part.st", mpi, clt_test_clt_path(), dir, args, dir);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strstr(out, "stopped after batch 2 of 5") != NULL, "%s", out);
    rc = run("%s %s train --data %s %s --resume %s/part.st --save %s/part.st", mpi, clt_test_clt_path(), dir, args, dir,
             dir);
    ck_assert_msg(rc == 0, "resuming under mpirun failed: %s", out);
    ck_assert_msg(strstr(out, "trained 2 epoch(s), 10 steps") != NULL, "%s", out);
    ck_assert_msg(run("cmp %s/full.st %s/part.st", dir, dir) == 0,
                  "a resumed distributed run differs from an uninterrupted one");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mpi");
    TCase *tc = clt_test_tcase("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mpi_sgd_uneven);
    tcase_add_test(tc, test_mpi_adam);
    tcase_add_test(tc, test_mpi_load);
    tcase_add_test(tc, test_mpi_fp16);
    tcase_add_test(tc, test_mpi_resume);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
