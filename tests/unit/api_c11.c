/*
 * api_c11.c - a strict C11 program (-std=c11 -pedantic-errors, linked against the shared
 * library, only kztts.h) that speaks with zero-initialised structs, as an embedder would.
 *
 * argv[1]: a CustomVoice model with speaker "ryan" and a tokenizer (the tiny checkpoint).
 *   - NULL params for the model and the session; a request {text, speaker} and
 *     nothing else: kz_synthesize_all gives audio (samples, 24 kHz, whole frames);
 *   - the same request through kz_synthesize (on_audio + user in the request): the same
 *     samples, is_last exactly once;
 *   - kz_request_default_params gives the same samples as the zeroed request;
 *   - kz_decode with zero-initialised params (plus on_audio) decodes the frames the
 *     synthesis reported through on_frame into the same samples.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kztts.h"

static int failures;

#define EXPECT(cond)                                                                        \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "api_c11:%d: %s failed (%s)\n", __LINE__, #cond, kz_last_error()); \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* What the streaming callbacks collected. */
typedef struct heard {
    float *pcm;
    size_t n_samples;
    int n_last;
    int32_t *codes; /* frame-major, 16 per frame */
    size_t n_frames;
} heard;

static bool on_audio(const float *pcm, size_t n, int64_t pos_frame, bool is_last, void *user) {
    heard *h = user;
    float *p = realloc(h->pcm, (h->n_samples + n + 1) * sizeof *p);
    (void)pos_frame;
    if (!p) {
        return false;
    }
    memcpy(p + h->n_samples, pcm, n * sizeof *pcm);
    h->pcm = p;
    h->n_samples += n;
    h->n_last += is_last;
    return true;
}

static bool on_frame(const int32_t *codes, int32_t n_codebooks, int64_t pos_frame, void *user) {
    heard *h = user;
    int32_t *p = realloc(h->codes, (h->n_frames + 1) * (size_t)n_codebooks * sizeof *p);
    if (!p || n_codebooks != 16 || pos_frame != (int64_t)h->n_frames) {
        free(p);
        h->codes = NULL;
        return false;
    }
    memcpy(p + h->n_frames * 16, codes, 16 * sizeof *codes);
    h->codes = p;
    h->n_frames++;
    return true;
}

static bool same(const float *a, size_t n_a, const float *b, size_t n_b) {
    return n_a == n_b && (n_a == 0 || memcmp(a, b, n_a * sizeof *a) == 0);
}

static bool finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            return false;
        }
    }
    return true;
}

static void speak(kz_model *m, kz_session *s, const kz_request *zeroed) {
    kz_audio audio;
    EXPECT(kz_synthesize_all(s, zeroed, &audio) == KZ_OK);
    EXPECT(audio.n_samples > 0 && audio.sample_rate == 24000);
    EXPECT(audio.n_samples % (size_t)kz_model_samples_per_frame(m) == 0);
    EXPECT(finite(audio.samples, audio.n_samples));

    heard h = {0};
    kz_request r = *zeroed;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = &h;
    EXPECT(kz_synthesize(s, &r) == KZ_OK);
    EXPECT(h.n_last == 1 && h.codes != NULL);
    EXPECT(same(h.pcm, h.n_samples, audio.samples, audio.n_samples));

    kz_request d;
    kz_request_default_params(m, &d);
    d.text = zeroed->text;
    d.token_ids = zeroed->token_ids;
    d.n_token_ids = zeroed->n_token_ids;
    d.speaker = zeroed->speaker;
    kz_audio again;
    EXPECT(kz_synthesize_all(s, &d, &again) == KZ_OK);
    EXPECT(same(again.samples, again.n_samples, audio.samples, audio.n_samples));
    kz_audio_free(&again);

    heard dec = {0};
    kz_decode_params dp = {0};
    dp.on_audio = on_audio;
    dp.user = &dec;
    EXPECT(h.codes && kz_decode(s, h.codes, h.n_frames, &dp) == KZ_OK);
    EXPECT(dec.n_last == 1 && same(dec.pcm, dec.n_samples, audio.samples, audio.n_samples));
    free(dec.pcm);
    free(h.pcm);
    free(h.codes);
    kz_audio_free(&audio);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: api_c11 MODEL\n");
        return 2;
    }
    EXPECT(kz_abi_version() == KZ_ABI_VERSION);
    kz_model *m = NULL;
    kz_session *s = NULL;
    EXPECT(kz_model_load(argv[1], NULL, &m) == KZ_OK);
    EXPECT(m && kz_session_new(m, NULL, &s) == KZ_OK);
    if (m && s) {
        kz_request r = {0};
        r.text = "Hello, I am kztts.";
        r.speaker = "ryan";
        speak(m, s, &r);
    }
    kz_session_free(s);
    kz_model_free(m);
    if (failures) {
        fprintf(stderr, "api_c11: %d failure(s)\n", failures);
        return 1;
    }
    printf("api_c11: ok\n");
    return 0;
}
