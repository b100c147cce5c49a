/*
 * codec_transformer.h - the codec decoder's pre-transformer: 8 pre-norm layers
 * with sliding-window causal attention (RoPE, no QK-norm), SwiGLU MLP and
 * learned per-channel layer scales, between two linear projections.
 *
 *   x[T, latent] -> input_proj -> [T, hidden] -> layers -> RMSNorm -> output_proj -> [T, latent]
 *
 * Streaming: each layer keeps a ring of the last `sliding_window` keys and
 * values (after RoPE), and positions continue across chunks, so a chunked run
 * equals one pass over all frames. Upstream: Qwen3TTSTokenizerV2DecoderTransformerModel.
 */
#ifndef KZ_CODEC_TRANSFORMER_H
#define KZ_CODEC_TRANSFORMER_H

#include "layers/conv.h"
#include "layers/conv_convert.h"
#include "model/codec_config.h"

typedef struct kz_codec_layer {
    const float *attn_norm;   /* [hidden] input_layernorm.weight (owned copy in weights) */
    const float *mlp_norm;    /* [hidden] post_attention_layernorm.weight */
    const float *attn_scale;  /* [hidden] self_attn_layer_scale.scale */
    const float *mlp_scale;   /* [hidden] mlp_layer_scale.scale */
    kz_conv q, k, v;          /* hidden -> heads * head_dim */
    kz_conv o;                /* heads * head_dim -> hidden */
    kz_conv gate, up;         /* hidden -> intermediate */
    kz_conv down;             /* intermediate -> hidden */
} kz_codec_layer;

typedef struct kz_codec_transformer {
    kz_codec_config cfg;
    kz_conv input_proj;       /* latent -> hidden, bias */
    kz_conv output_proj;      /* hidden -> latent, bias */
    const float *norm;        /* [hidden] */
    kz_codec_layer *layers;   /* [num_hidden_layers] */
    float *vectors;           /* owned storage of the per-channel vectors */
    float *inv_freq;          /* [head_dim / 2] RoPE frequencies */
} kz_codec_transformer;

/* Per-session state: KV rings and scratch for up to max_rows rows per call. */
typedef struct kz_codec_transformer_state {
    float *k_ring, *v_ring;   /* [layers, window, kv_heads * head_dim] */
    int64_t pos;              /* position of the next row */
    size_t ring_floats;       /* of each ring */
    size_t max_rows;
    float *x, *xn, *q, *k, *v, *att, *h, *gate, *up; /* scratch */
    float *scores;            /* [window] */
} kz_codec_transformer_state;

kz_status kz_codec_transformer_load(kz_codec_transformer *t, const kz_weights *f,
                                    const kz_codec_config *cfg);
void kz_codec_transformer_free(kz_codec_transformer *t);

/* Lists the layers' projections (q, k, v, o, gate, up, down) for bf16 panels
 * (kz_convert_add_bf16); input_proj and output_proj stay fp32. */
void kz_codec_transformer_list_bf16(kz_codec_transformer *t, kz_convert_list *l);

/* Calls fn for each projection (input_proj, the layers' q, k, v, o, gate, up, down,
 * output_proj); w is always NULL (the codec decoder's walker, codec_decoder.h). */
void kz_codec_transformer_each_conv(kz_codec_transformer *t,
                                    void (*fn)(void *user, kz_conv *c, kz_wino *w), void *user);

kz_status kz_codec_transformer_state_init(kz_codec_transformer_state *s,
                                          const kz_codec_transformer *t, size_t max_rows);
void kz_codec_transformer_state_free(kz_codec_transformer_state *s);
void kz_codec_transformer_state_reset(kz_codec_transformer_state *s);

/* y[n_rows, latent] = transformer(x[n_rows, latent]) for the next n_rows
 * positions. n_rows <= max_rows. */
void kz_codec_transformer_forward(const kz_codec_transformer *t, kz_codec_transformer_state *s,
                                  kz_exec *e, float *y, const float *x, size_t n_rows);

#endif
