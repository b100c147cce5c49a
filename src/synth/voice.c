/*
 * voice.c - cloned voices and codec codes from reference audio (see voice.h).
 *
 *   file or samples -> kz_audio_read_file (a file) -> kz_audio_prepare_reference: mono at
 *   the speaker encoder's rate (and for ICL at the codec's, when it differs), length and silence
 *   checked -> a transient pool of n_threads with m's kernel table (kz_exec)
 *   -> kz_speaker_encoder_run: x-vector [enc_dim]
 *   -> ICL: kz_codec_encoder_run: codes [n_frames, n_codebooks]; the transcript copied
 *   -> one kz_voice allocation (io/voice_file.h), tagged with the model's type, rate and
 *      weights fingerprint, and the stats of its making (each stage's wall time and the
 *      encoders' FLOP, kz_experimental_voice_get_stats).
 * kz_voice_fits compares a voice with a model field by field, so a voice made with another
 * model is refused with the one value that differs.
 */
#include "synth/voice.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio/audio_in.h"
#include "io/voice_file.h"
#include "model/model.h"
#include "runtime/error.h"
#include "runtime/threadpool.h"

enum { DEFAULT_MAX_SECONDS = 60 };

/* Mono reference audio at one rate. */
typedef struct mono {
    float *pcm;
    size_t n;
    int32_t rate;
} mono;

/* The reference as interleaved samples: a's own, or its file's (*owned then, caller frees). */
static kz_status source_samples(const kz_voice_audio *a, kz_voice_audio *out, float **owned) {
    *owned = NULL;
    *out = *a;
    if (!a->path) {
        return KZ_OK;
    }
    kz_status st = kz_audio_read_file(a->path, owned, &out->n_frames, &out->sample_rate,
                                      &out->channels);
    out->samples = *owned;
    return st;
}

/* a prepared at rate (mono, length and silence checked). */
static kz_status prepare(const kz_voice_audio *a, const kz_voice_params *p, int32_t rate,
                         mono *out) {
    const double max_s = p->max_seconds > 0 ? p->max_seconds : DEFAULT_MAX_SECONDS;
    out->rate = rate;
    kz_status st = kz_audio_prepare_reference(a->samples, a->n_frames, a->sample_rate,
                                              a->channels, rate, max_s, &out->pcm, &out->n);
    if (st != KZ_OK && a->path) { // the audio's problem, said of the file it came from
        char why[512];
        snprintf(why, sizeof why, "%s", kz_error_get());
        kz_error_set(st, "%s: %s", a->path, why);
    }
    return st;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The transient thread pool and kernel table the encoders run on. */
static kz_status exec_new(const kz_model *m, const kz_voice_params *p, kz_exec *e) {
    *e = (kz_exec){.k = m->kernels};
    return kz_pool_new(p->n_threads > 0 ? p->n_threads : kz_pool_default_threads(), &e->pool);
}

static kz_status cannot_clone(const kz_model *m) {
    const char *type = m->has_tts ? m->cfg.tts_model_type : "codec";
    if (strcmp(type, "base") != 0) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "voice cloning needs a Base model; %s is a %s model", m->path, type);
    }
    if (m->skip_voice_encoders) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s was loaded without its voice encoders "
                            "(kz_model_params.skip_voice_encoders): it speaks with voice files "
                            "only", m->path);
    }
    return kz_error_set(KZ_STATUS_UNSUPPORTED,
                        "%s: this Base model has no %s, so it cannot clone voices", m->path,
                        !m->speaker_encoder ? "speaker encoder (speaker_encoder.* tensors)"
                                            : "codec encoder (speech_tokenizer encoder.* tensors)");
}

static bool can_clone(const kz_model *m) {
    return m->has_tts && strcmp(m->cfg.tts_model_type, "base") == 0 && m->speaker_encoder &&
           m->codec_encoder;
}

/* The voice of the prepared audio: x-vector, and for ICL the codes and transcript. */
static kz_status build(const kz_model *m, const mono *spk, const mono *codec,
                       const kz_voice_params *p, kz_exec *e, kz_experimental_voice_stats *stats,
                       kz_voice **out) {
    int32_t *codes = NULL;
    size_t n_frames = 0;
    kz_status st = KZ_OK;
    double t0 = now_ms(), flop0 = e->flop;
    if (!p->xvector_only) {
        st = kz_codec_encoder_run(m->codec_encoder, codec->pcm, codec->n, e, &codes, &n_frames);
    }
    stats->encode_ms = now_ms() - t0;
    stats->encode_flop = e->flop - flop0;
    const int32_t n_books = p->xvector_only ? 0 : kz_codec_encoder_codebooks(m->codec_encoder);
    const size_t text_bytes = p->xvector_only ? 0 : strlen(p->ref_text);
    kz_voice *v = NULL;
    if (st == KZ_OK && n_frames > KZ_VOICE_MAX_FRAMES) {
        st = kz_error_set(KZ_STATUS_BAD_INPUT, "reference of %zu codec frames (at most %d)",
                          n_frames, KZ_VOICE_MAX_FRAMES);
    }
    if (st == KZ_OK && !(v = kz_voice_file_alloc(kz_speaker_encoder_dim(m->speaker_encoder),
                                                 (int32_t)n_frames, n_books, text_bytes))) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "no memory for the voice");
    }
    t0 = now_ms();
    flop0 = e->flop;
    st = st == KZ_OK ? kz_speaker_encoder_run(m->speaker_encoder, spk->pcm, spk->n, e,
                                              v->xvector)
                     : st;
    stats->xvector_ms = now_ms() - t0;
    stats->xvector_flop = e->flop - flop0;
    if (st == KZ_OK) {
        memcpy(v->model_type, "base", sizeof "base"); // can_clone: the only type that clones
        v->fingerprint = m->voice_fingerprint;
        v->sample_rate = m->codec_cfg.input_sample_rate;
        v->ref_seconds = (double)spk->n / spk->rate;
        v->icl = !p->xvector_only;
        if (v->icl) {
            memcpy(v->ref_codes, codes, sizeof *codes * n_frames * (size_t)n_books);
            memcpy(v->ref_text, p->ref_text, text_bytes);
        }
        *out = v;
        v = NULL;
    }
    free(v);
    free(codes);
    return st;
}

