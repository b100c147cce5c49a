/*
 * transformer.h - a stack of Qwen3 decoder layers with a KV cache, shared by
 * the talker (28 layers) and the code predictor (5 layers).
 *
 * One layer, for n_tok rows at positions pos .. pos+n_tok-1 (spec 3.3):
 *   xn = RMSNorm(x)                          input_layernorm
 *   q, k, v = xn Wq, xn Wk, xn Wv            no bias; GQA (q head h reads kv head h / group)
 *   q, k = RMSNorm per head (q_norm, k_norm) BEFORE RoPE
 *   q, k = RoPE rotate-half over head_dim    pairs (j, j + hd/2), theta from config
 *   att = softmax(q k^T * hd^-0.5, causal) v over the cache
 *   x += att Wo
 *   xn = RMSNorm(x)                          post_attention_layernorm
 *   x += (SiLU(xn Wg) * xn Wu) Wd
 * Tensor names: PREFIX layers.{l}.{input_layernorm, self_attn.{q,k,v,o}_proj,
 * self_attn.{q,k}_norm, post_attention_layernorm, mlp.{gate,up,down}_proj}.weight
 * and PREFIX norm.weight. Upstream: Qwen3TTSTalkerDecoderLayer and the code
 * predictor's layers. Trap: RoPE rotates split halves, not interleaved pairs.
 */
#ifndef KZ_TRANSFORMER_H
#define KZ_TRANSFORMER_H

#include "layers/matrix.h"

typedef struct kz_qwen3_dims {
    int32_t n_layers, hidden, n_heads, n_kv_heads, head_dim, intermediate;
    float eps, rope_theta;
} kz_qwen3_dims;

typedef struct kz_qwen3_layer {
    kz_matrix q, k, v, o, gate, up, down;
    const float *attn_norm, *mlp_norm; /* [hidden] */
    const float *q_norm, *k_norm;      /* [head_dim] */
} kz_qwen3_layer;

typedef struct kz_qwen3_stack {
    kz_qwen3_dims d;
    kz_qwen3_layer *layers;
    const float *norm; /* [hidden] final norm */
    float *vectors;    /* owned storage of the norm weights */
    float *inv_freq;   /* [head_dim / 2] */
    bool kv_f16;       /* the states' KV caches hold binary16 (rounded to nearest even as
                          written), else floats; set before kz_qwen3_state_init, and a
                          state is used only with the stack it was made for */
} kz_qwen3_stack;

/* Per-sequence state: KV cache for max_pos positions, scratch for max_tok rows. */
typedef struct kz_qwen3_state {
    void *k_cache, *v_cache; /* [blocks, n_layers, n_kv_heads, block positions, head_dim]
                                (transformer.c KV_BLOCK) floats or binary16 (the stack's
                                kv_f16): each head's positions a contiguous stream per
                                block for attention */
    size_t max_pos, max_tok;
    int64_t n_pos;            /* positions filled */
    float *xn, *q, *k, *v, *att, *h, *gate, *up; /* scratch */
    float *scores;            /* [n_heads, max_pos] */
    float *rope;              /* [max_tok, head_dim]: cos, sin of each row's position */
} kz_qwen3_state;

kz_status kz_qwen3_load(kz_qwen3_stack *s, const kz_weights *f, const char *prefix,
                        const kz_qwen3_dims *d);
void kz_qwen3_free(kz_qwen3_stack *s);

kz_status kz_qwen3_state_init(kz_qwen3_state *st, const kz_qwen3_stack *s, size_t max_pos,
                              size_t max_tok);
void kz_qwen3_state_free(kz_qwen3_state *st);

/* Runs all layers on x[n_tok, hidden] (in place) at the next n_tok positions.
 * Requires n_pos + n_tok <= max_pos and n_tok <= max_tok. split (< n_tok, 0 = none):
 * every projection runs rows [0, split) and [split, n_tok) as kz_matrix_mul_group_split
 * does, so the results are bit for bit those of a forward over the first split rows
 * and then one over the rest (the kernels' path depends on the row count; everything
 * else is per row), while each weight matrix is streamed from memory once. */
void kz_qwen3_forward(const kz_qwen3_stack *s, kz_qwen3_state *st, kz_exec *e, float *x,
                      size_t n_tok, size_t split);

/* Scratch of a batched forward (kz_qwen3_forward_batch) for up to max_rows rows. */
typedef struct kz_qwen3_batch {
    size_t max_rows;
    float *xn, *q, *k, *v, *att, *h, *gate, *up; /* [max_rows, width of each] */
    struct kz_qwen3_attn_rows *seqs;             /* [max_rows]: each sequence's attention rows */
} kz_qwen3_batch;

kz_status kz_qwen3_batch_init(kz_qwen3_batch *b, const kz_qwen3_stack *s, size_t max_rows);
void kz_qwen3_batch_free(kz_qwen3_batch *b);

/* Decode steps of n_seq independent sequences at once (continuous batching): sequence i's
 * n_tok rows x[i * n_tok .. i * n_tok + n_tok - 1] (x: [n_seq * n_tok, hidden], in place)
 * run all layers at st[i]'s next n_tok positions, with st[i]'s KV cache. Each sequence
 * gets, bit for bit, what kz_qwen3_forward(s, st[i], e, its rows, n_tok, 0) gives it, for
 * any n_seq and any mix of positions, while each weight matrix is read from memory once
 * for all rows. For decode steps: n_tok below the prompt path's 4 (layers/matrix.c), where
 * kz_qwen3_forward itself takes the step kernels. Requires n_seq * n_tok <= b->max_rows
 * and, per sequence, room for n_tok more positions and n_tok <= max_tok; the states are
 * distinct. */
void kz_qwen3_forward_batch(const kz_qwen3_stack *s, kz_qwen3_state *const *st, size_t n_seq,
                            kz_qwen3_batch *b, kz_exec *e, float *x, size_t n_tok);

/* Bytes that kz_qwen3_kv_save writes for the first n_pos positions (keys and values
 * of every layer and kv head, in the cache's element type). */
size_t kz_qwen3_kv_bytes(const kz_qwen3_stack *s, size_t n_pos);

/* Copies the keys and values of positions [0, n_pos) (n_pos <= st->n_pos) to out. */
void kz_qwen3_kv_save(const kz_qwen3_stack *s, const kz_qwen3_state *st, size_t n_pos,
                      void *out);

/* Fills an empty state (n_pos 0) with n_pos positions saved by kz_qwen3_kv_save, as if
 * it had run them: the next forward continues at position n_pos. */
void kz_qwen3_kv_restore(const kz_qwen3_stack *s, kz_qwen3_state *st, const void *in,
                         size_t n_pos);

/* y[hidden] = final RMSNorm of row x[hidden]. */
void kz_qwen3_final_norm(const kz_qwen3_stack *s, const kz_exec *e, float *y, const float *x);

#endif
