/*
 * test_gguf.c - the GGUF writer and reader on small files written here.
 *
 * Dataflow: kz_gguf_writer (metadata of every type, tensors of every supported type) -> file in
 *        a mkdtemp directory -> kz_gguf_open -> values, strings, tensors and bytes compared with
 *        what was written; or hand-built bytes (one defect each) -> kz_gguf_open -> the expected
 *        status and a message naming the file and the problem.
 *
 * Covers: round trips at alignment 32 and 64 (scalars, empty strings, strings with NUL bytes,
 * numeric, bool and string arrays, empty arrays, odd shapes, every supported tensor type
 * (integer tables too), data by pointer and by callback);
 * the writer's bytes against an independent encoding of the spec; version 2; typed getters and
 * their errors; the writer's argument checks, the atomic write (no partial files, the old file
 * kept on failure); its destinations (a symlink followed and kept, its target replaced in its
 * own folder with its permissions, a dangling link's target created, a device written
 * through); the progress callback and a cancel (only the writer's own temporary file goes);
 * one case per malformed header; every truncated prefix and every byte flip
 * of a valid file (an error or a valid file, never a crash).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/gguf.h"
#include "runtime/error.h"
#include "test.h"

static char temp_dir[64];

static void temp_path(char *path, size_t path_bytes, const char *name) {
    snprintf(path, path_bytes, "%s/%s", temp_dir, name);
}

static void write_bytes(const char *path, const void *bytes, size_t n_bytes) {
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL);
    if (file) {
        CHECK(n_bytes == 0 || fwrite(bytes, 1, n_bytes, file) == n_bytes);
        fclose(file);
    }
}

/* Reads a whole file; caller frees. */
static uint8_t *read_all(const char *path, size_t *n_bytes) {
    *n_bytes = 0;
    FILE *file = fopen(path, "rb");
    if (!file) {
        return NULL;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *bytes = malloc(size > 0 ? (size_t)size : 1);
    if (bytes && size > 0 && fread(bytes, 1, (size_t)size, file) != (size_t)size) {
        free(bytes);
        bytes = NULL;
    }
    fclose(file);
    *n_bytes = bytes ? (size_t)size : 0;
    return bytes;
}

/* Number of entries in temp_dir whose name contains `needle`. */
static int count_files(const char *needle) {
    int count = 0;
    DIR *dir = opendir(temp_dir);
    for (struct dirent *e = dir ? readdir(dir) : NULL; e; e = readdir(dir)) {
        count += strstr(e->d_name, needle) != NULL;
    }
    if (dir) {
        closedir(dir);
    }
    return count;
}

/* ---- byte builder for hand-made files ------------------------------------------------------ */

typedef struct buf {
    uint8_t *bytes;
    size_t size;
    size_t capacity;
} buf;

static void b_put(buf *b, const void *bytes, size_t n_bytes) {
    if (b->size + n_bytes > b->capacity) {
        b->capacity = (b->size + n_bytes) * 2 + 64;
        b->bytes = realloc(b->bytes, b->capacity);
    }
    if (n_bytes) {
        memcpy(b->bytes + b->size, bytes, n_bytes);
    }
    b->size += n_bytes;
}

static void b_u32(buf *b, uint32_t value) {
    uint8_t le[4];
    for (int i = 0; i < 4; i++) {
        le[i] = (uint8_t)(value >> (8 * i));
    }
    b_put(b, le, 4);
}

static void b_u64(buf *b, uint64_t value) {
    uint8_t le[8];
    for (int i = 0; i < 8; i++) {
        le[i] = (uint8_t)(value >> (8 * i));
    }
    b_put(b, le, 8);
}

static void b_str(buf *b, const char *text) {
    b_u64(b, strlen(text));
    b_put(b, text, strlen(text));
}

static void b_zeros(buf *b, size_t n_bytes) {
    for (size_t i = 0; i < n_bytes; i++) {
        b_put(b, "", 1);
    }
}

static void b_pad(buf *b, size_t alignment) {
    b_zeros(b, (alignment - b->size % alignment) % alignment);
}

static void b_header(buf *b, uint64_t n_tensors, uint64_t n_kvs) {
    b->size = 0;
    b_put(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, n_tensors);
    b_u64(b, n_kvs);
}

static void b_kv_u32(buf *b, const char *key, uint32_t value) {
    b_str(b, key);
    b_u32(b, KZ_GGUF_VALUE_U32);
    b_u32(b, value);
}

/* Tensor info with dims in file (ggml) order. */
static void b_info(buf *b, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type,
                   uint64_t offset) {
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) {
        b_u64(b, dims[d]);
    }
    b_u32(b, type);
    b_u64(b, offset);
}

/* ---- expectations -------------------------------------------------------------------------- */

/* Opens `path` expecting failure with `want`; the message names the file and holds the needles
 * (needle_b may be NULL). */
static void expect_open_error(const char *path, kz_status want, const char *needle_a,
                              const char *needle_b) {
    static char sentinel;
    kz_gguf_file *f = (kz_gguf_file *)(void *)&sentinel; // must be reset to NULL on failure
    kz_error_clear();
    kz_status status = kz_gguf_open(path, &f);
    CHECK_MSG(status == want, "%s: status %d, expected %d (%s)", path, (int)status, (int)want,
              kz_last_error());
    CHECK(f == NULL);
    if (status == KZ_OK) {
        kz_gguf_close(f);
    }
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_last_error(), needle_a);
    if (needle_b) {
        CHECK_STR_CONTAINS(kz_last_error(), needle_b);
    }
}

/* Writes b as `name` and expects KZ_STATUS_BAD_MODEL with the needles. */
static void expect_bad(const char *name, const buf *b, const char *needle_a, const char *needle_b) {
    char path[128];
    temp_path(path, sizeof path, name);
    write_bytes(path, b->bytes, b->size);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, needle_a, needle_b);
    unlink(path);
}

/* ---- round trip ---------------------------------------------------------------------------- */

typedef struct tensor_spec {
    const char *name;
    kz_gguf_tensor_type type;
    int n_dims;
    int64_t shape[4]; // row-major
    size_t n_bytes;
    bool by_callback;
} tensor_spec;

static const tensor_spec specs[] = {
    {"f32.odd", KZ_GGUF_TENSOR_F32, 2, {3, 5}, 60, false},
    {"f16.vec", KZ_GGUF_TENSOR_F16, 1, {7}, 14, false},
    {"bf16.cube", KZ_GGUF_TENSOR_BF16, 3, {2, 3, 5}, 60, false},
    {"q8_0.mat", KZ_GGUF_TENSOR_Q8_0, 2, {3, 64}, 3 * 2 * 34, false},
    {"q4_0.mat", KZ_GGUF_TENSOR_Q4_0, 2, {5, 32}, 5 * 18, true},
    {"f32.4d", KZ_GGUF_TENSOR_F32, 4, {2, 1, 3, 1}, 24, false},
    {"f32.fill", KZ_GGUF_TENSOR_F32, 1, {11}, 44, true},
    {"i8.vec", KZ_GGUF_TENSOR_I8, 1, {5}, 5, false},
    {"i32.pairs", KZ_GGUF_TENSOR_I32, 2, {3, 2}, 24, false},
    {"i64.fill", KZ_GGUF_TENSOR_I64, 1, {3}, 24, true},
};
enum { N_SPECS = sizeof specs / sizeof specs[0] };

