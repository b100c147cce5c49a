/*
 * session.h - the kz_session object: per-synthesis mutable state.
 *
 * A session owns its thread pool, its execution context (kernel table + pool +
 * FLOP counter) and the codec decoder's streaming state, all sized at creation;
 * decoding allocates nothing per frame. The talker's state (KV cache and scratch) is
 * made by the first synthesis and kept for the next ones (kz_session_talker), grown when
 * one needs more positions. One thread uses a session at a time.
 */
#ifndef KZ_SESSION_H
#define KZ_SESSION_H

#include <stdatomic.h>

#include "kztts.h"
#include "layers/conv.h"
#include "model/code_predictor.h"
#include "model/codec_decoder.h"
#include "model/model.h"
#include "runtime/threadpool.h"
#include "synth/chunk_pacer.h"
#include "synth/prompt_cache.h"
#include "synth/scheduler.h"
#include "synth/voice_context.h"

/* Frames per internal codec step: bounds the codec's scratch memory independently of
 * request size (the last two decoder blocks run in tails of KZ_CODEC_TAIL_FRAMES). Each
 * step re-reads the codec's weights, so it matches the pacer's largest chunk
 * (KZ_PACER_MAX_FRAMES). */
#define KZ_CODEC_STEP_FRAMES 16

/* Language-model stage statistics (milliseconds, counts). */
typedef struct kz_lm_stats {
    double prefill_ms, talker_ms, code_predictor_ms, sampling_ms;
    int64_t frames, prompt_tokens, prompt_tokens_cached;
} kz_lm_stats;

struct kz_session {
    const kz_model *model;
    atomic_bool busy;              /* a public call runs on it (kztts.c session_enter) */
    kz_pool *pool;                 /* all threads: kz_decode */
    kz_pool *lm_pool;              /* synthesis: talker + code predictor stage (NULL with
                                      a scheduler: lm and cp then use its pool, only from
                                      its thread, through kz_session_lm_call) */
    kz_scheduler *sched;           /* the scheduler synthesis computes on, or NULL */
    kz_pool *codec_pool;           /* synthesis: codec stage (calling thread) */
    bool turns;                    /* KZ_SCHEDULE_TURNS: the stages take turns */
    kz_exec exec;                  /* codec work (its own FLOP counter) */
    kz_exec lm;                    /* talker work (prompt and steps) */
    kz_exec cp;                    /* code predictor work */
    kz_codec_state codec;
    kz_code_predictor_state cp_state; /* allocated when the model has a talker */
    kz_talker_state talker;        /* kz_session_talker's; zero until the first synthesis */
    kz_lm_stats stats;
    kz_prompt_cache prompt_cache;  /* computed prompt prefixes (synth/prefill.c) */
    kz_voice_contexts voice_ctx;   /* the codec state after recent ICL voices' references */
    kz_pacer pacer;                /* adaptive chunks of the current kz_synthesize call */
    /* Observer of named intermediate arrays (kz_experimental_session_observe): NULL
     * normally. */
    kz_experimental_observe_fn observe;
    void *observe_user;
    /* Teacher forcing (kz_experimental_session_force_codes): when not NULL, frame f
     * takes the codes forced_codes[f * groups ..] instead of sampling, for f < n_forced;
     * the logits are still computed and observed. NULL normally. */
    const int32_t *forced_codes;
    int64_t n_forced;
    int64_t codec_frames;     /* frames decoded since the timings were reset */
    double flop_at_reset;
    double flop_bf16_at_reset;
    double lm_bytes_at_reset, cp_bytes_at_reset;
    double ms_at_reset[4];
};

kz_status kz_session_create(const kz_model *model, const kz_session_params *params,
                            kz_session **out);
void kz_session_destroy(kz_session *s);

/* The session's talker state for a sequence of up to max_pos positions and calls of up to
 * max_tok rows, at position 0: the one kept from an earlier call when it is large enough,
 * else a new one in its place (positions rounded up to 64). Kept, because a new state's
 * memory is new pages: the first rows of every request would fault in and zero the KV
 * cache's first block (15 MB at 0.6B) and the scratch, and unmapping them at the end costs
 * the other cores a TLB flush. The pages the longest request touched stay mapped until
 * kz_session_free. */
kz_status kz_session_talker(kz_session *s, size_t max_pos, size_t max_tok,
                            kz_talker_state **out);

/* fn(arg), which computes with exec (s->lm) or with kz_sched_pool's pool: directly, or with
 * a scheduler on its thread between two batches (r: a place there that nothing else uses
 * meanwhile, or a fresh one; r->job_cost its size), with exec, if not NULL, moved to the
 * pool kz_sched_pool gives the job meanwhile. */
kz_status kz_session_lm_call(kz_session *s, kz_sched_req *r, kz_sched_job kind, kz_exec *exec,
                             kz_status (*fn)(void *), void *arg);

/* KZ_OK, or KZ_STATUS_BAD_MODEL naming the frame, when the n samples of pcm (lead samples
 * before frame first_frame's audio, then spf a frame) hold a NaN or Inf: the codec's
 * output is checked before it is delivered (synth/decode.c). */
kz_status kz_session_check_audio(const float *pcm, size_t n, size_t lead, int64_t first_frame,
                                 size_t spf);

/* kz_decode after parameter checks (synth/decode.c). */
kz_status kz_session_decode(kz_session *s, const int32_t *codes, size_t n_frames,
                            const kz_decode_params *params, kz_audio_fn on_audio, void *user);

#endif
