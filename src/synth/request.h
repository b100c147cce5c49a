/*
 * request.h - checking a public kz_request and resolving it into a kz_plan:
 * text -> token ids (wrapped in the chat template and sliced as the official
 * model does), speaker and language names -> codec ids (dialect override),
 * instruction handling per model type, sampling values and frame limits.
 */
#ifndef KZ_REQUEST_H
#define KZ_REQUEST_H

#include "synth/synth.h"

/* Most tokens one utterance's prompt may have (its text and instruction together): the
 * prefill's attention, and each frame's, grows with the prompt, the prefill's with its
 * square; about the longest text max_new_tokens frames can speak. Longer text is split into
 * utterances (kz_request.max_utterance_bytes) before the cap applies. */
#define KZ_MAX_PROMPT_TOKENS 2048

/* The runaway guard: the most frames an utterance of n_text text tokens takes when the
 * request sets no limit, 50 + 8 per token (kztts.h kz_request.max_frames). */
int64_t kz_request_runaway_guard(size_t n_text);

/* Owned id buffers behind a plan. */
typedef struct kz_plan_ids {
    int32_t *text, *instruct; /* malloc'ed or NULL */
    int32_t *ref_text;        /* ICL: the reference transcript's tokens, malloc'ed or NULL */
    int32_t role[3];
} kz_plan_ids;

/* out = r with every field whose 0 means "the default" (kztts.h kz_request) set to m's
 * default (m NULL or codec-only: the official wrapper's fallbacks); other fields as in
 * r. Idempotent; out may be r. */
void kz_request_fill_defaults(const kz_model *m, const kz_request *r, kz_request *out);

/* Validates r (its defaults filled in first) against model m and fills plan (pointing
 * into ids). Every
 * problem is KZ_STATUS_INVALID_ARGUMENT / BAD_INPUT / UNSUPPORTED with a message
 * that lists the valid choices where there are some; a prompt over
 * KZ_MAX_PROMPT_TOKENS is KZ_STATUS_BAD_INPUT. */
kz_status kz_request_resolve(const kz_model *m, const kz_request *r, kz_plan *plan,
                             kz_plan_ids *ids);

void kz_plan_ids_free(kz_plan_ids *ids);

#endif
