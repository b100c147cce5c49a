/*
 * test_tokenizer.c - the text tokenizer on tiny vocabularies written here
 * (no model files, no npm).
 *
 * Dataflow: a byte-level vocab.json (the 256 one-byte tokens + a few merged
 *        tokens), merges.txt and tokenizer_config.json (added tokens) in a
 *        mkdtemp directory -> kz_tokenizer_load -> kz_tokenizer_encode
 *        -> ids compared with hand-derived lists; or -> the expected status
 *        and message.
 *
 * Covers: merge order (rank, leftmost tie), a property test of both merge
 * loops (rescan <= 64 bytes, heap above) against a plain reference BPE
 * written here; the word cache (texts >= 4 KB); the Qwen2 and Mistral splits
 * on hand-checked pieces (pieces confirmed with HF tokenizers), including the
 * White_Space trap (U+0085, U+FEFF, U+180E) and "'ſ"; added tokens (anywhere,
 * longest first, before NFC, lstrip/rstrip); NFC, and a property test of the
 * NFC quick check against utf8proc on whole strings of tricky characters;
 * strict UTF-8 validation with byte offsets; lookups; malformed files; and
 * loading from text in memory (kz_tokenizer_load_text: the same ids as from
 * the directory, and messages naming "label:file" for broken texts); and over
 * the BPE model's stored tables (the same ids; each kind of damage refused).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "test.h"
#include <utf8proc.h>

#include "text/bpe.h"
#include "text/nfc.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

static char temp_root[64];
static int n_dirs;

/* ---- writing tiny tokenizer directories ---------------------------------- */

