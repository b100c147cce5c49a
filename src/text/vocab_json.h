/*
 * vocab_json.h - reading vocab.json, one flat JSON object of "spelling": id pairs.
 *
 * The BPE vocabulary is 151,643 string keys with integer values; a cJSON tree of it (a
 * node, a key copy and a strtod per entry) would take a large share of the tokenizer's
 * load (docs/ARCHITECTURE.md#model-loading). This reader decodes the keys (all JSON
 * escapes, surrogate pairs to UTF-8) into one buffer and the values into integers in a
 * single pass, and accepts only that shape:
 *
 *   text --kz_vocab_json_read--> entries[i] = {key at strings + off, len bytes; id}
 *
 * Anything else (not an object, a value that is not an integer in [0, 2^31), bad
 * escapes, trailing bytes) is an error naming the label and the byte offset.
 */
#ifndef KZ_VOCAB_JSON_H
#define KZ_VOCAB_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

typedef struct kz_vocab_entry {
    uint32_t off; /* key: UTF-8 bytes at strings + off, NUL-terminated */
    uint32_t len; /* key length in bytes */
    int32_t id;   /* value */
} kz_vocab_entry;

typedef struct kz_vocab_json {
    kz_vocab_entry *entries; /* in file order */
    size_t n_entries;
    size_t capacity; /* entries allocated */
    char *strings;   /* the decoded keys */
} kz_vocab_json;

/* Parses n_bytes of text (at most KZ_JSON_MAX_BYTES). On success the caller frees
 * with kz_vocab_json_free. */
kz_status kz_vocab_json_read(const char *label, const char *text, size_t n_bytes,
                             kz_vocab_json *out);
void kz_vocab_json_free(kz_vocab_json *v);

#endif
