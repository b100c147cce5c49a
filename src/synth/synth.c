/*
 * synth.c - one utterance as a two-stage pipeline (spec 8.3):
 *
 *   LM thread (lm_pool)                      calling thread (codec_pool)
 *   PREFILL  prompt rows -> talker            POP     frames from the queue; on_frame
 *            (voice prefix cached: prefill.h)
 *   TALKER   logits -> c0; EOS / cap -> end   DECODE  first_chunk_frames, then chunk_frames
 *   PREDICT  code predictor -> c1..c{G-1}             (or the session pacer's sizes) at a
 *                                                     time, with the codec's carried state
 *   FEEDBACK sum of G embeddings + text       EMIT    PCM -> on_audio (is_last on the final one)
 *   PUSH     frame -> bounded queue  ------>
 *
 * G is the model's num_code_groups (16 in the released models).
 * The queue holds 64 frames (or the largest chunk + 1, if that is more, so that a
 * chunk can always be completed); the LM thread blocks when it is full and
 * the caller when it is empty. Cancellation (a callback returns false) sets a
 * flag the LM thread checks every frame, so it stops within one frame. All
 * buffers are allocated before the threads start. Both callbacks run on the
 * calling thread. The codes and audio do not depend on the chunk sizes or the
 * thread counts. The final callback may be empty (the end is known only when the
 * talker has sampled end of speech) unless plan->exact_last asks to hold each chunk
 * until the frame after it exists, so that is_last comes with the final audio.
 *
 * Turns (session schedule KZ_SCHEDULE_TURNS, the default): the two stages do not
 * compute at the same time, each uses all its threads while it holds the turn.
 * The LM thread holds it for the prefill, and for each frame's talker step +
 * sampling + code predictor; it lets go while it pushes the frame and builds the
 * next input (which may wait for streamed text). The codec takes the turn for
 * each chunk decode (never during the callbacks) and goes first: once the frames
 * it waits for are queued, the LM thread does not take the turn again before
 * the codec has decoded them. State and waits share the queue's lock and
 * condition variable. With KZ_SCHEDULE_OVERLAP the turn calls do nothing.
 *
 * With a scheduler (session.h) the LM thread stays, but its prefill, talker steps and code
 * predictions, and the codec's chunk decodes, run on the scheduler's thread, the first
 * batched with other sessions' (scheduler.h):
 * it joins the batch once its text is there, marks itself outside the scheduler while it
 * waits for queue room or streamed text, and leaves when it ends. The stages never take
 * turns then.
 *
 * Non-finite values: the talker's logits, each code predictor step's logits and each
 * chunk's PCM are checked before they are sampled or delivered (one pass over a few
 * thousand floats). The load refused NaN and Inf weights (model.c, talker.c), so one
 * here is an overflow of finite ones; it ends the utterance with KZ_STATUS_BAD_MODEL,
 * so no code is sampled from such logits and no such sample reaches on_audio.
 */
#include "synth/synth.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layers/vector.h"
#include "runtime/error.h"
#include "synth/prefill.h"
#include "synth/request.h"
#include "synth/text_feed.h"

#define QUEUE_FRAMES 64

typedef struct frame_queue {
    int32_t *codes;         /* [capacity, groups] ring */
    size_t capacity;        /* max(QUEUE_FRAMES, largest chunk + 1): a chunk and the
                               frame after it always fit */
    size_t head, count;     /* next frame to pop, frames queued */
    bool ended;             /* the LM thread pushed its last frame */
    size_t want;            /* frames the codec waits for (0: not waiting) */
    bool lm_turn;           /* turns: the LM stage computes */
    bool codec_turn;        /* turns: the codec stage computes */
    bool codec_next;        /* turns: the codec popped frames and takes the turn next */
    bool first_queued;      /* scheduler: the codec's first chunk waits there (or ran) */
    pthread_mutex_t lock;
    pthread_cond_t changed; /* signalled on push, pop, end and cancel */
} frame_queue;

