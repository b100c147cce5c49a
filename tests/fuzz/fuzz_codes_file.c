/*
 * fuzz_codes_file.c - libFuzzer target for the codes file reader (tools/kztts/codes_file.c).
 *
 * Dataflow: input bytes -> a read-only memory stream (fmemopen; /dev/null when empty)
 *   -> codes_file_parse for 16 codebooks of 2048 codes (the released models) and for 2 of 10
 *      (short frames, so that fuzzed inputs parse more often)
 *   -> on failure: *codes NULL, *n_frames 0, the message one line naming the stream
 *   -> on success: at least one frame, every code in its codebook; written back as text
 *      with codes_file_text and parsed again: the same codes.
 *
 * Seeds: tests/fuzz/corpus/codes_file/; dictionary: tests/fuzz/codes_file.dict.
 * Any crash, sanitizer report or abort() below is a bug in the reader.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codes_file.h"

#define NAME "fuzz-input"

static FILE *open_input(const uint8_t *data, size_t size) {
    // fmemopen may refuse a size of 0; an empty file reads the same.
    FILE *f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!f) {
        perror("fmemopen");
        abort();
    }
    return f;
}

/* What a successful parse promises: frames, and every code inside its codebook. */
static void check_codes(const int32_t *codes, size_t n_frames, int n_codebooks, int size) {
    if (!codes || n_frames == 0) {
        abort();
    }
    for (size_t i = 0; i < n_frames * (size_t)n_codebooks; i++) {
        if (codes[i] < 0 || codes[i] >= size) {
            abort();
        }
    }
}

/* Parsed codes written as text (codes_file_text) and read back: the same codes. */
static void round_trip(const int32_t *codes, size_t n_frames, int n_codebooks, int size) {
    size_t n_bytes = 0;
    char *text = codes_file_text(codes, n_frames, n_codebooks, &n_bytes);
    FILE *f = text ? fmemopen(text, n_bytes, "r") : NULL;
    int32_t *again = NULL;
    size_t n_again = 0;
    char err[512];
    if (!f || codes_file_parse(f, "round trip", n_codebooks, size, &again, &n_again, err,
                               sizeof err) != 0) {
        abort();
    }
    fclose(f);
    free(text);
    if (n_again != n_frames ||
        memcmp(again, codes, n_frames * (size_t)n_codebooks * sizeof *codes) != 0) {
        abort();
    }
    free(again);
}

static void parse_as(const uint8_t *data, size_t size, int n_codebooks, int codebook_size) {
    FILE *f = open_input(data, size);
    int32_t *codes = (int32_t *)&codes; // must come back NULL on failure
    size_t n_frames = 1;
    char err[512];
    err[0] = '\0';
    int rc = codes_file_parse(f, NAME, n_codebooks, codebook_size, &codes, &n_frames, err,
                              sizeof err);
    fclose(f);
    if (rc != 0) {
        if (codes || n_frames || strncmp(err, NAME ":", strlen(NAME ":")) != 0 ||
            strpbrk(err, "\n\r\v\f")) {
            abort(); // failures leave nothing and say where, on one line
        }
        return;
    }
    check_codes(codes, n_frames, n_codebooks, codebook_size);
    round_trip(codes, n_frames, n_codebooks, codebook_size);
    free(codes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_as(data, size, 16, 2048);
    parse_as(data, size, 2, 10);
    return 0;
}
