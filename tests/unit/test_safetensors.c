/*
 * test_safetensors.c - the safetensors reader on small files written here.
 *
 * Dataflow: JSON text + data bytes -> [u64 LE length][JSON][data] in a mkdtemp directory
 *        -> kz_st_open -> tensors, values (F32 / F16 / BF16 -> float), metadata, kz_st_get;
 *        or -> the expected status and a message naming the file and the problem.
 *
 * Covers: a valid file with F32, F16, BF16, I64, U8, zero-size and scalar tensors,
 * unaligned data, holes and __metadata__; every F16 bit pattern against an ldexp reference;
 * kz_st_release keeping data readable; and one case per malformed header.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "runtime/error.h"
#include "test.h"

static char temp_dir[64];
static char created[128][128]; // files to remove at the end
static int n_created;

/* Fills `path` with temp_dir/name and remembers it for clean-up. */
static void temp_path(char *path, size_t path_bytes, const char *name) {
    snprintf(path, path_bytes, "%s/%s", temp_dir, name);
    if (n_created < 128) {
        snprintf(created[n_created++], sizeof created[0], "%s", path);
    }
}

static void write_bytes(const char *path, const void *bytes, size_t n_bytes) {
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL);
    if (file) {
        CHECK(fwrite(bytes, 1, n_bytes, file) == n_bytes);
        fclose(file);
    }
}

/* Writes a safetensors file: 8-byte length of `json`, `json`, then `data`. */
static void write_st(const char *path, const char *json, const void *data, size_t data_bytes) {
    size_t json_bytes = strlen(json);
    size_t total = 8 + json_bytes + data_bytes;
    uint8_t *bytes = malloc(total);
    for (int i = 0; i < 8; i++) {
        bytes[i] = (uint8_t)((uint64_t)json_bytes >> (8 * i));
    }
    memcpy(bytes + 8, json, json_bytes);
    if (data_bytes) {
        memcpy(bytes + 8 + json_bytes, data, data_bytes);
    }
    write_bytes(path, bytes, total);
    free(bytes);
}

/* Opens `path` expecting failure with `want`; the message must name the file and contain the
 * given substrings (NULL ends the list early). */
static void expect_open_error(const char *path, kz_status want, const char *needle_a,
                              const char *needle_b) {
    static char sentinel;
    kz_st_file *f = (kz_st_file *)(void *)&sentinel; // must be reset to NULL on failure
    kz_error_clear();
    kz_status status = kz_st_open(path, &f);
    CHECK_MSG(status == want, "%s: status %d, expected %d (%s)", path, (int)status, (int)want,
              kz_last_error());
    CHECK(f == NULL);
    kz_st_close(status == KZ_OK ? f : NULL);
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_error_get(), needle_a);
    if (needle_b) {
        CHECK_STR_CONTAINS(kz_error_get(), needle_b);
    }
}

/* Writes `json` with `data_bytes` zero bytes of data as `name` and expects a BAD_MODEL error. */
static void expect_bad_header(const char *name, const char *json, size_t data_bytes,
                              const char *needle_a, const char *needle_b) {
    char path[128];
    uint8_t zeros[256] = {0};
    temp_path(path, sizeof path, name);
    write_st(path, json, zeros, data_bytes);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, needle_a, needle_b);
}

static uint32_t float_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* ---- valid files --------------------------------------------------------- */

