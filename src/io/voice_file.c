/*
 * voice_file.c - the .kzvoice format (see voice_file.h, docs/VOICE_FILE.md).
 *
 *   header, 72 bytes, little-endian:
 *     0 magic "KZVOICE\0" | 8 u32 version | 12 u32 flags (bit 0: ICL)
 *    16 char model_type[16] (NUL-padded) | 32 i32 enc_dim | 36 i32 sample_rate
 *    40 u64 fingerprint | 48 f64 ref_seconds | 56 i32 n_codebooks | 60 i32 n_ref_frames
 *    64 u32 text_bytes | 68 u32 reserved (0)
 *   then f32 xvector[enc_dim], i32 codes[n_ref_frames][n_codebooks], the transcript's
 *   text_bytes (UTF-8, no NUL, no terminator) and u32 CRC-32 of every byte before it.
 *
 * Parsing checks in the order a reader can trust them: the magic and version (so a newer
 * file is named as such), each header field against its range, the sizes against the
 * file's length (all products bounded by the caps, so nothing overflows), the checksum,
 * and last the values themselves, which only a damaged writer gets wrong.
 */
#include "io/voice_file.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/regular_file.h"
#include "io/utf8.h"
#include "runtime/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "voice_file.c reads and writes native values and needs a little-endian host"
#endif

static const char MAGIC[8] = {'K', 'Z', 'V', 'O', 'I', 'C', 'E', '\0'};
enum { FLAG_ICL = 1u, MODEL_TYPE_BYTES = 16, MIN_RATE = 8000, MAX_RATE = 384000 };

/* ---- memory layout ---------------------------------------------------------------------- */

kz_voice *kz_voice_file_alloc(int32_t enc_dim, int32_t n_frames, int32_t n_codebooks,
                              size_t text_bytes) {
    if (enc_dim < 1 || enc_dim > KZ_VOICE_MAX_ENC_DIM || n_frames < 0 ||
        n_frames > KZ_VOICE_MAX_FRAMES || n_codebooks < 0 ||
        n_codebooks > KZ_VOICE_MAX_CODEBOOKS || text_bytes > KZ_VOICE_MAX_TEXT_BYTES) {
        return NULL;
    }
    const size_t n_codes = (size_t)n_frames * (size_t)n_codebooks;
    const size_t n_bytes = sizeof(kz_voice) + sizeof(float) * (size_t)enc_dim +
                           sizeof(int32_t) * n_codes + text_bytes + 1;
    kz_voice *v = calloc(1, n_bytes);
    if (!v) {
        return NULL;
    }
    v->format_version = KZ_VOICE_FILE_VERSION;
    v->enc_dim = enc_dim;
    v->n_ref_frames = n_frames;
    v->n_codebooks = n_codebooks;
    v->xvector = (float *)(v + 1);
    v->ref_codes = n_codes ? (int32_t *)(v->xvector + enc_dim) : NULL;
    v->ref_text = (char *)(v->xvector + enc_dim) + sizeof(int32_t) * n_codes;
    return v;
}

/* ---- CRC-32 ------------------------------------------------------------------------------ */

