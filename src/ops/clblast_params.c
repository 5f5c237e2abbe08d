/* CLBlast's kernel parameters per device. CLBlast's own tuners
 * (clblast_tuner_xgemm and friends) write their findings as JSON, e.g.
 * clblast_xgemm_1_32.json: "device" (the CL_DEVICE_NAME tuned on),
 * "kernel_family" ("xgemm_1"), "precision" ("32") and "best_parameters"
 * ("GEMMK=0 KREG=1 KWG=32 ... PRECISION=32"). CLT_CLBLAST_PARAMS names such
 * files, separated by ':'. Before a device's first CLBlast call, each file
 * whose "device" is that device's name has its parameters handed to
 * CLBlastOverrideParameters for the kernel the family names; files for
 * other devices are skipped. The files are untrusted input. */
#include <clblast_c.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/env.h"
#include "../core/input.h"
#include "../device/device_internal.h"
#include "clblast_params.h"

/* A tuner's file, every timed configuration included, stays far below this. */
#define MAX_FILE_BYTES ((long long)16 << 20)
/* Far above CLBlast's own: 16 parameters per kernel at most, the longest
 * name 23 characters (XGEMM_MIN_INDIRECT_SIZE). */
#define MAX_PARAMS 64
#define MAX_NAME 64
#define MAX_VALUE_DIGITS 9
#define PRE "CLT_CLBLAST_PARAMS: "

typedef struct device_state {
    int done;
    clt_status status;
    char *message; /* the failure's message, repeated to later calls */
} device_state;

static device_state *states;
static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct param_set {
    const char *names[MAX_PARAMS];
    size_t values[MAX_PARAMS];
    size_t n;
} param_set;

static clt_status read_file(const char *path, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    struct stat st;
    int fd = clt__input_fd(path, &st);
    if (fd < 0 && st.st_mode)
        return clt__fail(CLT_ERR_IO, PRE "%s is %s, not a regular file", path, clt__input_kind(st.st_mode));
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        clt_status s = clt__fail(CLT_ERR_IO, PRE "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return s;
    }
    clt_status s = CLT_OK;
    if ((long long)st.st_size > MAX_FILE_BYTES)
        s = clt__fail(CLT_ERR_FORMAT, PRE "%s has %lld bytes, more than a tuner file's %lld", path,
                      (long long)st.st_size, MAX_FILE_BYTES);
    if (s == CLT_OK) {
        *len = (size_t)st.st_size;
        *text = malloc(*len ? *len : 1);
        if (!*text) s = clt__fail(CLT_ERR_OUT_OF_MEMORY, PRE "out of host memory reading %s", path);
        else if (fread(*text, 1, *len, f) != *len) s = clt__fail(CLT_ERR_IO, PRE "cannot read %s", path);
    }
    fclose(f);
    if (s != CLT_OK) {
        free(*text);
        *text = NULL;
    }
    return s;
}

/* CLBlast's kernel name for a tuner's family, as CLBlast's database script
 * derives it: "_<digits>" dropped (the tuner's variant), then each word
 * capitalised and the underscores dropped: "xgemm_direct_1" is XgemmDirect,
 * "gemm_routine" GemmRoutine. 0 unless the family is a short identifier. */
static int kernel_name(const char *family, char *out, size_t len)
{
    size_t n = strlen(family);
    if (n == 0 || n >= len) return 0;
    char reduced[MAX_NAME];
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        char c = family[i];
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), digit = c >= '0' && c <= '9';
        if (!letter && !digit && c != '_') return 0;
        if (c == '_' && family[i + 1] >= '0' && family[i + 1] <= '9') {
            while (family[i + 1] >= '0' && family[i + 1] <= '9') i++;
            continue;
        }
        reduced[r++] = c;
    }
    size_t o = 0;
    for (size_t i = 0; i < r; i++) {
        char c = reduced[i];
        if (c == '_') continue;
        int after_letter = i > 0 && ((reduced[i - 1] >= 'a' && reduced[i - 1] <= 'z') ||
                                     (reduced[i - 1] >= 'A' && reduced[i - 1] <= 'Z'));
        if (!after_letter && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        else if (after_letter && c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        out[o++] = c;
    }
    out[o] = '\0';
    return o > 0;
}

static int precision_of(json_t *v, long *out)
{
    long p = -1;
    if (json_is_integer(v)) p = (long)json_integer_value(v);
    else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        p = strtol(s, &end, 10);
        if (errno || end == s || *end || *s < '0' || *s > '9') p = -1;
    }
    if (p != 16 && p != 32 && p != 64 && p != 3232 && p != 6464) return 0;
    *out = p;
    return 1;
}

