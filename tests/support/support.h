/* Shared helpers for the Check suites. */
#ifndef CLT_TEST_SUPPORT_H
#define CLT_TEST_SUPPORT_H

#include <check.h>
#include <stdint.h>
#include <cltensor.h>

#include "core/error.h" /* OpenCL's types, at the library's target version */

/* Check's ck_assert marks every passing check (_mark_point: a write to the
 * file its parent process reads), which per-element loops make millions of
 * times; CLT_TEST_REQUIRE reports only a failure (ck_abort_msg). */
#define CLT_TEST_REQUIRE(cond, ...)                                                                                    \
    do {                                                                                                               \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                                        \
    } while (0)

/* The CPU device of the tests: cpu:0, or where no CPU device exists
 * (CLT_CPU_AS_GPU=only, as on a GPU machine without pocl) the last device
 * listed, so that a test pairing it with gpu:0 still uses two devices when
 * there are two. clt_test_cpu_name() is its name. */
clt_device clt_test_cpu(void);
const char *clt_test_cpu_name(void);

/* The device most tests run on: clt_try_gpu(0), a GPU when there is one,
 * else the CPU. */
clt_device clt_test_device(void);
/* setenv(name, value), or unsetenv(name) for a NULL value, once every
 * listed device is idle: pocl's worker threads read the environment as
 * they run kernels, and glibc's setenv may move it under a reader. */
void clt_test_setenv(const char *name, const char *value);

/* 1 and *out set to the first listed device other than clt_test_device(),
 * when there is one; else 0. */
int clt_test_other_device(clt_device *out);

/* Fails the test with the status name and clt_last_error() unless expr is CLT_OK. */
#define ck_assert_ok(expr)                                                                          \
    do {                                                                                            \
        clt_status s_ = (expr);                                                                     \
        ck_assert_msg(s_ == CLT_OK, "%s returned %s: %s", #expr, clt_status_string(s_),            \
                      clt_last_error());                                                            \
    } while (0)

/* Fails unless expr returns `want`, and the error message is not empty. */
#define ck_assert_status(expr, want)                                                                \
    do {                                                                                            \
        clt_status s_ = (expr);                                                                     \
        ck_assert_msg(s_ == (want), "%s returned %s, expected %s (%s)", #expr, clt_status_string(s_), \
                      clt_status_string(want), clt_last_error());                                   \
        ck_assert_msg(clt_last_error()[0] != '\0', "%s left no error message", #expr);              \
    } while (0)

/* Deterministic host data in [lo, hi). */
void clt_test_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi);

/* Largest |a-b| / max(1, |b|) over n elements. */
double clt_test_max_rel_err(const float *a, const float *b, int64_t n);

/* n floats uniform in [-1, 1), malloc'd (at least one element). */
float *clt_test_random_floats(int64_t n, uint64_t seed);

/* c = alpha op(a) op(b) + beta c for row-major matrices, accumulated in
 * double; op transposes when ta / tb is set; beta 0 ignores c. */
void clt_test_ref_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, const float *b,
                       float beta, float *c);

/* A (rows, cols) float32 tensor on dev holding x. */
clt_tensor *clt_test_upload(clt_device dev, const float *x, int64_t rows, int64_t cols);

/* A (rows, cols) view at row `pad` of a (rows + 2 pad, cols) tensor on dev
 * whose other rows are `fill`: the view starts at a nonzero offset. *base is
 * the whole tensor (release both). */
clt_tensor *clt_test_upload_view(clt_device dev, const float *x, int64_t rows, int64_t cols, int64_t pad, float fill,
                                 clt_tensor **base);

/* Reads a float32 tensor into a new malloc'd array (test fails on error). */
float *clt_test_read(const clt_tensor *t);

/* Asserts that no tensor is alive on any device (allocated == 0). */
void clt_test_assert_no_live_tensors(void);

/* A Fashion-MNIST-shaped dataset (28x28, 10 classes) that a small model
 * learns in a few steps: each class lights its own band of pixels over
 * noise. Free with clt_dataset_free. */
clt_dataset clt_test_make_dataset(int64_t n, uint64_t seed);

/* Writes clt_test_make_dataset(n, seed) as DIR/PREFIX-images-idx3-ubyte and
 * DIR/PREFIX-labels-idx1-ubyte (PREFIX "train" or "t10k"); the images file
 * gzip-compressed with a .gz suffix when gzip is 1. */
void clt_test_write_idx_split(const char *dir, const char *prefix, int64_t n, uint64_t seed, int gzip);

/* Runs a shell command with stderr joined to stdout, keeps up to len-1
 * bytes of its output in out, and returns its exit status (-1 if killed). */
