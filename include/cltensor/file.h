/* Files as every cltensor writer writes them (the core layer's, src/core/file.c):
 * a writer replaces its target atomically: it writes a new temporary file
 * (random name, exclusive creation) in the target's directory, flushes it
 * to disk and renames it over the target, so the target is always either
 * the old or the new complete file, with the old file's mode. A target that
 * is not a regular file (a symbolic link, FIFO, device or directory) is
 * refused with CLT_ERR_IO naming it and is left as it is. And a run's files
 * are checked before it does any work (clt_file_check_uses). Readers are
 * io.h's (clt_file_read). */
#ifndef CLTENSOR_FILE_H
#define CLTENSOR_FILE_H

#include "export.h"
#include <stddef.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes n bytes to path the way every cltensor writer does (see the top of
 * this header): a new temporary file next to the target (PATH.tmp-<16 hex
 * digits>), flushed to disk and renamed over it, so path holds the old or
 * the new complete file; an existing target's mode is kept; SIGINT, SIGTERM
 * and SIGHUP wait until the file is complete. Temporary files of PATH that a
 * killed writer left (that exact pattern, regular files of this user that no
 * live writer holds) are removed first. data may be NULL only when n is 0.
 * Errors: CLT_ERR_INVALID_ARGUMENT (an empty or NULL path, NULL data with
 * n > 0), CLT_ERR_IO naming the path (a target that is not a regular file,
 * left as it is; a missing directory; a failed write, after which the old
 * file is intact and no temporary file remains). */
CLT_API clt_status clt_file_write(const char *path, const void *data, size_t n);

/* What a run does with one of its files, for clt_file_check_uses. */
typedef enum clt_file_role {
    CLT_FILE_OUTPUT,         /* written: no other file of the run may be it */
    CLT_FILE_INPUT,          /* read: only a CLT_FILE_REPLACES_INPUT may be it */
    CLT_FILE_REPLACES_INPUT  /* written, and may be an input's file (a checkpoint saved over the one resumed) */
} clt_file_role;

typedef struct clt_file_use {
    const char *what;        /* how messages name it, e.g. "--save"; NULL: "a file" */
    const char *path;        /* NULL: not used, skipped */
    clt_file_role role;
} clt_file_use;

/* Checks a run's files before it does any work: every output could be
 * written now (clt_file_write's rules: the directory exists and is
 * writable, the target is absent or a regular file that may be replaced,
 * and its temporary name fits the file system's NAME_MAX), and no two
 * outputs, nor an output and an input (unless the output is
 * CLT_FILE_REPLACES_INPUT), name the same file, however spelled: x, ./x,
 * d/../x, a hard or symbolic link to it (compared by device and inode, or
 * for files not yet there by their directory's and their name). Creates
 * nothing. Errors: CLT_ERR_IO naming an unwritable output and why;
 * CLT_ERR_INVALID_ARGUMENT naming both uses of one file (their `what` and
 * path), an unknown role, or NULL uses with n > 0. */
CLT_API clt_status clt_file_check_uses(const clt_file_use *uses, size_t n);

#ifdef __cplusplus
}
#endif
#endif