/* Splits "NAME=VALUE NAME=VALUE ..." in place (text is a copy owned by the
 * caller) into set; PRECISION, which the tuner appends, must match the
 * file's precision and is not passed on. */
static clt_status parse_params(const char *path, char *text, long precision, param_set *set)
{
    set->n = 0;
    char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *tok = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
        if (*p) *p++ = '\0';
        char *eq = strchr(tok, '=');
        size_t nlen = eq ? (size_t)(eq - tok) : 0;
        int ok = nlen > 0 && nlen <= MAX_NAME && !(tok[0] >= '0' && tok[0] <= '9');
        for (size_t i = 0; ok && i < nlen; i++) {
            char c = tok[i];
            ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        }
        const char *digits = eq ? eq + 1 : "";
        size_t dlen = strlen(digits);
        for (size_t i = 0; ok && i < dlen; i++) ok = digits[i] >= '0' && digits[i] <= '9';
        if (!ok || dlen == 0)
            return clt__fail(CLT_ERR_FORMAT,
                             PRE "%s: best_parameters: \"%.80s\" is not NAME=VALUE (a name, '=', a whole number)", path,
                             tok);
        if (dlen > MAX_VALUE_DIGITS)
            return clt__fail(CLT_ERR_FORMAT, PRE "%s: best_parameters: the value of %.*s has more than %d digits",
                             path, (int)nlen, tok, MAX_VALUE_DIGITS);
        *eq = '\0';
        size_t value = (size_t)strtoul(digits, NULL, 10);
        if (strcmp(tok, "PRECISION") == 0) {
            if ((long)value != precision)
                return clt__fail(CLT_ERR_FORMAT, PRE "%s: best_parameters has PRECISION=%zu but precision is %ld",
                                 path, value, precision);
            continue;
        }
        for (size_t i = 0; i < set->n; i++)
            if (strcmp(set->names[i], tok) == 0)
                return clt__fail(CLT_ERR_FORMAT, PRE "%s: best_parameters gives %s twice", path, tok);
        if (set->n == MAX_PARAMS)
            return clt__fail(CLT_ERR_FORMAT, PRE "%s: best_parameters has more than %d parameters", path,
                             MAX_PARAMS);
        set->names[set->n] = tok;
        set->values[set->n++] = value;
    }
    if (set->n == 0) return clt__fail(CLT_ERR_FORMAT, PRE "%s: best_parameters names no parameter", path);
    return CLT_OK;
}

static const char *string_field(json_t *root, const char *name)
{
    json_t *v = json_object_get(root, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static clt_status override(const clt__slot *s, const char *devname, const char *path, const char *family,
                           const char *kernel, long precision, param_set *set)
{
    CLBlastStatusCode c = CLBlastOverrideParameters(s->device, kernel, (CLBlastPrecision)precision, set->n,
                                                    set->names, set->values);
    if (c == CLBlastSuccess) return CLT_OK;
    /* CLBlast answers an unknown kernel with CLBlastDatabaseError. */
    if (c == CLBlastInvalidOverrideKernel || c == CLBlastDatabaseError)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         PRE "%s: CLBlast has no kernel %s (from kernel_family \"%s\") at precision %ld on %s "
                         "(\"%s\"): %s (%d)",
                         path, kernel, family, precision, s->name, devname,
                         c == CLBlastDatabaseError ? "CLBlastDatabaseError" : "CLBlastInvalidOverrideKernel", (int)c);
    if (c == CLBlastMissingOverrideParameter)
        return clt__fail(CLT_ERR_INVALID_ARGUMENT,
                         PRE "%s: best_parameters lacks a parameter of CLBlast's %s kernel (precision %ld) on %s "
                         "(\"%s\"): CLBlastMissingOverrideParameter (%d)",
                         path, kernel, precision, s->name, devname, (int)c);
    if (c > -1000)
        return clt__cl_fail((cl_int)c, PRE "%s: CLBlastOverrideParameters for %s on %s", path, kernel, s->name);
    return clt__fail(CLT_ERR_OPENCL, PRE "%s: CLBlastOverrideParameters for %s on %s failed with CLBlast status %d",
                     path, kernel, s->name, (int)c);
}

/* A file's fields, once it is known to be made for devname; handed to
 * CLBlast for s's device (s NULL: checked only). */
static clt_status apply_json(const clt__slot *s, const char *devname, const char *path, json_t *root)
{
    const char *family = string_field(root, "kernel_family"), *best = string_field(root, "best_parameters");
    char kernel[MAX_NAME];
    long precision = 0;
    if (!family) return clt__fail(CLT_ERR_FORMAT, PRE "%s has no string \"kernel_family\"", path);
    if (!kernel_name(family, kernel, sizeof kernel))
        return clt__fail(CLT_ERR_FORMAT, PRE "%s: kernel_family \"%.80s\" is not a tuner's family such as xgemm_1",
                         path, family);
    if (!precision_of(json_object_get(root, "precision"), &precision))
        return clt__fail(CLT_ERR_FORMAT, PRE "%s: \"precision\" is missing or none of 16, 32, 64, 3232, 6464", path);
    if (!best) return clt__fail(CLT_ERR_FORMAT, PRE "%s has no string \"best_parameters\"", path);
    char *params = strdup(best);
    if (!params) return clt__fail(CLT_ERR_OUT_OF_MEMORY, PRE "out of host memory reading %s", path);
    param_set set;
    clt_status st = parse_params(path, params, precision, &set);
    if (st == CLT_OK && s) st = override(s, devname, path, family, kernel, precision, &set);
    free(params);
    return st;
}

/* One file: skipped unless made for devname (s as in apply_json). */
static clt_status apply_file(const clt__slot *s, const char *devname, const char *path)
{
    char *text;
    size_t len;
    CLT_TRY(read_file(path, &text, &len));
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!root)
        return clt__fail(CLT_ERR_FORMAT, PRE "%s is not valid JSON: %s (line %d, column %d)", path, err.text,
                         err.line, err.column);
    const char *device = string_field(root, "device");
    clt_status st = CLT_OK;
    if (!json_is_object(root)) st = clt__fail(CLT_ERR_FORMAT, PRE "%s is not a JSON object", path);
    else if (!device)
        st = clt__fail(CLT_ERR_FORMAT, PRE "%s has no string \"device\" (the CL_DEVICE_NAME it was tuned on)", path);
    else if (strcmp(device, devname) == 0) st = apply_json(s, devname, path, root);
    json_decref(root);
    return st;
}

