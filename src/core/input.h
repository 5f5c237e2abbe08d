/* Internal: the one way cltensor opens a file it reads. Every input the
 * library reads (IDX data files, safetensors checkpoints, CLT_CLBLAST_PARAMS
 * files, the kernel and tuning caches, `--resume`'s metrics CSV) is opened
 * here, so the rules below hold for all of them:
 *
 *  - The open does not block and takes no terminal:
 *    O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, so a FIFO at the path (with no
 *    writer, which would block a plain open forever) returns at once.
 *  - fstat on the open descriptor (not the path, so nothing can be swapped
 *    in between) must show a regular file. A FIFO, directory, character or
 *    block device or socket is refused, naming the path and what it is
 *    ("is a FIFO, not a regular file"), so `/dev/zero` cannot feed a reader
 *    forever and a FIFO cannot stop a run.
 *  - O_NONBLOCK is then cleared, so the reads are ordinary ones.
 *
 * Links are followed: an input is the user's own choice of file. No input
 * format cltensor documents is a stream (gzip IDX files are regular files
 * read through zlib), so no reader accepts anything but a regular file.
 */
#ifndef CLT_CORE_INPUT_H
#define CLT_CORE_INPUT_H

#include <sys/stat.h>
#include "cltensor/status.h"

/* Opens path as above. Returns the descriptor (with *st its fstat when st is
 * not NULL), or -1 with errno set: open's or fstat's errno, EISDIR for a
 * directory, EINVAL for any other file that is not regular. On failure *st
 * is zero unless the file was opened and is not regular: then st_mode says
 * what it is (for clt__input_kind). */
int clt__input_fd(const char *path, struct stat *st);

/* clt__input_fd with the message: CLT_ERR_IO "cannot open PATH: <reason>"
 * or "PATH is a FIFO, not a regular file" (a directory, a character device,
 * a block device, a socket). *fd is the descriptor, or -1 on failure. */
clt_status clt__input_open(const char *path, int *fd, struct stat *st);

/* What a file of this mode is, for messages: "a FIFO", "a directory",
 * "a character device", "a block device", "a socket", "a symbolic link",
 * "a regular file" or "not a regular file". */
const char *clt__input_kind(mode_t mode);

#endif
