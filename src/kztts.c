/*
 * kztts.c - public entry points: parameter checks, lifecycle, status, version.
 *
 * Every function here validates its arguments, clears or sets the thread's
 * last-error message and forwards to the internal object code (model/model.c,
 * synth/session.c, synth/decode.c). A request's zeros become the model's defaults
 * here (synth/request.c) before anything reads it. Nothing below this file checks
 * public parameters again. The experimental entry points at the end read and set
 * the model's and session's internals for the bench and quality tools.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kztts.h"
#include "model/model.h"
#include "runtime/error.h"
#include "synth/long_text.h"
#include "synth/prefill.h"
#include "synth/request.h"
#include "kernels/machine_peak.h"
#include "synth/session.h"
#include "synth/voice.h"
#include "io/voice_file.h"
#include "text/tokenizer.h"

int32_t kz_abi_version(void) {
    return KZ_ABI_VERSION;
}

const char *kz_version(void) {
    return "0.1.0";
}

const char *kz_system_info(void) {
    static _Thread_local char info[256];
    kz_isa best = kz_cpu_best_isa();
    snprintf(info, sizeof info, "cpu features: %s; best kernels: %s", kz_cpu_features(),
             kz_isa_name(best));
    return info;
}

void kz_model_default_params(kz_model_params *p) {
    if (p) {
        memset(p, 0, sizeof *p);
        p->isa = KZ_ISA_CAP_AUTO;
        p->codec_precision = KZ_PRECISION_DEFAULT;
        p->kv_cache = KZ_KV_CACHE_DEFAULT;
    }
}

kz_status kz_model_load(const char *path, const kz_model_params *params, kz_model **out) {
    kz_error_clear();
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_model_load: out is NULL");
    }
    *out = NULL;
    if (!path || !path[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_model_load: empty model path");
    }
    kz_model_params defaults;
    kz_model_default_params(&defaults);
    if (!params) {
        params = &defaults;
    }
    if (params->isa < KZ_ISA_CAP_AUTO || params->isa > KZ_ISA_CAP_NEON) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_model_load: isa cap %d out of range",
                            (int)params->isa);
    }
    if (params->codec_precision < KZ_PRECISION_DEFAULT ||
        params->codec_precision > KZ_PRECISION_WINOGRAD_BF16) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_model_load: codec precision %d out of range",
                            (int)params->codec_precision);
    }
    if (params->kv_cache < KZ_KV_CACHE_DEFAULT || params->kv_cache > KZ_KV_CACHE_F16) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_model_load: kv cache type %d out of range", (int)params->kv_cache);
    }
    return kz_model_open(path, params, out);
}

void kz_model_free(kz_model *model) {
    kz_model_close(model);
}

const char *kz_model_describe(const kz_model *model) {
    return model ? model->description : "";
}

int32_t kz_model_sample_rate(const kz_model *model) {
    return model ? model->codec_cfg.output_sample_rate : 0;
}

int32_t kz_model_samples_per_frame(const kz_model *model) {
    return model ? model->codec_cfg.decode_upsample_rate : 0;
}

int32_t kz_model_num_codebooks(const kz_model *model) {
    return model ? model->codec_cfg.num_quantizers : 0;
}

int32_t kz_model_codebook_size(const kz_model *model) {
    return model ? model->codec_cfg.codebook_size : 0;
}

void kz_session_default_params(kz_session_params *p) {
    if (p) {
        memset(p, 0, sizeof *p);
    }
}

kz_status kz_session_new(const kz_model *model, const kz_session_params *params,
                         kz_session **out) {
    kz_error_clear();
    if (!out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_session_new: out is NULL");
    }
    *out = NULL;
    if (!model) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_session_new: model is NULL");
    }
    kz_session_params defaults;
    kz_session_default_params(&defaults);
    if (!params) {
        params = &defaults;
    }
    if (params->n_threads < 0 || params->n_threads > 256 || params->n_threads_lm < 0 ||
        params->n_threads_lm > 256 || params->n_threads_codec < 0 ||
        params->n_threads_codec > 256) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_session_new: n_threads %d, n_threads_lm %d, n_threads_codec %d: "
                            "each must be in [0, 256]",
                            (int)params->n_threads, (int)params->n_threads_lm,
                            (int)params->n_threads_codec);
    }
    if (params->prompt_cache_mb < -1 || params->prompt_cache_mb > 65536) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_session_new: prompt_cache_mb %d must be in [-1, 65536]",
                            (int)params->prompt_cache_mb);
    }
    if (params->schedule != KZ_SCHEDULE_AUTO && params->schedule != KZ_SCHEDULE_TURNS &&
        params->schedule != KZ_SCHEDULE_OVERLAP) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_session_new: schedule %d is not a kz_schedule value",
                            (int)params->schedule);
    }
    return kz_session_create(model, params, out);
}

/* Marks the session busy for one public call, or refuses the call: a second one, from
 * one of the running call's callbacks or from another thread, would deadlock on the
 * frame queue or corrupt the caches and codec state the running call uses. */
