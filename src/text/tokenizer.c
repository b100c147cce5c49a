/*
 * tokenizer.c - the Qwen2 text tokenizer: files -> model, text -> ids.
 *
 * Load (the files' text, read from dir or given in memory, e.g. GGUF metadata):
 *        vocab.json + merges.txt                -> kz_bpe (bpe.c), or the tables a
 *                                                  GGUF stores, used in place
 *        tokenizer_config.json
 *          "added_tokens_decoder": {"151644": {"content": "<|im_start|>", ...}}
 *                                               -> added tokens, longest first
 *        both split patterns                    -> kz_pretokenizer (pretokenizer.c)
 *        utf8proc's data                        -> NFC quick-check table (nfc.c)
 *
 * Encode (HF tokenizers' order, split_special_tokens=false):
 *   UTF-8 bytes --validate (strict: no overlong, surrogate, > U+10FFFF,
 *   truncated)--> added tokens matched in the raw text, leftmost then longest,
 *   anywhere (inside words too) --> [span][token][span]...
 *   each span --NFC (nfc.c: utf8proc on the segments a quick check flags)-->
 *   pre-split regex
 *   --> pieces --byte-level BPE--> ids;  each added token --> its id.
 *   No BOS/EOS is added.
 *
 * Added-token flags: lstrip/rstrip absorb the White_Space next to the token
 * (as HF does); Qwen's tokens have them false. "normalized" tokens are still
 * matched in the raw text and "single_word" is not enforced: both are false
 * for every Qwen token and a load with either set logs a warning.
 */
#include "text/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "io/json.h"
#include "io/text_file.h"
#include "runtime/error.h"
#include "text/bpe.h"
#include "text/nfc.h"
#include "text/pretokenizer.h"

#define CACHE_MIN_BYTES 4096 // texts this long get a per-call word cache

typedef struct added_token {
    char *content; // UTF-8, owned
    size_t n_bytes;
    int32_t id;
    bool lstrip; // absorb White_Space before the token
    bool rstrip; // absorb White_Space after the token
} added_token;

struct kz_tokenizer {
    kz_bpe *bpe;
    kz_pretokenizer *pre;
    kz_nfc *nfc;
    added_token *added; // [n_added], longest content first
    size_t n_added;
    bool starts[256]; // some added token starts with this byte
    size_t n_ids;     // largest id (vocabulary or added) + 1
};

/* ---- loading ------------------------------------------------------------ */

void kz_tokenizer_free(kz_tokenizer *t) {
    if (!t) {
        return;
    }
    kz_bpe_free(t->bpe);
    kz_pretokenizer_free(t->pre);
    kz_nfc_free(t->nfc);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
    }
    free(t->added);
    free(t);
}

static int longest_first(const void *a, const void *b) {
    const added_token *x = a, *y = b;
    if (x->n_bytes != y->n_bytes) {
        return x->n_bytes > y->n_bytes ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Reads one "id": {...} entry of added_tokens_decoder into t->added[t->n_added]. */
static kz_status added_parse(kz_tokenizer *t, kz_json_ctx *c, const cJSON *entry) {
    char *end;
    errno = 0;
    long long id = strtoll(entry->string, &end, 10);
    if (*entry->string == '\0' || *end != '\0' || errno == ERANGE || id < 0 || id > INT32_MAX) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: added_tokens_decoder: key \"%s\" is not a token id in [0, 2^31)",
                            c->path, entry->string);
    }
    if (!cJSON_IsObject(entry)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: added_tokens_decoder.%s: expected an object",
                            c->path, entry->string);
    }
    c->scope = entry->string;
    const char *content = kz_json_str(c, entry, "content", NULL);
    bool lstrip = kz_json_bool(c, entry, "lstrip", false);
    bool rstrip = kz_json_bool(c, entry, "rstrip", false);
    bool normalized = kz_json_bool(c, entry, "normalized", false);
    bool single_word = kz_json_bool(c, entry, "single_word", false);
    if (c->status != KZ_OK) {
        return c->status;
    }
    if (!content || !*content) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: added_tokens_decoder.%s: missing content",
                            c->path, entry->string);
    }
    if (normalized || single_word) {
        kz_log(KZ_LOG_WARN,
               "%s: added token \"%s\": normalized/single_word are not supported; "
               "matched as a plain string",
               c->path, content);
    }
    for (size_t i = 0; i < t->n_added; i++) {
        if (strcmp(t->added[i].content, content) == 0 || t->added[i].id == id) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: added token \"%s\" (id %lld) is defined twice", c->path,
                                content, id);
        }
    }
    added_token *a = &t->added[t->n_added];
    a->content = strdup(content);
    if (!a->content) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", c->path);
    }
    a->n_bytes = strlen(content);
    a->id = (int32_t)id;
    a->lstrip = lstrip;
    a->rstrip = rstrip;
    t->n_added++;
    return KZ_OK;
}

