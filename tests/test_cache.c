/* cltensor's on-disk caches are code (src/core/cache.h, docs/reliability.md
 * "Caches are code"): SHA-256 against the standard's vectors; an entry's
 * header rejects every truncation, every flipped bit, another key and a
 * length beyond the bound; a cache directory that is writable by group or
 * others, a link, not a directory or (as root) another user's is skipped
 * with one warning, and a run there still works and writes nothing; under
 * umask 000 the directories made are 0700 and the files 0600; damaged,
 * copied, oversized, linked and wrong-program entries of the kernel cache
 * are ignored, rebuilt and replaced by `clt warmup`, which counts each
 * failed save once under a full disk, and products over a
 * damaged cache are correct; the tuning cache ignores (and removes) a
 * damaged, oversized or untrusted file, refuses a 2M-line file by its
 * bound, and is not read at all under CLT_TUNE=0. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cache.h"
#include "core/sha256.h"
#include "device/device_internal.h"
#include "kernels/program.h"
#include "ops/tune.h"
#include "support.h"

static char dir[256];
static int warnings;
static char last_warning[1024];

static void count_warning(const char *message, void *user)
{
    (void)user;
    warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", message);
}

static void make_dir(void)
{
    clt_test_make_temp_dir(dir, sizeof dir, "cache");
    warnings = 0;
    last_warning[0] = '\0';
    clt_set_warning_handler(count_warning, NULL);
}

static void remove_dir(void)
{
    char out[256];
    clt_test_shell(out, sizeof out, "chmod -R u+rwx '%s'; rm -rf '%s'", dir, dir);
}

static void at(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static mode_t mode_of(const char *path)
{
    struct stat st;
    ck_assert_msg(lstat(path, &st) == 0, "%s is missing", path);
    return st.st_mode;
}

static int is_gpu_class(void)
{
    const char *cls = getenv("CLT_DEVICE_CLASS");
    return cls && strcasecmp(cls, "gpu") == 0;
}

/* ---- SHA-256 ---- */

static void hex_of(const uint8_t d[32], char out[65]) { clt__cache_key_hex(d, out); }

START_TEST(test_sha256_vectors)
{
    uint8_t d[32];
    char h[65];
    clt__sha256_of("", 0, d);
    hex_of(d, h);
    ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    clt__sha256_of("abc", 3, d);
    hex_of(d, h);
    ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    clt__sha256_of(two, strlen(two), d);
    hex_of(d, h);
    ck_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a' in pieces of 7 bytes: the block boundary in every position. */
    clt__sha256 c;
    clt__sha256_init(&c);
    char a[7];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    for (; left >= 7; left -= 7) clt__sha256_update(&c, a, 7);
    clt__sha256_update(&c, a, left);
    clt__sha256_final(&c, d);
    hex_of(d, h);
    ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* ---- the entry header ---- */

static void spit(const char *path, const void *data, size_t n)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
    ck_assert_int_eq(close(fd), 0);
}

