/*
 * gguf_write.c - GGUF version 3 writer: metadata and tensors in, one complete file out.
 *
 * Dataflow:
 *   kz_gguf_writer_add_<type>(key, value)  -> the entry encoded at once into `kv_bytes`
 *                                             (key string, u32 type, value), keys kept for
 *                                             the duplicate check
 *   kz_gguf_writer_add_tensor[_fn](...)    -> tensor record: name copy, type, dims reversed to
 *                                             ggml order, byte count, data pointer or callback
 *   kz_gguf_writer_write(path)             -> the destination: a device or FIFO (/dev/null) is
 *                                             written through; a symlink is followed to the
 *                                             end of its chain; a regular file (or none)
 *                                             gets mkstemp("<target>.partial-XXXXXX") in the
 *                                             target's folder (io/atomic_file.h)
 *        -> "GGUF", u32 3, u64 n_tensors, u64 n_kv, kv_bytes
 *        -> per tensor: name, u32 n_dims, u64 dims[], u32 type, u64 offset
 *           (offsets packed in order, each rounded up to the alignment, as ggml writes them)
 *        -> zero padding to the alignment, then each tensor's bytes and zero padding
 *           (callback tensors are produced into one reused buffer of the largest size),
 *           the progress callback before the first tensor and after each but the last
 *           (false cancels)
 *        -> fflush, fsync, fchmod (the replaced file's mode, else 0644), close, the
 *           progress callback for the last tensor (so a cancel, e.g. a signal, is honoured
 *           until only the rename is left), rename over the target; on any error or cancel
 *           unlink the temporary file, so the target is either the old file or the
 *           complete new one.
 *   The stream's buffer is WRITE_CHUNK bytes, so the file is written in whole 4 MB pieces at
 *   4 MB offsets (glibc writes large requests in multiples of the buffer size once it is
 *   full): Linux then caches the new file in 2 MB folios, which the loader maps 2 MB at a
 *   time (io/mapped_file.c), instead of the 4 KB folios of small unaligned writes.
 *
 * The writer enforces what gguf.c checks (key and name lengths, value sizes, counts, types,
 * block multiples, alignment a power of two), so whatever it writes reads back.
 *
 * Traps:
 *  - Shapes come in row-major (numpy order, like gguf-py's add_tensor) and are written
 *    reversed: dims[0] in the file is the last, fastest-varying dimension.
 *  - general.alignment is an ordinary metadata entry that also sets the layout; it must be a
 *    uint32 power of two, and the default 32 is not written.
 *  - Hosts are little-endian; values are written as their native bytes.
 */
#include "io/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "runtime/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c writes native values and needs a little-endian host"
#endif

_Static_assert(sizeof(bool) == 1, "bool arrays are written as one byte per value");

enum {
    MAX_COUNT = 1000000,          // as gguf.c
    MAX_NAME_BYTES = 65535,       // as gguf.c
    MAX_VALUE_BYTES = 64 << 20,   // as gguf.c
    MAX_ARRAY_VALUES = 100000000, // as gguf.c
    DEFAULT_ALIGNMENT = 32,
    N_VALUE_TYPES = 13,
};

