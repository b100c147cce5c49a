/*
 * bpe.c - byte-level BPE: vocab.json + merges.txt -> hash maps, and the merge
 * loop that turns one pre-tokenized piece into ids.
 *
 * Load (from text in memory; kz_bpe_load reads the two files and hands them over):
 *   vocab.json  "Ġthe": 279   (read by text/vocab_json.c) -> decode each character
 *                                through the inverse GPT-2 byte map -> raw bytes
 *                                " the" -> id 279
 *                                (open-addressing map bytes -> id, id -> bytes)
 *   merges.txt  "Ġ t" (rank r) -> (id(" "), id("t")) -> r, and id(" t") by rank
 *                                (open-addressing map of 64-bit packed slots; the
 *                                result is looked for at id 256 + r first)
 * Encode one piece (raw UTF-8 bytes of a pre-token):
 *   [word cache hit -> ids] (per encode call, for long texts)
 *   bytes -> one symbol per byte (id of that byte's one-character token)
 *         -> repeatedly merge the adjacent pair of lowest rank, leftmost on
 *            ties, until no adjacent pair has a merge -> ids
 *   Pieces up to NAIVE_MAX bytes rescan the pair ranks after each merge;
 *   longer ones (CJK runs, long punctuation or space runs) use a binary heap
 *   of (rank, position, pair) with lazy invalidation, as HF tokenizers'
 *   Word::merge_all does, so a 1 MB piece costs O(n log n), not O(n^2).
 *   Lookups in the merge table dominate the time (see bench_tokenizer).
 *
 * Traps: a merge whose parts or result are missing from vocab.json is an
 * error (HF refuses such files too); a repeated merge line takes the later
 * rank (HF and the slow Qwen2Tokenizer both build a dict from the list); the
 * "#version" header is optional and blank lines do not count as ranks.
 */
#include "text/bpe.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "io/json.h"
#include "io/text_file.h"
#include "runtime/error.h"
#include "text/vocab_json.h"

#define NO_RANK UINT32_MAX
#define NAIVE_MAX 8       // pieces up to this many bytes merge by rescanning, longer: heap
#define STACK_SYMBOLS 256 // heap-merge scratch on the stack up to this many bytes
#define MAX_MERGES_BYTES (64u << 20)

// A merge slot packs the pair and its rank (line index in merges.txt, lower
// merges first) into 64 bits, so the table stays small enough to hit cache:
// left id (21 bits) | right id (21 bits) | rank (22 bits). All ones is empty.
#define ID_LIMIT ((1u << 21) - 1)   // ids must be below this
#define RANK_LIMIT ((1u << 22) - 1) // ranks must be below this
#define RANK_MASK ((uint64_t)RANK_LIMIT)
#define EMPTY_SLOT UINT64_MAX

typedef struct vocab_slot {
    int32_t id;   // -1 for an empty slot
    uint32_t tag; // slot_tag(): high hash bits and the length, so that a lookup touches
                  // the token's bytes only to confirm a likely match (one cache miss
                  // fewer per lookup while the tables are built)
} vocab_slot;

struct kz_bpe {
    uint8_t *blob;           // raw bytes of every token, concatenated
    size_t n_blob;           // bytes of blob in use
    uint32_t *tok_off;       // [n_ids] offset into blob, UINT32_MAX for an unused id
    uint32_t *tok_len;       // [n_ids] length in bytes
    size_t n_ids;            // largest id + 1
    vocab_slot *vocab_slots; // [vocab_mask + 1] (key bytes through tok_off/tok_len)
    size_t vocab_mask;
    uint64_t *merges; // [merge_mask + 1] packed (left, right, rank) slots
    size_t merge_mask;
    int32_t *merge_result; // [number of merge lines] id of the concatenation, by rank
    size_t n_merges;       // ranks given out (merge_result's entries in use)
    int32_t byte_id[256];  // id of the one-byte token of each byte value
    bool borrowed;         // the arrays are a stored file's (kz_bpe_from_tables): not freed
};

_Static_assert(sizeof(vocab_slot) == 2 * sizeof(uint32_t), "vocab_slot is two 32-bit words");

/* ---- GPT-2 byte <-> unicode map ----------------------------------------- */

