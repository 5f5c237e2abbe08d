/* The one safe writer (see file.h for the rules it keeps). */
#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cltensor/io.h"
#include "clock.h"
#include "error.h"
#include "fault.h"
#include "input.h"

/* ---- deferring SIGINT, SIGTERM and SIGHUP while a file is being written ---- */

static const int deferred_signals[] = {SIGINT, SIGTERM, SIGHUP};
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

/* The last component of path (after the last '/'); "" when path ends in '/'. */
static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* *exists is 1 with *st filled for a regular file, 0 for no file. */
static clt_status check_target(const char *path, struct stat *st, int *exists)
{
    *exists = 0;
    if (!path || !*path) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "cannot write a file: the path is empty");
    if (!*base_of(path))
        return clt__fail(CLT_ERR_IO, "cannot write %s: the path ends in '/', so it names a directory, not a file", path);
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

/* The temporary name's suffix: ".tmp-" and 16 hex digits. */
#define TMP_SUFFIX ".tmp-"
enum { TMP_DIGITS = 16, TMP_EXTRA = sizeof TMP_SUFFIX - 1 + TMP_DIGITS };

/* The longest file name dir's file system allows (NAME_MAX when unknown). */
static long name_max_of(const char *dir)
{
    long n = pathconf(dir, _PC_NAME_MAX);
    return n > 0 ? n : NAME_MAX;
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
    size_t base = strlen(base_of(path));
    long name_max = NAME_MAX;
    if (stat(dir, &ds) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
    else if (!S_ISDIR(ds.st_mode))
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s is not a directory", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
    else if (exists && (ds.st_mode & S_ISVTX) && geteuid() != 0 && st.st_uid != geteuid() && ds.st_uid != geteuid())
        /* rename(2) may not replace another user's file in a sticky directory (/tmp). */
        s = clt__fail(CLT_ERR_IO,
                      "cannot write %s: it belongs to another user (uid %u) in the sticky directory %s, where only "
                      "its owner may replace it", path, (unsigned)st.st_uid, dir);
    else if (base + TMP_EXTRA > (size_t)(name_max = name_max_of(dir)))
        /* Refused now, not after an epoch when the temporary file cannot be created. */
        s = clt__fail(CLT_ERR_IO,
                      "cannot write %s: its name is %zu bytes long, and the temporary file written first (the name "
                      "and \"" TMP_SUFFIX "\" and %d hex digits) would exceed the %ld bytes the file system allows "
                      "in %s: use a name of at most %ld bytes",
                      path, base, TMP_DIGITS, name_max, dir, name_max - (long)TMP_EXTRA);
    else if (strlen(path) + TMP_EXTRA >= PATH_MAX)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: the path of its temporary file would exceed PATH_MAX (%d bytes)",
                      path, PATH_MAX);
    free(dir);
    return s;
}

/* ---- which file a path names ---- */

/* A file's identity: its device and inode when it exists, else its
 * directory's and its name there, so that x, ./x, d/../x and a hard or
 * symbolic link to it are one file. */
typedef struct file_id {
    int known, exists;
    dev_t dev;
    ino_t ino;
    const char *name; /* in the directory, when the file does not exist */
} file_id;

static file_id identify(const char *path)
{
    file_id id = {0};
    struct stat st;
    if (stat(path, &st) == 0 || lstat(path, &st) == 0) {
        id.known = id.exists = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    char *dir = dir_of(path);
    if (dir && stat(dir, &st) == 0) {
        id.known = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        id.name = base_of(path);
    }
    free(dir);
    return id;
}

static int same_id(const file_id *a, const file_id *b)
{
    if (!a->known || !b->known || a->exists != b->exists || a->dev != b->dev || a->ino != b->ino) return 0;
    return a->exists || strcmp(a->name, b->name) == 0;
}

int clt__file_same(const char *a, const char *b)
{
    if (!a || !b) return 0;
    if (strcmp(a, b) == 0) return 1;
    file_id ia = identify(a), ib = identify(b);
    return same_id(&ia, &ib);
}

static int is_output(clt_file_role r) { return r == CLT_FILE_OUTPUT || r == CLT_FILE_REPLACES_INPUT; }

clt_status clt__file_check_uses(const clt_file_use *uses, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (uses[i].path && is_output(uses[i].role)) CLT_TRY(clt__file_check_target(uses[i].path));
    for (size_t i = 0; i < n; i++) {
        const clt_file_use *a = &uses[i];
        if (!a->path) continue;
        for (size_t j = i + 1; j < n; j++) {
            const clt_file_use *b = &uses[j];
            if (!b->path || (!is_output(a->role) && !is_output(b->role))) continue;
            if (!clt__file_same(a->path, b->path)) continue;
            const char *wa = a->what ? a->what : "a file", *wb = b->what ? b->what : "a file";
            if (is_output(a->role) && is_output(b->role))
                return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                                 "%s %s and %s %s name the same file: one output would replace the other (give each "
                                 "its own file)", wa, a->path, wb, b->path);
            const clt_file_use *in = is_output(a->role) ? b : a, *out = in == a ? b : a;
            if (out->role == CLT_FILE_REPLACES_INPUT) continue;
            return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                             "%s %s names the file %s %s reads: writing it would replace that input (give the output "
                             "its own file)", out->what ? out->what : "a file", out->path,
                             in->what ? in->what : "the run", in->path);
        }
    }
    return CLT_OK;
}