static void write_text(const char *dir, const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static size_t put_utf8(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6); // the byte-level alphabet ends at U+0143
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Byte-level spelling of raw bytes, JSON-escaped when `json`. */
static void spell(const char *raw, char *out, bool json) {
    size_t o = 0;
    for (const uint8_t *p = (const uint8_t *)raw; *p; p++) {
        uint32_t cp = kz_bpe_byte_to_codepoint(*p);
        if (json && (cp == '"' || cp == '\\')) {
            out[o++] = '\\';
        }
        o += put_utf8(out + o, cp);
    }
    out[o] = '\0';
}

typedef struct tiny_vocab {
    const char **merged; // raw bytes of merged tokens, ids 256.. in order
    int n_merged;
    const char **merges; // raw "left|right" pairs in rank order
    int n_merges;
} tiny_vocab;

/* Writes vocab.json (byte b has id b; merged tokens follow) and merges.txt. */
static void write_vocab(const char *dir, const tiny_vocab *v, const char *merges_header) {
    size_t cap = 64 * 1024;
    char *json = malloc(cap), *txt = malloc(cap), tok[256];
    size_t o = (size_t)snprintf(json, cap, "{");
    for (int b = 0; b < 256; b++) {
        char raw[2] = {(char)b, 0};
        if (b == 0) { // spell() stops at NUL; byte 0 is U+0100
            snprintf(tok, sizeof tok, "\xc4\x80");
        } else {
            spell(raw, tok, true);
        }
        o += (size_t)snprintf(json + o, cap - o, "%s\"%s\": %d", b ? ", " : "", tok, b);
    }
    for (int i = 0; i < v->n_merged; i++) {
        spell(v->merged[i], tok, true);
        o += (size_t)snprintf(json + o, cap - o, ", \"%s\": %d", tok, 256 + i);
    }
    snprintf(json + o, cap - o, "}");
    write_text(dir, "vocab.json", json);
    o = (size_t)snprintf(txt, cap, "%s", merges_header);
    for (int i = 0; i < v->n_merges; i++) {
        char left[64], right[64], sp_l[128], sp_r[128];
        const char *bar = strchr(v->merges[i], '|');
        snprintf(left, sizeof left, "%.*s", (int)(bar - v->merges[i]), v->merges[i]);
        snprintf(right, sizeof right, "%s", bar + 1);
        spell(left, sp_l, false);
        spell(right, sp_r, false);
        o += (size_t)snprintf(txt + o, cap - o, "%s %s\n", sp_l, sp_r);
    }
    write_text(dir, "merges.txt", txt);
    free(json);
    free(txt);
}

static const char *CONFIG_JSON =
    "{\"add_prefix_space\": false, \"added_tokens_decoder\": {\n"
    " \"1000\": {\"content\": \"<|im_start|>\", \"lstrip\": false, \"normalized\": false,"
    " \"rstrip\": false, \"single_word\": false, \"special\": true},\n"
    " \"1001\": {\"content\": \"<|im_end|>\", \"special\": true},\n"
    " \"1002\": {\"content\": \"<x>\", \"special\": false},\n"
    " \"1003\": {\"content\": \"<x><y>\", \"special\": true},\n"
    " \"1004\": {\"content\": \"<e\\u0301>\", \"special\": true},\n"
    " \"1005\": {\"content\": \"<S>\", \"lstrip\": true, \"rstrip\": true, \"special\": true}\n"
    "}}\n";

static void make_dir(char *dir, size_t n) {
    snprintf(dir, n, "%s/t%d", temp_root, n_dirs++);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* ---- the main tiny tokenizer --------------------------------------------- */

// Merged tokens (ids 256..) and merges (ranks 0..). "b c" outranks "a b"; "i P"
// only merges when the split keeps "iPhone" whole (Qwen2, not Mistral).
static const char *MERGED[] = {"bc", "ab",       "aa", "aaaa", " w", " wo",
                               "iP", "\xc3\xa9", "lo", "llo",  "he", "hello"};
static const char *MERGES[] = {"b|c", "a|b",       "a|a", "aa|aa", " |w", " w|o",
                               "i|P", "\xc3|\xa9", "l|o", "l|lo",  "h|e", "he|llo"};
enum {
    ID_BC = 256,
    ID_AB,
    ID_AA,
    ID_AAAA,
    ID_SW,
    ID_SWO,
    ID_IP,
    ID_EACUTE,
    ID_LO,
    ID_LLO,
    ID_HE,
    ID_HELLO
};

static char main_dir[128]; // the main tiny tokenizer's files

static kz_tokenizer *load_main(void) {
    char *dir = main_dir;
    make_dir(dir, sizeof main_dir);
    tiny_vocab v = {MERGED, 12, MERGES, 12};
    write_vocab(dir, &v, "#version: 0.2\n");
    write_text(dir, "tokenizer_config.json", CONFIG_JSON);
    kz_tokenizer *t = NULL;
    kz_status st = kz_tokenizer_load(dir, &t);
    CHECK_MSG(st == KZ_OK, "load: %s", kz_error_get());
    return t;
}

/* Encodes and compares with the expected ids (terminated by -1). */
static void check_ids_mode(const kz_tokenizer *t, const char *text, size_t n_bytes,
                           kz_split_mode mode, const int32_t *want, int line) {
    int32_t *ids;
    size_t n_ids;
    kz_status st = kz_tokenizer_encode(t, text, n_bytes, mode, &ids, &n_ids);
    size_t n_want = 0;
    while (want[n_want] >= 0) {
        n_want++;
    }
    bool ok = st == KZ_OK && n_ids == n_want && memcmp(ids, want, n_want * sizeof *ids) == 0;
    CHECK_MSG(ok, "line %d: \"%s\": status %d (%s), %zu ids, want %zu", line, text, (int)st,
              kz_error_get(), st == KZ_OK ? n_ids : 0, n_want);
    if (!ok && st == KZ_OK) {
        for (size_t i = 0; i < n_ids; i++) {
            fprintf(stderr, " %d", (int)ids[i]);
        }
        fputc('\n', stderr);
    }
    free(ids);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})
#define CHECK_IDS(t, text, ...)                                                                    \
    check_ids_mode(t, text, strlen(text), KZ_SPLIT_QWEN2, IDS(__VA_ARGS__), __LINE__)
#define CHECK_IDS_MISTRAL(t, text, ...)                                                            \
    check_ids_mode(t, text, strlen(text), KZ_SPLIT_MISTRAL, IDS(__VA_ARGS__), __LINE__)

static void test_merges(const kz_tokenizer *t) {
    CHECK_IDS(t, "abc", 'a', ID_BC); // "b c" (rank 0) before "a b" (rank 1)
    CHECK_IDS(t, "abab", ID_AB, ID_AB);
    CHECK_IDS(t, "aaa", ID_AA, 'a'); // equal ranks: leftmost first
    CHECK_IDS(t, "aaaaa", ID_AAAA, 'a');
    CHECK_IDS(t, "hello", ID_HELLO); // "l o" -> "l lo" -> "h e" -> "he llo"
    CHECK_IDS(t, "a wow", 'a', ID_SWO, 'w');
    CHECK_IDS(t, "x", 'x');
    CHECK_IDS(t, " ", ' ');
}

static void test_split_modes(const kz_tokenizer *t) {
    // Qwen2 keeps "iPhone" whole so "i P" merges; Mistral splits it into "i" "Phone".
    CHECK_IDS(t, "iPhone", ID_IP, 'h', 'o', 'n', 'e');
    CHECK_IDS_MISTRAL(t, "iPhone", 'i', 'P', 'h', 'o', 'n', 'e');
    CHECK_IDS(t, "I'll", 'I', '\'', 'l', 'l');
}

static void test_added_tokens(const kz_tokenizer *t) {
    CHECK_IDS(t, "<|im_start|>", 1000);
    CHECK_IDS(t, "a<|im_start|>b", 'a', 1000, 'b');
    CHECK_IDS(t, "<|im_start|><|im_end|>", 1000, 1001);
    CHECK_IDS(t, "hello<|im_end|>hello", ID_HELLO, 1001, ID_HELLO);
    CHECK_IDS(t, "<|im_sta", '<', '|', 'i', 'm', '_', 's', 't', 'a');
    CHECK_IDS(t, "<x><y>", 1003); // longest match wins
    CHECK_IDS(t, "<x><z>", 1002, '<', 'z', '>');
    CHECK_IDS(t, "<<x>", '<', 1002);   // leftmost
    CHECK_IDS(t, "<e\xcc\x81>", 1004); // matched in the raw text, before NFC
    CHECK_IDS(t, "<\xc3\xa9>", '<', ID_EACUTE, '>');
    // lstrip/rstrip absorb White_Space (incl. U+3000) on their side only.
    CHECK_IDS(t, "a  <S>  b", 'a', 1005, 'b');
    CHECK_IDS(t, "a\xe3\x80\x80<S>\n", 'a', 1005);
    CHECK_IDS(t, " <|im_end|> ", ' ', 1001, ' ');
}

static void test_nfc(const kz_tokenizer *t) {
    CHECK_IDS(t, "e\xcc\x81", ID_EACUTE); // e + U+0301 -> U+00E9
    CHECK_IDS(t, "\xc3\xa9", ID_EACUTE);
    CHECK_IDS(t, "\xe2\x84\xab", 0xC3, 0x85);       // U+212B ANGSTROM SIGN -> U+00C5
    CHECK_IDS(t, "\xef\xac\x81", 0xEF, 0xAC, 0x81); // U+FB01 ligature: NFC keeps it
    // Jamo compose to a Hangul syllable: U+1100 U+1161 -> U+AC00.
    CHECK_IDS(t, "\xe1\x84\x80\xe1\x85\xa1", 0xEA, 0xB0, 0x80);
}

static void check_bad_utf8(const kz_tokenizer *t, const char *bytes, size_t n, size_t at) {
    int32_t *ids = (int32_t *)1;
    size_t n_ids = 7;
    kz_status st = kz_tokenizer_encode(t, bytes, n, KZ_SPLIT_QWEN2, &ids, &n_ids);
    char want[64];
    snprintf(want, sizeof want, "invalid UTF-8 at byte %zu", at);
    CHECK_EQ_INT(st, KZ_STATUS_BAD_INPUT);
    CHECK_MSG(strcmp(kz_error_get(), want) == 0, "\"%s\" != \"%s\"", kz_error_get(), want);
    CHECK(ids == NULL && n_ids == 0);
}

static void test_utf8(const kz_tokenizer *t) {
    check_bad_utf8(t, "\xc0\x80", 2, 0);     // overlong NUL
    check_bad_utf8(t, "ab\xc1\xbf", 4, 2);   // overlong 2-byte
    check_bad_utf8(t, "\xe0\x80\x80", 3, 0); // overlong 3-byte
    check_bad_utf8(t, "x\xe0\x9f\xbf", 4, 1);
    check_bad_utf8(t, "\xf0\x8f\xbf\xbf", 4, 0);  // overlong 4-byte
    check_bad_utf8(t, "abc\xed\xa0\x80", 6, 3);   // surrogate U+D800
    check_bad_utf8(t, "\xed\xbf\xbf", 3, 0);      // surrogate U+DFFF
    check_bad_utf8(t, "\xf4\x90\x80\x80", 4, 0);  // U+110000
    check_bad_utf8(t, "a\xf5\x80\x80\x80", 5, 1); // lead byte > F4
    check_bad_utf8(t, "\xff", 1, 0);
    check_bad_utf8(t, "ok\x80", 3, 2);    // lone continuation
    check_bad_utf8(t, "\xe2\x82", 2, 0);  // truncated at the end
    check_bad_utf8(t, "\xe2\x82x", 3, 0); // truncated before ASCII
    check_bad_utf8(t, "\xf0\x9f\x98", 3, 0);
    check_bad_utf8(t, "\xc3\xa9\xc3", 3, 2);
    check_bad_utf8(t, "<|im_start|>\xc3(", 14, 12); // checked before added tokens
    // Valid edges.
    check_ids_mode(t, "\xf4\x8f\xbf\xbf", 4, KZ_SPLIT_QWEN2, IDS(0xF4, 0x8F, 0xBF, 0xBF), __LINE__);
    check_ids_mode(t, "\xed\x9f\xbf\xee\x80\x80", 6, KZ_SPLIT_QWEN2,
                   IDS(0xED, 0x9F, 0xBF, 0xEE, 0x80, 0x80), __LINE__);
    check_ids_mode(t, "a\0b", 3, KZ_SPLIT_QWEN2, IDS('a', 0, 'b'), __LINE__);
}

static void test_empty_and_args(const kz_tokenizer *t) {
    int32_t *ids = NULL;
    size_t n_ids = 9;
    CHECK_EQ_INT(kz_tokenizer_encode(t, "", 0, KZ_SPLIT_QWEN2, &ids, &n_ids), KZ_OK);
    CHECK(ids != NULL && n_ids == 0);
    free(ids);
    CHECK_EQ_INT(kz_tokenizer_encode(t, NULL, 0, KZ_SPLIT_MISTRAL, &ids, &n_ids), KZ_OK);
    CHECK(n_ids == 0);
    free(ids);
    CHECK_EQ_INT(kz_tokenizer_encode(t, NULL, 3, KZ_SPLIT_QWEN2, &ids, &n_ids),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_tokenizer_encode(NULL, "a", 1, KZ_SPLIT_QWEN2, &ids, &n_ids),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_tokenizer_encode(t, "a", 1, (kz_split_mode)7, &ids, &n_ids),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_tokenizer_encode(t, "a", 1, KZ_SPLIT_QWEN2, NULL, &n_ids),
                 KZ_STATUS_INVALID_ARGUMENT);
}

static void test_lookups(const kz_tokenizer *t) {
    CHECK_EQ_INT(kz_tokenizer_find(t, "<|im_start|>"), 1000);
    CHECK_EQ_INT(kz_tokenizer_find(t, "<x><y>"), 1003);
    CHECK_EQ_INT(kz_tokenizer_find(t, "hello"), ID_HELLO);
    CHECK_EQ_INT(kz_tokenizer_find(t, "\xc4\xa0w"), ID_SW); // "Ġw", the vocab.json spelling
    CHECK_EQ_INT(kz_tokenizer_find(t, "\xc4\x8a"), '\n');   // "Ċ"
    CHECK_EQ_INT(kz_tokenizer_find(t, " w"), -1);           // raw bytes are not a spelling
    CHECK_EQ_INT(kz_tokenizer_find(t, "nope"), -1);
    CHECK_EQ_INT(kz_tokenizer_find(t, ""), -1);
    CHECK_EQ_INT(kz_tokenizer_find(t, NULL), -1);
    CHECK_EQ_INT(kz_tokenizer_size(t), 1006);
    size_t n;
    const char *tok = kz_tokenizer_token(t, ID_SWO, &n);
    CHECK(tok && n == 3 && memcmp(tok, " wo", 3) == 0);
    tok = kz_tokenizer_token(t, 1003, &n);
    CHECK(tok && n == 6 && memcmp(tok, "<x><y>", 6) == 0);
    CHECK(kz_tokenizer_token(t, 999, &n) == NULL && n == 0);
    CHECK(kz_tokenizer_token(t, -5, &n) == NULL);
}

/* A long text takes the cached path; it must equal the sum of its parts. */
static void test_cache(const kz_tokenizer *t) {
    const char *unit = "hello abc wow aaa\n";
    size_t n_unit = strlen(unit), reps = 600;
    char *text = malloc(n_unit * reps + 1);
    for (size_t i = 0; i < reps; i++) {
        memcpy(text + i * n_unit, unit, n_unit);
    }
    int32_t *one, *all;
    size_t n_one, n_all;
    CHECK_EQ_INT(kz_tokenizer_encode(t, unit, n_unit, KZ_SPLIT_QWEN2, &one, &n_one), KZ_OK);
    CHECK_EQ_INT(kz_tokenizer_encode(t, text, n_unit * reps, KZ_SPLIT_QWEN2, &all, &n_all), KZ_OK);
    CHECK_EQ_INT(n_all, n_one * reps);
    bool same = n_all == n_one * reps;
    for (size_t i = 0; same && i < n_all; i++) {
        same = all[i] == one[i % n_one];
    }
    CHECK(same);
    free(one);
    free(all);
    free(text);
}

/* ---- pre-tokenizer pieces ------------------------------------------------ */

typedef struct pieces {
    char text[512]; // pieces joined by '|'
    size_t n;
} pieces;

static kz_status collect(const uint8_t *piece, size_t n_bytes, void *user) {
    pieces *p = user;
    if (p->n && p->n < sizeof p->text - 1) {
        p->text[p->n++] = '|';
    }
    for (size_t i = 0; i < n_bytes && p->n < sizeof p->text - 1; i++) {
        p->text[p->n++] = (char)piece[i];
    }
    p->text[p->n] = '\0';
    return KZ_OK;
}

static void check_pieces(const kz_pretokenizer *pre, kz_split_mode mode, const char *text,
                         const char *want, int line) {
    pieces p = {{0}, 0};
    kz_status st =
        kz_pretokenizer_split(pre, mode, (const uint8_t *)text, strlen(text), collect, &p);
    CHECK_MSG(st == KZ_OK && strcmp(p.text, want) == 0, "line %d: got \"%s\" want \"%s\"", line,
              p.text, want);
}

#define PIECES(text, want) check_pieces(pre, KZ_SPLIT_QWEN2, text, want, __LINE__)
#define PIECES_MISTRAL(text, want) check_pieces(pre, KZ_SPLIT_MISTRAL, text, want, __LINE__)

static void test_pretokenizer(void) {
    kz_pretokenizer *pre;
    CHECK_EQ_INT(kz_pretokenizer_new(&pre), KZ_OK);
    PIECES("Hello world", "Hello| world");
    PIECES("iPhone OpenAI McDonald's", "iPhone| OpenAI| McDonald|'s");
    PIECES("I'll DON'T", "I|'ll| DON|'T");
    PIECES("'S'T'RE", "'S|'T|'RE");
    PIECES("x'sbar", "x|'s|bar");
    PIECES("12345", "1|2|3|4|5");
    PIECES("abc  \n\n  def", "abc|  \n\n| | def");
    PIECES("Hello   world  ", "Hello|  | world|  ");
    PIECES(" \t\n", " \t\n");
    PIECES("!\n/", "!\n|/");
    PIECES("q\xcc\x87", "q|\xcc\x87"); // a mark is not \p{L}
    PIECES("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x81", "\xe4\xbd\xa0\xe5\xa5\xbd|\xef\xbc\x81");
    PIECES("x'\xc5\xbfo", "x|'\xc5\xbf|o"); // (?i) folds U+017F to s
    // White_Space is Oniguruma's \s: U+0085 is space, U+FEFF and U+180E are not.
    PIECES("a \xc2\x85"
           "b",
           "a| |\xc2\x85"
           "b");
    PIECES("a \xef\xbb\xbf\xef\xbb\xbf"
           "b",
           "a| \xef\xbb\xbf\xef\xbb\xbf|b");
    PIECES("a\xe1\xa0\x8e\xe1\xa0\x8e b", "a|\xe1\xa0\x8e\xe1\xa0\x8e| b");
    PIECES("a\xe3\x80\x80\xe3\x80\x80"
           "b",
           "a|\xe3\x80\x80|\xe3\x80\x80"
           "b");
    PIECES_MISTRAL("iPhone OpenAI McDonald's", "i|Phone| Open|AI| Mc|Donald|'s");
    PIECES_MISTRAL("I'll DON'T", "I|'ll| DON|'T");
    PIECES_MISTRAL("HTTPServer", "HTTPServer");
    PIECES_MISTRAL("q\xcc\x87", "q\xcc\x87"); // marks stay in the word
    PIECES_MISTRAL("!\n/", "!\n/");           // [\r\n/]* after punctuation
    PIECES_MISTRAL("12ab", "1|2|ab");
    kz_pretokenizer_free(pre);
}

/* ---- property test: both merge loops against a reference BPE ------------- */

#define P_MERGES 40

typedef struct ref_model {
    char tokens[256 + P_MERGES][64]; // raw bytes of each id (ids < 256: single bytes)
    int left[P_MERGES], right[P_MERGES];
    int n_merged;
} ref_model;

static int ref_find(const ref_model *m, const char *s) {
    if (strlen(s) == 1) {
        return (uint8_t)s[0];
    }
    for (int i = 0; i < m->n_merged; i++) {
        if (strcmp(m->tokens[256 + i], s) == 0) {
            return 256 + i;
        }
    }
    return -1;
}

/* Plain BPE: repeatedly merge the lowest-rank adjacent pair, leftmost on ties. */
static size_t ref_encode(const ref_model *m, const char *text, int *ids) {
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        ids[i] = (uint8_t)text[i];
    }
    for (;;) {
        int best_rank = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            for (int r = 0; r < m->n_merged; r++) {
                if (m->left[r] == ids[i] && m->right[r] == ids[i + 1]) {
                    if (best_rank < 0 || r < best_rank) {
                        best_rank = r;
                        best = i;
                    }
                    break;
                }
            }
        }
        if (best_rank < 0) {
            return n;
        }
        ids[best] = 256 + best_rank;
        memmove(&ids[best + 1], &ids[best + 2], (n - best - 2) * sizeof *ids);
        n--;
    }
}

