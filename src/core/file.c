/* The one safe writer (see file.h for the rules it keeps). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cltensor/io.h"
#include "clock.h"
#include "error.h"
#include "fault.h"
#include "input.h"

/* ---- deferring SIGINT and SIGTERM while a file is being written ---- */

static const int deferred_signals[] = {SIGINT, SIGTERM};
enum { NSIG_DEFERRED = sizeof deferred_signals / sizeof deferred_signals[0] };

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int sig_holders;                        /* files open now, all threads */
static struct sigaction sig_saved[NSIG_DEFERRED];
static volatile sig_atomic_t sig_pending[NSIG_DEFERRED];

static void defer_signal(int sig)
{
    for (int i = 0; i < NSIG_DEFERRED; i++)
        if (deferred_signals[i] == sig) sig_pending[i] = 1;
}

/* Blocks the signals in this thread (so the write is never interrupted) and,
 * for the first open file, catches them in every other thread. */
static void signals_hold(sigset_t *saved_mask)
{
    sigset_t block;
    sigemptyset(&block);
    for (int i = 0; i < NSIG_DEFERRED; i++) sigaddset(&block, deferred_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, saved_mask);
    pthread_mutex_lock(&sig_lock);
    if (sig_holders++ == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = defer_signal;
        sa.sa_flags = SA_RESTART;
        sigfillset(&sa.sa_mask);
        for (int i = 0; i < NSIG_DEFERRED; i++) {
            sig_pending[i] = 0;
            sigaction(deferred_signals[i], &sa, &sig_saved[i]);
        }
    }
    pthread_mutex_unlock(&sig_lock);
}

/* Undoes signals_hold; the last file out restores the handlers and delivers
 * what arrived meanwhile, to the handler that was there before. */
static void signals_release(const sigset_t *saved_mask)
{
    int raise_now[NSIG_DEFERRED] = {0};
    pthread_mutex_lock(&sig_lock);
    if (--sig_holders == 0) {
        for (int i = 0; i < NSIG_DEFERRED; i++) {
            sigaction(deferred_signals[i], &sig_saved[i], NULL);
            raise_now[i] = sig_pending[i];
            sig_pending[i] = 0;
        }
    }
    pthread_mutex_unlock(&sig_lock);
    /* A signal sent to this thread while it was blocked arrives here. */
    pthread_sigmask(SIG_SETMASK, saved_mask, NULL);
    for (int i = 0; i < NSIG_DEFERRED; i++)
        if (raise_now[i]) raise(deferred_signals[i]);
}

/* ---- the target ---- */

static const char *kind_of(mode_t m)
{
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* *exists is 1 with *st filled for a regular file, 0 for no file. */
static clt_status check_target(const char *path, struct stat *st, int *exists)
{
    *exists = 0;
    if (!path || !*path) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "cannot write a file: the path is empty");
    if (lstat(path, st) != 0) {
        if (errno == ENOENT) return CLT_OK;
        return clt__fail(CLT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st->st_mode))
        return clt__fail(CLT_ERR_IO,
                         "cannot write %s: it is %s (cltensor replaces only regular files and writes through no "
                         "link; it was left as it is)",
                         path, kind_of(st->st_mode));
    *exists = 1;
    return CLT_OK;
}

/* The directory part of path ("." for none) in a new string. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

clt_status clt__file_check_target(const char *path)
{
    struct stat st;
    int exists;
    CLT_TRY(check_target(path, &st, &exists));
    char *dir = dir_of(path);
    if (!dir) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory checking %s", path);
    clt_status s = CLT_OK;
    struct stat ds;
    if (stat(dir, &ds) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
    else if (!S_ISDIR(ds.st_mode))
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s is not a directory", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
    free(dir);
    return s;
}

/* ---- the temporary file ---- */

static uint64_t random64(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    /* No entropy yet (early boot): O_EXCL still keeps the name safe. */
    static _Atomic uint64_t counter;
    r = clt__now_ns() ^ ((uint64_t)getpid() << 40) ^ counter++;
    return r * 0x9e3779b97f4a7c15ull;
}

