/*
 * test_voice_file.c - the .kzvoice format (src/io/voice_file.c) and the public voice file
 * calls (kz_voice_save, kz_voice_load, kz_voice_get_info, kz_voice_free).
 *
 * Dataflow: a small ICL voice and an x-vector-only voice built in memory
 *   -> round trip through bytes and through files (every field and value back, the bytes
 *      of a re-encode identical)
 *   -> each header field, value and the checksum damaged in turn (the checksum fixed up
 *      where the field check is what is tested) -> parse: KZ_STATUS_BAD_INPUT and the
 *      exact message
 *   -> every truncation of the file -> the message of the stage it stops at
 *   -> saves that cannot succeed (a missing folder, a directory in the way) leave nothing
 *   -> the public calls' argument checks.
 */
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/voice_file.h"
#include "kztts.h"
#include "runtime/error.h"
#include "test.h"

static char dir[] = "/tmp/kz_test_voice_XXXXXX";
static const char TEXT[] = "H\xc3\xa9llo w\xc3\xb6rld, this is the reference.";

static kz_voice *make_voice(bool icl) {
    kz_voice *v = kz_voice_file_alloc(8, icl ? 3 : 0, icl ? 4 : 0, icl ? strlen(TEXT) : 0);
    memcpy(v->model_type, "base", 5);
    v->sample_rate = 24000;
    v->fingerprint = 0x0123456789abcdefull;
    v->ref_seconds = 0.2;
    v->icl = icl;
    for (int i = 0; i < 8; i++) {
        v->xvector[i] = 0.25f * (float)i - 1.0f;
    }
    for (int i = 0; icl && i < 12; i++) {
        v->ref_codes[i] = i * 1000 + (i == 11 ? 54535 : 7); // 65535 the last: the top of range
    }
    if (icl) {
        memcpy(v->ref_text, TEXT, strlen(TEXT));
    }
    return v;
}

static void check_same(const kz_voice *a, const kz_voice *b) {
    CHECK_EQ_INT(a->format_version, b->format_version);
    CHECK(strcmp(a->model_type, b->model_type) == 0);
    CHECK_EQ_INT(a->enc_dim, b->enc_dim);
    CHECK(a->fingerprint == b->fingerprint);
    CHECK_EQ_INT(a->sample_rate, b->sample_rate);
    CHECK(a->ref_seconds == b->ref_seconds);
    CHECK(a->icl == b->icl);
    CHECK_EQ_INT(a->n_codebooks, b->n_codebooks);
    CHECK_EQ_INT(a->n_ref_frames, b->n_ref_frames);
    CHECK(memcmp(a->xvector, b->xvector, sizeof(float) * (size_t)a->enc_dim) == 0);
    const size_t n_codes = (size_t)a->n_ref_frames * (size_t)a->n_codebooks;
    CHECK(n_codes == 0 || memcmp(a->ref_codes, b->ref_codes, sizeof(int32_t) * n_codes) == 0);
    CHECK(strcmp(a->ref_text, b->ref_text) == 0);
}