// Printable Latin-1 bytes spell themselves; the 68 others (0x00-0x20,
// 0x7F-0xA0, 0xAD) get U+0100.. in increasing byte order.
uint32_t kz_bpe_byte_to_codepoint(uint8_t b) {
    if (b <= 0x20) {
        return 0x100u + b;
    }
    if (b >= 0x7F && b <= 0xA0) {
        return 0x100u + 33 + (uint32_t)(b - 0x7F);
    }
    if (b == 0xAD) {
        return 0x100u + 67;
    }
    return b;
}

int kz_bpe_codepoint_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) {
        return (int)cp;
    }
    if (cp >= 0x100 && cp < 0x100 + 33) {
        return (int)(cp - 0x100);
    }
    if (cp >= 0x100 + 33 && cp < 0x100 + 67) {
        return (int)(cp - 0x100 - 33 + 0x7F);
    }
    if (cp == 0x100 + 67) {
        return 0xAD;
    }
    return -1;
}

/* Decodes a byte-level spelling to raw bytes into out (capacity >= strlen).
 * Returns the byte count, or -1 if a character is outside the alphabet. The
 * alphabet is U+0021..U+0143: one- and two-byte UTF-8, decoded here directly
 * (the tables are built from ~450,000 spellings); anything longer goes through
 * utf8proc, which rejects it or finds it outside the alphabet. */
static long spelling_to_bytes(const char *spelling, size_t n_chars_bytes, uint8_t *out) {
    const uint8_t *s = (const uint8_t *)spelling;
    size_t i = 0;
    long n = 0;
    while (i < n_chars_bytes) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t step;
        if (s[i] < 0x80) {
            cp = s[i];
            step = 1;
        } else if ((s[i] & 0xE0) == 0xC0 && s[i] >= 0xC2 && i + 1 < n_chars_bytes &&
                   (s[i + 1] & 0xC0) == 0x80) {
            cp = (utf8proc_int32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
            step = 2;
        } else {
            step = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n_chars_bytes - i), &cp);
            if (step <= 0) {
                return -1;
            }
        }
        int b = kz_bpe_codepoint_to_byte((uint32_t)cp);
        if (b < 0) {
            return -1;
        }
        out[n++] = (uint8_t)b;
        i += (size_t)step;
    }
    return n;
}

/* ---- hashing ------------------------------------------------------------ */

static uint64_t hash_bytes(const uint8_t *p, size_t n_bytes) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n_bytes;
    while (n_bytes >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n_bytes -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n_bytes);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint32_t left, uint32_t right) {
    uint64_t k = ((uint64_t)left << 32 | right) * 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
}

static size_t pow2_at_least(size_t n) {
    size_t cap = 16;
    while (cap < n) {
        cap <<= 1;
    }
    return cap;
}

static inline uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 43 | (uint64_t)(uint32_t)right << 22;
}

/* Rank of the merge of (left, right), or NO_RANK; the merged id is merge_result[rank]. */
static inline uint32_t merge_rank(const kz_bpe *bpe, int32_t left, int32_t right) {
    uint64_t key = pair_key(left, right);
    size_t i = (size_t)hash_pair((uint32_t)left, (uint32_t)right) & bpe->merge_mask;
    for (;;) {
        uint64_t slot = bpe->merges[i];
        if ((slot & ~RANK_MASK) == key) {
            return (uint32_t)(slot & RANK_MASK);
        }
        if (slot == EMPTY_SLOT) {
            return NO_RANK;
        }
        i = (i + 1) & bpe->merge_mask;
    }
}

/* 24 high hash bits and the length's low 8 bits (the full length is checked on a match). */
static inline uint32_t slot_tag(uint64_t h, size_t n_bytes) {
    return (uint32_t)(h >> 40) << 8 | (uint32_t)(n_bytes & 0xFF);
}

int32_t kz_bpe_find(const kz_bpe *bpe, const uint8_t *bytes, size_t n_bytes) {
    uint64_t h = hash_bytes(bytes, n_bytes);
    uint32_t tag = slot_tag(h, n_bytes);
    size_t i = (size_t)h & bpe->vocab_mask;
    for (;;) {
        int32_t id = bpe->vocab_slots[i].id;
        if (id < 0) {
            return -1;
        }
        if (bpe->vocab_slots[i].tag == tag && bpe->tok_len[id] == n_bytes &&
            memcmp(bpe->blob + bpe->tok_off[id], bytes, n_bytes) == 0) {
            return id;
        }
        i = (i + 1) & bpe->vocab_mask;
    }
}

