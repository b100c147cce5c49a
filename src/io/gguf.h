/*
 * gguf.h - GGUF files (ggml's container, version 3): a validated, memory-mapped reader and a
 * writer.
 *
 * One GGUF file carries typed metadata (configs, tokenizer vocabulary, generation defaults) and
 * tensors (F32, F16, BF16, Q8_0, Q4_0; I8, I32 and I64 for integer tables such as the
 * tokenizer's) so a quantized checkpoint is a single file.
 *
 * Reader: kz_gguf_open() maps the file read-only and validates all of it before returning:
 * magic, version (2 or 3), counts against limits and the file size, every string inside the
 * file and under its limit, known value types, no nested arrays, unique keys, bool bytes 0/1,
 * general.alignment a uint32 power of two, unique non-empty tensor names, 1 to 4 dimensions,
 * none zero, element and byte counts without overflow, supported tensor types, block types with
 * dims[0] a multiple of the block, aligned offsets, data inside the file, no two tensors
 * sharing a byte. Metadata values are copied into memory owned by the file object (strings
 * NUL-terminated, numbers aligned and native); tensor data points into the mapping. Every error
 * names the file, the key or tensor, and what was wrong.
 *
 * Writer: collects metadata and tensors (data by pointer or produced by a callback), then writes
 * header, metadata, tensor infos, padding and data in one pass to `<path>.partial-XXXXXX` and
 * renames it over `path`, so a failed write never leaves a half file. Tensors are laid out in
 * the order added, each at an aligned offset, as ggml's own writer does.
 *
 * Shapes: the file stores dimensions in ggml order (dims[0] innermost, fastest varying). This
 * API speaks row-major like kz_st_* (shape[0] outermost): a [rows, cols] matrix is stored with
 * dims = {cols, rows}. kz_gguf_tensor carries both.
 *
 * A kz_gguf_file is read-only after kz_gguf_open and may be used from any number of threads; a
 * kz_gguf_writer belongs to one thread.
 */
#ifndef KZ_GGUF_H
#define KZ_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

#define KZ_GGUF_MAX_DIMS 4

/* Metadata value types; the numbers are ggml's gguf_type values as stored in the file. */
typedef enum kz_gguf_value_type {
    KZ_GGUF_VALUE_U8 = 0,
    KZ_GGUF_VALUE_I8 = 1,
    KZ_GGUF_VALUE_U16 = 2,
    KZ_GGUF_VALUE_I16 = 3,
    KZ_GGUF_VALUE_U32 = 4,
    KZ_GGUF_VALUE_I32 = 5,
    KZ_GGUF_VALUE_F32 = 6,
    KZ_GGUF_VALUE_BOOL = 7,
    KZ_GGUF_VALUE_STRING = 8,
    KZ_GGUF_VALUE_ARRAY = 9,
    KZ_GGUF_VALUE_U64 = 10,
    KZ_GGUF_VALUE_I64 = 11,
    KZ_GGUF_VALUE_F64 = 12,
} kz_gguf_value_type;

/* Tensor types we read and write; the numbers are ggml_type ids as stored in the file. Quantized
 * types use ggml's block layouts: Q8_0 = 32 values as {f16 scale, int8 q[32]} (34 bytes), Q4_0 =
 * 32 values as {f16 scale, uint8 q[16]} (18 bytes, value j in the low nibble of q[j], value
 * j + 16 in the high nibble, each minus 8). */
typedef enum kz_gguf_tensor_type {
    KZ_GGUF_TENSOR_F32 = 0,
    KZ_GGUF_TENSOR_F16 = 1,
    KZ_GGUF_TENSOR_Q4_0 = 2,
    KZ_GGUF_TENSOR_Q8_0 = 8,
    KZ_GGUF_TENSOR_I8 = 24,
    KZ_GGUF_TENSOR_I32 = 26,
    KZ_GGUF_TENSOR_I64 = 27,
    KZ_GGUF_TENSOR_BF16 = 30,
} kz_gguf_tensor_type;

