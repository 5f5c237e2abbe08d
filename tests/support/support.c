#include "support.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "device/device_internal.h"
#include "device/sync.h"

clt_device clt_test_cpu(void)
{
    clt_device d = clt_cpu();
    if (clt_device_exists(d) || clt_device_list_num_entries() == 0) return d;
    ck_assert_ok(clt_device_list_entry(clt_device_list_num_entries() - 1, &d));
    return d;
}

clt_device clt_test_device(void) { return clt_try_gpu(0); }

void clt_test_setenv(const char *name, const char *value)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        ck_assert_ok(clt_synchronize(d));
    }
    if (value) ck_assert_int_eq(setenv(name, value, 1), 0);
    else ck_assert_int_eq(unsetenv(name), 0);
}

int clt_test_other_device(clt_device *out)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        ck_assert_ok(clt_device_list_entry(i, out));
        if (!clt_device_equal(*out, clt_test_device())) return 1;
    }
    return 0;
}

const char *clt_test_cpu_name(void)
{
    static _Thread_local char name[32];
    ck_assert_ok(clt_device_name(clt_test_cpu(), name, sizeof name));
    return name;
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void clt_test_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)(next(&seed) >> 40) / 16777216.0f;
}

double clt_test_max_rel_err(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= worst)) worst = d; /* NaN counts as worst */
    }
    return worst;
}

float *clt_test_read(const clt_tensor *t)
{
    size_t n = clt_tensor_nbytes(t);
    float *x = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(x);
    ck_assert_ok(clt_to_host(t, x, n));
    return x;
}

void clt_test_assert_no_live_tensors(void)
{
    for (int i = 0; i < clt_device_list_num_entries(); i++) {
        clt_device d;
        ck_assert_ok(clt_device_list_entry(i, &d));
        ck_assert_int_eq(clt_memory_allocated(d), 0);
    }
}

/* Skipped tests, counted in memory shared with the forked test processes
 * (Check runs each test in a child unless CK_FORK=no). */
static volatile int *skipped;

