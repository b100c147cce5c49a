/*
 * decode.c - codes -> audio for a session, chunk by chunk through the audio
 * callback (kz_decode).
 *
 * Stream mode: reset the codec state once, decode chunk_frames frames at a
 * time and hand each chunk's samples to the callback as soon as it is ready.
 * Official mode (the reference's chunked_decode): windows of 300 frames, each
 * decoded from a fresh state with up to 25 frames of left context whose audio
 * is dropped. Both use the same decode_range primitive, so they agree wherever
 * the reference says they should. No NaN or Inf sample is delivered: a chunk that
 * has one ends the call with KZ_STATUS_BAD_MODEL (see synth.c).
 */
#include <stdlib.h>

#include "layers/vector.h"
#include "runtime/error.h"
#include "synth/session.h"

#define OFFICIAL_CHUNK 300
#define OFFICIAL_CONTEXT 25

typedef struct sink {
    kz_audio_fn fn;
    void *user;
    size_t n_frames; /* frames of the whole request */
} sink;

static kz_status check_codes(const kz_session *s, const int32_t *codes, size_t n_frames) {
    const kz_codec_config *c = &s->model->codec_cfg;
    size_t nq = (size_t)c->num_quantizers;
    for (size_t t = 0; t < n_frames; t++) {
        for (size_t q = 0; q < nq; q++) {
            int32_t v = codes[t * nq + q];
            if (v < 0 || v >= c->codebook_size) {
                return kz_error_set(KZ_STATUS_BAD_INPUT,
                                    "frame %zu, codebook %zu: code %d is outside [0, %d]", t, q, v,
                                    c->codebook_size - 1);
            }
        }
    }
    return KZ_OK;
}

/* Decodes frames [first, last) from a fresh state in chunks of `chunk`,
 * delivering the audio of frames >= deliver_from. */
static kz_status decode_range(kz_session *s, const int32_t *codes, size_t first, size_t last,
                              size_t deliver_from, size_t chunk, float *pcm, const sink *out) {
    const kz_codec_config *c = &s->model->codec_cfg;
    size_t nq = (size_t)c->num_quantizers, spf = (size_t)c->decode_upsample_rate;
    kz_codec_state_reset(&s->codec);
    for (size_t t = first; t < last; t += chunk) {
        size_t n = last - t < chunk ? last - t : chunk;
        kz_codec_decode(&s->model->decoder, &s->codec, &s->exec, codes + t * nq, n, pcm);
        s->codec_frames += (int64_t)n;
        if (t + n <= deliver_from) {
            continue;
        }
        size_t skip = t < deliver_from ? deliver_from - t : 0;
        kz_status st = kz_session_check_audio(pcm + skip * spf, (n - skip) * spf, 0,
                                              (int64_t)(t + skip), spf);
        if (st != KZ_OK) {
            return st;
        }
        bool is_last = t + n == out->n_frames;
        if (!out->fn(pcm + skip * spf, (n - skip) * spf, (int64_t)(t + skip), is_last, out->user)) {
            return kz_error_set(KZ_STATUS_CANCELLED, "cancelled by the audio callback at frame %zu",
                                t + skip);
        }
    }
    return KZ_OK;
}

static kz_status decode_official(kz_session *s, const int32_t *codes, size_t n_frames,
                                 size_t chunk, float *pcm, const sink *out) {
    kz_status st = KZ_OK;
    for (size_t start = 0; start < n_frames && st == KZ_OK; start += OFFICIAL_CHUNK) {
        size_t end = n_frames - start < OFFICIAL_CHUNK ? n_frames : start + OFFICIAL_CHUNK;
        // As the reference: context 25 if start - 25 > 0, else start (i.e. 0).
        size_t ctx = start > OFFICIAL_CONTEXT ? OFFICIAL_CONTEXT : start;
        st = decode_range(s, codes, start - ctx, end, start, chunk, pcm, out);
    }
    return st;
}

kz_status kz_session_check_audio(const float *pcm, size_t n, size_t lead, int64_t first_frame,
                                 size_t spf) {
    size_t bad = kz_vector_first_nonfinite(pcm, n);
    if (bad >= n) {
        return KZ_OK;
    }
    return kz_error_set(KZ_STATUS_BAD_MODEL,
                        "non-finite audio (NaN or Inf) at frame %lld: the computation "
                        "overflows with this model's weights",
                        (long long)first_frame + (long long)((bad > lead ? bad - lead : 0) / spf));
}

kz_status kz_session_decode(kz_session *s, const int32_t *codes, size_t n_frames,
                            const kz_decode_params *params, kz_audio_fn on_audio, void *user) {
    kz_status st = check_codes(s, codes, n_frames);
    if (st != KZ_OK) {
        return st;
    }
    size_t chunk = (size_t)params->chunk_frames;
    size_t spf = (size_t)s->model->codec_cfg.decode_upsample_rate;
    float *pcm = malloc(chunk * spf * sizeof *pcm);
    if (!pcm) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for %zu frames of audio",
                            chunk);
    }
    sink out = {.fn = on_audio, .user = user, .n_frames = n_frames};
    if (params->mode == KZ_DECODE_OFFICIAL) {
        st = decode_official(s, codes, n_frames, chunk, pcm, &out);
    } else {
        st = decode_range(s, codes, 0, n_frames, 0, chunk, pcm, &out);
    }
    free(pcm);
    return st;
}
