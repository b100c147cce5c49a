/*
 * fuzz_merges.c - libFuzzer target for the merges.txt reader and the merge loop it feeds
 * (src/text/bpe.c).
 *
 * Dataflow: a fixed byte-level vocabulary (the 256 byte tokens, ids 0..255, then merged
 *   tokens over "a", "b", "c", " " ("Ġ"), "\n" ("Ċ"), "é" and "t", "h", "e", ids 256..)
 *   + input bytes as merges.txt (an exact-size heap copy, no NUL after it)
 *   -> kz_bpe_load_text
 *   -> on failure: the message must name the merges label, the output must be NULL
 *   -> on success: fixed pieces and the input's first bytes are encoded; every id must have
 *      token bytes, and the tokens' bytes joined must equal the piece (no byte lost, added
 *      or reordered, whatever merges were read).
 *
 * Seeds: tests/fuzz/corpus/merges/; dictionary: tests/fuzz/merges.dict. Any crash,
 * sanitizer report or abort() below is a bug in the reader or the merge loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/bpe.h"

#define VOCAB_LABEL "fuzz:vocab.json"
#define MERGES_LABEL "fuzz:merges.txt"

/* Merged tokens, spelled in the byte-level alphabet, ids 256 on. */
static const char *const MERGED[] = {
    "ab", "bc", "abc", "aa", "aaa", "aaaa", "Ġa", "Ġab", "ĠĠ", "ĠĠĠĠ", "ĊĊ", "ĠĊ", "th", "he",
    "the", "Ġt", "Ġthe", "Ã©", "Ã©Ã©", "aÃ©", "cab", "bca", "ĠĊĊ",
};

static const char *const PIECES[] = {
    "abc", "aaaaaaaaa", " the the", "  \n\n", "\xc3\xa9\xc3\xa9\x61\x62", "cabcabca", "x", "t",
};

/* Appends the JSON-escaped spelling of byte b (GPT-2 byte-to-unicode, as UTF-8). */
static size_t put_byte_token(char *dst, uint8_t b) {
    uint32_t cp = kz_bpe_byte_to_codepoint(b);
    size_t n = 0;
    if (cp == '"' || cp == '\\') {
        dst[n++] = '\\';
        dst[n++] = (char)cp;
    } else if (cp < 0x80) {
        dst[n++] = (char)cp;
    } else if (cp < 0x800) {
        dst[n++] = (char)(0xC0 | (cp >> 6));
        dst[n++] = (char)(0x80 | (cp & 0x3F));
    } else {
        dst[n++] = (char)(0xE0 | (cp >> 12));
        dst[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[n++] = (char)(0x80 | (cp & 0x3F));
    }
    return n;
}

/* vocab.json text: {"<byte b>": b, ..., "<merged i>": 256 + i}. */
static size_t build_vocab(char *v) {
    size_t n = 0;
    v[n++] = '{';
    for (int b = 0; b < 256; b++) {
        v[n++] = '"';
        n += put_byte_token(v + n, (uint8_t)b);
        n += (size_t)snprintf(v + n, 32, "\": %d, ", b);
    }
    for (size_t i = 0; i < sizeof MERGED / sizeof MERGED[0]; i++) {
        n += (size_t)snprintf(v + n, 64, "\"%s\": %zu, ", MERGED[i], 256 + i);
    }
    n -= 2; // the last ", "
    v[n++] = '}';
    return n;
}

/* Aborts unless piece encodes to ids whose bytes join to exactly the piece. */
static void check_roundtrip(const kz_bpe *bpe, const uint8_t *piece, size_t n_bytes) {
    kz_bpe_ids ids = {0};
    if (kz_bpe_encode_piece(bpe, NULL, piece, n_bytes, &ids) != KZ_OK) {
        free(ids.ids);
        return; // out of memory only
    }
    size_t at = 0;
    for (size_t i = 0; i < ids.n_ids; i++) {
        size_t n = 0;
        const uint8_t *bytes = kz_bpe_token_bytes(bpe, ids.ids[i], &n);
        if (!bytes || n == 0 || at + n > n_bytes || memcmp(bytes, piece + at, n) != 0) {
            abort();
        }
        at += n;
    }
    if (at != n_bytes) {
        abort();
    }
    free(ids.ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char vocab[16384];
    static size_t n_vocab;
    if (!n_vocab) {
        n_vocab = build_vocab(vocab);
    }
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    kz_bpe *bpe = (kz_bpe *)1;
    kz_status st = kz_bpe_load_text(VOCAB_LABEL, vocab, n_vocab, MERGES_LABEL, copy, size, &bpe);
    free(copy);
    if (st != KZ_OK) {
        if (bpe != NULL || !strstr(kz_error_get(), MERGES_LABEL)) {
            abort();
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof PIECES / sizeof PIECES[0]; i++) {
        check_roundtrip(bpe, (const uint8_t *)PIECES[i], strlen(PIECES[i]));
    }
    if (size > 0) {
        check_roundtrip(bpe, data, size < 256 ? size : 256);
    }
    kz_bpe_free(bpe);
    return 0;
}