static void test_merge_property(void) {
    srand(12345);
    ref_model m;
    memset(&m, 0, sizeof m);
    // Random merges over {a, b, c}: each joins two existing tokens into a new one.
    int pool[256 + P_MERGES] = {'a', 'b', 'c'}, n_pool = 3;
    while (m.n_merged < P_MERGES) {
        int l = pool[rand() % n_pool], r = pool[rand() % n_pool];
        char joined[128];
        snprintf(joined, sizeof joined, "%s%s", l < 256 ? (char[]){(char)l, 0} : m.tokens[l],
                 r < 256 ? (char[]){(char)r, 0} : m.tokens[r]);
        if (strlen(joined) >= 64 || ref_find(&m, joined) >= 0) {
            continue;
        }
        memcpy(m.tokens[256 + m.n_merged], joined, strlen(joined) + 1); // < 64 bytes
        m.left[m.n_merged] = l;
        m.right[m.n_merged] = r;
        pool[n_pool++] = 256 + m.n_merged++;
    }
    // Files: the same merges spelled as "left right".
    static char merged_s[P_MERGES][64], merges_s[P_MERGES][140];
    const char *merged[P_MERGES], *merges[P_MERGES];
    for (int i = 0; i < P_MERGES; i++) {
        snprintf(merged_s[i], 64, "%s", m.tokens[256 + i]);
        int l = m.left[i], r = m.right[i];
        snprintf(merges_s[i], sizeof merges_s[i], "%s|%s",
                 l < 256 ? (char[]){(char)l, 0} : m.tokens[l],
                 r < 256 ? (char[]){(char)r, 0} : m.tokens[r]);
        merged[i] = merged_s[i];
        merges[i] = merges_s[i];
    }
    char dir[128];
    make_dir(dir, sizeof dir);
    tiny_vocab v = {merged, P_MERGES, merges, P_MERGES};
    write_vocab(dir, &v, ""); // no "#version" header: ranks start at the first line
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {}}");
    kz_tokenizer *t;
    kz_status st = kz_tokenizer_load(dir, &t);
    CHECK_MSG(st == KZ_OK, "%s", kz_error_get());
    if (st != KZ_OK) {
        return;
    }
    int n_bad = 0;
    for (int trial = 0; trial < 400; trial++) {
        size_t n = 1 + (size_t)(rand() % (trial < 200 ? 64 : 300)); // both loops
        char text[301];
        for (size_t i = 0; i < n; i++) {
            text[i] = "abc"[rand() % (trial % 3 == 0 ? 1 : 3)];
        }
        text[n] = '\0';
        int want[301];
        size_t n_want = ref_encode(&m, text, want);
        int32_t *ids;
        size_t n_ids;
        st = kz_tokenizer_encode(t, text, n, KZ_SPLIT_QWEN2, &ids, &n_ids);
        bool same = st == KZ_OK && n_ids == n_want;
        for (size_t i = 0; same && i < n_ids; i++) {
            same = ids[i] == want[i];
        }
        if (!same && n_bad++ < 3) {
            fprintf(stderr, "merge property: \"%s\": %zu ids, want %zu\n", text, n_ids, n_want);
        }
        free(ids);
    }
    CHECK_EQ_INT(n_bad, 0);
    kz_tokenizer_free(t);
}

