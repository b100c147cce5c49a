/*
 * json.c - typed getters over cJSON with file/key error messages.
 *
 * kz_json_parse checks and parses text from memory; kz_json_load reads a file
 * (io/text_file.c) and hands it to kz_json_parse. Each getter looks one key up,
 * checks its JSON type and range, and on a mismatch records the first error in
 * the context (later errors are dropped so the message is about the root cause).
 */
#include "io/json.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/text_file.h"
#include "runtime/error.h"

// cJSON reports a failed allocation as a parse error; a counting allocator
// (installed once, process-wide) lets the caller tell the two apart.
static _Thread_local bool alloc_failed;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
// cJSON records a parse error's position in a process-wide static that every parse
// writes: the library's parses (config and tokenizer, loaded on two threads at once)
// take turns. The tools serialize theirs the same way (tools/kztts/json_parse.c).
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

static void *counting_malloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        alloc_failed = true;
    }
    return p;
}

static void install_hooks(void) {
    cJSON_Hooks hooks = {.malloc_fn = counting_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}

cJSON *kz_json_parse_text(const char *text, const char **end, bool require_null_terminated,
                          bool *out_of_memory) {
    pthread_once(&hooks_once, install_hooks);
    pthread_mutex_lock(&parse_lock);
    alloc_failed = false;
    cJSON *doc = cJSON_ParseWithOpts(text, end, require_null_terminated);
    *out_of_memory = alloc_failed;
    pthread_mutex_unlock(&parse_lock);
    return doc;
}

kz_status kz_json_parse(const char *label, const char *text, size_t n_bytes, cJSON **root) {
    *root = NULL;
    if (n_bytes > KZ_JSON_MAX_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: larger than %u bytes", label,
                            KZ_JSON_MAX_BYTES);
    }
    if (n_bytes > 0 && memchr(text, '\0', n_bytes)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: contains a NUL byte", label);
    }
    // cJSON wants a terminated string: its length-bounded parse is known to overread.
    char *copy = malloc(n_bytes + 1);
    if (!copy) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
    }
    if (n_bytes > 0) {
        memcpy(copy, text, n_bytes);
    }
    copy[n_bytes] = '\0';
    const char *end = NULL;
    bool out_of_memory;
    cJSON *doc = kz_json_parse_text(copy, &end, true, &out_of_memory);
    size_t offset = end ? (size_t)(end - copy) : 0;
    free(copy);
    if (!doc && out_of_memory) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory parsing JSON", label);
    }
    if (!doc) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: malformed JSON near byte %zu", label, offset);
    }
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: top level is not a JSON object", label);
    }
    *root = doc;
    return KZ_OK;
}

kz_status kz_json_load(const char *path, cJSON **root) {
    *root = NULL;
    char *text;
    size_t n_bytes;
    kz_status st = kz_text_file_read(path, KZ_JSON_MAX_BYTES + 1, &text, &n_bytes);
    if (st == KZ_OK) {
        st = kz_json_parse(path, text, n_bytes, root);
        free(text);
    }
    return st;
}

static void fail(kz_json_ctx *c, const char *key, const char *fmt, ...) KZ_PRINTF(3, 4);

static void fail(kz_json_ctx *c, const char *key, const char *fmt, ...) {
    if (c->status != KZ_OK) {
        return;
    }
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *scope = c->scope ? c->scope : "";
    c->status = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s%s%s: %s", c->path, scope,
                             scope[0] ? "." : "", key, what);
}

static const cJSON *item(const cJSON *obj, const char *key) {
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static bool as_int(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v)) {
        return false;
    }
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9.0e15) {
        return false;
    }
    *out = (int64_t)d;
    return true;
}

int64_t kz_json_int(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t def, int64_t lo,
                    int64_t hi) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        return def;
    }
    int64_t x;
    if (!as_int(v, &x) || x < lo || x > hi) {
        fail(c, key, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return def;
    }
    return x;
}

int64_t kz_json_int_req(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t lo,
                        int64_t hi) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        fail(c, key, "missing (it has no default)");
        return lo;
    }
    return kz_json_int(c, obj, key, lo, lo, hi);
}

double kz_json_num(kz_json_ctx *c, const cJSON *obj, const char *key, double def, double lo,
                   double hi) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        return def;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        fail(c, key, "expected a number in [%g, %g]", lo, hi);
        return def;
    }
    return v->valuedouble;
}

bool kz_json_bool(kz_json_ctx *c, const cJSON *obj, const char *key, bool def) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        return def;
    }
    if (!cJSON_IsBool(v)) {
        fail(c, key, "expected true or false");
        return def;
    }
    return cJSON_IsTrue(v);
}

const char *kz_json_str(kz_json_ctx *c, const cJSON *obj, const char *key, const char *def) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        return def;
    }
    if (!cJSON_IsString(v)) {
        fail(c, key, "expected a string");
        return def;
    }
    return v->valuestring;
}

int kz_json_int_array(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t *out, int max_n,
                      const int64_t *def, int def_n, int64_t lo, int64_t hi) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        memcpy(out, def, (size_t)def_n * sizeof *out);
        return def_n;
    }
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 1 || n > max_n) {
        fail(c, key, "expected an array of 1 to %d integers", max_n);
        memcpy(out, def, (size_t)def_n * sizeof *out);
        return def_n;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!as_int(e, &out[i]) || out[i] < lo || out[i] > hi) {
            fail(c, key, "element %d: expected an integer in [%lld, %lld]", i, (long long)lo,
                 (long long)hi);
            memcpy(out, def, (size_t)def_n * sizeof *out);
            return def_n;
        }
        i++;
    }
    return n;
}

const cJSON *kz_json_obj(kz_json_ctx *c, const cJSON *obj, const char *key) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) {
        return NULL;
    }
    if (!cJSON_IsObject(v)) {
        fail(c, key, "expected an object");
        return NULL;
    }
    return v;
}

void kz_json_model_type(kz_json_ctx *c, const cJSON *root, const char *expected) {
    const char *type = kz_json_str(c, root, "model_type", "");
    if (c->status == KZ_OK && strcmp(type, expected) != 0) {
        c->status = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: model_type is '%s', expected '%s'",
                                 c->path, type, expected);
    }
}