uint32_t kz_voice_file_crc32(uint32_t crc, const void *bytes, size_t n_bytes) {
    const uint8_t *p = bytes;
    crc = ~crc;
    for (size_t i = 0; i < n_bytes; i++) { // bitwise: voice files are a few kilobytes
        crc ^= p[i];
        for (int k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

/* ---- parsing ----------------------------------------------------------------------------- */

/* The header's fields as stored. */
typedef struct header {
    uint32_t version, flags;
    char model_type[MODEL_TYPE_BYTES];
    int32_t enc_dim, sample_rate;
    uint64_t fingerprint;
    double ref_seconds;
    int32_t n_codebooks, n_ref_frames;
    uint32_t text_bytes, reserved;
} header;

static void get(void *dst, const uint8_t *bytes, size_t offset, size_t n_bytes) {
    memcpy(dst, bytes + offset, n_bytes);
}

static header read_header(const uint8_t *b) {
    header h;
    get(&h.version, b, 8, 4);
    get(&h.flags, b, 12, 4);
    get(h.model_type, b, 16, MODEL_TYPE_BYTES);
    get(&h.enc_dim, b, 32, 4);
    get(&h.sample_rate, b, 36, 4);
    get(&h.fingerprint, b, 40, 8);
    get(&h.ref_seconds, b, 48, 8);
    get(&h.n_codebooks, b, 56, 4);
    get(&h.n_ref_frames, b, 60, 4);
    get(&h.text_bytes, b, 64, 4);
    get(&h.reserved, b, 68, 4);
    return h;
}

static kz_status bad(const char *name, const char *what) {
    return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: %s", name, what);
}

/* 1 to 15 bytes of [a-z0-9_], then NULs to the end of the field. */
static bool model_type_ok(const char *t) {
    size_t n = 0;
    while (n < MODEL_TYPE_BYTES && t[n] &&
           ((t[n] >= 'a' && t[n] <= 'z') || (t[n] >= '0' && t[n] <= '9') || t[n] == '_')) {
        n++;
    }
    if (n == 0 || n == MODEL_TYPE_BYTES) {
        return false;
    }
    for (size_t i = n; i < MODEL_TYPE_BYTES; i++) {
        if (t[i]) {
            return false;
        }
    }
    return true;
}

static kz_status check_version(const char *name, uint32_t version) {
    if (version > KZ_VOICE_FILE_VERSION) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: voice file format version %u was made by a newer kztts (this "
                            "one reads version %d)",
                            name, version, KZ_VOICE_FILE_VERSION);
    }
    if (version == 0) {
        return bad(name, "voice file format version 0 does not exist");
    }
    return KZ_OK;
}

/* The ICL fields: all set (ICL) or all zero (x-vector only). */
static kz_status check_icl_fields(const char *name, const header *h) {
    if (!(h->flags & FLAG_ICL)) {
        if (h->n_codebooks || h->n_ref_frames || h->text_bytes) {
            return kz_error_set(KZ_STATUS_BAD_INPUT,
                                "%s: an x-vector-only voice has n_codebooks %d, n_ref_frames %d, "
                                "text_bytes %u (each must be 0)",
                                name, h->n_codebooks, h->n_ref_frames, h->text_bytes);
        }
        return KZ_OK;
    }
    if (h->n_codebooks < 1 || h->n_codebooks > KZ_VOICE_MAX_CODEBOOKS) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: n_codebooks %d out of range [1, %d]", name,
                            h->n_codebooks, KZ_VOICE_MAX_CODEBOOKS);
    }
    if (h->n_ref_frames < 1 || h->n_ref_frames > KZ_VOICE_MAX_FRAMES) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: n_ref_frames %d out of range [1, %d]", name,
                            h->n_ref_frames, KZ_VOICE_MAX_FRAMES);
    }
    if (h->text_bytes < 1 || h->text_bytes > KZ_VOICE_MAX_TEXT_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: transcript of %u bytes out of range [1, %d] for an ICL voice",
                            name, h->text_bytes, KZ_VOICE_MAX_TEXT_BYTES);
    }
    return KZ_OK;
}

static kz_status check_header(const char *name, const header *h) {
    if (h->flags & ~FLAG_ICL) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: unknown flags 0x%x", name, h->flags);
    }
    if (!model_type_ok(h->model_type)) {
        return bad(name, "model_type is not 1 to 15 characters of a-z, 0-9, _");
    }
    if (h->enc_dim < 1 || h->enc_dim > KZ_VOICE_MAX_ENC_DIM) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: enc_dim %d out of range [1, %d]", name,
                            h->enc_dim, KZ_VOICE_MAX_ENC_DIM);
    }
    if (h->sample_rate < MIN_RATE || h->sample_rate > MAX_RATE) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: sample_rate %d out of range [%d, %d]", name,
                            h->sample_rate, MIN_RATE, MAX_RATE);
    }
    if (h->fingerprint == 0) {
        return bad(name, "fingerprint is 0 (no model made this voice)");
    }
    if (!(h->ref_seconds > 0 && h->ref_seconds <= KZ_VOICE_MAX_SECONDS)) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: ref_seconds %g out of range (0, %g]", name,
                            h->ref_seconds, KZ_VOICE_MAX_SECONDS);
    }
    kz_status st = check_icl_fields(name, h);
    if (st == KZ_OK && h->reserved != 0) {
        st = kz_error_set(KZ_STATUS_BAD_INPUT, "%s: reserved field is %u (must be 0)", name,
                          h->reserved);
    }
    return st;
}

/* Bytes of the whole file the header describes (bounded by the caps: no overflow). */
static size_t file_bytes_of(const header *h) {
    return KZ_VOICE_FILE_HEADER_BYTES + 4 * (size_t)h->enc_dim +
           4 * (size_t)h->n_ref_frames * (size_t)h->n_codebooks + h->text_bytes + 4;
}

