/* `clt smi` against hostile shared-memory files: the publication files are
 * in world-writable directories, so any local user can plant, forge, grow
 * or shrink one. Records that are short, truncated, oversized, unterminated
 * or claim impossible counters are refused; a record for a pid and start
 * time it does not own, or made by another user than the process's, is not
 * listed; names are printed escaped; a file that shrinks while read, or a
 * FIFO under a record's name, does not crash or hang the reader. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memory/publish.h"
#include "support.h"

/* The record's layout (src/memory/publish.c), as offsets: a header of 280
 * bytes (magic, device count, pid, start time, command[256]) and 184 bytes
 * per device (name[16], platform and device index, device_name[128], used,
 * allocated, reserved, peak). The test checks them on a real file first. */
#define OFF_NDEV 4
#define OFF_PID 8
#define OFF_START 16
#define OFF_COMMAND 24
#define HEADER 280
#define DEVICE 184
#define DEV_PLATFORM 16
#define DEV_USED 152
#define DEV_RESERVED 168

static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

/* This process's own record, published once a tensor was made. */
static size_t own_record(uint8_t *buf, size_t cap)
{
    clt_tensor *t;
    int64_t shape[] = {1000};
    ck_assert_ok(clt_zeros(&t, clt_test_cpu(), CLT_FLOAT32, 1, shape));
    clt_tensor_release(t);
    const char *path = clt__publish_path();
    ck_assert_ptr_nonnull(path);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, cap);
    close(fd);
    ck_assert_int_gt(n, HEADER);
    uint32_t ndev;
    memcpy(&ndev, buf + OFF_NDEV, 4);
    ck_assert_uint_eq((size_t)n, HEADER + (size_t)ndev * DEVICE);
    int32_t pid;
    memcpy(&pid, buf + OFF_PID, 4);
    ck_assert_int_eq(pid, getpid());
    ck_assert_ptr_nonnull(strstr((const char *)buf + OFF_COMMAND, "test_smi"));
    return (size_t)n;
}

static uint64_t start_of(const uint8_t *rec)
{
    uint64_t s;
    memcpy(&s, rec + OFF_START, 8);
    return s;
}

static void set32(uint8_t *rec, size_t off, int32_t v) { memcpy(rec + off, &v, 4); }
static void set64(uint8_t *rec, size_t off, int64_t v) { memcpy(rec + off, &v, 8); }

/* The first device that is in use, for counters to forge. */
static size_t used_device(const uint8_t *rec, size_t len)
{
    for (size_t off = HEADER; off + DEVICE <= len; off += DEVICE) {
        int32_t used;
        memcpy(&used, rec + off + DEV_USED, 4);
        if (used) return off;
    }
    ck_abort_msg("no device in use in this process's record");
    return 0;
}

START_TEST(test_parse_checks_every_field)
{
    uint8_t rec[8192], bad[8192];
    size_t len = own_record(rec, sizeof rec);
    int pid = getpid();
    uint64_t start = start_of(rec);
    clt_smi_process p;
    ck_assert_int_eq(clt__publish_parse(rec, len, pid, start, &p), 1);
    ck_assert_int_eq(p.pid, pid);
    ck_assert_int_ge(p.ndevices, 1);
    size_t dev = used_device(rec, len);

    /* Another pid, another start time (a reused pid: stale), none known. */
    ck_assert_int_eq(clt__publish_parse(rec, len, pid + 1, start, &p), 0);
    ck_assert_int_eq(clt__publish_parse(rec, len, pid, start + 1, &p), -1);
    ck_assert_int_eq(clt__publish_parse(rec, len, pid, 0, &p), 0);
    memcpy(bad, rec, len);
    set64(bad, OFF_START, 0);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);

    /* Short, truncated, grown. */
    ck_assert_int_eq(clt__publish_parse(rec, 0, pid, start, &p), 0);
    ck_assert_int_eq(clt__publish_parse(rec, 12, pid, start, &p), 0);
    ck_assert_int_eq(clt__publish_parse(rec, HEADER, pid, start, &p), 0);
    ck_assert_int_eq(clt__publish_parse(rec, len - 1, pid, start, &p), 0);
    memcpy(bad, rec, len);
    memset(bad + len, 0, DEVICE);
    ck_assert_int_eq(clt__publish_parse(bad, len + DEVICE, pid, start, &p), 0);
    ck_assert_int_eq(clt__publish_parse(bad, sizeof bad, pid, start, &p), 0);

    /* Device counts: none, more than the file holds, more than any process has. */
    const uint32_t counts[] = {0, (uint32_t)((len - HEADER) / DEVICE + 1), CLT_SMI_MAX_DEVICES + 1, UINT32_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        memcpy(bad, rec, len);
        memcpy(bad + OFF_NDEV, &counts[i], 4);
        ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);
    }

    /* Strings that fill their field with no terminator. */
    memcpy(bad, rec, len);
    memset(bad + OFF_COMMAND, 'A', 256);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);
    memcpy(bad, rec, len);
    memset(bad + dev, 'A', 16);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);

    /* Counters: negative, INT64_MAX, past the bound; indices out of range. */
    const int64_t counters[] = {-1, INT64_MIN, INT64_MAX, CLT__PUBLISH_MAX_BYTES + 1};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        for (size_t field = 160; field <= 176; field += 8) {
            memcpy(bad, rec, len);
            set64(bad, dev + field, counters[i]);
            ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);
            ck_assert_int_eq(p.ndevices, 0);
        }
    memcpy(bad, rec, len);
    set64(bad, dev + DEV_RESERVED, CLT__PUBLISH_MAX_BYTES);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 1);
    const int32_t indices[] = {-2, CLT__PUBLISH_MAX_INDEX + 1, INT32_MIN};
    for (size_t i = 0; i < sizeof indices / sizeof indices[0]; i++) {
        memcpy(bad, rec, len);
        set32(bad, dev + DEV_PLATFORM, indices[i]);
        ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);
    }
    memcpy(bad, rec, len);
    set32(bad, dev + DEV_USED, 7);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);

    /* A record in the making (magic not yet set) is skipped. */
    memcpy(bad, rec, len);
    memset(bad, 0, 4);
    ck_assert_int_eq(clt__publish_parse(bad, len, pid, start, &p), 0);
}
END_TEST

