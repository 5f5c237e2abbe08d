/* Internal: writing a file so that its path always names either the old or
 * the new complete file. Every byte cltensor writes to a file goes through
 * clt__afile_write, so faults can be injected in one place. */
#ifndef CLT_IO_ATOMIC_FILE_H
#define CLT_IO_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>
#include "cltensor/status.h"

typedef struct clt__afile {
    FILE *fp;
    char *path;     /* the target */
    char *tmp_path; /* the temporary file next to it */
} clt__afile;

/* Creates a temporary file in path's directory. On failure nothing remains
 * and *f holds nothing. */
clt_status clt__afile_open(clt__afile *f, const char *path);
/* Appends n bytes (CLT_ERR_IO naming the target on failure). */
clt_status clt__afile_write(clt__afile *f, const void *data, size_t n);
/* Flushes to disk and renames over the target. On failure the temporary
 * file is removed and the target is untouched. Always releases f. */
clt_status clt__afile_commit(clt__afile *f);
/* Removes the temporary file and releases f; safe on a released f. */
void clt__afile_abort(clt__afile *f);

#endif