START_TEST(test_entry_header_rejects_damage)
{
    uint8_t key[32], other[32];
    clt__sha256_of("key", 3, key);
    clt__sha256_of("other", 5, other);
    char path[512];
    at(path, sizeof path, "entry");
    const char content[] = "the content of an entry, 40 bytes long.";
    ck_assert_ok(clt__cache_entry_write(path, key, content, sizeof content - 1));
    size_t n;
    uint8_t *buf = clt_test_read_bytes(path, &n);
    const uint8_t *got;
    size_t len;
    const char *why = NULL;
    ck_assert_int_eq(clt__cache_entry_parse(buf, n, key, 1024, &got, &len, &why), 1);
    ck_assert_uint_eq(len, sizeof content - 1);
    ck_assert_int_eq(memcmp(got, content, len), 0);
    /* The reader agrees, and the file is 0600. */
    uint8_t *file;
    char whybuf[256];
    ck_assert_int_eq(clt__cache_entry_read(path, key, 1024, &file, &got, &len, whybuf, sizeof whybuf), 1);
    free(file);
    ck_assert_int_eq(mode_of(path) & 0777, 0600);
    /* Every truncation, every flipped bit. */
    for (size_t cut = 0; cut < n; cut++)
        ck_assert_msg(clt__cache_entry_parse(buf, cut, key, 1024, &got, &len, &why) == 0, "%zu bytes accepted", cut);
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1 << bit);
            ck_assert_msg(clt__cache_entry_parse(buf, n, key, 1024, &got, &len, &why) == 0,
                          "bit %d of byte %zu flipped is accepted", bit, i);
            buf[i] ^= (uint8_t)(1 << bit);
        }
    /* A byte more, another key, a bound below the content. */
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, buf, n);
    longer[n] = 'x';
    ck_assert_int_eq(clt__cache_entry_parse(longer, n + 1, key, 1024, &got, &len, &why), 0);
    ck_assert_str_eq(why, "longer than its header says");
    free(longer);
    ck_assert_int_eq(clt__cache_entry_parse(buf, n, other, 1024, &got, &len, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "another key"));
    ck_assert_int_eq(clt__cache_entry_parse(buf, n, key, sizeof content - 2, &got, &len, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "bound"));
    /* The content alone (a headerless file, cltensor's old format). */
    ck_assert_int_eq(clt__cache_entry_parse((const uint8_t *)content, sizeof content - 1, key, 1024, &got, &len, &why),
                     0);
    ck_assert_ptr_nonnull(strstr(why, "no cltensor-cache header"));
    /* The reader: an oversized file is refused by its size, unread. */
    ck_assert_int_eq(truncate(path, 1 << 20), 0);
    ck_assert_int_eq(clt__cache_entry_read(path, key, 1024, &file, &got, &len, whybuf, sizeof whybuf), -1);
    ck_assert_msg(strstr(whybuf, "more than the bound"), "%s", whybuf);
    /* A link to a good entry, and an entry writable by others. */
    char good[512], link[512];
    at(good, sizeof good, "good");
    at(link, sizeof link, "link");
    ck_assert_ok(clt__cache_entry_write(good, key, content, sizeof content - 1));
    ck_assert_int_eq(symlink(good, link), 0);
    ck_assert_int_eq(clt__cache_entry_read(link, key, 1024, &file, &got, &len, whybuf, sizeof whybuf), -1);
    ck_assert_str_eq(whybuf, "it is a symbolic link");
    ck_assert_int_eq(chmod(good, 0622), 0);
    ck_assert_int_eq(clt__cache_entry_read(good, key, 1024, &file, &got, &len, whybuf, sizeof whybuf), -1);
    ck_assert_msg(strstr(whybuf, "writable by group or others"), "%s", whybuf);
    if (geteuid() == 0) {
        ck_assert_int_eq(chmod(good, 0600), 0);
        ck_assert_int_eq(chown(good, 65534, 65534), 0);
        ck_assert_int_eq(clt__cache_entry_read(good, key, 1024, &file, &got, &len, whybuf, sizeof whybuf), -1);
        ck_assert_msg(strstr(whybuf, "owned by uid 65534"), "%s", whybuf);
    }
    free(buf);
}
END_TEST

/* ---- the directory ---- */

/* clt__cache_dir on CLT_CACHE_DIR=path: -1 with exactly one warning naming
 * the path and what, however often it is asked. */
static void refused(const char *path, const char *what)
{
    ck_assert_int_eq(setenv("CLT_CACHE_DIR", path, 1), 0);
    int before = warnings;
    char buf[1024];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(clt__cache_dir(buf, sizeof buf, 1), -1);
    ck_assert_int_eq(warnings, before + 1);
    ck_assert_msg(strstr(last_warning, path) && strstr(last_warning, what), "warning '%s' names not %s and %s",
                  last_warning, path, what);
}

