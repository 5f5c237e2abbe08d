/* Seeded validation splits, stratified for classes (clt_dataset_split). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "cltensor/data.h"
#include "dataset.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fisher-Yates over a[0..n-1], unbiased bounded draws. */
static void shuffle(int64_t *a, int64_t n, uint64_t *state)
{
    for (int64_t i = n - 1; i > 0; i--) {
        uint64_t bound = (uint64_t)i + 1, reject = (0 - bound) % bound, r;
        do r = splitmix64(state);
        while (r < reject);
        int64_t j = (int64_t)(r % bound), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

clt_status clt_dataset_split(clt_dataset *train, clt_dataset *val, const clt_dataset *ds, double fraction,
                             uint64_t seed)
{
    const char *op = "clt_dataset_split";
    CLT_TRY(clt__need(op, "train", train));
    CLT_TRY(clt__need(op, "val", val));
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    CLT_TRY(clt__need(op, "ds", ds));
    if (!(fraction > 0 && fraction < 1))
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: fraction %g; it must be between 0 and 1 (exclusive)", op,
                         fraction);
    if (ds->n < 2)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "%s: %lld examples; a split needs at least 2", op,
                         (long long)ds->n);
    int64_t n = ds->n;
    int64_t *order = malloc((size_t)n * sizeof *order), *mark = calloc((size_t)n, sizeof *mark);
    if (!order || !mark) {
        free(order);
        free(mark);
        return clt__fail(CLT_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    uint64_t state = seed ^ 0x5851f42d4c957f2dull;
    int stratified = ds->task == CLT_TASK_CLASSIFY && (ds->labels || ds->classes) && ds->num_classes > 0;
    if (stratified) {
        /* Per class (in id order): its examples shuffled, the first round(f * count) to validation. */
        int64_t taken = 0;
        for (int c = 0; c < ds->num_classes; c++) {
            int64_t count = 0;
            for (int64_t i = 0; i < n; i++)
                if (clt__dataset_class(ds, i) == c) order[count++] = i;
            if (count == 0) continue;
            shuffle(order, count, &state);
            int64_t k = (int64_t)llround(fraction * (double)count);
            if (k > count - 1) k = count - 1;
            for (int64_t j = 0; j < k; j++) mark[order[j]] = 1;
            taken += k;
        }
        if (taken == 0) { /* every class too small to give one: one example from the whole set */
            for (int64_t i = 0; i < n; i++) order[i] = i;
            shuffle(order, n, &state);
            mark[order[0]] = 1;
        }
    } else {
        for (int64_t i = 0; i < n; i++) order[i] = i;
        shuffle(order, n, &state);
        int64_t k = (int64_t)llround(fraction * (double)n);
        if (k < 1) k = 1;
        if (k > n - 1) k = n - 1;
        for (int64_t j = 0; j < k; j++) mark[order[j]] = 1;
    }
    int64_t nv = 0, nt = 0;
    for (int64_t i = 0; i < n; i++)
        if (mark[i]) order[nv++] = i;
    int64_t *rest = mark; /* reused: the training indices, in order */
    for (int64_t i = 0, w = 0; i < n; i++) {
        int in_val = 0;
        /* mark[] is overwritten below from the front; order[] holds the validation indices sorted. */
        in_val = bsearch(&i, order, (size_t)nv, sizeof *order, cmp_i64) != NULL;
        if (!in_val) rest[w++] = i, nt = w;
    }
    clt_status s = clt_dataset_subset(val, ds, order, nv);
    if (s == CLT_OK) s = clt_dataset_subset(train, ds, rest, nt);
    if (s != CLT_OK) {
        clt_dataset_free(train);
        clt_dataset_free(val);
    }
    free(order);
    free(mark);
    return s;
}
