/*
 * talker.h - the Qwen3-TTS talker: prompt rows -> 28-layer Qwen3 stack ->
 * codebook-0 logits, one step per 80 ms frame.
 *
 *   text id  -> text_embedding [text_hidden] -> text_projection (fc1, SiLU, fc2) -> T(id) [D]
 *   codec id -> codec_embedding -> C(id) [D]
 *   rows [n, D] -> layers (talker.model.layers.*) -> final norm -> h [D] -> codec_head -> [vocab_size]
 * Tensor names: talker.model.{text_embedding,codec_embedding,layers.*,norm},
 * talker.text_projection.linear_fc{1,2}.{weight,bias}, talker.codec_head.weight.
 * Upstream: Qwen3TTSTalkerForConditionalGeneration. Trap: text_projection has
 * biases while no decoder-layer projection does.
 */
#ifndef KZ_TALKER_H
#define KZ_TALKER_H

#include "layers/transformer.h"
#include "model/config.h"

typedef struct kz_talker {
    kz_talker_config cfg;
    kz_matrix text_embedding; /* [text_vocab, text_hidden] */
    kz_matrix fc1, fc2;       /* [text_hidden, text_hidden], [D, text_hidden] */
    float *fc1_b, *fc2_b;     /* owned */
    kz_matrix codec_embedding;/* [vocab, D] */
    kz_matrix codec_head;     /* [vocab, D] */
    kz_qwen3_stack stack;
} kz_talker;

/* Per-utterance talker state: KV cache and the outputs of the last step. */
typedef struct kz_talker_state {
    kz_qwen3_state seq;
    float *hidden;     /* [D] final-norm hidden state of the last row */
    float *logits;     /* [vocab] */
    float *text_tmp;   /* [max_tok, text_hidden] x 2 */
} kz_talker_state;

kz_status kz_talker_load(kz_talker *t, const kz_weights *f, const kz_talker_config *cfg);
void kz_talker_free(kz_talker *t);

kz_status kz_talker_state_init(kz_talker_state *s, const kz_talker *t, size_t max_pos,
                               size_t max_tok);
void kz_talker_state_free(kz_talker_state *s);

/* out[n, D] = T(ids[i]) for n <= max_tok ids (each id < text vocab). KZ_STATUS_BAD_MODEL
 * when an embedding row holds NaN or Inf: the load does not scan the text embedding (read a
 * row at a time, most rows never), so each row is checked as it is read. */
kz_status kz_talker_text_vectors(const kz_talker *t, kz_talker_state *s, kz_exec *e,
                                 const int32_t *ids, size_t n, float *out);

/* out[D] = C(id). */
void kz_talker_codec_vector(const kz_talker *t, int32_t id, float *out);

/* Appends rows x[n, D] (overwritten) to the sequence; leaves the last row's
 * final-norm hidden state in s->hidden and its logits in s->logits. split: as in
 * kz_qwen3_forward (0 = none). */
void kz_talker_forward(const kz_talker *t, kz_talker_state *s, kz_exec *e, float *x, size_t n,
                       size_t split);

/* Scratch of batched talker steps (kz_talker_step_batch) for up to max_seq requests. */
typedef struct kz_talker_batch {
    size_t max_seq;
    kz_qwen3_batch rows;   /* the stack's scratch */
    kz_qwen3_state **seqs; /* [max_seq] the requests' stack states */
    float *hidden;         /* [max_seq, D] */
    float *logits;         /* [max_seq, vocab] */
} kz_talker_batch;

kz_status kz_talker_batch_init(kz_talker_batch *b, const kz_talker *t, size_t max_seq);
void kz_talker_batch_free(kz_talker_batch *b);

/* One frame step of n_seq independent requests at once (continuous batching): request i's
 * input row x[i * D .. i * D + D - 1] (x [n_seq, D], overwritten) is appended to s[i]'s
 * sequence, and s[i]->hidden and s[i]->logits are, bit for bit, what
 * kz_talker_forward(t, s[i], e, its row, 1, 0) leaves there, for any n_seq <= max_seq and
 * any mix of positions; each weight matrix is read from memory once for the batch. */
void kz_talker_step_batch(const kz_talker *t, kz_talker_state *const *s, size_t n_seq,
                          kz_talker_batch *b, kz_exec *e, float *x);

#endif
