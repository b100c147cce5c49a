/*
 * codec_config.h - hyperparameters of the Qwen3-TTS-Tokenizer-12Hz codec
 * (speech_tokenizer/config.json), read into a typed struct.
 *
 * Field names are the checkpoint's keys. Missing keys take the defaults of the
 * official configuration class (Qwen3TTSTokenizerV2DecoderConfig), which are
 * NOT the released values for every key (e.g. hidden_size defaults to 1024, the
 * release says 512), exactly as Hugging Face would load the file; codebook_dim
 * has no default there and is required. The numbers in the field comments are
 * the released checkpoints' values, for orientation; nothing assumes them.
 */
#ifndef KZ_CODEC_CONFIG_H
#define KZ_CODEC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

#define KZ_CODEC_MAX_RATES 8

/* encoder_config: a Hugging Face MimiConfig (spec 6.4); missing keys take MimiConfig's
 * defaults (transformers 4.57.3). Read always, checked only when the encoder loads
 * (codec_encoder.c), so a decoder-only codec is not refused for it. */
typedef struct kz_codec_encoder_config {
    int32_t sampling_rate;          /* 24000 */
    int32_t audio_channels;         /* 1 (the only supported value) */
    int32_t num_filters;            /* 64 */
    int32_t n_ratios;               /* 4 */
    int32_t upsampling_ratios[KZ_CODEC_MAX_RATES]; /* 8 6 5 4, applied reversed */
    int32_t kernel_size;            /* 7 */
    int32_t last_kernel_size;       /* 3 */
    int32_t residual_kernel_size;   /* 3 */
    int32_t num_residual_layers;    /* 1 */
    int32_t dilation_growth_rate;   /* 2 */
    int32_t compress;               /* 2 */
    int32_t hidden_size;            /* 512 */
    int32_t num_hidden_layers;      /* 8 */
    int32_t num_attention_heads;    /* 8 */
    int32_t num_key_value_heads;    /* 8 */
    int32_t head_dim;               /* 64 (default hidden_size / heads) */
    int32_t intermediate_size;      /* 2048 */
    int32_t num_quantizers;         /* 32 */
    int32_t num_semantic_quantizers;/* 1 */
    int32_t codebook_size;          /* 2048 */
    int32_t codebook_dim;           /* 256 */
    int32_t vq_hidden;              /* 256 vector_quantization_hidden_dimension */
    float norm_eps;                 /* 1e-5 */
    float rope_theta;               /* 10000 */
    double frame_rate;              /* 12.5 ("_frame_rate" or "frame_rate"; default
                                       sampling_rate / (2 * prod(ratios))) */
    bool supported;                 /* causal convs, constant padding, no conv shortcut,
                                       gelu, no attention bias */
} kz_codec_encoder_config;

typedef struct kz_codec_config {
    /* top level */
    int32_t input_sample_rate;            /* 24000 */
    int32_t output_sample_rate;           /* 24000 */
    int32_t decode_upsample_rate;         /* 1920 = samples per frame */
    int32_t encode_downsample_rate;       /* 1920 */
    int32_t encoder_valid_num_quantizers; /* 16 */
    /* decoder_config */
    int32_t codebook_size;           /* 2048 entries per codebook */
    int32_t codebook_dim;            /* 512; the RVQ tables are codebook_dim / 2 wide; required */
    int32_t latent_dim;              /* 1024 */
    int32_t hidden_size;             /* 512, pre-transformer width */
    int32_t num_hidden_layers;       /* 8 */
    int32_t num_attention_heads;     /* 16 */
    int32_t num_key_value_heads;     /* 16 */
    int32_t head_dim;                /* 64 */
    int32_t intermediate_size;       /* 1024 */
    int32_t sliding_window;          /* 72 frames */
    int32_t max_position_embeddings; /* 8000 (informational; RoPE is computed for any position) */
    int32_t num_quantizers;          /* 16 = codebooks per frame: 1 semantic + the rest */
    int32_t decoder_dim;             /* 1536 */
    float rms_norm_eps;              /* 1e-5 */
    float rope_theta;                /* 10000 */
    int32_t n_upsample_rates;        /* 4 */
    int32_t upsample_rates[KZ_CODEC_MAX_RATES];    /* 8 5 4 3 (decoder blocks) */
    int32_t n_upsampling_ratios;     /* 2 */
    int32_t upsampling_ratios[KZ_CODEC_MAX_RATES]; /* 2 2 (ConvNeXt stages) */
    kz_codec_encoder_config encoder; /* encoder_config */
} kz_codec_config;

/* Parses n_bytes of speech_tokenizer/config.json text (need not be
 * NUL-terminated) and checks every value and the relations the decoder relies
 * on (upsampling product == decode_upsample_rate, heads * head_dim consistent,
 * decoder_dim divisible by 2^blocks, ...). Errors (KZ_STATUS_BAD_MODEL,
 * KZ_STATUS_UNSUPPORTED) have a message starting "label: ", the label being a
 * path or a name such as "model.gguf:kztts.codec_config_json"; *out is then zeroed. */
kz_status kz_codec_config_parse(const char *label, const char *text, size_t n_bytes,
                                kz_codec_config *out);

/* Reads `path` (a speech_tokenizer/config.json) and parses it as above, path as
 * the label. */
kz_status kz_codec_config_load(const char *path, kz_codec_config *out);

/* Writes a one-paragraph summary into buf. */
void kz_codec_config_describe(const kz_codec_config *c, char *buf, size_t buf_size);

#endif
