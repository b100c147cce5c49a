/*
 * synth.c - the frame loop as a state machine (spec 8.3):
 *
 *   PREFILL   build the prompt rows, run the talker over them
 *   TALKER    process the last logits and pick c0; stop on EOS or the frame cap
 *   PREDICT   code predictor -> c1..c15; report the frame (on_frame)
 *   FEEDBACK  next input = sum of the 16 code embeddings + trailing text vector;
 *             run one talker step
 *   DECODE    every chunk_frames frames (and at the end) decode with the codec's
 *             carried state and hand the PCM to the audio callback
 * Buffers (KV caches sized prompt + max_frames, sampler scratch, frame codes)
 * are allocated once per utterance before the loop.
 */
#include "synth/synth.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/error.h"

typedef struct synth {
    kz_session *s;
    const kz_plan *plan;
    const kz_model *m;
    kz_talker_state ts;
    kz_prompt prompt;
    kz_rng rng;
    uint8_t *seen;         /* [vocab] codebook-0 codes sampled so far */
    void *scratch;         /* sampler scratch */
    float *logits;         /* [vocab] working copy */
    float *input;          /* [D] next talker input */
    float *emb;            /* [D] embedding row */
    int32_t *codes;        /* [chunk_frames, groups] codes awaiting decode */
    float *pcm;            /* [chunk_frames * samples_per_frame] */
    float *cp_logits;      /* [15, cp vocab] when observed, else NULL */
    int32_t n_pending;     /* frames in codes not yet decoded */
    int64_t n_frames;      /* frames generated */
    int64_t n_decoded;     /* frames decoded */
    kz_audio_fn on_audio;
    void *audio_user;
    double cp_sampling_ms; /* sampling time inside the code predictor (not CP time) */
} synth;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static kz_status setup(synth *y) {
    const kz_model *m = y->m;
    size_t D = (size_t)m->talker.cfg.hidden_size, V = (size_t)m->talker.cfg.vocab_size;
    size_t groups = (size_t)m->talker.cfg.num_code_groups;
    size_t n_rows = kz_prompt_rows(&y->plan->prompt, &m->talker);
    size_t max_tok = n_rows > 64 ? n_rows : 64;
    kz_status st = kz_talker_state_init(&y->ts, &m->talker, n_rows + (size_t)y->plan->max_frames + 1,
                                        max_tok);
    size_t vmax = V > (size_t)m->cp.cfg.vocab_size ? V : (size_t)m->cp.cfg.vocab_size;
    y->seen = calloc(V, 1);
    y->scratch = malloc(kz_sampler_scratch_bytes(vmax));
    y->logits = malloc(vmax * sizeof(float));
    y->input = malloc(D * sizeof(float));
    y->emb = malloc(D * sizeof(float));
    y->codes = malloc((size_t)y->plan->chunk_frames * groups * sizeof(int32_t));
    y->pcm = malloc((size_t)y->plan->chunk_frames * (size_t)m->codec_cfg.decode_upsample_rate *
                    sizeof(float));
    if (y->s->observe) {
        y->cp_logits = malloc((size_t)m->cp.n_steps * (size_t)m->cp.cfg.vocab_size * sizeof(float));
        st = st == KZ_OK && !y->cp_logits
                 ? kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for synthesis")
                 : st;
    }
    if (st == KZ_OK && (!y->seen || !y->scratch || !y->logits || !y->input || !y->emb ||
                        !y->codes || !y->pcm)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for synthesis");
    }
    kz_rng_seed(&y->rng, y->plan->seed);
    return st;
}

static void teardown(synth *y) {
    kz_talker_state_free(&y->ts);
    kz_prompt_free(&y->prompt);
    free(y->seen);
    free(y->scratch);
    free(y->logits);
    free(y->input);
    free(y->emb);
    free(y->codes);
    free(y->pcm);
    free(y->cp_logits);
}

static void observe(synth *y, const char *name, const float *data, size_t rows, size_t cols) {
    if (y->s->observe) {
        y->s->observe(y->s->observe_user, name, y->n_frames, data, rows, cols);
    }
}

static kz_status prefill(synth *y) {
    double t0 = now_ms();
    kz_status st = kz_prompt_build(&y->prompt, &y->plan->prompt, &y->m->cfg, &y->m->talker,
                                   &y->ts, &y->s->lm);
    if (st == KZ_OK) {
        observe(y, "prefill_rows", y->prompt.rows, y->prompt.n_rows,
                (size_t)y->m->talker.cfg.hidden_size);
        kz_talker_forward(&y->m->talker, &y->ts, &y->s->lm, y->prompt.rows, y->prompt.n_rows);
        y->s->stats.prompt_tokens += (int64_t)y->prompt.n_rows;
    }
    y->s->stats.prefill_ms += now_ms() - t0;
    return st;
}

/* Picks c0 from the talker's logits (spec 8.5). */
static int32_t pick_c0(synth *y) {
    double t0 = now_ms();
    const kz_talker_config *c = &y->m->talker.cfg;
    size_t V = (size_t)c->vocab_size;
    observe(y, "talker_logits", y->ts.logits, 1, V);
    memcpy(y->logits, y->ts.logits, V * sizeof(float));
    bool mask_eos = y->plan->frames > 0 || y->n_frames < 2;
    kz_logits_talker(y->logits, V, y->seen, y->plan->repetition_penalty, mask_eos,
                     c->codec_eos_token_id, y->m->cp.cfg.vocab_size);
    int32_t c0 = kz_sample(y->logits, V, &y->plan->talker, &y->rng, y->scratch);
    y->seen[c0] = 1;
    y->s->stats.sampling_ms += now_ms() - t0;
    return c0;
}