/* Deterministic bytes for tensor i. */
static void pattern(uint8_t *dst, size_t n_bytes, size_t seed) {
    uint32_t state = (uint32_t)seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n_bytes; i++) {
        state = state * 1664525u + 1013904223u;
        dst[i] = (uint8_t)(state >> 24);
    }
}

static int fill_calls;

static kz_status fill_pattern(void *user, const char *name, void *dst, size_t n_bytes) {
    const tensor_spec *spec = user;
    CHECK(strcmp(name, spec->name) == 0);
    CHECK_EQ_INT(n_bytes, spec->n_bytes);
    pattern(dst, n_bytes, (size_t)(spec - specs));
    fill_calls++;
    return KZ_OK;
}

static const uint8_t u8_values[] = {0, 1, 255};
static const int8_t i8_values[] = {-128, 0, 127};
static const uint16_t u16_values[] = {65535, 1};
static const int16_t i16_values[] = {-32768, 32767, 5};
static const uint32_t u32_values[] = {4000000000u};
static const int32_t i32_values[] = {-7, 7, INT32_MIN, INT32_MAX};
static const uint64_t u64_values[] = {UINT64_MAX, 0, 1};
static const int64_t i64_values[] = {INT64_MIN, -1};
static const float f32_values[] = {1.5f, -0.0f, 3.4e38f};
static const double f64_values[] = {-1e300, 0.1};
static const bool bool_values[] = {true, false, true, true};
static const char *const vocab[] = {"hello", "", "\xc3\xa9t\xc3\xa9", "a\0b", " ", ""};
static const size_t vocab_bytes[] = {5, 0, 5, 3, 1, 0};

static kz_status add_metadata(kz_gguf_writer *w) {
    kz_status s = KZ_OK;
#define ADD(call)                                                                                  \
    if (s == KZ_OK) {                                                                              \
        s = (call);                                                                                \
    }
    ADD(kz_gguf_writer_add_u8(w, "s.u8", 200))
    ADD(kz_gguf_writer_add_i8(w, "s.i8", -100))
    ADD(kz_gguf_writer_add_u16(w, "s.u16", 60000))
    ADD(kz_gguf_writer_add_i16(w, "s.i16", -30000))
    ADD(kz_gguf_writer_add_u32(w, "s.u32", 4000000000u))
    ADD(kz_gguf_writer_add_i32(w, "s.i32", -2000000000))
    ADD(kz_gguf_writer_add_u64(w, "s.u64", UINT64_MAX - 5))
    ADD(kz_gguf_writer_add_i64(w, "s.i64", INT64_MIN + 1))
    ADD(kz_gguf_writer_add_f32(w, "s.f32", 3.5f))
    ADD(kz_gguf_writer_add_f64(w, "s.f64", -1e300))
    ADD(kz_gguf_writer_add_bool(w, "s.true", true))
    ADD(kz_gguf_writer_add_bool(w, "s.false", false))
    ADD(kz_gguf_writer_add_str(w, "s.str", "h\xc3\xa9llo \xe2\x9c\x93"))
    ADD(kz_gguf_writer_add_str(w, "s.empty", ""))
    ADD(kz_gguf_writer_add_array(w, "a.u8", KZ_GGUF_VALUE_U8, u8_values, 3))
    ADD(kz_gguf_writer_add_array(w, "a.i8", KZ_GGUF_VALUE_I8, i8_values, 3))
    ADD(kz_gguf_writer_add_array(w, "a.u16", KZ_GGUF_VALUE_U16, u16_values, 2))
    ADD(kz_gguf_writer_add_array(w, "a.i16", KZ_GGUF_VALUE_I16, i16_values, 3))
    ADD(kz_gguf_writer_add_array(w, "a.u32", KZ_GGUF_VALUE_U32, u32_values, 1))
    ADD(kz_gguf_writer_add_array(w, "a.i32", KZ_GGUF_VALUE_I32, i32_values, 4))
    ADD(kz_gguf_writer_add_array(w, "a.u64", KZ_GGUF_VALUE_U64, u64_values, 3))
    ADD(kz_gguf_writer_add_array(w, "a.i64", KZ_GGUF_VALUE_I64, i64_values, 2))
    ADD(kz_gguf_writer_add_array(w, "a.f32", KZ_GGUF_VALUE_F32, f32_values, 3))
    ADD(kz_gguf_writer_add_array(w, "a.f64", KZ_GGUF_VALUE_F64, f64_values, 2))
    ADD(kz_gguf_writer_add_array(w, "a.bool", KZ_GGUF_VALUE_BOOL, bool_values, 4))
    ADD(kz_gguf_writer_add_array(w, "a.empty", KZ_GGUF_VALUE_F32, NULL, 0))
    ADD(kz_gguf_writer_add_str_array(w, "a.vocab", vocab, vocab_bytes, 6))
    ADD(kz_gguf_writer_add_str_array(w, "a.nostr", NULL, NULL, 0))
#undef ADD
    return s;
}

enum { N_METADATA = 28 };