START_TEST(test_untrusted_directories_skipped)
{
    char p[512], buf[1024];
    at(p, sizeof p, "open");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_int_eq(chmod(p, 0777), 0);
    refused(p, "writable by its group and others (mode 777)");
    at(p, sizeof p, "group");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_int_eq(chmod(p, 0770), 0);
    refused(p, "writable by its group (mode 770)");
    at(p, sizeof p, "others");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_int_eq(chmod(p, 0702), 0);
    refused(p, "writable by others (mode 702)");
    char good[512];
    at(good, sizeof good, "good");
    ck_assert_int_eq(mkdir(good, 0700), 0);
    at(p, sizeof p, "link");
    ck_assert_int_eq(symlink(good, p), 0);
    refused(p, "symbolic link");
    at(p, sizeof p, "file");
    spit(p, "x", 1);
    refused(p, "not a directory");
    if (geteuid() == 0) {
        at(p, sizeof p, "theirs");
        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(chown(p, 65534, 65534), 0);
        refused(p, "owned by uid 65534");
    }
    /* Trusted: the user's own, 0700 (0755 too: not writable by others). */
    int before = warnings;
    ck_assert_int_eq(setenv("CLT_CACHE_DIR", good, 1), 0);
    ck_assert_int_eq(clt__cache_dir(buf, sizeof buf, 1), 1);
    ck_assert_str_eq(buf, good);
    ck_assert_int_eq(chmod(good, 0755), 0);
    ck_assert_int_eq(clt__cache_dir(buf, sizeof buf, 1), 1);
    ck_assert_int_eq(setenv("CLT_CACHE_DIR", "off", 1), 0);
    ck_assert_int_eq(clt__cache_dir(buf, sizeof buf, 1), 0);
    ck_assert_int_eq(warnings, before);
}
END_TEST

static int count_of(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
    return n;
}

static int entries_in(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* A run over a cache directory others can write: one warning, the run
 * works, nothing is written there; `clt warmup` says it saved nothing. */
START_TEST(test_run_over_an_untrusted_directory)
{
    clt_test_write_idx_split(dir, "train", 64, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 32, 2, 0);
    char cache[512];
    at(cache, sizeof cache, "shared");
    ck_assert_int_eq(mkdir(cache, 0700), 0);
    ck_assert_int_eq(chmod(cache, 0777), 0);
    static char out[16384];
    int rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' CLT_TUNE=1 timeout 300 '%s' train --data '%s' "
                            "--steps 1 --batch-size 16 --hiddens 8 --blocks 1 --val-limit 16", cache,
                            clt_test_clt_path(), dir);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(count_of(out, "clt: warning: ") == 1 && count_of(out, "clt: warning: cache directory") == 1,
                  "not one warning about the directory:\n%s", out);
    ck_assert_ptr_nonnull(strstr(out, "writable by its group and others"));
    ck_assert_int_eq(entries_in(cache), 0);
    rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' timeout 300 '%s' warmup --hiddens 8 --blocks 1 "
                        "--batch-size 16", cache, clt_test_clt_path());
    ck_assert_msg(rc == 1 && strstr(out, "0 binaries saved") && strstr(out, "not saved to the cache"),
                  "clt warmup over a shared directory: exit %d:\n%s", rc, out);
    ck_assert_int_eq(entries_in(cache), 0);
}
END_TEST

/* Under umask 000 the directories cltensor makes are 0700 and its files 0600. */
START_TEST(test_umask_000)
{
    char cache[512];
    at(cache, sizeof cache, "a/b/cache");
    static char out[16384];
    int rc = clt_test_shell(out, sizeof out, "umask 000; CLT_CACHE_DIR='%s' CLT_TUNE=1 timeout 300 '%s' warmup "
                            "--device %s --hiddens 8 --blocks 1 --batch-size 16", cache, clt_test_clt_path(),
                            clt_test_cpu_name());
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *made[] = {"a", "a/b", "a/b/cache"};
    for (int i = 0; i < 3; i++) {
        char p[512];
        at(p, sizeof p, made[i]);
        ck_assert_msg((mode_of(p) & 07777) == 0700, "%s: mode %o", p, (unsigned)(mode_of(p) & 07777));
    }
    DIR *d = opendir(cache);
    ck_assert_ptr_nonnull(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", cache, e->d_name);
        ck_assert_msg(S_ISREG(mode_of(p)) && (mode_of(p) & 07777) == 0600, "%s: mode %o", p,
                      (unsigned)(mode_of(p) & 07777));
        files++;
    }
    closedir(d);
    ck_assert_int_gt(files, 0);
}
END_TEST

/* ---- the kernel cache ---- */

static char out[65536];

