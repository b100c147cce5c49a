/*
 * long_text.c - back-to-back utterances for long text (see long_text.h).
 */
#include "synth/long_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "synth/request.h"
#include "text/sentences.h"

typedef struct joiner {
    kz_audio_fn on_audio;
    void *audio_user;
    kz_frame_fn on_frame;
    void *frame_user;
    int64_t frame_offset;    /* frames of the utterances already spoken */
    int64_t frames_here;     /* frames of the current utterance delivered */
    size_t samples_here;     /* samples of the current utterance delivered */
    size_t samples_per_frame; /* the codec's decode_upsample_rate */
    size_t fade_samples;     /* KZ_JOIN_FADE_MS at the codec's output_sample_rate, >= 1 */
    int64_t total;           /* the request's frames or max_frames over all utterances (0:
                                none): the utterance that reaches it is the last one */
    bool first_utterance, last_utterance;
    float *buf;              /* [cap] faded copy of a callback buffer */
    size_t cap;
} joiner;

static float fade_gain(const joiner *j, size_t i) {
    return 0.5f - 0.5f * cosf(3.14159265358979f * (float)i / (float)j->fade_samples);
}

/* Whether the utterances so far, the current one included, made the request's total. */
static bool total_reached(const joiner *j) {
    return j->total > 0 && j->frame_offset + j->frames_here >= j->total;
}

static bool join_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    joiner *j = user;
    if (n > j->cap) {
        float *b = realloc(j->buf, n * sizeof *b);
        if (!b) {
            return false;
        }
        j->buf = b;
        j->cap = n;
    }
    memcpy(j->buf, pcm, n * sizeof *pcm);
    for (size_t i = 0; !j->first_utterance && j->samples_here + i < j->fade_samples && i < n;
         i++) {
        j->buf[i] *= fade_gain(j, j->samples_here + i);
    }
    j->samples_here += n;
    j->frames_here = pos + (int64_t)(n / j->samples_per_frame);
    if (last && total_reached(j)) {
        j->last_utterance = true;
    }
    if (last && !j->last_utterance) {
        // Fade out: the final sample gets gain 0, like the next utterance's first.
        size_t fade = n < j->fade_samples ? n : j->fade_samples;
        for (size_t i = 0; i < fade; i++) {
            j->buf[n - 1 - i] *= fade_gain(j, i);
        }
    }
    return j->on_audio(j->buf, n, j->frame_offset + pos, last && j->last_utterance,
                       j->audio_user);
}

static bool join_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    joiner *j = user;
    return j->on_frame(codes, n, j->frame_offset + pos, j->frame_user);
}

bool kz_long_text_wanted(const kz_request *r) {
    return r->text && !r->text_pull && r->max_utterance_bytes > 0 &&
           strlen(r->text) > (size_t)r->max_utterance_bytes;
}

/* Copies text[span] into piece as a NUL-terminated string. */
static void copy_span(const kz_request *r, const kz_span *span, char *piece) {
    memcpy(piece, r->text + span->begin, span->end - span->begin);
    piece[span->end - span->begin] = '\0';
}

/* Resolves, before anything is spoken, each utterance whose prompt could pass
 * KZ_MAX_PROMPT_TOKENS, so a too long one fails the request up front rather than after
 * the audio of the ones before it. NFC makes UTF-8 text at most 3 times longer and every
 * token holds at least one byte, so shorter utterances (all of them with the default split
 * and a short instruction) need no second tokenization. */
static kz_status check_long_spans(kz_session *s, const kz_request *r, const kz_span *spans,
                                  size_t n_spans, char *piece) {
    size_t instruct_bytes = r->instruct ? strlen(r->instruct) : 0;
    kz_status st = KZ_OK;
    for (size_t i = 0; i < n_spans && st == KZ_OK; i++) {
        if (3 * (spans[i].end - spans[i].begin + instruct_bytes) <= KZ_MAX_PROMPT_TOKENS) {
            continue;
        }
        copy_span(r, &spans[i], piece);
        kz_request one = *r;
        one.text = piece;
        kz_plan plan;
        kz_plan_ids ids;
        st = kz_request_resolve(s->model, &one, &plan, &ids);
        kz_plan_ids_free(&ids);
    }
    return st;
}

/* Speaks text[span] as one utterance through the joiner. */
static kz_status speak_span(kz_session *s, const kz_request *r, const kz_span *span, size_t index,
                            joiner *j, char *piece) {
    copy_span(r, span, piece);
    kz_request one = *r;
    one.text = piece;
    one.seed = r->seed + index;
    // frames and max_frames count over the whole request: each utterance may take what
    // is left, and only the last one is held to an exact count.
    int64_t left = j->total - j->frame_offset;
    bool exact = r->frames > 0 && j->last_utterance;
    one.frames = exact ? (int32_t)left : 0;
    one.max_frames = j->total > 0 && !exact ? (int32_t)left : 0;
    one.on_frame = r->on_frame ? join_frame : NULL;
    one.user = j; // for join_frame; the audio goes to join_audio with j explicitly
    kz_plan plan;
    kz_plan_ids ids;
    // The frames left are a cap: an utterance that never ends its speech still stops at
    // its own runaway guard (kz_request_resolve), leaving the rest of the text its frames.
    kz_status st = kz_request_resolve(s->model, &one, &plan, &ids);
    if (st == KZ_OK) {
        plan.exact_last = true; // join_audio fades the final buffer out
        j->samples_here = 0;
        j->frames_here = 0;
        st = kz_synth_run(s, &plan, join_audio, j);
        j->frame_offset += j->frames_here;
        kz_plan_ids_free(&ids);
    }
    return st;
}

kz_status kz_long_text_run(kz_session *s, const kz_request *r, kz_audio_fn on_audio, void *user) {
    size_t n_bytes = strlen(r->text), max = (size_t)r->max_utterance_bytes;
    size_t n_spans = kz_sentences_split(r->text, n_bytes, max, NULL, 0);
    if (n_spans == 0) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "the text is empty or only whitespace");
    }
    kz_span *spans = malloc(n_spans * sizeof *spans);
    char *piece = malloc(n_bytes + 1);
    const kz_codec_config *codec = &s->model->codec_cfg;
    size_t fade = (size_t)codec->output_sample_rate * KZ_JOIN_FADE_MS / 1000;
    joiner j = {.on_audio = on_audio, .audio_user = user, .on_frame = r->on_frame,
                .frame_user = r->user, .first_utterance = true,
                .samples_per_frame = (size_t)codec->decode_upsample_rate,
                .fade_samples = fade > 0 ? fade : 1,
                .total = r->frames > 0 ? r->frames : r->max_frames};
    kz_status st = spans && piece ? KZ_OK
                                  : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == KZ_OK) {
        kz_sentences_split(r->text, n_bytes, max, spans, n_spans);
        st = check_long_spans(s, r, spans, n_spans, piece);
    }
    for (size_t i = 0; i < n_spans && st == KZ_OK && !j.last_utterance; i++) {
        j.last_utterance = i + 1 == n_spans;
        st = speak_span(s, r, &spans[i], i, &j, piece);
        j.first_utterance = false;
    }
    free(j.buf);
    free(spans);
    free(piece);
    return st;
}
