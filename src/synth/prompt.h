/*
 * prompt.h - the talker's input rows for one utterance (spec 8.1-8.2).
 *
 *   [instruction rows]  T(id) for <|im_start|>user\n{instruct}<|im_end|>\n    (text track only)
 *   role rows (3)       T(<|im_start|>), T(assistant), T(\n)
 *   tag rows (L-1)      PAD_T + C(tag)..., BOS_T + C(codec_pad)
 *                       tags: auto -> nothink, think_bos, think_eos;
 *                             language -> think, think_bos, lang, think_eos;
 *                       then the speaker (CustomVoice: C(id); Base: the voice's x-vector
 *                       row itself), codec_pad, codec_bos
 *   body                non-streaming: T(t_i) + C(pad) for every text token, EOS_T + C(pad),
 *                                      PAD_T + C(bos);              trailing text: [PAD_T]
 *                       streaming:     T(t_0) + C(bos);             trailing text: T(t_1..), EOS_T
 *   ICL body (Base voice with reference codes, spec 8.4):
 *                       X = T(rt ++ text) ++ [EOS_T]   (rt: the reference transcript's tokens)
 *                       Y = [C(bos)] ++ [E(ref frame t)]  (E: sum of a frame's G code embeddings)
 *                       non-streaming: X[t] + C(pad) for all t, then Y[t] + PAD_T for all t;
 *                                      trailing text: [PAD_T]
 *                       streaming:     X[t] + Y[t] for t < len(Y), X right-padded with PAD_T
 *                                      when shorter; trailing text: X[len(Y):] or [PAD_T]
 * Generated frame f's input is the sum of its 16 code embeddings plus
 * trailing[f] (or PAD_T once the trailing text is used up).
 *
 * The prefix (rows that depend only on the voice, never on the text) is the role and tag
 * rows, and in ICL also the leading X[t] rows of the transcript (t < len(rt)), up to the
 * row before the last: the session's prompt cache keeps their keys and values.
 */
#ifndef KZ_PROMPT_H
#define KZ_PROMPT_H

#include <stdbool.h>

#include "model/talker.h"

typedef struct kz_prompt_spec {
    const int32_t *role_ids;     /* [3] role tokens (normally <|im_start|> assistant \n) */
    const int32_t *text_ids;     /* user text tokens */
    size_t n_text;               /* >= 1 */
    const int32_t *instruct_ids; /* whole instruction string tokens, or NULL */
    size_t n_instruct;
    int32_t language_id;         /* codec id of the language tag, or -1 for auto */
    int32_t speaker_id;          /* codec id of the speaker, or -1 for none */
    const float *speaker_vec;    /* Base: the voice's x-vector [D] in the speaker slot, or
                                    NULL (then speaker_id applies) */
    const int32_t *ref_text_ids; /* ICL: the reference transcript's tokens rt */
    size_t n_ref_text;
    const int32_t *ref_codes;    /* ICL: reference codes [n_ref_frames, groups] (each checked
                                    to be in range), or NULL for no ICL block */
    size_t n_ref_frames;         /* >= 1 with ref_codes */
    bool streaming;              /* streaming-text layout */
} kz_prompt_spec;

typedef struct kz_prompt {
    float *rows;        /* [n_rows, D] prefill rows, owned */
    size_t n_rows;
    size_t n_prefix;    /* leading rows that do not depend on the text (instruction, role,
                           tags): the rest, the body, is at least one row */
    float *trailing;    /* [n_trailing, D] text vectors added to generated frames, owned */
    size_t n_trailing;
    float *pad;         /* [D] PAD_T, added once trailing is exhausted, owned */
    float *eos;         /* [D] EOS_T (end of text), owned */
} kz_prompt;

/* Number of prefill rows spec would produce. */
size_t kz_prompt_rows(const kz_prompt_spec *spec, const kz_talker *t);

/* Builds the prompt; uses the talker state's text scratch (max_tok >= the longest
 * text run). cp_embeddings: the code predictor's embeddings of codebooks 1.. (for the
 * reference frames of an ICL prompt; may be NULL without one). */
kz_status kz_prompt_build(kz_prompt *p, const kz_prompt_spec *spec, const kz_tts_config *cfg,
                          const kz_talker *t, const kz_matrix *cp_embeddings,
                          kz_talker_state *s, kz_exec *e);
void kz_prompt_free(kz_prompt *p);

#endif