static void check_scalars(const kz_gguf_file *f) {
    uint8_t u8 = 0;
    int8_t i8 = 0;
    uint16_t u16 = 0;
    int16_t i16 = 0;
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f32 = 0;
    double f64 = 0;
    bool flag = false;
    const char *str = NULL;
    CHECK(kz_gguf_get_u8(f, "s.u8", &u8) == KZ_OK && u8 == 200);
    CHECK(kz_gguf_get_i8(f, "s.i8", &i8) == KZ_OK && i8 == -100);
    CHECK(kz_gguf_get_u16(f, "s.u16", &u16) == KZ_OK && u16 == 60000);
    CHECK(kz_gguf_get_i16(f, "s.i16", &i16) == KZ_OK && i16 == -30000);
    CHECK(kz_gguf_get_u32(f, "s.u32", &u32) == KZ_OK && u32 == 4000000000u);
    CHECK(kz_gguf_get_i32(f, "s.i32", &i32) == KZ_OK && i32 == -2000000000);
    CHECK(kz_gguf_get_u64(f, "s.u64", &u64) == KZ_OK && u64 == UINT64_MAX - 5);
    CHECK(kz_gguf_get_i64(f, "s.i64", &i64) == KZ_OK && i64 == INT64_MIN + 1);
    CHECK(kz_gguf_get_f32(f, "s.f32", &f32) == KZ_OK && f32 == 3.5f);
    CHECK(kz_gguf_get_f64(f, "s.f64", &f64) == KZ_OK && f64 == -1e300);
    CHECK(kz_gguf_get_bool(f, "s.true", &flag) == KZ_OK && flag);
    CHECK(kz_gguf_get_bool(f, "s.false", &flag) == KZ_OK && !flag);
    CHECK(kz_gguf_get_str(f, "s.str", &str) == KZ_OK && str &&
          strcmp(str, "h\xc3\xa9llo \xe2\x9c\x93") == 0);
    CHECK(kz_gguf_get_str(f, "s.empty", &str) == KZ_OK && str && str[0] == '\0');
    const kz_gguf_kv *kv = kz_gguf_find_kv(f, "s.empty");
    CHECK(kv && kv->n_values == 1 && kv->string_bytes[0] == 0 && kv->values == NULL);

    int64_t wide = 0;
    CHECK(kz_gguf_get_int(f, "s.u8", &wide) == KZ_OK && wide == 200);
    CHECK(kz_gguf_get_int(f, "s.i16", &wide) == KZ_OK && wide == -30000);
    CHECK(kz_gguf_get_int(f, "s.i8", &wide) == KZ_OK && wide == -100);
    CHECK(kz_gguf_get_int(f, "s.i32", &wide) == KZ_OK && wide == -2000000000);
    CHECK(kz_gguf_get_int(f, "s.u16", &wide) == KZ_OK && wide == 60000);
    CHECK(kz_gguf_get_int(f, "s.u32", &wide) == KZ_OK && wide == 4000000000);
    CHECK(kz_gguf_get_int(f, "s.i64", &wide) == KZ_OK && wide == INT64_MIN + 1);
    CHECK_EQ_INT(kz_gguf_get_int(f, "s.u64", &wide), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "does not fit in int64");
    CHECK_EQ_INT(kz_gguf_get_int(f, "s.f32", &wide), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "'s.f32' has type float32, expected an integer");
}

static void check_arrays(const kz_gguf_file *f) {
    const void *values = NULL;
    size_t n_values = 0;
    static const struct {
        const char *key;
        kz_gguf_value_type type;
        const void *want;
        size_t n_values;
        size_t n_bytes;
    } arrays[] = {
        {"a.u8", KZ_GGUF_VALUE_U8, u8_values, 3, 3},
        {"a.i8", KZ_GGUF_VALUE_I8, i8_values, 3, 3},
        {"a.u16", KZ_GGUF_VALUE_U16, u16_values, 2, 4},
        {"a.i16", KZ_GGUF_VALUE_I16, i16_values, 3, 6},
        {"a.u32", KZ_GGUF_VALUE_U32, u32_values, 1, 4},
        {"a.i32", KZ_GGUF_VALUE_I32, i32_values, 4, 16},
        {"a.u64", KZ_GGUF_VALUE_U64, u64_values, 3, 24},
        {"a.i64", KZ_GGUF_VALUE_I64, i64_values, 2, 16},
        {"a.f32", KZ_GGUF_VALUE_F32, f32_values, 3, 12},
        {"a.f64", KZ_GGUF_VALUE_F64, f64_values, 2, 16},
        {"a.bool", KZ_GGUF_VALUE_BOOL, bool_values, 4, 4},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        kz_status status = kz_gguf_get_array(f, arrays[i].key, arrays[i].type, &values, &n_values);
        CHECK_MSG(status == KZ_OK, "%s: %s", arrays[i].key, kz_last_error());
        CHECK_EQ_INT(n_values, arrays[i].n_values);
        CHECK(values && memcmp(values, arrays[i].want, arrays[i].n_bytes) == 0);
        CHECK(values && (uintptr_t)values % 8 == 0);
    }
    const int32_t *ints = NULL;
    CHECK(kz_gguf_get_array(f, "a.i32", KZ_GGUF_VALUE_I32, (const void **)&ints, &n_values) ==
          KZ_OK);
    CHECK(ints && ints[2] == INT32_MIN && ints[3] == INT32_MAX); // aligned, usable in place
    CHECK(kz_gguf_get_array(f, "a.empty", KZ_GGUF_VALUE_F32, &values, &n_values) == KZ_OK);
    CHECK(n_values == 0);

    const char *const *strings = NULL;
    CHECK(kz_gguf_get_str_array(f, "a.vocab", &strings, &n_values) == KZ_OK);
    CHECK_EQ_INT(n_values, 6);
    const kz_gguf_kv *kv = kz_gguf_find_kv(f, "a.vocab");
    CHECK(kv && kv->type == KZ_GGUF_VALUE_ARRAY && kv->elem_type == KZ_GGUF_VALUE_STRING);
    for (size_t i = 0; strings && kv && i < 6; i++) {
        CHECK_EQ_INT(kv->string_bytes[i], vocab_bytes[i]);
        CHECK(memcmp(strings[i], vocab[i], vocab_bytes[i]) == 0 && strings[i][vocab_bytes[i]] == 0);
    }
    CHECK(kz_gguf_get_str_array(f, "a.nostr", &strings, &n_values) == KZ_OK && n_values == 0);
}

static void check_getter_errors(const kz_gguf_file *f, const char *path) {
    uint32_t u32 = 7;
    CHECK_EQ_INT(kz_gguf_get_u32(f, "no.such.key", &u32), KZ_STATUS_BAD_MODEL);
    CHECK(u32 == 0);
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_last_error(), "metadata key 'no.such.key' is missing");
    CHECK_EQ_INT(kz_gguf_get_u32(f, "s.i32", &u32), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "'s.i32' has type int32, expected uint32");
    const char *str = "x";
    CHECK_EQ_INT(kz_gguf_get_str(f, "a.vocab", &str), KZ_STATUS_BAD_MODEL);
    CHECK(str == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "has type array of string, expected string");
    const void *values = NULL;
    size_t n_values = 0;
    CHECK_EQ_INT(kz_gguf_get_array(f, "a.u8", KZ_GGUF_VALUE_I8, &values, &n_values),
                 KZ_STATUS_BAD_MODEL);
    CHECK(values == NULL && n_values == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "has type array of uint8, expected array of int8");
    CHECK_EQ_INT(kz_gguf_get_array(f, "s.u8", KZ_GGUF_VALUE_U8, &values, &n_values),
                 KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "has type uint8, expected array of uint8");
    CHECK_EQ_INT(kz_gguf_get_array(f, "a.vocab", KZ_GGUF_VALUE_STRING, &values, &n_values),
                 KZ_STATUS_INVALID_ARGUMENT);
    const char *const *strings = NULL;
    CHECK_EQ_INT(kz_gguf_get_str_array(f, "a.u8", &strings, &n_values), KZ_STATUS_BAD_MODEL);
    bool flag = true;
    CHECK_EQ_INT(kz_gguf_get_bool(f, "s.u8", &flag), KZ_STATUS_BAD_MODEL);
    CHECK(!flag);
}