static void count_skips(void)
{
    if (skipped) return;
    void *p = mmap(NULL, sizeof *skipped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { /* outside a test: no ck_assert here */
        perror("mmap for the skip counter");
        abort();
    }
    skipped = p;
    *skipped = 0;
}

int clt_test_simulated(void)
{
    const char *v = getenv("CLT_TEST_SIMULATOR");
    return v && strcmp(v, "1") == 0;
}

/* 1 when `need` is a word of $CLT_TEST_REQUIRE. */
static int required(const char *need)
{
    const char *list = getenv("CLT_TEST_REQUIRE");
    size_t n = strlen(need);
    for (const char *p = list ? strstr(list, need) : NULL; p; p = strstr(p + 1, need))
        if ((p == list || p[-1] == ' ' || p[-1] == ',') && (p[n] == '\0' || p[n] == ' ' || p[n] == ','))
            return 1;
    return 0;
}

void clt_test_skip(const char *test, const char *need, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    size_t n = strlen(test);
    int len = n > 3 && strcmp(test + n - 3, "_fn") == 0 ? (int)n - 3 : (int)n; /* START_TEST's suffix */
    ck_assert_msg(!required(need), "%.*s cannot run: %s (and CLT_TEST_REQUIRE names '%s')", len, test, why, need);
    count_skips();
    (*skipped)++;
    printf("SKIP %.*s: %s\n", len, test, why);
    fflush(stdout);
}

int clt_test_skip_all(const char *need, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (required(need)) {
        printf("FAIL: cannot run: %s (and CLT_TEST_REQUIRE names '%s')\n", why, need);
        return EXIT_FAILURE;
    }
    printf("SKIP: %s\n", why);
    return CLT_TEST_SKIPPED;
}

int clt_test_run(Suite *s)
{
    count_skips();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    if (failed) return EXIT_FAILURE;
    if (*skipped) {
        printf("%d of %d test(s) skipped: exiting %d (ctest: Not Run)\n", *skipped, ran, CLT_TEST_SKIPPED);
        return CLT_TEST_SKIPPED;
    }
    return EXIT_SUCCESS;
}

clt_dataset clt_test_make_dataset(int64_t n, uint64_t seed)
{
    clt_dataset ds = {0};
    ds.n = n;
    ds.rows = ds.cols = 28;
    ds.num_classes = 10;
    ds.images = malloc((size_t)(n ? n : 1) * 784);
    ds.labels = malloc((size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(ds.images);
    ck_assert_ptr_nonnull(ds.labels);
    float noise[784];
    for (int64_t i = 0; i < n; i++) {
        int label = (int)((i * 7 + seed) % 10);
        ds.labels[i] = (uint8_t)label;
        clt_test_fill_uniform(noise, 784, seed * 1000003u + (uint64_t)i, 0, 60);
        for (int p = 0; p < 784; p++) ds.images[i * 784 + p] = (uint8_t)noise[p];
        for (int p = label * 70; p < label * 70 + 70; p++) ds.images[i * 784 + p] = 230;
    }
    return ds;
}

void clt_test_write_idx_split(const char *dir, const char *prefix, int64_t n, uint64_t seed, int gzip)
{
    clt_dataset ds = clt_test_make_dataset(n, seed);
    char path[1024];
    int64_t idims[] = {n, 28, 28}, ldims[] = {n};
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gzip ? ".gz" : "");
    ck_assert_ok(clt_idx_write(path, 3, idims, ds.images, gzip));
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    ck_assert_ok(clt_idx_write(path, 1, ldims, ds.labels, 0));
    clt_dataset_free(&ds);
}

int clt_test_shell(char *out, size_t len, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(n > 0 && (size_t)n + 6 < sizeof cmd, "command too long");
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, len - 1, p);
    out[got] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) continue;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *clt_test_clt_path(void)
{
    static char path[1024];
    const char *b = getenv("CLT_BINARY_DIR");
    snprintf(path, sizeof path, "%s/clt", b ? b : ".");
    return path;
}

void clt_test_make_temp_dir(char *dir, size_t len, const char *tag)
{
    snprintf(dir, len, "/tmp/clt-test-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

uint8_t *clt_test_read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    uint8_t *buf = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    *n = (size_t)len;
    return buf;
}

void clt_test_write_bytes(const char *path, const void *data, size_t n)
{
    /* A new file, not a truncated one: ext4 flushes a file truncated and
     * rewritten when it is closed, which made tests wait on the disk. */
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s", path);
    ck_assert_msg(n == 0 || write(fd, data, n) == (ssize_t)n, "cannot write %s", path);
    ck_assert_msg(close(fd) == 0, "cannot close %s", path);
}

char *clt_test_read_file(const char *path)
{
    size_t n;
    return (char *)clt_test_read_bytes(path, &n);
}

void clt_test_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void finish_queued_work(void)
{
    clt_sync_set_debug(CLT_SYNC_DEBUG_OFF);
    clt_synchronize_all();
}

TCase *clt_test_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, NULL, finish_queued_work);
    return tc;
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#if !defined(UNDER_ASAN)
static struct rlimit saved_data;

void clt_test_limit_memory(void)
{
    FILE *st = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(st);
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, st))
        if (sscanf(line, "VmData: %ld kB", &kb) == 1) break;
    fclose(st);
    ck_assert_int_gt(kb, 0);
    ck_assert_int_eq(getrlimit(RLIMIT_DATA, &saved_data), 0);
    struct rlimit lim = saved_data;
    lim.rlim_cur = (rlim_t)kb * 1024 + ((rlim_t)512 << 20);
    if (saved_data.rlim_max != RLIM_INFINITY && lim.rlim_cur > saved_data.rlim_max) lim.rlim_cur = saved_data.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &lim), 0);
}

