/*
 * gguf.c - memory-mapped GGUF reader with a fully validated header.
 *
 * Dataflow:
 *   path -> open + fstat + mmap(PROT_READ, MAP_PRIVATE)                 the whole file, read-only
 *        -> header: "GGUF", u32 version, u64 n_tensors, u64 n_kv       counts checked vs file size
 *        -> n_kv entries: key, u32 type, value                          copied into the blob
 *        -> n_tensors infos: name, u32 n_dims, u64 dims[], u32 type, u64 offset
 *        -> blob offsets turned into pointers                           kz_gguf_kv[], tensor[]
 *        -> keys sorted: duplicates rejected; general.alignment read    index for kz_gguf_find_kv
 *        -> data section = end of infos rounded up to the alignment
 *        -> each tensor: offset aligned, bytes inside the file         data points into the mapping
 *        -> names sorted: duplicates rejected; ranges sorted: overlaps rejected
 *
 * Format (ggml docs/gguf.md, ggml gguf.cpp): little-endian throughout. A string is a u64 byte
 * count and that many bytes, no NUL. A value is one of 13 types (gguf_type); an array value is a
 * u32 element type, a u64 count and the elements. A tensor info gives dims in ggml order
 * (dims[0] innermost) and a ggml_type id; its offset is relative to the data section, which
 * starts at the first multiple of the alignment after the infos. Versions 2 and 3 have the same
 * layout (3 only added big-endian files, which announce themselves with a byte-swapped version).
 *
 * Choices where the spec is loose:
 *  - Keys and tensor names may hold any bytes except NUL (UTF-8 is not checked; lookups compare
 *    bytes), are never empty, and are at most 65535 bytes (the spec's key limit; ggml's 63-byte
 *    tensor name limit is not enforced). String values may hold any bytes, NUL included; they
 *    are at most 64 MiB each.
 *  - Nested arrays are rejected (ggml rejects them too); bool bytes other than 0 and 1 are
 *    rejected.
 *  - Tensors may come in any order with holes between them (ggml's reader wants them packed in
 *    order; our writer packs them), but must not share a byte. Zero dimensions are rejected, so
 *    every tensor has data. The padding after the last tensor is not required.
 *
 * Traps:
 *  - Every count and length comes from the file: sizes are checked before any allocation, and
 *    allocations stay proportional to the file size (the blob grows as values are copied).
 *  - The blob may move while it grows, so entries hold blob offsets until parsing ends; only
 *    then are pointers formed (string tables hold offsets in pointer-sized slots until then).
 *  - Metadata sits at arbitrary offsets, so values are copied with memcpy, never read through a
 *    typed pointer into the mapping. Tensor data is aligned to the file's alignment.
 *  - Hosts are little-endian (x86-64, arm64); values are copied as is.
 */
#define _DEFAULT_SOURCE  // madvise and MADV_DONTNEED (glibc hides them under plain POSIX)
#define _DARWIN_C_SOURCE // the same on macOS

#include "io/gguf.h"
#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c copies little-endian values as is and needs a little-endian host"
#endif

_Static_assert(sizeof(size_t) == sizeof(const char *), "string tables reuse offset slots");

enum {
    HEADER_BYTES = 24,                      // magic, version, tensor count, metadata count
    MAX_COUNT = 1000000,                    // tensors or metadata entries
    MAX_NAME_BYTES = 65535,                 // keys and tensor names
    MAX_VALUE_BYTES = 64 << 20,             // one string value
    MAX_ARRAY_VALUES = 100000000,           // elements of one array
    DEFAULT_ALIGNMENT = 32,                 // GGUF_DEFAULT_ALIGNMENT
    MIN_KV_BYTES = 8 + 1 + 4 + 1,           // key length, 1-byte key, type, 1-byte value
    MIN_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8, // name length, 1-byte name, n_dims, 1 dim, type, offset
    SHOWN_NAME_BYTES = 200,                 // of a key or name quoted in a message
    N_VALUE_TYPES = 13,
};

/* A metadata entry while parsing: the public view plus blob offsets of what it points to. */
typedef struct kv_entry {
    kz_gguf_kv kv;
    size_t key_at;
    size_t values_at;  // numbers, or the string table (offsets, then pointers)
    size_t lengths_at; // string lengths
} kv_entry;

typedef struct tensor_entry {
    kz_gguf_tensor t;
    size_t name_at;
} tensor_entry;

struct kz_gguf_file {
    kz_mapped_file file;            // path and mapping
    uint32_t version;               // 2 or 3
    uint32_t alignment;             // general.alignment or 32
    size_t data_start;              // file offset of the data section
    kv_entry *kvs;                  // [n_kvs], file order
    const kz_gguf_kv **kv_by_key;   // [n_kvs], sorted by strcmp of key
    size_t n_kvs;                   // metadata entries
    tensor_entry *tensors;          // [n_tensors], file order
    const kz_gguf_tensor **by_name; // [n_tensors], sorted by strcmp of name
    size_t n_tensors;               // tensor infos
    uint8_t *blob;                  // keys, names and values, owned
    size_t blob_bytes;              // used
    size_t blob_capacity;           // allocated
};

/* Position in the mapping and what is being read, for messages. */
typedef struct cursor {
    kz_gguf_file *f;
    size_t pos;
    char item[256]; // "metadata entry 3", "metadata key 'general.name'", "tensor 'w'"
} cursor;