static const char valid_json[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"kztts test\"},"
    "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
    "\"w32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[1,25]},"
    "\"h16\":{\"dtype\":\"F16\",\"shape\":[10],\"data_offsets\":[25,45]},"
    "\"b16\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[45,53]},"
    "\"i64\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[53,69]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[69,69]},"
    "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[69,73]}}   ";

static const float w32_values[6] = {1.0f, -2.5f, 3.25f, 1e-30f, -0.0f, 65504.0f};
static const uint16_t h16_bits[10] = {0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff,
                                      0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e00};
static const uint16_t b16_bits[4] = {0x3f80, 0xc0a0, 0x7f80, 0x0001};

static void put_u16(uint8_t *dst, uint16_t value) {
    dst[0] = (uint8_t)value;
    dst[1] = (uint8_t)(value >> 8);
}

static void write_valid(const char *path) {
    uint8_t data[73];
    memset(data, 0, sizeof data);
    data[0] = 7;
    memcpy(data + 1, w32_values, sizeof w32_values); // offset 1: deliberately unaligned
    for (int i = 0; i < 10; i++) {
        put_u16(data + 25 + 2 * i, h16_bits[i]);
    }
    for (int i = 0; i < 4; i++) {
        put_u16(data + 45 + 2 * i, b16_bits[i]);
    }
    int64_t ints[2] = {-5, 1234567890123};
    memcpy(data + 53, ints, sizeof ints);
    float scalar = 42.0f;
    memcpy(data + 69, &scalar, sizeof scalar);
    write_st(path, valid_json, data, sizeof data);
}

static void check_valid_values(const kz_st_file *f) {
    float values[10];
    const kz_st_tensor *t = kz_st_find(f, "w32");
    CHECK(t != NULL && t->dtype == KZ_DTYPE_F32 && t->n_elements == 6 && t->n_bytes == 24);
    CHECK(t && kz_tensor_to_f32(t, values) == KZ_OK);
    CHECK(memcmp(values, w32_values, sizeof w32_values) == 0);

    static const float h16_want[10] = {0.0f,
                                       -0.0f,
                                       1.0f,
                                       -2.0f,
                                       65504.0f,
                                       5.9604644775390625e-08f,
                                       6.0975551605224609e-05f,
                                       INFINITY,
                                       -INFINITY,
                                       NAN};
    t = kz_st_find(f, "h16");
    CHECK(t != NULL && t->dtype == KZ_DTYPE_F16 && strcmp(t->dtype_name, "F16") == 0);
    CHECK(t && kz_tensor_to_f32(t, values) == KZ_OK);
    for (int i = 0; i < 9; i++) {
        CHECK_MSG(float_bits(values[i]) == float_bits(h16_want[i]), "h16[%d] = %a, want %a", i,
                  values[i], h16_want[i]);
    }
    CHECK(isnan(values[9]) && !signbit(values[9]));

    t = kz_st_find(f, "b16");
    CHECK(t != NULL && t->dtype == KZ_DTYPE_BF16);
    CHECK(t && kz_tensor_to_f32(t, values) == KZ_OK);
    CHECK(values[0] == 1.0f && values[1] == -5.0f && isinf(values[2]) && values[2] > 0);
    CHECK(float_bits(values[3]) == 0x00010000u);

    t = kz_st_find(f, "i64");
    CHECK(t != NULL && t->dtype == KZ_DTYPE_OTHER && strcmp(t->dtype_name, "I64") == 0);
    int64_t ints[2];
    CHECK(t && t->n_bytes == sizeof ints);
    if (t) {
        memcpy(ints, t->data, sizeof ints);
        CHECK(ints[0] == -5 && ints[1] == 1234567890123);
        CHECK_EQ_INT(kz_tensor_to_f32(t, values), KZ_STATUS_BAD_MODEL);
        CHECK_STR_CONTAINS(kz_last_error(), "'i64'");
        CHECK_STR_CONTAINS(kz_last_error(), "I64");
    }

    t = kz_st_find(f, "empty");
    CHECK(t != NULL && t->n_elements == 0 && t->n_bytes == 0 && t->n_dims == 2);
    CHECK(t && kz_tensor_to_f32(t, NULL) == KZ_OK);
    t = kz_st_find(f, "scalar");
    CHECK(t != NULL && t->n_dims == 0 && t->n_elements == 1);
    CHECK(t && kz_tensor_to_f32(t, values) == KZ_OK && values[0] == 42.0f);
    t = kz_st_find(f, "u8");
    CHECK(t != NULL && ((const uint8_t *)t->data)[0] == 7);
}

static void test_valid(void) {
    char path[128];
    temp_path(path, sizeof path, "valid.safetensors");
    write_valid(path);
    kz_st_file *f = NULL;
    CHECK_MSG(kz_st_open(path, &f) == KZ_OK, "%s", kz_last_error());
    if (!f) {
        return;
    }
    CHECK(strcmp(kz_st_path(f), path) == 0);
    CHECK_EQ_INT(kz_st_count(f), 7);
    static const char *const order[7] = {"u8", "w32", "h16", "b16", "i64", "empty", "scalar"};
    for (size_t i = 0; i < 7; i++) {
        CHECK(kz_st_at(f, i) && strcmp(kz_st_at(f, i)->name, order[i]) == 0);
        CHECK(kz_st_find(f, order[i]) == kz_st_at(f, i));
    }
    CHECK(kz_st_at(f, 7) == NULL);
    CHECK(kz_st_find(f, "__metadata__") == NULL);
    CHECK(kz_st_find(f, "w3") == NULL);
    CHECK(kz_st_metadata(f, "format") && strcmp(kz_st_metadata(f, "format"), "pt") == 0);
    CHECK(kz_st_metadata(f, "note") && strcmp(kz_st_metadata(f, "note"), "kztts test") == 0);
    CHECK(kz_st_metadata(f, "missing") == NULL);
    check_valid_values(f);

    const kz_st_tensor *t = NULL;
    const int64_t shape_ok[2] = {2, 3};
    CHECK(kz_st_get(f, "w32", 2, shape_ok, &t) == KZ_OK && t == kz_st_find(f, "w32"));

    const int64_t shape_bad[2] = {3, 2};
    CHECK_EQ_INT(kz_st_get(f, "w32", 2, shape_bad, &t), KZ_STATUS_BAD_MODEL);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_last_error(), "tensor 'w32' has shape [2, 3], expected [3, 2]");

    const int64_t shape_3d[3] = {2, 3, 1};
    CHECK_EQ_INT(kz_st_get(f, "w32", 3, shape_3d, &t), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "has shape [2, 3], expected [2, 3, 1]");

    CHECK(kz_st_get(f, "scalar", 0, NULL, &t) == KZ_OK && t != NULL);

    CHECK_EQ_INT(kz_st_get(f, "x", 2, shape_ok, &t), KZ_STATUS_BAD_MODEL);
    char want[256];
    snprintf(want, sizeof want, "%s: tensor 'x' is missing", path);
    CHECK_STR_CONTAINS(kz_last_error(), want);
    kz_st_close(f);
}

