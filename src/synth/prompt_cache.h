/*
 * prompt_cache.h - a session's store of computed prompt prefixes (spec 8.2: the
 * instruction, role and tag rows do not depend on the text to speak).
 *
 *   prefill.c:  prefix rows [P, D] --find--> hit:  the saved KV -> the talker's cache,
 *                                                  then a forward over the body rows
 *                                        \-> miss: slot(rows); a forward over all rows
 *                                                  split at P; the P rows' KV -> slot
 *               the body rows get the bits of their own forward either way, so the
 *               codes and audio are the same whether the prefix came from here or not.
 *
 * The key is the prefix rows themselves, compared bit for bit: equal input rows at
 * the same positions give equal keys and values, whatever produced the rows
 * (speaker, language, instruction). Entries are evicted least recently used first
 * to stay within a byte budget; an entry larger than the budget is not kept.
 * Memory is never an error: when an allocation fails the prefix is just not kept.
 * One thread at a time (the session's rule).
 */
#ifndef KZ_PROMPT_CACHE_H
#define KZ_PROMPT_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kz_prompt_cache_entry {
    float *rows;        /* [n_rows, width] key, owned */
    void *kv;           /* [kv_bytes] value (the talker's cache elements), owned */
    size_t n_rows, width, kv_bytes;
    uint64_t last_use;  /* clock value of the last find or slot */
} kz_prompt_cache_entry;

typedef struct kz_prompt_cache {
    kz_prompt_cache_entry *entries; /* [n] */
    size_t n;
    size_t bytes, budget;           /* bytes held by the entries, most allowed */
    uint64_t clock;
} kz_prompt_cache;

/* An empty cache that holds at most budget bytes (0: keeps nothing). */
void kz_prompt_cache_init(kz_prompt_cache *c, size_t budget);
void kz_prompt_cache_free(kz_prompt_cache *c);

/* Drops every entry (the budget stays). */
void kz_prompt_cache_clear(kz_prompt_cache *c);

/* The saved values of the prefix rows[n_rows, width], or NULL. */
const void *kz_prompt_cache_find(kz_prompt_cache *c, const float *rows, size_t n_rows,
                                 size_t width, size_t kv_bytes);

/* A new entry for rows[n_rows, width] (copied now) whose kv_bytes of values the caller
 * writes into the returned buffer before the next call; evicts old entries to make
 * room. NULL when it does not fit the budget or memory runs out. */
void *kz_prompt_cache_slot(kz_prompt_cache *c, const float *rows, size_t n_rows, size_t width,
                           size_t kv_bytes);

#endif
