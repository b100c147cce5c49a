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
    bool first_utterance, last_utterance;
    float *buf;              /* [cap] faded copy of a callback buffer */
    size_t cap;
} joiner;

static float fade_gain(size_t i) {
    return 0.5f - 0.5f * cosf(3.14159265358979f * (float)i / (float)KZ_JOIN_FADE_SAMPLES);
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
    for (size_t i = 0; !j->first_utterance && j->samples_here + i < KZ_JOIN_FADE_SAMPLES && i < n;
         i++) {
        j->buf[i] *= fade_gain(j->samples_here + i);
    }
    if (last && !j->last_utterance) {
        // Fade out: the final sample gets gain 0, like the next utterance's first.
        size_t fade = n < KZ_JOIN_FADE_SAMPLES ? n : KZ_JOIN_FADE_SAMPLES;
        for (size_t i = 0; i < fade; i++) {
            j->buf[n - 1 - i] *= fade_gain(i);
        }
    }
    j->samples_here += n;
    j->frames_here = pos + (int64_t)(n / j->samples_per_frame);
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

/* Speaks text[span] as one utterance through the joiner. */
static kz_status speak_span(kz_session *s, const kz_request *r, const kz_span *span, size_t index,
                            joiner *j, char *piece) {
    memcpy(piece, r->text + span->begin, span->end - span->begin);
    piece[span->end - span->begin] = '\0';
    kz_request one = *r;
    one.text = piece;
    one.seed = r->seed + index;
    one.on_frame = r->on_frame ? join_frame : NULL;
    one.user = j; // for join_frame; the audio goes to join_audio with j explicitly
    kz_plan plan;
    kz_plan_ids ids;
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
    joiner j = {.on_audio = on_audio, .audio_user = user, .on_frame = r->on_frame,
                .frame_user = r->user, .first_utterance = true,
                .samples_per_frame = (size_t)s->model->codec_cfg.decode_upsample_rate};
    kz_status st = spans && piece ? KZ_OK
                                  : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == KZ_OK) {
        kz_sentences_split(r->text, n_bytes, max, spans, n_spans);
    }
    for (size_t i = 0; i < n_spans && st == KZ_OK; i++) {
        j.last_utterance = i + 1 == n_spans;
        st = speak_span(s, r, &spans[i], i, &j, piece);
        j.first_utterance = false;
    }
    free(j.buf);
    free(spans);
    free(piece);
    return st;
}