/* One metadata entry. Everything it points to is owned by the file object. */
typedef struct kz_gguf_kv {
    const char *key;              /* NUL-terminated, never empty */
    kz_gguf_value_type type;      /* KZ_GGUF_VALUE_ARRAY for arrays */
    kz_gguf_value_type elem_type; /* element type of an array (never ARRAY); == type otherwise */
    size_t n_values;              /* array length (may be 0); 1 for a scalar or a string */
    const void *values;           /* non-string values: [n_values] in native layout, aligned for
                                     the type (bool as uint8_t 0 or 1); NULL for strings */
    const char *const *strings;   /* string values: [n_values] NUL-terminated; NULL otherwise */
    const size_t *string_bytes;   /* [n_values] byte length of each string without the NUL
                                     (values may contain NUL bytes); NULL for non-strings */
} kz_gguf_kv;

typedef struct kz_gguf_tensor {
    const char *name;                /* NUL-terminated, owned by the file object */
    kz_gguf_tensor_type type;        /* ggml type id */
    const char *type_name;           /* "F32", "F16", "Q4_0", "Q8_0", "BF16", "I8", ... */
    int n_dims;                      /* 1 to KZ_GGUF_MAX_DIMS */
    int64_t ne[KZ_GGUF_MAX_DIMS];    /* as stored, ggml order: ne[0] innermost; 1 past n_dims */
    int64_t shape[KZ_GGUF_MAX_DIMS]; /* row-major: shape[i] = ne[n_dims - 1 - i]; 1 past n_dims */
    size_t n_elements;               /* product of the dimensions, never 0 */
    size_t n_bytes;                  /* bytes of data (whole blocks for quantized types) */
    uint64_t offset;                 /* from the start of the data section */
    const void *data;                /* points into the mapping, do not free; aligned to
                                        min(file alignment, page size) */
} kz_gguf_tensor;

typedef struct kz_gguf_file kz_gguf_file;

/* ---- reader --------------------------------------------------------------------------------- */

/* Opens and validates `path`. On failure *out is NULL and the message names the file. */
kz_status kz_gguf_open(const char *path, kz_gguf_file **out);

/* Unmaps and frees. Accepts NULL. */
void kz_gguf_close(kz_gguf_file *f);

/* Path the file was opened with; format version (2 or 3); alignment of the data section and of
 * every tensor offset (general.alignment, default 32). */
const char *kz_gguf_path(const kz_gguf_file *f);
uint32_t kz_gguf_version(const kz_gguf_file *f);
uint32_t kz_gguf_alignment(const kz_gguf_file *f);

/* Metadata entries in file order, and lookup by key (NULL if absent). */
size_t kz_gguf_kv_count(const kz_gguf_file *f);
const kz_gguf_kv *kz_gguf_kv_at(const kz_gguf_file *f, size_t index);
const kz_gguf_kv *kz_gguf_find_kv(const kz_gguf_file *f, const char *key);

/* Typed getters. Each fails with KZ_STATUS_BAD_MODEL and a message naming file and key when
 * the key is missing ("is missing") or holds another type ("has type int32, expected uint32");
 * then *out is zero (NULL for pointers). Use kz_gguf_find_kv first for optional keys. Strings
 * and arrays are borrowed from the file object; valid until kz_gguf_close. */
kz_status kz_gguf_get_u8(const kz_gguf_file *f, const char *key, uint8_t *out);
kz_status kz_gguf_get_i8(const kz_gguf_file *f, const char *key, int8_t *out);
kz_status kz_gguf_get_u16(const kz_gguf_file *f, const char *key, uint16_t *out);
kz_status kz_gguf_get_i16(const kz_gguf_file *f, const char *key, int16_t *out);
kz_status kz_gguf_get_u32(const kz_gguf_file *f, const char *key, uint32_t *out);
kz_status kz_gguf_get_i32(const kz_gguf_file *f, const char *key, int32_t *out);
kz_status kz_gguf_get_u64(const kz_gguf_file *f, const char *key, uint64_t *out);
kz_status kz_gguf_get_i64(const kz_gguf_file *f, const char *key, int64_t *out);
kz_status kz_gguf_get_f32(const kz_gguf_file *f, const char *key, float *out);
kz_status kz_gguf_get_f64(const kz_gguf_file *f, const char *key, double *out);
kz_status kz_gguf_get_bool(const kz_gguf_file *f, const char *key, bool *out);
kz_status kz_gguf_get_str(const kz_gguf_file *f, const char *key, const char **out);

