/*
 * session.c - creating and destroying sessions; stage timings.
 */
#include "synth/session.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

kz_status kz_session_create(const kz_model *model, const kz_session_params *params,
                            kz_session **out) {
    *out = NULL;
    kz_session *s = calloc(1, sizeof *s);
    if (!s) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    s->model = model;
    if (params->scheduler && kz_sched_model(params->scheduler) != model) {
        free(s);
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_session_new: the scheduler was made for another model");
    }
    if (params->scheduler) {
        kz_sched_attach(params->scheduler, 1);
    }
    // 64 MB: a CustomVoice prefix is ~8 rows, 1.8 MB of keys and values at 0.6B / 1.7B.
    const size_t cache_mb = params->prompt_cache_mb < 0    ? 0
                            : params->prompt_cache_mb == 0 ? 64
                                                           : (size_t)params->prompt_cache_mb;
    kz_prompt_cache_init(&s->prompt_cache, cache_mb << 20);
    int n_threads = params->n_threads > 0 ? params->n_threads : kz_pool_default_threads();
    // Default split: with turns each stage gets every thread; when the stages overlap,
    // the memory-bound LM stage (the bottleneck) gets every thread and the compute-bound
    // codec half of them, sharing the cores.
    // With a scheduler the stages never take turns: the talker, code predictor and codec
    // chunks run on its thread and pool (codec_pool then serves only an in-context voice's
    // reference, decoded on the calling thread).
    s->sched = params->scheduler;
    s->turns = params->schedule != KZ_SCHEDULE_OVERLAP && !s->sched;
    int n_lm = params->n_threads_lm > 0 ? params->n_threads_lm : n_threads;
    int n_codec = params->n_threads_codec > 0 ? params->n_threads_codec
                  : s->turns || s->sched      ? n_threads
                                              : n_threads / 2;
    n_codec = n_codec < 1 ? 1 : n_codec;
    kz_status st = kz_pool_new(n_threads, &s->pool);
    st = st == KZ_OK && !s->sched ? kz_pool_new(n_lm, &s->lm_pool) : st;
    st = st == KZ_OK ? kz_pool_new(n_codec, &s->codec_pool) : st;
    if (st == KZ_OK) {
        kz_pool *lm_pool = s->sched ? kz_sched_pool(s->sched) : s->lm_pool;
        s->exec = (kz_exec){.k = model->kernels, .pool = s->pool};
        s->lm = (kz_exec){.k = model->kernels, .pool = lm_pool};
        s->cp = (kz_exec){.k = model->kernels, .pool = lm_pool, .weights_reused = true};
        st = kz_codec_state_init(&s->codec, &model->decoder, KZ_CODEC_STEP_FRAMES);
    }
    if (st == KZ_OK && model->has_tts) {
        st = kz_code_predictor_state_init(&s->cp_state, &model->cp);
    }
    if (st != KZ_OK) {
        kz_session_destroy(s);
        return st;
    }
    *out = s;
    return KZ_OK;
}

void kz_session_destroy(kz_session *s) {
    if (!s) {
        return;
    }
    kz_codec_state_free(&s->codec);
    kz_prompt_cache_free(&s->prompt_cache);
    kz_voice_contexts_clear(&s->voice_ctx);
    if (s->model->has_tts) {
        kz_code_predictor_state_free(&s->cp_state);
    }
    kz_talker_state_free(&s->talker);
    kz_pool_free(s->pool);
    kz_pool_free(s->lm_pool);
    kz_pool_free(s->codec_pool);
    if (s->sched) {
        kz_sched_attach(s->sched, -1);
    }
    free(s);
}

kz_status kz_session_talker(kz_session *s, size_t max_pos, size_t max_tok, kz_talker_state **out) {
    kz_talker_state *ts = &s->talker;
    if (!ts->seq.k_cache || ts->seq.max_pos < max_pos || ts->seq.max_tok < max_tok) {
        kz_talker_state_free(ts);
        const size_t pos = (max_pos + 63) / 64 * 64;
        kz_status st = kz_talker_state_init(ts, &s->model->talker, pos, max_tok);
        if (st != KZ_OK) {
            return st;
        }
    }
    ts->seq.n_pos = 0;
    *out = ts;
    return KZ_OK;
}

typedef struct lm_call {
    kz_exec *exec;
    kz_scheduler *sched;
    kz_status (*fn)(void *);
    void *arg;
} lm_call;

/* On the scheduler's thread: fn with c->exec on the pool the scheduler gives this job (a
 * part of its pool when the job runs side by side with another). */
static kz_status lm_call_job(void *arg) {
    lm_call *c = arg;
    kz_pool *whole = c->exec ? c->exec->pool : NULL;
    if (c->exec) {
        c->exec->pool = kz_sched_pool(c->sched);
    }
    kz_status st = c->fn(c->arg);
    if (c->exec) {
        c->exec->pool = whole;
    }
    return st;
}

kz_status kz_session_lm_call(kz_session *s, kz_sched_req *r, kz_sched_job kind, kz_exec *exec,
                             kz_status (*fn)(void *), void *arg) {
    lm_call c = {.exec = exec, .sched = s->sched, .fn = fn, .arg = arg};
    return s->sched ? kz_sched_call(s->sched, r, kind, lm_call_job, &c) : fn(arg);
}

void kz_session_timings(const kz_session *s, kz_timings *out) {
    if (!out) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (!s) {
        return;
    }
    out->codec_quantizer_ms = s->codec.ms[0] - s->ms_at_reset[0];
    out->codec_transformer_ms = s->codec.ms[1] - s->ms_at_reset[1];
    out->codec_upsample_ms = s->codec.ms[2] - s->ms_at_reset[2];
    out->codec_vocoder_ms = s->codec.ms[3] - s->ms_at_reset[3];
    out->codec_flop = s->exec.flop - s->flop_at_reset;
    out->codec_flop_bf16 = s->exec.flop_bf16 - s->flop_bf16_at_reset;
    out->codec_frames = s->codec_frames;
    out->prefill_ms = s->stats.prefill_ms;
    out->talker_ms = s->stats.talker_ms;
    out->code_predictor_ms = s->stats.code_predictor_ms;
    out->sampling_ms = s->stats.sampling_ms;
    out->frames = s->stats.frames;
    out->prompt_tokens = s->stats.prompt_tokens;
    out->prompt_tokens_cached = s->stats.prompt_tokens_cached;
    out->talker_bytes = s->lm.bytes - s->lm_bytes_at_reset;
    out->code_predictor_bytes = s->cp.bytes - s->cp_bytes_at_reset;
}

void kz_session_reset_timings(kz_session *s) {
    if (!s) {
        return;
    }
    memcpy(s->ms_at_reset, s->codec.ms, sizeof s->ms_at_reset);
    s->flop_at_reset = s->exec.flop;
    s->flop_bf16_at_reset = s->exec.flop_bf16;
    s->codec_frames = 0;
    memset(&s->stats, 0, sizeof s->stats);
    s->lm_bytes_at_reset = s->lm.bytes;
    s->cp_bytes_at_reset = s->cp.bytes;
}
