/*
 * fuzz_vocab_json.c - libFuzzer target for the flat vocab.json reader (src/text/vocab_json.c).
 *
 * Dataflow: input bytes -> an exact-size heap copy (no NUL after it) -> kz_vocab_json_read
 *   -> on failure: the message must name the label, the output must be empty
 *   -> on success: every entry's key must lie inside the key buffer, be NUL-terminated
 *      and no longer than the input, its id in [0, 2^31).
 *
 * Seeds: tests/fuzz/corpus/vocab_json/; dictionary: tests/fuzz/vocab_json.dict. Any crash,
 * sanitizer report or abort() below is a bug in the reader.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/vocab_json.h"

#define LABEL "fuzz:vocab.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    kz_vocab_json v;
    kz_status st = kz_vocab_json_read(LABEL, copy, size, &v);
    free(copy);
    if (st != KZ_OK) {
        if (!strstr(kz_error_get(), LABEL) || v.entries || v.strings || v.n_entries) {
            abort();
        }
        return 0;
    }
    for (size_t i = 0; i < v.n_entries; i++) {
        const kz_vocab_entry *e = &v.entries[i];
        if ((size_t)e->off + e->len > size || v.strings[e->off + e->len] != '\0' || e->id < 0) {
            abort();
        }
    }
    kz_vocab_json_free(&v);
    return 0;
}
