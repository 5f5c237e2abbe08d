/* Internal: the one way cltensor writes a file. Every file the library and
 * `clt` write (checkpoints, IDX files, metrics CSV and SVG, traces, `clt
 * timeline`, the kernel and tuning caches) goes through these functions, so
 * the rules below hold for all of them and CLT_FAULT=write reaches them all:
 *
 *  - The target must be absent or a regular file. A symbolic link, FIFO,
 *    device, socket or directory at the target is refused (CLT_ERR_IO naming
 *    the path) and left as it is: nothing is written in place or through a
 *    link, so `--metrics /dev/null` or a link planted at the target changes
 *    nothing. (Links in the directory part of the path are followed.)
 *  - The data goes to a new temporary file in the target's directory, named
 *    TARGET.tmp-<16 random hex digits> and created with
 *    O_CREAT|O_EXCL|O_NOFOLLOW: it is never an existing file or a link.
 *  - An existing target's permission bits are kept (a 0600 checkpoint stays
 *    0600), and its owner and group where the writer may set them; a new file
 *    gets 0666 less the umask, as fopen would make it.
 *  - The temporary file is flushed to disk (fsync) and renamed over the
 *    target, so the path names the old or the new complete file, never a
 *    part. A failed or abandoned write removes the temporary file.
 *  - From open to commit or abort, SIGINT, SIGTERM and SIGHUP are
 *    deferred: blocked in the writing thread and caught process-wide, then
 *    delivered once the file is complete (or removed). A second Ctrl-C
 *    during a save therefore ends the process after the save, with no
 *    temporary file left. Only SIGKILL or a crash can leave one.
 *  - The writer holds an exclusive flock on its temporary file until it is
 *    renamed or removed. Opening a target first removes the temporaries
 *    such a killed writer left beside it: only names of the exact pattern
 *    TARGET.tmp-<16 lowercase hex digits>, only regular files (never
 *    through a link), owned by the effective user, that no live writer
 *    holds locked.
 */
#ifndef CLT_CORE_FILE_H
#define CLT_CORE_FILE_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include "cltensor/file.h"
#include "cltensor/status.h"

typedef struct clt__afile {
    int fd;          /* -1 once released */
    char *path;      /* the target */
    char *tmp_path;  /* the temporary file next to it */
    sigset_t saved_mask; /* the writing thread's mask before open */
} clt__afile;

/* Checks the target (see above) and creates the temporary file. On failure
 * nothing remains, signals are as before and *f holds nothing. */
clt_status clt__afile_open(clt__afile *f, const char *path);
/* Appends n bytes (CLT_ERR_IO naming the target on failure). */
clt_status clt__afile_write(clt__afile *f, const void *data, size_t n);
/* Flushes to disk and renames over the target. On failure the temporary
 * file is removed and the target is untouched. Always releases f. */
clt_status clt__afile_commit(clt__afile *f);
/* Removes the temporary file and releases f; safe on a released f. */
void clt__afile_abort(clt__afile *f);

/* open + write + commit of one buffer. */
clt_status clt__file_write(const char *path, const void *data, size_t n);

/* Opens path for reading ("rb") only if it is a regular file, through
 * clt__input_fd (input.h): a FIFO or device planted there (say in a cache
 * directory) makes this NULL with errno EINVAL (EISDIR for a directory) at
 * once instead of a read that blocks forever or never ends. Links are
 * followed. NULL with errno set on any failure. */
FILE *clt__file_open_read(const char *path);

/* Whether path could be written now: its directory exists and is writable,
 * the target is absent or a regular file (not a link) that may be replaced
 * (in a sticky directory: this user's, or the directory's), and the
 * temporary name (path + ".tmp-" + 16 hex digits) fits the directory's
 * NAME_MAX and PATH_MAX. CLT_ERR_IO naming the path and the reason
 * otherwise. Checks only: creates nothing. */
clt_status clt__file_check_target(const char *path);

/* 1 when a and b name one file: equal strings, the same device and inode
 * (links, hard or symbolic, and spellings such as ./x), or for a file that
 * does not exist yet the same directory (by device and inode) and name. */
int clt__file_same(const char *a, const char *b);

/* clt_file_check_uses (cltensor/file.h) without the argument checks. */
clt_status clt__file_check_uses(const clt_file_use *uses, size_t n);

#endif
