/*
 * codec_encoder_internal.h - the loaded codec encoder, shared by its loader
 * (codec_encoder_load.c) and its streaming runner (codec_encoder.c).
 *
 * Activations are time-major [rows, channels]. A strided conv (kernel m*s, stride s)
 * runs as a causal conv of m taps over "super rows" of s consecutive input rows
 * (s * c_in channels, contiguous in a time-major buffer), so every conv is one
 * kz_conv GEMM and keeps (m - 1) * s input rows of history between chunks.
 */
#ifndef KZ_CODEC_ENCODER_INTERNAL_H
#define KZ_CODEC_ENCODER_INTERNAL_H

#include "model/codec_encoder.h"

typedef struct kz_enc_conv {
    kz_conv c;        /* stride 1: as stored; strided: taps over super rows */
    size_t c_in, c_out;
    size_t stride;    /* input rows per output row */
    size_t history;   /* input rows of left context (Mimi's left pad K - stride) */
    bool replicate;   /* pads with edge rows instead of zeros (the downsample conv) */
} kz_enc_conv;

typedef struct kz_enc_resblock {
    kz_enc_conv a, b; /* ELU -> a (k residual_kernel_size, C -> C/compress), ELU -> b (k1) */
} kz_enc_resblock;

typedef struct kz_enc_layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *attn_scale, *mlp_scale; /* [hidden] */
    kz_conv q, k, v, o, fc1, fc2;
} kz_enc_layer;

/* One codebook: table = embed_sum / max(cluster_usage, 1e-5) as a linear layer for the
 * dot products, and its rows in f32 with their squared norms in double. */
typedef struct kz_enc_book {
    kz_conv dots;     /* [codebook_size, dim]: y[t, j] = x_t . table_j */
    float *table;     /* [codebook_size, dim] */
    double *norm2;    /* [codebook_size] */
    double max_norm2;
} kz_enc_book;

struct kz_codec_encoder {
    kz_codec_encoder_config cfg;
    int32_t n_codes;       /* encoder_valid_num_quantizers */
    size_t hop25, hop;     /* input samples per transformer row, per code frame */
    kz_enc_conv first;     /* 1 -> num_filters */
    kz_enc_resblock *res;  /* [n_ratios * num_residual_layers] */
    kz_enc_conv *down;     /* [n_ratios] */
    kz_enc_conv last;      /* -> hidden */
    kz_enc_layer *layers;  /* [num_hidden_layers] */
    float *vectors;        /* owned storage of the layers' vectors */
    float *inv_freq;       /* [head_dim / 2] */
    kz_enc_conv downsample; /* k 2*int(25 Hz / frame_rate), stride 2, replicate */
    kz_conv proj[2];       /* semantic, acoustic input_proj (hidden -> vq), when present */
    bool has_proj;
    int32_t n_books[2];    /* codebooks used of each branch (sum = n_codes) */
    kz_enc_book *books[2];
};

kz_status kz_enc_load_all(kz_codec_encoder *enc, const kz_weights *w);
void kz_enc_free_all(kz_codec_encoder *enc);

#endif
