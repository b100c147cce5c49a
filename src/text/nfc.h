/*
 * nfc.h - Unicode NFC for the tokenizer: utf8proc, plus a quick check that
 * leaves text already in NFC untouched.
 *
 *   UTF-8 --scan: split before every "stable" character--> segments
 *   segment of stable characters only -> copied as is
 *   any other segment (a stable character followed by combining marks,
 *   jamo, singletons, ...) -> utf8proc NFC
 *
 * A character is stable when it is a starter (combining class 0), is its own
 * NFC, and the first character of its canonical decomposition never appears
 * after the first position of any canonical decomposition. Then nothing before
 * it can compose with it or reorder across it, so NFC(a + b) = NFC(a) + NFC(b)
 * whenever b starts with a stable character, and a run of stable characters is
 * its own NFC. The table is derived from utf8proc's data at load (code points
 * below U+20000; the rest always take the slow path).
 */
#ifndef KZ_NFC_H
#define KZ_NFC_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

typedef struct kz_nfc kz_nfc;

/* Builds the stable-character table (a few milliseconds). Immutable after. */
kz_status kz_nfc_new(kz_nfc **out);
void kz_nfc_free(kz_nfc *nfc);

/* NFC of n_bytes of valid UTF-8. If the text is already NFC by the quick check,
 * *out is NULL (use the input); otherwise *out is malloc'ed (caller frees) and
 * *n_out its length. */
kz_status kz_nfc_apply(const kz_nfc *nfc, const uint8_t *text, size_t n_bytes, uint8_t **out,
                       size_t *n_out);

/* Whether a code point is stable in the sense above (for tests). */
int kz_nfc_is_stable(const kz_nfc *nfc, int32_t cp);

#endif