START_TEST(test_escape)
{
    char buf[64];
    clt_smi_escape("\033]0;owned\a\033[2Jok \\ \xff", buf, sizeof buf);
    ck_assert_str_eq(buf, "\\x1b]0;owned\\x07\\x1b[2Jok \\x5c \\xff");
    /* Truncated whole: never half an escape, always terminated. */
    clt_smi_escape("ab\033", buf, 5);
    ck_assert_str_eq(buf, "ab");
    clt_smi_escape("abcdef", buf, 4);
    ck_assert_str_eq(buf, "abc");
    clt_smi_escape("x", buf, 1);
    ck_assert_str_eq(buf, "");
    /* The public function takes NULLs: "" for in, nothing written for out. */
    clt_smi_escape(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "");
    clt_smi_escape("x", NULL, 8);
    buf[0] = 'k';
    clt_smi_escape("x", buf, 0);
    ck_assert_int_eq(buf[0], 'k');
}
END_TEST

/* A process that is not a cltensor process: `sleep`, started by us. */
static pid_t start_sleeper(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    /* Until exec is done, /proc/<pid> still shows this test's start time
     * and name: wait for the name to change (up to 10 s, for a loaded machine). */
    char p[64], comm[64] = "";
    snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
    for (int i = 0; i < 5000 && strncmp(comm, "sleep", 5) != 0; i++) {
        FILE *f = fopen(p, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
            fclose(f);
        }
        usleep(2000);
    }
    ck_assert_msg(strncmp(comm, "sleep", 5) == 0, "sleep did not start");
    return pid;
}

static void stop_sleeper(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Field 22 of /proc/<pid>/stat, as the library reads it. */
static uint64_t proc_start(int pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = strrchr(buf, ')');
    ck_assert_ptr_nonnull(s);
    s++;
    for (int field = 3; field < 22 && s; field++) s = strchr(s + 1, ' ');
    ck_assert_ptr_nonnull(s);
    return strtoull(s + 1, NULL, 10);
}

/* The directory this process publishes in, and a forged file's path there. */
static void forged_path(char *buf, size_t len, int pid)
{
    uint8_t scratch[8192];
    own_record(scratch, sizeof scratch);
    const char *own = clt__publish_path();
    ck_assert_ptr_nonnull(own);
    const char *slash = strrchr(own, '/');
    snprintf(buf, len, "%.*s/cltensor.%d", (int)(slash - own), own, pid);
}

/* Whether the public reader (clt_smi_open, what `clt smi` uses) lists pid. */
static int listed(int pid, clt_smi_process *copy)
{
    clt_smi *snap;
    ck_assert_ok(clt_smi_open(&snap));
    int n = clt_smi_num_processes(snap), found = 0;
    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++) {
        const clt_smi_process *p = clt_smi_process_at(snap, i);
        ck_assert_ptr_nonnull(p);
        if (i > 0) ck_assert_int_gt(p->pid, clt_smi_process_at(snap, i - 1)->pid); /* sorted by pid */
        if (p->pid == pid) {
            found = 1;
            if (copy) *copy = *p;
        }
    }
    ck_assert_ptr_null(clt_smi_process_at(snap, n));
    ck_assert_ptr_null(clt_smi_process_at(snap, -1));
    clt_smi_close(snap);
    return found;
}

/* The public reader lists this process with what it published, and takes
 * NULLs with a status, not a crash. */