/* ---- NFC quick check against whole-string utf8proc ---------------------- */

static void test_nfc_property(void) {
    kz_nfc *nfc;
    CHECK_EQ_INT(kz_nfc_new(&nfc), KZ_OK);
    int stable_ok = 1;
    for (int32_t cp = 0; cp < 0x80; cp++) {
        stable_ok &= kz_nfc_is_stable(nfc, cp);
    }
    CHECK(stable_ok);
    CHECK(kz_nfc_is_stable(nfc, 0xE9)); // precomposed e-acute is its own NFC
    CHECK(kz_nfc_is_stable(nfc, 0x4E00));
    CHECK(kz_nfc_is_stable(nfc, 0xAC00));   // Hangul LV syllable
    CHECK(kz_nfc_is_stable(nfc, 0x304C));   // ga, composed kana
    CHECK(!kz_nfc_is_stable(nfc, 0x301));   // combining acute
    CHECK(!kz_nfc_is_stable(nfc, 0x1161));  // Hangul V jamo composes after L
    CHECK(!kz_nfc_is_stable(nfc, 0x11A8));  // Hangul T jamo composes after LV
    CHECK(!kz_nfc_is_stable(nfc, 0x0B3E));  // second half of a two-part vowel sign
    CHECK(!kz_nfc_is_stable(nfc, 0x212B));  // singleton (ANGSTROM SIGN)
    CHECK(!kz_nfc_is_stable(nfc, 0x0344));  // decomposes to two marks
    CHECK(!kz_nfc_is_stable(nfc, 0x20000)); // beyond the table
    static const int32_t pool[] = {
        'a',     'e',     'o',     'A',    ' ',    '=',    '<',    0xE9,   0xFC,    0x1D6,
        0x300,   0x301,   0x308,   0x323,  0x327,  0x338,  0x345,  0x5B0,  0x93C,   0x928,
        0x929,   0x1100,  0x1112,  0x1161, 0x1175, 0x11A8, 0x11C2, 0xAC00, 0xAC01,  0xD7A3,
        0x304B,  0x3099,  0x309A,  0x30CF, 0x0B47, 0x0B3E, 0x0B57, 0x0BC6, 0x0BBE,  0x0DD9,
        0x0DCF,  0x0DDF,  0x1025,  0x102E, 0x212B, 0x2126, 0x0958, 0xF900, 0x2F800, 0x391,
        0x3B1,   0x313,   0x1F00,  0x344,  0x0F73, 0x0F71, 0x0F72, 0x0F80, 0x4E00,  0x1F600,
        0x11099, 0x110BA, 0x1109A, 0x2260, 0x1E0A, 0x1E0C, 0x307,  0x1EC7, 0xC5,    0x30A};
    int n_pool = (int)(sizeof pool / sizeof pool[0]), n_bad = 0;
    srand(777);
    for (int trial = 0; trial < 20000; trial++) {
        uint8_t text[64];
        size_t n = 0;
        int n_chars = 1 + rand() % 10;
        for (int k = 0; k < n_chars; k++) {
            n += (size_t)utf8proc_encode_char(pool[rand() % n_pool], text + n);
        }
        utf8proc_uint8_t *want;
        utf8proc_ssize_t n_want =
            utf8proc_map(text, (utf8proc_ssize_t)n, &want, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        uint8_t *got;
        size_t n_got;
        kz_status st = kz_nfc_apply(nfc, text, n, &got, &n_got);
        const uint8_t *g = got ? got : text;
        size_t n_g = got ? n_got : n;
        if (st != KZ_OK || n_want < 0 || (size_t)n_want != n_g || memcmp(want, g, n_g) != 0) {
            if (n_bad++ < 3) {
                fprintf(stderr, "nfc mismatch on %zu bytes:", n);
                for (size_t i = 0; i < n; i++) {
                    fprintf(stderr, " %02x", text[i]);
                }
                fputc('\n', stderr);
            }
        }
        free(want);
        free(got);
    }
    CHECK_EQ_INT(n_bad, 0);
    kz_nfc_free(nfc);
}

/* ---- malformed files ----------------------------------------------------- */

static void check_load_error(const char *vocab, const char *merges, const char *config,
                             kz_status want, const char *needle) {
    char dir[128];
    make_dir(dir, sizeof dir);
    if (vocab) {
        write_text(dir, "vocab.json", vocab);
    }
    if (merges) {
        write_text(dir, "merges.txt", merges);
    }
    if (config) {
        write_text(dir, "tokenizer_config.json", config);
    }
    kz_tokenizer *t = (kz_tokenizer *)1;
    kz_status st = kz_tokenizer_load(dir, &t);
    CHECK_EQ_INT(st, want);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(kz_error_get(), needle);
}

static void test_bad_files(void) {
    // A valid byte-level vocab with "ab" (256) to build variations on.
    char dir[128];
    make_dir(dir, sizeof dir);
    const char *merged[] = {"ab"}, *merges[] = {"a|b"};
    tiny_vocab v = {merged, 1, merges, 1};
    write_vocab(dir, &v, "#version: 0.2\n");
    char path[256];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    FILE *f = fopen(path, "rb");
    static char vocab[16384];
    size_t n = f ? fread(vocab, 1, sizeof vocab - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    vocab[n] = '\0';
    const char *config = "{\"added_tokens_decoder\": {}}";

    check_load_error(NULL, "", config, KZ_STATUS_IO, "vocab.json");
    check_load_error(vocab, NULL, config, KZ_STATUS_IO, "merges.txt");
    check_load_error(vocab, "a b\n", NULL, KZ_STATUS_IO, "tokenizer_config.json");
    check_load_error("{\"a\": 0}", "", config, KZ_STATUS_BAD_MODEL, "no token for byte");
    check_load_error("{\"a\": 0, \"a \": 1}", "", config, KZ_STATUS_BAD_MODEL,
                     "not spelled in the byte-level alphabet");
    check_load_error("{\"a\": -1}", "", config, KZ_STATUS_BAD_MODEL, "id is not an integer");
    // Ids: the readers take [0, 2^31) as they say; the BPE table then states its own limit.
    check_load_error("{\"a\": 2147483648}", "", config, KZ_STATUS_BAD_MODEL,
                     "id is not an integer in [0, 2^31)");
    static char big_vocab[16448];
    snprintf(big_vocab, sizeof big_vocab, "%.*s, \"zz\": 2147483647}",
             (int)(strrchr(vocab, '}') - vocab), vocab);
    check_load_error(big_vocab, "", config, KZ_STATUS_BAD_MODEL,
                     "id 2147483647 is too large (at most 2097150)");
    check_load_error(vocab, "a b\n",
                     "{\"added_tokens_decoder\": {\"2147483648\": {\"content\": \"<a>\"}}}",
                     KZ_STATUS_BAD_MODEL, "key \"2147483648\" is not a token id in [0, 2^31)");
    check_load_error(
        vocab, "a b\n",
        "{\"added_tokens_decoder\": {\"99999999999999999999\": {\"content\": \"<a>\"}}}",
        KZ_STATUS_BAD_MODEL, "is not a token id in [0, 2^31)");
    check_load_error("{\"a\": 0, \"b\": 0}", "", config, KZ_STATUS_BAD_MODEL, "used twice");
    check_load_error(vocab, "a b\nb c\n", config, KZ_STATUS_BAD_MODEL, "line 2");
    check_load_error(vocab, "#version: 0.2\nab\n", config, KZ_STATUS_BAD_MODEL,
                     "expected \"left right\"");
    check_load_error(vocab, "a b\n", "{}", KZ_STATUS_BAD_MODEL, "no added_tokens_decoder");
    check_load_error(vocab, "a b\n", "{\"added_tokens_decoder\": {\"x\": {\"content\": \"<a>\"}}}",
                     KZ_STATUS_BAD_MODEL, "not a token id");
    check_load_error(vocab, "a b\n", "{\"added_tokens_decoder\": {\"300\": {}}}",
                     KZ_STATUS_BAD_MODEL, "missing content");
    check_load_error(vocab, "a b\n",
                     "{\"added_tokens_decoder\": {\"300\": {\"content\": \"<a>\"}, "
                     "\"301\": {\"content\": \"<a>\"}}}",
                     KZ_STATUS_BAD_MODEL, "defined twice");
    check_load_error(vocab, "a b\n", "[1]", KZ_STATUS_BAD_MODEL, "tokenizer_config.json");

    // CRLF line endings and blank lines in merges.txt are accepted.
    write_text(dir, "merges.txt", "#version: 0.2\r\n\r\na b\r\n");
    write_text(dir, "tokenizer_config.json", config);
    kz_tokenizer *t;
    CHECK_EQ_INT(kz_tokenizer_load(dir, &t), KZ_OK);
    if (t) {
        CHECK_IDS(t, "ab", 256);
        kz_tokenizer_free(t);
    }
    kz_tokenizer_free(NULL);
    CHECK_EQ_INT(kz_tokenizer_load(NULL, &t), KZ_STATUS_INVALID_ARGUMENT);
}

/* ---- loading from text in memory ----------------------------------------- */

/* dir/name in an exact-size heap buffer, no NUL after it (ASan sees overreads). */
static char *read_exact(const char *dir, const char *name, size_t *n_bytes) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    static char buf[64 * 1024];
    *n_bytes = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) {
        fclose(f);
    }
    char *text = malloc(*n_bytes ? *n_bytes : 1);
    if (text) {
        memcpy(text, buf, *n_bytes);
    }
    return text;
}