/* Bytes of one value of each type (0 for STRING and ARRAY). */
static const size_t value_bytes_of[N_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct tensor_record {
    char *name;                      // copy, owned
    kz_gguf_tensor_type type;        // ggml type id
    int n_dims;                      // 1 to 4
    uint64_t dims[KZ_GGUF_MAX_DIMS]; // ggml order: dims[0] innermost
    size_t n_bytes;                  // data bytes, without padding
    uint64_t offset;                 // in the data section, set by kz_gguf_writer_write
    const void *data;                // borrowed, or NULL with fill
    kz_gguf_fill_fn fill;            // produces the bytes at write time, or NULL
    void *user;                      // for fill
} tensor_record;

struct kz_gguf_writer {
    uint8_t *kv_bytes;       // encoded metadata entries, in order
    size_t kv_size;          // bytes used
    size_t kv_capacity;      // bytes allocated
    char **keys;             // [n_kvs] copies, for the duplicate check
    size_t n_kvs;            // metadata entries
    size_t keys_capacity;    // slots allocated
    tensor_record *tensors;  // [n_tensors], in the order added
    size_t n_tensors;        // tensors
    size_t tensors_capacity; // slots allocated
    uint32_t alignment;      // general.alignment, default 32
    kz_gguf_progress_fn progress; // or NULL
    void *progress_user;     // for progress
};

/* ---- growable storage --------------------------------------------------------------------- */

/* Makes room for `extra` more elements of elem_bytes in *items (capacity in *capacity). */
static bool grow(void **items, size_t *capacity, size_t count, size_t extra, size_t elem_bytes) {
    if (extra > SIZE_MAX / elem_bytes - count) {
        return false;
    }
    size_t need = count + extra;
    if (need <= *capacity) {
        return true;
    }
    size_t next = *capacity < 16 ? 16 : *capacity;
    while (next < need) {
        next = next > SIZE_MAX / elem_bytes / 2 ? need : next * 2;
    }
    void *grown = realloc(*items, next * elem_bytes);
    if (!grown) {
        return false;
    }
    *items = grown;
    *capacity = next;
    return true;
}

static void put_bytes(kz_gguf_writer *w, const void *bytes, size_t n_bytes) {
    if (n_bytes) {
        memcpy(w->kv_bytes + w->kv_size, bytes, n_bytes);
        w->kv_size += n_bytes;
    }
}

static void put_u32(kz_gguf_writer *w, uint32_t value) {
    put_bytes(w, &value, sizeof value);
}

static void put_u64(kz_gguf_writer *w, uint64_t value) {
    put_bytes(w, &value, sizeof value);
}

static void put_string(kz_gguf_writer *w, const char *bytes, size_t n_bytes) {
    put_u64(w, n_bytes);
    put_bytes(w, bytes, n_bytes);
}

static char *copy_string(const char *text) {
    size_t n_bytes = strlen(text) + 1;
    char *copy = malloc(n_bytes);
    return copy ? memcpy(copy, text, n_bytes) : NULL;
}

/* ---- metadata ----------------------------------------------------------------------------- */

/* Checks the key and reserves value_bytes (plus the key string and type) in kv_bytes and a
 * slot in keys. On success the caller must encode the value and then call commit_key. */
static kz_status begin_kv(kz_gguf_writer *w, const char *key, size_t value_bytes) {
    if (!w || !key) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "gguf writer: writer or key is NULL");
    }
    size_t key_bytes = strlen(key);
    if (key_bytes == 0 || key_bytes > MAX_NAME_BYTES) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key of %zu bytes (must be 1 to %d)", key_bytes,
                            MAX_NAME_BYTES);
    }
    for (size_t i = 0; i < w->n_kvs; i++) {
        if (strcmp(w->keys[i], key) == 0) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "gguf writer: metadata key '%s' added twice", key);
        }
    }
    if (w->n_kvs >= MAX_COUNT) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': more than %d entries", key, MAX_COUNT);
    }
    size_t header = 8 + key_bytes + 4;
    if (value_bytes > SIZE_MAX - header ||
        !grow((void **)&w->kv_bytes, &w->kv_capacity, w->kv_size, header + value_bytes, 1) ||
        !grow((void **)&w->keys, &w->keys_capacity, w->n_kvs, 1, sizeof *w->keys)) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "gguf writer: no memory for metadata key '%s'",
                            key);
    }
    return KZ_OK;
}

/* Records the key (after its value was encoded); undoes the encoding on failure. */
static kz_status commit_key(kz_gguf_writer *w, const char *key, size_t kv_start) {
    char *copy = copy_string(key);
    if (!copy) {
        w->kv_size = kv_start;
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "gguf writer: no memory for metadata key '%s'",
                            key);
    }
    w->keys[w->n_kvs++] = copy;
    return KZ_OK;
}

