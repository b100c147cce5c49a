/*
 * vocab_json.c - the flat vocab.json reader (see vocab_json.h).
 *
 * One cursor over the text: '{', then per entry a string (decoded into the key
 * buffer), ':', an integer, and ',' or '}'; whitespace between tokens; nothing but
 * whitespace after the object. Keys are never longer than their JSON spelling, so
 * the key buffer is sized by the input and cannot overflow.
 */
#include "text/vocab_json.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "runtime/error.h"

typedef struct reader {
    const char *label;
    const char *p, *begin, *end;
    char *keys; /* next free byte of the key buffer */
} reader;

static kz_status fail(const reader *r, const char *what) {
    return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: malformed JSON near byte %zu (%s)", r->label,
                        (size_t)(r->p - r->begin), what);
}

static void skip_space(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) {
        r->p++;
    }
}

/* Four hex digits at r->p; -1 if not. */
static int32_t hex4(const reader *r) {
    if (r->end - r->p < 4) {
        return -1;
    }
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            return -1;
        }
        v = v << 4 | d;
    }
    return v;
}

static void put_utf8(reader *r, uint32_t cp) {
    char *o = r->keys;
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    r->keys = o;
}

/* A \uXXXX escape (r->p after the 'u'), with its low surrogate if it is a high one. */
static kz_status read_unicode_escape(reader *r) {
    int32_t cp = hex4(r);
    if (cp < 0) {
        return fail(r, "bad \\u escape");
    }
    r->p += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return fail(r, "lone low surrogate");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        int32_t lo = r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u'
                         ? (r->p += 2, hex4(r))
                         : -1;
        if (lo < 0xDC00 || lo > 0xDFFF) {
            return fail(r, "high surrogate without its low half");
        }
        r->p += 4;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    put_utf8(r, (uint32_t)cp);
    return KZ_OK;
}

/* A string at r->p (its opening quote) decoded to r->keys, NUL-terminated. */
static kz_status read_string(reader *r) {
    if (r->p >= r->end || *r->p != '"') {
        return fail(r, "expected a string");
    }
    r->p++;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) {
            return fail(r, "control character in a string");
        }
        if (c != '\\') {
            *r->keys++ = (char)c;
            r->p++;
            continue;
        }
        if (++r->p >= r->end) {
            break;
        }
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *hit = memchr(from, *r->p, sizeof from - 1);
        if (hit) {
            *r->keys++ = to[hit - from];
            r->p++;
        } else if (*r->p == 'u') {
            r->p++;
            kz_status st = read_unicode_escape(r);
            if (st != KZ_OK) {
                return st;
            }
        } else {
            return fail(r, "bad escape");
        }
    }
    if (r->p >= r->end) {
        return fail(r, "unterminated string");
    }
    r->p++;
    *r->keys++ = '\0';
    return KZ_OK;
}

/* A JSON number at r->p that must be an integer in [0, 2^31). */
static kz_status read_id(reader *r, const char *key, int32_t *id) {
    if (r->p >= r->end || !strchr("-0123456789", *r->p) || *r->p == '\0') {
        return fail(r, "expected a number");
    }
    const char *start = r->p;
    int64_t v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && v <= INT32_MAX) {
        v = v * 10 + (*r->p++ - '0');
    }
    bool integer = r->p > start && (r->p - start == 1 || *start != '0') && v <= INT32_MAX &&
                   (r->p == r->end || !strchr("0123456789.eE+-", *r->p));
    if (!integer) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: token \"%s\": id is not an integer in [0, 2^31)", r->label, key);
    }
    *id = (int32_t)v;
    return KZ_OK;
}

/* One "key": id entry; r->p at the key's quote. */
static kz_status read_entry(reader *r, kz_vocab_json *v) {
    char *key = r->keys;
    kz_status st = read_string(r);
    if (st != KZ_OK) {
        return st;
    }
    skip_space(r);
    if (r->p >= r->end || *r->p != ':') {
        return fail(r, "expected ':'");
    }
    r->p++;
    skip_space(r);
    KZ_ASSERT(v->n_entries < v->capacity);
    kz_vocab_entry *e = &v->entries[v->n_entries];
    st = read_id(r, key, &e->id);
    e->off = (uint32_t)(key - v->strings);
    e->len = (uint32_t)(r->keys - key - 1);
    v->n_entries++;
    return st;
}

static kz_status read_object(reader *r, kz_vocab_json *v) {
    skip_space(r);
    if (r->p >= r->end || *r->p != '{') {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: top level is not a JSON object", r->label);
    }
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
    } else {
        for (;;) {
            kz_status st = read_entry(r, v);
            if (st != KZ_OK) {
                return st;
            }
            skip_space(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                skip_space(r);
                continue;
            }
            if (r->p < r->end && *r->p == '}') {
                r->p++;
                break;
            }
            return fail(r, "expected ',' or '}'");
        }
    }
    skip_space(r);
    return r->p == r->end ? KZ_OK : fail(r, "bytes after the object");
}

kz_status kz_vocab_json_read(const char *label, const char *text, size_t n_bytes,
                             kz_vocab_json *out) {
    memset(out, 0, sizeof *out);
    if (n_bytes > KZ_JSON_MAX_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: larger than %u bytes", label,
                            KZ_JSON_MAX_BYTES);
    }
    // Every entry but the first takes at least 5 bytes (,"":0), every key at most its
    // spelling plus the quote that becomes its NUL.
    out->capacity = n_bytes / 5 + 1;
    out->entries = malloc(out->capacity * sizeof *out->entries);
    out->strings = malloc(n_bytes + 1);
    if (!out->entries || !out->strings) {
        kz_vocab_json_free(out);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
    }
    reader r = {.label = label, .p = text, .begin = text, .end = text + n_bytes,
                .keys = out->strings};
    kz_status st = read_object(&r, out);
    if (st != KZ_OK) {
        kz_vocab_json_free(out);
    }
    return st;
}

void kz_vocab_json_free(kz_vocab_json *v) {
    free(v->entries);
    free(v->strings);
    memset(v, 0, sizeof *v);
}
