/*
 * sentences.h - cuts long input text into utterances for back-to-back
 * synthesis: sentence ends in many scripts, then greedy packing under a byte
 * budget.
 *
 *   UTF-8 text --scan: line breaks, end marks (. ! ? … 。！？ ؟ ۔ । ॥ ։ ። ...)
 *   with their closing quotes and brackets, minus abbreviations, initials,
 *   decimals, URLs and list numbers--> sentences
 *   --trim White_Space, drop empty--> kz_sentences_list: one span per sentence
 *   --join neighbours while the span stays <= max_bytes; cut a longer sentence
 *   at its last clause break, else space, else grapheme boundary--> kz_sentences_split
 *
 * Spans are byte offsets into the caller's text; nothing is copied or
 * allocated, the caller provides the span array, and both functions run in
 * time linear in n_bytes. They never fail: invalid UTF-8 is walked one byte
 * per bad byte, so any input yields well-ordered spans inside [0, n_bytes).
 * Both are pure functions of their arguments and may be called from any thread.
 */
#ifndef KZ_SENTENCES_H
#define KZ_SENTENCES_H

#include <stdbool.h>
#include <stddef.h>

/* A byte range of the text, [begin, end). */
typedef struct kz_span {
    size_t begin;
    size_t end;
} kz_span;

/* Splits text[0, n_bytes) (UTF-8, no NUL needed) into utterances of at most
 * max_bytes bytes, each ending at a sentence end when the sentence fits.
 * Consecutive sentences share a span while it stays <= max_bytes (paragraph
 * breaks included); a sentence longer than max_bytes is cut at its last clause
 * break within the budget, else its last space, else its last grapheme cluster
 * boundary, else its last code point boundary (a span exceeds max_bytes only
 * when its first code point alone does). max_bytes == 0 means no limit: the
 * whole trimmed text is one span. Spans exclude leading and trailing
 * White_Space and whitespace-only spans are dropped, so empty or blank text
 * gives 0. Writes at most max_spans spans (spans may be NULL when max_spans is
 * 0) and returns the number needed, which may exceed max_spans. */
size_t kz_sentences_split(const char *text, size_t n_bytes, size_t max_bytes, kz_span *spans,
                          size_t max_spans);

/* One span per sentence, unpacked and uncut (for callers that want the first
 * sentence early, and for tests). Trimming, dropping and the max_spans
 * contract are as for kz_sentences_split. */
size_t kz_sentences_list(const char *text, size_t n_bytes, kz_span *spans, size_t max_spans);

/* True when text[0, n_bytes) is empty or holds only Unicode White_Space (spaces, tabs, line
 * breaks, NBSP, the ideographic space U+3000, ...): nothing to speak. A malformed byte is
 * not blank. */
bool kz_text_is_blank(const char *text, size_t n_bytes);

#endif
