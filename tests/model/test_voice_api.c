/*
 * test_voice_api.c - the voice and encode C API on the tiny Base checkpoint (argv[1]) and a
 * CustomVoice one (argv[2]).
 *
 * Dataflow: 2.5 s of seeded speech-like samples at 24 kHz mono, and the same signal as
 *   interleaved stereo -> kz_voice_from_samples (ICL, x-vector only; 1 and 3 threads) ->
 *   kz_voice_get_info fields, kz_voice_check against its model, the file bytes of a save
 *   identical for every thread count, save/load round trip; kz_encode -> the voice's codes;
 *   stereo with both channels equal -> the mono voice's x-vector and codes; then every bad
 *   parameter -> its status and a message naming the function, and a CustomVoice model ->
 *   KZ_STATUS_UNSUPPORTED.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/voice_file.h"
#include "kztts.h"
#include "test.h"

enum { RATE = 24000 };
static const char TEXT[] = "What the reference recording says.";

static kz_voice *make(const kz_model *m, const float *x, size_t n, int channels, bool icl,
                      int threads) {
    kz_voice_params p;
    kz_voice_default_params(&p);
    p.ref_text = icl ? TEXT : NULL;
    p.xvector_only = !icl;
    p.n_threads = threads;
    kz_voice *v = NULL;
    kz_status st = kz_voice_from_samples(m, x, n, RATE, channels, &p, &v);
    CHECK_MSG(st == KZ_OK && v, "kz_voice_from_samples: %s", kz_last_error());
    return v;
}

static int frames_seen;

/* on_frame: copies the frame's 16 codes into user (frames_seen counts them). */
static bool keep_frame(const int32_t *codes, int32_t n_codebooks, int64_t pos, void *user) {
    if (pos >= 0 && pos < 8 && n_codebooks == 16) {
        memcpy((int32_t *)user + pos * 16, codes, 16 * sizeof *codes);
    }
    frames_seen++;
    return true;
}

static void file_bytes(const kz_voice *v, uint8_t **bytes, size_t *n) {
    CHECK(kz_voice_file_encode(v, bytes, n) == KZ_OK);
}

/* How the voices were made (kz_experimental_voice_get_stats): both encoders' FLOP for
 * the ICL voice, the speaker encoder's alone for the x-vector one, nothing read from a file,
 * the threads asked for; a voice decoded from bytes has none. */
static void test_stats(const kz_voice *icl, const kz_voice *xv, const uint8_t *bytes, size_t n) {
    kz_experimental_voice_stats a, b;
    CHECK(kz_experimental_voice_get_stats(icl, &a) == KZ_OK);
    CHECK(kz_experimental_voice_get_stats(xv, &b) == KZ_OK);
    CHECK(a.xvector_flop > 0 && a.encode_flop > 0 && a.n_threads == 1);
    CHECK(a.read_ms == 0 && a.resample_ms >= 0 && a.xvector_ms >= 0 && a.encode_ms >= 0);
    CHECK(a.total_ms > 0 && a.total_ms >= a.resample_ms + a.xvector_ms + a.encode_ms);
    CHECK(b.xvector_flop == a.xvector_flop && b.encode_flop == 0 && b.n_threads >= 1);
    kz_voice *loaded = NULL;
    CHECK(kz_voice_file_parse(bytes, n, "bytes", &loaded) == KZ_OK && loaded);
    if (loaded) {
        CHECK(kz_experimental_voice_get_stats(loaded, &b) == KZ_OK);
        CHECK(b.total_ms == 0 && b.xvector_flop == 0 && b.encode_flop == 0 && b.n_threads == 0);
    }
    kz_voice_free(loaded);
}