void clt_test_unlimit_memory(void) { ck_assert_int_eq(setrlimit(RLIMIT_DATA, &saved_data), 0); }
#else
void clt_test_limit_memory(void) {}
void clt_test_unlimit_memory(void) {}
#endif

float *clt_test_random_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    clt_test_fill_uniform(x, n, seed, -1, 1);
    return x;
}

void clt_test_ref_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, const float *b,
                       float beta, float *c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++) {
                double av = ta ? a[p * m + i] : a[i * k + p];
                double bv = tb ? b[j * k + p] : b[p * n + j];
                s += av * bv;
            }
            c[i * n + j] = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * c[i * n + j]));
        }
}

clt_tensor *clt_test_upload(clt_device dev, const float *x, int64_t rows, int64_t cols)
{
    clt_tensor *t;
    int64_t shape[] = {rows, cols};
    ck_assert_ok(clt_from_host(&t, dev, CLT_FLOAT32, 2, shape, x));
    return t;
}

clt_tensor *clt_test_upload_view(clt_device dev, const float *x, int64_t rows, int64_t cols, int64_t pad, float fill,
                                 clt_tensor **base)
{
    int64_t total = (rows + 2 * pad) * cols;
    float *buf = malloc((size_t)(total ? total : 1) * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    for (int64_t i = 0; i < total; i++) buf[i] = fill;
    if (rows > 0 && cols > 0) memcpy(buf + pad * cols, x, (size_t)(rows * cols) * sizeof *x);
    *base = clt_test_upload(dev, buf, rows + 2 * pad, cols);
    free(buf);
    clt_tensor *v;
    ck_assert_ok(clt_narrow(&v, *base, pad, rows));
    return v;
}

cl_event clt_test_close_gate(clt_device dev)
{
    clt_launch_set_blocking(0);
    int slot;
    ck_assert_ok(clt__resolve(dev, &slot));
    cl_context ctx;
    cl_command_queue q;
    ck_assert_ok(clt__slot_context(slot, &ctx));
    ck_assert_ok(clt__slot_queue(slot, &q));
    cl_int err;
    cl_event gate = clCreateUserEvent(ctx, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueBarrierWithWaitList(q, 1, &gate, NULL), CL_SUCCESS);
    return gate;
}

void clt_test_open_gate(cl_event gate)
{
    ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    clReleaseEvent(gate);
}

void clt_test_self_path(char *path, size_t len)
{
    ck_assert_uint_gt(len, 1);
    ssize_t n = readlink("/proc/self/exe", path, len - 1);
    ck_assert_int_gt(n, 0);
    path[n] = '\0';
}

/* 1 when the "NAME=value" entry names a variable that one of set's names. */
static int named_in(const char *entry, const char *const *set)
{
    for (; *set; set++) {
        size_t len = strcspn(*set, "=");
        if (strncmp(entry, *set, len) == 0 && entry[len] == '=') return 1;
    }
    return 0;
}

char **clt_test_environ_with(const char *const *set)
{
    extern char **environ;
    size_t n = 0, extra = 0, m = 0;
    while (environ[n]) n++;
    while (set[extra]) extra++;
    char **env = calloc(n + extra + 1, sizeof *env);
    ck_assert_ptr_nonnull(env);
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "CK_RUN_", 7) != 0 && !named_in(environ[i], set)) env[m++] = environ[i];
    for (size_t i = 0; i < extra; i++) env[m++] = (char *)set[i];
    return env;
}

int clt_test_run_self(const char *arg, char *const *env, const char *log, unsigned limit_s)
{
    extern char **environ;
    char self[4096];
    clt_test_self_path(self, sizeof self);
    char *argv[] = {self, (char *)arg, NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 1) != 1 || dup2(fd, 2) != 2) _exit(127);
        }
        if (limit_s) alarm(limit_s);
        execve(self, argv, env ? env : environ);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