static kz_status session_enter(kz_session *s, const char *fn) {
    if (atomic_exchange(&s->busy, true)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: the session is in use (called from one of its callbacks, or "
                            "from another thread while a call runs): one call at a time", fn);
    }
    return KZ_OK;
}

static void session_leave(kz_session *s) {
    atomic_store(&s->busy, false);
}

void kz_session_free(kz_session *session) {
    kz_session_destroy(session);
}

void kz_session_clear_prompt_cache(kz_session *session) {
    if (session && session_enter(session, "kz_session_clear_prompt_cache") == KZ_OK) {
        kz_prompt_cache_clear(&session->prompt_cache);
        kz_voice_contexts_clear(&session->voice_ctx);
        session_leave(session);
    }
}

#define DEFAULT_DECODE_CHUNK_FRAMES 4

void kz_decode_default_params(kz_decode_params *p) {
    if (p) {
        memset(p, 0, sizeof *p);
        p->mode = KZ_DECODE_STREAM;
        p->chunk_frames = DEFAULT_DECODE_CHUNK_FRAMES;
    }
}

/* n_frames frames of codes must fit in memory: n_frames x codebooks x 4 bytes at most
 * PTRDIFF_MAX, so no index into them (or into their audio's frame positions) overflows. */
static kz_status check_frame_count(const kz_session *s, size_t n_frames, const char *fn) {
    size_t per_frame = (size_t)s->model->codec_cfg.num_quantizers * sizeof(int32_t);
    if (n_frames > (size_t)PTRDIFF_MAX / per_frame) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: n_frames %zu is too large (n_frames x %d codebooks overflows)", fn,
                            n_frames, (int)s->model->codec_cfg.num_quantizers);
    }
    return KZ_OK;
}

/* kz_decode with its audio going to on_audio(user) instead of params' callback (params
 * may be NULL; kz_decode_all collects through it). */
static kz_status decode_to(kz_session *session, const int32_t *codes, size_t n_frames,
                           const kz_decode_params *params, kz_audio_fn on_audio, void *user) {
    if (!session || (!codes && n_frames)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_decode: session and codes must not be NULL");
    }
    if (n_frames == 0) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "kz_decode: no frames to decode");
    }
    kz_status st = check_frame_count(session, n_frames, "kz_decode");
    if (st != KZ_OK) {
        return st;
    }
    kz_decode_params p = {0};
    if (params) {
        p = *params;
    }
    p.chunk_frames = p.chunk_frames ? p.chunk_frames : DEFAULT_DECODE_CHUNK_FRAMES;
    if (p.mode != KZ_DECODE_STREAM && p.mode != KZ_DECODE_OFFICIAL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_decode: unknown mode %d",
                            (int)p.mode);
    }
    if (p.chunk_frames < 1 || p.chunk_frames > 1024) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_decode: chunk_frames %d out of range [1, 1024] (0: 4)",
                            (int)p.chunk_frames);
    }
    st = session_enter(session, "kz_decode");
    if (st != KZ_OK) {
        return st;
    }
    st = kz_session_decode(session, codes, n_frames, &p, on_audio, user);
    session_leave(session);
    return st;
}

