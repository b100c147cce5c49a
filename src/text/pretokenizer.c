/*
 * pretokenizer.c - the Qwen2 and Mistral pre-split regexes on PCRE2.
 *
 *   NFC span --pcre2_jit_match from `start`--> [s, e)
 *            -> piece [start, s) if a gap was skipped, piece [s, e)
 *            -> start = e, repeat; the tail after the last match is a piece
 *
 * The patterns are spec section 2's, written for PCRE2 (UTF mode). They
 * mirror transformers' Qwen2 pre-tokenizer and the pattern its
 * fix_mistral_regex installs:
 *
 *   Qwen2:   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   Mistral: [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
 *            |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
 *            |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Trap: what `\s` means. HF tokenizers runs these patterns on Oniguruma,
 * whose Unicode \s is exactly the White_Space property (U+0009-000D, U+0020,
 * U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F,
 * U+3000). PCRE2's UCP \s adds U+180E and JavaScript's \s drops U+0085 and
 * adds U+FEFF, so \s and \S are spelled out below as that class. Likewise
 * (?i:'s) also matches "'ſ" (U+017F folds to s) in Oniguruma and PCRE2, so
 * PCRE2's caseless matching is kept as is.
 */
#include "text/pretokenizer.h"

#include <stdbool.h>
#include <stdlib.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "runtime/error.h"

// Unicode White_Space, the members of Oniguruma's \s (see the header comment).
#define WS                                                                                         \
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"           \
    "\\x{202F}\\x{205F}\\x{3000}"

// The last three alternatives are shared: \s*[\r\n]+ | \s+(?!\S) | \s+
#define WS_TAIL "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

static const char QWEN2_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                                    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                    "|\\p{N}"
                                    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" WS_TAIL;

static const char MISTRAL_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*" WS_TAIL;

typedef struct split_regex {
    pcre2_code *code;
    bool jit; // pcre2_jit_compile succeeded: use pcre2_jit_match
} split_regex;

struct kz_pretokenizer {
    split_regex modes[2]; // indexed by kz_split_mode
    pcre2_match_context *match_ctx;
};

const char *kz_pretokenizer_pattern(kz_split_mode mode) {
    return mode == KZ_SPLIT_MISTRAL ? MISTRAL_PATTERN : QWEN2_PATTERN;
}

static kz_status compile(split_regex *re, const char *pattern, const char *name) {
    int err;
    PCRE2_SIZE err_offset;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                             &err, &err_offset, NULL);
    if (!re->code && err == PCRE2_ERROR_HEAP_FAILED) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                            "tokenizer: out of memory compiling the %s split pattern", name);
    }
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return kz_error_set(KZ_STATUS_INTERNAL, "tokenizer: %s split pattern: %s at offset %zu",
                            name, (const char *)msg, (size_t)err_offset);
    }
    // JIT is optional: without it (unsupported CPU or build) the interpreter runs.
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return KZ_OK;
}

kz_status kz_pretokenizer_new(kz_pretokenizer **out) {
    *out = NULL;
    kz_pretokenizer *pre = calloc(1, sizeof *pre);
    if (!pre) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    kz_status st = compile(&pre->modes[KZ_SPLIT_QWEN2], QWEN2_PATTERN, "Qwen2");
    if (st == KZ_OK) {
        st = compile(&pre->modes[KZ_SPLIT_MISTRAL], MISTRAL_PATTERN, "Mistral");
    }
    if (st == KZ_OK) {
        // Backtracking is linear per match for these patterns; the default limit
        // (10 million steps) would still reject a multi-megabyte run of spaces.
        pre->match_ctx = pcre2_match_context_create(NULL);
        if (!pre->match_ctx) {
            st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
        } else {
            pcre2_set_match_limit(pre->match_ctx, UINT32_MAX);
        }
    }
    if (st != KZ_OK) {
        kz_pretokenizer_free(pre);
        return st;
    }
    *out = pre;
    return KZ_OK;
}

void kz_pretokenizer_free(kz_pretokenizer *pre) {
    if (!pre) {
        return;
    }
    for (int m = 0; m < 2; m++) {
        pcre2_code_free(pre->modes[m].code);
    }
    pcre2_match_context_free(pre->match_ctx);
    free(pre);
}

kz_status kz_pretokenizer_split(const kz_pretokenizer *pre, kz_split_mode mode, const uint8_t *text,
                                size_t n_bytes, kz_pretokenizer_piece_fn fn, void *user) {
    if (mode != KZ_SPLIT_QWEN2 && mode != KZ_SPLIT_MISTRAL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "tokenizer: unknown split mode %d",
                            (int)mode);
    }
    const split_regex *re = &pre->modes[mode];
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    kz_status st = KZ_OK;
    size_t start = 0;
    while (start < n_bytes && st == KZ_OK) {
        int rc = re->jit ? pcre2_jit_match(re->code, text, n_bytes, start, 0, md, pre->match_ctx)
                         : pcre2_match(re->code, text, n_bytes, start, PCRE2_NO_UTF_CHECK, md,
                                       pre->match_ctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            st = fn(text + start, n_bytes - start, user);
            break;
        }
        if (rc == PCRE2_ERROR_NOMEMORY) {
            st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory splitting the "
                                                       "text at byte %zu", start);
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = kz_error_set(KZ_STATUS_INTERNAL, "tokenizer: split failed at byte %zu: %s", start,
                              (const char *)msg);
            break;
        }
        size_t s = ov[0], e = ov[1];
        if (s > start) {
            st = fn(text + start, s - start, user);
        }
        if (st == KZ_OK && e > s) {
            st = fn(text + s, e - s, user);
        }
        if (e > s) {
            start = e;
        } else {
            // No alternative matches empty, but never loop if one ever did:
            // step over one UTF-8 character and let it join the next gap.
            start = s + 1;
            while (start < n_bytes && (text[start] & 0xC0) == 0x80) {
                start++;
            }
        }
    }
    pcre2_match_data_free(md);
    return st;
}
