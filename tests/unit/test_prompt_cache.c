/*
 * test_prompt_cache.c - the session's prompt-prefix store (synth/prompt_cache.c):
 * found only by bit-identical rows of the same shape, values kept as written,
 * least recently used evicted first within the byte budget, too-large entries and
 * a zero budget keep nothing, clear empties it. (That a cached prefix changes no
 * output is tests/model/test_talker.c's part.)
 */
#include <stdbool.h>

#include "synth/prompt_cache.h"
#include "test.h"

enum { W = 4, ROWS = 3, KV = 10 };
#define KV_BYTES (KV * sizeof(float))
#define ENTRY_BYTES ((ROWS * W + KV) * sizeof(float))

static void make_rows(float *rows, float base) {
    for (int i = 0; i < ROWS * W; i++) {
        rows[i] = base + (float)i;
    }
}

/* Adds an entry for rows made from base with every value = base; true if kept. */
static bool put(kz_prompt_cache *c, float base) {
    float rows[ROWS * W];
    make_rows(rows, base);
    float *kv = kz_prompt_cache_slot(c, rows, ROWS, W, KV_BYTES);
    for (int i = 0; kv && i < KV; i++) {
        kv[i] = base;
    }
    return kv != NULL;
}

/* The values found for base's rows: base if present, else NULL. */
static const float *get(kz_prompt_cache *c, float base) {
    float rows[ROWS * W];
    make_rows(rows, base);
    const float *kv = kz_prompt_cache_find(c, rows, ROWS, W, KV_BYTES);
    for (int i = 0; kv && i < KV; i++) {
        CHECK_MSG(kv[i] == base, "entry %g value %d is %g", base, i, kv[i]);
    }
    return kv;
}

static void test_find(void) {
    kz_prompt_cache c;
    kz_prompt_cache_init(&c, 10 * ENTRY_BYTES);
    CHECK(get(&c, 1) == NULL);
    CHECK(put(&c, 1) && put(&c, 100));
    CHECK(get(&c, 1) != NULL && get(&c, 100) != NULL && get(&c, 2) == NULL);
    float rows[ROWS * W];
    make_rows(rows, 1);
    CHECK_MSG(kz_prompt_cache_find(&c, rows, ROWS - 1, W, KV_BYTES) == NULL, "fewer rows matched");
    CHECK_MSG(kz_prompt_cache_find(&c, rows, ROWS, W, KV_BYTES + 1) == NULL, "other value size matched");
    make_rows(rows, 1);
    rows[0] = 1.0f + 0x1p-20f; // one bit off in the first row
    CHECK_MSG(kz_prompt_cache_find(&c, rows, ROWS, W, KV_BYTES) == NULL, "rows one bit apart matched");
    CHECK_EQ_INT(c.bytes, 2 * ENTRY_BYTES);
    kz_prompt_cache_clear(&c);
    CHECK(c.n == 0 && c.bytes == 0 && get(&c, 1) == NULL);
    CHECK(put(&c, 3) && get(&c, 3) != NULL);
    kz_prompt_cache_free(&c);
}

static void test_evict(void) {
    kz_prompt_cache c;
    kz_prompt_cache_init(&c, 3 * ENTRY_BYTES);
    CHECK(put(&c, 1) && put(&c, 2) && put(&c, 3));
    CHECK(get(&c, 1) != NULL); // 2 is now the least recently used
    CHECK(put(&c, 4));
    CHECK_MSG(get(&c, 2) == NULL, "the least recently used entry was kept");
    CHECK(get(&c, 1) != NULL && get(&c, 3) != NULL && get(&c, 4) != NULL);
    CHECK(c.n == 3 && c.bytes <= c.budget);
    kz_prompt_cache_free(&c);
}

static void test_budget(void) {
    kz_prompt_cache c;
    kz_prompt_cache_init(&c, ENTRY_BYTES - 1);
    CHECK_MSG(!put(&c, 1) && c.n == 0, "an entry larger than the budget was kept");
    kz_prompt_cache_free(&c);
    kz_prompt_cache_init(&c, 0);
    CHECK_MSG(!put(&c, 1) && get(&c, 1) == NULL, "a zero budget kept an entry");
    kz_prompt_cache_free(&c);
}

int main(void) {
    test_find();
    test_evict();
    test_budget();
    return test_main_result("test_prompt_cache");
}