/* The added tokens of tokenizer_config.json, longest first. */
static kz_status added_load(kz_tokenizer *t, const char *label, const char *text, size_t n_bytes) {
    cJSON *root;
    kz_status st = kz_json_parse(label, text, n_bytes, &root);
    if (st != KZ_OK) {
        return st;
    }
    kz_json_ctx c = {label, "", KZ_OK};
    const cJSON *decoder = kz_json_obj(&c, root, "added_tokens_decoder");
    if (c.status != KZ_OK || !decoder) {
        cJSON_Delete(root);
        return c.status != KZ_OK
                   ? c.status
                   : kz_error_set(KZ_STATUS_BAD_MODEL, "%s: no added_tokens_decoder", label);
    }
    size_t n = (size_t)cJSON_GetArraySize(decoder);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", label);
    }
    for (const cJSON *e = decoder->child; e && st == KZ_OK; e = e->next) {
        st = added_parse(t, &c, e);
    }
    cJSON_Delete(root);
    if (st != KZ_OK) {
        return st;
    }
    qsort(t->added, t->n_added, sizeof *t->added, longest_first);
    for (size_t i = 0; i < t->n_added; i++) {
        t->starts[(uint8_t)t->added[i].content[0]] = true;
        if ((size_t)t->added[i].id + 1 > t->n_ids) {
            t->n_ids = (size_t)t->added[i].id + 1;
        }
    }
    return KZ_OK;
}

/* Everything after the BPE model: added tokens, the pre-tokenizer, the NFC table. */
static kz_status load_rest(kz_tokenizer *t, const char *config_label, const char *config_json,
                           size_t config_bytes) {
    t->n_ids = kz_bpe_n_ids(t->bpe);
    kz_status st = added_load(t, config_label, config_json, config_bytes);
    if (st == KZ_OK) {
        st = kz_pretokenizer_new(&t->pre);
    }
    if (st == KZ_OK) {
        st = kz_nfc_new(&t->nfc);
    }
    return st;
}

enum { VOCAB, MERGES, CONFIG, N_FILES };
static const char *const FILE_NAMES[N_FILES] = {"vocab.json", "merges.txt",
                                                "tokenizer_config.json"};

/* labels[i] = prefix + sep + FILE_NAMES[i], malloc'ed; false when out of memory. */
static bool make_labels(const char *prefix, char sep, char *labels[N_FILES]) {
    bool ok = true;
    for (int i = 0; i < N_FILES; i++) {
        size_t n = strlen(prefix) + strlen(FILE_NAMES[i]) + 2;
        labels[i] = malloc(n);
        if (labels[i]) {
            snprintf(labels[i], n, "%s%c%s", prefix, sep, FILE_NAMES[i]);
        }
        ok = ok && labels[i];
    }
    return ok;
}

/* Frees the labels, and t unless loading succeeded, in which case *out takes it. */
static kz_status load_end(kz_status st, char *labels[N_FILES], kz_tokenizer *t,
                          kz_tokenizer **out) {
    for (int i = 0; i < N_FILES; i++) {
        free(labels[i]);
    }
    if (st != KZ_OK) {
        kz_tokenizer_free(t);
        return st;
    }
    *out = t;
    return KZ_OK;
}

/* Name of the first NULL pointer in src, or NULL when all are set. */
static const char *null_field(const kz_tokenizer_text *src) {
    return !src->label         ? "src->label"
           : !src->vocab_json  ? "src->vocab_json"
           : !src->merges_txt  ? "src->merges_txt"
           : !src->config_json ? "src->config_json"
                               : NULL;
}

kz_status kz_tokenizer_load_text(const kz_tokenizer_text *src, kz_tokenizer **out) {
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenizer_load_text: out is NULL");
    }
    *out = NULL;
    const char *missing = src ? null_field(src) : "src";
    if (missing) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenizer_load_text: %s is NULL",
                            missing);
    }
    char *labels[N_FILES];
    kz_tokenizer *t = calloc(1, sizeof *t);
    kz_status st = make_labels(src->label, ':', labels) && t
                       ? KZ_OK
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                      "%s: out of memory loading the tokenizer", src->label);
    if (st == KZ_OK) {
        st = src->bpe_tables
                 ? kz_bpe_from_tables(src->label, src->bpe_tables, &t->bpe)
                 : kz_bpe_load_text(labels[VOCAB], src->vocab_json, src->vocab_bytes,
                                    labels[MERGES], src->merges_txt, src->merges_bytes, &t->bpe);
    }
    if (st == KZ_OK) {
        st = load_rest(t, labels[CONFIG], src->config_json, src->config_bytes);
    }
    return load_end(st, labels, t, out);
}