/* Both split modes give the same ids from a and b. */
static void check_same_ids(const kz_tokenizer *a, const kz_tokenizer *b, const char *text) {
    for (int mode = KZ_SPLIT_QWEN2; mode <= KZ_SPLIT_MISTRAL; mode++) {
        int32_t *ids_a = NULL, *ids_b = NULL;
        size_t n_a = 0, n_b = 0;
        kz_status st_a = kz_tokenizer_encode(a, text, strlen(text), (kz_split_mode)mode, &ids_a,
                                             &n_a);
        kz_status st_b = kz_tokenizer_encode(b, text, strlen(text), (kz_split_mode)mode, &ids_b,
                                             &n_b);
        CHECK_MSG(st_a == KZ_OK && st_b == KZ_OK && n_a == n_b && n_a > 0 &&
                      memcmp(ids_a, ids_b, n_a * sizeof *ids_a) == 0,
                  "\"%s\" mode %d: %zu vs %zu ids", text, mode, n_a, n_b);
        free(ids_a);
        free(ids_b);
    }
}

static void check_text_error(const kz_tokenizer_text *src, kz_status want, const char *needle) {
    kz_tokenizer *t = (kz_tokenizer *)1;
    CHECK_EQ_INT(kz_tokenizer_load_text(src, &t), want);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(kz_error_get(), needle);
}