typedef struct synth {
    kz_session *s;
    const kz_plan *plan;
    const kz_model *m;
    size_t groups;
    /* LM stage */
    kz_talker_state *ts;   /* the session's (kz_session_talker) */
    kz_prompt_spec spec;   /* the plan's prompt, with streamed text ids filled in */
    kz_prompt prompt;
    kz_text_feed feed;     /* streaming text input, when plan->text_pull */
    size_t feed_next;      /* the streamed text token whose vector is computed */
    bool streaming_text;
    bool text_in_prompt;   /* streamed text that ended before the prefill: all in the prompt */
    kz_rng rng;
    uint8_t *seen;         /* [vocab] codebook-0 codes sampled so far */
    void *scratch;         /* sampler scratch */
    float *logits;         /* [vocab] working copy */
    float *input;          /* [D] next talker input */
    float *emb;            /* [D] embedding row */
    float *tvec;           /* [D] streamed text vector */
    int32_t *frame;        /* [groups] frame being built */
    float *cp_logits;      /* [groups - 1, cp vocab] when observed, else NULL */
    int64_t n_frames;      /* frames generated */
    double cp_sampling_ms; /* sampling time inside the code predictor (not CP time) */
    int32_t cp_step;       /* codebook the code predictor picks next (1..groups - 1) */
    bool cp_nonfinite;     /* a code predictor step's logits held NaN or Inf */
    kz_sched_req req;      /* its place at the session's scheduler, if any */
    kz_status lm_status;
    char lm_error[512];    /* the LM thread's message (last errors are thread-local) */
    /* shared */
    frame_queue q;
    atomic_bool cancel;
    /* codec stage */
    kz_sched_req codec_req; /* its place at the scheduler, for its chunks */
    size_t decode_n, decode_lead; /* the chunk decode_alone decodes */
    int32_t *chunk;        /* [max chunk, groups] codes to decode */
    float *pcm;            /* [max chunk * samples_per_frame] */
    int64_t n_decoded;
    size_t lead;           /* reference samples the official cut keeps before the first
                              frame's audio (0 or 1; voice_context.h) */
    float lead_sample;     /* the reference audio's last sample */
    kz_audio_fn on_audio;
    void *audio_user;
} synth;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void observe(synth *y, const char *name, const float *data, size_t rows, size_t cols) {
    if (y->s->observe) {
        y->s->observe(name, y->n_frames, data, rows, cols, y->s->observe_user);
    }
}

/* --- setup ------------------------------------------------------------------ */

static size_t max_chunk(const kz_plan *p) {
    int32_t later = p->chunk_frames ? p->chunk_frames : KZ_PACER_MAX_FRAMES;
    return (size_t)(later > p->first_chunk_frames ? later : p->first_chunk_frames);
}

static kz_status setup(synth *y) {
    const kz_model *m = y->m;
    size_t D = (size_t)m->talker.cfg.hidden_size, V = (size_t)m->talker.cfg.vocab_size;
    size_t n_rows = kz_prompt_rows(&y->plan->prompt, &m->talker);
    size_t max_tok = n_rows > 64 ? n_rows : 64;
    y->groups = (size_t)m->talker.cfg.num_code_groups;
    kz_status st =
        kz_session_talker(y->s, n_rows + (size_t)y->plan->max_frames + 1, max_tok, &y->ts);
    size_t vmax = V > (size_t)m->cp.cfg.vocab_size ? V : (size_t)m->cp.cfg.vocab_size;
    size_t chunk = max_chunk(y->plan);
    y->seen = calloc(V, 1);
    y->scratch = malloc(kz_sampler_scratch_bytes(vmax));
    y->logits = malloc(vmax * sizeof(float));
    y->input = malloc(D * sizeof(float));
    y->emb = malloc(D * sizeof(float));
    y->tvec = malloc(D * sizeof(float));
    y->frame = malloc(y->groups * sizeof(int32_t));
    y->q.capacity = chunk + 1 > QUEUE_FRAMES ? chunk + 1 : QUEUE_FRAMES;
    y->q.codes = malloc(y->q.capacity * y->groups * sizeof(int32_t));
    y->chunk = malloc(chunk * y->groups * sizeof(int32_t));
    y->pcm = malloc((chunk * (size_t)m->codec_cfg.decode_upsample_rate + 1) * sizeof(float));
    y->cp_logits = y->s->observe ? malloc((size_t)m->cp.n_steps * (size_t)m->cp.cfg.vocab_size *
                                          sizeof(float))
                                 : NULL;
    if (st == KZ_OK && (!y->seen || !y->scratch || !y->logits || !y->input || !y->emb || !y->tvec ||
                        !y->frame || !y->q.codes || !y->chunk || !y->pcm ||
                        (y->s->observe && !y->cp_logits))) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for synthesis");
    }
    y->spec = y->plan->prompt;
    y->streaming_text = y->plan->text_pull != NULL;
    if (st == KZ_OK && y->streaming_text) {
        st = kz_text_feed_init(&y->feed, m->tokenizer, y->plan->split, y->plan->text_pull,
                               y->plan->text_user);
    }
    kz_rng_seed(&y->rng, y->plan->seed);
    pthread_mutex_init(&y->q.lock, NULL);
    pthread_cond_init(&y->q.changed, NULL);
    atomic_init(&y->cancel, false);
    return st;
}