static void check_tensors(const kz_gguf_file *f, uint32_t alignment, const char *path) {
    CHECK_EQ_INT(kz_gguf_tensor_count(f), N_SPECS);
    for (size_t i = 0; i < N_SPECS; i++) {
        const tensor_spec *spec = &specs[i];
        const kz_gguf_tensor *t = kz_gguf_tensor_at(f, i);
        CHECK(t && strcmp(t->name, spec->name) == 0);
        CHECK(t && kz_gguf_find(f, spec->name) == t);
        const kz_gguf_tensor *got = NULL;
        CHECK_MSG(kz_gguf_get(f, spec->name, spec->n_dims, spec->shape, &got) == KZ_OK && got == t,
                  "%s", kz_last_error());
        if (!t) {
            continue;
        }
        CHECK(t->type == spec->type && t->n_dims == spec->n_dims);
        CHECK(strcmp(t->type_name, kz_gguf_tensor_type_name(spec->type)) == 0);
        size_t n_elements = 1;
        for (int d = 0; d < spec->n_dims; d++) {
            CHECK(t->shape[d] == spec->shape[d]);
            CHECK(t->ne[d] == spec->shape[spec->n_dims - 1 - d]); // ggml order: innermost first
            n_elements *= (size_t)spec->shape[d];
        }
        for (int d = spec->n_dims; d < KZ_GGUF_MAX_DIMS; d++) {
            CHECK(t->ne[d] == 1 && t->shape[d] == 1);
        }
        CHECK_EQ_INT(t->n_elements, n_elements);
        CHECK_EQ_INT(t->n_bytes, spec->n_bytes);
        CHECK(t->offset % alignment == 0);
        CHECK((uintptr_t)t->data % alignment == 0);
        uint8_t want[512];
        pattern(want, spec->n_bytes, i);
        CHECK_MSG(memcmp(t->data, want, spec->n_bytes) == 0, "tensor %s bytes differ", spec->name);
    }
    CHECK(kz_gguf_tensor_at(f, N_SPECS) == NULL);
    CHECK(kz_gguf_find(f, "f32") == NULL);

    const kz_gguf_tensor *t = NULL;
    const int64_t wrong[2] = {5, 3};
    CHECK_EQ_INT(kz_gguf_get(f, "f32.odd", 2, wrong, &t), KZ_STATUS_BAD_MODEL);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_last_error(), "tensor 'f32.odd' has shape [3, 5], expected [5, 3]");
    CHECK_EQ_INT(kz_gguf_get(f, "f32.odd", 3, specs[2].shape, &t), KZ_STATUS_BAD_MODEL);
    CHECK_EQ_INT(kz_gguf_get(f, "nope", 2, wrong, &t), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "tensor 'nope' is missing");
    CHECK_EQ_INT(kz_gguf_get(f, "f32.odd", 0, wrong, &t), KZ_STATUS_INVALID_ARGUMENT);
}

/* Writes the full round-trip file at `alignment` to `path`. */
static void write_full(const char *path, uint32_t alignment) {
    kz_gguf_writer *w = NULL;
    CHECK(kz_gguf_writer_new(&w) == KZ_OK);
    CHECK_MSG(add_metadata(w) == KZ_OK, "%s", kz_last_error());
    if (alignment != 32) {
        CHECK(kz_gguf_writer_add_u32(w, "general.alignment", alignment) == KZ_OK);
    }
    static uint8_t data[N_SPECS][512];
    for (size_t i = 0; i < N_SPECS; i++) {
        const tensor_spec *spec = &specs[i];
        kz_status status;
        if (spec->by_callback) {
            status = kz_gguf_writer_add_tensor_fn(w, spec->name, spec->type, spec->n_dims,
                                                  spec->shape, fill_pattern, (void *)spec);
        } else {
            pattern(data[i], spec->n_bytes, i);
            status = kz_gguf_writer_add_tensor(w, spec->name, spec->type, spec->n_dims, spec->shape,
                                               data[i]);
        }
        CHECK_MSG(status == KZ_OK, "%s: %s", spec->name, kz_last_error());
    }
    fill_calls = 0;
    CHECK_MSG(kz_gguf_writer_write(w, path) == KZ_OK, "%s", kz_last_error());
    size_t by_callback = 0;
    for (size_t i = 0; i < N_SPECS; i++) {
        by_callback += specs[i].by_callback;
    }
    CHECK_EQ_INT(fill_calls, by_callback);
    kz_gguf_writer_free(w);
}

static void test_round_trip(uint32_t alignment) {
    char path[128];
    char name[64];
    snprintf(name, sizeof name, "full_%u.gguf", alignment);
    temp_path(path, sizeof path, name);
    write_full(path, alignment);
    CHECK_EQ_INT(count_files("partial"), 0);

    kz_gguf_file *f = NULL;
    CHECK_MSG(kz_gguf_open(path, &f) == KZ_OK, "%s", kz_last_error());
    if (!f) {
        return;
    }
    CHECK(strcmp(kz_gguf_path(f), path) == 0);
    CHECK_EQ_INT(kz_gguf_version(f), 3);
    CHECK_EQ_INT(kz_gguf_alignment(f), alignment);
    CHECK_EQ_INT(kz_gguf_kv_count(f), N_METADATA + (alignment != 32));
    CHECK(kz_gguf_kv_at(f, 0) && strcmp(kz_gguf_kv_at(f, 0)->key, "s.u8") == 0);
    CHECK(kz_gguf_kv_at(f, N_METADATA - 1) &&
          strcmp(kz_gguf_kv_at(f, N_METADATA - 1)->key, "a.nostr") == 0);
    CHECK(kz_gguf_kv_at(f, N_METADATA + 1) == NULL);
    for (size_t i = 0; i < kz_gguf_kv_count(f); i++) {
        const kz_gguf_kv *kv = kz_gguf_kv_at(f, i);
        CHECK(kz_gguf_find_kv(f, kv->key) == kv);
    }
    CHECK(kz_gguf_find_kv(f, "s") == NULL);
    check_scalars(f);
    check_arrays(f);
    check_getter_errors(f, path);
    check_tensors(f, alignment, path);

    const kz_gguf_tensor *t = kz_gguf_find(f, "f32.odd");
    kz_gguf_release(f, t);
    uint8_t want[60];
    pattern(want, sizeof want, 0);
    CHECK(t && memcmp(t->data, want, sizeof want) == 0);
    kz_gguf_close(f);
    kz_gguf_close(NULL);
    unlink(path);
}