int32_t kz_bpe_find_spelling(const kz_bpe *bpe, const char *spelling, size_t n_bytes) {
    uint8_t small[256];
    uint8_t *raw = n_bytes <= sizeof small ? small : malloc(n_bytes);
    if (!raw) {
        return -1;
    }
    long n_raw = spelling_to_bytes(spelling, n_bytes, raw);
    int32_t id = n_raw > 0 ? kz_bpe_find(bpe, raw, (size_t)n_raw) : -1;
    if (raw != small) {
        free(raw);
    }
    return id;
}

/* ---- loading ------------------------------------------------------------ */

void kz_bpe_free(kz_bpe *bpe) {
    if (!bpe) {
        return;
    }
    if (bpe->borrowed) {
        free(bpe);
        return;
    }
    free(bpe->blob);
    free(bpe->tok_off);
    free(bpe->tok_len);
    free(bpe->vocab_slots);
    free(bpe->merges);
    free(bpe->merge_result);
    free(bpe);
}

/* First pass over vocab.json's entries: id range and total key bytes. */
static kz_status vocab_scan(const char *label, const kz_vocab_json *v, size_t *n_ids,
                            size_t *n_blob) {
    int64_t max_id = -1;
    size_t blob = 0;
    for (size_t i = 0; i < v->n_entries; i++) {
        max_id = v->entries[i].id > max_id ? v->entries[i].id : max_id;
        blob += v->entries[i].len;
    }
    if (v->n_entries == 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: empty vocabulary", label);
    }
    if (max_id >= ID_LIMIT) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: id %lld is too large (at most %u)", label,
                            (long long)max_id, ID_LIMIT - 1);
    }
    *n_ids = (size_t)max_id + 1;
    *n_blob = blob;
    return KZ_OK;
}

static kz_status vocab_insert(kz_bpe *bpe, const char *label, const char *spelling,
                              size_t n_spelling, int32_t id, uint32_t *blob_used) {
    if (bpe->tok_off[id] != UINT32_MAX) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: id %d is used twice", label, (int)id);
    }
    uint8_t *dst = bpe->blob + *blob_used;
    long n = spelling_to_bytes(spelling, n_spelling, dst);
    if (n <= 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: token \"%s\" is not spelled in the byte-level alphabet", label,
                            spelling);
    }
    if (kz_bpe_find(bpe, dst, (size_t)n) >= 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: token \"%s\" appears twice", label, spelling);
    }
    bpe->tok_off[id] = *blob_used;
    bpe->tok_len[id] = (uint32_t)n;
    *blob_used += (uint32_t)n;
    uint64_t h = hash_bytes(dst, (size_t)n);
    size_t i = (size_t)h & bpe->vocab_mask;
    while (bpe->vocab_slots[i].id >= 0) {
        i = (i + 1) & bpe->vocab_mask;
    }
    bpe->vocab_slots[i] = (vocab_slot){id, slot_tag(h, (size_t)n)};
    if (n == 1) {
        bpe->byte_id[dst[0]] = id;
    }
    return KZ_OK;
}

