/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (src/io/gguf.c).
 *
 * Dataflow: input bytes -> one private temp file (temp_input.h) -> kz_gguf_open
 *   -> on failure: the message must name the file, *out must be NULL
 *   -> on success: every metadata entry found by key and read back through the typed getter of
 *      its own type (every string and array element touched), every tensor found by name and
 *      fetched with its own shape, its bytes read, its pages released -> kz_gguf_close.
 *
 * Seeds: tests/fuzz/corpus/gguf/ (written by kz_gguf_writer); dictionary: tests/fuzz/gguf.dict.
 * Any crash, sanitizer report or abort() below is a bug in the reader.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "runtime/error.h"
#include "temp_input.h"

/* Reads one scalar through the getter of its type; returns a byte of it for the checksum. */
static uint8_t read_scalar(const kz_gguf_file *f, const kz_gguf_kv *kv) {
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
        uint8_t bytes[8];
    } v;
    memset(&v, 0, sizeof v);
    kz_status status = KZ_STATUS_INTERNAL;
    switch (kv->type) {
    case KZ_GGUF_VALUE_U8:
        status = kz_gguf_get_u8(f, kv->key, &v.u8);
        break;
    case KZ_GGUF_VALUE_I8:
        status = kz_gguf_get_i8(f, kv->key, &v.i8);
        break;
    case KZ_GGUF_VALUE_U16:
        status = kz_gguf_get_u16(f, kv->key, &v.u16);
        break;
    case KZ_GGUF_VALUE_I16:
        status = kz_gguf_get_i16(f, kv->key, &v.i16);
        break;
    case KZ_GGUF_VALUE_U32:
        status = kz_gguf_get_u32(f, kv->key, &v.u32);
        break;
    case KZ_GGUF_VALUE_I32:
        status = kz_gguf_get_i32(f, kv->key, &v.i32);
        break;
    case KZ_GGUF_VALUE_U64:
        status = kz_gguf_get_u64(f, kv->key, &v.u64);
        break;
    case KZ_GGUF_VALUE_I64:
        status = kz_gguf_get_i64(f, kv->key, &v.i64);
        break;
    case KZ_GGUF_VALUE_F32:
        status = kz_gguf_get_f32(f, kv->key, &v.f32);
        break;
    case KZ_GGUF_VALUE_F64:
        status = kz_gguf_get_f64(f, kv->key, &v.f64);
        break;
    case KZ_GGUF_VALUE_BOOL:
        status = kz_gguf_get_bool(f, kv->key, &v.b);
        break;
    default:
        abort(); // strings and arrays are not scalars
    }
    if (status != KZ_OK) {
        abort();
    }
    int64_t wide = 0;
    (void)kz_gguf_get_int(f, kv->key, &wide); // fails for floats, bools and large uint64
    return v.bytes[0] ^ (uint8_t)wide;
}

/* Touches every string byte of a string or string array entry. */
static uint8_t read_strings(const kz_gguf_file *f, const kz_gguf_kv *kv) {
    const char *const *strings = kv->strings;
    size_t n_values = kv->n_values;
    if (kv->type == KZ_GGUF_VALUE_STRING) {
        const char *str = NULL;
        if (kz_gguf_get_str(f, kv->key, &str) != KZ_OK || str != kv->strings[0] || n_values != 1) {
            abort();
        }
    } else if (kz_gguf_get_str_array(f, kv->key, &strings, &n_values) != KZ_OK ||
               strings != kv->strings || n_values != kv->n_values) {
        abort();
    }
    uint8_t checksum = 0;
    for (size_t i = 0; i < n_values; i++) {
        for (size_t b = 0; b <= kv->string_bytes[i]; b++) { // the NUL terminator included
            checksum ^= (uint8_t)strings[i][b];
        }
        if (strings[i][kv->string_bytes[i]] != '\0') {
            abort();
        }
    }
    return checksum;
}

static uint8_t read_kv(const kz_gguf_file *f, const kz_gguf_kv *kv) {
    if (kz_gguf_find_kv(f, kv->key) != kv) {
        abort(); // keys are unique, so lookup must return this very entry
    }
    if (kv->elem_type == KZ_GGUF_VALUE_STRING) {
        return read_strings(f, kv);
    }
    if (kv->type != KZ_GGUF_VALUE_ARRAY) {
        return read_scalar(f, kv);
    }
    const void *values = NULL;
    size_t n_values = 0;
    if (kz_gguf_get_array(f, kv->key, kv->elem_type, &values, &n_values) != KZ_OK ||
        values != kv->values || n_values != kv->n_values) {
        abort();
    }
    size_t n_bytes = 0;
    switch (kv->elem_type) {
    case KZ_GGUF_VALUE_U8:
    case KZ_GGUF_VALUE_I8:
    case KZ_GGUF_VALUE_BOOL:
        n_bytes = 1;
        break;
    case KZ_GGUF_VALUE_U16:
    case KZ_GGUF_VALUE_I16:
        n_bytes = 2;
        break;
    case KZ_GGUF_VALUE_U32:
    case KZ_GGUF_VALUE_I32:
    case KZ_GGUF_VALUE_F32:
        n_bytes = 4;
        break;
    default:
        n_bytes = 8;
        break;
    }
    uint8_t checksum = 0;
    for (size_t b = 0; b < n_values * n_bytes; b++) {
        checksum ^= ((const uint8_t *)values)[b];
    }
    return checksum;
}

/* Touches everything a valid file exposes. */
static void exercise(kz_gguf_file *f) {
    uint8_t checksum = 0;
    for (size_t i = 0; i < kz_gguf_kv_count(f); i++) {
        checksum ^= read_kv(f, kz_gguf_kv_at(f, i));
    }
    for (size_t i = 0; i < kz_gguf_tensor_count(f); i++) {
        const kz_gguf_tensor *t = kz_gguf_tensor_at(f, i);
        if (kz_gguf_find(f, t->name) != t) {
            abort(); // names are unique
        }
        const kz_gguf_tensor *got = NULL;
        if (kz_gguf_get(f, t->name, t->n_dims, t->shape, &got) != KZ_OK || got != t) {
            abort();
        }
        if (t->n_elements == 0 || t->n_bytes == 0 || t->offset % kz_gguf_alignment(f) != 0) {
            abort();
        }
        const uint8_t *bytes = t->data;
        for (size_t b = 0; b < t->n_bytes; b++) {
            checksum ^= bytes[b];
        }
        kz_gguf_release(f, t);
    }
    (void)kz_gguf_find_kv(f, "general.architecture");
    (void)kz_gguf_find(f, "token_embd.weight");
    volatile uint8_t sink = checksum;
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    temp_input_write("gguf", data, size);
    kz_gguf_file *f = NULL;
    kz_error_clear();
    if (kz_gguf_open(temp_path, &f) != KZ_OK) {
        if (f != NULL || strstr(kz_error_get(), temp_path) == NULL) {
            abort(); // failures leave *out NULL and name the file
        }
        return 0;
    }
    exercise(f);
    kz_gguf_close(f);
    return 0;
}