/* The writer's bytes against the layout written out by hand from the spec. */
static void test_exact_bytes(void) {
    const float values[6] = {1, 2, 3, 4, 5, 6};
    kz_gguf_writer *w = NULL;
    CHECK(kz_gguf_writer_new(&w) == KZ_OK);
    CHECK(kz_gguf_writer_add_u32(w, "a.b", 7) == KZ_OK);
    CHECK(kz_gguf_writer_add_str(w, "s", "xy") == KZ_OK);
    const int64_t shape[2] = {2, 3};
    CHECK(kz_gguf_writer_add_tensor(w, "t", KZ_GGUF_TENSOR_F32, 2, shape, values) == KZ_OK);
    char path[128];
    temp_path(path, sizeof path, "exact.gguf");
    CHECK(kz_gguf_writer_write(w, path) == KZ_OK);
    kz_gguf_writer_free(w);

    buf want = {0};
    b_header(&want, 1, 2);
    b_kv_u32(&want, "a.b", 7);
    b_str(&want, "s");
    b_u32(&want, KZ_GGUF_VALUE_STRING);
    b_str(&want, "xy");
    const uint64_t dims[2] = {3, 2}; // ggml order
    b_info(&want, "t", 2, dims, KZ_GGUF_TENSOR_F32, 0);
    b_pad(&want, 32);
    CHECK_EQ_INT(want.size, 128);
    b_put(&want, values, sizeof values);
    b_pad(&want, 32);

    size_t n_bytes = 0;
    uint8_t *got = read_all(path, &n_bytes);
    CHECK_EQ_INT(n_bytes, want.size);
    CHECK(got && n_bytes == want.size && memcmp(got, want.bytes, n_bytes) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);

    // The same bytes with version 2 (identical layout) are accepted.
    want.bytes[4] = 2;
    temp_path(path, sizeof path, "version2.gguf");
    write_bytes(path, want.bytes, want.size);
    kz_gguf_file *f = NULL;
    CHECK_MSG(kz_gguf_open(path, &f) == KZ_OK, "%s", kz_last_error());
    CHECK_EQ_INT(kz_gguf_version(f), 2);
    const kz_gguf_tensor *t = kz_gguf_find(f, "t");
    CHECK(t && t->shape[0] == 2 && t->shape[1] == 3 && ((const float *)t->data)[5] == 6.0f);
    kz_gguf_close(f);
    unlink(path);

    // Metadata only, ending right after the infos (no padding): valid.
    b_header(&want, 0, 1);
    b_kv_u32(&want, "k", 1);
    temp_path(path, sizeof path, "meta_only.gguf");
    write_bytes(path, want.bytes, want.size);
    CHECK_MSG(kz_gguf_open(path, &f) == KZ_OK, "%s", kz_last_error());
    CHECK_EQ_INT(kz_gguf_tensor_count(f), 0);
    CHECK(kz_gguf_find(f, "t") == NULL);
    kz_gguf_close(f);
    unlink(path);
    free(want.bytes);
    free(got);
}

/* ---- writer checks ------------------------------------------------------------------------- */

static kz_status fill_fail(void *user, const char *name, void *dst, size_t n_bytes) {
    (void)user;
    memset(dst, 0, n_bytes);
    return kz_error_set(KZ_STATUS_BAD_INPUT, "cannot quantize '%s'", name);
}

static void test_writer_errors(void) {
    kz_gguf_writer *w = NULL;
    CHECK(kz_gguf_writer_new(&w) == KZ_OK);
    CHECK(kz_gguf_writer_add_u32(w, "k", 1) == KZ_OK);
    CHECK_EQ_INT(kz_gguf_writer_add_str(w, "k", "x"), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "metadata key 'k' added twice");
    CHECK_EQ_INT(kz_gguf_writer_add_u32(w, "", 1), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_gguf_writer_add_u64(w, "general.alignment", 64), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "general.alignment must be a uint32");
    CHECK_EQ_INT(kz_gguf_writer_add_u32(w, "general.alignment", 48), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "48 is not a power of two");
    CHECK_EQ_INT(kz_gguf_writer_add_array(w, "a", KZ_GGUF_VALUE_STRING, NULL, 0),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_gguf_writer_add_array(w, "a", KZ_GGUF_VALUE_U8, NULL, 3),
                 KZ_STATUS_INVALID_ARGUMENT);
    const char *with_null[2] = {"a", NULL};
    CHECK_EQ_INT(kz_gguf_writer_add_str_array(w, "a", with_null, NULL, 2),
                 KZ_STATUS_INVALID_ARGUMENT);

    float data[64] = {0};
    const int64_t shape[2] = {2, 32};
    CHECK(kz_gguf_writer_add_tensor(w, "t", KZ_GGUF_TENSOR_F32, 2, shape, data) == KZ_OK);
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "t", KZ_GGUF_TENSOR_F32, 2, shape, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "tensor 't' added twice");
    const int64_t odd[2] = {32, 2};
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "q", KZ_GGUF_TENSOR_Q8_0, 2, odd, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "last dimension 2 is not a multiple of the Q8_0 block");
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "q", (kz_gguf_tensor_type)12, 2, shape, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "unsupported tensor type 12");
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "q", KZ_GGUF_TENSOR_F32, 0, shape, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "q", KZ_GGUF_TENSOR_F32, 5, shape, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    const int64_t zero[2] = {0, 32};
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "q", KZ_GGUF_TENSOR_F32, 2, zero, data),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_gguf_writer_add_tensor(w, "", KZ_GGUF_TENSOR_F32, 2, shape, data),
                 KZ_STATUS_INVALID_ARGUMENT);

    // A missing directory: IO error naming the path, nothing created.
    char path[128];
    temp_path(path, sizeof path, "no_dir/out.gguf");
    CHECK_EQ_INT(kz_gguf_writer_write(w, path), KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_last_error(), path);

    // A failing callback: its status and message come back, the old file stays as it was.
    temp_path(path, sizeof path, "kept.gguf");
    write_bytes(path, "old", 3);
    CHECK(kz_gguf_writer_add_tensor_fn(w, "late", KZ_GGUF_TENSOR_F32, 2, shape, fill_fail, NULL) ==
          KZ_OK);
    CHECK_EQ_INT(kz_gguf_writer_write(w, path), KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "cannot quantize 'late'");
    size_t n_bytes = 0;
    uint8_t *kept = read_all(path, &n_bytes);
    CHECK(kept && n_bytes == 3 && memcmp(kept, "old", 3) == 0);
    free(kept);
    CHECK_EQ_INT(count_files("partial"), 0);
    unlink(path);
    kz_gguf_writer_free(w);
    kz_gguf_writer_free(NULL);
}

/* ---- destinations and progress -------------------------------------------------------------- */