static void test_voices(const kz_model *m, const float *x, size_t n) {
    kz_voice *icl = make(m, x, n, 1, true, 1), *icl3 = make(m, x, n, 1, true, 3);
    kz_voice *xv = make(m, x, n, 1, false, 0);
    if (!icl || !icl3 || !xv) {
        return;
    }
    kz_voice_info i;
    CHECK(kz_voice_get_info(icl, &i) == KZ_OK);
    CHECK(i.icl && i.format_version == 1 && i.xvector_dim == 32 && i.n_codebooks == 16);
    CHECK_EQ_INT(i.n_ref_frames, (n + 1919) / 1920);
    CHECK(fabs(i.ref_seconds - (double)n / RATE) < 1e-9 && strcmp(i.ref_text, TEXT) == 0);
    CHECK(strcmp(i.model_type, "base") == 0 && i.fingerprint != 0);
    CHECK_MSG(kz_voice_check(m, icl) == KZ_OK, "%s", kz_last_error());
    CHECK_MSG(kz_voice_check(m, xv) == KZ_OK, "%s", kz_last_error());
    uint8_t *a, *b;
    size_t na, nb;
    file_bytes(icl, &a, &na);
    file_bytes(icl3, &b, &nb);
    CHECK_MSG(na == nb && memcmp(a, b, na) == 0, "1 and 3 threads give different voices");
    free(b);
    CHECK(memcmp(icl->xvector, xv->xvector, sizeof(float) * 32) == 0);
    test_stats(icl, xv, a, na);
    int32_t *codes = NULL, n_books = 0;
    size_t n_frames = 0;
    CHECK_MSG(kz_encode(m, x, n, RATE, 1, NULL, &codes, &n_frames, &n_books) == KZ_OK, "%s",
              kz_last_error());
    CHECK(n_frames == (size_t)icl->n_ref_frames && n_books == 16 && codes &&
          memcmp(codes, icl->ref_codes, n_frames * 16 * sizeof *codes) == 0);
    kz_codes_free(codes);
    // Stereo with equal channels: the channel mean is the mono signal.
    float *st = malloc(2 * n * sizeof *st);
    for (size_t k = 0; k < n; k++) {
        st[2 * k] = st[2 * k + 1] = x[k];
    }
    kz_voice *stereo = make(m, st, n, 2, true, 2);
    if (stereo) {
        file_bytes(stereo, &b, &nb);
        CHECK_MSG(na == nb && memcmp(a, b, na) == 0, "stereo of equal channels differs from mono");
        free(b);
    }
    free(st);
    free(a);
    kz_voice_free(stereo);
    kz_voice_free(icl);
    kz_voice_free(icl3);
    kz_voice_free(xv);
}

static void expect(kz_status got, kz_status want, const char *needle, int line) {
    CHECK_MSG(got == want && strstr(kz_last_error(), needle),
              "line %d: status %d (want %d), message '%s' (want '%s')", line, (int)got,
              (int)want, kz_last_error(), needle);
}

static void test_bad_params(const kz_model *m, const kz_model *cv, const float *x, size_t n) {
    kz_voice *v = NULL;
    kz_voice_params p;
    kz_voice_default_params(&p);
    const char *fn = "kz_voice_from_samples";
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT,
           "ref_text (the reference's transcript) is required", __LINE__);
    p.ref_text = "";
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT, fn,
           __LINE__);
    p.ref_text = "bad \xff utf-8";
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_BAD_INPUT,
           "invalid UTF-8 in the reference transcript at byte 4", __LINE__);
    p.ref_text = TEXT;
    p.max_seconds = 0.5f;
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT,
           "max_seconds 0.5", __LINE__);
    p.max_seconds = 0;
    p.n_threads = 257;
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT,
           "n_threads 257", __LINE__);
    p.n_threads = 0;
    expect(kz_voice_from_samples(m, x, n, 7999, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT,
           "sample_rate 7999", __LINE__);
    expect(kz_voice_from_samples(m, x, n, RATE, 0, &p, &v), KZ_STATUS_INVALID_ARGUMENT,
           "channels 0", __LINE__);
    expect(kz_voice_from_samples(m, NULL, n, RATE, 1, &p, &v), KZ_STATUS_INVALID_ARGUMENT, fn,
           __LINE__);
    expect(kz_voice_from_samples(m, x, RATE / 2, RATE, 1, &p, &v), KZ_STATUS_BAD_INPUT,
           "at least 1 s", __LINE__);
    p.max_seconds = 2;
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &v), KZ_STATUS_BAD_INPUT, "2", __LINE__);
    p.max_seconds = 0;
    expect(kz_voice_from_samples(cv, x, n, RATE, 1, &p, &v), KZ_STATUS_UNSUPPORTED,
           "voice cloning needs a Base model", __LINE__);
    int32_t *codes = NULL, n_books = 0;
    size_t n_frames = 0;
    expect(kz_encode(cv, x, n, RATE, 1, NULL, &codes, &n_frames, &n_books),
           KZ_STATUS_UNSUPPORTED, "needs a Base model or a codec", __LINE__);
    CHECK(v == NULL && codes == NULL);
}