static void release(clt__afile *f)
{
    free(f->path);
    free(f->tmp_path);
    f->path = f->tmp_path = NULL;
    f->fd = -1;
}

clt_status clt__afile_open(clt__afile *f, const char *path)
{
    f->fd = -1;
    f->path = f->tmp_path = NULL;
    struct stat st;
    int exists;
    CLT_TRY(check_target(path, &st, &exists));
    size_t len = strlen(path) + 32;
    f->path = strdup(path);
    f->tmp_path = malloc(len);
    if (!f->path || !f->tmp_path) {
        release(f);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory writing %s", path);
    }
    signals_hold(&f->saved_mask);
    /* An existing file's data is private until its mode is copied (0600
     * first); a new one gets 0666 less the umask, as fopen would. */
    mode_t create_mode = exists ? 0600 : 0666;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(f->tmp_path, len, "%s.tmp-%016llx", path, (unsigned long long)random64());
        fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, create_mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        clt_status s = clt__fail(CLT_ERR_IO, "cannot create a temporary file next to %s: %s", path, strerror(errno));
        signals_release(&f->saved_mask);
        release(f);
        return s;
    }
    if (exists) {
        /* Owner and group first: fchown may clear the set-id bits. Failing
         * to set them (not root) leaves the writer's, which is no loss. */
        if (fchown(fd, st.st_uid, st.st_gid) != 0) errno = 0;
        if (fchmod(fd, st.st_mode & 07777) != 0) {
            clt_status s = clt__fail(CLT_ERR_IO, "cannot write %s: setting mode %o on %s: %s", path,
                                     (unsigned)(st.st_mode & 07777), f->tmp_path, strerror(errno));
            close(fd);
            unlink(f->tmp_path);
            signals_release(&f->saved_mask);
            release(f);
            return s;
        }
    }
    f->fd = fd;
    return CLT_OK;
}

clt_status clt__afile_write(clt__afile *f, const void *data, size_t n)
{
    if (n == 0) return CLT_OK;
    if (clt__fault(CLT__FAULT_WRITE))
        return clt__fail(CLT_ERR_IO, "cannot write %s: %s (injected by CLT_FAULT)", f->path, strerror(ENOSPC));
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(f->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return CLT_OK;
}

/* Makes the rename itself durable; some file systems refuse fsync on a
 * directory, which leaves the new file in place anyway, so errors are not
 * reported. */
static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

clt_status clt__afile_commit(clt__afile *f)
{
    clt_status s = CLT_OK;
    struct stat st;
    int exists;
    if (clt__fault(CLT__FAULT_WRITE))
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s (injected by CLT_FAULT)", f->path, strerror(ENOSPC));
    else if (fsync(f->fd) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    if (close(f->fd) != 0 && s == CLT_OK) s = clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    f->fd = -1;
    /* Checked again: something else may have appeared at the target since open. */
    if (s == CLT_OK) s = check_target(f->path, &st, &exists);
    if (s == CLT_OK && rename(f->tmp_path, f->path) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path, strerror(errno));
    if (s == CLT_OK)
        sync_dir(f->path);
    else
        unlink(f->tmp_path);
    signals_release(&f->saved_mask);
    release(f);
    return s;
}

void clt__afile_abort(clt__afile *f)
{
    if (!f->path) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp_path);
    signals_release(&f->saved_mask);
    release(f);
}

FILE *clt__file_open_read(const char *path)
{
    int fd = clt__input_fd(path, NULL);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

clt_status clt__file_write(const char *path, const void *data, size_t n)
{
    clt__afile f;
    CLT_TRY(clt__afile_open(&f, path));
    clt_status s = clt__afile_write(&f, data, n);
    if (s != CLT_OK) {
        clt__afile_abort(&f);
        return s;
    }
    return clt__afile_commit(&f);
}

clt_status clt_file_write(const char *path, const void *data, size_t n)
{
    if (!data && n > 0)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_file_write: data is NULL for %zu bytes to %s", n,
                         path ? path : "(null)");
    return clt__file_write(path, data, n);
}