static void test_load_text(const kz_tokenizer *from_dir) {
    kz_tokenizer_text src = {.label = "model.gguf"};
    char *vocab = read_exact(main_dir, "vocab.json", &src.vocab_bytes);
    char *merges = read_exact(main_dir, "merges.txt", &src.merges_bytes);
    char *config = read_exact(main_dir, "tokenizer_config.json", &src.config_bytes);
    src.vocab_json = vocab;
    src.merges_txt = merges;
    src.config_json = config;
    kz_tokenizer *t = NULL;
    CHECK_MSG(kz_tokenizer_load_text(&src, &t) == KZ_OK, "load_text: %s", kz_error_get());
    if (t) {
        CHECK_EQ_INT(kz_tokenizer_size(t), kz_tokenizer_size(from_dir));
        check_same_ids(t, from_dir, "hello<|im_end|>hello");
        check_same_ids(t, from_dir, "<|im_start|>a wow iPhone, I'll say e\xcc\x81<x><y>");
        check_same_ids(t, from_dir, "abcaaaaa  <S>  b\n\n<e\xcc\x81>");
        kz_tokenizer_free(t);
    }

    // Broken texts: the message names the label and the file.
    kz_tokenizer_text bad = src;
    bad.vocab_bytes = src.vocab_bytes / 2;
    check_text_error(&bad, KZ_STATUS_BAD_MODEL, "model.gguf:vocab.json: malformed JSON near byte");
    bad = src;
    bad.vocab_json = "{\"a\": 0}";
    bad.vocab_bytes = 8;
    check_text_error(&bad, KZ_STATUS_BAD_MODEL, "model.gguf:vocab.json: no token for byte 0x00");
    bad = src;
    bad.merges_txt = "#version: 0.2\nh e\nq\xc4\xa0 zz\n";
    bad.merges_bytes = strlen(bad.merges_txt);
    check_text_error(&bad, KZ_STATUS_BAD_MODEL,
                     "model.gguf:merges.txt: line 3: merge \"q\xc4\xa0 zz\" refers to a token");
    bad.merges_txt = "h e\nhe";
    bad.merges_bytes = 6;
    check_text_error(&bad, KZ_STATUS_BAD_MODEL,
                     "model.gguf:merges.txt: line 2: expected \"left right\"");
    bad = src;
    bad.config_bytes = src.config_bytes - 3;
    check_text_error(&bad, KZ_STATUS_BAD_MODEL, "model.gguf:tokenizer_config.json: malformed");
    bad.config_json = "{\"added_tokens_decoder\": 1}";
    bad.config_bytes = strlen(bad.config_json);
    check_text_error(&bad, KZ_STATUS_BAD_MODEL,
                     "model.gguf:tokenizer_config.json: added_tokens_decoder: expected an object");
    bad = src;
    bad.merges_txt = NULL;
    check_text_error(&bad, KZ_STATUS_INVALID_ARGUMENT, "src->merges_txt is NULL");
    check_text_error(NULL, KZ_STATUS_INVALID_ARGUMENT, "src is NULL");
    CHECK_EQ_INT(kz_tokenizer_load_text(&src, NULL), KZ_STATUS_INVALID_ARGUMENT);

    // The BPE model alone; no merges at all is a valid (if useless) model.
    kz_bpe *bpe = NULL;
    CHECK_EQ_INT(kz_bpe_load_text("v", vocab, src.vocab_bytes, "m", NULL, 0, &bpe), KZ_OK);
    CHECK(bpe != NULL && kz_bpe_find(bpe, (const uint8_t *)"a", 1) == 'a');
    kz_bpe_free(bpe);
    free(vocab);
    free(merges);
    free(config);
}