static kz_status vocab_parse(kz_bpe *bpe, const char *label, const char *text, size_t n_bytes) {
    kz_vocab_json v;
    kz_status st = kz_vocab_json_read(label, text, n_bytes, &v);
    if (st != KZ_OK) {
        return st;
    }
    size_t n_blob = 0;
    st = vocab_scan(label, &v, &bpe->n_ids, &n_blob);
    if (st == KZ_OK) {
        bpe->vocab_mask = pow2_at_least(v.n_entries * 2) - 1;
        bpe->blob = malloc(n_blob + 1);
        bpe->tok_off = malloc(bpe->n_ids * sizeof *bpe->tok_off);
        bpe->tok_len = calloc(bpe->n_ids, sizeof *bpe->tok_len);
        bpe->vocab_slots = malloc((bpe->vocab_mask + 1) * sizeof *bpe->vocab_slots);
        if (!bpe->blob || !bpe->tok_off || !bpe->tok_len || !bpe->vocab_slots) {
            st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
        }
    }
    if (st == KZ_OK) {
        memset(bpe->tok_off, 0xFF, bpe->n_ids * sizeof *bpe->tok_off);
        memset(bpe->vocab_slots, 0xFF, (bpe->vocab_mask + 1) * sizeof *bpe->vocab_slots);
        uint32_t blob_used = 0;
        for (size_t i = 0; i < v.n_entries && st == KZ_OK; i++) {
            const kz_vocab_entry *e = &v.entries[i];
            st = vocab_insert(bpe, label, v.strings + e->off, e->len, e->id, &blob_used);
        }
        bpe->n_blob = blob_used;
    }
    kz_vocab_json_free(&v);
    for (int b = 0; b < 256 && st == KZ_OK; b++) {
        if (bpe->byte_id[b] < 0) {
            st = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: no token for byte 0x%02X", label, b);
        }
    }
    return st;
}

/* Looks up one half of a merge line by its spelling; -1 if not in the vocab. */
static int32_t find_spelling(const kz_bpe *bpe, const char *spelling, size_t n, uint8_t *scratch) {
    long n_raw = spelling_to_bytes(spelling, n, scratch);
    return n_raw > 0 ? kz_bpe_find(bpe, scratch, (size_t)n_raw) : -1;
}

/* Byte-level BPE vocabularies trained by HF (GPT-2, Qwen2) give the token made by
 * merge `rank` the id 256 + rank (all 151,387 of Qwen's). Checking that id first
 * reads the tables in order instead of a random hash probe; -1 if it is not it. */
static int32_t guess_merged(const kz_bpe *bpe, uint32_t rank, const uint8_t *bytes,
                            size_t n_bytes) {
    size_t id = 256 + (size_t)rank;
    if (id < bpe->n_ids && bpe->tok_off[id] != UINT32_MAX && bpe->tok_len[id] == n_bytes &&
        memcmp(bpe->blob + bpe->tok_off[id], bytes, n_bytes) == 0) {
        return (int32_t)id;
    }
    return -1;
}

static kz_status merge_add(kz_bpe *bpe, const char *label, size_t line_no, const char *line,
                           size_t n_line, uint32_t rank, uint8_t *scratch) {
    const char *space = memchr(line, ' ', n_line);
    if (!space || space == line || space + 1 == line + n_line ||
        memchr(space + 1, ' ', (size_t)(line + n_line - space - 1))) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: line %zu: expected \"left right\"", label,
                            line_no);
    }
    size_t n_left = (size_t)(space - line), n_right = n_line - n_left - 1;
    int32_t left = find_spelling(bpe, line, n_left, scratch);
    int32_t right = find_spelling(bpe, space + 1, n_right, scratch);
    int32_t merged = -1;
    if (left >= 0 && right >= 0) {
        size_t n_a = bpe->tok_len[left], n_b = bpe->tok_len[right];
        memcpy(scratch, bpe->blob + bpe->tok_off[left], n_a);
        memcpy(scratch + n_a, bpe->blob + bpe->tok_off[right], n_b);
        merged = guess_merged(bpe, rank, scratch, n_a + n_b);
        merged = merged >= 0 ? merged : kz_bpe_find(bpe, scratch, n_a + n_b);
    }
    if (merged < 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: line %zu: merge \"%.*s\" refers to a token not in vocab.json",
                            label, line_no, (int)n_line, line);
    }
    bpe->merge_result[rank] = merged;
    uint64_t key = pair_key(left, right);
    size_t i = (size_t)hash_pair((uint32_t)left, (uint32_t)right) & bpe->merge_mask;
    while (bpe->merges[i] != EMPTY_SLOT && (bpe->merges[i] & ~RANK_MASK) != key) {
        i = (i + 1) & bpe->merge_mask;
    }
    bpe->merges[i] = key | rank; // a repeated pair takes the later rank
    return KZ_OK;
}