/* A writer holding one metadata entry and three small tensors. */
static kz_gguf_writer *small_writer(void) {
    static const float values[3][8] = {{1}, {2}, {3}};
    static const char *const names[3] = {"a", "b", "c"};
    const int64_t shape[1] = {8};
    kz_gguf_writer *w = NULL;
    CHECK(kz_gguf_writer_new(&w) == KZ_OK);
    CHECK(w && kz_gguf_writer_add_str(w, "general.name", "small") == KZ_OK);
    for (int i = 0; w && i < 3; i++) {
        CHECK(kz_gguf_writer_add_tensor(w, names[i], KZ_GGUF_TENSOR_F32, 1, shape, values[i]) ==
              KZ_OK);
    }
    return w;
}

/* Whether path is a symlink whose text is `target`. */
static bool is_link_to(const char *path, const char *target) {
    char text[256];
    struct stat st;
    const ssize_t n = readlink(path, text, sizeof text - 1);
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || n < 0) {
        return false;
    }
    text[n] = '\0';
    return strcmp(text, target) == 0;
}

/* Whether path holds a GGUF file that opens. */
static bool opens(const char *path) {
    kz_gguf_file *f = NULL;
    const bool ok = kz_gguf_open(path, &f) == KZ_OK;
    kz_gguf_close(f);
    return ok;
}

static void test_writer_destinations(void) {
    kz_gguf_writer *w = small_writer();
    char sub[128], target[128], link[128], created[128], dangling[128], device[128];
    temp_path(sub, sizeof sub, "sub");
    CHECK(mkdir(sub, 0755) == 0);

    // A symlink to a regular file in another folder: the file is replaced (keeping its
    // mode), the link stays a link, no temporary file is left in either folder.
    temp_path(target, sizeof target, "sub/target.gguf");
    write_bytes(target, "old", 3);
    CHECK(chmod(target, 0640) == 0);
    temp_path(link, sizeof link, "link.gguf");
    CHECK(symlink("sub/target.gguf", link) == 0);
    CHECK_MSG(kz_gguf_writer_write(w, link) == KZ_OK, "%s", kz_last_error());
    CHECK(is_link_to(link, "sub/target.gguf"));
    CHECK(opens(target));
    struct stat st;
    CHECK(stat(target, &st) == 0 && (st.st_mode & 07777) == 0640);
    CHECK_EQ_INT(count_files("partial"), 0);

    // A dangling symlink: its target is created, the link kept.
    temp_path(created, sizeof created, "sub/created.gguf");
    temp_path(dangling, sizeof dangling, "dangling.gguf");
    CHECK(symlink("sub/created.gguf", dangling) == 0);
    CHECK_MSG(kz_gguf_writer_write(w, dangling) == KZ_OK, "%s", kz_last_error());
    CHECK(is_link_to(dangling, "sub/created.gguf") && opens(created));

    // A symlink to a character device: written through, the link and the device stay.
    temp_path(device, sizeof device, "null.gguf");
    CHECK(symlink("/dev/null", device) == 0);
    CHECK_MSG(kz_gguf_writer_write(w, device) == KZ_OK, "%s", kz_last_error());
    CHECK(is_link_to(device, "/dev/null"));
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));

    // A folder: an error naming it.
    CHECK_EQ_INT(kz_gguf_writer_write(w, sub), KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_last_error(), "is a directory");
    CHECK_EQ_INT(count_files("partial"), 0);
    unlink(target);
    unlink(created);
    rmdir(sub);
    unlink(link);
    unlink(dangling);
    unlink(device);
    kz_gguf_writer_free(w);
}

typedef struct progress_log {
    size_t n_calls, last_done, total, cancel_at;
    bool in_order; /* each call's n_done is the one after the last */
} progress_log;

static bool log_progress(void *user, size_t n_done, size_t n_total) {
    progress_log *l = user;
    l->in_order = l->in_order && n_done == l->n_calls;
    l->n_calls++;
    l->last_done = n_done;
    l->total = n_total;
    return n_done < l->cancel_at;
}

static void test_writer_progress(void) {
    kz_gguf_writer *w = small_writer();
    char path[128], foreign[160];
    temp_path(path, sizeof path, "progress.gguf");
    progress_log l = {.in_order = true, .cancel_at = SIZE_MAX};
    kz_gguf_writer_set_progress(w, log_progress, &l);
    CHECK_MSG(kz_gguf_writer_write(w, path) == KZ_OK, "%s", kz_last_error());
    CHECK(l.in_order && l.n_calls == 4 && l.last_done == 3 && l.total == 3);

    // Cancelled after the second tensor: the old file stays, the writer's temporary file is
    // gone, and another writer's temporary file of the same name is not touched.
    write_bytes(path, "old", 3);
    snprintf(foreign, sizeof foreign, "%s.partial-other", path);
    write_bytes(foreign, "x", 1);
    l = (progress_log){.in_order = true, .cancel_at = 2};
    CHECK_EQ_INT(kz_gguf_writer_write(w, path), KZ_STATUS_CANCELLED);
    CHECK_STR_CONTAINS(kz_last_error(), "after 2 of 3 tensors");
    CHECK(l.in_order && l.n_calls == 3);
    size_t n_bytes = 0;
    uint8_t *kept = read_all(path, &n_bytes);
    CHECK(kept && n_bytes == 3 && memcmp(kept, "old", 3) == 0);
    free(kept);
    CHECK_EQ_INT(count_files("partial"), 1);
    CHECK(access(foreign, F_OK) == 0);
    unlink(foreign);
    unlink(path);
    kz_gguf_writer_set_progress(w, NULL, NULL);
    kz_gguf_writer_free(w);
}

/* ---- malformed files ----------------------------------------------------------------------- */

static void test_bad_files(void) {
    char path[128];
    temp_path(path, sizeof path, "missing_dir/none.gguf");
    expect_open_error(path, KZ_STATUS_IO, "No such file", NULL);
    expect_open_error(temp_dir, KZ_STATUS_IO, "not a regular file", NULL);

    buf b = {0};
    expect_bad("empty.gguf", &b, "file is empty", NULL);
    b_put(&b, "GGUF\x03\0\0\0", 8);
    expect_bad("small.gguf", &b, "file is 8 bytes, too small for the 24-byte GGUF header", NULL);
    b_header(&b, 0, 0);
    b.bytes[0] = 'g';
    expect_bad("magic.gguf", &b, "not a GGUF file", "bad magic 67 47 55 46");
    b_header(&b, 0, 0);
    b.bytes[4] = 1;
    expect_bad("version1.gguf", &b, "unsupported GGUF version 1", NULL);
    b_header(&b, 0, 0);
    b.bytes[4] = 0;
    b.bytes[7] = 3;
    expect_bad("big_endian.gguf", &b, "unsupported GGUF version 50331648", "big-endian");
    b_header(&b, 2000000, 0);
    expect_bad("many_tensors.gguf", &b, "tensor count 2000000 exceeds the limit of 1000000", NULL);
    b_header(&b, 0, UINT64_MAX);
    expect_bad("many_kvs.gguf", &b, "metadata count 18446744073709551615 exceeds the limit", NULL);
    b_header(&b, 10, 1000);
    b_zeros(&b, 100);
    expect_bad("no_fit.gguf", &b, "1000 metadata entries and 10 tensor infos cannot fit", NULL);
    free(b.bytes);
}

