/* Internal: cltensor's on-disk caches (program binaries, src/kernels/
 * program.c; tuned GEMM tiles, src/ops/tune.c): where they live and when
 * what they hold is trusted. A cache entry is code the driver runs, so:
 *
 *  - The directory is $CLT_CACHE_DIR, else $XDG_CACHE_HOME/cltensor, else
 *    $HOME/.cache/cltensor (CLT_CACHE_DIR=off: none). It is used only when
 *    it is a directory (not a link), owned by the effective user and not
 *    writable by group or others, as fstat reports on an
 *    O_DIRECTORY|O_NOFOLLOW descriptor. Components cltensor creates are made
 *    0700 whatever the umask and checked the same way. A directory that
 *    fails is not used at all: one warning (clt__warn) per process and
 *    path, never an error.
 *  - An entry is one file: a text header line
 *      cltensor-cache 1 <key: 64 hex> <content bytes> <SHA-256 of the content: 64 hex>\n
 *    then the content. The key is a SHA-256 of everything the content was
 *    made from (for a program: platform, device, driver, build options and
 *    source); an entry whose header names another key is another entry.
 *  - An entry is read once, through an O_NOFOLLOW|O_NONBLOCK descriptor,
 *    only if it is a regular file owned by the effective user, not writable
 *    by group or others and at most a bound in size; then its header, key,
 *    length and checksum must match. The checksum catches damage (a
 *    truncated or bit-flipped file); it is no defence against someone who
 *    can write the directory, who could write a matching one: that is what
 *    the ownership and mode checks are for.
 *  - Entries are written through the one writer (src/core/file.h):
 *    a temporary file renamed over the entry, made 0600 and owned by the
 *    effective user whatever the umask. */
#ifndef CLT_CORE_CACHE_H
#define CLT_CORE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cltensor/status.h"

/* The bound on an entry's content. */
#define CLT__CACHE_ENTRY_MAX ((size_t)64 << 20)
/* The header's size: the line above with a content length of n digits. */
#define CLT__CACHE_HEADER_MIN (sizeof "cltensor-cache 1 " - 1 + 64 + 1 + 1 + 1 + 64 + 1)

/* The cache directory into buf (len bytes): 1 when it is there (created
 * first when create is 1) and trusted; 0 when caching is off
 * (CLT_CACHE_DIR=off, no variable set, a path that does not fit) or, with
 * create 0, the directory does not exist; -1 when it is not trusted (see
 * above; warned once). */
int clt__cache_dir(char *buf, size_t len, int create);

/* The cache directory's path into buf, as clt__cache_dir resolves it but
 * without looking at it: 0 when caching is off or the path does not fit. */
int clt__cache_dir_path(char *buf, size_t len);

/* The name of key's entry in directory dir, "<dir>/<prefix><the key's
 * first 16 hex digits><suffix>", into path (len bytes): 1, or 0 when it
 * does not fit. */
int clt__cache_entry_name(const char *dir, const uint8_t key[32], const char *prefix, const char *suffix, char *path,
                          size_t len);

/* The cache entry of key: its name (clt__cache_entry_name) in the cache
 * directory into path (len bytes), the directory into dir (dirlen bytes).
 * clt__cache_dir's answer (1: a trusted directory, created first when
 * create; 0: no cache, or a path that does not fit; -1: a directory not
 * used). */
int clt__cache_entry_path(const uint8_t key[32], const char *prefix, const char *suffix, int create, char *dir,
                          size_t dirlen, char *path, size_t len);

/* Checks an entry held in buf (n bytes) against key, with content at most
 * max bytes: 1 with *content and *len (inside buf) when it holds, else 0
 * with *why saying what failed (a static string). */
int clt__cache_entry_parse(const uint8_t *buf, size_t n, const uint8_t key[32], size_t max,
                           const uint8_t **content, size_t *len, const char **why);

/* Reads the entry at path (in a trusted directory) once: 1 with the file in
 * *file (malloc'd, free it) and its content in *content and *len; 0 when no
 * entry is there; -1 when one is there but fails a check, why (whylen
 * bytes) saying which. */
int clt__cache_entry_read(const char *path, const uint8_t key[32], size_t max, uint8_t **file,
                          const uint8_t **content, size_t *len, char *why, size_t whylen);

/* Writes an entry (header and content) at path, replacing what is there
 * (a link or FIFO is removed first: the directory is trusted). CLT_ERR_IO
 * naming the path on failure, with nothing left behind. */
clt_status clt__cache_entry_write(const char *path, const uint8_t key[32], const void *content, size_t len);

/* Removes a rejected entry (or whatever is at path). */
void clt__cache_entry_remove(const char *path);

/* 64 lowercase hex digits and a NUL of a key into out[65]. */
void clt__cache_key_hex(const uint8_t key[32], char out[65]);

#endif