static kz_status check_values(const char *name, const kz_voice *v) {
    for (int32_t i = 0; i < v->enc_dim; i++) {
        if (!isfinite(v->xvector[i])) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: x-vector value %d is not finite", name,
                                i);
        }
    }
    const size_t n_codes = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    for (size_t i = 0; i < n_codes; i++) {
        if (v->ref_codes[i] < 0 || v->ref_codes[i] > 65535) {
            return kz_error_set(KZ_STATUS_BAD_INPUT,
                                "%s: code %d at frame %zu, codebook %zu out of range [0, 65535]",
                                name, v->ref_codes[i], i / (size_t)v->n_codebooks,
                                i % (size_t)v->n_codebooks);
        }
    }
    return KZ_OK;
}

/* The transcript: valid UTF-8 without NUL. */
static kz_status check_text(const char *name, const uint8_t *text, size_t n_bytes) {
    const uint8_t *nul = memchr(text, 0, n_bytes);
    if (nul) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: NUL byte at byte %zu of the transcript",
                            name, (size_t)(nul - text));
    }
    size_t bad_at = kz_utf8_invalid_at((const char *)text, n_bytes);
    if (bad_at < n_bytes) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: invalid UTF-8 at byte %zu of the transcript",
                            name, bad_at);
    }
    return KZ_OK;
}

/* Checks everything up to the checksum; *h the header. */
static kz_status check_frame(const uint8_t *b, size_t n_bytes, const char *name, header *h) {
    if (n_bytes < sizeof MAGIC || memcmp(b, MAGIC, sizeof MAGIC) != 0) {
        return bad(name, "not a kztts voice file (no KZVOICE magic)");
    }
    if (n_bytes < 12) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: truncated voice file: %zu bytes, the header needs %d", name,
                            n_bytes, KZ_VOICE_FILE_HEADER_BYTES);
    }
    uint32_t version;
    get(&version, b, 8, 4);
    kz_status st = check_version(name, version);
    if (st != KZ_OK) {
        return st;
    }
    if (n_bytes < KZ_VOICE_FILE_HEADER_BYTES) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: truncated voice file: %zu bytes, the header needs %d", name,
                            n_bytes, KZ_VOICE_FILE_HEADER_BYTES);
    }
    *h = read_header(b);
    if ((st = check_header(name, h)) != KZ_OK) {
        return st;
    }
    const size_t want = file_bytes_of(h);
    if (n_bytes != want) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            n_bytes < want ? "%s: truncated voice file: %zu bytes, its header "
                                             "says %zu"
                                           : "%s: %zu bytes where its header says %zu "
                                             "(trailing data)",
                            name, n_bytes, want);
    }
    uint32_t stored, computed = kz_voice_file_crc32(0, b, n_bytes - 4);
    get(&stored, b, n_bytes - 4, 4);
    if (stored != computed) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: checksum mismatch (stored 0x%08x, contents give 0x%08x): the "
                            "file is damaged",
                            name, stored, computed);
    }
    return KZ_OK;
}

kz_status kz_voice_file_parse(const uint8_t *bytes, size_t n_bytes, const char *name,
                              kz_voice **out) {
    *out = NULL;
    header h;
    kz_status st = check_frame(bytes, n_bytes, name, &h);
    if (st != KZ_OK) {
        return st;
    }
    kz_voice *v = kz_voice_file_alloc(h.enc_dim, h.n_ref_frames, h.n_codebooks, h.text_bytes);
    if (!v) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for the voice", name);
    }
    v->format_version = (int32_t)h.version;
    memcpy(v->model_type, h.model_type, MODEL_TYPE_BYTES);
    v->sample_rate = h.sample_rate;
    v->fingerprint = h.fingerprint;
    v->ref_seconds = h.ref_seconds;
    v->icl = (h.flags & FLAG_ICL) != 0;
    size_t at = KZ_VOICE_FILE_HEADER_BYTES;
    const size_t n_codes = (size_t)h.n_ref_frames * (size_t)h.n_codebooks;
    get(v->xvector, bytes, at, 4 * (size_t)h.enc_dim);
    at += 4 * (size_t)h.enc_dim;
    if (n_codes) {
        get(v->ref_codes, bytes, at, 4 * n_codes);
    }
    at += 4 * n_codes;
    st = check_values(name, v);
    st = st == KZ_OK ? check_text(name, bytes + at, h.text_bytes) : st;
    if (st != KZ_OK) {
        free(v);
        return st;
    }
    get(v->ref_text, bytes, at, h.text_bytes); // the NUL after it is the allocation's zero
    *out = v;
    return KZ_OK;
}