/* `clt warmup` into cache: its exit status and counts. */
static int warmup(const char *cache, int *built, int *loaded, int *saved)
{
    int rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' timeout 300 '%s' warmup --device %s --hiddens 16 "
                            "--blocks 1 --batch-size 8", cache, clt_test_clt_path(), clt_test_cpu_name());
    const char *line = strstr(out, " program(s) compiled");
    ck_assert_msg(line != NULL, "unexpected output:\n%s", out);
    while (line > out && line[-1] != '\n') line--;
    double t;
    ck_assert_msg(sscanf(line, "%*s %d program(s) compiled in %lf s, %d loaded from the cache, %d binar", built, &t,
                         loaded, saved) == 4, "unexpected output:\n%s", out);
    return rc;
}

#define MAX_ENTRIES 64

/* The kernel cache's entries in cache, sorted. */
static int list_entries(const char *cache, char names[][1024])
{
    DIR *d = opendir(cache);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_ENTRIES)
        if (strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") == 0)
            snprintf(names[n++], 1024, "%s/%s", cache, e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char t[1024];
                memcpy(t, names[i], sizeof t);
                memcpy(names[i], names[j], sizeof t);
                memcpy(names[j], t, sizeof t);
            }
    return n;
}

/* The key an entry's header names. */
static void key_of(const uint8_t *buf, size_t n, uint8_t key[32])
{
    const size_t magic = sizeof "cltensor-cache 1 " - 1;
    ck_assert_uint_gt(n, magic + 64);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        char two[3] = {(char)buf[magic + 2 * i], (char)buf[magic + 2 * i + 1], 0};
        ck_assert_int_eq(sscanf(two, "%2x", &v), 1);
        key[i] = (uint8_t)v;
    }
}

/* A whole entry, of the key its name starts with, 0600. */
static void assert_valid_entry(const char *path)
{
    ck_assert_msg(S_ISREG(mode_of(path)) && (mode_of(path) & 0777) == 0600, "%s: not a 0600 file", path);
    size_t n;
    uint8_t *buf = clt_test_read_bytes(path, &n), key[32];
    key_of(buf, n, key);
    char hex[65];
    clt__cache_key_hex(key, hex);
    const char *name = strrchr(path, '/') + 1;
    ck_assert_msg(strncmp(name, hex, 16) == 0, "%s holds the entry of key %.16s", path, hex);
    const uint8_t *content;
    size_t len;
    const char *why;
    ck_assert_msg(clt__cache_entry_parse(buf, n, key, CLT__CACHE_ENTRY_MAX, &content, &len, &why), "%s: %s", path,
                  why);
    free(buf);
}

/* One entry each: truncated, a bit flipped, another entry's file, larger
 * than the bound (sparse), a link to another entry, and another program's
 * binary under this entry's header (valid, but its program lacks the
 * kernels): `clt warmup` ignores and rebuilds each, says so, saves it anew,
 * and the next one loads them all. */