kz_status kz_tokenizer_load(const char *dir, kz_tokenizer **out) {
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenizer_load: out is NULL");
    }
    *out = NULL;
    if (!dir) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenizer_load: dir is NULL");
    }
    char *paths[N_FILES];
    kz_tokenizer *t = calloc(1, sizeof *t);
    kz_status st =
        make_labels(dir, '/', paths) && t
            ? KZ_OK
            : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory loading the tokenizer", dir);
    if (st == KZ_OK) {
        st = kz_bpe_load(paths[VOCAB], paths[MERGES], &t->bpe);
    }
    char *config = NULL;
    size_t config_bytes = 0;
    if (st == KZ_OK) {
        st = kz_text_file_read(paths[CONFIG], KZ_JSON_MAX_BYTES + 1, &config, &config_bytes);
    }
    if (st == KZ_OK) {
        st = load_rest(t, paths[CONFIG], config, config_bytes);
    }
    free(config);
    return load_end(st, paths, t, out);
}

/* ---- lookups ------------------------------------------------------------ */

const kz_bpe *kz_tokenizer_bpe(const kz_tokenizer *t) {
    return t->bpe;
}

int32_t kz_tokenizer_find(const kz_tokenizer *t, const char *token) {
    if (!t || !token) {
        return -1;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        if (strcmp(t->added[i].content, token) == 0) {
            return t->added[i].id;
        }
    }
    return kz_bpe_find_spelling(t->bpe, token, strlen(token));
}

size_t kz_tokenizer_size(const kz_tokenizer *t) {
    return t ? t->n_ids : 0;
}

const char *kz_tokenizer_token(const kz_tokenizer *t, int32_t id, size_t *n_bytes) {
    *n_bytes = 0;
    if (!t) {
        return NULL;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].id == id) {
            *n_bytes = t->added[i].n_bytes;
            return t->added[i].content;
        }
    }
    return (const char *)kz_bpe_token_bytes(t->bpe, id, n_bytes);
}

/* ---- encoding ----------------------------------------------------------- */

/* Rust's char::is_whitespace, i.e. Unicode White_Space (used by lstrip/rstrip). */
static bool is_white_space(int32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* End of text[from, to) after dropping its trailing White_Space. */
static size_t trim_end(const uint8_t *text, size_t from, size_t to) {
    size_t end = from;
    for (size_t i = from; i < to;) {
        utf8proc_int32_t cp;
        i += (size_t)utf8proc_iterate(text + i, (utf8proc_ssize_t)(to - i), &cp);
        if (!is_white_space(cp)) {
            end = i;
        }
    }
    return end;
}

/* First position at or after `from` that is not White_Space. */
static size_t skip_white_space(const uint8_t *text, size_t from, size_t n_bytes) {
    while (from < n_bytes) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t step =
            utf8proc_iterate(text + from, (utf8proc_ssize_t)(n_bytes - from), &cp);
        if (!is_white_space(cp)) {
            break;
        }
        from += (size_t)step;
    }
    return from;
}

/* The added token matching at text[pos], longest first, or NULL. */
static const added_token *added_at(const kz_tokenizer *t, const uint8_t *text, size_t n_bytes,
                                   size_t pos) {
    if (!t->starts[text[pos]]) {
        return NULL;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const added_token *a = &t->added[i];
        if (a->n_bytes <= n_bytes - pos && memcmp(text + pos, a->content, a->n_bytes) == 0) {
            return a;
        }
    }
    return NULL;
}

typedef struct encode_state {
    const kz_tokenizer *t;
    kz_split_mode mode;
    kz_bpe_cache *cache; // may be NULL
    kz_bpe_ids out;
} encode_state;

static kz_status on_piece(const uint8_t *piece, size_t n_bytes, void *user) {
    encode_state *e = user;
    return kz_bpe_encode_piece(e->t->bpe, e->cache, piece, n_bytes, &e->out);
}