/* A Base model loaded with skip_voice_encoders speaks with the voices the full load made
 * (same fingerprint), with the same codes, and refuses to make one, saying why. */
static void test_voice_files_only(const char *path, const kz_model *full, const float *x,
                                  size_t n) {
    kz_model_params mp;
    kz_model_default_params(&mp);
    CHECK(!mp.skip_voice_encoders);
    mp.skip_voice_encoders = true;
    kz_model *m = NULL;
    CHECK_MSG(kz_model_load(path, &mp, &m) == KZ_OK, "%s", kz_last_error());
    kz_voice *v = make(full, x, n, 1, true, 1), *made = NULL;
    if (!m || !v) {
        goto done;
    }
    CHECK_MSG(kz_voice_check(m, v) == KZ_OK, "%s", kz_last_error());
    kz_voice_params p;
    kz_voice_default_params(&p);
    p.xvector_only = true;
    expect(kz_voice_from_samples(m, x, n, RATE, 1, &p, &made), KZ_STATUS_UNSUPPORTED,
           "skip_voice_encoders", __LINE__);
    CHECK(made == NULL);
    CHECK_STR_CONTAINS(kz_model_describe(m), "voice encoders: not loaded");
    int32_t codes[2][8 * 16];
    const kz_model *models[2] = {full, m};
    for (int i = 0; i < 2; i++) {
        kz_session *s = NULL;
        CHECK_MSG(kz_session_new(models[i], NULL, &s) == KZ_OK, "%s", kz_last_error());
        kz_request r = {.text = "Hello there.", .voice = v, .greedy = true, .frames = 8};
        kz_audio a = {0};
        frames_seen = 0;
        r.on_frame = keep_frame;
        r.user = codes[i];
        CHECK_MSG(s && kz_synthesize_all(s, &r, &a) == KZ_OK, "%s", kz_last_error());
        CHECK_EQ_INT(frames_seen, 8);
        kz_audio_free(&a);
        kz_session_free(s);
    }
    CHECK(memcmp(codes[0], codes[1], sizeof codes[0]) == 0);
done:
    kz_voice_free(v);
    kz_model_free(m);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_voice_api TINY_BASE TINY_CUSTOM_VOICE\n");
        return 2;
    }
    kz_model *m = NULL, *cv = NULL;
    CHECK_MSG(kz_model_load(argv[1], NULL, &m) == KZ_OK, "%s", kz_last_error());
    CHECK_MSG(kz_model_load(argv[2], NULL, &cv) == KZ_OK, "%s", kz_last_error());
    const size_t n = RATE * 5 / 2;
    float *x = test_speech_like(n, RATE, 11);
    if (m && cv) {
        test_voices(m, x, n);
        test_bad_params(m, cv, x, n);
        test_voice_files_only(argv[1], m, x, n);
    }
    free(x);
    kz_model_free(m);
    kz_model_free(cv);
    return test_main_result("test_voice_api");
}