kz_status kz_decode(kz_session *session, const int32_t *codes, size_t n_frames,
                    const kz_decode_params *params) {
    kz_error_clear();
    if (!params || !params->on_audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_decode: params->on_audio is required (kz_decode_all collects "
                            "the audio without one)");
    }
    return decode_to(session, codes, n_frames, params, params->on_audio, params->user);
}

typedef struct collect {
    float *samples;
    size_t n_samples;
    kz_audio_fn also;  /* the caller's callback, or NULL */
    void *also_user;
} collect;

static bool append(const float *pcm, size_t n, int64_t pos_frame, bool is_last, void *user) {
    collect *c = user;
    memcpy(c->samples + c->n_samples, pcm, n * sizeof *pcm);
    c->n_samples += n;
    return !c->also || c->also(pcm, n, pos_frame, is_last, c->also_user);
}

kz_status kz_decode_all(kz_session *session, const int32_t *codes, size_t n_frames,
                        const kz_decode_params *params, kz_audio *audio) {
    kz_error_clear();
    if (!audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_decode_all: audio is NULL");
    }
    memset(audio, 0, sizeof *audio);
    if (!session) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_decode_all: session is NULL");
    }
    size_t spf = (size_t)session->model->codec_cfg.decode_upsample_rate;
    kz_status st = check_frame_count(session, n_frames, "kz_decode_all");
    if (st == KZ_OK && n_frames > SIZE_MAX / sizeof(float) / spf) {
        st = kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                          "kz_decode_all: n_frames %zu is too large (its audio overflows)",
                          n_frames);
    }
    if (st != KZ_OK) {
        return st;
    }
    collect c = {.samples = malloc((n_frames ? n_frames : 1) * spf * sizeof(float)),
                 .also = params ? params->on_audio : NULL,
                 .also_user = params ? params->user : NULL};
    if (!c.samples) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "kz_decode_all: out of memory");
    }
    st = decode_to(session, codes, n_frames, params, append, &c);
    if (st != KZ_OK) {
        free(c.samples);
        return st;
    }
    audio->samples = c.samples;
    audio->n_samples = c.n_samples;
    audio->sample_rate = session->model->codec_cfg.output_sample_rate;
    return KZ_OK;
}

void kz_audio_free(kz_audio *audio) {
    if (audio) {
        free(audio->samples);
        memset(audio, 0, sizeof *audio);
    }
}

/* ---- speakers, languages, type -------------------------------------------- */

int32_t kz_model_speaker_count(const kz_model *m) {
    return m && m->has_tts ? m->cfg.talker.n_speakers : 0;
}

const char *kz_model_speaker_name(const kz_model *m, int32_t i) {
    return i >= 0 && i < kz_model_speaker_count(m) ? m->cfg.talker.speakers[i].name : NULL;
}

int32_t kz_model_language_count(const kz_model *m) {
    return m && m->has_tts ? m->cfg.talker.n_languages : 0;
}

const char *kz_model_language_name(const kz_model *m, int32_t i) {
    return i >= 0 && i < kz_model_language_count(m) ? m->cfg.talker.languages[i].name : NULL;
}

const char *kz_model_type(const kz_model *m) {
    return !m ? "" : m->has_tts ? m->cfg.tts_model_type : "codec";
}

/* ---- voices and codec codes ------------------------------------------------- */

static kz_status check_utf8(const char *s, const char *what);

void kz_voice_default_params(kz_voice_params *params) {
    if (params) {
        memset(params, 0, sizeof *params);
    }
}

/* The params of a voice (ref_text when !xvector_only) or an encode (ref_text ignored). */
static kz_status check_voice_params(const kz_voice_params *p, bool for_voice, const char *fn) {
    if (!(p->max_seconds == 0 || (p->max_seconds >= 1 && p->max_seconds <= 600)) ||
        p->n_threads < 0 || p->n_threads > 256) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: max_seconds %g must be 0 (60) or in [1, 600], n_threads %d in "
                            "[0, 256]", fn, (double)p->max_seconds, (int)p->n_threads);
    }
    if (!for_voice || p->xvector_only) {
        return KZ_OK;
    }
    if (!p->ref_text || !p->ref_text[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: ref_text (the reference's transcript) is required unless "
                            "xvector_only is set", fn);
    }
    if (strlen(p->ref_text) > (1u << 20)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: ref_text is longer than 1 MB", fn);
    }
    return check_utf8(p->ref_text, "the reference transcript");
}