/* NFC, pre-split and BPE of one span between added tokens. */
static kz_status encode_span(encode_state *e, const uint8_t *span, size_t n_bytes) {
    if (n_bytes == 0) {
        return KZ_OK;
    }
    uint8_t *nfc;
    size_t n_nfc;
    kz_status st = kz_nfc_apply(e->t->nfc, span, n_bytes, &nfc, &n_nfc);
    if (st == KZ_OK) {
        st = nfc ? kz_pretokenizer_split(e->t->pre, e->mode, nfc, n_nfc, on_piece, e)
                 : kz_pretokenizer_split(e->t->pre, e->mode, span, n_bytes, on_piece, e);
    }
    free(nfc);
    return st;
}

/* Splits out added tokens and encodes the spans between them. */
static kz_status encode_text(encode_state *e, const uint8_t *text, size_t n_bytes) {
    size_t span = 0;
    for (size_t pos = 0; pos < n_bytes;) {
        const added_token *a = added_at(e->t, text, n_bytes, pos);
        if (!a) {
            pos++;
            continue;
        }
        size_t span_end = a->lstrip ? trim_end(text, span, pos) : pos;
        kz_status st = encode_span(e, text + span, span_end - span);
        if (st == KZ_OK) {
            st = kz_bpe_ids_push(&e->out, a->id);
        }
        if (st != KZ_OK) {
            return st;
        }
        pos += a->n_bytes;
        if (a->rstrip) {
            pos = skip_white_space(text, pos, n_bytes);
        }
        span = pos;
    }
    return encode_span(e, text + span, n_bytes - span);
}

kz_status kz_tokenizer_encode(const kz_tokenizer *t, const char *text, size_t n_bytes,
                              kz_split_mode mode, int32_t **ids, size_t *n_ids) {
    if (!ids || !n_ids) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_tokenizer_encode: ids or n_ids is NULL");
    }
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && n_bytes > 0)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenizer_encode: %s is NULL",
                            t ? "text" : "tokenizer");
    }
    if (mode != KZ_SPLIT_QWEN2 && mode != KZ_SPLIT_MISTRAL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_tokenizer_encode: unknown split mode %d", (int)mode);
    }
    const uint8_t *bytes = (const uint8_t *)text;
    size_t bad = kz_utf8_invalid_at(text, n_bytes);
    if (bad < n_bytes) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "invalid UTF-8 at byte %zu", bad);
    }
    encode_state e = {t, mode, NULL, {0}};
    if (n_bytes >= CACHE_MIN_BYTES) {
        e.cache = kz_bpe_cache_new(); // NULL only disables caching
    }
    kz_status st = kz_bpe_ids_push(&e.out, 0); // makes *ids non-NULL even for empty text
    e.out.n_ids = 0;
    if (st == KZ_OK) {
        st = encode_text(&e, bytes, n_bytes);
    }
    kz_bpe_cache_free(e.cache);
    if (st != KZ_OK) {
        free(e.out.ids);
        return st;
    }
    *ids = e.out.ids;
    *n_ids = e.out.n_ids;
    return KZ_OK;
}

/* ---- incremental text --------------------------------------------------- */

typedef struct piece_starts {
    const uint8_t *base;
    size_t last, before_last; /* offsets of the last two pieces' starts */
    size_t count;
} piece_starts;

static kz_status note_piece(const uint8_t *piece, size_t n_bytes, void *user) {
    piece_starts *p = user;
    (void)n_bytes;
    p->before_last = p->last;
    p->last = (size_t)(piece - p->base);
    p->count++;
    return KZ_OK;
}

/* Length of the longest prefix of text that ends on a complete UTF-8 sequence. */
static size_t complete_utf8(const uint8_t *s, size_t n) {
    size_t i = n;
    while (i > 0 && n - i < 4 && (s[i - 1] & 0xC0) == 0x80) {
        i--;
    }
    if (i == 0) {
        return n;
    }
    uint8_t lead = s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return n - (i - 1) >= need ? n : i - 1;
}

size_t kz_tokenizer_stable_prefix(const kz_tokenizer *t, const char *text, size_t n_bytes,
                                  kz_split_mode mode) {
    const uint8_t *s = (const uint8_t *)text;
    size_t n = complete_utf8(s, n_bytes);
    if (kz_utf8_invalid_at(text, n) != n) {
        return 0;
    }
    size_t span = 0;
    for (size_t pos = 0; pos < n;) {
        const added_token *a = added_at(t, s, n, pos);
        pos += a ? a->n_bytes : 1;
        span = a ? pos : span;
    }
    piece_starts p = {.base = s + span};
    if (kz_pretokenizer_split(t->pre, mode, s + span, n - span, note_piece, &p) != KZ_OK) {
        return span;
    }
    // Appending text can change the last piece and, through the regex's one-character
    // lookahead, the piece before it; everything earlier is final.
    return p.count >= 2 ? span + p.before_last : span;
}