static kz_status merges_parse(kz_bpe *bpe, const char *label, const char *text, size_t n_bytes) {
    if (n_bytes > MAX_MERGES_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: larger than %u MB", label,
                            MAX_MERGES_BYTES >> 20);
    }
    size_t n_lines = 1;
    for (size_t i = 0; i < n_bytes; i++) {
        n_lines += text[i] == '\n';
    }
    if (n_lines >= RANK_LIMIT) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: more than %u merges", label, RANK_LIMIT);
    }
    bpe->merge_mask = pow2_at_least(n_lines * 2) - 1;
    bpe->merges = malloc((bpe->merge_mask + 1) * sizeof *bpe->merges);
    bpe->merge_result = malloc(n_lines * sizeof *bpe->merge_result);
    uint8_t *scratch = malloc(n_bytes + 1);
    if (!bpe->merges || !bpe->merge_result || !scratch) {
        free(scratch);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
    }
    memset(bpe->merges, 0xFF, (bpe->merge_mask + 1) * sizeof *bpe->merges);
    kz_status st = KZ_OK;
    uint32_t rank = 0;
    size_t line_no = 0;
    for (const char *line = text; line < text + n_bytes && st == KZ_OK;) {
        const char *end = memchr(line, '\n', (size_t)(text + n_bytes - line));
        if (!end) {
            end = text + n_bytes;
        }
        size_t n_line = (size_t)(end - line);
        if (n_line > 0 && line[n_line - 1] == '\r') {
            n_line--;
        }
        line_no++;
        bool header = line_no == 1 && n_line >= 9 && memcmp(line, "#version:", 9) == 0;
        if (n_line > 0 && !header) {
            st = merge_add(bpe, label, line_no, line, n_line, rank++, scratch);
        }
        line = end + 1;
    }
    bpe->n_merges = rank;
    free(scratch);
    return st;
}

kz_status kz_bpe_load_text(const char *vocab_label, const char *vocab_json, size_t vocab_bytes,
                           const char *merges_label, const char *merges_txt, size_t merges_bytes,
                           kz_bpe **out) {
    *out = NULL;
    kz_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", vocab_label);
    }
    memset(bpe->byte_id, 0xFF, sizeof bpe->byte_id);
    kz_status st = vocab_parse(bpe, vocab_label, vocab_json, vocab_bytes);
    if (st == KZ_OK) {
        st = merges_parse(bpe, merges_label, merges_txt ? merges_txt : "", merges_bytes);
    }
    if (st != KZ_OK) {
        kz_bpe_free(bpe);
        return st;
    }
    *out = bpe;
    return KZ_OK;
}

kz_status kz_bpe_load(const char *vocab_path, const char *merges_path, kz_bpe **out) {
    *out = NULL;
    char *vocab = NULL, *merges = NULL;
    size_t vocab_bytes = 0, merges_bytes = 0;
    kz_status st = kz_text_file_read(vocab_path, KZ_JSON_MAX_BYTES + 1, &vocab, &vocab_bytes);
    if (st == KZ_OK) {
        st = kz_text_file_read(merges_path, MAX_MERGES_BYTES + 1, &merges, &merges_bytes);
    }
    if (st == KZ_OK) {
        st = kz_bpe_load_text(vocab_path, vocab, vocab_bytes, merges_path, merges, merges_bytes,
                              out);
    }
    free(vocab);
    free(merges);
    return st;
}
/* ---- stored tables ------------------------------------------------------ */

void kz_bpe_tables_of(const kz_bpe *bpe, kz_bpe_tables *t) {
    *t = (kz_bpe_tables){.blob = bpe->blob,
                         .n_blob = bpe->n_blob,
                         .tok_off = bpe->tok_off,
                         .tok_len = bpe->tok_len,
                         .n_ids = bpe->n_ids,
                         .vocab_slots = (const uint32_t *)bpe->vocab_slots,
                         .n_vocab_slots = bpe->vocab_mask + 1,
                         .merge_slots = bpe->merges,
                         .n_merge_slots = bpe->merge_mask + 1,
                         .merge_result = bpe->merge_result,
                         .n_merges = bpe->n_merges,
                         .byte_id = bpe->byte_id};
}

/* Whether id names a token of t (an offset inside the blob). */
static bool table_id_ok(const kz_bpe_tables *t, int64_t id) {
    return id >= 0 && (uint64_t)id < t->n_ids && t->tok_off[id] != UINT32_MAX;
}

