/*
 * safetensors.c - memory-mapped safetensors reader with a fully validated header.
 *
 * Dataflow:
 *   path -> open + fstat + mmap(PROT_READ, MAP_PRIVATE)            the whole file, read-only
 *        -> [u64 LE header_bytes][header JSON][data area]
 *        -> header copied + NUL-terminated -> cJSON                 one object, trailing spaces ok
 *        -> each entry: name, dtype, shape, data_offsets checked    kz_st_tensor[] in header order
 *        -> pointers sorted by name: duplicates rejected            index for kz_st_find (bsearch)
 *        -> byte ranges sorted by begin: overlaps rejected          holes between tensors allowed
 *   kz_tensor_to_f32:   F32 memcpy, BF16 bits << 16, F16 bit conversion  -> float[n_elements]
 *   kz_st_release:  madvise(MADV_DONTNEED) on the pages lying wholly inside one tensor.
 *
 * Format (huggingface/safetensors): N = 8-byte little-endian u64, then N bytes of JSON mapping
 * tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the
 * data area, plus an optional "__metadata__" object of string values. The cJSON tree stays
 * alive with the file: tensor names and metadata strings point into it.
 *
 * Traps:
 *  - The header length is arbitrary, so tensor data has no alignment: bytes are read only with
 *    memcpy or byte loads, never through a float pointer into the mapping.
 *  - cJSON keeps duplicate keys; they are found after sorting names.
 *  - cJSON stores numbers as doubles, so integers are accepted only up to 2^53 (exact).
 *  - A zero-size tensor overlaps nothing, wherever its offsets point.
 *  - Hosts are little-endian (x86-64, arm64); F32 data is copied as is.
 *  - cJSON records its last parse error in a process-wide variable (cJSON_GetErrorPtr); we take
 *    the error position from return_parse_end instead and never read that global.
 */
#define _DEFAULT_SOURCE  // madvise and MADV_DONTNEED (glibc hides them under plain POSIX)
#define _DARWIN_C_SOURCE // the same on macOS

#include "io/safetensors.h"
#include "io/json.h"
#include "io/mapped_file.h"

#include <cjson/cJSON.h>
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
#error "safetensors.c copies F32 data as is and needs a little-endian host"
#endif

enum {
    HEADER_LENGTH_BYTES = 8,
    MAX_HEADER_BYTES = 100000000, // the official reader's limit (MAX_HEADER_SIZE)
    MAX_NAME_BYTES = 1024,
};

#define MAX_EXACT_INTEGER 9007199254740992.0 // 2^53: larger doubles skip integers

struct kz_st_file {
    kz_mapped_file file;          // path and mapping
    const uint8_t *data;          // data area: map + 8 + header length
    size_t data_bytes;            // file size - 8 - header length
    cJSON *json;                  // parsed header, owns names and metadata strings
    const cJSON *metadata;        // "__metadata__" object or NULL
    kz_st_tensor *tensors;        // [n_tensors], header order
    const kz_st_tensor **by_name; // [n_tensors], sorted by strcmp of name
    size_t n_tensors;
};

/* Byte range of one tensor in the data area, for the overlap check. */
typedef struct span {
    uint64_t begin;
    uint64_t end;
    size_t index;
} span;

typedef struct dtype_info {
    const char *name;
    size_t n_bytes;
    kz_dtype dtype;
} dtype_info;

/* Every fixed-width dtype of the safetensors format (sub-byte F4/F6 types are not accepted). */
static const dtype_info dtypes[] = {
    {"F32", 4, KZ_DTYPE_F32},       {"F16", 2, KZ_DTYPE_F16},       {"BF16", 2, KZ_DTYPE_BF16},
    {"F64", 8, KZ_DTYPE_OTHER},     {"I64", 8, KZ_DTYPE_OTHER},     {"I32", 4, KZ_DTYPE_OTHER},
    {"I16", 2, KZ_DTYPE_OTHER},     {"I8", 1, KZ_DTYPE_OTHER},      {"U64", 8, KZ_DTYPE_OTHER},
    {"U32", 4, KZ_DTYPE_OTHER},     {"U16", 2, KZ_DTYPE_OTHER},     {"U8", 1, KZ_DTYPE_OTHER},
    {"BOOL", 1, KZ_DTYPE_OTHER},    {"F8_E4M3", 1, KZ_DTYPE_OTHER}, {"F8_E5M2", 1, KZ_DTYPE_OTHER},
    {"F8_E8M0", 1, KZ_DTYPE_OTHER}, {"C64", 8, KZ_DTYPE_OTHER},
};