static kz_status add_scalar(kz_gguf_writer *w, const char *key, kz_gguf_value_type type,
                            const void *value) {
    size_t n_bytes = value_bytes_of[type];
    uint32_t alignment = 0;
    if (key && strcmp(key, "general.alignment") == 0) {
        if (type != KZ_GGUF_VALUE_U32) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "gguf writer: general.alignment must be a uint32, not %s",
                                kz_gguf_value_type_name(type));
        }
        memcpy(&alignment, value, sizeof alignment);
        if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "gguf writer: general.alignment %" PRIu32 " is not a power of two",
                                alignment);
        }
    }
    kz_status status = begin_kv(w, key, n_bytes);
    if (status != KZ_OK) {
        return status;
    }
    size_t kv_start = w->kv_size;
    put_string(w, key, strlen(key));
    put_u32(w, (uint32_t)type);
    put_bytes(w, value, n_bytes);
    if ((status = commit_key(w, key, kv_start)) == KZ_OK && alignment) {
        w->alignment = alignment;
    }
    return status;
}

#define ADD_SCALAR(suffix, c_type, value_type)                                                     \
    kz_status kz_gguf_writer_add_##suffix(kz_gguf_writer *w, const char *key, c_type value) {      \
        return add_scalar(w, key, value_type, &value);                                             \
    }

ADD_SCALAR(u8, uint8_t, KZ_GGUF_VALUE_U8)
ADD_SCALAR(i8, int8_t, KZ_GGUF_VALUE_I8)
ADD_SCALAR(u16, uint16_t, KZ_GGUF_VALUE_U16)
ADD_SCALAR(i16, int16_t, KZ_GGUF_VALUE_I16)
ADD_SCALAR(u32, uint32_t, KZ_GGUF_VALUE_U32)
ADD_SCALAR(i32, int32_t, KZ_GGUF_VALUE_I32)
ADD_SCALAR(u64, uint64_t, KZ_GGUF_VALUE_U64)
ADD_SCALAR(i64, int64_t, KZ_GGUF_VALUE_I64)
ADD_SCALAR(f32, float, KZ_GGUF_VALUE_F32)
ADD_SCALAR(f64, double, KZ_GGUF_VALUE_F64)

kz_status kz_gguf_writer_add_bool(kz_gguf_writer *w, const char *key, bool value) {
    uint8_t byte = value ? 1 : 0;
    return add_scalar(w, key, KZ_GGUF_VALUE_BOOL, &byte);
}

kz_status kz_gguf_writer_add_str(kz_gguf_writer *w, const char *key, const char *value) {
    if (!value) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': value is NULL", key ? key : "(null)");
    }
    size_t n_bytes = strlen(value);
    if (n_bytes > MAX_VALUE_BYTES) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': string of %zu bytes exceeds %d",
                            key ? key : "(null)", n_bytes, MAX_VALUE_BYTES);
    }
    kz_status status = begin_kv(w, key, 8 + n_bytes);
    if (status != KZ_OK) {
        return status;
    }
    size_t kv_start = w->kv_size;
    put_string(w, key, strlen(key));
    put_u32(w, KZ_GGUF_VALUE_STRING);
    put_string(w, value, n_bytes);
    return commit_key(w, key, kv_start);
}

kz_status kz_gguf_writer_add_array(kz_gguf_writer *w, const char *key, kz_gguf_value_type elem_type,
                                   const void *values, size_t n_values) {
    const char *shown = key ? key : "(null)";
    if ((unsigned)elem_type >= N_VALUE_TYPES || elem_type == KZ_GGUF_VALUE_STRING ||
        elem_type == KZ_GGUF_VALUE_ARRAY) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': kz_gguf_writer_add_array cannot "
                            "write %s elements (type %d)",
                            shown, kz_gguf_value_type_name(elem_type), (int)elem_type);
    }
    if (n_values > MAX_ARRAY_VALUES || (n_values > 0 && !values)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': array of %zu values is %s", shown,
                            n_values, values ? "too long" : "NULL");
    }
    size_t n_bytes = n_values * value_bytes_of[elem_type];
    kz_status status = begin_kv(w, key, 4 + 8 + n_bytes);
    if (status != KZ_OK) {
        return status;
    }
    size_t kv_start = w->kv_size;
    put_string(w, key, strlen(key));
    put_u32(w, KZ_GGUF_VALUE_ARRAY);
    put_u32(w, (uint32_t)elem_type);
    put_u64(w, n_values);
    if (elem_type == KZ_GGUF_VALUE_BOOL) {
        for (size_t i = 0; i < n_values; i++) {
            uint8_t byte = ((const bool *)values)[i] ? 1 : 0;
            put_bytes(w, &byte, 1);
        }
    } else {
        put_bytes(w, values, n_bytes);
    }
    return commit_key(w, key, kv_start);
}