/* Sizes, and every token's bytes inside the blob (unused ids empty). */
static const char *check_tokens(const kz_bpe_tables *t) {
    if (t->n_ids == 0 || t->n_ids > ID_LIMIT || t->n_blob == 0 || t->n_blob >= UINT32_MAX ||
        t->n_merges == 0 || t->n_merges > RANK_LIMIT) {
        return "table sizes out of range";
    }
    if (t->n_vocab_slots < 16 || (t->n_vocab_slots & (t->n_vocab_slots - 1)) ||
        t->n_merge_slots < 16 || (t->n_merge_slots & (t->n_merge_slots - 1))) {
        return "hash tables are not powers of two";
    }
    for (size_t id = 0; id < t->n_ids; id++) {
        uint32_t off = t->tok_off[id], len = t->tok_len[id];
        if (off == UINT32_MAX ? len != 0 : len == 0 || off > t->n_blob || len > t->n_blob - off) {
            return "a token's bytes lie outside the blob";
        }
    }
    for (int b = 0; b < 256; b++) {
        int32_t id = t->byte_id[b];
        if (!table_id_ok(t, id) || t->tok_len[id] != 1 || t->blob[t->tok_off[id]] != b) {
            return "a byte's token is missing";
        }
    }
    return NULL;
}

/* Every hash slot empty or naming known tokens and ranks, at least one slot empty in each
 * table (a probe for a missing key ends there), every merge's result a token. */
static const char *check_slots(const kz_bpe_tables *t) {
    size_t empty = 0;
    for (size_t i = 0; i < t->n_vocab_slots; i++) {
        int32_t id = (int32_t)t->vocab_slots[2 * i];
        empty += id < 0;
        if (id < -1 || (id >= 0 && !table_id_ok(t, id))) {
            return "a vocabulary slot names no token";
        }
    }
    if (empty == 0) {
        return "the vocabulary table has no empty slot";
    }
    empty = 0;
    for (size_t i = 0; i < t->n_merge_slots; i++) {
        uint64_t slot = t->merge_slots[i];
        empty += slot == EMPTY_SLOT;
        if (slot != EMPTY_SLOT &&
            (!table_id_ok(t, (int64_t)(slot >> 43)) ||
             !table_id_ok(t, (int64_t)(slot >> 22 & ID_LIMIT)) || (slot & RANK_MASK) >= t->n_merges)) {
            return "a merge slot names no token or rank";
        }
    }
    if (empty == 0) {
        return "the merge table has no empty slot";
    }
    for (size_t r = 0; r < t->n_merges; r++) {
        if (!table_id_ok(t, t->merge_result[r])) {
            return "a merge's result is no token";
        }
    }
    return NULL;
}

kz_status kz_bpe_from_tables(const char *label, const kz_bpe_tables *t, kz_bpe **out) {
    *out = NULL;
    const char *bad = check_tokens(t);
    bad = bad ? bad : check_slots(t);
    if (bad) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: stored tokenizer tables: %s", label, bad);
    }
    kz_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
    }
    // The arrays are only read: the casts drop the const of a borrowed, read-only mapping.
    *bpe = (kz_bpe){.blob = (uint8_t *)t->blob,
                    .n_blob = t->n_blob,
                    .tok_off = (uint32_t *)t->tok_off,
                    .tok_len = (uint32_t *)t->tok_len,
                    .n_ids = t->n_ids,
                    .vocab_slots = (vocab_slot *)t->vocab_slots,
                    .vocab_mask = t->n_vocab_slots - 1,
                    .merges = (uint64_t *)t->merge_slots,
                    .merge_mask = t->n_merge_slots - 1,
                    .merge_result = (int32_t *)t->merge_result,
                    .n_merges = t->n_merges,
                    .borrowed = true};
    memcpy(bpe->byte_id, t->byte_id, sizeof bpe->byte_id);
    *out = bpe;
    return KZ_OK;
}

const uint8_t *kz_bpe_token_bytes(const kz_bpe *bpe, int32_t id, size_t *n_bytes) {
    if (id < 0 || (size_t)id >= bpe->n_ids || bpe->tok_off[id] == UINT32_MAX) {
        *n_bytes = 0;
        return NULL;
    }
    *n_bytes = bpe->tok_len[id];
    return bpe->blob + bpe->tok_off[id];
}