START_TEST(test_damaged_kernel_entries_rebuilt)
{
    char cache[512];
    at(cache, sizeof cache, "cache");
    int built, loaded, saved;
    ck_assert_msg(warmup(cache, &built, &loaded, &saved) == 0, "first warmup:\n%s", out);
    static char names[MAX_ENTRIES][1024];
    int n = list_entries(cache, names);
    ck_assert_msg(n >= 2 && n == saved, "%d entries, %d saved", n, saved);
    static uint8_t *orig[MAX_ENTRIES];
    size_t size[MAX_ENTRIES];
    for (int i = 0; i < n; i++) orig[i] = clt_test_read_bytes(names[i], &size[i]);
    char victim[512];
    at(victim, sizeof victim, "victim");
    spit(victim, "precious\n", 9);
    enum { TRUNCATED, FLIPPED, COPIED, OVERSIZED, LINKED, WRONG_PROGRAM, KINDS };
    int damaged = n < KINDS ? n : KINDS, simple = 0, wrong = 0;
    for (int i = 0; i < damaged; i++) {
        int kind = i == damaged - 1 && n >= 2 ? WRONG_PROGRAM : i;
        const uint8_t *other = orig[(i + 1) % n];
        size_t other_size = size[(i + 1) % n];
        switch (kind) {
        case TRUNCATED: ck_assert_int_eq(truncate(names[i], (off_t)size[i] / 2), 0); break;
        case FLIPPED:
            orig[i][size[i] / 2] ^= 0x10;
            spit(names[i], orig[i], size[i]);
            orig[i][size[i] / 2] ^= 0x10;
            break;
        case COPIED: spit(names[i], other, other_size); break;
        case OVERSIZED: ck_assert_int_eq(truncate(names[i], (off_t)CLT__CACHE_ENTRY_MAX + 4096), 0); break;
        case LINKED:
            ck_assert_int_eq(unlink(names[i]), 0);
            ck_assert_int_eq(symlink(victim, names[i]), 0);
            break;
        case WRONG_PROGRAM: {
            uint8_t key[32], okey[32];
            key_of(orig[i], size[i], key);
            key_of(other, other_size, okey);
            const uint8_t *content;
            size_t len;
            const char *why;
            ck_assert(clt__cache_entry_parse(other, other_size, okey, CLT__CACHE_ENTRY_MAX, &content, &len, &why));
            ck_assert_ok(clt__cache_entry_write(names[i], key, content, len));
            break;
        }
        }
        if (kind == WRONG_PROGRAM) wrong++;
        else simple++;
    }
    int rc = warmup(cache, &built, &loaded, &saved);
    ck_assert_msg(rc == 0, "warmup over damaged entries: exit %d:\n%s", rc, out);
    /* The wrong program loads (its header holds) and is rebuilt on its first kernel. */
    ck_assert_msg(built == simple + wrong && loaded == n - simple && saved == simple + wrong,
                  "over %d damaged entries (%d with another program): %d built, %d loaded, %d saved:\n%s", damaged,
                  wrong, built, loaded, saved, out);
    ck_assert_msg(count_of(out, "clt: warning: ignoring the kernel cache entry") == damaged, "warnings:\n%s", out);
    const char *says[] = {"truncated", "damaged", "another key", "bound", "symbolic link", "gives no kernel"};
    for (int i = 0; i < damaged; i++) {
        int kind = i == damaged - 1 && n >= 2 ? WRONG_PROGRAM : i;
        ck_assert_msg(strstr(out, says[kind]), "no '%s' in:\n%s", says[kind], out);
    }
    char buf[64];
    FILE *f = fopen(victim, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "precious\n");
    for (int i = 0; i < n; i++) assert_valid_entry(names[i]);
    rc = warmup(cache, &built, &loaded, &saved);
    ck_assert_msg(rc == 0 && built == 0 && loaded == n && saved == 0, "after the repair: %d built, %d loaded:\n%s",
                  built, loaded, out);
    ck_assert_int_eq(count_of(out, "warning"), 0);
    for (int i = 0; i < n; i++) free(orig[i]);
}
END_TEST

/* Every binary save failing (CLT_FAULT=write:1+, a full disk): `clt
 * warmup` (and `clt warmup --all`, every program) exits 1 and counts each
 * program's failed save once, as many as it compiled (each was tried once,
 * not again after its first failure), and writes no entry; the next
 * warmup saves them all. */
START_TEST(test_failed_saves_counted_once)
{
    static const char *const modes[] = {"", "--all"};
    for (int m = 0; m < 2; m++) {
        char cache[512];
        at(cache, sizeof cache, m ? "full-all" : "full");
        int rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' CLT_FAULT=write:1+ timeout 300 '%s' warmup %s "
                                "--device %s --hiddens 16 --blocks 1 --batch-size 8", cache, clt_test_clt_path(),
                                modes[m], clt_test_cpu_name());
        int built = -1, loaded = -1, saved = -1;
        double t;
        const char *line = strstr(out, " program(s) compiled");
        ck_assert_msg(rc == 1 && line, "warmup %s: exit %d:\n%s", modes[m], rc, out);
        while (line > out && line[-1] != '\n') line--;
        ck_assert_msg(sscanf(line, "%*s %d program(s) compiled in %lf s, %d loaded from the cache, %d binar", &built,
                             &t, &loaded, &saved) == 4, "unexpected output:\n%s", out);
        ck_assert_msg(built >= 2 && loaded == 0 && saved == 0, "warmup %s: %d built, %d loaded, %d saved:\n%s",
                      modes[m], built, loaded, saved, out);
        /* --all: every program, besides the variants the step built with
         * options of their own (the GPU class's 8 x 8 GEMM). */
        if (m) ck_assert_int_ge(built, clt__program_count());
        char want[128];
        snprintf(want, sizeof want, ": %d program binaries were not saved to the cache (0 saved)", built);
        ck_assert_msg(strstr(out, want), "warmup %s: not \"%s\" in:\n%s", modes[m], want, out);
        static char names[MAX_ENTRIES][1024];
        ck_assert_int_eq(list_entries(cache, names), 0);
        rc = clt_test_shell(out, sizeof out, "CLT_CACHE_DIR='%s' timeout 300 '%s' warmup %s --device %s --hiddens 16 "
                            "--blocks 1 --batch-size 8", cache, clt_test_clt_path(), modes[m], clt_test_cpu_name());
        ck_assert_msg(rc == 0, "the next warmup %s: exit %d:\n%s", modes[m], rc, out);
        ck_assert_int_eq(list_entries(cache, names), built);
    }
}
END_TEST