/* Every F16 bit pattern against sign * mantissa * 2^exponent computed with ldexp. */
static void test_f16_exhaustive(void) {
    enum { N = 65536 };
    uint8_t *data = malloc(2 * N);
    for (uint32_t i = 0; i < N; i++) {
        put_u16(data + 2 * i, (uint16_t)i);
    }
    char path[128];
    temp_path(path, sizeof path, "f16_all.safetensors");
    write_st(path, "{\"all\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}",
             data, 2 * N);
    free(data);
    kz_st_file *f = NULL;
    CHECK_MSG(kz_st_open(path, &f) == KZ_OK, "%s", kz_last_error());
    float *values = malloc(N * sizeof(float));
    const kz_st_tensor *t = kz_st_find(f, "all");
    CHECK(t && kz_tensor_to_f32(t, values) == KZ_OK);
    int n_wrong = 0;
    for (uint32_t i = 0; t && i < N; i++) {
        int exponent = (int)(i >> 10) & 0x1f;
        int mantissa = (int)(i & 0x3ff);
        double sign = (i & 0x8000) ? -1.0 : 1.0;
        float got = values[i];
        bool ok;
        if (exponent == 0x1f) {
            ok = mantissa == 0 ? got == (float)(sign * INFINITY)
                               : isnan(got) && (signbit(got) != 0) == (sign < 0) &&
                                     (float_bits(got) & 0x7fffffu) == (uint32_t)mantissa << 13;
        } else {
            double want =
                exponent == 0 ? ldexp(mantissa, -24) : ldexp(1024 + mantissa, exponent - 25);
            ok = float_bits(got) == float_bits((float)(sign * want));
        }
        if (!ok && n_wrong++ < 5) {
            fprintf(stderr, "f16 0x%04x -> %a\n", (unsigned)i, got);
        }
    }
    CHECK_EQ_INT(n_wrong, 0);
    free(values);
    kz_st_close(f);
}