/* Byte range of one tensor in the data section, for the overlap check. */
typedef struct span {
    uint64_t begin;
    uint64_t end;
    size_t index;
} span;

/* ---- type tables -------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t n_bytes; // encoded size of one value; 8 (the length) as the minimum for strings
} value_types[N_VALUE_TYPES] = {
    {"uint8", 1},  {"int8", 1},    {"uint16", 2},  {"int16", 2},  {"uint32", 4},
    {"int32", 4},  {"float32", 4}, {"bool", 1},    {"string", 8}, {"array", 12},
    {"uint64", 8}, {"int64", 8},   {"float64", 8},
};

const char *kz_gguf_value_type_name(kz_gguf_value_type type) {
    return (unsigned)type < N_VALUE_TYPES ? value_types[type].name : "?";
}

/* ggml_type names by id (ggml.h); ids 4, 5, 31-33 and 36-38 are retired in ggml ("?"). */
static const char *const tensor_type_names[] = {
    "F32",    "F16",   "Q4_0",  "Q4_1",   "?",     "?",     "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
    "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
    "BF16",   "?",     "?",     "?",      "TQ1_0", "TQ2_0", "?",       "?",      "?",       "MXFP4",
};

const char *kz_gguf_tensor_type_name(uint32_t type) {
    return type < sizeof tensor_type_names / sizeof tensor_type_names[0] ? tensor_type_names[type]
                                                                         : "?";
}

/* Block geometry of the supported types (ggml's type_traits blck_size and type_size). */
static const struct {
    uint32_t type;
    size_t block_values;
    size_t block_bytes;
} blocks[] = {
    {KZ_GGUF_TENSOR_F32, 1, 4},        {KZ_GGUF_TENSOR_F16, 1, 2},
    {KZ_GGUF_TENSOR_BF16, 1, 2},       {KZ_GGUF_TENSOR_Q8_0, 32, 2 + 32}, // f16 scale, int8 q[32]
    {KZ_GGUF_TENSOR_Q4_0, 32, 2 + 16},                                    // f16 scale, 32 nibbles
    {KZ_GGUF_TENSOR_I8, 1, 1},         {KZ_GGUF_TENSOR_I32, 1, 4},
    {KZ_GGUF_TENSOR_I64, 1, 8},
};

bool kz_gguf_tensor_type_block(uint32_t type, size_t *block_values, size_t *block_bytes) {
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        if (blocks[i].type == type) {
            if (block_values) {
                *block_values = blocks[i].block_values;
            }
            if (block_bytes) {
                *block_bytes = blocks[i].block_bytes;
            }
            return true;
        }
    }
    return false;
}

/* "array of uint32" or "uint32", for messages. */
static void describe_type(char *buf, size_t buf_bytes, kz_gguf_value_type type,
                          kz_gguf_value_type elem_type) {
    if (type == KZ_GGUF_VALUE_ARRAY) {
        snprintf(buf, buf_bytes, "array of %s", kz_gguf_value_type_name(elem_type));
    } else {
        snprintf(buf, buf_bytes, "%s", kz_gguf_value_type_name(type));
    }
}

/* Writes "[d0, d1, ...]" into buf. */
static void format_dims(char *buf, size_t buf_bytes, int n_dims, const int64_t *dims) {
    size_t used = (size_t)snprintf(buf, buf_bytes, "[");
    for (int i = 0; i < n_dims && used < buf_bytes; i++) {
        used +=
            (size_t)snprintf(buf + used, buf_bytes - used, "%s%" PRId64, i ? ", " : "", dims[i]);
    }
    if (used < buf_bytes) {
        snprintf(buf + used, buf_bytes - used, "]");
    }
}

/* ---- blob --------------------------------------------------------------------------------- */

/* Reserves n_bytes at an offset of the blob that is a multiple of `align` (1 or 8); *at receives
 * the offset. */
static kz_status blob_alloc(kz_gguf_file *f, size_t n_bytes, size_t align, size_t *at) {
    size_t start = (f->blob_bytes + align - 1) & ~(align - 1);
    if (n_bytes > SIZE_MAX - start) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: metadata too large", f->file.path);
    }
    size_t need = start + n_bytes;
    if (need > f->blob_capacity) {
        size_t capacity = f->blob_capacity < 4096 ? 4096 : f->blob_capacity;
        while (capacity < need) {
            capacity = capacity > SIZE_MAX / 2 ? need : capacity * 2;
        }
        uint8_t *grown = realloc(f->blob, capacity);
        if (!grown) {
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu bytes of metadata",
                                f->file.path, capacity);
        }
        f->blob = grown;
        f->blob_capacity = capacity;
    }
    *at = start;
    f->blob_bytes = need;
    return KZ_OK;
}

/* Copies bytes[n_bytes] plus a NUL into the blob. */
static kz_status blob_add_string(kz_gguf_file *f, const uint8_t *bytes, size_t n_bytes,
                                 size_t *at) {
    kz_status status = blob_alloc(f, n_bytes + 1, 1, at);
    if (status == KZ_OK) {
        memcpy(f->blob + *at, bytes, n_bytes);
        f->blob[*at + n_bytes] = '\0';
    }
    return status;
}

/* ---- cursor ------------------------------------------------------------------------------- */

static size_t bytes_left(const cursor *c) {
    return c->f->file.map_bytes - c->pos;
}