static const dtype_info *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(dtypes[i].name, name) == 0) {
            return &dtypes[i];
        }
    }
    return NULL;
}

/* Reads a JSON number that must be a non-negative integer. Returns NULL on success, otherwise
 * what is wrong with it. */
static const char *json_to_u64(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) {
        return "is not a number";
    }
    double value = item->valuedouble;
    if (value < 0) {
        return "is negative";
    }
    if (!(value <= MAX_EXACT_INTEGER)) {
        return "is too large";
    }
    *out = (uint64_t)value;
    if ((double)*out != value) {
        return "is not an integer";
    }
    return NULL;
}

/* Writes " (value)" for a JSON number, "" otherwise, for messages about bad integers. */
static void format_number(char *buf, size_t buf_bytes, const cJSON *item) {
    if (cJSON_IsNumber(item)) {
        snprintf(buf, buf_bytes, " (%.17g)", item->valuedouble);
    } else {
        buf[0] = '\0';
    }
}

/* ---- mapping ----------------------------------------------------------- */

static kz_status map_file(kz_st_file *f, const char *path) {
    kz_status st = kz_mapped_file_open(&f->file, path);
    if (st == KZ_OK && f->file.map_bytes < HEADER_LENGTH_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: file is %zu bytes, shorter than the 8-byte header length",
                            f->file.path, f->file.map_bytes);
    }
    return st;
}

/* ---- header entries ----------------------------------------------------- */

static kz_status parse_dtype(const kz_st_file *f, const char *name, const cJSON *item,
                             kz_st_tensor *t, size_t *elem_bytes) {
    if (!item) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': missing \"dtype\"", f->file.path,
                            name);
    }
    if (!cJSON_IsString(item)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': \"dtype\" is not a string",
                            f->file.path, name);
    }
    const dtype_info *info = find_dtype(item->valuestring);
    if (!info) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': unknown dtype \"%.32s\"",
                            f->file.path, name, item->valuestring);
    }
    t->dtype = info->dtype;
    t->dtype_name = info->name;
    *elem_bytes = info->n_bytes;
    return KZ_OK;
}

static kz_status parse_shape(const kz_st_file *f, const char *name, const cJSON *item,
                             kz_st_tensor *t) {
    if (!item) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': missing \"shape\"", f->file.path,
                            name);
    }
    if (!cJSON_IsArray(item)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': \"shape\" is not an array",
                            f->file.path, name);
    }
    int n_dims = cJSON_GetArraySize(item);
    if (n_dims > KZ_ST_MAX_DIMS) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': shape has %d dimensions, more than %d", f->file.path,
                            name, n_dims, KZ_ST_MAX_DIMS);
    }
    size_t n_elements = 1;
    int d = 0;
    for (const cJSON *dim = item->child; dim; dim = dim->next, d++) {
        uint64_t value = 0;
        const char *wrong = json_to_u64(dim, &value);
        if (wrong) {
            char number[40];
            format_number(number, sizeof number, dim);
            return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': shape dimension %d %s%s",
                                f->file.path, name, d, wrong, number);
        }
        t->shape[d] = (int64_t)value;
        if (value > SIZE_MAX || (value != 0 && n_elements > SIZE_MAX / (size_t)value)) {
            char text[256];
            kz_tensor_format_shape(text, sizeof text, d + 1, t->shape);
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%s': element count of shape %s... overflows",
                                f->file.path, name, text);
        }
        n_elements *= (size_t)value;
    }
    t->n_dims = n_dims;
    t->n_elements = n_elements;
    return KZ_OK;
}