/* Holes, a zero-size tensor inside another's range, an empty header, and kz_st_release. */
static void test_layouts(void) {
    char path[128];
    kz_st_file *f = NULL;
    uint8_t zeros[16] = {0};

    temp_path(path, sizeof path, "hole.safetensors");
    write_st(path,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
             "\"z\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[6,6]},"
             "\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[12,14]}}",
             zeros, 16);
    CHECK_MSG(kz_st_open(path, &f) == KZ_OK, "%s", kz_last_error());
    CHECK_EQ_INT(kz_st_count(f), 3);
    kz_st_close(f);

    temp_path(path, sizeof path, "empty_header.safetensors");
    write_st(path, "{}", NULL, 0);
    CHECK_MSG(kz_st_open(path, &f) == KZ_OK, "%s", kz_last_error());
    CHECK_EQ_INT(kz_st_count(f), 0);
    CHECK(kz_st_find(f, "a") == NULL && kz_st_metadata(f, "a") == NULL);
    kz_st_close(f);
    kz_st_close(NULL);

    enum { N = 3 * 4096 + 5 };
    float *values = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        values[i] = (float)i * 0.5f - 7.0f;
    }
    char json[256];
    snprintf(json, sizeof json,
             "{\"big\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%zu]}}", N,
             N * sizeof(float));
    temp_path(path, sizeof path, "release.safetensors");
    write_st(path, json, values, N * sizeof(float));
    CHECK_MSG(kz_st_open(path, &f) == KZ_OK, "%s", kz_last_error());
    const kz_st_tensor *t = kz_st_find(f, "big");
    float *back = malloc(N * sizeof(float));
    CHECK(t && kz_tensor_to_f32(t, back) == KZ_OK && memcmp(back, values, N * sizeof(float)) == 0);
    kz_st_release(f, t);
    memset(back, 0, N * sizeof(float));
    CHECK(t && kz_tensor_to_f32(t, back) == KZ_OK && memcmp(back, values, N * sizeof(float)) == 0);
    kz_st_release(f, NULL);
    kz_st_close(f);
    free(back);
    free(values);
}

/* ---- malformed files ------------------------------------------------------ */

static void test_bad_files(void) {
    char path[128];

    temp_path(path, sizeof path, "missing_dir/none.safetensors");
    expect_open_error(path, KZ_STATUS_IO, "No such file", NULL);
    expect_open_error(temp_dir, KZ_STATUS_IO, "not a regular file", NULL);

    temp_path(path, sizeof path, "empty.safetensors");
    write_bytes(path, "", 0);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, "empty", NULL);

    temp_path(path, sizeof path, "truncated.safetensors");
    write_bytes(path, "\x10\x00\x00\x00\x00", 5);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, "5 bytes", "shorter than the 8-byte");

    temp_path(path, sizeof path, "zero_length.safetensors");
    write_bytes(path, "\0\0\0\0\0\0\0\0{}", 10);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, "header length is 0", NULL);

    temp_path(path, sizeof path, "past_end.safetensors");
    write_bytes(path, "\xe8\x03\0\0\0\0\0\0{}", 10);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, "header length 1000", "past the end of the file");

    temp_path(path, sizeof path, "huge_length.safetensors");
    write_bytes(path, "\0\0\0\0\0\0\0\x80{}", 10);
    expect_open_error(path, KZ_STATUS_BAD_MODEL, "exceeds the limit", NULL);
}