kz_status kz_gguf_writer_add_str_array(kz_gguf_writer *w, const char *key,
                                       const char *const *values, const size_t *value_bytes,
                                       size_t n_values) {
    const char *shown = key ? key : "(null)";
    if (n_values > MAX_ARRAY_VALUES || (n_values > 0 && !values)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: metadata key '%s': array of %zu strings is %s", shown,
                            n_values, values ? "too long" : "NULL");
    }
    size_t total = 4 + 8;
    for (size_t i = 0; i < n_values; i++) {
        size_t n_bytes = values[i] ? (value_bytes ? value_bytes[i] : strlen(values[i])) : 0;
        if (!values[i] || n_bytes > MAX_VALUE_BYTES || total > SIZE_MAX - 8 - n_bytes) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "gguf writer: metadata key '%s': string %zu is %s", shown, i,
                                values[i] ? "too long" : "NULL");
        }
        total += 8 + n_bytes;
    }
    kz_status status = begin_kv(w, key, total);
    if (status != KZ_OK) {
        return status;
    }
    size_t kv_start = w->kv_size;
    put_string(w, key, strlen(key));
    put_u32(w, KZ_GGUF_VALUE_ARRAY);
    put_u32(w, KZ_GGUF_VALUE_STRING);
    put_u64(w, n_values);
    for (size_t i = 0; i < n_values; i++) {
        put_string(w, values[i], value_bytes ? value_bytes[i] : strlen(values[i]));
    }
    return commit_key(w, key, kv_start);
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* Validates name, type and row-major shape and fills r (dims in ggml order, byte count). */
static kz_status check_tensor(const kz_gguf_writer *w, const char *name, kz_gguf_tensor_type type,
                              int n_dims, const int64_t *shape, tensor_record *r) {
    if (!w || !name || !shape) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: writer, tensor name or shape is NULL");
    }
    size_t name_bytes = strlen(name);
    if (name_bytes == 0 || name_bytes > MAX_NAME_BYTES) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor name of %zu bytes (must be 1 to %d)", name_bytes,
                            MAX_NAME_BYTES);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "gguf writer: tensor '%s' added twice",
                                name);
        }
    }
    if (w->n_tensors >= MAX_COUNT) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s': more than %d tensors", name, MAX_COUNT);
    }
    size_t block_values = 0;
    size_t block_bytes = 0;
    if (!kz_gguf_tensor_type_block((uint32_t)type, &block_values, &block_bytes)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s': unsupported tensor type %d", name,
                            (int)type);
    }
    if (n_dims < 1 || n_dims > KZ_GGUF_MAX_DIMS) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s': %d dimensions, expected 1 to %d", name,
                            n_dims, KZ_GGUF_MAX_DIMS);
    }
    size_t n_elements = 1;
    for (int d = 0; d < n_dims; d++) {
        int64_t dim = shape[n_dims - 1 - d];
        if (dim < 1 || (uint64_t)dim > SIZE_MAX || n_elements > SIZE_MAX / (size_t)dim ||
            n_elements * (size_t)dim > (uint64_t)INT64_MAX) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "gguf writer: tensor '%s': dimension %" PRId64
                                " is not positive or overflows the element count",
                                name, dim);
        }
        n_elements *= (size_t)dim;
        r->dims[d] = (uint64_t)dim;
    }
    if (r->dims[0] % block_values != 0) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s': last dimension %" PRIu64
                            " is not a multiple of the %s block size %zu",
                            name, r->dims[0], kz_gguf_tensor_type_name(type), block_values);
    }
    if (n_elements / block_values > SIZE_MAX / block_bytes) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s': byte count overflows", name);
    }
    r->type = type;
    r->n_dims = n_dims;
    r->n_bytes = n_elements / block_values * block_bytes;
    return KZ_OK;
}