static kz_status read_bytes(cursor *c, const char *field, size_t n_bytes, const uint8_t **out) {
    if (n_bytes > bytes_left(c)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: %s (%zu bytes at offset %zu) runs past the end of the file "
                            "(%zu bytes)",
                            c->f->file.path, c->item, field, n_bytes, c->pos, c->f->file.map_bytes);
    }
    *out = c->f->file.map + c->pos;
    c->pos += n_bytes;
    return KZ_OK;
}

static kz_status read_u32(cursor *c, const char *field, uint32_t *out) {
    const uint8_t *p = NULL;
    kz_status status = read_bytes(c, field, 4, &p);
    if (status == KZ_OK) {
        memcpy(out, p, 4);
    }
    return status;
}

static kz_status read_u64(cursor *c, const char *field, uint64_t *out) {
    const uint8_t *p = NULL;
    kz_status status = read_bytes(c, field, 8, &p);
    if (status == KZ_OK) {
        memcpy(out, p, 8);
    }
    return status;
}

/* Reads a GGUF string (u64 length + bytes) of at most max_bytes; the bytes stay in the map. */
static kz_status read_string(cursor *c, const char *field, uint64_t max_bytes,
                             const uint8_t **bytes, size_t *n_bytes) {
    uint64_t length = 0;
    char what[64];
    snprintf(what, sizeof what, "length of %s", field);
    kz_status status = read_u64(c, what, &length);
    if (status != KZ_OK) {
        return status;
    }
    if (length > max_bytes) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: %s of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                            " bytes",
                            c->f->file.path, c->item, field, length, max_bytes);
    }
    if (length > bytes_left(c)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: %s of %" PRIu64 " bytes at offset %zu runs past the end of "
                            "the file (%zu bytes)",
                            c->f->file.path, c->item, field, length, c->pos, c->f->file.map_bytes);
    }
    *n_bytes = (size_t)length;
    return read_bytes(c, field, *n_bytes, bytes);
}

/* Reads a key or tensor name: non-empty, no NUL, at most MAX_NAME_BYTES; copies it to the blob
 * and names it in c->item as "<kind> '<name>'". */
static kz_status read_name(cursor *c, const char *field, const char *kind, size_t *at) {
    const uint8_t *bytes = NULL;
    size_t n_bytes = 0;
    kz_status status = read_string(c, field, MAX_NAME_BYTES, &bytes, &n_bytes);
    if (status != KZ_OK) {
        return status;
    }
    if (n_bytes == 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: empty %s", c->f->file.path, c->item,
                            field);
    }
    if (memchr(bytes, 0, n_bytes)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: %s contains a NUL byte", c->f->file.path,
                            c->item, field);
    }
    int shown = n_bytes > SHOWN_NAME_BYTES ? SHOWN_NAME_BYTES : (int)n_bytes;
    snprintf(c->item, sizeof c->item, "%s '%.*s%s'", kind, shown, (const char *)bytes,
             n_bytes > SHOWN_NAME_BYTES ? "..." : "");
    return blob_add_string(c->f, bytes, n_bytes, at);
}

/* ---- metadata ----------------------------------------------------------------------------- */

/* Reads n_values strings into the blob: a table of offsets (pointers after fix_pointers), a
 * table of lengths, and the NUL-terminated bytes. */
static kz_status read_strings(cursor *c, kv_entry *e) {
    size_t n_values = e->kv.n_values;
    kz_status status = blob_alloc(c->f, n_values * sizeof(size_t), 8, &e->values_at);
    if (status == KZ_OK) {
        status = blob_alloc(c->f, n_values * sizeof(size_t), 8, &e->lengths_at);
    }
    for (size_t i = 0; i < n_values && status == KZ_OK; i++) {
        char field[48] = "value";
        if (e->kv.type == KZ_GGUF_VALUE_ARRAY) {
            snprintf(field, sizeof field, "string %zu", i);
        }
        const uint8_t *bytes = NULL;
        size_t n_bytes = 0;
        size_t at = 0;
        status = read_string(c, field, MAX_VALUE_BYTES, &bytes, &n_bytes);
        if (status == KZ_OK) {
            status = blob_add_string(c->f, bytes, n_bytes, &at);
        }
        if (status == KZ_OK) {
            memcpy(c->f->blob + e->values_at + i * sizeof(size_t), &at, sizeof at);
            memcpy(c->f->blob + e->lengths_at + i * sizeof(size_t), &n_bytes, sizeof n_bytes);
        }
    }
    return status;
}

/* Copies n_values fixed-size values into the blob; bools must be 0 or 1. */
static kz_status read_numbers(cursor *c, kv_entry *e) {
    kz_gguf_value_type type = e->kv.elem_type;
    size_t n_bytes = e->kv.n_values * value_types[type].n_bytes; // bounded by the caller
    const uint8_t *bytes = NULL;
    kz_status status =
        read_bytes(c, e->kv.type == KZ_GGUF_VALUE_ARRAY ? "values" : "value", n_bytes, &bytes);
    if (status != KZ_OK) {
        return status;
    }
    if (type == KZ_GGUF_VALUE_BOOL) {
        for (size_t i = 0; i < n_bytes; i++) {
            if (bytes[i] > 1) {
                return kz_error_set(KZ_STATUS_BAD_MODEL,
                                    "%s: %s: bool value %u at index %zu is not 0 or 1",
                                    c->f->file.path, c->item, bytes[i], i);
            }
        }
    }
    status = blob_alloc(c->f, n_bytes, 8, &e->values_at);
    if (status == KZ_OK && n_bytes > 0) {
        memcpy(c->f->blob + e->values_at, bytes, n_bytes);
    }
    return status;
}