/* Reads "data_offsets" into s and checks it lies in the data area. */
static kz_status parse_offsets(const kz_st_file *f, const char *name, const cJSON *item, span *s) {
    if (!item) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': missing \"data_offsets\"",
                            f->file.path, name);
    }
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': \"data_offsets\" is not an array of two integers",
                            f->file.path, name);
    }
    uint64_t offsets[2] = {0, 0};
    const cJSON *value = item->child;
    for (int i = 0; i < 2; i++, value = value->next) {
        const char *wrong = json_to_u64(value, &offsets[i]);
        if (wrong) {
            char number[40];
            format_number(number, sizeof number, value);
            return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': data_offsets[%d] %s%s",
                                f->file.path, name, i, wrong, number);
        }
    }
    s->begin = offsets[0];
    s->end = offsets[1];
    if (s->begin > s->end) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] begin is after end",
                            f->file.path, name, s->begin, s->end);
    }
    if (s->end > f->data_bytes) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': data_offsets end %" PRIu64
                            " is past the end of the data area (%zu bytes)",
                            f->file.path, name, s->end, f->data_bytes);
    }
    return KZ_OK;
}

static kz_status check_name(const kz_st_file *f, const char *name) {
    size_t n_bytes = strlen(name);
    if (n_bytes == 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: header has a tensor with an empty name",
                            f->file.path);
    }
    if (n_bytes > MAX_NAME_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor name of %zu bytes is longer than %d ('%.48s...')",
                            f->file.path, n_bytes, MAX_NAME_BYTES, name);
    }
    return KZ_OK;
}

/* Finds the three fields of an entry, rejecting repeated ones (other keys are ignored). */
static kz_status entry_fields(const kz_st_file *f, const char *name, const cJSON *entry,
                              const cJSON *fields[3]) {
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    for (const cJSON *item = entry->child; item; item = item->next) {
        for (int k = 0; k < 3; k++) {
            if (item->string && strcmp(item->string, keys[k]) == 0) {
                if (fields[k]) {
                    return kz_error_set(KZ_STATUS_BAD_MODEL,
                                        "%s: tensor '%s': \"%s\" appears more than once",
                                        f->file.path, name, keys[k]);
                }
                fields[k] = item;
            }
        }
    }
    return KZ_OK;
}

/* Validates one header entry into t (data pointer set) and its byte range into s. */
static kz_status parse_entry(const kz_st_file *f, const cJSON *entry, kz_st_tensor *t, span *s) {
    const char *name = entry->string;
    kz_status status = check_name(f, name);
    if (status != KZ_OK) {
        return status;
    }
    if (!cJSON_IsObject(entry)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s': entry is not a JSON object",
                            f->file.path, name);
    }
    const cJSON *fields[3] = {NULL, NULL, NULL};
    size_t elem_bytes = 0;
    t->name = name;
    if ((status = entry_fields(f, name, entry, fields)) != KZ_OK ||
        (status = parse_dtype(f, name, fields[0], t, &elem_bytes)) != KZ_OK ||
        (status = parse_shape(f, name, fields[1], t)) != KZ_OK ||
        (status = parse_offsets(f, name, fields[2], s)) != KZ_OK) {
        return status;
    }
    char text[256];
    kz_tensor_format_shape(text, sizeof text, t->n_dims, t->shape);
    if (t->n_elements > SIZE_MAX / elem_bytes) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': byte count of dtype %s and shape %s overflows",
                            f->file.path, name, t->dtype_name, text);
    }
    t->n_bytes = t->n_elements * elem_bytes;
    if (s->end - s->begin != t->n_bytes) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                            " bytes, but dtype %s and shape %s need %zu",
                            f->file.path, name, s->begin, s->end, s->end - s->begin, t->dtype_name,
                            text, t->n_bytes);
    }
    t->data = f->data + s->begin;
    return KZ_OK;
}

static kz_status parse_metadata(kz_st_file *f, const cJSON *item) {
    if (f->metadata) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: \"__metadata__\" appears more than once",
                            f->file.path);
    }
    if (!cJSON_IsObject(item)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: \"__metadata__\" is not a JSON object",
                            f->file.path);
    }
    for (const cJSON *value = item->child; value; value = value->next) {
        if (!cJSON_IsString(value)) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: \"__metadata__\" value '%.64s' is not a string", f->file.path,
                                value->string ? value->string : "");
        }
    }
    f->metadata = item;
    return KZ_OK;
}

/* ---- whole-header checks ------------------------------------------------ */