static void test_bad_json(void) {
    expect_bad_header("bad_json.safetensors", "{\"a\": {\"dtype\": \"F32\",", 0, "not valid JSON",
                      NULL);
    expect_bad_header("array.safetensors", "[1, 2]", 0, "not a JSON object", NULL);
    expect_bad_header("trailing.safetensors", "{} x", 0, "data after the JSON object", NULL);
    expect_bad_header("entry_number.safetensors", "{\"a\": 3}", 0, "'a'", "not a JSON object");
    expect_bad_header("no_dtype.safetensors", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "'a'", "missing \"dtype\"");
    expect_bad_header("dtype_number.safetensors",
                      "{\"a\":{\"dtype\":1,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'a'",
                      "\"dtype\" is not a string");
    expect_bad_header("unknown_dtype.safetensors",
                      "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'a'",
                      "unknown dtype \"F33\"");
    expect_bad_header("no_shape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
                      4, "'a'", "missing \"shape\"");
    expect_bad_header("shape_object.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, "'a'",
                      "\"shape\" is not an array");
    expect_bad_header("no_offsets.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
                      "'a'", "missing \"data_offsets\"");
    expect_bad_header("twice_dtype.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],"
                      "\"data_offsets\":[0,4]}}",
                      4, "'a'", "\"dtype\" appears more than once");
    expect_bad_header("meta_array.safetensors", "{\"__metadata__\":[]}", 0, "__metadata__",
                      "not a JSON object");
    expect_bad_header("meta_number.safetensors", "{\"__metadata__\":{\"k\":1}}", 0, "'k'",
                      "not a string");
}

static void test_bad_shapes(void) {
    expect_bad_header("negative_dim.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
                      "'a'", "shape dimension 1 is negative (-1)");
    expect_bad_header("fraction_dim.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                      "'a'", "shape dimension 0 is not an integer (1.5)");
    expect_bad_header("string_dim.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                      "'a'", "shape dimension 0 is not a number");
    expect_bad_header("too_many_dims.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                      "\"data_offsets\":[0,4]}}",
                      4, "'a'", "9 dimensions, more than 8");
    expect_bad_header("overflow.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                      "\"data_offsets\":[0,4]}}",
                      4, "'a'", "overflows");
    expect_bad_header("byte_overflow.safetensors",
                      "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],"
                      "\"data_offsets\":[0,4]}}",
                      4, "'a'", "overflows");
}

static void test_bad_offsets(void) {
    expect_bad_header("one_offset.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4, "'a'",
                      "not an array of two integers");
    expect_bad_header("negative_offset.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "'a'",
                      "data_offsets[0] is negative (-4)");
    expect_bad_header("fraction_offset.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 8,
                      "'a'", "data_offsets[1] is not an integer");
    expect_bad_header("reversed.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "'a'",
                      "begin is after end");
    expect_bad_header("past_data.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]}}", 16,
                      "'a'", "end 64 is past the end of the data area (16 bytes)");
    expect_bad_header("size_mismatch.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16,
                      "'a'", "hold 12 bytes, but dtype F32 and shape [2, 2] need 16");
    expect_bad_header("overlap.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                      24, "'a' (bytes [0, 16)) and 'b' (bytes [8, 24)) overlap", NULL);
    expect_bad_header("overlap_inside.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]},"
                      "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                      24, "overlap", "'a'");
}

static void test_bad_names(void) {
    expect_bad_header("duplicate.safetensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      8, "tensor 'a'", "duplicate");
    expect_bad_header("empty_name.safetensors",
                      "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "empty name", NULL);
    char json[1300];
    char name[1101];
    memset(name, 'n', 1100);
    name[1100] = '\0';
    snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             name);
    expect_bad_header("long_name.safetensors", json, 4, "1100 bytes", "longer than 1024");
}

int main(void) {
    snprintf(temp_dir, sizeof temp_dir, "/tmp/kz_test_st_XXXXXX");
    if (!mkdtemp(temp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid();
    test_f16_exhaustive();
    test_layouts();
    test_bad_files();
    test_bad_json();
    test_bad_shapes();
    test_bad_offsets();
    test_bad_names();
    for (int i = 0; i < n_created; i++) {
        unlink(created[i]);
    }
    rmdir(temp_dir);
    return test_main_result("test_safetensors");
}
