/*
 * voice_context.h - the codec's left context of an in-context (ICL) cloned voice.
 *
 * The official generate_voice_clone decodes concat(reference codes, new codes) and cuts
 * the reference's audio off. The codec is causal, so decoding the reference frames first
 * and carrying the state gives the new frames' audio bit for bit; the session keeps the
 * state after the reference of its KZ_VOICE_CONTEXTS most recent ICL voices (keyed by
 * the reference codes themselves, so a voice freed and another allocated at the same
 * address cannot be confused; a few MB each with the released codec) and restores it for
 * the next synthesis with that voice instead of decoding the reference again.
 *
 *   enter(voice): a saved context has the same codes? -> restore the codec state
 *                 else reset, run the reference through the codec (all of it through the
 *                 transformer, its last kz_codec_back_frames frames through the vocoder
 *                 too: the same state as decoding all of it; audio dropped but its last
 *                 sample), save the state in the least recently used slot
 *
 * The cut (spec 8.4): cut = trunc(Tr / (Tr + F) * wav_len) in IEEE double, wav_len =
 * (Tr + F) * samples_per_frame, which for some (Tr, F) is one sample before the first new
 * frame's audio: that sample is the reference audio's last one, which the context keeps.
 */
#ifndef KZ_VOICE_CONTEXT_H
#define KZ_VOICE_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

#define KZ_VOICE_CONTEXTS 4

typedef struct kz_voice_context {
    int32_t *codes; /* [n_codes] the reference codes the state follows (the key), owned */
    size_t n_codes;
    float *state; /* [n_state] kz_codec_state_save's floats, owned */
    size_t n_state;
    int64_t pos;       /* the codec transformer's position after the reference */
    float last_sample; /* the reference audio's last sample */
    uint64_t last_use; /* clock value of the last enter */
    bool valid;
} kz_voice_context;

/* A session's contexts. */
typedef struct kz_voice_contexts {
    kz_voice_context slot[KZ_VOICE_CONTEXTS];
    uint64_t clock;
} kz_voice_contexts;

struct kz_session;
struct kz_voice;

/* Forgets every context. */
void kz_voice_contexts_clear(kz_voice_contexts *c);

/* Sets the session's codec state to "after voice's reference frames" (decoding them on
 * s->exec when the session has no saved context for them); *last_sample (may be NULL)
 * gets the reference audio's last sample. */
kz_status kz_voice_context_enter(struct kz_session *s, const struct kz_voice *voice,
                                 float *last_sample);

/* Samples of the reference's audio before the first new frame that the official cut keeps
 * (0 or 1) for n_ref reference frames and n_new new ones. */
size_t kz_voice_cut_lead(size_t n_ref, size_t n_new, size_t samples_per_frame);

#endif
