/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader (src/io/safetensors.c).
 *
 * Dataflow: input bytes -> one private temp file (temp_input.h) -> kz_st_open
 *   -> on failure: the message must name the file, *out must be NULL
 *   -> on success: every tensor found by name, fetched with its own shape, converted to float
 *      when F32/F16/BF16, its bytes read, its pages released -> kz_st_close.
 *
 * Seeds: tests/fuzz/corpus/safetensors/; dictionary: tests/fuzz/safetensors.dict. Any crash,
 * sanitizer report or abort() below is a bug in the reader.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "runtime/error.h"
#include "temp_input.h"

/* Touches everything a valid file exposes. */
static void exercise(kz_st_file *f) {
    uint8_t checksum = 0;
    for (size_t i = 0; i < kz_st_count(f); i++) {
        const kz_st_tensor *t = kz_st_at(f, i);
        if (kz_st_find(f, t->name) != t) {
            abort(); // names are unique, so lookup must return this very tensor
        }
        const kz_st_tensor *got = NULL;
        if (kz_st_get(f, t->name, t->n_dims, t->shape, &got) != KZ_OK || got != t) {
            abort();
        }
        const uint8_t *bytes = t->data;
        for (size_t b = 0; b < t->n_bytes; b++) {
            checksum ^= bytes[b];
        }
        if (t->dtype != KZ_DTYPE_OTHER) {
            float *values = malloc(t->n_elements ? t->n_elements * sizeof(float) : 1);
            if (!values || kz_tensor_to_f32(t, values) != KZ_OK) {
                abort();
            }
            free(values);
        }
        kz_st_release(f, t);
    }
    (void)kz_st_metadata(f, "format");
    volatile uint8_t sink = checksum;
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    temp_input_write("st", data, size);
    kz_st_file *f = NULL;
    kz_error_clear();
    if (kz_st_open(temp_path, &f) != KZ_OK) {
        if (f != NULL || strstr(kz_error_get(), temp_path) == NULL) {
            abort(); // failures leave *out NULL and name the file
        }
        return 0;
    }
    exercise(f);
    kz_st_close(f);
    return 0;
}
