/*
 * test_base64.c - tools/kztts/base64.c (the server's SSE deltas and data: URIs).
 *
 * Dataflow: RFC 4648's test vectors both ways; seeded random bytes of every length
 *   0..300 -> encode -> decode == the bytes (and with whitespace inserted); then every
 *   kind of bad input -> -1 with *out NULL and *n_out 0: stray characters (URL-safe
 *   alphabet, '.', NUL, non-ASCII), padding too early, inside a group, after the end or
 *   too long, and lengths that are not a multiple of 4. Decoding reads exactly the n
 *   bytes given (a copy in an exact-size buffer, so ASan sees any overread).
 */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "test.h"

/* Decodes text (its strlen) from an exact-size copy. */
static int decode(const char *text, uint8_t **out, size_t *n_out) {
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    int rc = base64_decode(copy, n, out, n_out);
    free(copy);
    return rc;
}

static void test_vectors(void) {
    static const char *const PLAIN[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const CODED[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        size_t n = strlen(PLAIN[i]);
        char enc[16];
        CHECK_EQ_INT(base64_encoded_size(n), strlen(CODED[i]));
        CHECK_EQ_INT(base64_encode(PLAIN[i], n, enc), strlen(CODED[i]));
        CHECK_MSG(strcmp(enc, CODED[i]) == 0, "%s -> %s, not %s", PLAIN[i], enc, CODED[i]);
        uint8_t *dec = NULL;
        size_t n_dec = 99;
        CHECK(decode(CODED[i], &dec, &n_dec) == 0);
        CHECK(dec != NULL && n_dec == n && memcmp(dec, PLAIN[i], n) == 0);
        free(dec);
    }
    uint8_t *dec = NULL;
    size_t n_dec = 9;
    CHECK(decode(" \r\n\t", &dec, &n_dec) == 0 && dec != NULL && n_dec == 0); // nothing
    free(dec);
}

static void test_round_trips(void) {
    uint64_t seed = 0x5eed;
    for (size_t n = 0; n <= 300; n++) {
        uint8_t *bytes = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            bytes[i] = (uint8_t)test_rng_u64(&seed);
        }
        char *enc = malloc(base64_encoded_size(n) + 1);
        size_t n_enc = base64_encode(bytes, n, enc);
        CHECK(n_enc == base64_encoded_size(n) && n_enc % 4 == 0 && enc[n_enc] == '\0');
        uint8_t *dec = NULL;
        size_t n_dec = 0;
        CHECK(decode(enc, &dec, &n_dec) == 0 && n_dec == n && memcmp(dec, bytes, n) == 0);
        free(dec);
        // Whitespace anywhere (line breaks of MIME, a pretty-printed JSON string) is skipped.
        char *spaced = malloc(2 * n_enc + 3);
        size_t o = 0;
        spaced[o++] = ' ';
        for (size_t i = 0; i < n_enc; i++) {
            spaced[o++] = enc[i];
            if (i % 7 == 3) {
                spaced[o++] = "\r\n\t "[i % 4];
            }
        }
        spaced[o++] = '\n';
        spaced[o] = '\0';
        CHECK(decode(spaced, &dec, &n_dec) == 0 && n_dec == n && memcmp(dec, bytes, n) == 0);
        free(dec);
        free(spaced);
        free(enc);
        free(bytes);
    }
}

/* text must be refused and leave nothing. */
static void bad(const char *text, size_t n, const char *why) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    uint8_t *out = (uint8_t *)copy; // must come back NULL
    size_t n_out = 7;
    int rc = base64_decode(copy, n, &out, &n_out);
    CHECK_MSG(rc == -1 && out == NULL && n_out == 0, "%s: rc %d", why, rc);
    free(copy);
}

static void test_bad_input(void) {
    // Stray characters: the URL-safe alphabet, punctuation, NUL, non-ASCII, a data: prefix.
    bad("Zm9-", 4, "'-'");
    bad("Zm9_", 4, "'_'");
    bad("Zm9v.g==", 8, "'.'");
    bad("Zm\0v", 4, "NUL");
    bad("Zm9v\xc3\xa9", 6, "non-ASCII");
    bad("data:;base64,Zm9v", 17, "a data: prefix");
    bad("Zm9v\v", 5, "vertical tab");
    // Padding too early, inside a group, after the end, too much of it.
    bad("=Zm9", 4, "'=' first");
    bad("Z===", 4, "'=' second");
    bad("Zm=v", 4, "data after '='");
    bad("Zg==Zg==", 8, "a group after padding");
    bad("Zg==Z", 5, "a character after padding");
    bad("Zg===", 5, "three '='");
    bad("Zm9v====", 8, "a group of '='");
    bad("====", 4, "only '='");
    // Lengths that are not a multiple of 4 (padding left out or cut).
    bad("Z", 1, "one character");
    bad("Zm", 2, "two characters");
    bad("Zm9", 3, "three characters");
    bad("Zg=", 3, "one '=' of two");
    bad("Zm9vYmFyZ", 9, "nine characters");
}

int main(void) {
    test_vectors();
    test_round_trips();
    test_bad_input();
    return test_main_result("test_base64");
}