static kz_status add_tensor(kz_gguf_writer *w, tensor_record *r, const char *name) {
    r->name = copy_string(name);
    if (!r->name ||
        !grow((void **)&w->tensors, &w->tensors_capacity, w->n_tensors, 1, sizeof *w->tensors)) {
        free(r->name);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "gguf writer: no memory for tensor '%s'",
                            name);
    }
    w->tensors[w->n_tensors++] = *r;
    return KZ_OK;
}

kz_status kz_gguf_writer_add_tensor(kz_gguf_writer *w, const char *name, kz_gguf_tensor_type type,
                                    int n_dims, const int64_t *shape, const void *data) {
    tensor_record r = {0};
    kz_status status = check_tensor(w, name, type, n_dims, shape, &r);
    if (status != KZ_OK) {
        return status;
    }
    if (!data) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "gguf writer: tensor '%s': data is NULL",
                            name);
    }
    r.data = data;
    return add_tensor(w, &r, name);
}

kz_status kz_gguf_writer_add_tensor_fn(kz_gguf_writer *w, const char *name,
                                       kz_gguf_tensor_type type, int n_dims, const int64_t *shape,
                                       kz_gguf_fill_fn fill, void *user) {
    tensor_record r = {0};
    kz_status status = check_tensor(w, name, type, n_dims, shape, &r);
    if (status != KZ_OK) {
        return status;
    }
    if (!fill) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "gguf writer: tensor '%s': fill is NULL",
                            name);
    }
    r.fill = fill;
    r.user = user;
    return add_tensor(w, &r, name);
}

/* ---- writing ------------------------------------------------------------------------------ */

#define WRITE_CHUNK ((size_t)4 << 20)

typedef kz_atomic_file sink; // the output file, with its sticky error

static void sink_write(sink *s, const void *bytes, size_t n_bytes) {
    kz_atomic_file_write(s, bytes, n_bytes);
}

static void sink_u32(sink *s, uint32_t value) {
    sink_write(s, &value, sizeof value);
}

static void sink_u64(sink *s, uint64_t value) {
    sink_write(s, &value, sizeof value);
}

/* Writes zero bytes up to the next multiple of alignment after `position`. */
static uint64_t sink_pad(sink *s, uint64_t position, uint32_t alignment) {
    static const uint8_t zeros[4096];
    uint64_t padding = (alignment - position % alignment) % alignment;
    for (uint64_t left = padding; left > 0;) {
        size_t chunk = left < sizeof zeros ? (size_t)left : sizeof zeros;
        sink_write(s, zeros, chunk);
        left -= chunk;
    }
    return position + padding;
}

/* Assigns packed, aligned data offsets in order; fails if they overflow 64 bits. */
static kz_status layout_tensors(kz_gguf_writer *w, const char *path) {
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        tensor_record *r = &w->tensors[i];
        uint64_t padded =
            (uint64_t)r->n_bytes + (w->alignment - r->n_bytes % w->alignment) % w->alignment;
        if (padded < r->n_bytes || offset > UINT64_MAX - padded) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: tensor data exceeds 2^64 bytes",
                                path);
        }
        r->offset = offset;
        offset += padded;
    }
    return KZ_OK;
}