/* Samples in memory: at a rate and channel count the audio input takes. */
static kz_status check_samples(int32_t sample_rate, int32_t channels, const char *fn) {
    if (sample_rate < 8000 || sample_rate > 384000 || channels < 1 || channels > 64) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: sample_rate %d must be in [8000, 384000], channels %d in [1, 64]",
                            fn, (int)sample_rate, (int)channels);
    }
    return KZ_OK;
}

/* Common checks of the four constructors: model, source and out present; *p_out the params
 * or the defaults, checked. */
static kz_status check_voice_call(const kz_model *model, bool has_source, bool has_out,
                                  const kz_voice_params **p_out, kz_voice_params *defaults,
                                  bool for_voice, const char *fn) {
    if (!model || !has_source || !has_out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: model, %s and the outputs are "
                            "required", fn, strstr(fn, "file") ? "audio_path" : "samples");
    }
    kz_voice_default_params(defaults);
    *p_out = *p_out ? *p_out : defaults;
    return check_voice_params(*p_out, for_voice, fn);
}

kz_status kz_voice_from_samples(const kz_model *model, const float *samples, size_t n_frames,
                                int32_t sample_rate, int32_t channels,
                                const kz_voice_params *params, kz_voice **out) {
    kz_error_clear();
    const char *fn = "kz_voice_from_samples";
    if (out) {
        *out = NULL;
    }
    kz_voice_params defaults;
    kz_status st = check_voice_call(model, samples || n_frames == 0, out, &params, &defaults,
                                    true, fn);
    st = st == KZ_OK ? check_samples(sample_rate, channels, fn) : st;
    const kz_voice_audio a = {.samples = samples, .n_frames = n_frames,
                              .sample_rate = sample_rate, .channels = channels};
    return st == KZ_OK ? kz_voice_make(model, &a, params, out) : st;
}

kz_status kz_voice_from_file(const kz_model *model, const char *audio_path,
                             const kz_voice_params *params, kz_voice **out) {
    kz_error_clear();
    if (out) {
        *out = NULL;
    }
    kz_voice_params defaults;
    kz_status st = check_voice_call(model, audio_path, out, &params, &defaults, true,
                                    "kz_voice_from_file");
    const kz_voice_audio a = {.path = audio_path};
    return st == KZ_OK ? kz_voice_make(model, &a, params, out) : st;
}

kz_status kz_voice_save(const kz_voice *voice, const char *path) {
    kz_error_clear();
    if (!voice || !path || !path[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_voice_save: voice and path are "
                            "required");
    }
    return kz_voice_file_write(voice, path);
}

kz_status kz_voice_load(const char *path, kz_voice **out) {
    kz_error_clear();
    if (!out || !path || !path[0]) {
        if (out) {
            *out = NULL;
        }
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_voice_load: path and out are "
                            "required");
    }
    return kz_voice_file_read(path, out);
}

void kz_voice_free(kz_voice *voice) {
    free(voice); // one allocation (io/voice_file.h)
}

kz_status kz_voice_check(const kz_model *model, const kz_voice *voice) {
    kz_error_clear();
    if (!model || !voice) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_voice_check: model and voice are "
                            "required");
    }
    return kz_voice_fits(model, voice);
}

kz_status kz_voice_get_info(const kz_voice *voice, kz_voice_info *info) {
    kz_error_clear();
    if (info) {
        memset(info, 0, sizeof *info);
    }
    if (!voice || !info) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_voice_get_info: voice and info are "
                            "required");
    }
    *info = (kz_voice_info){.format_version = voice->format_version, .icl = voice->icl,
                            .xvector_dim = voice->enc_dim, .n_ref_frames = voice->n_ref_frames,
                            .n_codebooks = voice->n_codebooks, .ref_seconds = voice->ref_seconds,
                            .ref_text = voice->ref_text, .model_type = voice->model_type,
                            .fingerprint = voice->fingerprint};
    return KZ_OK;
}