/* Writable copies of a model's stored tables (kz_bpe_tables), to damage one at a time. */
typedef struct table_copy {
    kz_bpe_tables t;
    uint8_t *blob;
    uint32_t *tok_off, *tok_len, *vocab_slots;
    uint64_t *merge_slots;
    int32_t *merge_result, byte_id[256];
} table_copy;

static void *dup_bytes(const void *src, size_t n_bytes) {
    void *p = malloc(n_bytes);
    if (p) {
        memcpy(p, src, n_bytes);
    }
    return p;
}

static void table_copy_init(table_copy *c, const kz_bpe_tables *src) {
    c->t = *src;
    c->blob = dup_bytes(src->blob, src->n_blob);
    c->tok_off = dup_bytes(src->tok_off, src->n_ids * sizeof(uint32_t));
    c->tok_len = dup_bytes(src->tok_len, src->n_ids * sizeof(uint32_t));
    c->vocab_slots = dup_bytes(src->vocab_slots, src->n_vocab_slots * 2 * sizeof(uint32_t));
    c->merge_slots = dup_bytes(src->merge_slots, src->n_merge_slots * sizeof(uint64_t));
    c->merge_result = dup_bytes(src->merge_result, src->n_merges * sizeof(int32_t));
    memcpy(c->byte_id, src->byte_id, sizeof c->byte_id);
    c->t.blob = c->blob;
    c->t.tok_off = c->tok_off;
    c->t.tok_len = c->tok_len;
    c->t.vocab_slots = c->vocab_slots;
    c->t.merge_slots = c->merge_slots;
    c->t.merge_result = c->merge_result;
    c->t.byte_id = c->byte_id;
}

static void table_copy_free(table_copy *c) {
    void *arrays[] = {c->blob,        c->tok_off,     c->tok_len,
                      c->vocab_slots, c->merge_slots, c->merge_result};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        free(arrays[i]);
    }
}

/* text n times over, NUL-terminated (NULL without memory). */
static char *repeat(const char *text, size_t n) {
    size_t len = strlen(text);
    char *p = malloc(len * n + 1);
    for (size_t i = 0; p && i < n; i++) {
        memcpy(p + i * len, text, len);
    }
    if (p) {
        p[len * n] = '\0';
    }
    return p;
}

/* One defect in a copy of good's tables: the load refuses it, naming the label and it. */
static void check_bad_tables(const kz_tokenizer_text *src, const kz_bpe_tables *good,
                             void (*damage)(table_copy *), const char *needle) {
    table_copy c;
    table_copy_init(&c, good);
    damage(&c);
    kz_tokenizer_text bad = *src;
    bad.bpe_tables = &c.t;
    check_text_error(&bad, KZ_STATUS_BAD_MODEL, "model.gguf: stored tokenizer tables: ");
    CHECK_STR_CONTAINS(kz_error_get(), needle);
    table_copy_free(&c);
}

static void token_past_blob(table_copy *c) {
    c->tok_off['a'] = (uint32_t)c->t.n_blob;
}
static void unused_id_with_bytes(table_copy *c) {
    for (size_t id = 0; id < c->t.n_ids; id++) {
        if (c->tok_off[id] == UINT32_MAX) {
            c->tok_len[id] = 1;
            return;
        }
    }
    c->tok_len['a'] = 0; // no unused id: an empty used token instead
}
static void slot_past_ids(table_copy *c) {
    for (size_t i = 0; i < c->t.n_vocab_slots; i++) {
        if ((int32_t)c->vocab_slots[2 * i] >= 0) {
            c->vocab_slots[2 * i] = (uint32_t)c->t.n_ids;
            return;
        }
    }
}
static void vocab_full(table_copy *c) {
    for (size_t i = 0; i < c->t.n_vocab_slots; i++) {
        if ((int32_t)c->vocab_slots[2 * i] < 0) {
            c->vocab_slots[2 * i] = 'a';
        }
    }
}
static void merge_past_ranks(table_copy *c) {
    for (size_t i = 0; i < c->t.n_merge_slots; i++) {
        if (c->merge_slots[i] != UINT64_MAX) {
            c->merge_slots[i] = (c->merge_slots[i] & ~(uint64_t)0x3FFFFF) | c->t.n_merges;
            return;
        }
    }
}
static void merges_full(table_copy *c) {
    for (size_t i = 0; i < c->t.n_merge_slots; i++) {
        if (c->merge_slots[i] == UINT64_MAX) {
            c->merge_slots[i] = (uint64_t)'a' << 43 | (uint64_t)'b' << 22;
        }
    }
}
static void result_no_token(table_copy *c) {
    c->merge_result[0] = -1;
}
static void byte_wrong_token(table_copy *c) {
    c->byte_id['a'] = c->byte_id['b'];
}
static void slots_not_pow2(table_copy *c) {
    c->t.n_vocab_slots -= 1;
}