/* Reads the u32 element type and u64 count of an array and checks they can be read. */
static kz_status read_array_header(cursor *c, kv_entry *e) {
    uint32_t elem_type = 0;
    uint64_t n_values = 0;
    kz_status status = read_u32(c, "array element type", &elem_type);
    if (status != KZ_OK) {
        return status;
    }
    if (elem_type == KZ_GGUF_VALUE_ARRAY) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: arrays of arrays are not supported",
                            c->f->file.path, c->item);
    }
    if (elem_type >= N_VALUE_TYPES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: unknown array element type %" PRIu32,
                            c->f->file.path, c->item, elem_type);
    }
    if ((status = read_u64(c, "array length", &n_values)) != KZ_OK) {
        return status;
    }
    const char *elem_name = value_types[elem_type].name;
    if (n_values > MAX_ARRAY_VALUES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: array of %" PRIu64 " %s values exceeds the limit of %d",
                            c->f->file.path, c->item, n_values, elem_name, MAX_ARRAY_VALUES);
    }
    if (n_values * value_types[elem_type].n_bytes > bytes_left(c)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: array of %" PRIu64 " %s values at offset %zu runs past the "
                            "end of the file (%zu bytes)",
                            c->f->file.path, c->item, n_values, elem_name, c->pos,
                            c->f->file.map_bytes);
    }
    e->kv.elem_type = (kz_gguf_value_type)elem_type;
    e->kv.n_values = (size_t)n_values;
    return KZ_OK;
}

static kz_status read_kv(cursor *c, size_t index, kv_entry *e) {
    snprintf(c->item, sizeof c->item, "metadata entry %zu", index);
    kz_status status = read_name(c, "key", "metadata key", &e->key_at);
    uint32_t type = 0;
    if (status == KZ_OK) {
        status = read_u32(c, "value type", &type);
    }
    if (status != KZ_OK) {
        return status;
    }
    if (type >= N_VALUE_TYPES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: unknown value type %" PRIu32,
                            c->f->file.path, c->item, type);
    }
    e->kv.type = (kz_gguf_value_type)type;
    e->kv.elem_type = e->kv.type;
    e->kv.n_values = 1;
    if (type == KZ_GGUF_VALUE_ARRAY && (status = read_array_header(c, e)) != KZ_OK) {
        return status;
    }
    return e->kv.elem_type == KZ_GGUF_VALUE_STRING ? read_strings(c, e) : read_numbers(c, e);
}

/* ---- tensor infos ------------------------------------------------------------------------- */

/* Reads n_dims and the dims (ggml order) and computes the element count. */
static kz_status read_dims(cursor *c, kz_gguf_tensor *t, uint64_t *dims) {
    uint32_t n_dims = 0;
    kz_status status = read_u32(c, "dimension count", &n_dims);
    if (status != KZ_OK) {
        return status;
    }
    if (n_dims == 0 || n_dims > KZ_GGUF_MAX_DIMS) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: has %" PRIu32 " dimensions, expected 1 to %d", c->f->file.path,
                            c->item, n_dims, KZ_GGUF_MAX_DIMS);
    }
    size_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        char field[32];
        snprintf(field, sizeof field, "dimension %" PRIu32, d);
        if ((status = read_u64(c, field, &dims[d])) != KZ_OK) {
            return status;
        }
        if (dims[d] == 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: dimension %" PRIu32 " is 0",
                                c->f->file.path, c->item, d);
        }
        if (dims[d] > (uint64_t)INT64_MAX || dims[d] > SIZE_MAX ||
            n_elements > SIZE_MAX / (size_t)dims[d] ||
            n_elements * (size_t)dims[d] > (uint64_t)INT64_MAX) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: %s: element count overflows at dimension %" PRIu32 " (%" PRIu64
                                ")",
                                c->f->file.path, c->item, d, dims[d]);
        }
        n_elements *= (size_t)dims[d];
    }
    t->n_dims = (int)n_dims;
    t->n_elements = n_elements;
    for (int d = 0; d < KZ_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < t->n_dims ? (int64_t)dims[d] : 1;
        t->shape[d] = d < t->n_dims ? (int64_t)dims[t->n_dims - 1 - d] : 1;
    }
    return KZ_OK;
}

/* Reads the type and checks the block geometry and byte count. */
static kz_status read_type(cursor *c, kz_gguf_tensor *t) {
    uint32_t type = 0;
    kz_status status = read_u32(c, "type", &type);
    if (status != KZ_OK) {
        return status;
    }
    size_t block_values = 0;
    size_t block_bytes = 0;
    if (!kz_gguf_tensor_type_block(type, &block_values, &block_bytes)) {
        const char *name = kz_gguf_tensor_type_name(type);
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: unsupported tensor type %" PRIu32 "%s%s%s", c->f->file.path,
                            c->item, type, name[0] == '?' ? "" : " (", name[0] == '?' ? "" : name,
                            name[0] == '?' ? "" : ")");
    }
    t->type = (kz_gguf_tensor_type)type;
    t->type_name = kz_gguf_tensor_type_name(type);
    if ((uint64_t)t->ne[0] % block_values != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %s: dimension 0 (%" PRId64 ") is not a multiple of the %s block "
                            "size %zu",
                            c->f->file.path, c->item, t->ne[0], t->type_name, block_values);
    }
    size_t n_blocks = t->n_elements / block_values;
    if (n_blocks > SIZE_MAX / block_bytes) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s: byte count of %zu %s values overflows",
                            c->f->file.path, c->item, t->n_elements, t->type_name);
    }
    t->n_bytes = n_blocks * block_bytes;
    return KZ_OK;
}

