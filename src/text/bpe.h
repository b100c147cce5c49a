/*
 * bpe.h - the byte-level BPE model of the text tokenizer: vocabulary, merge
 * ranks and the merge loop, working on raw bytes.
 *
 * vocab.json spells every token in the GPT-2 byte-to-unicode alphabet (byte
 * 0x20 ' ' is "Ġ", 0x0A is "Ċ"). At load each spelling is mapped back to its
 * raw bytes, so the encoder never builds the mapped string: a piece's bytes
 * start as one symbol each (the id of that byte's one-character token) and
 * merge by rank, exactly as merging the mapped characters would.
 *
 *   vocab.json  {"token": id}       -> raw bytes <-> id (hash map + id table)
 *   merges.txt  "a b" in rank order -> (id_a, id_b) -> (rank, id of a+b)
 *   piece bytes -> byte ids -> merge the lowest-rank adjacent pair (leftmost
 *                  on ties) until none applies -> ids
 *
 * The merge order is the one of HF tokenizers' BPE (Word::merge_all) and of
 * transformers.js: lowest rank first, ties broken by the leftmost position.
 */
#ifndef KZ_BPE_H
#define KZ_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

typedef struct kz_bpe kz_bpe;

/* Growable list of ids the encoder appends to. Zero-initialise; free ids. */
typedef struct kz_bpe_ids {
    int32_t *ids;
    size_t n_ids;
    size_t cap;
} kz_bpe_ids;

/* Appends one id (KZ_STATUS_OUT_OF_MEMORY if it cannot grow). */
kz_status kz_bpe_ids_push(kz_bpe_ids *list, int32_t id);

/* Builds the model from the text of vocab.json (vocab_bytes, at most 16 MB)
 * and merges.txt (merges_bytes, at most 64 MB). Neither needs a terminating
 * NUL; either may be NULL only when its length is 0. Errors are
 * KZ_STATUS_BAD_MODEL (or KZ_STATUS_OUT_OF_MEMORY) and name the entry after
 * the text's label ("model.gguf:vocab.json: id 7 is used twice", "dir/merges.txt:
 * line 3: ..."). On success *out owns the model (kz_bpe_free); else it is NULL. */
kz_status kz_bpe_load_text(const char *vocab_label, const char *vocab_json, size_t vocab_bytes,
                           const char *merges_label, const char *merges_txt, size_t merges_bytes,
                           kz_bpe **out);

/* Reads vocab.json and merges.txt and builds the model as above, each path as
 * its label; a file that cannot be read is KZ_STATUS_IO. */
kz_status kz_bpe_load(const char *vocab_path, const char *merges_path, kz_bpe **out);
void kz_bpe_free(kz_bpe *bpe);

/* The built model's arrays, which a GGUF stores (model/gguf_layout.h) so that a load
 * uses them in place instead of building them from vocab.json and merges.txt again:
 *   blob [n_blob]                 raw bytes of every token, concatenated
 *   tok_off, tok_len [n_ids]      each id's bytes in blob (UINT32_MAX, 0: unused id)
 *   vocab_slots [n_vocab_slots][2] open-addressing map bytes -> id: (id or -1, tag)
 *   merge_slots [n_merge_slots]   open-addressing map of packed (left, right, rank)
 *   merge_result [n_merges]       id of each merge's concatenation, by rank
 *   byte_id [256]                 id of each byte value's one-byte token
 * Both maps hash with bpe.c's functions, so the tables are only valid for readers that
 * hash alike: a GGUF marks them with KZ_BPE_TABLES_VERSION. */
#define KZ_BPE_TABLES_VERSION 1u
typedef struct kz_bpe_tables {
    const uint8_t *blob;
    size_t n_blob;
    const uint32_t *tok_off, *tok_len;
    size_t n_ids;
    const uint32_t *vocab_slots;
    size_t n_vocab_slots;
    const uint64_t *merge_slots;
    size_t n_merge_slots;
    const int32_t *merge_result;
    size_t n_merges;
    const int32_t *byte_id;
} kz_bpe_tables;

/* *t: bpe's arrays (borrowed from bpe). */
void kz_bpe_tables_of(const kz_bpe *bpe, kz_bpe_tables *t);

/* A model over stored tables, used in place (borrowed: they must outlive the model).
 * Everything a lookup follows is checked first (sizes, every token's bytes inside the
 * blob, every slot's ids and ranks, an empty slot in each map, the byte tokens), so a
 * damaged file gives KZ_STATUS_BAD_MODEL naming label, never a read outside the
 * tables; tables that are well-formed but not those of the file's vocabulary give
 * other ids, as altered weights give other audio. */
kz_status kz_bpe_from_tables(const char *label, const kz_bpe_tables *t, kz_bpe **out);

/* Word cache for one encode call: maps a piece's bytes to its ids. Not shared
 * between threads (the model stays immutable). NULL on allocation failure,
 * which only means no caching. */
typedef struct kz_bpe_cache kz_bpe_cache;
kz_bpe_cache *kz_bpe_cache_new(void);
void kz_bpe_cache_free(kz_bpe_cache *cache);

/* Appends the ids of one pre-tokenized piece (raw UTF-8 bytes, n_bytes >= 1).
 * cache may be NULL. */
kz_status kz_bpe_encode_piece(const kz_bpe *bpe, kz_bpe_cache *cache, const uint8_t *piece,
                              size_t n_bytes, kz_bpe_ids *out);

/* Id of the token whose raw bytes are exactly bytes[0..n_bytes), or -1. */
int32_t kz_bpe_find(const kz_bpe *bpe, const uint8_t *bytes, size_t n_bytes);

/* Id of the token spelled `spelling` (n_bytes of UTF-8 in the byte-level
 * alphabet, as written in vocab.json, e.g. "Ġthe"), or -1. */
int32_t kz_bpe_find_spelling(const kz_bpe *bpe, const char *spelling, size_t n_bytes);

/* Raw bytes of token `id` (borrowed, owned by bpe; not NUL-terminated), or
 * NULL if id is not in the vocabulary. */
const uint8_t *kz_bpe_token_bytes(const kz_bpe *bpe, int32_t id, size_t *n_bytes);

/* Largest vocabulary id + 1. */
size_t kz_bpe_n_ids(const kz_bpe *bpe);

/* GPT-2 byte-to-unicode map: the code point that spells byte b in vocab.json,
 * and its inverse (-1 for a code point outside the 256-character alphabet). */
uint32_t kz_bpe_byte_to_codepoint(uint8_t b);
int kz_bpe_codepoint_to_byte(uint32_t cp);

#endif