int clt_test_shell(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* This test binary's own path (/proc/self/exe), to run it again. */
void clt_test_self_path(char *path, size_t len);
/* Runs this binary again as a fresh process: arguments {self, arg} (arg
 * NULL: none), environment env (NULL: this process's), standard output and
 * error into the file log (NULL: this process's), ended by SIGALRM after
 * limit_s seconds (0: no limit). Its exit status, or 128 + the signal that
 * ended it. */
int clt_test_run_self(const char *arg, char *const *env, const char *log, unsigned limit_s);
/* A new environment for clt_test_run_self: this process's, less Check's
 * CK_RUN_ variables and every variable that set (NULL-terminated
 * "NAME=value" strings) names, then set's. Free the array (not its
 * strings) with free(). */
char **clt_test_environ_with(const char *const *set);

/* The built `clt` tool ($CLT_BINARY_DIR/clt, set by ctest). */
const char *clt_test_clt_path(void);

/* Makes a fresh directory /tmp/clt-test-<tag>-XXXXXX into dir (len >= 64). */
void clt_test_make_temp_dir(char *dir, size_t len, const char *tag);
/* Removes a directory made by clt_test_make_temp_dir and the files in it. */
void clt_test_remove_dir(const char *dir);
/* The whole of a file, NUL-terminated, in malloc'd memory; fails the test
 * when it cannot be read. */
char *clt_test_read_file(const char *path);

/* The same with its size in *n (a binary file may hold NUL bytes). */
uint8_t *clt_test_read_bytes(const char *path, size_t *n);
/* Writes n bytes to path as a new file (whatever was there is unlinked
 * first, and a link is not followed); fails the test when it cannot. */
void clt_test_write_bytes(const char *path, const void *data, size_t n);

/* A test case whose tests each end by waiting for the work they queued:
 * pocl may still be compiling or running kernels when a forked test process
 * exits, and its worker threads must not outlive LLVM's exit-time teardown. */
TCase *clt_test_tcase(const char *name);

/* Caps the data segment at the current use plus 512 MiB, so that a reader
 * allocating a size a hostile file merely claims fails visibly; undone by
 * clt_test_unlimit_memory. Nothing under AddressSanitizer, whose allocator
 * reserves beyond any such cap and reports huge allocations itself. */
void clt_test_limit_memory(void);
void clt_test_unlimit_memory(void);

/* Holds dev's queue: every later command on it waits until
 * clt_test_open_gate (launch blocking is turned off, since a blocking launch
 * would wait behind the gate forever). For tests of queued work. */
cl_event clt_test_close_gate(clt_device dev);
void clt_test_open_gate(cl_event gate);

/* Counts the commands the trace calls kernels that are enqueued from now on
 * (on every device: kernel launches, CLBlast calls and buffer fills; not
 * transfers), through the recorder hook of src/device/sync.c, which a
 * running trace also uses: not with a trace on. clt_test_kernels_stop
 * removes the hook and returns the count. */
void clt_test_kernels_start(void);
uint64_t clt_test_kernels_stop(void);

/* 1 when the device is a simulator that runs kernels 10 to 100 times slower
 * than pocl (scripts/oclgrind sets CLT_TEST_SIMULATOR=1). Tests whose
 * largest shapes exist only to reach a code path take smaller shapes that
 * reach the same path there; the pocl runs keep the full sizes. */
int clt_test_simulated(void);

/* The exit status of a test binary that skipped (tests/CMakeLists.txt sets
 * SKIP_RETURN_CODE to it, so ctest reports "Not Run" rather than a pass). */
#define CLT_TEST_SKIPPED 77

/* Marks the running test as one that cannot run here: prints "SKIP <test>:
 * <why>" and counts it, so that the binary exits CLT_TEST_SKIPPED unless a
 * test failed. `need` names what is missing ("torch", "mpi", "examples",
 * "two-gpus", ...); when it is a word of $CLT_TEST_REQUIRE (e.g.
 * CLT_TEST_REQUIRE="torch" in scripts/test --ci) the skip fails the test
 * instead. The test must return right after: use clt_test_skip_if. */
void clt_test_skip(const char *test, const char *need, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define clt_test_skip_if(cond, need, ...)                                                                       \
    do {                                                                                                        \
        if (cond) {                                                                                             \
            clt_test_skip(__func__, need, __VA_ARGS__);                                                          \
            return;                                                                                             \
        }                                                                                                       \
    } while (0)
/* For main(): a whole binary that cannot run here. Prints why and returns
 * CLT_TEST_SKIPPED, or EXIT_FAILURE when $CLT_TEST_REQUIRE names `need`. */
int clt_test_skip_all(const char *need, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A NumPy .npy file in buf: format version (1-3), dtype descr ("<f4"),
 * Fortran order or not, the shape as Python writes it ("(3, 2)"), then the
 * n data bytes. Returns its length: at most 128 + n bytes. */
size_t clt_test_npy(uint8_t *buf, int version, const char *descr, int fortran, const char *shape, const void *data,
                    size_t n);
/* A zip (an .npz) of `count` members (at most 8), names[i] holding lens[i]
 * bytes data[i], each stored or deflated, in out. Returns its length: at
 * most 200 + the sum over members of 2 * name length + 1.01 * length + 64. */
size_t clt_test_zip(uint8_t *out, int count, const char *const *names, const uint8_t *const *data, const size_t *lens,
                    int deflated);

/* Runs a suite with CK_NORMAL output and returns the process exit status:
 * EXIT_FAILURE when a test failed, else CLT_TEST_SKIPPED when one skipped,
 * else EXIT_SUCCESS. */
int clt_test_run(Suite *s);

#endif