/* The BPE model's tables (what a GGUF stores, kz_bpe_tables) used in place: the ids of
 * the model built from the texts, whose texts are then not even read; each kind of
 * damage to the tables refused with a message, never a read outside them. */
static void test_stored_tables(const kz_tokenizer *from_dir) {
    kz_tokenizer_text src = {.label = "model.gguf"};
    char *config = read_exact(main_dir, "tokenizer_config.json", &src.config_bytes);
    src.vocab_json = "{}"; // not parsed when the tables are given
    src.vocab_bytes = 2;
    src.merges_txt = "";
    src.config_json = config;
    kz_bpe_tables good;
    kz_bpe_tables_of(kz_tokenizer_bpe(from_dir), &good);
    CHECK(good.n_ids == kz_bpe_n_ids(kz_tokenizer_bpe(from_dir)) && good.n_merges > 0 &&
          good.n_blob > 256);
    table_copy c;
    table_copy_init(&c, &good);
    src.bpe_tables = &c.t;
    kz_tokenizer *t = NULL;
    CHECK_MSG(kz_tokenizer_load_text(&src, &t) == KZ_OK, "tables: %s", kz_error_get());
    if (t) {
        CHECK_EQ_INT(kz_tokenizer_size(t), kz_tokenizer_size(from_dir));
        check_same_ids(t, from_dir, "hello<|im_end|>hello");
        check_same_ids(t, from_dir, "<|im_start|>a wow iPhone, I'll say e\xcc\x81<x><y>");
        check_same_ids(t, from_dir, "abcaaaaa  <S>  b\n\n<e\xcc\x81> aaaaaaaaaaaaaaaaaaaaaaaaabc");
        char *long_text = repeat("abc aaaa hello ", 400); // the word cache's length
        if (long_text) {
            check_same_ids(t, from_dir, long_text);
        }
        free(long_text);
        CHECK_EQ_INT(kz_tokenizer_find(t, "hello"), kz_tokenizer_find(from_dir, "hello"));
        kz_tokenizer_free(t);
    }
    table_copy_free(&c);
    // Sparse ids (far more ids than tokens, as in the test models' vocabularies): the hash
    // tables are sized by the tokens, and the tables still load.
    size_t n_vocab = 0, n_merges = 0;
    char *vocab = read_exact(main_dir, "vocab.json", &n_vocab);
    char *merges = read_exact(main_dir, "merges.txt", &n_merges);
    char *sparse = malloc(n_vocab + 32);
    kz_bpe *built = NULL, *mapped = NULL;
    if (vocab && merges && sparse) {
        size_t end = n_vocab;
        while (end > 0 && vocab[end - 1] != '}') {
            end--;
        }
        int n = snprintf(sparse, n_vocab + 32, "%.*s, \"zz\": 100000}", (int)end - 1, vocab);
        CHECK_EQ_INT(kz_bpe_load_text("v", sparse, (size_t)n, "m", merges, n_merges, &built),
                     KZ_OK);
    }
    if (built) {
        kz_bpe_tables sparse_tables;
        kz_bpe_tables_of(built, &sparse_tables);
        CHECK_MSG(kz_bpe_from_tables("sparse", &sparse_tables, &mapped) == KZ_OK, "%s",
                  kz_error_get());
        CHECK(mapped && kz_bpe_n_ids(mapped) == 100001 &&
              kz_bpe_find(mapped, (const uint8_t *)"zz", 2) == 100000 &&
              kz_bpe_find(mapped, (const uint8_t *)"hello", 5) == ID_HELLO);
    }
    kz_bpe_free(mapped);
    kz_bpe_free(built);
    free(sparse);
    free(vocab);
    free(merges);
    check_bad_tables(&src, &good, token_past_blob, "a token's bytes lie outside the blob");
    check_bad_tables(&src, &good, unused_id_with_bytes, "outside the blob");
    check_bad_tables(&src, &good, slot_past_ids, "a vocabulary slot names no token");
    check_bad_tables(&src, &good, vocab_full, "the vocabulary table has no empty slot");
    check_bad_tables(&src, &good, merge_past_ranks, "a merge slot names no token or rank");
    check_bad_tables(&src, &good, merges_full, "the merge table has no empty slot");
    check_bad_tables(&src, &good, result_no_token, "a merge's result is no token");
    check_bad_tables(&src, &good, byte_wrong_token, "a byte's token is missing");
    check_bad_tables(&src, &good, slots_not_pow2, "hash tables are not powers of two");
    free(config);
}

static void test_byte_map(void) {
    bool seen[0x200] = {false};
    int ok = 1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = kz_bpe_byte_to_codepoint((uint8_t)b);
        ok &= cp < 0x144 && !seen[cp] && kz_bpe_codepoint_to_byte(cp) == b;
        seen[cp] = true;
    }
    CHECK(ok);
    CHECK_EQ_INT(kz_bpe_byte_to_codepoint(' '), 0x120);  // "Ġ"
    CHECK_EQ_INT(kz_bpe_byte_to_codepoint('\n'), 0x10A); // "Ċ"
    CHECK_EQ_INT(kz_bpe_byte_to_codepoint(0xAD), 0x143);
    CHECK_EQ_INT(kz_bpe_byte_to_codepoint('A'), 'A');
    CHECK_EQ_INT(kz_bpe_codepoint_to_byte(0x144), -1);
    CHECK_EQ_INT(kz_bpe_codepoint_to_byte(' '), -1);
}

int main(void) {
    snprintf(temp_root, sizeof temp_root, "/tmp/kz_tokenizer_XXXXXX");
    if (!mkdtemp(temp_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_byte_map();
    kz_tokenizer *t = load_main();
    if (t) {
        test_merges(t);
        test_split_modes(t);
        test_added_tokens(t);
        test_nfc(t);
        test_utf8(t);
        test_empty_and_args(t);
        test_lookups(t);
        test_cache(t);
        test_load_text(t);
        test_stored_tables(t);
        kz_tokenizer_free(t);
    }
    test_pretokenizer();
    test_nfc_property();
    test_merge_property();
    test_bad_files();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_root);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", temp_root);
    }
    return test_main_result("test_tokenizer");
}
