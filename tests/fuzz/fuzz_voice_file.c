/*
 * fuzz_voice_file.c - libFuzzer target for the voice file reader (src/io/voice_file.c).
 *
 * Dataflow: input bytes -> kz_voice_file_parse as they are, and again with the checksum
 *   fixed up (the last 4 bytes set to the CRC-32 of the rest), so the field and value
 *   checks behind the checksum are reached too
 *   -> on failure: *out must be NULL and the message must name the input
 *   -> on success: every field within the reader's caps, every x-vector value finite, every
 *      code in [0, 65535], the transcript NUL-terminated at its length; then the voice is
 *      encoded again and must give the input's bytes exactly.
 *
 * Seeds: tests/fuzz/corpus/voice_file/ (written by tools/reference/voice_file.py); dictionary:
 * tests/fuzz/voice_file.dict. Any crash, sanitizer report or abort() below is a bug.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/voice_file.h"
#include "runtime/error.h"

static void exercise(const kz_voice *v, const uint8_t *data, size_t size) {
    if (v->enc_dim < 1 || v->enc_dim > KZ_VOICE_MAX_ENC_DIM || v->n_ref_frames < 0 ||
        v->n_ref_frames > KZ_VOICE_MAX_FRAMES || v->n_codebooks < 0 ||
        v->n_codebooks > KZ_VOICE_MAX_CODEBOOKS || v->fingerprint == 0 ||
        !(v->ref_seconds > 0) || (v->icl != (v->n_ref_frames > 0))) {
        abort();
    }
    for (int32_t i = 0; i < v->enc_dim; i++) {
        if (!isfinite(v->xvector[i])) {
            abort();
        }
    }
    const size_t n_codes = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    for (size_t i = 0; i < n_codes; i++) {
        if (v->ref_codes[i] < 0 || v->ref_codes[i] > 65535) {
            abort();
        }
    }
    if (strlen(v->ref_text) > KZ_VOICE_MAX_TEXT_BYTES) {
        abort();
    }
    uint8_t *again = NULL;
    size_t n_again = 0;
    if (kz_voice_file_encode(v, &again, &n_again) != KZ_OK || n_again != size ||
        memcmp(again, data, size) != 0) {
        abort(); // a file the reader accepts is exactly what the writer makes of it
    }
    free(again);
}

static void parse(const uint8_t *data, size_t size) {
    kz_voice *v = (kz_voice *)1;
    kz_error_clear();
    if (kz_voice_file_parse(data, size, "fuzz-input", &v) != KZ_OK) {
        if (v != NULL || strstr(kz_error_get(), "fuzz-input") == NULL) {
            abort();
        }
        return;
    }
    exercise(v, data, size);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse(data, size);
    if (size >= 4) {
        uint8_t *fixed = malloc(size);
        memcpy(fixed, data, size);
        uint32_t crc = kz_voice_file_crc32(0, fixed, size - 4);
        memcpy(fixed + size - 4, &crc, 4);
        parse(fixed, size);
        free(fixed);
    }
    return 0;
}