static kz_status read_tensor_info(cursor *c, size_t index, tensor_entry *e) {
    snprintf(c->item, sizeof c->item, "tensor info %zu", index);
    uint64_t dims[KZ_GGUF_MAX_DIMS] = {0};
    kz_status status = read_name(c, "name", "tensor", &e->name_at);
    if (status == KZ_OK) {
        status = read_dims(c, &e->t, dims);
    }
    if (status == KZ_OK) {
        status = read_type(c, &e->t);
    }
    if (status == KZ_OK) {
        status = read_u64(c, "data offset", &e->t.offset);
    }
    return status;
}

/* ---- whole-file checks -------------------------------------------------------------------- */

/* Checks magic, version and counts; allocates the entry arrays. */
static kz_status read_header(cursor *c) {
    kz_gguf_file *f = c->f;
    if (f->file.map_bytes >= 4 && memcmp(f->file.map, "GGUF", 4) != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: not a GGUF file (bad magic %02x %02x %02x %02x, expected "
                            "\"GGUF\")",
                            f->file.path, f->file.map[0], f->file.map[1], f->file.map[2],
                            f->file.map[3]);
    }
    if (f->file.map_bytes < HEADER_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: file is %zu bytes, too small for the %d-byte GGUF header",
                            f->file.path, f->file.map_bytes, HEADER_BYTES);
    }
    uint64_t n_tensors = 0;
    uint64_t n_kvs = 0;
    memcpy(&f->version, f->file.map + 4, 4);
    memcpy(&n_tensors, f->file.map + 8, 8);
    memcpy(&n_kvs, f->file.map + 16, 8);
    c->pos = HEADER_BYTES;
    if (f->version != 2 && f->version != 3) {
        bool swapped = f->version == 0x02000000u || f->version == 0x03000000u;
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: unsupported GGUF version %" PRIu32 "%s (versions 2 and 3 are "
                            "read)",
                            f->file.path, f->version, swapped ? ", a big-endian file" : "");
    }
    if (n_tensors > MAX_COUNT || n_kvs > MAX_COUNT) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: %s count %" PRIu64 " exceeds the limit of %d",
                            f->file.path, n_tensors > MAX_COUNT ? "tensor" : "metadata",
                            n_tensors > MAX_COUNT ? n_tensors : n_kvs, MAX_COUNT);
    }
    if (n_kvs * MIN_KV_BYTES + n_tensors * MIN_INFO_BYTES > bytes_left(c)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: %" PRIu64 " metadata entries and %" PRIu64 " tensor infos "
                            "cannot fit in the %zu bytes after the header",
                            f->file.path, n_kvs, n_tensors, bytes_left(c));
    }
    f->n_kvs = (size_t)n_kvs;
    f->n_tensors = (size_t)n_tensors;
    f->kvs = calloc(f->n_kvs ? f->n_kvs : 1, sizeof *f->kvs);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    f->kv_by_key = malloc((f->n_kvs ? f->n_kvs : 1) * sizeof *f->kv_by_key);
    f->by_name = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->by_name);
    if (!f->kvs || !f->tensors || !f->kv_by_key || !f->by_name) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu entries", f->file.path,
                            f->n_kvs + f->n_tensors);
    }
    return KZ_OK;
}

/* Turns blob offsets into pointers once the blob has stopped growing. */
static void fix_pointers(kz_gguf_file *f) {
    for (size_t i = 0; i < f->n_kvs; i++) {
        kv_entry *e = &f->kvs[i];
        e->kv.key = (const char *)f->blob + e->key_at;
        if (e->kv.elem_type != KZ_GGUF_VALUE_STRING) {
            e->kv.values = f->blob + e->values_at;
            continue;
        }
        uint8_t *table = f->blob + e->values_at;
        for (size_t j = 0; j < e->kv.n_values; j++) {
            size_t at = 0;
            memcpy(&at, table + j * sizeof at, sizeof at);
            const char *string = (const char *)f->blob + at;
            memcpy(table + j * sizeof string, &string, sizeof string);
        }
        e->kv.strings = (const char *const *)(void *)table;
        e->kv.string_bytes = (const size_t *)(void *)(f->blob + e->lengths_at);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        f->tensors[i].t.name = (const char *)f->blob + f->tensors[i].name_at;
    }
}

static int compare_kv_keys(const void *a, const void *b) {
    return strcmp((*(const kz_gguf_kv *const *)a)->key, (*(const kz_gguf_kv *const *)b)->key);
}

