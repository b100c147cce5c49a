/*
 * prompt_cache.c - the session's prompt-prefix store (see prompt_cache.h).
 *
 * A handful of entries in an array, searched linearly (a session speaks with a few
 * voices); each holds a copy of its key rows and its saved keys and values. Finding
 * compares sizes first, then the rows with memcmp; making room evicts the entry
 * with the oldest last_use until the new one fits the budget.
 */
#include "synth/prompt_cache.h"

#include <stdlib.h>
#include <string.h>

static size_t entry_bytes(size_t n_rows, size_t width, size_t kv_bytes) {
    return n_rows * width * sizeof(float) + kv_bytes;
}

void kz_prompt_cache_init(kz_prompt_cache *c, size_t budget) {
    memset(c, 0, sizeof *c);
    c->budget = budget;
}

static void drop(kz_prompt_cache *c, size_t i) {
    kz_prompt_cache_entry *e = &c->entries[i];
    c->bytes -= entry_bytes(e->n_rows, e->width, e->kv_bytes);
    free(e->rows);
    free(e->kv);
    c->entries[i] = c->entries[--c->n];
}

void kz_prompt_cache_clear(kz_prompt_cache *c) {
    while (c->n) {
        drop(c, c->n - 1);
    }
}

void kz_prompt_cache_free(kz_prompt_cache *c) {
    kz_prompt_cache_clear(c);
    free(c->entries);
    memset(c, 0, sizeof *c);
}

const void *kz_prompt_cache_find(kz_prompt_cache *c, const float *rows, size_t n_rows,
                                 size_t width, size_t kv_bytes) {
    for (size_t i = 0; i < c->n; i++) {
        kz_prompt_cache_entry *e = &c->entries[i];
        if (e->n_rows == n_rows && e->width == width && e->kv_bytes == kv_bytes &&
            memcmp(e->rows, rows, n_rows * width * sizeof(float)) == 0) {
            e->last_use = ++c->clock;
            return e->kv;
        }
    }
    return NULL;
}

static void evict_oldest(kz_prompt_cache *c) {
    size_t oldest = 0;
    for (size_t i = 1; i < c->n; i++) {
        oldest = c->entries[i].last_use < c->entries[oldest].last_use ? i : oldest;
    }
    drop(c, oldest);
}

void *kz_prompt_cache_slot(kz_prompt_cache *c, const float *rows, size_t n_rows, size_t width,
                           size_t kv_bytes) {
    const size_t bytes = entry_bytes(n_rows, width, kv_bytes);
    if (bytes > c->budget) {
        return NULL;
    }
    while (c->n && c->bytes + bytes > c->budget) {
        evict_oldest(c);
    }
    kz_prompt_cache_entry *grown = realloc(c->entries, (c->n + 1) * sizeof *grown);
    if (!grown) {
        return NULL;
    }
    c->entries = grown;
    kz_prompt_cache_entry e = {.rows = malloc(n_rows * width * sizeof(float)),
                               .kv = malloc(kv_bytes),
                               .n_rows = n_rows,
                               .width = width,
                               .kv_bytes = kv_bytes,
                               .last_use = ++c->clock};
    if (!e.rows || !e.kv) {
        free(e.rows);
        free(e.kv);
        return NULL;
    }
    memcpy(e.rows, rows, n_rows * width * sizeof(float));
    c->entries[c->n++] = e;
    c->bytes += bytes;
    return e.kv;
}
