/*
 * synth.h - one utterance from a validated request: prompt -> talker prefill ->
 * per frame (sample c0, code predictor, feedback embedding, talker step) ->
 * codec decode in chunks -> audio callback.
 */
#ifndef KZ_SYNTH_H
#define KZ_SYNTH_H

#include "synth/prompt.h"
#include "synth/sampler.h"
#include "synth/session.h"
#include "synth/voice.h"

/* A request resolved to ids and numbers (kztts.c checks and fills it). */
typedef struct kz_plan {
    kz_prompt_spec prompt;
    const kz_voice *voice;      /* Base: the cloned voice (its x-vector and ICL block are in
                                   prompt); with reference codes the codec decodes them first
                                   as left context and the audio starts at the official cut
                                   (synth.c, voice_context.h). NULL otherwise */
    kz_sampling talker, cp;
    float repetition_penalty;
    uint64_t seed;
    int32_t frames;       /* exact count, or 0 */
    int32_t max_frames;   /* >= 1 */
    int32_t first_chunk_frames; /* frames of the first audio callback */
    int32_t chunk_frames;       /* frames per later audio callback; 0: the session's pacer
                                   sizes every chunk after the stream's first (chunk_pacer.h) */
    bool exact_last;            /* hold each chunk until the frame after it (or the end) is
                                   known, so the final callback has audio (long_text.c fades it) */
    kz_frame_fn on_frame;
    void *frame_user;
    kz_text_pull_fn text_pull; /* streaming text input, or NULL */
    void *text_user;
    kz_split_mode split;
} kz_plan;

kz_status kz_synth_run(kz_session *s, const kz_plan *plan, kz_audio_fn on_audio, void *user);

#endif