size_t kz_bpe_n_ids(const kz_bpe *bpe) {
    return bpe->n_ids;
}

/* ---- id list ------------------------------------------------------------ */

static kz_status ids_reserve(kz_bpe_ids *list, size_t extra) {
    if (list->n_ids + extra <= list->cap) {
        return KZ_OK;
    }
    size_t cap = list->cap ? list->cap : 64;
    while (cap < list->n_ids + extra) {
        cap *= 2;
    }
    int32_t *grown = realloc(list->ids, cap * sizeof *grown);
    if (!grown) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory for %zu ids", cap);
    }
    list->ids = grown;
    list->cap = cap;
    return KZ_OK;
}

kz_status kz_bpe_ids_push(kz_bpe_ids *list, int32_t id) {
    kz_status st = ids_reserve(list, 1);
    if (st == KZ_OK) {
        list->ids[list->n_ids++] = id;
    }
    return st;
}

/* ---- merge loops -------------------------------------------------------- */

/* Merges sym[0..n) in place by rescanning the pair ranks; returns the new count. */
static size_t merge_naive(const kz_bpe *bpe, int32_t *sym, size_t n) {
    uint32_t rank[NAIVE_MAX];
    for (size_t i = 0; i + 1 < n; i++) {
        rank[i] = merge_rank(bpe, sym[i], sym[i + 1]);
    }
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++) {
            if (rank[i] < rank[best]) {
                best = i;
            }
        }
        if (rank[best] == NO_RANK) {
            break;
        }
        // sym[best] absorbs sym[best + 1]; pairs right of it shift down by one.
        sym[best] = bpe->merge_result[rank[best]];
        for (size_t i = best + 1; i + 1 < n; i++) {
            sym[i] = sym[i + 1];
        }
        for (size_t i = best + 1; i + 2 < n; i++) {
            rank[i] = rank[i + 1];
        }
        n--;
        if (best > 0) {
            rank[best - 1] = merge_rank(bpe, sym[best - 1], sym[best]);
        }
        if (best + 1 < n) {
            rank[best] = merge_rank(bpe, sym[best], sym[best + 1]);
        }
    }
    return n;
}

typedef struct heap_item {
    uint32_t rank;
    uint32_t pos;        // index of the pair's left symbol
    int32_t left, right; // the pair's ids when pushed, to recognise stale entries
} heap_item;

static inline bool heap_less(heap_item a, heap_item b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_item *heap, size_t *n, heap_item item) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(item, heap[parent])) {
            break;
        }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static heap_item heap_pop(heap_item *heap, size_t *n) {
    heap_item top = heap[0], last = heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n) {
            break;
        }
        if (child + 1 < *n && heap_less(heap[child + 1], heap[child])) {
            child++;
        }
        if (!heap_less(heap[child], last)) {
            break;
        }
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = last;
    return top;
}

/* Pushes the pair starting at symbol `pos` if it has a merge. */
static inline void push_pair(const kz_bpe *bpe, heap_item *heap, size_t *n_heap, const int32_t *sym,
                             int32_t pos, int32_t right) {
    uint32_t r = merge_rank(bpe, sym[pos], sym[right]);
    if (r != NO_RANK) {
        heap_push(heap, n_heap, (heap_item){r, (uint32_t)pos, sym[pos], sym[right]});
    }
}

/* Merges sym[0..n) in place with a heap over (rank, position); returns the new
 * count. A popped entry is stale when the symbols at its position are no
 * longer the pair it was pushed for. */