static int compare_by_name(const void *a, const void *b) {
    const kz_st_tensor *ta = *(const kz_st_tensor *const *)a;
    const kz_st_tensor *tb = *(const kz_st_tensor *const *)b;
    return strcmp(ta->name, tb->name);
}

/* Builds the name index and rejects duplicate names. */
static kz_status index_names(kz_st_file *f) {
    f->by_name = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->by_name);
    if (!f->by_name) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for the tensor index",
                            f->file.path);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        f->by_name[i] = &f->tensors[i];
    }
    if (f->n_tensors > 1) {
        qsort(f->by_name, f->n_tensors, sizeof *f->by_name, compare_by_name);
    }
    for (size_t i = 1; i < f->n_tensors; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%s' appears more than once in the header (duplicate "
                                "name)",
                                f->file.path, f->by_name[i]->name);
        }
    }
    return KZ_OK;
}

static int compare_by_begin(const void *a, const void *b) {
    const span *sa = a;
    const span *sb = b;
    if (sa->begin != sb->begin) {
        return sa->begin < sb->begin ? -1 : 1;
    }
    if (sa->end != sb->end) {
        return sa->end < sb->end ? -1 : 1;
    }
    return sa->index < sb->index ? -1 : sa->index > sb->index;
}

/* Sorts the byte ranges by begin and rejects any two non-empty ranges that share a byte. */
static kz_status check_overlaps(const kz_st_file *f, span *spans) {
    if (f->n_tensors > 1) {
        qsort(spans, f->n_tensors, sizeof *spans, compare_by_begin);
    }
    const span *last = NULL; // the non-empty range reaching furthest so far
    for (size_t i = 0; i < f->n_tensors; i++) {
        const span *s = &spans[i];
        if (s->begin == s->end) {
            continue;
        }
        if (last && s->begin < last->end) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensors '%s' (bytes [%" PRIu64 ", %" PRIu64 ")) and '%s' "
                                "(bytes [%" PRIu64 ", %" PRIu64 ")) overlap",
                                f->file.path, f->tensors[last->index].name, last->begin, last->end,
                                f->tensors[s->index].name, s->begin, s->end);
        }
        if (!last || s->end > last->end) {
            last = s;
        }
    }
    return KZ_OK;
}

/* Validates every entry of the parsed header, then names and byte ranges across entries. */
static kz_status parse_entries(kz_st_file *f) {
    size_t n_items = (size_t)cJSON_GetArraySize(f->json);
    f->tensors = calloc(n_items ? n_items : 1, sizeof *f->tensors);
    span *spans = malloc((n_items ? n_items : 1) * sizeof *spans);
    if (!f->tensors || !spans) {
        free(spans);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu header entries",
                            f->file.path, n_items);
    }
    kz_status status = KZ_OK;
    for (const cJSON *item = f->json->child; item && status == KZ_OK; item = item->next) {
        if (!item->string) {
            status =
                kz_error_set(KZ_STATUS_BAD_MODEL, "%s: header entry without a name", f->file.path);
        } else if (strcmp(item->string, "__metadata__") == 0) {
            status = parse_metadata(f, item);
        } else {
            spans[f->n_tensors].index = f->n_tensors;
            status = parse_entry(f, item, &f->tensors[f->n_tensors], &spans[f->n_tensors]);
            f->n_tensors++;
        }
    }
    if (status == KZ_OK) {
        status = index_names(f);
    }
    if (status == KZ_OK) {
        status = check_overlaps(f, spans);
    }
    free(spans);
    return status;
}

