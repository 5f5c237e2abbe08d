/* Memory recording: the allocator's counters after every event of one
 * device, each sample labelled with the phase marked last (major phases
 * from clt_memory_record_mark, minor ones from the model's layers). */
#include "record.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../device/device_internal.h"
#include "allocator.h"

#define LABEL_MAX 128

typedef struct phase {
    char label[2 * LABEL_MAX + 2]; /* "major" or "major: minor" */
    int major;                     /* index of the phase that began its major phase */
    int64_t start;                 /* the first sample taken in it */
} phase;

struct clt_memory_record {
    char device[32];
    int64_t cap;
    clt_memory_sample *samples;
    int64_t n, room, dropped;
    phase *phases;
    int nphases, phase_room;
};

static atomic_int recording;

int clt__record_active(void) { return atomic_load_explicit(&recording, memory_order_relaxed) > 0; }

/* The allocator's hook (clt__alloc_set_record): appends a sample of s; a
 * full record counts the samples it could not keep. */
static void record_sample(clt_memory_record *r, const clt_memory_stats *s)
{
    if (r->n == r->room) {
        int64_t room = r->room ? 2 * r->room : 1024;
        if (room > CLT_MEMORY_RECORD_MAX) room = CLT_MEMORY_RECORD_MAX;
        clt_memory_sample *p = r->n < room ? realloc(r->samples, (size_t)room * sizeof *p) : NULL;
        if (!p) {
            r->dropped++;
            return;
        }
        r->samples = p;
        r->room = room;
    }
    clt_memory_sample *x = &r->samples[r->n++];
    memcpy(x->category, s->category_allocated, sizeof x->category);
    x->allocated = s->allocated;
    x->reserved = s->reserved;
    x->phase = r->nphases - 1;
}

typedef struct mark_arg {
    const char *label;
    int major;
} mark_arg;

/* Under the allocator's lock. A phase that kept no sample is replaced,
 * unless it is the major phase a minor one goes under. */
static void add_phase(clt_memory_record *r, const clt_memory_stats *s, void *arg)
{
    (void)s;
    const mark_arg *m = arg;
    phase *last = r->nphases ? &r->phases[r->nphases - 1] : NULL;
    int prev_major = last ? last->major : -1;
    int i;
    if (last && last->start == r->n && (m->major || last->major != r->nphases - 1)) {
        i = r->nphases - 1;
    } else {
        if (r->nphases == r->phase_room) {
            int room = r->phase_room ? 2 * r->phase_room : 64;
            phase *p = realloc(r->phases, (size_t)room * sizeof *p);
            if (!p) return; /* the samples stay in the phase before */
            r->phases = p;
            r->phase_room = room;
        }
        i = r->nphases++;
    }
    phase *p = &r->phases[i];
    int major = m->major || prev_major < 0 ? i : prev_major;
    if (major == i) snprintf(p->label, sizeof p->label, "%.127s", m->label);
    else {
        char outer[sizeof p->label]; /* the major phase's label, copied: snprintf must not read what it writes */
        memcpy(outer, r->phases[major].label, sizeof outer);
        snprintf(p->label, sizeof p->label, "%.127s: %.127s", outer, m->label);
    }
    p->major = major;
    p->start = r->n;
}

static clt_status mark(int slot, const char *label, int major)
{
    mark_arg m = {label, major};
    clt__alloc_with_record(slot, add_phase, &m);
    return CLT_OK;
}

void clt__record_minor(int slot, const char *label)
{
    if (clt__record_active()) mark(slot, label, 0);
}

clt_status clt_memory_record_mark(clt_device dev, const char *label)
{
    if (!label) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_record_mark: label is NULL");
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    return mark(slot, label, 1);
}

clt_status clt_memory_record_start(clt_device dev)
{
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    clt_memory_record *r = calloc(1, sizeof *r), *old = NULL;
    if (!r) return clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for a memory record");
    clt_memory_stats st = {0};
    clt_status s = clt_device_name(dev, r->device, sizeof r->device);
    if (s == CLT_OK) s = clt_memory_get_stats(dev, &st);
    r->cap = st.cap;
    if (s == CLT_OK) s = clt__alloc_set_record(slot, r, record_sample, &old);
    if (s != CLT_OK) {
        clt_memory_record_free(r);
        return s;
    }
    atomic_fetch_add(&recording, 1);
    return CLT_OK;
}

clt_status clt_memory_record_stop(clt_device dev, clt_memory_record **out)
{
    if (!out) return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_record_stop: out is NULL");
    *out = NULL;
    int slot;
    CLT_TRY(clt__resolve(dev, &slot));
    clt_memory_record *r = NULL;
    CLT_TRY(clt__alloc_set_record(slot, NULL, NULL, &r));
    if (!r) {
        char name[32] = "";
        clt_device_name(dev, name, sizeof name);
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_record_stop: %s does not record", name);
    }
    atomic_fetch_sub(&recording, 1);
    *out = r;
    return CLT_OK;
}

void clt_memory_record_free(clt_memory_record *r)
{
    if (!r) return;
    free(r->samples);
    free(r->phases);
    free(r);
}

int64_t clt_memory_record_num_samples(const clt_memory_record *r) { return r ? r->n : 0; }
int64_t clt_memory_record_dropped(const clt_memory_record *r) { return r ? r->dropped : 0; }

clt_status clt_memory_record_sample(const clt_memory_record *r, int64_t i, clt_memory_sample *out)
{
    if (!r || !out || i < 0 || i >= r->n)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT, "clt_memory_record_sample: no sample %lld (the record has %lld)",
                         (long long)i, (long long)(r ? r->n : 0));
    *out = r->samples[i];
    return CLT_OK;
}

int clt_memory_record_num_phases(const clt_memory_record *r) { return r ? r->nphases : 0; }

const char *clt_memory_record_phase(const clt_memory_record *r, int i)
{
    return r && i >= 0 && i < r->nphases ? r->phases[i].label : NULL;
}

int64_t clt_memory_record_peak(const clt_memory_record *r)
{
    int64_t best = -1;
    for (int64_t i = 0; r && i < r->n; i++) {
        int64_t a = r->samples[i].allocated, b = best < 0 ? -1 : r->samples[best].allocated;
        if (a > b || (a == b && i == best + 1)) best = i;
    }
    return best;
}

int64_t clt_memory_record_cap(const clt_memory_record *r) { return r ? r->cap : 0; }
const char *clt_memory_record_device(const clt_memory_record *r) { return r ? r->device : NULL; }

int64_t clt__record_phase_start(const clt_memory_record *r, int i) { return r->phases[i].start; }
int clt__record_phase_is_major(const clt_memory_record *r, int i) { return r->phases[i].major == i; }
const char *clt__record_phase_major(const clt_memory_record *r, int i) { return r->phases[r->phases[i].major].label; }
