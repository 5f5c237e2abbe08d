#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/error.h"
#include "../core/fault.h"

static atomic_uint tmp_counter;

static void release(clt__afile *f)
{
    free(f->path);
    free(f->tmp_path);
    f->path = f->tmp_path = NULL;
    f->fp = NULL;
}

clt_status clt__afile_open(clt__afile *f, const char *path)
{
    f->fp = NULL;
    f->path = strdup(path);
    size_t len = strlen(path) + 64;
    f->tmp_path = malloc(len);
    if (!f->path || !f->tmp_path) {
        release(f);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory writing %s", path);
    }
    int fd = -1;
    /* O_EXCL with a name unique to this process and call: never another
     * writer's file. Mode 0666 lets the umask decide, as fopen would. */
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(f->tmp_path, len, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1));
        fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        clt_status s = clt__fail(CLT_ERR_IO, "cannot create a temporary file next to %s: %s", path, strerror(errno));
        release(f);
        return s;
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        clt_status s = clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        release(f);
        return s;
    }
    return CLT_OK;
}

clt_status clt__afile_write(clt__afile *f, const void *data, size_t n)
{
    if (n == 0) return CLT_OK;
    if (clt__fault(CLT__FAULT_WRITE))
        return clt__fail(CLT_ERR_IO, "cannot write %s: %s (injected by CLT_FAULT)", f->path, strerror(ENOSPC));
    if (fwrite(data, 1, n, f->fp) != n)
        return clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    return CLT_OK;
}

/* Makes the rename itself durable; some file systems refuse fsync on a
 * directory, which leaves the new file in place anyway, so errors are not
 * reported. */
static void sync_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

clt_status clt__afile_commit(clt__afile *f)
{
    clt_status s = CLT_OK;
    if (clt__fault(CLT__FAULT_WRITE))
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s (injected by CLT_FAULT)", f->path, strerror(ENOSPC));
    else if (fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    if (fclose(f->fp) != 0 && s == CLT_OK)
        s = clt__fail(CLT_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    f->fp = NULL;
    if (s == CLT_OK && rename(f->tmp_path, f->path) != 0)
        s = clt__fail(CLT_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path, strerror(errno));
    if (s == CLT_OK)
        sync_dir(f->path);
    else
        unlink(f->tmp_path);
    release(f);
    return s;
}

void clt__afile_abort(clt__afile *f)
{
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) unlink(f->tmp_path);
    release(f);
}