/* Builds the key index, rejects duplicate keys and reads general.alignment. */
static kz_status index_keys(kz_gguf_file *f) {
    for (size_t i = 0; i < f->n_kvs; i++) {
        f->kv_by_key[i] = &f->kvs[i].kv;
    }
    if (f->n_kvs > 1) {
        qsort(f->kv_by_key, f->n_kvs, sizeof *f->kv_by_key, compare_kv_keys);
    }
    for (size_t i = 1; i < f->n_kvs; i++) {
        if (strcmp(f->kv_by_key[i - 1]->key, f->kv_by_key[i]->key) == 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: metadata key '%.*s' appears more than once", f->file.path,
                                SHOWN_NAME_BYTES, f->kv_by_key[i]->key);
        }
    }
    f->alignment = DEFAULT_ALIGNMENT;
    const kz_gguf_kv *kv = kz_gguf_find_kv(f, "general.alignment");
    if (kv) {
        if (kv->type != KZ_GGUF_VALUE_U32) {
            char type[32];
            describe_type(type, sizeof type, kv->type, kv->elem_type);
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: general.alignment has type %s, expected uint32", f->file.path,
                                type);
        }
        memcpy(&f->alignment, kv->values, sizeof f->alignment);
        if (f->alignment == 0 || (f->alignment & (f->alignment - 1)) != 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: general.alignment %" PRIu32 " is not a power of two",
                                f->file.path, f->alignment);
        }
    }
    return KZ_OK;
}

/* Places the data section after the infos and checks each tensor's offset and extent. */
static kz_status place_data(kz_gguf_file *f, size_t infos_end) {
    size_t padding = (f->alignment - infos_end % f->alignment) % f->alignment;
    // Past the end only matters when a tensor needs data: a file of metadata alone may stop
    // right after its infos.
    f->data_start = padding > SIZE_MAX - infos_end ? SIZE_MAX : infos_end + padding;
    size_t data_bytes = f->data_start < f->file.map_bytes ? f->file.map_bytes - f->data_start : 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        kz_gguf_tensor *t = &f->tensors[i].t;
        if (t->offset % f->alignment != 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%.*s': data offset %" PRIu64
                                " is not a multiple of the alignment %" PRIu32,
                                f->file.path, SHOWN_NAME_BYTES, t->name, t->offset, f->alignment);
        }
        if (t->offset > data_bytes || t->n_bytes > data_bytes - t->offset) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%.*s': %zu bytes at data offset %" PRIu64
                                " run past the end of the file (the data section at byte %zu "
                                "holds %zu bytes)",
                                f->file.path, SHOWN_NAME_BYTES, t->name, t->n_bytes, t->offset,
                                f->data_start, data_bytes);
        }
        t->data = f->file.map + f->data_start + t->offset;
    }
    return KZ_OK;
}

static int compare_tensor_names(const void *a, const void *b) {
    return strcmp((*(const kz_gguf_tensor *const *)a)->name,
                  (*(const kz_gguf_tensor *const *)b)->name);
}

static int compare_spans(const void *a, const void *b) {
    const span *sa = a;
    const span *sb = b;
    if (sa->begin != sb->begin) {
        return sa->begin < sb->begin ? -1 : 1;
    }
    return sa->index < sb->index ? -1 : sa->index > sb->index;
}

/* Builds the name index, rejects duplicate names and tensors sharing bytes. */
static kz_status index_tensors(kz_gguf_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        f->by_name[i] = &f->tensors[i].t;
    }
    if (f->n_tensors > 1) {
        qsort(f->by_name, f->n_tensors, sizeof *f->by_name, compare_tensor_names);
    }
    for (size_t i = 1; i < f->n_tensors; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%.*s' appears more than once (duplicate name)",
                                f->file.path, SHOWN_NAME_BYTES, f->by_name[i]->name);
        }
    }
    span *spans = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *spans);
    if (!spans) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for the overlap check",
                            f->file.path);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        const kz_gguf_tensor *t = &f->tensors[i].t;
        spans[i] = (span){t->offset, t->offset + t->n_bytes, i}; // place_data bounded both
    }
    if (f->n_tensors > 1) {
        qsort(spans, f->n_tensors, sizeof *spans, compare_spans);
    }
    kz_status status = KZ_OK;
    const span *last = NULL; // the range reaching furthest so far (no tensor is empty)
    for (size_t i = 0; i < f->n_tensors && status == KZ_OK; i++) {
        const span *s = &spans[i];
        if (last && s->begin < last->end) {
            status = kz_error_set(KZ_STATUS_BAD_MODEL,
                                  "%s: tensors '%.*s' (bytes [%" PRIu64 ", %" PRIu64 ")) and "
                                  "'%.*s' (bytes [%" PRIu64 ", %" PRIu64 ")) overlap",
                                  f->file.path, SHOWN_NAME_BYTES, f->tensors[last->index].t.name,
                                  last->begin, last->end, SHOWN_NAME_BYTES,
                                  f->tensors[s->index].t.name, s->begin, s->end);
        }
        if (!last || s->end > last->end) {
            last = s;
        }
    }
    free(spans);
    return status;
}

static kz_status parse(kz_gguf_file *f) {
    cursor c = {.f = f};
    kz_status status = read_header(&c);
    for (size_t i = 0; i < f->n_kvs && status == KZ_OK; i++) {
        status = read_kv(&c, i, &f->kvs[i]);
    }
    for (size_t i = 0; i < f->n_tensors && status == KZ_OK; i++) {
        status = read_tensor_info(&c, i, &f->tensors[i]);
    }
    if (status != KZ_OK) {
        return status;
    }
    fix_pointers(f);
    if ((status = index_keys(f)) != KZ_OK || (status = place_data(f, c.pos)) != KZ_OK) {
        return status;
    }
    return index_tensors(f);
}