/* Header, metadata and tensor infos; returns the number of bytes written. */
static uint64_t write_header(sink *s, const kz_gguf_writer *w) {
    sink_write(s, "GGUF", 4);
    sink_u32(s, 3);
    sink_u64(s, w->n_tensors);
    sink_u64(s, w->n_kvs);
    sink_write(s, w->kv_bytes, w->kv_size);
    uint64_t position = 24 + (uint64_t)w->kv_size;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const tensor_record *r = &w->tensors[i];
        size_t name_bytes = strlen(r->name);
        sink_u64(s, name_bytes);
        sink_write(s, r->name, name_bytes);
        sink_u32(s, (uint32_t)r->n_dims);
        for (int d = 0; d < r->n_dims; d++) {
            sink_u64(s, r->dims[d]);
        }
        sink_u32(s, (uint32_t)r->type);
        sink_u64(s, r->offset);
        position += 8 + name_bytes + 4 + 8 * (uint64_t)r->n_dims + 4 + 8;
    }
    return position;
}

/* The progress callback after n_done tensors; false from it cancels the write. */
static void report_progress(sink *s, const kz_gguf_writer *w, size_t n_done) {
    if (s->status == KZ_OK && w->progress &&
        !w->progress(w->progress_user, n_done, w->n_tensors)) {
        s->status = kz_error_set(KZ_STATUS_CANCELLED,
                                 "%s: cancelled by the progress callback after %zu of %zu tensors",
                                 s->dest, n_done, w->n_tensors);
    }
}

/* Tensor bytes, each followed by padding to the alignment. */
static void write_data(sink *s, const kz_gguf_writer *w) {
    size_t fill_bytes = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (w->tensors[i].fill && w->tensors[i].n_bytes > fill_bytes) {
            fill_bytes = w->tensors[i].n_bytes;
        }
    }
    uint8_t *buffer = NULL;
    if (fill_bytes > 0 && !(buffer = malloc(fill_bytes))) {
        s->status = kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                 "%s: no memory for a %zu-byte tensor buffer", s->dest, fill_bytes);
    }
    report_progress(s, w, 0);
    for (size_t i = 0; i < w->n_tensors && s->status == KZ_OK; i++) {
        const tensor_record *r = &w->tensors[i];
        const void *bytes = r->data;
        if (r->fill) {
            kz_error_clear();
            kz_status status = r->fill(r->user, r->name, buffer, r->n_bytes);
            if (status != KZ_OK) {
                if (kz_error_get()[0] == '\0') {
                    kz_error_set(status, "%s: filling tensor '%s' failed", s->dest, r->name);
                }
                s->status = status;
                break;
            }
            bytes = buffer;
        }
        sink_write(s, bytes, r->n_bytes);
        sink_pad(s, r->n_bytes, w->alignment);
        if (i + 1 < w->n_tensors) { // the last one's once the file is on disk
            report_progress(s, w, i + 1);
        }
    }
    free(buffer);
}

kz_status kz_gguf_writer_write(kz_gguf_writer *w, const char *path) {
    if (!w || !path) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_gguf_writer_write: writer or path is NULL");
    }
    kz_status status = layout_tensors(w, path);
    if (status != KZ_OK) {
        return status;
    }
    sink s;
    if (kz_atomic_file_open(&s, path, WRITE_CHUNK) == KZ_OK) {
        uint64_t position = write_header(&s, w);
        sink_pad(&s, position, w->alignment);
        write_data(&s, w);
    }
    kz_atomic_file_close(&s);
    if (w->n_tensors > 0) {
        report_progress(&s, w, w->n_tensors);
    }
    return kz_atomic_file_finish(&s);
}

void kz_gguf_writer_set_progress(kz_gguf_writer *w, kz_gguf_progress_fn fn, void *user) {
    w->progress = fn;
    w->progress_user = user;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

kz_status kz_gguf_writer_new(kz_gguf_writer **out) {
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_gguf_writer_new: out is NULL");
    }
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "gguf writer: no memory");
    }
    (*out)->alignment = DEFAULT_ALIGNMENT;
    return KZ_OK;
}

void kz_gguf_writer_free(kz_gguf_writer *w) {
    if (!w) {
        return;
    }
    for (size_t i = 0; i < w->n_kvs; i++) {
        free(w->keys[i]);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
    }
    free(w->keys);
    free(w->tensors);
    free(w->kv_bytes);
    free(w);
}