/* Products and a ReLU in this process, over a cache whose every entry has
 * a flipped bit: correct, and the entries were rejected. */
START_TEST(test_results_correct_over_a_damaged_cache)
{
    char cache[512];
    at(cache, sizeof cache, "cache");
    int built, loaded, saved;
    ck_assert_msg(warmup(cache, &built, &loaded, &saved) == 0, "warmup:\n%s", out);
    static char names[MAX_ENTRIES][1024];
    int n = list_entries(cache, names);
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *buf = clt_test_read_bytes(names[i], &len);
        buf[len - 1] ^= 1;
        spit(names[i], buf, len);
        free(buf);
    }
    ck_assert_int_eq(setenv("CLT_CACHE_DIR", cache, 1), 0);
    enum { M = 19, N = 23, K = 37 };
    float a[M * K], b[K * N], want[M * N];
    clt_test_fill_uniform(a, M * K, 1, -1, 1);
    clt_test_fill_uniform(b, K * N, 2, -1, 1);
    clt_test_ref_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, want);
    for (int i = 0; i < M * N; i++) want[i] = want[i] > 0 ? want[i] : 0.0f;
    clt_device d = clt_test_cpu();
    int64_t sa[] = {M, K}, sb[] = {K, N}, sc[] = {M, N};
    clt_tensor *ta, *tb, *tc, *ty;
    ck_assert_ok(clt_from_host(&ta, d, CLT_FLOAT32, 2, sa, a));
    ck_assert_ok(clt_from_host(&tb, d, CLT_FLOAT32, 2, sb, b));
    ck_assert_ok(clt_zeros(&tc, d, CLT_FLOAT32, 2, sc));
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, ta, tb, 0.0f, tc));
    ck_assert_ok(clt_relu(&ty, tc));
    float *got = clt_test_read(ty);
    ck_assert_double_lt(clt_test_max_rel_err(got, want, M * N), 1e-4);
    free(got);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tc);
    clt_tensor_release(ty);
    clt__program_stats st;
    clt__program_get_stats(&st);
    ck_assert_msg(st.rejected >= 1 && st.loaded == 0 && warnings == st.rejected, "%d rejected, %d loaded, %d warnings",
                  st.rejected, st.loaded, warnings);
    ck_assert_ptr_nonnull(strstr(last_warning, "damaged"));
}
END_TEST

/* ---- the tuning cache ---- */

static clt_device tune_dev(void) { return clt_try_gpu(0); }

/* The tuning cache's path and key on tune_dev, under CLT_CACHE_DIR=dir. */
static void tune_entry(char *path, size_t len, uint8_t key[32])
{
    ck_assert_int_eq(setenv("CLT_CACHE_DIR", dir, 1), 0);
    ck_assert_ok(clt_tune_cache_path(tune_dev(), path, len));
    int slot;
    ck_assert_ok(clt__resolve(tune_dev(), &slot));
    clt__cache_key(slot, "tune", NULL, NULL, key);
}

/* 1 when the shape 0 0 37 53 29 reads as tuned, 5 x 8, which the file holds. */
static int tuned_shape(void)
{
    int tm = 0, tn = 0, tuned = -1;
    ck_assert_ok(clt_tune_lookup(tune_dev(), 0, 0, 37, 53, 29, &tm, &tn, &tuned));
    if (tuned) ck_assert(tm == 5 && tn == 8);
    return tuned;
}

static const char tune_line[] = "0 0 37 53 29 5 8\n";

#define SKIP_GPU_CLASS()                                                                                          \
    clt_test_skip_if(is_gpu_class(), "cpu-class", "the tuning cache is for CPU-class devices, and CLT_DEVICE_CLASS=gpu")

