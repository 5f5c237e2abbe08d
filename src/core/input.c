/* The one way an input file is opened (see input.h for the rules). */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

const char *clt__input_kind(mode_t mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

int clt__input_fd(const char *path, struct stat *st)
{
    struct stat own;
    if (!st) st = &own;
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    int e = 0;
    if (fstat(fd, st) != 0) {
        e = errno;
        memset(st, 0, sizeof *st);
    } else if (!S_ISREG(st->st_mode))
        e = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
    else {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) e = errno;
    }
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

clt_status clt__input_open(const char *path, int *fd, struct stat *st)
{
    struct stat own;
    if (!st) st = &own;
    *fd = clt__input_fd(path, st);
    if (*fd >= 0) return CLT_OK;
    if (st->st_mode && !S_ISREG(st->st_mode))
        return clt__fail(CLT_ERR_IO, "%s is %s, not a regular file", path, clt__input_kind(st->st_mode));
    return clt__fail(CLT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
}
