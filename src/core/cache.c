/* cltensor's on-disk caches: the directory and the entries (cache.h). */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "file.h"
#include "sha256.h"
#include "warning.h"

#define MAGIC "cltensor-cache 1 "

/* ---- the directory ---- */

static int dir_path(char *buf, size_t len)
{
    const char *dir = clt__env_text(CLT__ENV_CACHE_DIR);
    if (dir && strcasecmp(dir, "off") == 0) return 0;
    int n;
    if (dir && *dir) n = snprintf(buf, len, "%s", dir);
    else if ((dir = getenv("XDG_CACHE_HOME")) && *dir) n = snprintf(buf, len, "%s/cltensor", dir);
    else if ((dir = getenv("HOME")) && *dir) n = snprintf(buf, len, "%s/.cache/cltensor", dir);
    else return 0;
    if (n <= 0 || (size_t)n >= len) return 0;
    /* Trailing slashes would defeat O_NOFOLLOW on the last component. */
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    return 1;
}

int clt__cache_dir_path(char *buf, size_t len) { return dir_path(buf, len); }

/* 1 when the directory open as fd may be trusted, else 0 with why. */
static int trusted_dir(int fd, char *why, size_t whylen)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "fstat: %s", strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "it is not a directory");
        return 0;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, whylen, "it is owned by uid %u, not by this user (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        return 0;
    }
    if (st.st_mode & 022) {
        snprintf(why, whylen, "it is writable by %s (mode %03o)",
                 (st.st_mode & 022) == 022 ? "its group and others" : (st.st_mode & 020) ? "its group" : "others",
                 (unsigned)(st.st_mode & 0777));
        return 0;
    }
    return 1;
}

/* Opens path as a directory, not through a link at its last component. */
static int open_dir(const char *path) { return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }

/* Creates path's missing components 0700 (made so by fchmod, whatever the
 * umask) and checks each one it created. 1 when done, else 0 with why. */
static int make_dirs(char *path, char *why, size_t whylen)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        int made = mkdir(path, 0700) == 0;
        if (!made && errno != EEXIST) {
            snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
            *p = c;
            return 0;
        }
        if (made) {
            int fd = open_dir(path);
            int ok = fd >= 0 && trusted_dir(fd, why, whylen) && fchmod(fd, 0700) == 0;
            if (fd < 0) snprintf(why, whylen, "cannot open %s, just created: %s", path, strerror(errno));
            else if (ok) ok = trusted_dir(fd, why, whylen);
            if (fd >= 0) close(fd);
            if (!ok) {
                char inner[256];
                snprintf(inner, sizeof inner, "%s", why);
                snprintf(why, whylen, "%s, just created: %s", path, inner);
                *p = c;
                return 0;
            }
        }
        *p = c;
        if (!c) return 1;
    }
}

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static char warned[1024];

/* Warns once per process and directory. */
static void refuse(const char *path, const char *why)
{
    pthread_mutex_lock(&warn_lock);
    int again = strcmp(warned, path) == 0;
    if (!again) snprintf(warned, sizeof warned, "%s", path);
    pthread_mutex_unlock(&warn_lock);
    if (!again)
        clt__warn("cache directory %s is not used (%s): kernels are built from source and nothing is cached; "
                  "use a directory of your own, mode 0700, or set CLT_CACHE_DIR",
                  path, why);
}

int clt__cache_dir(char *buf, size_t len, int create)
{
    if (!dir_path(buf, len)) return 0;
    char why[512] = "";
    int fd = open_dir(buf);
    if (fd < 0 && errno == ENOENT) {
        if (!create) return 0;
        if (!make_dirs(buf, why, sizeof why)) {
            refuse(buf, why);
            return -1;
        }
        fd = open_dir(buf);
    }
    if (fd < 0) {
        snprintf(why, sizeof why, "%s", errno == ELOOP || errno == ENOTDIR ? "it is a symbolic link or not a directory"
                                                                            : strerror(errno));
        refuse(buf, why);
        return -1;
    }
    int ok = trusted_dir(fd, why, sizeof why);
    close(fd);
    if (!ok) {
        refuse(buf, why);
        return -1;
    }
    return 1;
}

/* ---- entries ---- */

void clt__cache_key_hex(const uint8_t key[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[key[i] >> 4];
        out[2 * i + 1] = hex[key[i] & 15];
    }
    out[64] = '\0';
}

int clt__cache_entry_name(const char *dir, const uint8_t key[32], const char *prefix, const char *suffix, char *path,
                          size_t len)
{
    char hex[65];
    clt__cache_key_hex(key, hex);
    int n = snprintf(path, len, "%s/%s%.16s%s", dir, prefix, hex, suffix);
    return n > 0 && (size_t)n < len ? 1 : 0;
}

int clt__cache_entry_path(const uint8_t key[32], const char *prefix, const char *suffix, int create, char *dir,
                          size_t dirlen, char *path, size_t len)
{
    int r = clt__cache_dir(dir, dirlen, create);
    return r != 1 ? r : clt__cache_entry_name(dir, key, prefix, suffix, path, len);
}

static int hex_is(const uint8_t *p, const uint8_t want[32])
{
    char h[65];
    clt__cache_key_hex(want, h);
    return memcmp(p, h, 64) == 0;
}