/* Checks the header length, parses the JSON object and validates its entries. */
static kz_status parse_header(kz_st_file *f) {
    uint64_t header_bytes = 0;
    for (int i = 0; i < HEADER_LENGTH_BYTES; i++) {
        header_bytes |= (uint64_t)f->file.map[i] << (8 * i);
    }
    size_t after_length = f->file.map_bytes - HEADER_LENGTH_BYTES;
    if (header_bytes == 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: header length is 0", f->file.path);
    }
    if (header_bytes > MAX_HEADER_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: header length %" PRIu64 " exceeds the limit of %d bytes",
                            f->file.path, header_bytes, MAX_HEADER_BYTES);
    }
    if (header_bytes > after_length) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: header length %" PRIu64
                            " runs past the end of the file (%zu bytes follow the length)",
                            f->file.path, header_bytes, after_length);
    }
    size_t text_bytes = (size_t)header_bytes;
    // A NUL-terminated private copy: cJSON never reads beyond it, whatever the input.
    char *text = malloc(text_bytes + 1);
    if (!text) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for a %zu-byte header",
                            f->file.path, text_bytes);
    }
    memcpy(text, f->file.map + HEADER_LENGTH_BYTES, text_bytes);
    text[text_bytes] = '\0';
    const char *stop = text;
    bool out_of_memory;
    f->json = kz_json_parse_text(text, &stop, false, &out_of_memory);
    size_t stop_offset = stop && stop >= text ? (size_t)(stop - text) : 0;
    free(text);
    if (!f->json && out_of_memory) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory parsing the header",
                            f->file.path);
    }
    if (!f->json) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: header is not valid JSON (parse error near byte %zu of %zu)",
                            f->file.path, stop_offset, text_bytes);
    }
    if (!cJSON_IsObject(f->json)) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: header is not a JSON object", f->file.path);
    }
    const uint8_t *rest = f->file.map + HEADER_LENGTH_BYTES;
    for (size_t i = stop_offset; i < text_bytes; i++) {
        if (rest[i] != ' ' && rest[i] != '\t' && rest[i] != '\n' && rest[i] != '\r') {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: header has data after the JSON object at byte %zu",
                                f->file.path, i);
        }
    }
    f->data = f->file.map + HEADER_LENGTH_BYTES + text_bytes;
    f->data_bytes = after_length - text_bytes;
    return parse_entries(f);
}

/* ---- public ------------------------------------------------------------- */

kz_status kz_st_open(const char *path, kz_st_file **out) {
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_st_open: out is NULL");
    }
    *out = NULL;
    if (!path) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_st_open: path is NULL");
    }
    kz_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", path);
    }
    kz_status status = map_file(f, path);
    if (status == KZ_OK) {
        status = parse_header(f);
    }
    if (status != KZ_OK) {
        kz_st_close(f);
        return status;
    }
    *out = f;
    return KZ_OK;
}

void kz_st_close(kz_st_file *f) {
    if (!f) {
        return;
    }
    kz_mapped_file_close(&f->file);
    cJSON_Delete(f->json);
    free(f->tensors);
    free(f->by_name);
    free(f);
}

static int compare_name_key(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const kz_st_tensor *const *)elem)->name);
}

const kz_st_tensor *kz_st_find(const kz_st_file *f, const char *name) {
    if (!f || !name || f->n_tensors == 0) {
        return NULL;
    }
    const kz_st_tensor *const *hit =
        bsearch(name, f->by_name, f->n_tensors, sizeof *f->by_name, compare_name_key);
    return hit ? *hit : NULL;
}

kz_status kz_st_get(const kz_st_file *f, const char *name, int n_dims, const int64_t *shape,
                    const kz_st_tensor **out) {
    *out = NULL;
    const kz_st_tensor *t = kz_st_find(f, name);
    kz_status st = kz_tensor_check(t, kz_st_path(f), name, n_dims, shape);
    *out = st == KZ_OK ? t : NULL;
    return st;
}

size_t kz_st_count(const kz_st_file *f) {
    return f ? f->n_tensors : 0;
}

const kz_st_tensor *kz_st_at(const kz_st_file *f, size_t index) {
    return f && index < f->n_tensors ? &f->tensors[index] : NULL;
}

const char *kz_st_path(const kz_st_file *f) {
    return f ? f->file.path : "(null)";
}

const char *kz_st_metadata(const kz_st_file *f, const char *key) {
    if (!f || !f->metadata || !key) {
        return NULL;
    }
    for (const cJSON *item = f->metadata->child; item; item = item->next) {
        if (item->string && strcmp(item->string, key) == 0) {
            return item->valuestring;
        }
    }
    return NULL;
}

void kz_st_release(const kz_st_file *f, const kz_st_tensor *t) {
    if (!f || !t || t->n_bytes == 0) {
        return;
    }
    KZ_ASSERT((uintptr_t)t->data >= (uintptr_t)f->file.map &&
              (uintptr_t)t->data + t->n_bytes <= (uintptr_t)f->file.map + f->file.map_bytes);
    kz_map_release_range(t->data, t->n_bytes);
}
