/*
 * tokenizer.h - Qwen2 byte-level BPE text tokenizer (vocab.json + merges.txt +
 * the added special tokens of tokenizer_config.json).
 *
 * encode: UTF-8 check -> split out special tokens (exact string matches,
 * longest first, anywhere) -> NFC each remaining span -> pre-split with the
 * Qwen2 regex (or the Mistral variant) -> GPT-2 byte-to-unicode map -> BPE by
 * merge rank -> ids. No BOS/EOS is added.
 */
#ifndef KZ_TOKENIZER_H
#define KZ_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "io/utf8.h"
#include "kztts.h"
#include "text/bpe.h"

typedef struct kz_tokenizer kz_tokenizer;

typedef enum kz_split_mode {
    KZ_SPLIT_QWEN2 = 0,   /* the Qwen2 pre-tokenizer regex (spec section 2) */
    KZ_SPLIT_MISTRAL = 1, /* the pattern transformers' fix_mistral_regex installs */
} kz_split_mode;

/* The tokenizer's files as text in memory (e.g. GGUF metadata strings), all
 * borrowed for the call. Texts need not be NUL-terminated. */
typedef struct kz_tokenizer_text {
    const char *label;       /* where they come from; messages name "label:vocab.json" etc. */
    const char *vocab_json;  /* vocab.json, vocab_bytes long (at most 16 MB) */
    size_t vocab_bytes;
    const char *merges_txt;  /* merges.txt, merges_bytes long (at most 64 MB) */
    size_t merges_bytes;
    const char *config_json; /* tokenizer_config.json, config_bytes long (at most 16 MB) */
    size_t config_bytes;
    /* Optional: the BPE model's tables as built from vocab_json and merges_txt (a GGUF
     * stores them), used in place and outliving the tokenizer, instead of building them
     * again; the texts are then not parsed. NULL: built from the texts. */
    const kz_bpe_tables *bpe_tables;
} kz_tokenizer_text;

/* Builds a tokenizer from vocab.json, merges.txt and the added tokens of
 * tokenizer_config.json ("added_tokens_decoder"). A NULL pointer in src is
 * KZ_STATUS_INVALID_ARGUMENT; bad content is KZ_STATUS_BAD_MODEL with a message
 * naming the file after the label and what is wrong ("model.gguf:merges.txt:
 * line 2: expected \"left right\""). On success *out owns the tokenizer
 * (kz_tokenizer_free); else it is NULL. */
kz_status kz_tokenizer_load_text(const kz_tokenizer_text *src, kz_tokenizer **out);

/* Reads dir/vocab.json, dir/merges.txt and dir/tokenizer_config.json and builds
 * the tokenizer as above; messages name the file's path ("DIR/vocab.json: ..."),
 * a file that cannot be read is KZ_STATUS_IO. */
kz_status kz_tokenizer_load(const char *dir, kz_tokenizer **out);
void kz_tokenizer_free(kz_tokenizer *t);

/* The tokenizer's BPE model (borrowed), whose tables kztts quantize stores. */
const kz_bpe *kz_tokenizer_bpe(const kz_tokenizer *t);

/* Encodes n_bytes of UTF-8 text. *ids is malloc'ed (caller frees), *n_ids its
 * length. Invalid UTF-8 returns KZ_STATUS_BAD_INPUT naming the byte offset. */
kz_status kz_tokenizer_encode(const kz_tokenizer *t, const char *text, size_t n_bytes,
                              kz_split_mode mode, int32_t **ids, size_t *n_ids);

/* For text that may still grow: a byte offset b <= n_bytes such that encoding
 * text[0, b) gives a prefix of the ids of any longer text starting with
 * text[0, n_bytes). It stops before the last two pre-tokenizer pieces (appending
 * can change those) and before an incomplete UTF-8 sequence at the end; 0 for
 * invalid UTF-8. */
size_t kz_tokenizer_stable_prefix(const kz_tokenizer *t, const char *text, size_t n_bytes,
                                  kz_split_mode mode);

/* Id of an exact token string, or -1: an added token's content ("<|im_start|>")
 * or a vocabulary token as spelled in vocab.json ("assistant", "Ġthe", "Ċ"). */
int32_t kz_tokenizer_find(const kz_tokenizer *t, const char *token);

/* Number of ids (vocabulary + added tokens). */
size_t kz_tokenizer_size(const kz_tokenizer *t);

/* Bytes of token `id`: an added token's content, or a vocabulary token's raw
 * bytes (the byte-level spelling decoded; may be part of a UTF-8 character).
 * Borrowed from t, not NUL-terminated; NULL (and *n_bytes = 0) for an unknown id. */
const char *kz_tokenizer_token(const kz_tokenizer *t, int32_t id, size_t *n_bytes);

#endif
