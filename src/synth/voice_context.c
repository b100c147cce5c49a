/*
 * voice_context.c - the codec state after an ICL voice's reference frames (see
 * voice_context.h): built once by running the reference through the codec (the vocoder
 * only over its last frames, kz_codec_back_frames), saved in the session, restored.
 */
#include "synth/voice_context.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "synth/session.h"
#include "synth/voice.h"

static void context_free(kz_voice_context *c) {
    free(c->codes);
    free(c->state);
    memset(c, 0, sizeof *c);
}

void kz_voice_contexts_clear(kz_voice_contexts *c) {
    for (int i = 0; i < KZ_VOICE_CONTEXTS; i++) {
        context_free(&c->slot[i]);
    }
}

static bool matches(const kz_voice_context *c, const kz_voice *v) {
    size_t n = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    return c->valid && c->n_codes == n && memcmp(c->codes, v->ref_codes, n * sizeof *c->codes) == 0;
}

/* Decodes the reference from a fresh state and saves the state after it into c. */
static kz_status build(kz_session *s, const kz_voice *v, kz_voice_context *c) {
    const kz_model *m = s->model;
    const size_t spf = (size_t)m->codec_cfg.decode_upsample_rate, nq = (size_t)v->n_codebooks;
    const size_t step = KZ_CODEC_STEP_FRAMES, n_frames = (size_t)v->n_ref_frames;
    context_free(c);
    c->n_codes = n_frames * nq;
    c->n_state = kz_codec_state_floats(&s->codec);
    c->codes = malloc(c->n_codes * sizeof *c->codes);
    c->state = malloc((c->n_state ? c->n_state : 1) * sizeof *c->state);
    float *pcm = malloc(step * spf * sizeof *pcm);
    if (!c->codes || !c->state || !pcm) {
        free(pcm);
        context_free(c);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the voice's codec context");
    }
    memcpy(c->codes, v->ref_codes, c->n_codes * sizeof *c->codes);
    kz_codec_state_reset(&s->codec);
    // The frames before the last kz_codec_back_frames reach the end state only through
    // the transformer: they skip the vocoder (the same state, bit for bit).
    size_t back = kz_codec_back_frames(&m->decoder, &s->codec);
    size_t skip = n_frames > back ? n_frames - back : 0;
    kz_codec_advance(&m->decoder, &s->codec, &s->exec, v->ref_codes, skip);
    for (size_t t = skip; t < n_frames; t += step) {
        size_t n = n_frames - t < step ? n_frames - t : step;
        kz_codec_decode(&m->decoder, &s->codec, &s->exec, v->ref_codes + t * nq, n, pcm);
        s->codec_frames += (int64_t)n;
        c->last_sample = pcm[n * spf - 1];
    }
    free(pcm);
    kz_codec_state_save(&s->codec, c->state, &c->pos);
    c->valid = true;
    return KZ_OK;
}

/* The context of voice's reference, or NULL; *lru gets the slot to use otherwise (an
 * empty one, else the least recently used). */
static kz_voice_context *find(kz_voice_contexts *all, const kz_voice *v, kz_voice_context **lru) {
    *lru = NULL;
    for (int i = 0; i < KZ_VOICE_CONTEXTS; i++) {
        kz_voice_context *c = &all->slot[i];
        if (matches(c, v)) {
            return c;
        }
        bool better = !*lru || (!c->valid && (*lru)->valid) ||
                      (c->valid && (*lru)->valid && c->last_use < (*lru)->last_use);
        *lru = better ? c : *lru;
    }
    return NULL;
}

kz_status kz_voice_context_enter(kz_session *s, const kz_voice *voice, float *last_sample) {
    kz_voice_context *lru, *c = find(&s->voice_ctx, voice, &lru);
    kz_status st = KZ_OK;
    if (c) {
        kz_codec_state_restore(&s->codec, c->state, c->pos);
    } else {
        c = lru;
        st = build(s, voice, c);
    }
    c->last_use = ++s->voice_ctx.clock;
    if (st == KZ_OK && last_sample) {
        *last_sample = c->last_sample;
    }
    return st;
}

size_t kz_voice_cut_lead(size_t n_ref, size_t n_new, size_t samples_per_frame) {
    // As the official wrapper: int(ref_len / max(total_len, 1) * wav.shape[0]) in double.
    size_t total = n_ref + n_new;
    double wav_len = (double)(total * samples_per_frame);
    double cut = trunc((double)n_ref / (double)(total ? total : 1) * wav_len);
    double start = (double)(n_ref * samples_per_frame);
    // The double's error is far below one sample, so the cut is start or start - 1.
    return cut < start ? 1 : 0;
}