/* Empties the outputs of an encode that may be NULL. */
static void clear_codes(int32_t **codes, size_t *n_frames, int32_t *n_codebooks) {
    if (codes) {
        *codes = NULL;
    }
    if (n_frames) {
        *n_frames = 0;
    }
    if (n_codebooks) {
        *n_codebooks = 0;
    }
}

kz_status kz_encode(const kz_model *model, const float *samples, size_t n_frames,
                    int32_t sample_rate, int32_t channels, const kz_voice_params *params,
                    int32_t **codes, size_t *n_codes_frames, int32_t *n_codebooks) {
    kz_error_clear();
    const char *fn = "kz_encode";
    clear_codes(codes, n_codes_frames, n_codebooks);
    kz_voice_params defaults;
    const bool outs = codes && n_codes_frames && n_codebooks;
    kz_status st = check_voice_call(model, samples || n_frames == 0, outs, &params, &defaults,
                                    false, fn);
    st = st == KZ_OK ? check_samples(sample_rate, channels, fn) : st;
    const kz_voice_audio a = {.samples = samples, .n_frames = n_frames,
                              .sample_rate = sample_rate, .channels = channels};
    return st == KZ_OK ? kz_voice_encode(model, &a, params, codes, n_codes_frames, n_codebooks)
                       : st;
}

kz_status kz_encode_file(const kz_model *model, const char *audio_path,
                         const kz_voice_params *params, int32_t **codes, size_t *n_codes_frames,
                         int32_t *n_codebooks) {
    kz_error_clear();
    clear_codes(codes, n_codes_frames, n_codebooks);
    kz_voice_params defaults;
    const bool outs = codes && n_codes_frames && n_codebooks;
    kz_status st = check_voice_call(model, audio_path, outs, &params, &defaults, false,
                                    "kz_encode_file");
    const kz_voice_audio a = {.path = audio_path};
    return st == KZ_OK ? kz_voice_encode(model, &a, params, codes, n_codes_frames, n_codebooks)
                       : st;
}

void kz_codes_free(int32_t *codes) {
    free(codes);
}

/* ---- text ----------------------------------------------------------------- */

kz_status kz_tokenize(const kz_model *model, const char *text, kz_text_split split,
                      int32_t **ids, size_t *n_ids) {
    kz_error_clear();
    if (!ids || !n_ids) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenize: ids and n_ids are required");
    }
    *ids = NULL;
    *n_ids = 0;
    if (!model || !text) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenize: model and text are required");
    }
    if (split != KZ_TEXT_SPLIT_QWEN2 && split != KZ_TEXT_SPLIT_MISTRAL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_tokenize: unknown split %d", (int)split);
    }
    if (!model->tokenizer) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED, "%s has no tokenizer files (vocab.json, merges.txt)",
                            model->path);
    }
    return kz_tokenizer_encode(model->tokenizer, text, strlen(text), (kz_split_mode)split, ids,
                               n_ids);
}

void kz_ids_free(int32_t *ids) {
    free(ids);
}

/* ---- synthesis ------------------------------------------------------------ */

void kz_request_default_params(const kz_model *model, kz_request *r) {
    if (!r) {
        return;
    }
    memset(r, 0, sizeof *r);
    kz_request_fill_defaults(model, r, r);
    r->language = "auto";
}

/* Malformed UTF-8 in a request string, named by its byte in that string: checked before
 * the text is split or wrapped, whose offsets the user never sees. */
static kz_status check_utf8(const char *s, const char *what) {
    size_t n = s ? strlen(s) : 0, bad = s ? kz_utf8_invalid_at(s, n) : 0;
    if (bad < n) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "invalid UTF-8 in %s at byte %zu", what, bad);
    }
    return KZ_OK;
}

/* The enum and size fields kz_request_resolve does not check, and the instruction's UTF-8
 * (the text's: synthesize_to, as kz_session_prepare ignores the text). */
