/* A whole input file in memory (slurp.h). */
#include "slurp.h"

#include "cltensor/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../core/error.h"
#include "../core/input.h"

clt_status clt__slurp(const char *path, int gunzip, uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd;
    CLT_TRY(clt__input_open(path, &fd, NULL));
    gzFile gz = NULL;
    if (gunzip) {
        gz = gzdopen(fd, "rb");
        if (!gz) {
            close(fd);
            return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the gzip reader", path);
        }
    }
    size_t cap = 1 << 16, have = 0;
    uint8_t *buf = malloc(cap + 1);
    clt_status s = buf ? CLT_OK : clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    while (s == CLT_OK) {
        if (have == cap) {
            if (cap > (SIZE_MAX - 1) / 2) {
                s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: too large to hold in memory", path);
                break;
            }
            uint8_t *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                s = clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory after %zu bytes", path, have);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t want = cap - have < (1u << 30) ? cap - have : (1u << 30);
        if (gz) {
            int got = gzread(gz, buf + have, (unsigned)want);
            if (got < 0) {
                int err;
                const char *msg = gzerror(gz, &err);
                s = err == Z_ERRNO ? clt__fail(CLT_ERR_IO, "cannot read %s: %s", path, strerror(errno))
                                   : clt__fail(CLT_ERR_FORMAT, "%s: corrupt or truncated gzip data: %s", path, msg);
                break;
            }
            if (got == 0) {
                int err;
                const char *msg = gzerror(gz, &err);
                if (err != Z_OK && err != Z_BUF_ERROR)
                    s = clt__fail(CLT_ERR_FORMAT, "%s: corrupt or truncated gzip data: %s", path, msg);
                else if (err == Z_BUF_ERROR)
                    s = clt__fail(CLT_ERR_FORMAT, "%s: corrupt or truncated gzip data: %s", path, msg);
                break;
            }
            have += (size_t)got;
        } else {
            ssize_t got = read(fd, buf + have, want);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                s = clt__fail(CLT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
                break;
            }
            if (got == 0) break;
            have += (size_t)got;
        }
    }
    if (gz)
        gzclose(gz);
    else
        close(fd);
    if (s != CLT_OK) {
        free(buf);
        return s;
    }
    buf[have] = 0;
    *data = buf;
    *len = have;
    return CLT_OK;
}

clt_status clt_file_read(const char *path, char **data, size_t *len)
{
    if (data) *data = NULL;
    if (len) *len = 0;
    if (!path || !data || !len)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_file_read: %s is NULL",
                         !path ? "path" : !data ? "data" : "len");
    uint8_t *bytes = NULL;
    CLT_TRY(clt__slurp(path, 0, &bytes, len));
    *data = (char *)bytes;
    return CLT_OK;
}