/* ---- public: file ------------------------------------------------------------------------- */

kz_status kz_gguf_open(const char *path, kz_gguf_file **out) {
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_gguf_open: out is NULL");
    }
    *out = NULL;
    if (!path) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_gguf_open: path is NULL");
    }
    kz_gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", path);
    }
    kz_status status = kz_mapped_file_open(&f->file, path);
    if (status == KZ_OK) {
        status = parse(f);
    }
    if (status != KZ_OK) {
        kz_gguf_close(f);
        return status;
    }
    *out = f;
    return KZ_OK;
}

void kz_gguf_close(kz_gguf_file *f) {
    if (!f) {
        return;
    }
    kz_mapped_file_close(&f->file);
    free(f->kvs);
    free(f->kv_by_key);
    free(f->tensors);
    free(f->by_name);
    free(f->blob);
    free(f);
}

const char *kz_gguf_path(const kz_gguf_file *f) {
    return f ? f->file.path : "(null)";
}

uint32_t kz_gguf_version(const kz_gguf_file *f) {
    return f ? f->version : 0;
}

uint32_t kz_gguf_alignment(const kz_gguf_file *f) {
    return f ? f->alignment : 0;
}

/* ---- public: metadata --------------------------------------------------------------------- */

size_t kz_gguf_kv_count(const kz_gguf_file *f) {
    return f ? f->n_kvs : 0;
}

const kz_gguf_kv *kz_gguf_kv_at(const kz_gguf_file *f, size_t index) {
    return f && index < f->n_kvs ? &f->kvs[index].kv : NULL;
}

static int compare_key(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const kz_gguf_kv *const *)elem)->key);
}

const kz_gguf_kv *kz_gguf_find_kv(const kz_gguf_file *f, const char *key) {
    if (!f || !key || f->n_kvs == 0) {
        return NULL;
    }
    const kz_gguf_kv *const *hit =
        bsearch(key, f->kv_by_key, f->n_kvs, sizeof *f->kv_by_key, compare_key);
    return hit ? *hit : NULL;
}

/* The entry for key with the given type, or an error naming what was found instead. */
static kz_status find_typed(const kz_gguf_file *f, const char *key, kz_gguf_value_type type,
                            kz_gguf_value_type elem_type, const kz_gguf_kv **out) {
    *out = NULL;
    const kz_gguf_kv *kv = kz_gguf_find_kv(f, key);
    if (!kv) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: metadata key '%s' is missing",
                            kz_gguf_path(f), key ? key : "(null)");
    }
    if (kv->type != type || kv->elem_type != elem_type) {
        char actual[32];
        char expected[32];
        describe_type(actual, sizeof actual, kv->type, kv->elem_type);
        describe_type(expected, sizeof expected, type, elem_type);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: metadata key '%s' has type %s, expected %s",
                            kz_gguf_path(f), key, actual, expected);
    }
    *out = kv;
    return KZ_OK;
}

/* Copies the scalar of `type` at key into out[n_bytes], or zeroes it. */
static kz_status get_scalar(const kz_gguf_file *f, const char *key, kz_gguf_value_type type,
                            void *out, size_t n_bytes) {
    memset(out, 0, n_bytes);
    const kz_gguf_kv *kv = NULL;
    kz_status status = find_typed(f, key, type, type, &kv);
    if (status == KZ_OK) {
        memcpy(out, kv->values, n_bytes);
    }
    return status;
}

#define GET_SCALAR(suffix, c_type, value_type)                                                     \
    kz_status kz_gguf_get_##suffix(const kz_gguf_file *f, const char *key, c_type *out) {          \
        return get_scalar(f, key, value_type, out, sizeof *out);                                   \
    }

GET_SCALAR(u8, uint8_t, KZ_GGUF_VALUE_U8)
GET_SCALAR(i8, int8_t, KZ_GGUF_VALUE_I8)
GET_SCALAR(u16, uint16_t, KZ_GGUF_VALUE_U16)
GET_SCALAR(i16, int16_t, KZ_GGUF_VALUE_I16)
GET_SCALAR(u32, uint32_t, KZ_GGUF_VALUE_U32)
GET_SCALAR(i32, int32_t, KZ_GGUF_VALUE_I32)
GET_SCALAR(u64, uint64_t, KZ_GGUF_VALUE_U64)
GET_SCALAR(i64, int64_t, KZ_GGUF_VALUE_I64)
GET_SCALAR(f32, float, KZ_GGUF_VALUE_F32)
GET_SCALAR(f64, double, KZ_GGUF_VALUE_F64)

kz_status kz_gguf_get_bool(const kz_gguf_file *f, const char *key, bool *out) {
    uint8_t value = 0;
    kz_status status = get_scalar(f, key, KZ_GGUF_VALUE_BOOL, &value, sizeof value);
    *out = value != 0;
    return status;
}

kz_status kz_gguf_get_str(const kz_gguf_file *f, const char *key, const char **out) {
    const kz_gguf_kv *kv = NULL;
    kz_status status = find_typed(f, key, KZ_GGUF_VALUE_STRING, KZ_GGUF_VALUE_STRING, &kv);
    *out = kv ? kv->strings[0] : NULL;
    return status;
}