static kz_status check_request_fields(const kz_request *r, const char *fn) {
    if (r->layout < KZ_LAYOUT_DEFAULT || r->layout > KZ_LAYOUT_STREAMING ||
        (r->split != KZ_TEXT_SPLIT_QWEN2 && r->split != KZ_TEXT_SPLIT_MISTRAL)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: unknown layout or split", fn);
    }
    if (r->max_utterance_bytes < -1) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: max_utterance_bytes %d must be -1 (never split), 0 (default) "
                            "or positive", fn, (int)r->max_utterance_bytes);
    }
    if (r->frames > 0 && r->max_frames > 0 && r->frames > r->max_frames) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: frames %d is above max_frames %d (an exact count cannot pass "
                            "the cap)", fn, (int)r->frames, (int)r->max_frames);
    }
    return check_utf8(r->instruct, "the instruction");
}

kz_status kz_session_prepare(kz_session *session, const kz_request *r) {
    kz_error_clear();
    if (!session || !r) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_session_prepare: session and request are required");
    }
    kz_status st = check_request_fields(r, "kz_session_prepare");
    if (st != KZ_OK) {
        return st;
    }
    // The prefix does not depend on the text: one token stands in for whatever r has,
    // so none is tokenized (or pulled) for nothing; no callback is made.
    kz_request q = *r;
    static const int32_t any_id = 0;
    q.text = NULL;
    q.text_pull = NULL;
    q.token_ids = &any_id;
    q.n_token_ids = 1;
    q.on_audio = NULL;
    q.on_frame = NULL;
    kz_plan plan;
    kz_plan_ids ids;
    st = session_enter(session, "kz_session_prepare");
    if (st != KZ_OK) {
        return st;
    }
    st = kz_request_resolve(session->model, &q, &plan, &ids);
    st = st == KZ_OK ? kz_prefill_prepare(session, &plan.prompt) : st;
    if (st == KZ_OK && plan.voice && plan.voice->icl) {
        st = kz_voice_context_enter(session, plan.voice, NULL);
    }
    kz_plan_ids_free(&ids);
    session_leave(session);
    return st;
}

/* synthesize_to on the entered session. */
static kz_status synthesize_in(kz_session *session, const kz_request *r, kz_audio_fn on_audio,
                               void *audio_user) {
    kz_status st;
    const kz_codec_config *c = &session->model->codec_cfg;
    double frame_ms =
        c->output_sample_rate > 0 ? 1e3 * c->decode_upsample_rate / c->output_sample_rate : 80.0;
    kz_pacer_init(&session->pacer, frame_ms);
    if (kz_long_text_wanted(r)) {
        return kz_long_text_run(session, r, on_audio, audio_user);
    }
    kz_plan plan;
    kz_plan_ids ids;
    st = kz_request_resolve(session->model, r, &plan, &ids);
    if (st != KZ_OK) {
        return st;
    }
    st = kz_synth_run(session, &plan, on_audio, audio_user);
    kz_plan_ids_free(&ids);
    return st;
}

/* kz_synthesize of r (defaults filled) with the audio going to on_audio(audio_user);
 * r's other callbacks get r->user. */
static kz_status synthesize_to(kz_session *session, const kz_request *r, kz_audio_fn on_audio,
                               void *audio_user) {
    kz_status st = check_request_fields(r, "kz_synthesize");
    st = st ? st : check_utf8(r->text, "the text");
    st = st ? st : session_enter(session, "kz_synthesize");
    if (st != KZ_OK) {
        return st;
    }
    st = synthesize_in(session, r, on_audio, audio_user);
    session_leave(session);
    return st;
}

kz_status kz_synthesize(kz_session *session, const kz_request *r) {
    kz_error_clear();
    if (!session || !r || !r->on_audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_synthesize: session, request and request->on_audio are required "
                            "(kz_synthesize_all collects the audio without one)");
    }
    kz_request q;
    kz_request_fill_defaults(session->model, r, &q);
    return synthesize_to(session, &q, q.on_audio, q.user);
}

