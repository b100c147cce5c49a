/*
 * code_predictor.h - the code predictor ("sub-talker"): the talker's hidden
 * state and codebook-0 code of a frame -> codes of codebooks 1..15.
 *
 *   x0 = P(h), x1 = P(E_0[c0])           P = small_to_mtp_projection (1.7B) or identity
 *   5 layers on [x0, x1] (positions 0, 1) -> norm -> lm_head[0] -> c1
 *   for k = 1..14: x = P(E_k[c_k]) at position k+1 -> layers -> norm -> lm_head[k] -> c_{k+1}
 * E_0 is the talker's codec_embedding, E_k = code_predictor.model.codec_embedding.{k-1}.
 * Tensor names: talker.code_predictor.{model.layers.*, model.norm, model.codec_embedding.{i},
 * lm_head.{j}, small_to_mtp_projection.{weight,bias}}. Upstream:
 * Qwen3TTSTalkerCodePredictorModelForConditionalGeneration. A fresh KV cache per
 * frame; the prefill's position-0 logits are never computed (they are discarded
 * upstream).
 */
#ifndef KZ_CODE_PREDICTOR_H
#define KZ_CODE_PREDICTOR_H

#include <stdbool.h>

#include "layers/transformer.h"
#include "model/config.h"

#define KZ_CP_MAX_GROUPS 64

typedef struct kz_code_predictor {
    kz_code_predictor_config cfg;
    int32_t talker_hidden;                    /* D */
    int32_t n_steps;                          /* num_code_groups - 1 = 15 */
    kz_matrix embeddings[KZ_CP_MAX_GROUPS];   /* [vocab, D] for codebooks 1..15 */
    kz_matrix heads[KZ_CP_MAX_GROUPS];        /* [vocab, hidden] */
    bool has_projection;
    kz_matrix projection;                     /* [hidden, D] */
    float *projection_b;                      /* [hidden] */
    kz_qwen3_stack stack;
} kz_code_predictor;

typedef struct kz_code_predictor_state {
    kz_qwen3_state seq;
    float *in;      /* [2, D] inputs before projection */
    float *x;       /* [2, hidden] */
    float *normed;  /* [hidden] */
    float *logits;  /* [vocab] */
} kz_code_predictor_state;

/* Chooses a code from logits[n] (the sampler). */
typedef int32_t (*kz_pick_fn)(void *user, float *logits, size_t n);

kz_status kz_code_predictor_load(kz_code_predictor *p, const kz_weights *f,
                                 const kz_talker_config *talker);
void kz_code_predictor_free(kz_code_predictor *p);

kz_status kz_code_predictor_state_init(kz_code_predictor_state *s, const kz_code_predictor *p);
void kz_code_predictor_state_free(kz_code_predictor_state *s);

/* codes[0..n_steps) = codes of codebooks 1..n_steps for a frame whose talker
 * hidden state is h[D] and whose codebook-0 embedding is e0[D]. If logits_out is
 * not NULL it receives the n_steps raw logit vectors [n_steps, vocab]. */
void kz_code_predictor_run(const kz_code_predictor *p, kz_code_predictor_state *s, kz_exec *e,
                           const float *h, const float *e0, kz_pick_fn pick, void *pick_user,
                           int32_t *codes, float *logits_out);

/* Scratch of batched code prediction (kz_code_predictor_run_batch), up to max_seq frames. */
typedef struct kz_code_predictor_batch {
    size_t max_seq;
    kz_qwen3_batch rows;   /* the stack's scratch, 2 rows per frame */
    kz_qwen3_state **seqs; /* [max_seq] */
    float *in;             /* [2 max_seq, D] inputs before projection */
    float *x;              /* [2 max_seq, hidden] */
    float *normed;         /* [max_seq, hidden] */
    float *logits;         /* [max_seq, vocab] */
} kz_code_predictor_batch;

kz_status kz_code_predictor_batch_init(kz_code_predictor_batch *b, const kz_code_predictor *p,
                                       size_t max_seq);
void kz_code_predictor_batch_free(kz_code_predictor_batch *b);

/* One frame's code prediction of n_seq independent requests at once: request i's talker
 * hidden state h[i * D ..] and codebook-0 embedding e0[i * D ..] ([n_seq, D] each), its
 * state s[i], picker pick[i] with pick_user[i], its codes codes[i * n_steps ..] and, if
 * logits_out and logits_out[i] are not NULL, its logits as kz_code_predictor_run writes
 * them. Each request gets, bit for bit, what kz_code_predictor_run gives it alone (codes,
 * logits, the logits its picker sees), for any n_seq <= max_seq; every sub-step reads each
 * weight matrix from memory once for the batch. The pickers run on the calling thread, in
 * request order, once per sub-step. */
void kz_code_predictor_run_batch(const kz_code_predictor *p, kz_code_predictor_state *const *s,
                                 size_t n_seq, kz_code_predictor_batch *b, kz_exec *e,
                                 const float *h, const float *e0, const kz_pick_fn *pick,
                                 void *const *pick_user, int32_t *codes,
                                 float *const *logits_out);

#endif