START_TEST(test_tuning_cache_good_file_read)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    ck_assert_ok(clt__cache_entry_write(path, key, tune_line, strlen(tune_line)));
    ck_assert_int_eq(tuned_shape(), 1);
    ck_assert_int_eq(warnings, 0);
}
END_TEST

/* The file of a given damage: ignored with one warning, removed. */
static void tuning_file_ignored(const char *what)
{
    ck_assert_int_eq(tuned_shape(), 0);
    ck_assert_int_eq(tuned_shape(), 0);
    ck_assert_int_eq(warnings, 1);
    ck_assert_msg(strstr(last_warning, "ignoring the tuning cache") && strstr(last_warning, what), "warning: %s",
                  last_warning);
    char path[1024];
    ck_assert_ok(clt_tune_cache_path(tune_dev(), path, sizeof path));
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), -1);
}

START_TEST(test_tuning_cache_damaged_ignored)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    ck_assert_ok(clt__cache_entry_write(path, key, tune_line, strlen(tune_line)));
    size_t n;
    uint8_t *buf = clt_test_read_bytes(path, &n);
    buf[n - 4] = '9'; /* 5 x 8 becomes 9 x 8, a valid tile: only the checksum tells */
    spit(path, buf, n);
    free(buf);
    tuning_file_ignored("damaged");
}
END_TEST

START_TEST(test_tuning_cache_headerless_ignored)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    spit(path, tune_line, strlen(tune_line));
    tuning_file_ignored("no cltensor-cache header");
}
END_TEST

START_TEST(test_tuning_cache_untrusted_ignored)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    ck_assert_ok(clt__cache_entry_write(path, key, tune_line, strlen(tune_line)));
    ck_assert_int_eq(chmod(path, 0666), 0);
    tuning_file_ignored("writable by group or others");
}
END_TEST

START_TEST(test_tuning_cache_in_untrusted_dir_ignored)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    ck_assert_ok(clt__cache_entry_write(path, key, tune_line, strlen(tune_line)));
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(tuned_shape(), 0);
    ck_assert_int_eq(warnings, 1);
    ck_assert_ptr_nonnull(strstr(last_warning, "cache directory"));
    ck_assert(S_ISREG(mode_of(path))); /* nothing in a directory not used is touched */
    ck_assert_status(clt_tune_gemm(tune_dev(), 0, 0, 5, 8, 3, NULL, NULL), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "not used"));
}
END_TEST

/* 2M lines: a file beyond the bound is refused by its size, unread; content
 * within the bytes but beyond the lines is refused by the parser. */
START_TEST(test_tuning_cache_huge_refused)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    const size_t lines = 2000000, per = strlen(tune_line);
    char *text = malloc(lines * per);
    for (size_t i = 0; i < lines; i++) memcpy(text + i * per, tune_line, per);
    ck_assert_ok(clt__cache_entry_write(path, key, text, lines * per));
    tuning_file_ignored("bound");
    ck_assert_ptr_nonnull(strstr(last_warning, "more than the bound"));
    /* The parser's own bounds, on content given to it directly. */
    clt__tune_table t = {0};
    const char *why;
    ck_assert_int_eq(clt__tune_parse(text, CLT__TUNE_MAX_BYTES + 1, &t, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "bound"));
    memset(text, '\n', CLT__TUNE_MAX_LINES + 1);
    ck_assert_int_eq(clt__tune_parse(text, CLT__TUNE_MAX_LINES + 1, &t, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "lines"));
    ck_assert_uint_eq(t.count, 0);
    /* At the bound: every distinct shape kept, each found. */
    size_t n = 0;
    for (int i = 0; i < CLT__TUNE_MAX_LINES; i++) n += (size_t)sprintf(text + n, "0 1 %d 7 9 4 16\n", i + 1);
    ck_assert_uint_le(n, CLT__TUNE_MAX_BYTES);
    ck_assert_int_eq(clt__tune_parse(text, n, &t, &why), 1);
    ck_assert_uint_eq(t.count, CLT__TUNE_MAX_LINES);
    for (int i = 0; i < CLT__TUNE_MAX_LINES; i++) {
        const clt__tune_entry *e = clt__tune_table_find(&t, 0, 1, (size_t)i + 1, 7, 9);
        ck_assert_msg(e && e->tile.tm == 4 && e->tile.tn == 16, "shape %d", i + 1);
    }
    ck_assert_ptr_null(clt__tune_table_find(&t, 1, 1, 1, 7, 9));
    clt__tune_entry more = {0, 1, 999999, 7, 9, {4, 16}, 1};
    ck_assert_int_eq(clt__tune_table_put(&t, more), 0);
    /* Content refused for its bytes empties a table already loaded, as
     * content refused for its lines does. */
    ck_assert_int_eq(clt__tune_parse(text, CLT__TUNE_MAX_BYTES + 1, &t, &why), 0);
    ck_assert_uint_eq(t.count, 0);
    ck_assert_ptr_null(t.slots);
    clt__tune_table_free(&t);
    free(text);
}
END_TEST