typedef struct grow_buf {
    float *samples;
    size_t n, cap;
    bool failed;
    kz_audio_fn also; /* the caller's callback, or NULL */
    void *also_user;
} grow_buf;

static bool append_grow(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    grow_buf *b = user;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        float *p = realloc(b->samples, cap * sizeof *p);
        if (!p) {
            b->failed = true;
            return false;
        }
        b->samples = p;
        b->cap = cap;
    }
    memcpy(b->samples + b->n, pcm, n * sizeof *pcm);
    b->n += n;
    return !b->also || b->also(pcm, n, pos, last, b->also_user);
}

kz_status kz_synthesize_all(kz_session *session, const kz_request *r, kz_audio *audio) {
    kz_error_clear();
    if (!audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_synthesize_all: audio is NULL");
    }
    memset(audio, 0, sizeof *audio);
    if (!session || !r) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_synthesize_all: session and request are required");
    }
    kz_request q;
    kz_request_fill_defaults(session->model, r, &q);
    // Nobody listens while the audio is collected: adaptive chunks become the
    // pacer's largest, the cheapest for the codec.
    q.chunk_frames = q.chunk_frames ? q.chunk_frames : KZ_PACER_MAX_FRAMES;
    grow_buf b = {.also = q.on_audio, .also_user = q.user};
    kz_status st = synthesize_to(session, &q, append_grow, &b);
    if (b.failed) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "kz_synthesize_all: out of memory");
    }
    if (st != KZ_OK) {
        free(b.samples);
        return st;
    }
    audio->samples = b.samples;
    audio->n_samples = b.n;
    audio->sample_rate = session->model->codec_cfg.output_sample_rate;
    return KZ_OK;
}

/* ---- experimental ----------------------------------------------------------- */

kz_status kz_experimental_model_get_info(const kz_model *m, kz_experimental_model_info *out) {
    kz_error_clear();
    if (!m || !out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_model_get_info: model and out are required");
    }
    memset(out, 0, sizeof *out);
    const kz_codec_decoder *d = &m->decoder;
    out->kernels = kz_isa_name(m->kernels->isa);
    out->kernel_sub_level = m->kernels->name;
    out->codec_precision = kz_precision_name(kz_model_precision_in_effect(m));
    out->kv_cache = m->talker.stack.kv_f16 ? "f16" : "f32";
    out->codec_forms_stored = m->codec_forms_mapped;
    out->bf16_gemm = d->bf16 ? m->kernels->gemm_bf16_name : "";
    out->load_ms = m->load_ms;
    if (m->has_tts) {
        out->talker_vocab_size = m->talker.cfg.vocab_size;
        out->talker_hidden_size = m->talker.cfg.hidden_size;
        out->num_code_groups = m->talker.cfg.num_code_groups;
        out->cp_vocab_size = m->cp.cfg.vocab_size;
        out->cp_hidden_size = m->cp.cfg.hidden_size;
        out->cp_steps = m->cp.n_steps;
    }
    return KZ_OK;
}

kz_status kz_experimental_session_get_info(const kz_session *s,
                                           kz_experimental_session_info *out) {
    kz_error_clear();
    if (!s || !out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_session_get_info: session and out are required");
    }
    *out = (kz_experimental_session_info){.n_threads = kz_pool_threads(s->pool),
                                          .n_threads_lm = kz_pool_threads(s->lm.pool),
                                          .n_threads_codec = kz_pool_threads(
                                              s->sched ? kz_sched_pool(s->sched) : s->codec_pool),
                                          .overlap = !s->turns && !s->sched};
    return KZ_OK;
}

kz_status kz_experimental_voice_get_stats(const kz_voice *voice,
                                          kz_experimental_voice_stats *out) {
    kz_error_clear();
    if (!voice || !out) {
        if (out) {
            memset(out, 0, sizeof *out);
        }
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_voice_get_stats: voice and out are required");
    }
    *out = voice->stats;
    return KZ_OK;
}

kz_status kz_experimental_session_observe(kz_session *s, kz_experimental_observe_fn fn,
                                          void *user) {
    kz_error_clear();
    if (!s) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_session_observe: session is NULL");
    }
    kz_status st = session_enter(s, "kz_experimental_session_observe");
    if (st == KZ_OK) {
        s->observe = fn;
        s->observe_user = fn ? user : NULL;
        session_leave(s);
    }
    return st;
}