/* ---- reading and writing files ----------------------------------------------------------- */

kz_status kz_voice_file_read(const char *path, kz_voice **out) {
    *out = NULL;
    int fd;
    uint64_t n_bytes;
    kz_status st = kz_regular_file_open(path, &fd, &n_bytes);
    if (st != KZ_OK) {
        return st;
    }
    if (n_bytes > KZ_VOICE_FILE_MAX_BYTES) {
        close(fd);
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: %llu bytes is larger than any voice file (at most %zu)", path,
                            (unsigned long long)n_bytes, KZ_VOICE_FILE_MAX_BYTES);
    }
    uint8_t *bytes = malloc(n_bytes ? (size_t)n_bytes : 1);
    size_t got = 0;
    while (bytes && got < n_bytes) {
        ssize_t r = read(fd, bytes + got, (size_t)n_bytes - got);
        if (r <= 0) {
            break; // a file shrunk under us is parsed as what was read: a truncated one
        }
        got += (size_t)r;
    }
    close(fd);
    st = bytes ? kz_voice_file_parse(bytes, got, path, out)
               : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", path);
    free(bytes);
    return st;
}

static void put(uint8_t *dst, size_t *at, const void *src, size_t n_bytes) {
    memcpy(dst + *at, src, n_bytes);
    *at += n_bytes;
}

kz_status kz_voice_file_encode(const kz_voice *v, uint8_t **bytes, size_t *n_bytes) {
    *bytes = NULL;
    *n_bytes = 0;
    const size_t text_bytes = v->icl ? strlen(v->ref_text) : 0;
    header h = {.version = KZ_VOICE_FILE_VERSION, .flags = v->icl ? FLAG_ICL : 0,
                .enc_dim = v->enc_dim, .sample_rate = v->sample_rate,
                .fingerprint = v->fingerprint, .ref_seconds = v->ref_seconds,
                .n_codebooks = v->icl ? v->n_codebooks : 0,
                .n_ref_frames = v->icl ? v->n_ref_frames : 0,
                .text_bytes = text_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)text_bytes};
    memcpy(h.model_type, v->model_type, MODEL_TYPE_BYTES);
    kz_status st = check_header("voice", &h);
    if (st != KZ_OK) {
        return st;
    }
    const size_t total = file_bytes_of(&h), n_codes = (size_t)h.n_ref_frames * h.n_codebooks;
    uint8_t *b = malloc(total);
    if (!b) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "voice: no memory for its file");
    }
    size_t at = 0;
    put(b, &at, MAGIC, sizeof MAGIC);
    put(b, &at, &h.version, 4);
    put(b, &at, &h.flags, 4);
    put(b, &at, h.model_type, MODEL_TYPE_BYTES);
    put(b, &at, &h.enc_dim, 4);
    put(b, &at, &h.sample_rate, 4);
    put(b, &at, &h.fingerprint, 8);
    put(b, &at, &h.ref_seconds, 8);
    put(b, &at, &h.n_codebooks, 4);
    put(b, &at, &h.n_ref_frames, 4);
    put(b, &at, &h.text_bytes, 4);
    put(b, &at, &h.reserved, 4);
    put(b, &at, v->xvector, 4 * (size_t)h.enc_dim);
    if (n_codes) {
        put(b, &at, v->ref_codes, 4 * n_codes);
    }
    put(b, &at, v->ref_text, h.text_bytes);
    const uint32_t crc = kz_voice_file_crc32(0, b, at);
    put(b, &at, &crc, 4);
    // Whatever is written must read back: the values go through the reader's own checks.
    kz_voice *check = NULL;
    st = kz_voice_file_parse(b, at, "voice", &check);
    free(check);
    if (st != KZ_OK) {
        free(b);
        return st;
    }
    *bytes = b;
    *n_bytes = at;
    return KZ_OK;
}

kz_status kz_voice_file_write(const kz_voice *v, const char *path) {
    uint8_t *bytes;
    size_t n_bytes;
    kz_status st = kz_voice_file_encode(v, &bytes, &n_bytes);
    if (st != KZ_OK) {
        return st;
    }
    kz_atomic_file f;
    if (kz_atomic_file_open(&f, path, 1 << 16) == KZ_OK) {
        kz_atomic_file_write(&f, bytes, n_bytes);
    }
    free(bytes);
    return kz_atomic_file_finish(&f);
}