static void test_bad_metadata(void) {
    buf b = {0};
    b_header(&b, 0, 1);
    b_u64(&b, 1000);
    b_put(&b, "abcdefghijklmnopq", 17);
    expect_bad("key_past_end.gguf", &b, "metadata entry 0: key of 1000 bytes",
               "runs past the end of the file");

    b_header(&b, 0, 1);
    b_u64(&b, 70000);
    b_zeros(&b, 70010);
    expect_bad("key_long.gguf", &b, "key of 70000 bytes exceeds the limit of 65535", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "");
    b_kv_u32(&b, "pad", 1);
    expect_bad("key_empty.gguf", &b, "metadata entry 0: empty key", NULL);

    b_header(&b, 0, 1);
    b_u64(&b, 3);
    b_put(&b, "a\0b", 3);
    b_u32(&b, KZ_GGUF_VALUE_U32);
    b_u32(&b, 1);
    expect_bad("key_nul.gguf", &b, "key contains a NUL byte", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    b_zeros(&b, 16);
    expect_bad("type_unknown.gguf", &b, "metadata key 'k': unknown value type 13", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "name");
    b_u32(&b, KZ_GGUF_VALUE_STRING);
    b_u64(&b, 100);
    b_put(&b, "short", 5);
    expect_bad("value_past_end.gguf", &b, "metadata key 'name': value of 100 bytes",
               "runs past the end of the file");

    b_header(&b, 0, 1);
    b_str(&b, "name");
    b_u32(&b, KZ_GGUF_VALUE_STRING);
    b_u64(&b, 70000000);
    b_zeros(&b, 16);
    expect_bad("value_long.gguf", &b, "'name': value of 70000000 bytes exceeds the limit", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u64(&b, 0);
    expect_bad("nested.gguf", &b, "metadata key 'arr': arrays of arrays are not supported", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u32(&b, 99);
    b_u64(&b, 0);
    expect_bad("elem_unknown.gguf", &b, "'arr': unknown array element type 99", NULL);

    b_header(&b, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u32(&b, KZ_GGUF_VALUE_U8);
    b_u64(&b, 200000000);
    b_zeros(&b, 8);
    expect_bad("array_limit.gguf", &b, "'arr': array of 200000000 uint8 values exceeds the limit",
               NULL);

    b_header(&b, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u32(&b, KZ_GGUF_VALUE_U32);
    b_u64(&b, 1000);
    b_zeros(&b, 40);
    expect_bad("array_past_end.gguf", &b, "'arr': array of 1000 uint32 values",
               "runs past the end of the file");

    b_header(&b, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, KZ_GGUF_VALUE_ARRAY);
    b_u32(&b, KZ_GGUF_VALUE_STRING);
    b_u64(&b, 2);
    b_str(&b, "ok");
    b_u64(&b, 50);
    b_zeros(&b, 8);
    expect_bad("array_string_past_end.gguf", &b, "'arr': string 1 of 50 bytes",
               "runs past the end of the file");

    b_header(&b, 0, 1);
    b_str(&b, "flag");
    b_u32(&b, KZ_GGUF_VALUE_BOOL);
    b_put(&b, "\x02", 1);
    expect_bad("bool.gguf", &b, "metadata key 'flag': bool value 2 at index 0 is not 0 or 1", NULL);

    b_header(&b, 0, 3);
    b_kv_u32(&b, "a", 1);
    b_kv_u32(&b, "b", 2);
    b_kv_u32(&b, "a", 3);
    expect_bad("duplicate_key.gguf", &b, "metadata key 'a' appears more than once", NULL);
    free(b.bytes);
}

static void test_bad_alignment(void) {
    buf b = {0};
    b_header(&b, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, KZ_GGUF_VALUE_U64);
    b_u64(&b, 64);
    expect_bad("alignment_type.gguf", &b, "general.alignment has type uint64, expected uint32",
               NULL);

    b_header(&b, 0, 1);
    b_kv_u32(&b, "general.alignment", 48);
    expect_bad("alignment_48.gguf", &b, "general.alignment 48 is not a power of two", NULL);

    b_header(&b, 0, 1);
    b_kv_u32(&b, "general.alignment", 0);
    expect_bad("alignment_0.gguf", &b, "general.alignment 0 is not a power of two", NULL);
    free(b.bytes);
}

/* A file with one tensor info built by the caller's arguments and `data_bytes` of data. */
static void one_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *dims,
                       uint32_t type, uint64_t offset, size_t data_bytes) {
    b_header(b, 1, 0);
    b_info(b, name, n_dims, dims, type, offset);
    b_pad(b, 32);
    b_zeros(b, data_bytes);
}

static void test_bad_tensors(void) {
    buf b = {0};
    const uint64_t dims_ok[2] = {4, 2};
    const uint64_t dims_5[5] = {1, 1, 1, 1, 1};
    one_tensor(&b, "w", 0, dims_ok, 0, 0, 32);
    expect_bad("dims_0.gguf", &b, "tensor 'w': has 0 dimensions, expected 1 to 4", NULL);
    one_tensor(&b, "w", 5, dims_5, 0, 0, 32);
    expect_bad("dims_5.gguf", &b, "tensor 'w': has 5 dimensions, expected 1 to 4", NULL);
    const uint64_t dims_zero[2] = {4, 0};
    one_tensor(&b, "w", 2, dims_zero, 0, 0, 32);
    expect_bad("dim_zero.gguf", &b, "tensor 'w': dimension 1 is 0", NULL);
    const uint64_t dims_huge[3] = {1ull << 40, 1ull << 30, 1};
    one_tensor(&b, "w", 3, dims_huge, 0, 0, 32);
    expect_bad("dims_overflow.gguf", &b, "tensor 'w': element count overflows at dimension 1",
               NULL);
    const uint64_t dims_bytes[1] = {1ull << 62};
    one_tensor(&b, "w", 1, dims_bytes, 0, 0, 32);
    expect_bad("bytes_overflow.gguf", &b, "tensor 'w': byte count", "overflows");
    one_tensor(&b, "w", 2, dims_ok, 12, 0, 32);
    expect_bad("type_q4_k.gguf", &b, "tensor 'w': unsupported tensor type 12 (Q4_K)", NULL);
    one_tensor(&b, "w", 2, dims_ok, 1000, 0, 32);
    expect_bad("type_1000.gguf", &b, "tensor 'w': unsupported tensor type 1000", NULL);
    const uint64_t dims_33[2] = {33, 2};
    one_tensor(&b, "q", 2, dims_33, KZ_GGUF_TENSOR_Q8_0, 0, 128);
    expect_bad("block.gguf", &b,
               "tensor 'q': dimension 0 (33) is not a multiple of the Q8_0 block "
               "size 32",
               NULL);
    one_tensor(&b, "w", 2, dims_ok, 0, 4, 64);
    expect_bad("unaligned.gguf", &b,
               "tensor 'w': data offset 4 is not a multiple of the "
               "alignment 32",
               NULL);
    one_tensor(&b, "w", 2, dims_ok, 0, 0, 31);
    expect_bad("data_past_end.gguf", &b, "tensor 'w': 32 bytes at data offset 0",
               "run past the end of the file");
    one_tensor(&b, "w", 2, dims_ok, 0, UINT64_MAX - 31, 32);
    expect_bad("offset_huge.gguf", &b, "tensor 'w'", "run past the end of the file");
    one_tensor(&b, "", 2, dims_ok, 0, 0, 32);
    expect_bad("name_empty.gguf", &b, "tensor info 0: empty name", NULL);

    const uint64_t dims_16[1] = {16};
    b_header(&b, 2, 0);
    b_info(&b, "a", 1, dims_16, 0, 0);
    b_info(&b, "b", 1, dims_16, 0, 32);
    b_pad(&b, 32);
    b_zeros(&b, 128);
    expect_bad("overlap.gguf", &b, "tensors 'a' (bytes [0, 64)) and 'b' (bytes [32, 96)) overlap",
               NULL);

    b_header(&b, 2, 0);
    b_info(&b, "a", 1, dims_16, 0, 0);
    b_info(&b, "a", 1, dims_16, 0, 64);
    b_pad(&b, 32);
    b_zeros(&b, 128);
    expect_bad("duplicate_name.gguf", &b, "tensor 'a' appears more than once", NULL);

    // Holes and reverse order are fine.
    b_header(&b, 2, 0);
    b_info(&b, "late", 1, dims_16, 0, 128);
    b_info(&b, "early", 1, dims_16, 0, 0);
    b_pad(&b, 32);
    b_zeros(&b, 192);
    char path[128];
    temp_path(path, sizeof path, "holes.gguf");
    write_bytes(path, b.bytes, b.size);
    kz_gguf_file *f = NULL;
    CHECK_MSG(kz_gguf_open(path, &f) == KZ_OK, "%s", kz_last_error());
    CHECK_EQ_INT(kz_gguf_tensor_count(f), 2);
    kz_gguf_close(f);
    unlink(path);
    free(b.bytes);
}

/* Every prefix of a valid file fails cleanly (unless it still holds all tensor data), and every
 * single-byte flip either fails cleanly or still opens. */
static void test_truncations_and_flips(void) {
    char full[128];
    temp_path(full, sizeof full, "truncate_src.gguf");
    write_full(full, 64);
    size_t n_bytes = 0;
    uint8_t *bytes = read_all(full, &n_bytes);
    CHECK(bytes != NULL && n_bytes > 0 && n_bytes < 4096);
    kz_gguf_file *f = NULL;
    CHECK(kz_gguf_open(full, &f) == KZ_OK);
    size_t needed = 0; // end of the furthest tensor data: shorter prefixes must fail
    for (size_t i = 0; f && i < kz_gguf_tensor_count(f); i++) {
        const kz_gguf_tensor *t = kz_gguf_tensor_at(f, i);
        size_t end = (size_t)t->offset + t->n_bytes;
        needed = end > needed ? end : needed;
    }
    // Tensor 0 sits at offset 0, so the data section starts where its bytes do.
    uint8_t first[60];
    pattern(first, sizeof first, 0);
    size_t data_start = 0;
    for (size_t p = 0; p + sizeof first <= n_bytes; p++) {
        if (memcmp(bytes + p, first, sizeof first) == 0) {
            data_start = p;
            break;
        }
    }
    CHECK(data_start > 0 && data_start % 64 == 0);
    needed += data_start;
    kz_gguf_close(f);

    char path[128];
    temp_path(path, sizeof path, "truncated.gguf");
    int n_failed = 0;
    int n_bad_messages = 0;
    for (size_t size = 0; size < n_bytes; size++) {
        write_bytes(path, bytes, size);
        f = NULL;
        kz_status status = kz_gguf_open(path, &f);
        if (size < needed) {
            n_failed += status != KZ_OK;
            n_bad_messages += status != KZ_OK && strstr(kz_last_error(), path) == NULL;
        } else {
            CHECK_MSG(status == KZ_OK, "prefix %zu: %s", size, kz_last_error());
        }
        kz_gguf_close(f);
    }
    CHECK_EQ_INT(n_failed, needed);
    CHECK_EQ_INT(n_bad_messages, 0);

    int n_opened = 0;
    n_bad_messages = 0;
    for (size_t p = 0; p < n_bytes; p++) {
        for (int flip = 0; flip < 3; flip++) {
            uint8_t saved = bytes[p];
            bytes[p] = flip == 0   ? (uint8_t)(saved ^ 0xff)
                       : flip == 1 ? (uint8_t)(saved + 1)
                                   : 0x80;
            write_bytes(path, bytes, n_bytes);
            bytes[p] = saved;
            f = NULL;
            kz_status status = kz_gguf_open(path, &f);
            if (status == KZ_OK) {
                n_opened++;
                for (size_t i = 0; i < kz_gguf_kv_count(f); i++) {
                    CHECK(kz_gguf_find_kv(f, kz_gguf_kv_at(f, i)->key) == kz_gguf_kv_at(f, i));
                }
                kz_gguf_close(f);
            } else {
                CHECK(f == NULL);
                n_bad_messages += strstr(kz_last_error(), path) == NULL;
            }
        }
    }
    CHECK(n_opened > 0); // flips inside tensor data or string bytes keep the file valid
    CHECK_EQ_INT(n_bad_messages, 0);
    unlink(path);
    unlink(full);
    free(bytes);
}

int main(void) {
    snprintf(temp_dir, sizeof temp_dir, "/tmp/kz_test_gguf_XXXXXX");
    if (!mkdtemp(temp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip(32);
    test_round_trip(64);
    test_exact_bytes();
    test_writer_errors();
    test_writer_destinations();
    test_writer_progress();
    test_bad_files();
    test_bad_metadata();
    test_bad_alignment();
    test_bad_tensors();
    test_truncations_and_flips();

    DIR *dir = opendir(temp_dir);
    for (struct dirent *e = dir ? readdir(dir) : NULL; e; e = readdir(dir)) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            char path[384];
            snprintf(path, sizeof path, "%s/%s", temp_dir, e->d_name);
            unlink(path);
        }
    }
    if (dir) {
        closedir(dir);
    }
    rmdir(temp_dir);
    return test_main_result("test_gguf");
}
