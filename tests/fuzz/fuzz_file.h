/* Fuzz targets: the input bytes as a file the readers can open by path. */
#ifndef CLT_FUZZ_FILE_H
#define CLT_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

#endif