int clt__cache_entry_parse(const uint8_t *buf, size_t n, const uint8_t key[32], size_t max,
                           const uint8_t **content, size_t *len, const char **why)
{
    *content = NULL;
    *len = 0;
    const size_t magic = sizeof MAGIC - 1;
    if (n < CLT__CACHE_HEADER_MIN || memcmp(buf, MAGIC, magic) != 0) {
        *why = "no cltensor-cache header of format 1";
        return 0;
    }
    size_t at = magic;
    if (!hex_is(buf + at, key) || buf[at + 64] != ' ') {
        *why = "made for another key (another program, device, driver or build options)";
        return 0;
    }
    at += 65;
    /* The length: decimal, 1 to 20 digits, no leading zero. */
    size_t digits = 0, size = 0;
    int over = 0;
    while (at + digits < n && digits < 21 && buf[at + digits] >= '0' && buf[at + digits] <= '9') {
        size_t d = (size_t)(buf[at + digits] - '0');
        if (size > (SIZE_MAX - d) / 10) over = 1;
        else size = size * 10 + d;
        digits++;
    }
    if (digits == 0 || digits > 20 || (digits > 1 && buf[at] == '0') || at + digits >= n || buf[at + digits] != ' ') {
        *why = "a malformed header";
        return 0;
    }
    if (over || size > max) {
        *why = "a content length beyond the bound";
        return 0;
    }
    at += digits + 1;
    if (n - at < 65 || buf[at + 64] != '\n') {
        *why = "a malformed header";
        return 0;
    }
    size_t body = at + 65;
    if (n - body != size) {
        *why = n - body < size ? "truncated (shorter than its header says)" : "longer than its header says";
        return 0;
    }
    uint8_t sum[32];
    clt__sha256_of(buf + body, size, sum);
    if (!hex_is(buf + at, sum)) {
        *why = "damaged (its SHA-256 does not match its header)";
        return 0;
    }
    *content = buf + body;
    *len = size;
    return 1;
}

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int clt__cache_entry_read(const char *path, const uint8_t key[32], size_t max, uint8_t **file,
                          const uint8_t **content, size_t *len, char *why, size_t whylen)
{
    *file = NULL;
    *content = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(why, whylen, "%s", errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    int ok = 0;
    if (fstat(fd, &st) != 0) snprintf(why, whylen, "fstat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode)) snprintf(why, whylen, "it is %s", kind_of(st.st_mode));
    else if (st.st_uid != geteuid())
        snprintf(why, whylen, "it is owned by uid %u, not by this user (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    else if (st.st_mode & 022) snprintf(why, whylen, "it is writable by group or others (mode %03o)",
                                        (unsigned)(st.st_mode & 0777));
    else if ((uint64_t)st.st_size > (uint64_t)max + CLT__CACHE_HEADER_MIN + 20)
        snprintf(why, whylen, "%lld bytes, more than the bound of %zu", (long long)st.st_size, max);
    else ok = 1;
    uint8_t *buf = NULL;
    size_t n = ok ? (size_t)st.st_size : 0, got = 0;
    if (ok && !(buf = malloc(n ? n : 1))) {
        snprintf(why, whylen, "out of host memory for %zu bytes", n);
        ok = 0;
    }
    while (ok && got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, whylen, "%s", r < 0 ? strerror(errno) : "it shrank while being read");
            ok = 0;
        } else {
            got += (size_t)r;
        }
    }
    close(fd);
    const char *bad = NULL;
    if (ok && !clt__cache_entry_parse(buf, n, key, max, content, len, &bad)) {
        snprintf(why, whylen, "%s", bad);
        ok = 0;
    }
    if (!ok) {
        free(buf);
        return -1;
    }
    *file = buf;
    return 1;
}

void clt__cache_entry_remove(const char *path) { unlink(path); }

clt_status clt__cache_entry_write(const char *path, const uint8_t key[32], const void *content, size_t len)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) unlink(path);
    char header[CLT__CACHE_HEADER_MIN + 32], khex[65], shex[65];
    uint8_t sum[32];
    clt__sha256_of(content, len, sum);
    clt__cache_key_hex(key, khex);
    clt__cache_key_hex(sum, shex);
    int hn = snprintf(header, sizeof header, MAGIC "%s %zu %s\n", khex, len, shex);
    clt__afile f;
    CLT_TRY(clt__afile_open(&f, path));
    /* An entry is code: this user's, 0600, whatever the umask or the file it
     * replaces (whose owner and mode the writer would otherwise copy). */
    if (fchown(f.fd, geteuid(), getegid()) != 0) errno = 0;
    clt_status s = CLT_OK;
    if (fchmod(f.fd, 0600) != 0) s = clt__fail(CLT_ERR_IO, "cannot write %s: chmod 0600: %s", path, strerror(errno));
    if (s == CLT_OK) s = clt__afile_write(&f, header, (size_t)hn);
    if (s == CLT_OK) s = clt__afile_write(&f, content, len);
    if (s != CLT_OK) {
        clt__afile_abort(&f);
        return s;
    }
    return clt__afile_commit(&f);
}