/* CLT_TUNE=0: the file is not read (a damaged one stays, unreported). */
START_TEST(test_tuning_cache_not_read_when_off)
{
    SKIP_GPU_CLASS();
    char path[1024];
    uint8_t key[32];
    tune_entry(path, sizeof path, key);
    ck_assert_ok(clt__cache_entry_write(path, key, tune_line, strlen(tune_line)));
    ck_assert_int_eq(chmod(path, 0666), 0);
    ck_assert_int_eq(setenv("CLT_TUNE", "0", 1), 0);
    ck_assert_int_eq(tuned_shape(), 0);
    enum { M = 37, N = 53, K = 29 };
    static float a[M * K], b[K * N], want[M * N];
    clt_test_fill_uniform(a, M * K, 1, -1, 1);
    clt_test_fill_uniform(b, K * N, 2, -1, 1);
    clt_test_ref_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, want);
    int64_t sa[] = {M, K}, sb[] = {K, N}, sc[] = {M, N};
    clt_tensor *ta, *tb, *tc;
    ck_assert_ok(clt_from_host(&ta, tune_dev(), CLT_FLOAT32, 2, sa, a));
    ck_assert_ok(clt_from_host(&tb, tune_dev(), CLT_FLOAT32, 2, sb, b));
    ck_assert_ok(clt_zeros(&tc, tune_dev(), CLT_FLOAT32, 2, sc));
    ck_assert_ok(clt_gemm_(0, 0, 1.0f, ta, tb, 0.0f, tc));
    float *got = clt_test_read(tc);
    ck_assert_double_lt(clt_test_max_rel_err(got, want, M * N), 1e-4);
    free(got);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tc);
    ck_assert_int_eq(warnings, 0);
    ck_assert(S_ISREG(mode_of(path)));
    ck_assert_int_eq(unsetenv("CLT_TUNE"), 0);
    tuning_file_ignored("writable by group or others");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = clt_test_tcase("cache");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sha256_vectors);
    tcase_add_test(tc, test_entry_header_rejects_damage);
    tcase_add_test(tc, test_untrusted_directories_skipped);
    tcase_add_test(tc, test_run_over_an_untrusted_directory);
    tcase_add_test(tc, test_umask_000);
    tcase_add_test(tc, test_damaged_kernel_entries_rebuilt);
    tcase_add_test(tc, test_failed_saves_counted_once);
    tcase_add_test(tc, test_results_correct_over_a_damaged_cache);
    suite_add_tcase(s, tc);
    /* The tuning cache: CPU-class devices only, a ctest entry of its own
     * (test_cache.tuning) that skips under CLT_DEVICE_CLASS=gpu. */
    TCase *tt = clt_test_tcase("tuning");
    tcase_set_tags(tt, "tuning");
    tcase_add_checked_fixture(tt, make_dir, remove_dir);
    tcase_set_timeout(tt, 300);
    tcase_add_test(tt, test_tuning_cache_good_file_read);
    tcase_add_test(tt, test_tuning_cache_damaged_ignored);
    tcase_add_test(tt, test_tuning_cache_headerless_ignored);
    tcase_add_test(tt, test_tuning_cache_untrusted_ignored);
    tcase_add_test(tt, test_tuning_cache_in_untrusted_dir_ignored);
    tcase_add_test(tt, test_tuning_cache_huge_refused);
    tcase_add_test(tt, test_tuning_cache_not_read_when_off);
    suite_add_tcase(s, tt);
    return clt_test_run(s);
}
