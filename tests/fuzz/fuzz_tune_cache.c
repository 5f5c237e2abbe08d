/* libFuzzer target: the tuning cache's loader on arbitrary bytes, as
 * content (clt__tune_parse, src/ops/tune.h) and as a file (clt__tune_read,
 * what src/ops/tune.c loads a slot's cache with): the bytes written as an
 * entry by the cache's own writer (clt__cache_entry_write) must load the
 * same table as the parse, and the bytes as a file without a header must be
 * refused with the table empty. Accepted: at most CLT__TUNE_MAX_LINES
 * shapes, each with flags 0/1 and a tile of 1-32 rows by 8, 16 or 32
 * columns, each found again by its shape; refused: an empty table. No
 * OpenCL device is used. */
#include <stdlib.h>
#include <string.h>

#include "core/cache.h"
#include "core/sha256.h"
#include "fuzz_file.h"
#include "ops/tune.h"

static void check_table(const clt__tune_table *t)
{
    FUZZ_REQUIRE(t->count <= CLT__TUNE_MAX_LINES && 2 * t->count <= t->cap);
    size_t used = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const clt__tune_entry *e = &t->slots[i];
        if (!e->used) continue;
        used++;
        FUZZ_REQUIRE((e->ta == 0 || e->ta == 1) && (e->tb == 0 || e->tb == 1));
        FUZZ_REQUIRE(e->tile.tm >= 1 && e->tile.tm <= 32);
        FUZZ_REQUIRE(e->tile.tn == 8 || e->tile.tn == 16 || e->tile.tn == 32);
        FUZZ_REQUIRE(clt__tune_table_find(t, e->ta, e->tb, e->m, e->n, e->k) == e);
    }
    FUZZ_REQUIRE(used == t->count);
}

/* Every entry of a is in b with the same tile, and they hold as many. */
static void check_same(const clt__tune_table *a, const clt__tune_table *b)
{
    FUZZ_REQUIRE(a->count == b->count);
    for (size_t i = 0; i < a->cap; i++) {
        const clt__tune_entry *e = &a->slots[i];
        if (!e->used) continue;
        const clt__tune_entry *f = clt__tune_table_find(b, e->ta, e->tb, e->m, e->n, e->k);
        FUZZ_REQUIRE(f && f->tile.tm == e->tile.tm && f->tile.tn == e->tile.tn);
    }
}

static int fuzz_tune_cache(const uint8_t *data, size_t size)
{
    clt__tune_table t = {0};
    const char *why = NULL;
    int ok = clt__tune_parse((const char *)data, size, &t, &why);
    if (ok) {
        FUZZ_REQUIRE(why == NULL);
        check_table(&t);
    } else {
        FUZZ_REQUIRE(why != NULL && why[0] != '\0');
        FUZZ_REQUIRE(t.count == 0 && t.slots == NULL);
    }

    /* The bytes as an entry, written and loaded as the cache does. */
    uint8_t key[32];
    clt__sha256_of("tune", 4, key);
    const char *path = fuzz_private_file(NULL, 0);
    FUZZ_REQUIRE(clt__cache_entry_write(path, key, data, size) == CLT_OK);
    clt__tune_table u = {0};
    char fwhy[256] = "";
    int r = clt__tune_read(path, key, &u, fwhy, sizeof fwhy);
    if (ok) {
        FUZZ_REQUIRE(r == 1);
        check_table(&u);
        check_same(&t, &u);
        check_same(&u, &t);
    } else {
        FUZZ_REQUIRE(r == -1 && fwhy[0] != '\0' && u.count == 0 && u.slots == NULL);
    }
    clt__tune_table_free(&u);

    /* The bytes as a file without a header of theirs (unless they are
     * themselves an entry for the key): refused whole, and a table loaded
     * before is emptied. */
    const uint8_t *content;
    size_t len;
    const char *bad;
    if (!clt__cache_entry_parse(data, size, key, CLT__TUNE_MAX_BYTES, &content, &len, &bad)) {
        u = (clt__tune_table){0};
        FUZZ_REQUIRE(clt__tune_table_put(&u, (clt__tune_entry){0, 0, 1, 1, 1, {4, 8}, 1}));
        fwhy[0] = '\0';
        r = clt__tune_read(fuzz_private_file(data, size), key, &u, fwhy, sizeof fwhy);
        FUZZ_REQUIRE(r == -1 && fwhy[0] != '\0' && u.count == 0 && u.slots == NULL);
    }
    /* No file: nothing loaded, not a failure. */
    FUZZ_REQUIRE(clt__tune_read(fuzz_private_file(NULL, 0), key, &u, fwhy, sizeof fwhy) == 0 && u.count == 0);

    clt__tune_table_free(&t);
    return 0;
}

#ifndef CLT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_tune_cache(data, size); }
#endif
