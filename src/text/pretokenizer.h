/*
 * pretokenizer.h - the regex pre-split of the text tokenizer (HF
 * pre_tokenizers.Split with behavior "isolated"): NFC text -> pieces that BPE
 * encodes one by one.
 *
 *   text --PCRE2 (Qwen2 or Mistral pattern, leftmost-first alternation)-->
 *   [match][gap?][match]... every match and every unmatched gap is a piece,
 *   in order, so the pieces concatenate back to the text.
 */
#ifndef KZ_PRETOKENIZER_H
#define KZ_PRETOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"
#include "text/tokenizer.h"

typedef struct kz_pretokenizer kz_pretokenizer;

/* Compiles both split patterns (JIT when available). Immutable afterwards and
 * shareable between threads. */
kz_status kz_pretokenizer_new(kz_pretokenizer **out);
void kz_pretokenizer_free(kz_pretokenizer *pre);

/* Receives one piece; a status other than KZ_OK stops the split. */
typedef kz_status (*kz_pretokenizer_piece_fn)(const uint8_t *piece, size_t n_bytes, void *user);

/* Splits n_bytes of valid UTF-8 (not checked again) and calls fn for each
 * piece in order. */
kz_status kz_pretokenizer_split(const kz_pretokenizer *pre, kz_split_mode mode, const uint8_t *text,
                                size_t n_bytes, kz_pretokenizer_piece_fn fn, void *user);

/* The PCRE2 source of a mode's pattern (static string). */
const char *kz_pretokenizer_pattern(kz_split_mode mode);

#endif