/* Every forced code inside the tables it indexes: codebook 0 the talker's vocabulary and
 * the codec's codebook (a control id such as EOS or pad is no audio), the others the code
 * predictor's vocabulary. */
static kz_status check_forced(const kz_model *m, const int32_t *codes, size_t n_frames) {
    const size_t groups = (size_t)m->talker.cfg.num_code_groups;
    const int32_t n0 = m->talker.cfg.vocab_size < m->codec_cfg.codebook_size
                           ? m->talker.cfg.vocab_size
                           : m->codec_cfg.codebook_size;
    for (size_t f = 0; f < n_frames; f++) {
        for (size_t g = 0; g < groups; g++) {
            const int32_t v = codes[f * groups + g];
            const int32_t n = g == 0 ? n0 : m->cp.cfg.vocab_size;
            if (v < 0 || v >= n) {
                return kz_error_set(KZ_STATUS_BAD_INPUT,
                                    "kz_experimental_session_force_codes: frame %zu, codebook "
                                    "%zu: code %d outside [0, %d)", f, g, (int)v, (int)n);
            }
        }
    }
    return KZ_OK;
}

/* kz_experimental_session_force_codes on the entered session. */
static kz_status force_codes(kz_session *s, const int32_t *codes, size_t n_frames) {
    s->forced_codes = NULL;
    s->n_forced = 0;
    if (!codes || n_frames == 0) {
        return KZ_OK;
    }
    if (!s->model->has_tts) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED, "%s is a codec-only model: it generates no "
                            "codes to force", s->model->path);
    }
    if (n_frames > (size_t)INT64_MAX) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_session_force_codes: too many frames");
    }
    kz_status st = check_forced(s->model, codes, n_frames);
    if (st == KZ_OK) {
        s->forced_codes = codes;
        s->n_forced = (int64_t)n_frames;
    }
    return st;
}

kz_status kz_experimental_session_force_codes(kz_session *s, const int32_t *codes,
                                              size_t n_frames) {
    kz_error_clear();
    if (!s) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_experimental_session_force_codes: session is NULL");
    }
    kz_status st = session_enter(s, "kz_experimental_session_force_codes");
    if (st != KZ_OK) {
        return st;
    }
    st = force_codes(s, codes, n_frames);
    session_leave(s);
    return st;
}

static kz_status check_threads(int32_t n_threads, const void *out, const char *fn) {
    if (n_threads < 1 || n_threads > 256 || !out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: n_threads %d not in [1, 256], or no output", fn, (int)n_threads);
    }
    return KZ_OK;
}

kz_status kz_experimental_machine_read_gbs(int32_t n_threads, double *gbs) {
    kz_error_clear();
    kz_status st = check_threads(n_threads, gbs, "kz_experimental_machine_read_gbs");
    if (st == KZ_OK && (*gbs = kz_machine_read_gbs(n_threads)) <= 0) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                          "kz_experimental_machine_read_gbs: no memory or threads for the probe");
    }
    return st;
}

kz_status kz_experimental_machine_core_rt_ns(double *ns) {
    kz_error_clear();
    if (!ns) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_experimental_machine_core_rt_ns: ns is NULL");
    }
    *ns = kz_machine_core_rt_ns();
    return KZ_OK;
}

kz_status kz_experimental_machine_fma_gflops(const char *loop, int32_t n_threads, double *gflops,
                                             const char **loop_run) {
    kz_error_clear();
    kz_status st = check_threads(n_threads, gflops, "kz_experimental_machine_fma_gflops");
    if (st == KZ_OK && !loop_run) {
        st = kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                          "kz_experimental_machine_fma_gflops: loop_run is NULL");
    }
    if (st == KZ_OK && (*gflops = kz_machine_fma_gflops(loop, n_threads, loop_run)) <= 0) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                          "kz_experimental_machine_fma_gflops: no memory or threads for the probe");
    }
    return st;
}
