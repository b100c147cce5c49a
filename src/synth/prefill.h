/*
 * prefill.h - a prompt into the talker through the session's prompt cache.
 *
 *   prompt rows [n, D] = prefix (instruction, role, tags) + body (text)
 *     prefix cached:  saved keys and values -> talker cache; forward(body)
 *     not cached:     forward(all rows, split at the prefix) -> keep the prefix's
 *                     keys and values (prompt_cache.h)
 * The body gets the same bits either way (kz_qwen3_forward's split), so the codes
 * never depend on the cache. kz_prefill_prepare fills the cache for a voice ahead
 * of its first request.
 */
#ifndef KZ_PREFILL_H
#define KZ_PREFILL_H

#include "synth/prompt.h"
#include "synth/session.h"

/* Runs prompt p (rows overwritten) on the empty talker state ts: leaves the last
 * row's logits in ts->logits and counts the rows in s->stats. */
void kz_prefill_run(kz_session *s, kz_talker_state *ts, kz_prompt *p);

/* Computes and keeps the prefix of the prompt spec describes (the text, at least one
 * token, is built into the prompt but not run), unless the session has it already. */
kz_status kz_prefill_prepare(kz_session *s, const kz_prompt_spec *spec);

#endif