kz_status kz_gguf_get_int(const kz_gguf_file *f, const char *key, int64_t *out) {
    *out = 0;
    const kz_gguf_kv *kv = kz_gguf_find_kv(f, key);
    if (!kv) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: metadata key '%s' is missing",
                            kz_gguf_path(f), key ? key : "(null)");
    }
    kz_gguf_value_type type = kv->type;
    if (type > KZ_GGUF_VALUE_I32 && type != KZ_GGUF_VALUE_U64 && type != KZ_GGUF_VALUE_I64) {
        char actual[32];
        describe_type(actual, sizeof actual, kv->type, kv->elem_type);
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: metadata key '%s' has type %s, expected an integer",
                            kz_gguf_path(f), key, actual);
    }
    size_t n_bits = 8 * value_types[type].n_bytes;
    bool is_signed = (type & 1) != 0; // I8, I16, I32 and I64 have the odd ids
    uint64_t bits = 0;
    memcpy(&bits, kv->values, n_bits / 8); // little-endian: the low bytes
    if (is_signed && n_bits < 64 && (bits >> (n_bits - 1)) != 0) {
        bits |= UINT64_MAX << n_bits; // sign extension
    }
    if (!is_signed && bits > (uint64_t)INT64_MAX) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: metadata key '%s': uint64 value %" PRIu64 " does not fit in int64",
                            kz_gguf_path(f), key, bits);
    }
    *out = (int64_t)bits;
    return KZ_OK;
}

kz_status kz_gguf_get_array(const kz_gguf_file *f, const char *key, kz_gguf_value_type elem_type,
                            const void **values, size_t *n_values) {
    *values = NULL;
    *n_values = 0;
    if ((unsigned)elem_type >= N_VALUE_TYPES || elem_type == KZ_GGUF_VALUE_STRING ||
        elem_type == KZ_GGUF_VALUE_ARRAY) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: metadata key '%s': kz_gguf_get_array cannot return %s elements",
                            kz_gguf_path(f), key ? key : "(null)",
                            kz_gguf_value_type_name(elem_type));
    }
    const kz_gguf_kv *kv = NULL;
    kz_status status = find_typed(f, key, KZ_GGUF_VALUE_ARRAY, elem_type, &kv);
    if (status == KZ_OK) {
        *values = kv->values;
        *n_values = kv->n_values;
    }
    return status;
}

kz_status kz_gguf_get_str_array(const kz_gguf_file *f, const char *key, const char *const **values,
                                size_t *n_values) {
    *values = NULL;
    *n_values = 0;
    const kz_gguf_kv *kv = NULL;
    kz_status status = find_typed(f, key, KZ_GGUF_VALUE_ARRAY, KZ_GGUF_VALUE_STRING, &kv);
    if (status == KZ_OK) {
        *values = kv->strings;
        *n_values = kv->n_values;
    }
    return status;
}

/* ---- public: tensors ---------------------------------------------------------------------- */

size_t kz_gguf_tensor_count(const kz_gguf_file *f) {
    return f ? f->n_tensors : 0;
}

const kz_gguf_tensor *kz_gguf_tensor_at(const kz_gguf_file *f, size_t index) {
    return f && index < f->n_tensors ? &f->tensors[index].t : NULL;
}

static int compare_name(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const kz_gguf_tensor *const *)elem)->name);
}

const kz_gguf_tensor *kz_gguf_find(const kz_gguf_file *f, const char *name) {
    if (!f || !name || f->n_tensors == 0) {
        return NULL;
    }
    const kz_gguf_tensor *const *hit =
        bsearch(name, f->by_name, f->n_tensors, sizeof *f->by_name, compare_name);
    return hit ? *hit : NULL;
}

kz_status kz_gguf_get(const kz_gguf_file *f, const char *name, int n_dims, const int64_t *shape,
                      const kz_gguf_tensor **out) {
    *out = NULL;
    if (!name || n_dims < 1 || n_dims > KZ_GGUF_MAX_DIMS || !shape) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: tensor '%s': expected shape with %d dimensions is invalid",
                            kz_gguf_path(f), name ? name : "(null)", n_dims);
    }
    const kz_gguf_tensor *t = kz_gguf_find(f, name);
    if (!t) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' is missing", kz_gguf_path(f),
                            name);
    }
    bool same = t->n_dims == n_dims;
    for (int d = 0; same && d < n_dims; d++) {
        same = t->shape[d] == shape[d];
    }
    if (!same) {
        char actual[128];
        char expected[128];
        format_dims(actual, sizeof actual, t->n_dims, t->shape);
        format_dims(expected, sizeof expected, n_dims, shape);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' has shape %s, expected %s",
                            kz_gguf_path(f), name, actual, expected);
    }
    *out = t;
    return KZ_OK;
}

void kz_gguf_release(const kz_gguf_file *f, const kz_gguf_tensor *t) {
    if (!f || !t || t->n_bytes == 0) {
        return;
    }
    KZ_ASSERT((uintptr_t)t->data >= (uintptr_t)f->file.map &&
              (uintptr_t)t->data + t->n_bytes <= (uintptr_t)f->file.map + f->file.map_bytes);
    kz_map_release_range(t->data, t->n_bytes);
}