static clt_status apply_all(const clt__slot *s)
{
    const char *env = clt__env_text(CLT__ENV_CLBLAST_PARAMS);
    if (!env) return CLT_OK;
    size_t size = 0;
    cl_int err = clGetDeviceInfo(s->device, CL_DEVICE_NAME, 0, NULL, &size);
    if (err != CL_SUCCESS) return clt__cl_fail(err, PRE "querying the name of %s", s->name);
    char *devname = malloc(size + 1), *paths = strdup(env);
    clt_status st = CLT_OK;
    if (!devname || !paths) st = clt__fail(CLT_ERR_OUT_OF_MEMORY, PRE "out of host memory");
    else if ((err = clGetDeviceInfo(s->device, CL_DEVICE_NAME, size, devname, NULL)) != CL_SUCCESS)
        st = clt__cl_fail(err, PRE "querying the name of %s", s->name);
    else {
        devname[size] = '\0';
        char *save = NULL;
        for (char *path = strtok_r(paths, ":", &save); path && st == CLT_OK; path = strtok_r(NULL, ":", &save))
            st = apply_file(s, devname, path);
    }
    free(paths);
    free(devname);
    return st;
}

clt_status clt__clblast_params_check(const char *path, const char *devname)
{
    return apply_file(NULL, devname, path);
}

clt_status clt__clblast_params_apply(int slot)
{
    if (clt__slot_plans(slot)) return CLT_OK; /* a planning device runs no CLBlast and asks no driver */
    const clt__slot *s = clt__slot_get(slot);
    /* CLBlast keeps parameters per OpenCL device: slots over one device
     * (cpu:0 and gpu:0 under CLT_CPU_AS_GPU) share the first one's state. */
    int key = slot;
    for (int i = 0; i < slot; i++)
        if (clt__slot_get(i)->device == s->device) {
            key = i;
            break;
        }
    pthread_mutex_lock(&params_lock);
    if (!states) states = calloc((size_t)clt__slot_count(), sizeof *states);
    clt_status st;
    if (!states) st = clt__fail(CLT_ERR_OUT_OF_MEMORY, "out of host memory for CLBlast's parameter table");
    else if (!states[key].done) {
        st = apply_all(s);
        states[key].done = 1;
        states[key].status = st;
        if (st != CLT_OK) states[key].message = strdup(clt_last_error());
    } else {
        st = states[key].status;
        if (st != CLT_OK)
            clt__fail(st, "%s", states[key].message ? states[key].message : PRE "applying it failed");
    }
    pthread_mutex_unlock(&params_lock);
    return st;
}