size_t clt_test_npy(uint8_t *buf, int version, const char *descr, int fortran, const char *shape, const void *data,
                    size_t n)
{
    char h[256];
    int hl = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
                      fortran ? "True" : "False", shape);
    size_t pre = version == 1 ? 10 : 12, total = pre + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)version;
    buf[7] = 0;
    size_t hlen = (size_t)hl + pad + 1;
    if (version == 1) {
        buf[8] = (uint8_t)hlen;
        buf[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(buf + pre, h, (size_t)hl);
    memset(buf + pre + hl, ' ', pad);
    buf[pre + hl + pad] = '\n';
    memcpy(buf + pre + hlen, data, n);
    return pre + hlen + n;
}

size_t clt_test_zip(uint8_t *out, int count, const char *const *names, const uint8_t *const *data, const size_t *lens,
                    int deflated)
{
    size_t at = 0, offs[8], clens[8];
    uint8_t *comp[8];
    uint32_t crcs[8];
    ck_assert_int_le(count, 8);
    for (int i = 0; i < count; i++) {
        crcs[i] = (uint32_t)crc32(0, data[i], (uInt)lens[i]);
        size_t cap = compressBound((uLong)lens[i]) + 64;
        comp[i] = malloc(cap);
        ck_assert_ptr_nonnull(comp[i]);
        if (deflated) {
            z_stream z;
            memset(&z, 0, sizeof z);
            deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
            z.next_in = (Bytef *)data[i];
            z.avail_in = (uInt)lens[i];
            z.next_out = comp[i];
            z.avail_out = (uInt)cap;
            ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
            clens[i] = cap - z.avail_out;
            deflateEnd(&z);
        } else {
            memcpy(comp[i], data[i], lens[i]);
            clens[i] = lens[i];
        }
    }
#define LE16(v) out[at++] = (uint8_t)(v), out[at++] = (uint8_t)((v) >> 8)
#define LE32(v) LE16((v) & 0xffff), LE16((uint32_t)(v) >> 16)
    for (int i = 0; i < count; i++) {
        offs[i] = at;
        LE32(0x04034b50u); LE16(20); LE16(0); LE16(deflated ? 8 : 0); LE16(0); LE16(0);
        LE32(crcs[i]); LE32(clens[i]); LE32(lens[i]); LE16(strlen(names[i])); LE16(0);
        memcpy(out + at, names[i], strlen(names[i]));
        at += strlen(names[i]);
        memcpy(out + at, comp[i], clens[i]);
        at += clens[i];
        free(comp[i]);
    }
    size_t cd = at;
    for (int i = 0; i < count; i++) {
        LE32(0x02014b50u); LE16(20); LE16(20); LE16(0); LE16(deflated ? 8 : 0); LE16(0); LE16(0);
        LE32(crcs[i]); LE32(clens[i]); LE32(lens[i]); LE16(strlen(names[i])); LE16(0); LE16(0); LE16(0); LE16(0);
        LE32(0); LE32(offs[i]);
        memcpy(out + at, names[i], strlen(names[i]));
        at += strlen(names[i]);
    }
    size_t cd_size = at - cd;
    LE32(0x06054b50u); LE16(0); LE16(0); LE16(count); LE16(count); LE32(cd_size); LE32(cd); LE16(0);
#undef LE16
#undef LE32
    return at;
}

static _Atomic uint64_t kernels_seen;

static void count_kernel(int slot, cl_event ev, const char *name, const char *cat, size_t bytes)
{
    (void)slot, (void)ev, (void)name, (void)bytes;
    if (strcmp(cat, "kernel") == 0) kernels_seen++;
}

static void ignore_host(int slot, const char *what, const char *cat, uint64_t start_ns, uint64_t end_ns)
{
    (void)slot, (void)what, (void)cat, (void)start_ns, (void)end_ns;
}

void clt_test_kernels_start(void)
{
    static const clt__sync_tracer counter = {count_kernel, ignore_host};
    kernels_seen = 0;
    clt__sync_set_tracer(&counter);
}

uint64_t clt_test_kernels_stop(void)
{
    clt__sync_set_tracer(NULL);
    return kernels_seen;
}