static int32_t pick_cp(void *user, float *logits, size_t n) {
    synth *y = user;
    double t0 = now_ms();
    int32_t code = kz_sample(logits, n, &y->plan->cp, &y->rng, y->scratch);
    double dt = now_ms() - t0;
    y->s->stats.sampling_ms += dt;
    y->cp_sampling_ms += dt;
    return code;
}

/* Next talker input: sum of the frame's 16 embeddings + trailing text vector. */
static void feedback(synth *y, const int32_t *frame) {
    const kz_model *m = y->m;
    size_t D = (size_t)m->talker.cfg.hidden_size;
    kz_talker_codec_vector(&m->talker, frame[0], y->input);
    for (int i = 1; i < m->talker.cfg.num_code_groups; i++) {
        kz_matrix_row(&m->cp.embeddings[i - 1], (size_t)frame[i], y->emb);
        for (size_t k = 0; k < D; k++) {
            y->input[k] = y->input[k] + y->emb[k];
        }
    }
    const float *text = (size_t)y->n_frames < y->prompt.n_trailing
                            ? y->prompt.trailing + (size_t)y->n_frames * D
                            : y->prompt.pad;
    for (size_t k = 0; k < D; k++) {
        y->input[k] = y->input[k] + text[k];
    }
}

static kz_status decode_pending(synth *y, bool is_last) {
    if (y->n_pending == 0) {
        return KZ_OK;
    }
    kz_codec_decode(&y->m->decoder, &y->s->codec, &y->s->exec, y->codes, (size_t)y->n_pending,
                    y->pcm);
    size_t n = (size_t)y->n_pending * (size_t)y->m->codec_cfg.decode_upsample_rate;
    y->s->codec_frames += y->n_pending;
    int64_t pos = y->n_decoded;
    y->n_decoded += y->n_pending;
    y->n_pending = 0;
    if (!y->on_audio(y->pcm, n, pos, is_last, y->audio_user)) {
        return kz_error_set(KZ_STATUS_CANCELLED, "cancelled by the audio callback at frame %lld",
                            (long long)pos);
    }
    return KZ_OK;
}

/* One frame: c0 was picked; predict the rest, report, feed back. */
static kz_status frame_step(synth *y, int32_t c0) {
    const kz_model *m = y->m;
    size_t groups = (size_t)m->talker.cfg.num_code_groups, D = (size_t)m->talker.cfg.hidden_size;
    int32_t *frame = y->codes + (size_t)y->n_pending * groups;
    frame[0] = c0;
    double t0 = now_ms();
    y->cp_sampling_ms = 0;
    kz_talker_codec_vector(&m->talker, c0, y->emb);
    kz_code_predictor_run(&m->cp, &y->s->cp_state, &y->s->cp, y->ts.hidden, y->emb, pick_cp, y,
                          frame + 1, y->cp_logits);
    if (y->cp_logits) {
        observe(y, "cp_logits", y->cp_logits, (size_t)m->cp.n_steps, (size_t)m->cp.cfg.vocab_size);
    }
    double t1 = now_ms();
    y->s->stats.code_predictor_ms += t1 - t0 - y->cp_sampling_ms;
    if (y->plan->on_frame &&
        !y->plan->on_frame(frame, (int32_t)groups, y->n_frames, y->plan->frame_user)) {
        return kz_error_set(KZ_STATUS_CANCELLED, "cancelled by the frame callback at frame %lld",
                            (long long)y->n_frames);
    }
    feedback(y, frame);
    y->n_frames++;
    y->n_pending++;
    y->s->stats.frames++;
    memcpy(y->emb, y->input, D * sizeof(float));
    kz_talker_forward(&m->talker, &y->ts, &y->s->lm, y->emb, 1);
    y->s->stats.talker_ms += now_ms() - t1;
    return KZ_OK;
}

/* Whether the loop ends before frame n_frames: exact count, cap, or EOS. */
static bool finished(const synth *y, int32_t c0) {
    if (y->plan->frames > 0) {
        return y->n_frames >= y->plan->frames;
    }
    return c0 == y->m->talker.cfg.codec_eos_token_id || y->n_frames >= y->plan->max_frames;
}

/* Picks c0 before flushing a full chunk, so the final chunk is known to be final. */
static kz_status loop(synth *y) {
    for (;;) {
        bool exact_done = y->plan->frames > 0 && y->n_frames >= y->plan->frames;
        int32_t c0 = exact_done ? -1 : pick_c0(y);
        bool end = exact_done || finished(y, c0);
        if (end && y->n_frames == 0) {
            return kz_error_set(KZ_STATUS_INTERNAL, "no frame generated");
        }
        if (end || y->n_pending == y->plan->chunk_frames) {
            kz_status st = decode_pending(y, end);
            if (st != KZ_OK || end) {
                return st;
            }
        }
        kz_status st = frame_step(y, c0);
        if (st != KZ_OK) {
            return st;
        }
    }
}

kz_status kz_synth_run(kz_session *s, const kz_plan *plan, kz_audio_fn on_audio, void *user) {
    synth y = {.s = s, .plan = plan, .m = s->model, .on_audio = on_audio, .audio_user = user};
    kz_status st = setup(&y);
    kz_codec_state_reset(&s->codec);
    st = st == KZ_OK ? prefill(&y) : st;
    st = st == KZ_OK ? loop(&y) : st;
    teardown(&y);
    return st;
}
