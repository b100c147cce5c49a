/*
 * nfc.c - NFC with a quick check: stable characters are copied, the short
 * segments around anything else go through utf8proc (see nfc.h for why the
 * split is exact).
 *
 * Load (kz_nfc_new), for every code point below U+20000:
 *   pass 1: canonical decomposition (utf8proc, reordered) -> every character
 *           after the first is marked "follower" (it may compose or reorder
 *           with what precedes it: combining marks, Hangul V/T jamo, the
 *           second halves of two-part vowel signs, ...)
 *   pass 2: stable = combining class 0, NFC of the character is itself, and
 *           the first character of its decomposition is no follower
 * Apply:
 *   scan characters; a stable one closes the open segment; a segment holding
 *   any unstable character is replaced by utf8proc_map(NFC) of it. Text with
 *   no unstable character is never copied.
 *
 * Every primary composite lies below U+20000 (later ones above are excluded
 * from composition), so the table covers every follower; characters at or
 * above U+20000 are simply treated as unstable.
 */
#include "text/nfc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "runtime/error.h"

#define QC_LIMIT 0x20000

struct kz_nfc {
    uint8_t stable[QC_LIMIT / 8]; // bit per code point
};

static inline bool bit(const uint8_t *bits, int32_t cp) {
    return bits[cp >> 3] >> (cp & 7) & 1;
}

static inline void set_bit(uint8_t *bits, int32_t cp) {
    bits[cp >> 3] |= (uint8_t)(1u << (cp & 7));
}

/* Canonical decomposition of one code point, canonically ordered. */
static utf8proc_ssize_t decompose(int32_t cp, utf8proc_int32_t *buf, utf8proc_ssize_t cap) {
    utf8proc_uint8_t utf8[4];
    utf8proc_ssize_t n = utf8proc_encode_char(cp, utf8);
    return utf8proc_decompose(utf8, n, buf, cap, UTF8PROC_DECOMPOSE);
}

kz_status kz_nfc_new(kz_nfc **out) {
    *out = NULL;
    kz_nfc *nfc = calloc(1, sizeof *nfc);
    uint8_t *follower = calloc(QC_LIMIT / 8, 1);
    if (!nfc || !follower) {
        free(nfc);
        free(follower);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    utf8proc_int32_t buf[16];
    for (int32_t cp = 0; cp < QC_LIMIT; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            continue;
        }
        utf8proc_ssize_t n = decompose(cp, buf, 16);
        for (utf8proc_ssize_t i = 1; i < n; i++) {
            if (buf[i] < QC_LIMIT) {
                set_bit(follower, buf[i]);
            }
        }
    }
    for (int32_t cp = 0; cp < QC_LIMIT; cp++) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || utf8proc_get_property(cp)->combining_class != 0) {
            continue;
        }
        utf8proc_ssize_t n = decompose(cp, buf, 16);
        if (n < 1 || buf[0] >= QC_LIMIT || bit(follower, buf[0])) {
            continue;
        }
        if (n > 1 || buf[0] != cp) {
            n = utf8proc_normalize_utf32(buf, n, UTF8PROC_COMPOSE);
            if (n != 1 || buf[0] != cp) {
                continue;
            }
        }
        set_bit(nfc->stable, cp);
    }
    free(follower);
    *out = nfc;
    return KZ_OK;
}

void kz_nfc_free(kz_nfc *nfc) {
    free(nfc);
}

int kz_nfc_is_stable(const kz_nfc *nfc, int32_t cp) {
    return cp >= 0 && cp < QC_LIMIT && bit(nfc->stable, cp);
}

typedef struct out_buf {
    uint8_t *bytes;
    size_t n, cap;
} out_buf;

static bool append(out_buf *o, const uint8_t *bytes, size_t n_bytes) {
    if (n_bytes == 0) {
        return true;
    }
    if (o->n + n_bytes > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n_bytes) {
            cap *= 2;
        }
        uint8_t *grown = realloc(o->bytes, cap);
        if (!grown) {
            return false;
        }
        o->bytes = grown;
        o->cap = cap;
    }
    memcpy(o->bytes + o->n, bytes, n_bytes);
    o->n += n_bytes;
    return true;
}

/* Copies text[*copied, seg) verbatim and NFC(text[seg, end)) into o. */
static kz_status flush_segment(out_buf *o, const uint8_t *text, size_t *copied, size_t seg,
                               size_t end) {
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n_nfc = utf8proc_map(text + seg, (utf8proc_ssize_t)(end - seg), &nfc,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (n_nfc < 0) {
        return kz_error_set(n_nfc == UTF8PROC_ERROR_NOMEM ? KZ_STATUS_OUT_OF_MEMORY
                                                          : KZ_STATUS_INTERNAL,
                            "tokenizer: NFC failed: %s", utf8proc_errmsg(n_nfc));
    }
    bool ok = append(o, text + *copied, seg - *copied) && append(o, nfc, (size_t)n_nfc);
    free(nfc);
    if (!ok) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory for NFC");
    }
    *copied = end;
    return KZ_OK;
}

kz_status kz_nfc_apply(const kz_nfc *nfc, const uint8_t *text, size_t n_bytes, uint8_t **out,
                       size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    out_buf o = {NULL, 0, 0};
    size_t copied = 0, seg = 0;
    bool dirty = false; // the open segment [seg, i) holds an unstable character
    kz_status st = KZ_OK;
    for (size_t i = 0; i < n_bytes && st == KZ_OK;) {
        if (text[i] < 0x80) { // ASCII is stable
            if (dirty) {
                st = flush_segment(&o, text, &copied, seg, i);
                dirty = false;
            }
            seg = i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t step = utf8proc_iterate(text + i, (utf8proc_ssize_t)(n_bytes - i), &cp);
        if (step <= 0) {
            st = kz_error_set(KZ_STATUS_INTERNAL, "tokenizer: NFC got invalid UTF-8");
            break;
        }
        if (cp < QC_LIMIT && bit(nfc->stable, cp)) {
            if (dirty) {
                st = flush_segment(&o, text, &copied, seg, i);
                dirty = false;
            }
            seg = i;
        } else {
            dirty = true;
        }
        i += (size_t)step;
    }
    if (st == KZ_OK && dirty) {
        st = flush_segment(&o, text, &copied, seg, n_bytes);
    }
    if (st == KZ_OK && o.bytes && !append(&o, text + copied, n_bytes - copied)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory for NFC");
    }
    if (st != KZ_OK) {
        free(o.bytes);
        return st;
    }
    *out = o.bytes;
    *n_out = o.n;
    return KZ_OK;
}