/* Any scalar integer type (uint8 to int64, not bool), widened to int64; a uint64 above
 * INT64_MAX fails. For configs written by tools that differ in their integer widths. */
kz_status kz_gguf_get_int(const kz_gguf_file *f, const char *key, int64_t *out);

/* An array of `elem_type` (not STRING): *values points to [*n_values] elements of that type
 * (int32_t for I32, float for F32, uint8_t 0/1 for BOOL, ...), aligned. */
kz_status kz_gguf_get_array(const kz_gguf_file *f, const char *key, kz_gguf_value_type elem_type,
                            const void **values, size_t *n_values);

/* An array of strings: (*values)[i] is NUL-terminated; kz_gguf_find_kv(f, key)->string_bytes
 * has the lengths when a value may contain NUL bytes. */
kz_status kz_gguf_get_str_array(const kz_gguf_file *f, const char *key, const char *const **values,
                                size_t *n_values);

/* Tensors in file order, and lookup by name (NULL if absent). */
size_t kz_gguf_tensor_count(const kz_gguf_file *f);
const kz_gguf_tensor *kz_gguf_tensor_at(const kz_gguf_file *f, size_t index);
const kz_gguf_tensor *kz_gguf_find(const kz_gguf_file *f, const char *name);

/* Tensor by name with an expected row-major shape (like kz_st_get): KZ_STATUS_BAD_MODEL with a
 * message naming file, tensor, actual and expected shape (or "is missing") when it does not
 * match. 1 <= n_dims <= KZ_GGUF_MAX_DIMS. The caller checks t->type. */
kz_status kz_gguf_get(const kz_gguf_file *f, const char *name, int n_dims, const int64_t *shape,
                      const kz_gguf_tensor **out);

/* Releases the mapped pages lying wholly inside a tensor (madvise DONTNEED) after the caller has
 * converted it; the data stays readable (re-read from the file on access). */
void kz_gguf_release(const kz_gguf_file *f, const kz_gguf_tensor *t);

/* Names for messages: "uint32", "string", ...; "F32", "Q4_K", ... for any ggml type id, "?" if
 * unknown. Static strings. */
const char *kz_gguf_value_type_name(kz_gguf_value_type type);
const char *kz_gguf_tensor_type_name(uint32_t type);

/* Block geometry of a supported tensor type: values per block (1 for F32/F16/BF16) and bytes per
 * block. Returns false for types this reader does not support. */
bool kz_gguf_tensor_type_block(uint32_t type, size_t *block_values, size_t *block_bytes);

/* ---- writer --------------------------------------------------------------------------------- */

typedef struct kz_gguf_writer kz_gguf_writer;

/* Produces one tensor's bytes during kz_gguf_writer_write: fills dst[n_bytes] in file layout
 * (row-major, ggml blocks for quantized types) and returns KZ_OK, or a status with the message
 * set. Called once per tensor, in the order tensors were added, on the writing thread. */
typedef kz_status (*kz_gguf_fill_fn)(void *user, const char *name, void *dst, size_t n_bytes);

/* New empty writer (alignment 32). Free with kz_gguf_writer_free. */
kz_status kz_gguf_writer_new(kz_gguf_writer **out);

/* Frees the writer and its copies. Accepts NULL. */
void kz_gguf_writer_free(kz_gguf_writer *w);

/* Metadata, written in the order added. Keys and values are copied. Each fails with
 * KZ_STATUS_INVALID_ARGUMENT (and no effect) for an empty, too long or repeated key, an over-long
 * value, or too many entries. "general.alignment" must be added with kz_gguf_writer_add_u32 and a
 * power of two; it sets the alignment of the file being written. */