static void teardown(synth *y) {
    kz_prompt_free(&y->prompt);
    if (y->streaming_text) {
        kz_text_feed_free(&y->feed);
    }
    void *bufs[] = {y->seen,  y->scratch, y->logits, y->input, y->emb, y->tvec,
                    y->frame, y->q.codes, y->chunk,  y->pcm,   y->cp_logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
    pthread_mutex_destroy(&y->q.lock);
    pthread_cond_destroy(&y->q.changed);
}

/* --- LM stage ------------------------------------------------------------------ */

/* Text tokens a streamed text's prompt holds (the rest trail, one per frame): t0 for a
 * preset or x-vector voice; for an ICL voice, whose prompt lays X = rt ++ text ++ [EOS_T]
 * over the Lc = reference frames + 1 codec rows, enough to make X longer than Lc (then
 * the prompt is that of the whole text up to its Lc-th X row, and X's rest trails). */
static size_t prompt_text_tokens(const kz_prompt_spec *spec) {
    if (!spec->ref_codes) {
        return 1;
    }
    size_t lc = spec->n_ref_frames + 1;
    return lc > spec->n_ref_text + 1 ? lc - spec->n_ref_text : 1;
}

/* Streaming text: wait for the tokens the prompt holds (prompt_text_tokens) or the end of
 * the text; the prompt holds the role the text tokenized to and those tokens, or all of
 * a text that ended (then it is the prompt of the text given at once, in ICL also when X
 * is padded to Lc). The feed's ids are final ones, so the prompt is the complete text's. */
static kz_status first_text(synth *y) {
    kz_status st = kz_text_feed_need(&y->feed, 1);
    // Generation starts once the text holds more than whitespace, so text that turns out
    // to be only whitespace is refused as kz_synthesize refuses it, before any audio.
    while (st == KZ_OK && !y->feed.done && kz_text_feed_blank(&y->feed)) {
        st = kz_text_feed_need(&y->feed, y->feed.n_ids + 1);
    }
    size_t want = prompt_text_tokens(&y->spec);
    st = st == KZ_OK ? kz_text_feed_need(&y->feed, want) : st;
    if (st == KZ_OK && kz_text_feed_blank(&y->feed)) {
        st = kz_error_set(KZ_STATUS_BAD_INPUT, "the text is empty or only whitespace");
    } else if (st == KZ_OK && y->feed.n_ids == 0) {
        st = kz_error_set(KZ_STATUS_BAD_INPUT, "the streamed text gives no tokens to speak");
    }
    y->text_in_prompt = y->feed.done;
    y->spec.role_ids = y->feed.role;
    y->spec.text_ids = y->feed.ids;
    y->spec.n_text = y->feed.done ? y->feed.n_ids : want;
    return st;
}

static kz_status prefill_alone(void *arg) {
    synth *y = arg;
    kz_status st = kz_prompt_build(&y->prompt, &y->spec, &y->m->cfg, &y->m->talker,
                                   y->m->cp.embeddings, y->ts, &y->s->lm);
    if (st == KZ_OK) {
        observe(y, "prefill_rows", y->prompt.rows, y->prompt.n_rows,
                (size_t)y->m->talker.cfg.hidden_size);
        kz_prefill_run(y->s, y->ts, &y->prompt);
    }
    return st;
}

static kz_status prefill(synth *y) {
    double t0 = now_ms();
    y->req.job_cost = kz_prompt_rows(&y->spec, &y->m->talker);
    kz_status st = kz_session_lm_call(y->s, &y->req, KZ_SCHED_PROMPT, &y->s->lm, prefill_alone, y);
    y->s->stats.prefill_ms += now_ms() - t0;
    return st;
}

/* With a scheduler: marks the LM thread as waiting outside it (or back). */
static void outside(synth *y, bool out) {
    if (y->s->sched) {
        kz_sched_outside(y->s->sched, &y->req, out);
    }
}

/* The teacher-forced code of codebook g for the current frame, or -1. */
static int32_t forced(const synth *y, size_t g) {
    const kz_session *s = y->s;
    if (!s->forced_codes || y->n_frames >= s->n_forced) {
        return -1;
    }
    return s->forced_codes[(size_t)y->n_frames * y->groups + g];
}

/* KZ_STATUS_BAD_MODEL for non-finite values in `what` at the current frame. */
static kz_status nonfinite_error(const synth *y, const char *what) {
    return kz_error_set(KZ_STATUS_BAD_MODEL,
                        "non-finite values (NaN or Inf) in %s at frame %lld: the "
                        "computation overflows with this model's weights",
                        what, (long long)y->n_frames);
}

/* Picks c0 from the talker's logits (spec 8.5); -1 with lm_status set when they are not
 * finite. */
static int32_t pick_c0(synth *y) {
    double t0 = now_ms();
    const kz_talker_config *c = &y->m->talker.cfg;
    size_t V = (size_t)c->vocab_size;
    observe(y, "talker_logits", y->ts->logits, 1, V);
    if (kz_vector_first_nonfinite(y->ts->logits, V) < V) {
        y->lm_status = nonfinite_error(y, "the talker's logits");
        return -1;
    }
    memcpy(y->logits, y->ts->logits, V * sizeof(float));
    bool mask_eos = y->plan->frames > 0 || y->n_frames < 2 ||
                    (y->streaming_text && !y->feed.done);
    kz_logits_talker(y->logits, V, y->seen, y->plan->repetition_penalty, mask_eos,
                     c->codec_eos_token_id, c->first_control_id);
    int32_t c0 = forced(y, 0);
    c0 = c0 >= 0 ? c0 : kz_sample(y->logits, V, &y->plan->talker, &y->rng, y->scratch);
    y->seen[c0] = 1;
    y->s->stats.sampling_ms += now_ms() - t0;
    return c0;
}

/* Picks the code of the next codebook; a step with non-finite logits picks 0 and marks
 * the frame, which frame_step then refuses. */
static int32_t pick_cp(void *user, float *logits, size_t n) {
    synth *y = user;
    double t0 = now_ms();
    y->cp_step++;
    if (kz_vector_first_nonfinite(logits, n) < n) {
        y->cp_nonfinite = true;
        return 0;
    }
    int32_t code = forced(y, (size_t)y->cp_step);
    code = code >= 0 ? code : kz_sample(logits, n, &y->plan->cp, &y->rng, y->scratch);
    double dt = now_ms() - t0;
    y->s->stats.sampling_ms += dt;
    y->cp_sampling_ms += dt;
    return code;
}

static kz_status text_vector_alone(void *arg) {
    synth *y = arg;
    return kz_talker_text_vectors(&y->m->talker, y->ts, &y->s->lm,
                                  &y->feed.ids[y->feed_next], 1, y->tvec);
}

/* Text-track vector of text token `next` from the streamed text: T(t_next), EOS_T right
 * after the last token, PAD_T afterwards (the streaming layout). */
static kz_status streamed_text_vector(synth *y, size_t next, const float **out) {
    outside(y, true);
    kz_status st = kz_text_feed_need(&y->feed, next + 1);
    outside(y, false);
    if (st != KZ_OK) {
        return st;
    }
    if (next < y->feed.n_ids) {
        y->feed_next = next;
        y->req.job_cost = 0;
        st = kz_session_lm_call(y->s, &y->req, KZ_SCHED_SHORT, &y->s->lm,
                                text_vector_alone, y);
        *out = y->tvec;
    } else {
        *out = next == y->feed.n_ids ? y->prompt.eos : y->prompt.pad;
    }
    return st;
}

/* Next talker input: sum of the frame's num_code_groups embeddings + trailing text vector:
 * the prompt's trailing row f, or PAD_T past them. With streamed text not all in the prompt,
 * the prompt's last trailing row (its EOS_T) and the rows after it are the streamed text's
 * next tokens instead: frame f past the prompt's n_trailing - 1 known rows takes token
 * n_text + (f - (n_trailing - 1)). */
static kz_status feedback(synth *y) {
    const kz_model *m = y->m;
    size_t D = (size_t)m->talker.cfg.hidden_size, f = (size_t)y->n_frames;
    kz_talker_codec_vector(&m->talker, y->frame[0], y->input);
    for (size_t i = 1; i < y->groups; i++) {
        kz_matrix_row(&m->cp.embeddings[i - 1], (size_t)y->frame[i], y->emb);
        for (size_t k = 0; k < D; k++) {
            y->input[k] = y->input[k] + y->emb[k];
        }
    }
    const float *text = f < y->prompt.n_trailing ? y->prompt.trailing + f * D : y->prompt.pad;
    size_t known = y->prompt.n_trailing - 1;
    kz_status st = KZ_OK;
    if (y->streaming_text && !y->text_in_prompt && f >= known) {
        st = streamed_text_vector(y, y->spec.n_text + (f - known), &text);
    }
    if (st != KZ_OK) {
        return st;
    }
    for (size_t k = 0; k < D; k++) {
        y->input[k] = y->input[k] + text[k];
    }
    return KZ_OK;
}

/* Appends y->frame to the queue, waiting while it is full; false if cancelled. *completes:
 * the frame completes the chunk the codec waits for, its first one. */
static bool push_frame(synth *y, bool *completes) {
    frame_queue *q = &y->q;
    pthread_mutex_lock(&q->lock);
    // The scheduler's batches go on without it meanwhile. Its lock is taken under the
    // queue's here and never the other way round.
    const bool full = q->count == q->capacity;
    if (full) {
        outside(y, true);
    }
    while (q->count == q->capacity && !atomic_load(&y->cancel)) {
        pthread_cond_wait(&q->changed, &q->lock);
    }
    if (full) {
        outside(y, false);
    }
    bool ok = !atomic_load(&y->cancel);
    if (ok) {
        size_t slot = (q->head + q->count) % q->capacity;
        memcpy(q->codes + slot * y->groups, y->frame, y->groups * sizeof(int32_t));
        q->count++;
        *completes = !q->first_queued && q->want > 0 && q->count >= q->want;
        pthread_cond_broadcast(&q->changed);
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

/* With a scheduler, after the frame that completes the codec's first chunk: waits until
 * that chunk waits at the scheduler, where it goes before the next round, so the first
 * audio does not wait for this frame's talker step (nor for the other members' next
 * round). Outside the scheduler meanwhile, as for any wait on the codec. */
static void await_first_chunk(synth *y) {
    frame_queue *q = &y->q;
    pthread_mutex_lock(&q->lock);
    outside(y, true);
    while (!q->first_queued && !atomic_load(&y->cancel)) {
        pthread_cond_wait(&q->changed, &q->lock);
    }
    outside(y, false);
    pthread_mutex_unlock(&q->lock);
}

/* on_queued of the codec's first chunk (scheduler.h). */
static void first_chunk_queued(void *arg) {
    frame_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    q->first_queued = true;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
}

/* Turns: the LM stage waits until the codec neither computes nor has the frames it
 * waits for; false if cancelled. */
static bool lm_take_turn(synth *y) {
    frame_queue *q = &y->q;
    if (!y->s->turns) {
        return !atomic_load(&y->cancel);
    }
    pthread_mutex_lock(&q->lock);
    while ((q->codec_turn || q->codec_next || (q->want > 0 && q->count >= q->want)) &&
           !atomic_load(&y->cancel)) {
        pthread_cond_wait(&q->changed, &q->lock);
    }
    bool ok = !atomic_load(&y->cancel);
    q->lm_turn = ok;
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static void lm_end_turn(synth *y) {
    frame_queue *q = &y->q;
    if (y->s->turns) {
        pthread_mutex_lock(&q->lock);
        q->lm_turn = false;
        pthread_cond_broadcast(&q->changed);
        pthread_mutex_unlock(&q->lock);
    }
}

/* c0 was picked: predict codebooks 1.., queue the frame, run the talker step. */
static bool frame_step(synth *y, int32_t c0) {
    const kz_model *m = y->m;
    size_t D = (size_t)m->talker.cfg.hidden_size;
    y->frame[0] = c0;
    double t0 = now_ms();
    y->cp_sampling_ms = 0;
    y->cp_step = 0;
    y->cp_nonfinite = false;
    kz_talker_codec_vector(&m->talker, c0, y->emb);
    if (y->s->sched) {
        kz_sched_predict(y->s->sched, &y->req, &y->s->cp_state, y->ts->hidden, y->emb, pick_cp, y,
                         y->frame + 1, y->cp_logits);
    } else {
        kz_code_predictor_run(&m->cp, &y->s->cp_state, &y->s->cp, y->ts->hidden, y->emb, pick_cp,
                              y, y->frame + 1, y->cp_logits);
    }
    if (y->cp_nonfinite) {
        y->lm_status = nonfinite_error(y, "the code predictor's logits");
        return false;
    }
    if (y->cp_logits) {
        observe(y, "cp_logits", y->cp_logits, (size_t)m->cp.n_steps, (size_t)m->cp.cfg.vocab_size);
    }
    y->s->stats.code_predictor_ms += now_ms() - t0 - y->cp_sampling_ms;
    lm_end_turn(y);
    bool completes = false;
    if (!push_frame(y, &completes)) {
        return false;
    }
    if (completes && y->s->sched) {
        await_first_chunk(y);
    }
    y->lm_status = feedback(y);
    if (y->lm_status != KZ_OK) {
        return false;
    }
    y->n_frames++;
    y->s->stats.frames++;
    memcpy(y->emb, y->input, D * sizeof(float));
    if (!lm_take_turn(y)) {
        return false;
    }
    double t1 = now_ms();
    if (y->s->sched) {
        kz_sched_step(y->s->sched, &y->req, y->ts, y->emb);
    } else {
        kz_talker_forward(&m->talker, y->ts, &y->s->lm, y->emb, 1, 0);
    }
    y->s->stats.talker_ms += now_ms() - t1;
    return true;
}

/* Whether generation ends before frame n_frames: exact count, cap, or EOS. */
static bool finished(const synth *y, int32_t c0) {
    if (y->plan->frames > 0) {
        return y->n_frames >= y->plan->frames;
    }
    int64_t cap = y->plan->max_frames;
    if (y->streaming_text && y->feed.done) {
        // Once all text is known the runaway guard applies as for text given at once.
        int64_t guard = kz_request_runaway_guard(y->feed.n_ids);
        cap = guard < cap ? guard : cap;
    }
    return c0 == y->m->talker.cfg.codec_eos_token_id || y->n_frames >= cap;
}

static void *lm_thread(void *arg) {
    synth *y = arg;
    y->lm_status = y->streaming_text ? first_text(y) : KZ_OK;
    const bool member = y->lm_status == KZ_OK && y->s->sched &&
                        kz_sched_join(y->s->sched, &y->req, &y->cancel);
    bool turn = y->lm_status == KZ_OK && (member || !y->s->sched) && lm_take_turn(y);
    y->lm_status = turn ? prefill(y) : y->lm_status;
    while (turn && y->lm_status == KZ_OK && !atomic_load(&y->cancel)) {
        bool exact_done = y->plan->frames > 0 && y->n_frames >= y->plan->frames;
        int32_t c0 = exact_done ? -1 : pick_c0(y);
        if (exact_done || y->lm_status != KZ_OK || finished(y, c0)) {
            break;
        }
        // frame_step gives the turn back while it queues the frame and takes it again
        // for the talker step; on failure it may hold it or not.
        turn = frame_step(y, c0);
    }
    if (member) {
        kz_sched_leave(y->s->sched, &y->req);
    }
    if (y->lm_status != KZ_OK) {
        snprintf(y->lm_error, sizeof y->lm_error, "%s", kz_error_get());
    }
    pthread_mutex_lock(&y->q.lock);
    y->q.ended = true;
    y->q.lm_turn = false;
    pthread_cond_broadcast(&y->q.changed);
    pthread_mutex_unlock(&y->q.lock);
    return NULL;
}

/* --- codec stage (calling thread) ---------------------------------------------- */

/* Moves up to `want` frames into y->chunk, waiting for them (and, with
 * plan->exact_last, for one more) or for the end; *last is set when no frame will
 * follow. */
static size_t pop_frames(synth *y, size_t want, bool *last) {
    frame_queue *q = &y->q;
    const size_t wait_for = want + (y->plan->exact_last ? 1 : 0);
    pthread_mutex_lock(&q->lock);
    q->want = wait_for;
    while (q->count < wait_for && !q->ended) {
        pthread_cond_wait(&q->changed, &q->lock);
    }
    q->want = 0;
    size_t n = q->count < want ? q->count : want;
    for (size_t i = 0; i < n; i++) {
        memcpy(y->chunk + i * y->groups, q->codes + ((q->head + i) % q->capacity) * y->groups,
               y->groups * sizeof(int32_t));
    }
    q->head = (q->head + n) % q->capacity;
    q->count -= n;
    q->codec_next = y->s->turns && n > 0;
    *last = q->ended && q->count == 0;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    return n;
}

/* Turns: waits for the LM stage to finish its step, then holds the turn. */
static void codec_take_turn(synth *y) {
    frame_queue *q = &y->q;
    if (y->s->turns) {
        pthread_mutex_lock(&q->lock);
        while (q->lm_turn) {
            pthread_cond_wait(&q->changed, &q->lock);
        }
        q->codec_turn = true;
        q->codec_next = false;
        pthread_mutex_unlock(&q->lock);
    }
}

static void codec_end_turn(synth *y) {
    frame_queue *q = &y->q;
    if (y->s->turns) {
        pthread_mutex_lock(&q->lock);
        q->codec_turn = false;
        q->codec_next = false;
        pthread_cond_broadcast(&q->changed);
        pthread_mutex_unlock(&q->lock);
    }
}

static kz_status report_frames(synth *y, size_t n) {
    if (!y->plan->on_frame) {
        return KZ_OK;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t pos = y->n_decoded + (int64_t)i;
        if (!y->plan->on_frame(y->chunk + i * y->groups, (int32_t)y->groups, pos,
                               y->plan->frame_user)) {
            return kz_error_set(KZ_STATUS_CANCELLED,
                                "cancelled by the frame callback at frame %lld", (long long)pos);
        }
    }
    return KZ_OK;
}

/* The chunk's codec decode; with a scheduler on its thread and pool (the one pool computes
 * everything, and only this synthesis' codec thread, which waits, uses s->exec). */
static kz_status decode_alone(void *arg) {
    synth *y = arg;
    kz_session *s = y->s;
    kz_pool *own = s->exec.pool;
    s->exec.pool = s->sched ? kz_sched_pool(s->sched) : own;
    kz_codec_decode(&y->m->decoder, &s->codec, &s->exec, y->chunk, y->decode_n,
                    y->pcm + y->decode_lead);
    s->exec.pool = own;
    return KZ_OK;
}

static kz_status decode_chunk(synth *y, size_t n, bool last) {
    kz_status st = report_frames(y, n);
    if (st != KZ_OK) {
        return st;
    }
    const size_t spf = (size_t)y->m->codec_cfg.decode_upsample_rate;
    const size_t lead = y->n_decoded == 0 && n ? y->lead : 0;
    if (n) {
        codec_take_turn(y);
        y->decode_n = n;
        y->decode_lead = lead;
        y->codec_req.job_cost = n;
        y->codec_req.job_first = y->n_decoded == 0;
        y->codec_req.on_queued = y->n_decoded == 0 ? first_chunk_queued : NULL;
        y->codec_req.queued_arg = &y->q;
        kz_session_lm_call(y->s, &y->codec_req, KZ_SCHED_SHORT, NULL, decode_alone, y);
        codec_end_turn(y);
        y->s->codec_frames += (int64_t)n;
    }
    if (lead) {
        y->pcm[0] = y->lead_sample;
    }
    int64_t pos = y->n_decoded;
    y->n_decoded += (int64_t)n;
    size_t n_samples = n * spf + lead;
    st = kz_session_check_audio(y->pcm, n_samples, lead, pos, spf);
    if (st != KZ_OK) {
        return st;
    }
    double handed = now_ms();
    bool go_on = y->on_audio(y->pcm, n_samples, pos, last, y->audio_user);
    kz_pacer_delivered(&y->s->pacer, (int)n, handed, now_ms());
    if (!go_on) {
        return kz_error_set(KZ_STATUS_CANCELLED, "cancelled by the audio callback at frame %lld",
                            (long long)pos);
    }
    return KZ_OK;
}

/* Frames of the next chunk: the first chunk of the stream (and, with fixed chunks,
 * of each utterance) first_chunk_frames, then chunk_frames or the pacer's choice. */
static size_t next_chunk(const synth *y) {
    const kz_plan *p = y->plan;
    if (p->chunk_frames == 0) {
        return y->s->pacer.started ? (size_t)kz_pacer_next(&y->s->pacer, now_ms())
                                   : (size_t)p->first_chunk_frames;
    }
    return (size_t)(y->n_decoded == 0 ? p->first_chunk_frames : p->chunk_frames);
}

/* The codec's state at the first frame: fresh, or after an ICL voice's reference frames
 * (then the audio starts at the official cut, which needs the frame count: known in
 * advance only with an exact count, else the cut is taken at the first new frame; an
 * utterance of long text (exact_last) is not an official output, and a reference sample
 * between two utterances would be noise, so it starts at its first frame too). */
static kz_status codec_start(synth *y) {
    const kz_voice *v = y->plan->voice;
    if (!v || !v->icl) {
        kz_codec_state_reset(&y->s->codec);
        return KZ_OK;
    }
    kz_status st = kz_voice_context_enter(y->s, v, &y->lead_sample);
    if (y->plan->frames > 0 && !y->plan->exact_last) {
        y->lead = kz_voice_cut_lead((size_t)v->n_ref_frames, (size_t)y->plan->frames,
                                    (size_t)y->m->codec_cfg.decode_upsample_rate);
    }
    return st;
}

static kz_status consume(synth *y) {
    bool last = false;
    kz_status st = KZ_OK;
    while (st == KZ_OK && !last) {
        size_t n = pop_frames(y, next_chunk(y), &last);
        if (n == 0 && y->n_decoded == 0 && last) {
            break; // nothing generated: the LM stage failed
        }
        st = decode_chunk(y, n, last);
    }
    return st;
}

static void cancel_lm(synth *y) {
    pthread_mutex_lock(&y->q.lock);
    atomic_store(&y->cancel, true);
    pthread_cond_broadcast(&y->q.changed);
    pthread_mutex_unlock(&y->q.lock);
    if (y->s->sched) {
        kz_sched_wake(y->s->sched); // it may wait for a place in the batch
    }
}

kz_status kz_synth_run(kz_session *s, const kz_plan *plan, kz_audio_fn on_audio, void *user) {
    synth y = {.s = s, .plan = plan, .m = s->model, .on_audio = on_audio, .audio_user = user};
    kz_status st = setup(&y);
    s->exec.pool = s->codec_pool;
    st = st == KZ_OK ? codec_start(&y) : st;
    pthread_t lm;
    const int err = st == KZ_OK ? pthread_create(&lm, NULL, lm_thread, &y) : 0;
    if (err != 0) { // EAGAIN: out of memory for its stack, or of threads
        st = kz_error_set(err == EAGAIN ? KZ_STATUS_OUT_OF_MEMORY : KZ_STATUS_INTERNAL,
                          "cannot start the synthesis thread: %s", strerror(err));
    } else if (st == KZ_OK) {
        st = consume(&y);
        if (st != KZ_OK) {
            cancel_lm(&y);
        }
        pthread_join(lm, NULL);
        if (st == KZ_OK && y.lm_status != KZ_OK) {
            st = kz_error_set(y.lm_status, "%s", y.lm_error);
        } else if (st == KZ_OK && y.n_frames == 0) {
            st = kz_error_set(KZ_STATUS_INTERNAL, "no frame generated");
        }
    }
    s->exec.pool = s->pool;
    teardown(&y);
    return st;
}
