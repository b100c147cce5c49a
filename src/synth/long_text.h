/*
 * long_text.h - text longer than a request's max_utterance_bytes, spoken as
 * back-to-back utterances in one audio stream.
 *
 *   text -> kz_sentences_split (sentence ends, packed up to the limit)
 *        -> per utterance: resolve + kz_synth_run (fresh LM and codec state)
 *        -> joiner: 10 ms raised-cosine fade-out at the end of each utterance and
 *           fade-in at the start of the next (both reach exactly 0 at the join,
 *           so the stream has no step), frame positions continued, is_last only
 *           on the final buffer.
 * The request's frames and max_frames count over all utterances: each utterance may
 * take the frames still left (and at most its own runaway guard), the one that reaches
 * the total ends the stream (the text after it is not spoken), and with frames the last
 * utterance is held to exactly the frames left (end of speech masked) so the request has
 * exactly that many.
 * Memory per utterance is freed before the next, so it does not grow with the
 * text beyond the text itself and the span list.
 */
#ifndef KZ_LONG_TEXT_H
#define KZ_LONG_TEXT_H

#include "synth/session.h"

/* Join fade length in ms, in samples at the model's sample rate. */
#define KZ_JOIN_FADE_MS 10

/* True when r->text should go through kz_long_text_run. */
bool kz_long_text_wanted(const kz_request *r);

kz_status kz_long_text_run(kz_session *s, const kz_request *r, kz_audio_fn on_audio, void *user);

#endif