kz_status kz_gguf_writer_add_u8(kz_gguf_writer *w, const char *key, uint8_t value);
kz_status kz_gguf_writer_add_i8(kz_gguf_writer *w, const char *key, int8_t value);
kz_status kz_gguf_writer_add_u16(kz_gguf_writer *w, const char *key, uint16_t value);
kz_status kz_gguf_writer_add_i16(kz_gguf_writer *w, const char *key, int16_t value);
kz_status kz_gguf_writer_add_u32(kz_gguf_writer *w, const char *key, uint32_t value);
kz_status kz_gguf_writer_add_i32(kz_gguf_writer *w, const char *key, int32_t value);
kz_status kz_gguf_writer_add_u64(kz_gguf_writer *w, const char *key, uint64_t value);
kz_status kz_gguf_writer_add_i64(kz_gguf_writer *w, const char *key, int64_t value);
kz_status kz_gguf_writer_add_f32(kz_gguf_writer *w, const char *key, float value);
kz_status kz_gguf_writer_add_f64(kz_gguf_writer *w, const char *key, double value);
kz_status kz_gguf_writer_add_bool(kz_gguf_writer *w, const char *key, bool value);
kz_status kz_gguf_writer_add_str(kz_gguf_writer *w, const char *key, const char *value);

/* An array of non-string elements: values is [n_values] of the C type of elem_type (bool for
 * BOOL). n_values may be 0 (values may then be NULL). */
kz_status kz_gguf_writer_add_array(kz_gguf_writer *w, const char *key, kz_gguf_value_type elem_type,
                                   const void *values, size_t n_values);

/* An array of strings: values[i] has value_bytes[i] bytes, or is NUL-terminated when value_bytes
 * is NULL. */
kz_status kz_gguf_writer_add_str_array(kz_gguf_writer *w, const char *key,
                                       const char *const *values, const size_t *value_bytes,
                                       size_t n_values);

/* A tensor of `type` and row-major `shape` (1 <= n_dims <= 4, every dimension >= 1, the last one
 * a multiple of the block size for Q8_0/Q4_0). `data` holds its bytes in file layout and is
 * borrowed: it must stay valid until kz_gguf_writer_write returns. The name is copied. Fails with
 * KZ_STATUS_INVALID_ARGUMENT for a repeated or empty name or a bad type or shape. */
kz_status kz_gguf_writer_add_tensor(kz_gguf_writer *w, const char *name, kz_gguf_tensor_type type,
                                    int n_dims, const int64_t *shape, const void *data);

/* The same with the bytes produced at write time by fill(user, name, dst, n_bytes), so a
 * converter holds one tensor in memory at a time. */
kz_status kz_gguf_writer_add_tensor_fn(kz_gguf_writer *w, const char *name,
                                       kz_gguf_tensor_type type, int n_dims, const int64_t *shape,
                                       kz_gguf_fill_fn fill, void *user);

/* Progress of kz_gguf_writer_write: n_done of n_total tensors written, reported before the
 * first tensor (0) and after each, on the writing thread. Returning false cancels the write
 * (KZ_STATUS_CANCELLED, the temporary file removed). */
typedef bool (*kz_gguf_progress_fn)(void *user, size_t n_done, size_t n_total);

/* Sets (or with NULL clears) the progress callback of the writes that follow. */
void kz_gguf_writer_set_progress(kz_gguf_writer *w, kz_gguf_progress_fn fn, void *user);

/* Writes everything added so far to `path` (GGUF version 3). A device or FIFO (/dev/null) is
 * written through; a symlink is followed to the end of its chain and its target written by
 * the next rule (the link stays); a regular file or a new one is written through a temporary
 * file "<target>.partial-XXXXXX" in the target's folder that is renamed over the target only
 * after all bytes are written and synced (keeping the old file's permissions, else 0644); on
 * failure or cancel the temporary file is removed and the target is untouched. KZ_STATUS_IO
 * names the path; a fill callback's status is passed up. The writer stays usable. */
kz_status kz_gguf_writer_write(kz_gguf_writer *w, const char *path);

#endif