kz_status kz_voice_make(const kz_model *m, const kz_voice_audio *a, const kz_voice_params *p,
                        kz_voice **out) {
    *out = NULL;
    if (!can_clone(m)) {
        return cannot_clone(m);
    }
    kz_experimental_voice_stats stats = {0};
    const double t_start = now_ms();
    float *owned;
    kz_voice_audio src;
    kz_status st = source_samples(a, &src, &owned);
    const double t_read = now_ms();
    mono spk = {0}, codec = {0};
    st = st == KZ_OK ? prepare(&src, p, m->cfg.speaker_sample_rate, &spk) : st;
    if (st == KZ_OK && !p->xvector_only && m->codec_cfg.input_sample_rate != spk.rate) {
        st = prepare(&src, p, m->codec_cfg.input_sample_rate, &codec);
    }
    stats.read_ms = a->path ? t_read - t_start : 0;
    stats.resample_ms = now_ms() - t_read;
    free(owned);
    kz_exec e = {0};
    st = st == KZ_OK ? exec_new(m, p, &e) : st;
    stats.n_threads = e.pool ? kz_pool_threads(e.pool) : 0;
    st = st == KZ_OK ? build(m, &spk, codec.pcm ? &codec : &spk, p, &e, &stats, out) : st;
    kz_pool_free(e.pool);
    if (st == KZ_OK) {
        stats.total_ms = now_ms() - t_start;
        (*out)->stats = stats;
    }
    free(spk.pcm);
    free(codec.pcm);
    return st;
}

kz_status kz_voice_encode(const kz_model *m, const kz_voice_audio *a, const kz_voice_params *p,
                          int32_t **codes, size_t *n_frames, int32_t *n_codebooks) {
    *codes = NULL;
    *n_frames = 0;
    *n_codebooks = 0;
    if (m->has_tts && strcmp(m->cfg.tts_model_type, "base") != 0) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "encoding audio needs a Base model or a codec; %s is a %s model",
                            m->path, m->cfg.tts_model_type);
    }
    if (m->codec_of_tts) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s was loaded with codec_only (its codec decoder alone): it cannot "
                            "encode audio",
                            m->path);
    }
    if (!m->codec_encoder) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s has no codec encoder (speech_tokenizer encoder.* tensors), so it "
                            "cannot encode audio",
                            m->path);
    }
    float *owned;
    kz_voice_audio src;
    kz_status st = source_samples(a, &src, &owned);
    mono pcm = {0};
    st = st == KZ_OK ? prepare(&src, p, m->codec_cfg.input_sample_rate, &pcm) : st;
    free(owned);
    kz_exec e = {0};
    st = st == KZ_OK ? exec_new(m, p, &e) : st;
    st = st == KZ_OK ? kz_codec_encoder_run(m->codec_encoder, pcm.pcm, pcm.n, &e, codes, n_frames)
                     : st;
    if (st == KZ_OK) {
        *n_codebooks = kz_codec_encoder_codebooks(m->codec_encoder);
    }
    kz_pool_free(e.pool);
    free(pcm.pcm);
    return st;
}

/* The first code of v at or beyond size, as "frame F, codebook C: code X"; false if none. */
static bool code_beyond(const kz_voice *v, int32_t size, char *where, size_t n) {
    const size_t n_codes = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    for (size_t i = 0; i < n_codes; i++) {
        if (v->ref_codes[i] >= size) {
            snprintf(where, n, "frame %zu, codebook %zu: code %d", i / (size_t)v->n_codebooks,
                     i % (size_t)v->n_codebooks, v->ref_codes[i]);
            return true;
        }
    }
    return false;
}

kz_status kz_voice_fits(const kz_model *m, const kz_voice *v) {
    const char *type = m->has_tts ? m->cfg.tts_model_type : "codec";
    const char *why = "voice made for another model";
    if (strcmp(type, v->model_type) != 0) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: the voice is for a %s model, this is "
                            "a %s model", why, v->model_type, type);
    }
    if (v->enc_dim != m->cfg.talker.hidden_size) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: its x-vector has %d values, this "
                            "model's talker hidden_size is %d", why, v->enc_dim,
                            m->cfg.talker.hidden_size);
    }
    if (v->icl && v->n_codebooks != m->cfg.talker.num_code_groups) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: its codes have %d codebooks, this "
                            "model has %d code groups", why, v->n_codebooks,
                            m->cfg.talker.num_code_groups);
    }
    char where[96];
    if (v->icl && code_beyond(v, m->codec_cfg.codebook_size, where, sizeof where)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: %s is beyond this model's codebook "
                            "size %d", why, where, m->codec_cfg.codebook_size);
    }
    if (v->sample_rate != m->codec_cfg.input_sample_rate) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: its reference was taken at %d Hz, "
                            "this model's codec takes %d Hz", why, v->sample_rate,
                            m->codec_cfg.input_sample_rate);
    }
    if (v->fingerprint != m->voice_fingerprint) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: its encoder fingerprint is "
                            "%016" PRIx64 ", this model's is %016" PRIx64 " (different speaker or "
                            "codec encoder weights)", why, v->fingerprint, m->voice_fingerprint);
    }
    return KZ_OK;
}
