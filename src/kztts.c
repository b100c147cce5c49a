/*
 * kztts.c - public entry points: parameter checks, lifecycle, status, version.
 *
 * Every function here validates its arguments, clears or sets the thread's
 * last-error message and forwards to the internal object code (model/model.c,
 * synth/session.c, synth/decode.c). Nothing below this file checks public
 * parameters again.
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
#include "synth/session.h"

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
        p->codec_precision = KZ_PRECISION_F32;
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
    if (params->codec_precision != KZ_PRECISION_F32 &&
        params->codec_precision != KZ_PRECISION_BF16 &&
        params->codec_precision != KZ_PRECISION_WINOGRAD &&
        params->codec_precision != KZ_PRECISION_FAST &&
        params->codec_precision != KZ_PRECISION_WINOGRAD_BF16) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_model_load: codec precision %d out of range",
                            (int)params->codec_precision);
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

void kz_session_free(kz_session *session) {
    kz_session_destroy(session);
}

void kz_session_clear_prompt_cache(kz_session *session) {
    if (session) {
        kz_prompt_cache_clear(&session->prompt_cache);
    }
}

void kz_decode_default_params(kz_decode_params *p) {
    if (p) {
        memset(p, 0, sizeof *p);
        p->mode = KZ_DECODE_STREAM;
        p->chunk_frames = 4;
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

kz_status kz_decode(kz_session *session, const int32_t *codes, size_t n_frames,
                    const kz_decode_params *params, kz_audio_fn on_audio, void *user) {
    kz_error_clear();
    if (!session || !on_audio || (!codes && n_frames)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_decode: session, codes and on_audio must not be NULL");
    }
    if (n_frames == 0) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "kz_decode: no frames to decode");
    }
    kz_status st = check_frame_count(session, n_frames, "kz_decode");
    if (st != KZ_OK) {
        return st;
    }
    kz_decode_params defaults;
    kz_decode_default_params(&defaults);
    if (!params) {
        params = &defaults;
    }
    if (params->mode != KZ_DECODE_STREAM && params->mode != KZ_DECODE_OFFICIAL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_decode: unknown mode %d",
                            (int)params->mode);
    }
    if (params->chunk_frames < 1 || params->chunk_frames > 1024) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_decode: chunk_frames %d out of range [1, 1024]",
                            (int)params->chunk_frames);
    }
    return kz_session_decode(session, codes, n_frames, params, on_audio, user);
}

typedef struct collect {
    float *samples;
    size_t n_samples;
} collect;

static bool append(const float *pcm, size_t n, int64_t pos_frame, bool is_last, void *user) {
    collect *c = user;
    (void)pos_frame;
    (void)is_last;
    memcpy(c->samples + c->n_samples, pcm, n * sizeof *pcm);
    c->n_samples += n;
    return true;
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
    collect c = {.samples = malloc((n_frames ? n_frames : 1) * spf * sizeof(float))};
    if (!c.samples) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "kz_decode_all: out of memory");
    }
    st = kz_decode(session, codes, n_frames, params, append, &c);
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

void kz_request_default(const kz_model *model, kz_request *r) {
    if (!r) {
        return;
    }
    memset(r, 0, sizeof *r);
    kz_generation_config g = {.do_sample = true, .temperature = 0.9f, .top_k = 50, .top_p = 1.0f,
                              .repetition_penalty = 1.05f, .subtalker_temperature = 0.9f,
                              .subtalker_top_k = 50, .subtalker_top_p = 1.0f};
    if (model && model->has_tts) {
        g = model->gen;
    }
    r->language = "auto";
    r->greedy = !g.do_sample;
    r->temperature = g.temperature;
    r->top_k = g.top_k;
    r->top_p = g.top_p;
    r->repetition_penalty = g.repetition_penalty;
    r->cp_temperature = g.subtalker_temperature;
    r->cp_top_k = g.subtalker_top_k;
    r->cp_top_p = g.subtalker_top_p;
    r->first_chunk_frames = 1;
    r->max_utterance_bytes = 600;
    r->chunk_frames = 0;
}

/* The enum and size fields kz_request_resolve does not check. */
static kz_status check_request_fields(const kz_request *r, const char *fn) {
    if (r->layout < KZ_LAYOUT_DEFAULT || r->layout > KZ_LAYOUT_STREAMING ||
        (r->split != KZ_TEXT_SPLIT_QWEN2 && r->split != KZ_TEXT_SPLIT_MISTRAL)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s: unknown layout or split", fn);
    }
    if (r->max_utterance_bytes < 0) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "max_utterance_bytes %d is negative",
                            (int)r->max_utterance_bytes);
    }
    return KZ_OK;
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
    // so none is tokenized (or pulled) for nothing.
    kz_request q = *r;
    static const int32_t any_id = 0;
    q.text = NULL;
    q.text_pull = NULL;
    q.token_ids = &any_id;
    q.n_token_ids = 1;
    kz_plan plan;
    kz_plan_ids ids;
    st = kz_request_resolve(session->model, &q, &plan, &ids);
    st = st == KZ_OK ? kz_prefill_prepare(session, &plan.prompt) : st;
    kz_plan_ids_free(&ids);
    return st;
}

kz_status kz_synthesize(kz_session *session, const kz_request *r, kz_audio_fn on_audio,
                        void *user) {
    kz_error_clear();
    if (!session || !r || !on_audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_synthesize: session, request and on_audio are required");
    }
    kz_status st = check_request_fields(r, "kz_synthesize");
    if (st != KZ_OK) {
        return st;
    }
    const kz_codec_config *c = &session->model->codec_cfg;
    double frame_ms =
        c->output_sample_rate > 0 ? 1e3 * c->decode_upsample_rate / c->output_sample_rate : 80.0;
    kz_pacer_init(&session->pacer, frame_ms);
    if (kz_long_text_wanted(r)) {
        return kz_long_text_run(session, r, on_audio, user);
    }
    kz_plan plan;
    kz_plan_ids ids;
    st = kz_request_resolve(session->model, r, &plan, &ids);
    if (st != KZ_OK) {
        return st;
    }
    st = kz_synth_run(session, &plan, on_audio, user);
    kz_plan_ids_free(&ids);
    return st;
}

typedef struct grow_buf {
    float *samples;
    size_t n, cap;
    bool failed;
} grow_buf;

static bool append_grow(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    grow_buf *b = user;
    (void)pos;
    (void)last;
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
    return true;
}

kz_status kz_synthesize_all(kz_session *session, const kz_request *r, kz_audio *audio) {
    kz_error_clear();
    if (!audio) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_synthesize_all: audio is NULL");
    }
    memset(audio, 0, sizeof *audio);
    grow_buf b = {0};
    // Nobody listens while the audio is collected: adaptive chunks become the
    // pacer's largest, the cheapest for the codec.
    kz_request q;
    if (r) {
        q = *r;
        q.chunk_frames = q.chunk_frames ? q.chunk_frames : KZ_PACER_MAX_FRAMES;
    }
    kz_status st = kz_synthesize(session, r ? &q : NULL, append_grow, &b);
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