START_TEST(test_public_reader)
{
    uint8_t rec[8192];
    own_record(rec, sizeof rec);
    clt_smi_process p;
    ck_assert(listed(getpid(), &p));
    ck_assert_ptr_nonnull(strstr(p.command, "test_smi"));
    ck_assert_int_ge(p.ndevices, 1);
    ck_assert_int_le(p.ndevices, CLT_SMI_MAX_DEVICES);
    int64_t reserved = 0;
    for (int i = 0; i < p.ndevices; i++) reserved += p.devices[i].reserved;
    ck_assert_int_gt(reserved, 0);

    ck_assert_status(clt_smi_open(NULL), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_smi_open"));
    ck_assert_int_eq(clt_smi_num_processes(NULL), 0);
    ck_assert_ptr_null(clt_smi_process_at(NULL, 0));
    clt_smi_close(NULL);
}
END_TEST

/* A record copied from this process's, claiming pid. */
static size_t forge(uint8_t *rec, size_t cap, int pid, uint64_t start)
{
    size_t len = own_record(rec, cap);
    set32(rec, OFF_PID, pid);
    set64(rec, OFF_START, (int64_t)start);
    return len;
}

START_TEST(test_forged_records)
{
    uint8_t rec[8192];
    pid_t sleeper = start_sleeper();
    char path[600];
    forged_path(path, sizeof path, sleeper);
    size_t len = forge(rec, sizeof rec, sleeper, proc_start(sleeper));

    /* The wrong start time: never listed under the live pid. */
    set64(rec, OFF_START, (int64_t)proc_start(sleeper) + 12345);
    clt_test_write_bytes(path, rec, len);
    ck_assert(!listed(sleeper, NULL));
    set64(rec, OFF_START, (int64_t)proc_start(sleeper));

    /* By the process's own user: it may say what it likes about itself, but
     * what is printed is escaped. */
    static const char evil[] = "\033]0;owned\a\033[2J\033[31mevil";
    memset(rec + OFF_COMMAND, 0, 256);
    memcpy(rec + OFF_COMMAND, evil, sizeof evil);
    clt_test_write_bytes(path, rec, len);
    clt_smi_process p;
    ck_assert(listed(sleeper, &p));
    int rc = run("%s smi", clt_test_clt_path());
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!strchr(out, '\033') && !strchr(out, '\a'), "raw escape bytes in:\n%s", out);
    ck_assert_msg(strstr(out, "\\x1b]0;owned\\x07\\x1b[2J"), "escaped command not in:\n%s", out);

    /* By another user than the process's: not listed. Root makes the file
     * another user's; anyone else forges a record for pid 1 (root's). */
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        ck_assert(!listed(sleeper, NULL));
    } else {
        char path1[600];
        forged_path(path1, sizeof path1, 1);
        size_t len1 = forge(rec, sizeof rec, 1, proc_start(1));
        clt_test_write_bytes(path1, rec, len1);
        ck_assert(!listed(1, NULL));
        unlink(path1);
    }
    unlink(path);

    /* Reservations near INT64_MAX: refused, and smi's sums never wrap. */
    len = forge(rec, sizeof rec, sleeper, proc_start(sleeper));
    set64(rec, used_device(rec, len) + DEV_RESERVED, INT64_MAX);
    clt_test_write_bytes(path, rec, len);
    ck_assert(!listed(sleeper, NULL));
    rc = run("%s smi --bytes", clt_test_clt_path());
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!strstr(out, "-9223372036854775"), "a wrapped sum in:\n%s", out);
    unlink(path);

    /* A FIFO under a live pid's name neither hangs nor lists anything. */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert(!listed(sleeper, NULL));
    unlink(path);
    stop_sleeper(sleeper);
}
END_TEST

typedef struct shrinker {
    const char *path;
    const uint8_t *rec;
    size_t len;
    atomic_int stop;
} shrinker;

/* Rewrites the file in place, whole then shrunk to nothing, as fast as it can. */
static void *shrink_loop(void *arg)
{
    shrinker *s = arg;
    int fd = open(s->path, O_RDWR);
    if (fd < 0) return NULL;
    while (!atomic_load(&s->stop)) {
        if (pwrite(fd, s->rec, s->len, 0) != (ssize_t)s->len) break;
        if (ftruncate(fd, 0) != 0) break;
        if (ftruncate(fd, (off_t)(s->len / 2)) != 0) break;
    }
    close(fd);
    return NULL;
}

/* A file truncated while smi reads it (SIGBUS with a mapping) is only a
 * short record: skipped or read whole, never a crash. */
START_TEST(test_file_shrinking_while_read)
{
    uint8_t rec[8192];
    pid_t sleeper = start_sleeper();
    char path[600];
    forged_path(path, sizeof path, sleeper);
    size_t len = forge(rec, sizeof rec, sleeper, proc_start(sleeper));
    clt_test_write_bytes(path, rec, len);
    ck_assert(listed(sleeper, NULL));
    shrinker s = {path, rec, len, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, shrink_loop, &s), 0);
    int seen = 0;
    for (int i = 0; i < 3000; i++) seen += listed(sleeper, NULL);
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "test_file_shrinking_while_read: listed in %d of 3000 reads\n", seen);
    unlink(path);
    stop_sleeper(sleeper);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("smi");
    TCase *tc = clt_test_tcase("records");
    tcase_add_test(tc, test_parse_checks_every_field);
    tcase_add_test(tc, test_escape);
    tcase_add_test(tc, test_public_reader);
    tcase_add_test(tc, test_forged_records);
    tcase_add_test(tc, test_file_shrinking_while_read);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