static void test_round_trip(bool icl) {
    kz_voice *v = make_voice(icl);
    uint8_t *bytes;
    size_t n_bytes;
    CHECK(kz_voice_file_encode(v, &bytes, &n_bytes) == KZ_OK);
    CHECK_EQ_INT(n_bytes, 72 + 4 * 8 + (icl ? 4 * 12 + strlen(TEXT) : 0) + 4);
    kz_voice *back = NULL;
    CHECK(kz_voice_file_parse(bytes, n_bytes, "mem", &back) == KZ_OK);
    if (back) {
        check_same(v, back);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/%s.kzvoice", dir, icl ? "icl" : "xvec");
    CHECK(kz_voice_save(v, path) == KZ_OK);
    kz_voice *loaded = NULL;
    CHECK(kz_voice_load(path, &loaded) == KZ_OK);
    if (loaded) {
        check_same(v, loaded);
        uint8_t *again;
        size_t n_again;
        CHECK(kz_voice_file_encode(loaded, &again, &n_again) == KZ_OK);
        CHECK(n_again == n_bytes && memcmp(again, bytes, n_bytes) == 0);
        free(again);
        kz_voice_info info;
        CHECK(kz_voice_get_info(loaded, &info) == KZ_OK);
        CHECK_EQ_INT(info.format_version, 1);
        CHECK(info.icl == icl);
        CHECK_EQ_INT(info.xvector_dim, 8);
        CHECK_EQ_INT(info.n_ref_frames, icl ? 3 : 0);
        CHECK_EQ_INT(info.n_codebooks, icl ? 4 : 0);
        CHECK(info.ref_seconds == 0.2);
        CHECK(strcmp(info.ref_text, icl ? TEXT : "") == 0);
        CHECK(strcmp(info.model_type, "base") == 0);
        CHECK(info.fingerprint == 0x0123456789abcdefull);
    }
    kz_voice_free(loaded);
    kz_voice_free(back);
    kz_voice_free(v);
    free(bytes);
}

/* ---- damaged files ---------------------------------------------------------------------- */

static uint8_t *good;
static size_t n_good;

static void fix_crc(uint8_t *b, size_t n) {
    uint32_t crc = kz_voice_file_crc32(0, b, n - 4);
    memcpy(b + n - 4, &crc, 4);
}

/* Parses b and expects KZ_STATUS_BAD_INPUT with exactly "mem: " + want. */
static void expect_error(const uint8_t *b, size_t n, const char *want, int line) {
    kz_voice *v = (kz_voice *)1;
    kz_error_clear();
    kz_status st = kz_voice_file_parse(b, n, "mem", &v);
    char full[512];
    snprintf(full, sizeof full, "mem: %s", want);
    CHECK_MSG(st == KZ_STATUS_BAD_INPUT && v == NULL && strcmp(kz_error_get(), full) == 0,
              "line %d: status %d, message '%s', want '%s'", line, (int)st, kz_error_get(), full);
}

/* good with n_value bytes at offset replaced (and the checksum fixed when fix). */
static void damaged(size_t offset, const void *value, size_t n_value, bool fix, const char *want,
                    int line) {
    uint8_t *b = malloc(n_good);
    memcpy(b, good, n_good);
    memcpy(b + offset, value, n_value);
    if (fix) {
        fix_crc(b, n_good);
    }
    expect_error(b, n_good, want, line);
    free(b);
}

#define FIELD(offset, type, value, want)                                                     \
    do {                                                                                     \
        type v_ = (value);                                                                   \
        damaged(offset, &v_, sizeof v_, true, want, __LINE__);                               \
    } while (0)

static void test_bad_header(void) {
    damaged(0, "KZVOICF", 7, true, "not a kztts voice file (no KZVOICE magic)", __LINE__);
    FIELD(8, uint32_t, 2, "voice file format version 2 was made by a newer kztts (this one "
                          "reads version 1)");
    FIELD(8, uint32_t, 0, "voice file format version 0 does not exist");
    FIELD(12, uint32_t, 3, "unknown flags 0x3");
    damaged(16, "Base", 4, true, "model_type is not 1 to 15 characters of a-z, 0-9, _", __LINE__);
    damaged(16, "\0ase", 4, true, "model_type is not 1 to 15 characters of a-z, 0-9, _",
            __LINE__);
    damaged(21, "x", 1, true, "model_type is not 1 to 15 characters of a-z, 0-9, _", __LINE__);
    damaged(16, "base_base_base_b", 16, true,
            "model_type is not 1 to 15 characters of a-z, 0-9, _", __LINE__);
    FIELD(32, int32_t, 0, "enc_dim 0 out of range [1, 8192]");
    FIELD(32, int32_t, 8193, "enc_dim 8193 out of range [1, 8192]");
    FIELD(32, int32_t, -5, "enc_dim -5 out of range [1, 8192]");
    FIELD(36, int32_t, 7999, "sample_rate 7999 out of range [8000, 384000]");
    FIELD(40, uint64_t, 0, "fingerprint is 0 (no model made this voice)");
    FIELD(48, double, NAN, "ref_seconds nan out of range (0, 600]");
    FIELD(48, double, 0.0, "ref_seconds 0 out of range (0, 600]");
    FIELD(48, double, 600.5, "ref_seconds 600.5 out of range (0, 600]");
    FIELD(56, int32_t, 0, "n_codebooks 0 out of range [1, 64]");
    FIELD(56, int32_t, 65, "n_codebooks 65 out of range [1, 64]");
    FIELD(60, int32_t, 0, "n_ref_frames 0 out of range [1, 7500]");
    FIELD(60, int32_t, 7501, "n_ref_frames 7501 out of range [1, 7500]");
    FIELD(60, int32_t, INT32_MIN, "n_ref_frames -2147483648 out of range [1, 7500]");
    FIELD(64, uint32_t, 0, "transcript of 0 bytes out of range [1, 1048576] for an ICL voice");
    FIELD(64, uint32_t, UINT32_MAX,
          "transcript of 4294967295 bytes out of range [1, 1048576] for an ICL voice");
    FIELD(68, uint32_t, 1, "reserved field is 1 (must be 0)");
    FIELD(12, uint32_t, 0, "an x-vector-only voice has n_codebooks 4, n_ref_frames 3, "
                           "text_bytes 37 (each must be 0)");
    // Sizes that pass their ranges but not the file's length.
    char want[128];
    snprintf(want, sizeof want, "truncated voice file: %zu bytes, its header says %zu", n_good,
             n_good + 4);
    FIELD(32, int32_t, 9, want);
    snprintf(want, sizeof want, "%zu bytes where its header says %zu (trailing data)", n_good,
             n_good - 12);
    FIELD(56, int32_t, 3, want);
}

static void test_bad_values(void) {
    const size_t x = 72, codes = x + 32, text = codes + 48;
    FIELD(x + 12, float, INFINITY, "x-vector value 3 is not finite");
    FIELD(x + 28, float, NAN, "x-vector value 7 is not finite");
    FIELD(codes + 20, int32_t, -1, "code -1 at frame 1, codebook 1 out of range [0, 65535]");
    FIELD(codes + 44, int32_t, 65536, "code 65536 at frame 2, codebook 3 out of range [0, 65535]");
    damaged(text + 5, "\0", 1, true, "NUL byte at byte 5 of the transcript", __LINE__);
    damaged(text + 1, "\xc3\x28", 2, true, "invalid UTF-8 at byte 1 of the transcript", __LINE__);
    damaged(text + 36, "\xe2", 1, true, "invalid UTF-8 at byte 36 of the transcript", __LINE__);
    damaged(text, "\xed\xa0\x80", 3, true, "invalid UTF-8 at byte 0 of the transcript", __LINE__);
    // Without the fix-up, any changed byte is the checksum's to catch.
    uint32_t stored;
    memcpy(&stored, good + n_good - 4, 4);
    for (size_t at = 8; at < n_good; at += 7) {
        uint8_t *b = malloc(n_good);
        memcpy(b, good, n_good);
        b[at] ^= 0x10;
        kz_voice *v = NULL;
        kz_error_clear();
        CHECK(kz_voice_file_parse(b, n_good, "mem", &v) == KZ_STATUS_BAD_INPUT && !v);
        if (at >= 72) { // past the header's range checks: the checksum speaks
            CHECK_STR_CONTAINS(kz_error_get(), "checksum mismatch");
        }
        free(b);
    }
    char want[128];
    uint32_t computed = kz_voice_file_crc32(0, good, n_good - 4);
    snprintf(want, sizeof want, "checksum mismatch (stored 0x%08x, contents give 0x%08x): the "
             "file is damaged", computed ^ 1u, computed);
    uint32_t flipped = stored ^ 1u;
    damaged(n_good - 4, &flipped, 4, false, want, __LINE__);
}

static void test_truncations(void) {
    for (size_t n = 0; n < n_good; n++) {
        char want[128];
        if (n < 8) {
            snprintf(want, sizeof want, "not a kztts voice file (no KZVOICE magic)");
        } else if (n < 72) {
            snprintf(want, sizeof want, "truncated voice file: %zu bytes, the header needs 72", n);
        } else {
            snprintf(want, sizeof want, "truncated voice file: %zu bytes, its header says %zu", n,
                     n_good);
        }
        expect_error(good, n, want, (int)n);
    }
}

/* ---- saving and loading files ----------------------------------------------------------- */

static size_t entries_in(const char *path) {
    DIR *d = opendir(path);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void test_save_failures(void) {
    char sub[256], path[300];
    snprintf(sub, sizeof sub, "%s/save", dir);
    CHECK(mkdir(sub, 0755) == 0);
    kz_voice *v = make_voice(true);
    snprintf(path, sizeof path, "%s/missing/v.kzvoice", sub);
    kz_error_clear();
    CHECK(kz_voice_save(v, path) == KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_error_get(), path);
    snprintf(path, sizeof path, "%s/dir.kzvoice", sub);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(kz_voice_save(v, path) == KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_error_get(), "is a directory");
    CHECK_EQ_INT(entries_in(sub), 1); // the directory in the way, and nothing else
    rmdir(path);
    // A voice that breaks the format's rules is refused before any file is made.
    v->enc_dim = 0;
    snprintf(path, sizeof path, "%s/bad.kzvoice", sub);
    CHECK(kz_voice_save(v, path) == KZ_STATUS_BAD_INPUT);
    CHECK_EQ_INT(entries_in(sub), 0);
    v->enc_dim = 8;
    // A save over an existing file replaces it whole and leaves no temporary file.
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    CHECK(kz_voice_save(v, path) == KZ_OK);
    CHECK_EQ_INT(entries_in(sub), 1);
    kz_voice *back = NULL;
    CHECK(kz_voice_load(path, &back) == KZ_OK);
    kz_voice_free(back);
    unlink(path);
    rmdir(sub);
    kz_voice_free(v);
}

static void test_load_errors(void) {
    kz_voice *v = (kz_voice *)1;
    char path[256];
    snprintf(path, sizeof path, "%s/absent.kzvoice", dir);
    CHECK(kz_voice_load(path, &v) == KZ_STATUS_IO && v == NULL);
    CHECK_STR_CONTAINS(kz_error_get(), path);
    v = (kz_voice *)1;
    CHECK(kz_voice_load(dir, &v) == KZ_STATUS_IO && v == NULL);
    CHECK_STR_CONTAINS(kz_error_get(), "not a regular file");
    snprintf(path, sizeof path, "%s/short.kzvoice", dir);
    FILE *f = fopen(path, "wb");
    fwrite(good, 1, 40, f);
    fclose(f);
    CHECK(kz_voice_load(path, &v) == KZ_STATUS_BAD_INPUT && v == NULL);
    char want[400];
    snprintf(want, sizeof want, "%s: truncated voice file: 40 bytes, the header needs 72", path);
    CHECK_MSG(strcmp(kz_error_get(), want) == 0, "'%s'", kz_error_get());
    unlink(path);
}

static void test_api_arguments(void) {
    kz_voice *v = (kz_voice *)1;
    CHECK(kz_voice_load(NULL, &v) == KZ_STATUS_INVALID_ARGUMENT && v == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_load");
    CHECK(kz_voice_load("x", NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_voice_save(NULL, "x") == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_save");
    kz_voice_info info = {.icl = true};
    CHECK(kz_voice_get_info(NULL, &info) == KZ_STATUS_INVALID_ARGUMENT && !info.icl);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_get_info");
    CHECK(kz_voice_check(NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_check");
    kz_voice_params p;
    kz_voice_default_params(&p);
    CHECK(p.ref_text == NULL && !p.xvector_only && p.max_seconds == 0 && p.n_threads == 0);
    v = (kz_voice *)1;
    CHECK(kz_voice_from_file(NULL, "a.wav", &p, &v) == KZ_STATUS_INVALID_ARGUMENT && !v);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_from_file");
    const float pcm[4] = {0};
    CHECK(kz_voice_from_samples(NULL, pcm, 4, 24000, 1, &p, NULL) ==
          KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_voice_from_samples");
    int32_t *codes = (int32_t *)1;
    size_t n_frames = 9;
    int32_t n_books = 9;
    CHECK(kz_encode_file(NULL, "a.wav", NULL, &codes, &n_frames, &n_books) ==
          KZ_STATUS_INVALID_ARGUMENT);
    CHECK(codes == NULL && n_frames == 0 && n_books == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_encode_file");
    CHECK(kz_encode(NULL, pcm, 4, 24000, 1, NULL, &codes, &n_frames, NULL) ==
          KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_encode");
    kz_voice_free(NULL);
    kz_codes_free(NULL);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip(true);
    test_round_trip(false);
    kz_voice *v = make_voice(true);
    CHECK(kz_voice_file_encode(v, &good, &n_good) == KZ_OK);
    kz_voice_free(v);
    CHECK(kz_voice_file_crc32(0, "123456789", 9) == 0xCBF43926u); // the CRC-32 check value
    test_bad_header();
    test_bad_values();
    test_truncations();
    test_save_failures();
    test_load_errors();
    test_api_arguments();
    free(good);
    char path[256];
    snprintf(path, sizeof path, "%s/icl.kzvoice", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/xvec.kzvoice", dir);
    unlink(path);
    CHECK_EQ_INT(entries_in(dir), 0);
    rmdir(dir);
    return test_main_result("test_voice_file");
}
