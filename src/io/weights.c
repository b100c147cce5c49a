/*
 * weights.c - kz_weights over a safetensors file or a GGUF prefix (see weights.h).
 *
 * Both kinds become an array of kz_tensor pointers sorted by name for bsearch;
 * safetensors tensors are the reader's own, GGUF tensors are converted to
 * kz_tensor views (row-major shape, engine dtype) that point into the mapping.
 */
#include "io/weights.h"

#include <stdlib.h>
#include <string.h>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "runtime/error.h"

struct kz_weights {
    const char *path;          /* the file's path, borrowed from st or gguf */
    char *prefix;              /* GGUF: the name prefix the tensors were found under, owned;
                                  NULL for safetensors */
    kz_st_file *st;            /* owned, or NULL */
    kz_tensor *views;          /* GGUF views, owned, or NULL */
    const kz_tensor **by_name; /* [n], sorted by name */
    const kz_tensor **order;   /* [n], file order */
    size_t n;
    kz_weights_packed_fn on_packed;
    void *on_packed_user;
};

static int compare_tensor_names(const void *a, const void *b) {
    return strcmp((*(const kz_tensor *const *)a)->name, (*(const kz_tensor *const *)b)->name);
}

/* Allocates the two index arrays for n tensors. */
static kz_status alloc_index(kz_weights *w, size_t n) {
    w->n = n;
    w->by_name = calloc(n ? n : 1, sizeof *w->by_name);
    w->order = calloc(n ? n : 1, sizeof *w->order);
    return w->by_name && w->order ? KZ_OK
                                  : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                                 w->path);
}

static void sort_index(kz_weights *w) {
    memcpy(w->by_name, w->order, w->n * sizeof *w->order);
    qsort(w->by_name, w->n, sizeof *w->by_name, compare_tensor_names);
}

kz_status kz_weights_open_safetensors(const char *path, kz_weights **out) {
    *out = NULL;
    kz_weights *w = calloc(1, sizeof *w);
    if (!w) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    kz_status st = kz_st_open(path, &w->st);
    w->path = st == KZ_OK ? kz_st_path(w->st) : path;
    st = st == KZ_OK ? alloc_index(w, kz_st_count(w->st)) : st;
    if (st != KZ_OK) {
        kz_weights_free(w);
        return st;
    }
    for (size_t i = 0; i < w->n; i++) {
        w->order[i] = kz_st_at(w->st, i);
    }
    sort_index(w);
    *out = w;
    return KZ_OK;
}

static bool gguf_dtype(kz_gguf_tensor_type type, kz_dtype *out) {
    switch (type) {
    case KZ_GGUF_TENSOR_F32: *out = KZ_DTYPE_F32; return true;
    case KZ_GGUF_TENSOR_F16: *out = KZ_DTYPE_F16; return true;
    case KZ_GGUF_TENSOR_BF16: *out = KZ_DTYPE_BF16; return true;
    case KZ_GGUF_TENSOR_Q8_0: *out = KZ_DTYPE_Q8_0; return true;
    case KZ_GGUF_TENSOR_Q4_0: *out = KZ_DTYPE_Q4_0; return true;
    case KZ_GGUF_TENSOR_I8:
    case KZ_GGUF_TENSOR_I32:
    case KZ_GGUF_TENSOR_I64: break; // integer tables (the tokenizer's), no weights
    }
    return false;
}

/* The kz_tensor view of GGUF tensor t named without the prefix's n_prefix bytes. */
static kz_status gguf_view(const kz_gguf_file *g, const kz_gguf_tensor *t, size_t n_prefix,
                           kz_tensor *v) {
    memset(v, 0, sizeof *v);
    if (!gguf_dtype(t->type, &v->dtype)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' has type %s, not usable here",
                            kz_gguf_path(g), t->name, t->type_name);
    }
    v->name = t->name + n_prefix;
    v->dtype_name = t->type_name;
    v->n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims; d++) {
        v->shape[d] = t->shape[d];
    }
    v->n_elements = t->n_elements;
    v->n_bytes = t->n_bytes;
    v->data = t->data;
    return KZ_OK;
}

kz_status kz_weights_from_gguf(const kz_gguf_file *g, const char *prefix, kz_weights **out) {
    *out = NULL;
    size_t n_prefix = strlen(prefix), n = 0, total = kz_gguf_tensor_count(g);
    for (size_t i = 0; i < total; i++) {
        n += strncmp(kz_gguf_tensor_at(g, i)->name, prefix, n_prefix) == 0;
    }
    kz_weights *w = calloc(1, sizeof *w);
    kz_tensor *views = calloc(n ? n : 1, sizeof *views);
    if (!w || !views) {
        free(w);
        free(views);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", kz_gguf_path(g));
    }
    w->path = kz_gguf_path(g);
    w->views = views;
    w->prefix = strdup(prefix);
    kz_status st = w->prefix ? alloc_index(w, n)
                             : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    for (size_t i = 0, k = 0; i < total && st == KZ_OK; i++) {
        const kz_gguf_tensor *t = kz_gguf_tensor_at(g, i);
        if (strncmp(t->name, prefix, n_prefix) == 0) {
            st = gguf_view(g, t, n_prefix, &views[k]);
            w->order[k] = &views[k];
            k++;
        }
    }
    if (st != KZ_OK) {
        kz_weights_free(w);
        return st;
    }
    sort_index(w);
    *out = w;
    return KZ_OK;
}

void kz_weights_free(kz_weights *w) {
    if (!w) {
        return;
    }
    kz_st_close(w->st);
    free(w->views);
    free(w->prefix);
    free(w->by_name);
    free(w->order);
    free(w);
}

static int compare_name_key(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const kz_tensor *const *)elem)->name);
}

const kz_tensor *kz_weights_find(const kz_weights *w, const char *name) {
    if (!w || !name || w->n == 0) {
        return NULL;
    }
    const kz_tensor *const *hit = bsearch(name, w->by_name, w->n, sizeof *w->by_name,
                                          compare_name_key);
    return hit ? *hit : NULL;
}

kz_status kz_weights_get(const kz_weights *w, const char *name, int n_dims, const int64_t *shape,
                         const kz_tensor **out) {
    const kz_tensor *t = kz_weights_find(w, name);
    kz_status st = kz_tensor_check(t, kz_weights_path(w), name, n_dims, shape);
    *out = st == KZ_OK ? t : NULL;
    return st;
}

size_t kz_weights_count(const kz_weights *w) {
    return w ? w->n : 0;
}

const kz_tensor *kz_weights_at(const kz_weights *w, size_t index) {
    return w && index < w->n ? w->order[index] : NULL;
}

const char *kz_weights_path(const kz_weights *w) {
    return w ? w->path : "(null)";
}

const char *kz_weights_prefix(const kz_weights *w) {
    return w && w->prefix ? w->prefix : "";
}

void kz_weights_release(const kz_weights *w, const kz_tensor *t) {
    (void)w;
    if (t && t->n_bytes) {
        kz_map_release_range(t->data, t->n_bytes);
    }
}

void kz_weights_set_on_packed(kz_weights *w, kz_weights_packed_fn fn, void *user) {
    w->on_packed = fn;
    w->on_packed_user = user;
}

void kz_weights_packed(const kz_weights *w, const char *name, const kz_packed *p) {
    if (w && w->on_packed) {
        w->on_packed(w->on_packed_user, name, p);
    }
}