clt_status clt_file_check_uses(const clt_file_use *uses, size_t n)
{
    if (!uses && n > 0) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_file_check_uses: uses is NULL for %zu files", n);
    for (size_t i = 0; i < n; i++)
        if (uses[i].role != CLT_FILE_OUTPUT && uses[i].role != CLT_FILE_INPUT && uses[i].role != CLT_FILE_REPLACES_INPUT)
            return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_file_check_uses: file %zu (%s) has an unknown role %d", i,
                             uses[i].path ? uses[i].path : "(null)", (int)uses[i].role);
    return clt__file_check_uses(uses, n);
}

/* ---- stale temporary files ---- */

/* Whether name is base + ".tmp-" + exactly 16 lowercase hex digits: the
 * writer's own pattern, nothing else. */
static int is_temp_of(const char *name, const char *base)
{
    size_t b = strlen(base);
    if (strncmp(name, base, b) != 0 || strncmp(name + b, TMP_SUFFIX, sizeof TMP_SUFFIX - 1) != 0) return 0;
    const char *hex = name + b + sizeof TMP_SUFFIX - 1;
    for (int i = 0; i < TMP_DIGITS; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) return 0;
    return hex[TMP_DIGITS] == '\0';
}

/* Removes the temporary files of path that a killed writer left (kill -9
 * during a save): names of the writer's exact pattern, regular files (not
 * links, which are never followed), owned by this user, that no live writer
 * holds (every writer holds an exclusive flock on its temporary file until
 * it is renamed or removed, and the lock dies with its process). Best
 * effort: what cannot be checked is left alone. */
static void remove_stale_temporaries(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return;
    const char *base = base_of(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (dfd < 0) return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_temp_of(e->d_name, base)) continue;
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st, now;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            fstatat(dfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
            unlinkat(dfd, e->d_name, 0);
        close(fd);
    }
    closedir(d);
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
    remove_stale_temporaries(path);
    /* An existing file's data is private until its mode is copied (0600
     * first); a new one gets 0666 less the umask, as fopen would. */
    mode_t create_mode = exists ? 0600 : 0666;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(f->tmp_path, len, "%s" TMP_SUFFIX "%016llx", path, (unsigned long long)random64());
        fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, create_mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        clt_status s = clt__fail(CLT_ERR_IO, "cannot create a temporary file next to %s: %s", path, strerror(errno));
        signals_release(&f->saved_mask);
        release(f);
        return s;
    }
    /* Held until the file is renamed or removed: it marks the file as live
     * for remove_stale_temporaries. A file system without locks leaves it
     * unlocked, and then unremovable by them. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) errno = 0;
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
    /* Checked again: something else may have appeared at the target since open. */
    if (s == CLT_OK) s = check_target(f->path, &st, &exists);
    /* Renamed (or removed) while still open, so its lock marks it live until then. */
    if (s == CLT_OK && rename(f->tmp_path, f->path) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path, strerror(errno));
    if (s != CLT_OK) unlink(f->tmp_path);
    /* After fsync succeeded, close has nothing left to report about the data. */
    close(f->fd);
    f->fd = -1;
    if (s == CLT_OK) sync_dir(f->path);
    signals_release(&f->saved_mask);
    release(f);
    return s;
}

void clt__afile_abort(clt__afile *f)
{
    if (!f->path) return;
    unlink(f->tmp_path);
    if (f->fd >= 0) close(f->fd);
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