static kz_status merge_heap(const kz_bpe *bpe, int32_t *sym, size_t n, size_t *n_out) {
    int32_t next_stack[STACK_SYMBOLS], prev_stack[STACK_SYMBOLS];
    heap_item heap_stack[3 * STACK_SYMBOLS]; // initial pairs + two per merge
    int32_t *next = next_stack, *prev = prev_stack;
    heap_item *heap = heap_stack;
    if (n > STACK_SYMBOLS) {
        next = malloc(n * sizeof *next);
        prev = malloc(n * sizeof *prev);
        heap = malloc(3 * n * sizeof *heap);
        if (!next || !prev || !heap) {
            free(next);
            free(prev);
            free(heap);
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                "tokenizer: out of memory for a %zu-byte piece", n);
        }
    }
    size_t n_heap = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        if (i + 1 < n) {
            push_pair(bpe, heap, &n_heap, sym, (int32_t)i, (int32_t)i + 1);
        }
    }
    while (n_heap > 0) {
        heap_item top = heap_pop(heap, &n_heap);
        int32_t pos = (int32_t)top.pos, right = next[pos];
        if (sym[pos] != top.left || right < 0 || sym[right] != top.right) {
            continue;
        }
        sym[pos] = bpe->merge_result[top.rank];
        sym[right] = -1;
        next[pos] = next[right];
        if (next[pos] >= 0) {
            prev[next[pos]] = pos;
        }
        if (prev[pos] >= 0) {
            push_pair(bpe, heap, &n_heap, sym, prev[pos], pos);
        }
        if (next[pos] >= 0) {
            push_pair(bpe, heap, &n_heap, sym, pos, next[pos]);
        }
    }
    size_t count = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) { // symbol 0 survives: merges keep the left slot
        sym[count++] = sym[i];
    }
    if (next != next_stack) {
        free(next);
        free(prev);
        free(heap);
    }
    *n_out = count;
    return KZ_OK;
}

/* ---- word cache --------------------------------------------------------- */

#define CACHE_SLOTS 4096 // direct-mapped; a collision overwrites
#define CACHE_KEY_MAX 46
#define CACHE_IDS_MAX 16

typedef struct cache_slot {
    uint64_t hash;
    uint8_t n_bytes; // 0 = empty
    uint8_t n_ids;
    uint8_t key[CACHE_KEY_MAX];
    int32_t ids[CACHE_IDS_MAX];
} cache_slot;

struct kz_bpe_cache {
    cache_slot slots[CACHE_SLOTS];
};

kz_bpe_cache *kz_bpe_cache_new(void) {
    return calloc(1, sizeof(kz_bpe_cache));
}

void kz_bpe_cache_free(kz_bpe_cache *cache) {
    free(cache);
}

/* ---- encode ------------------------------------------------------------- */

kz_status kz_bpe_encode_piece(const kz_bpe *bpe, kz_bpe_cache *cache, const uint8_t *piece,
                              size_t n_bytes, kz_bpe_ids *out) {
    if (n_bytes == 1) {
        return kz_bpe_ids_push(out, bpe->byte_id[piece[0]]);
    }
    cache_slot *slot = NULL;
    uint64_t h = 0;
    if (cache && n_bytes <= CACHE_KEY_MAX) {
        h = hash_bytes(piece, n_bytes);
        slot = &cache->slots[h & (CACHE_SLOTS - 1)];
        if (slot->n_bytes == n_bytes && slot->hash == h && memcmp(slot->key, piece, n_bytes) == 0) {
            kz_status st = ids_reserve(out, slot->n_ids);
            if (st == KZ_OK) {
                memcpy(out->ids + out->n_ids, slot->ids, slot->n_ids * sizeof *slot->ids);
                out->n_ids += slot->n_ids;
            }
            return st;
        }
    }
    kz_status st = ids_reserve(out, n_bytes);
    if (st != KZ_OK) {
        return st;
    }
    // Symbols are built directly in the output list (n_bytes slots reserved).
    int32_t *sym = out->ids + out->n_ids;
    for (size_t i = 0; i < n_bytes; i++) {
        sym[i] = bpe->byte_id[piece[i]];
    }
    size_t n_sym = n_bytes;
    if (n_bytes <= NAIVE_MAX) {
        n_sym = merge_naive(bpe, sym, n_bytes);
    } else {
        st = merge_heap(bpe, sym, n_bytes, &n_sym);
        if (st != KZ_OK) {
            return st;
        }
    }
    if (slot && n_sym <= CACHE_IDS_MAX) {
        slot->hash = h;
        slot->n_bytes = (uint8_t)n_bytes;
        slot->n_ids = (uint8_t)n_sym;
        memcpy(slot->key, piece, n_bytes);
        memcpy(slot->ids, sym, n_sym * sizeof *sym);
    }
    out->n_ids += n_sym;
    return KZ_OK;
}
