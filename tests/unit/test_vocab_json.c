/*
 * test_vocab_json.c - the flat vocab.json reader against hand-written texts.
 *
 * Dataflow: a JSON text written here -> an exact-size heap copy (no NUL after it,
 * so a read past the end shows under ASan) -> kz_vocab_json_read -> the keys (as
 * UTF-8 bytes) and ids compared with the expected ones; or a broken text -> status
 * BAD_MODEL and a message naming the label.
 *
 * Covers: every JSON escape, \u escapes to 2- and 3-byte UTF-8 and a surrogate pair
 * to 4 bytes, whitespace everywhere, the empty object, the densest input ("":0
 * entries, which bound the entry array); errors: not an object, unterminated
 * string, bad escapes, lone surrogates, control characters, missing ':' or ',',
 * values that are not integers in [0, 2^31), trailing bytes, a NUL byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "test.h"
#include "text/vocab_json.h"

#define LABEL "model.gguf:vocab.json"

/* Reads `text` from an exact-size copy. */
static kz_status read_text(const char *text, kz_vocab_json *v) {
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    kz_status st = kz_vocab_json_read(LABEL, copy, n, v);
    free(copy);
    return st;
}

static void check_key(const kz_vocab_json *v, size_t i, const char *key, size_t len, int32_t id) {
    CHECK_MSG(i < v->n_entries, "entry %zu of %zu", i, v->n_entries);
    if (i >= v->n_entries) {
        return;
    }
    const kz_vocab_entry *e = &v->entries[i];
    CHECK_MSG(e->len == len && memcmp(v->strings + e->off, key, len) == 0 &&
                  v->strings[e->off + len] == '\0',
              "entry %zu: key of %u bytes", i, e->len);
    CHECK_EQ_INT(e->id, id);
}

static void test_good(void) {
    kz_vocab_json v;
    CHECK_EQ_INT(read_text(" {\n\t\"a\" : 0 ,\"\\u0120the\":279,\"\\\"\\\\\\/\\b\\f\\n\\r\\t\":7,"
                           "\"\\u00e9\\u4e2d\\ud83d\\ude00\": 2147483647, \"\": 10 }\r\n",
                           &v),
                 KZ_OK);
    CHECK_EQ_INT((int)v.n_entries, 5);
    check_key(&v, 0, "a", 1, 0);
    check_key(&v, 1, "\xc4\xa0the", 5, 279);
    check_key(&v, 2, "\"\\/\b\f\n\r\t", 8, 7);
    check_key(&v, 3, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 9, 2147483647); // 2^31 - 1
    check_key(&v, 4, "", 0, 10);
    kz_vocab_json_free(&v);

    CHECK_EQ_INT(read_text("{}", &v), KZ_OK);
    CHECK_EQ_INT((int)v.n_entries, 0);
    kz_vocab_json_free(&v);

    // The densest text: 2000 entries of 5 bytes each, as many as the array can take.
    size_t n = 2000;
    char *dense = malloc(5 * n + 2);
    char *p = dense;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        memcpy(p, i ? ",\"\":0" : "\"\":0", i ? 5 : 4);
        p += i ? 5 : 4;
    }
    *p++ = '}';
    *p = '\0';
    CHECK_EQ_INT(read_text(dense, &v), KZ_OK);
    CHECK_EQ_INT((int)v.n_entries, (int)n);
    kz_vocab_json_free(&v);
    free(dense);
}

static void check_bad(const char *text, size_t n, const char *needle) {
    kz_vocab_json v;
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    kz_status st = kz_vocab_json_read(LABEL, copy, n, &v);
    free(copy);
    CHECK_MSG(st == KZ_STATUS_BAD_MODEL, "%.*s: status %d", (int)n, text, (int)st);
    CHECK_STR_CONTAINS(kz_error_get(), LABEL);
    CHECK_STR_CONTAINS(kz_error_get(), needle);
    CHECK(v.entries == NULL && v.strings == NULL);
}

#define BAD(text, needle) check_bad(text, sizeof text - 1, needle)

static void test_bad(void) {
    BAD("", "not a JSON object");
    BAD("[\"a\", 1]", "not a JSON object");
    BAD("{\"a\": 1", "expected ',' or '}'");
    BAD("{\"a\": 1,}", "expected a string");
    BAD("{\"a\" 1}", "expected ':'");
    BAD("{\"a\": 1 \"b\": 2}", "expected ',' or '}'");
    BAD("{\"a", "unterminated string");
    BAD("{\"a\\", "unterminated string");
    BAD("{\"a\\x\": 1}", "bad escape");
    BAD("{\"a\\u12g4\": 1}", "bad \\u escape");
    BAD("{\"a\\u12", "bad \\u escape");
    BAD("{\"\\udc00\": 1}", "lone low surrogate");
    BAD("{\"\\ud83d\": 1}", "without its low half");
    BAD("{\"\\ud83d\\u0041\": 1}", "without its low half");
    BAD("{\"a\tb\": 1}", "control character");
    BAD("{\"a\": }", "expected a number");
    BAD("{\"a\": \"1\"}", "expected a number");
    BAD("{\"a\": -1}", "id is not an integer");
    BAD("{\"a\": 1.5}", "id is not an integer");
    BAD("{\"a\": 1e3}", "id is not an integer");
    BAD("{\"a\": 01}", "id is not an integer");
    BAD("{\"a\": 2147483648}", "id is not an integer in [0, 2^31)");
    BAD("{\"a\": 99999999999999999999}", "id is not an integer");
    BAD("{\"a\": 1} x", "bytes after the object");
    BAD("{\"a\": 1}\0", "bytes after the object");
    BAD("{\"a\0\": 1}", "control character");
}

int main(void) {
    test_good();
    test_bad();
    return test_main_result("test_vocab_json");
}
