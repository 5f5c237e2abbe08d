/* Fuzz targets: the input bytes as a file the readers can open by path. */
#ifndef CLT_FUZZ_FILE_H
#define CLT_FUZZ_FILE_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Aborts so that both libFuzzer and the Check replay count it as a crash. */
#define FUZZ_REQUIRE(cond)                                                        \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* An in-memory file (memfd) holding data, reachable as /proc/self/fd/N: no
 * disk traffic per input. The memfd is made once per process and reused. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("clt-fuzz", MFD_CLOEXEC);
        FUZZ_REQUIRE(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FUZZ_REQUIRE(ftruncate(fd, 0) == 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        FUZZ_REQUIRE(n > 0);
        done += (size_t)n;
    }
    return path;
}

/* A private directory (mode 0700) made once per process and removed, with
 * what it holds, at exit: for readers that refuse links such as
 * /proc/self/fd/N and for files a target writes. It is made (mkdtemp) in
 * /dev/shm where that can be written, so that the writers' fsync costs no
 * disk traffic per input, else in $TMPDIR or /tmp. */
static char fuzz_private_dir_path[4096];

static inline void fuzz_private_cleanup(void)
{
    DIR *d = opendir(fuzz_private_dir_path);
    if (d) {
        struct dirent *e;
        char path[4400];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", fuzz_private_dir_path, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(fuzz_private_dir_path);
}

static inline const char *fuzz_private_dir(void)
{
    if (!fuzz_private_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        if (access("/dev/shm", W_OK | X_OK) == 0) tmp = "/dev/shm";
        else if (!tmp || !*tmp) tmp = "/tmp";
        snprintf(fuzz_private_dir_path, sizeof fuzz_private_dir_path, "%s/clt-fuzz-XXXXXX", tmp);
        FUZZ_REQUIRE(mkdtemp(fuzz_private_dir_path) != NULL);
        atexit(fuzz_private_cleanup);
    }
    return fuzz_private_dir_path;
}

/* The path of the file name in the private directory, into buf[4200]. */
static inline const char *fuzz_private_path(const char *name, char buf[4200])
{
    snprintf(buf, 4200, "%s/%s", fuzz_private_dir(), name);
    return buf;
}

/* A regular file of this user's, mode 0600, holding data, at one path in
 * the private directory (created when data is not NULL; with NULL, only
 * removed, and its path returned). */
static inline const char *fuzz_private_file(const uint8_t *data, size_t size)
{
    static char path[4200];
    fuzz_private_path("entry", path);
    unlink(path);
    if (!data) return path;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FUZZ_REQUIRE(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_REQUIRE(n > 0);
        done += (size_t)n;
    }
    FUZZ_REQUIRE(close(fd) == 0);
    return path;
}

#endif
