/*
 * codec_decoder.h - Qwen3-TTS-Tokenizer-12Hz decoder: 16 codes per 80 ms frame
 * -> decode_upsample_rate samples of audio (1920 at 24 kHz as released), streaming
 * with carried state.
 *
 *   codes [T, 16]
 *   -> split RVQ lookup + output projections   [T, codebook_dim]      decoder.quantizer.*
 *   -> pre_conv (causal k3)                    [T, latent]            decoder.pre_conv.conv.*
 *   -> pre_transformer (window 72)             [T, latent]            decoder.pre_transformer.*
 *   -> 2 x (ConvTranspose x2 + ConvNeXt)       [4T, latent]           decoder.upsample.{u}.*
 *   -> causal conv k7                          [4T, decoder_dim]      decoder.decoder.0.*
 *   -> 4 x DecoderBlock (SnakeBeta, ConvTranspose x r, 3 residual units, dilation 1/3/9)
 *                                              [1920T, decoder_dim/16] decoder.decoder.{1..4}.*
 *   -> SnakeBeta, causal conv k7 -> clamp      [1920T]                decoder.decoder.{5,6}.*
 *
 * Activations are time-major [rows, channels]. Upstream: Qwen3TTSTokenizerV2Decoder
 * (forward). Every convolution is causal, so decoding chunk by chunk with each
 * conv's left context and the transformer's KV window carried in
 * kz_codec_state is bit-identical to one pass over all frames.
 * Traps: the decoder blocks' ConvTranspose (k = 2r, stride r) drops the last r
 * samples (kept length L*r); SnakeBeta parameters are stored as logarithms.
 */
#ifndef KZ_CODEC_DECODER_H
#define KZ_CODEC_DECODER_H

#include "layers/conv.h"
#include "layers/winograd.h"
#include "model/codec_config.h"
#include "model/codec_transformer.h"

#define KZ_CODEC_RES_UNITS 3
/* A block's transposed conv goes Winograd (winograd precisions) from this many input
 * rows per frame (the 12 Hz codec: decoder.decoder.3 and .4, 160 and 640 rows): with
 * fewer the GEMM streams its weights, which Winograd enlarges n / 2 times, and the
 * 32-row decoder.decoder.2 gains nothing for 18 MB more
 * (docs/ARCHITECTURE.md#codec-schedule). */
#define KZ_CODEC_WINO_UP_ROWS 64
/* The last KZ_CODEC_TAIL_BLOCKS decoder blocks and the final conv run in tails of at most
 * KZ_CODEC_TAIL_FRAMES frames (the other stages over the whole internal step): their
 * activations are the codec's largest (1920 rows x 96 channels and 640 x 192 a frame,
 * 0.7 and 0.5 MB per array) and their weights the smallest, so tails keep their arrays
 * in cache where a whole 16-frame step would send them through DRAM
 * (docs/ARCHITECTURE.md#codec-schedule). Bits do not change: no conv's output depends on
 * how its rows are split into calls. */
#define KZ_CODEC_TAIL_FRAMES 2
#define KZ_CODEC_TAIL_BLOCKS 2

typedef struct kz_snake {
    float *alpha;    /* [ch] exp(alpha_log) */
    float *inv_beta; /* [ch] 1 / (exp(beta_log) + 1e-9) */
} kz_snake;

typedef struct kz_res_unit {
    kz_snake act1, act2;
    kz_conv conv1; /* causal k7, dilation 1/3/9 (its panels dropped with winograd) */
    kz_conv conv2; /* 1x1 */
    kz_wino wino1; /* conv1 by Winograd F(m, 7) (the winograd precision), else empty */
} kz_res_unit;

typedef struct kz_decoder_block {
    int32_t rate, c_in, c_out;
    size_t frame_rows; /* output rows per codec frame (samples per frame at this stage) */
    kz_snake act;
    kz_conv up; /* transposed, k = 2 rate, stride rate (panels dropped with up_wino) */
    kz_wino up_wino; /* up by Winograd F(m, 2) (the winograd precisions, blocks with at
                        least KZ_CODEC_WINO_UP_ROWS input rows per frame), else empty */
    kz_res_unit res[KZ_CODEC_RES_UNITS];
} kz_decoder_block;

/* Rows per codec frame after the upsample stages (decoder.0's rows). */
static inline size_t kz_codec_mid_rows(const kz_codec_config *c) {
    size_t rows = 1;
    for (int u = 0; u < c->n_upsampling_ratios; u++) {
        rows *= (size_t)c->upsampling_ratios[u];
    }
    return rows;
}

/* Input rows per codec frame of block b (its transposed conv's rows, frame_rows / rate). */
static inline size_t kz_block_in_rows(const kz_decoder_block *b) {
    return b->frame_rows / (size_t)b->rate;
}

typedef struct kz_convnext {
    kz_conv up;       /* transposed, k = stride = ratio */
    float *dw_w;      /* [latent, 7] depthwise causal conv */
    float *dw_b;      /* [latent] */
    float *norm_w, *norm_b, *gamma; /* [latent] */
    kz_conv pw1, pw2; /* latent -> 4 latent -> latent */
} kz_convnext;

typedef struct kz_codec_decoder {
    kz_codec_config cfg;
    const kz_tensor **codebook_sums; /* [num_quantizers] the stored embedding sums, each
                                    [codebook_size, codebook_dim / 2], read in place: a
                                    code's row is its sum / its usage, computed when a
                                    frame looks it up (a frame reads one row of each) */
    float *codebook_usage;       /* [num_quantizers, codebook_size] max(cluster_usage, 1e-5) */
    kz_conv proj_first;          /* rvq_first.output_proj, 1x1 no bias */
    kz_conv proj_rest;           /* rvq_rest.output_proj */
    kz_conv pre_conv;            /* causal k3, codebook_dim -> latent */
    kz_codec_transformer transformer;
    kz_convnext upsample[KZ_CODEC_MAX_RATES];
    kz_conv dec0;                /* causal k7, latent -> decoder_dim (dropped with dec0_wino) */
    kz_wino dec0_wino;           /* dec0 by Winograd F(4, 7) over the frames' upsampled rows (the
                                    winograd precisions), else empty */
    kz_decoder_block blocks[KZ_CODEC_MAX_RATES];
    kz_snake final_act;
    kz_conv final_conv;          /* causal k7, -> 1 */
    bool bf16;                   /* the residual units' convs and the pointwise projections
                                    before the vocoder run in bf16 */
    bool winograd;               /* the residual units' k7 convs run as Winograd F(m, 7),
                                    the last blocks' transposed convs as F(m, 2) */
    float *store;                /* owned storage for the per-channel vectors */
    size_t store_used, store_size;
} kz_codec_decoder;

/* Stage observer for tests: called after each stage with the chunk's rows. */
typedef void (*kz_codec_tap_fn)(void *user, const char *stage, const float *rows, size_t n_rows,
                                size_t n_ch);

/* Per-session decoder state. */
typedef struct kz_codec_state {
    size_t max_frames;           /* frames per internal step */
    kz_conv_state pre_conv, dec0, final_conv;
    kz_conv_state dw[KZ_CODEC_MAX_RATES];
    kz_conv_state block_up[KZ_CODEC_MAX_RATES];
    kz_conv_state res[KZ_CODEC_MAX_RATES][KZ_CODEC_RES_UNITS];
    kz_codec_transformer_state tr;
    float *a, *b, *c, *d;        /* scratch, [scratch_floats] each */
    size_t scratch_floats;
    uint16_t *x_bf16;            /* bf16 conv inputs, [2 scratch_floats] when the decoder is bf16 */
    kz_wino_scratch wino;        /* Winograd transforms, when the decoder uses them */
    double ms[4];                /* quantizer, transformer, upsample, vocoder */
    kz_codec_tap_fn tap;         /* NULL normally */
    void *tap_user;
} kz_codec_state;

/* Loads the decoder from the codec safetensors file with config cfg. */
kz_status kz_codec_decoder_load(kz_codec_decoder *d, const kz_weights *f,
                                const kz_codec_config *cfg);
void kz_codec_decoder_free(kz_codec_decoder *d);

/* The precision switches below convert their convs on a temporary pool of the online CPUs
 * (layers/conv_convert.h): the same weights as one at a time. With forms (may be NULL)
 * they bind each conv's form from a GGUF's stored tensors instead (forms->stored, written
 * by `kztts quantize --codec-forms`), or keep the fp32 panels beside the new forms
 * (forms->keep_panels, for that writer). */
typedef struct kz_codec_forms {
    const kz_weights *stored;
    bool keep_panels;
} kz_codec_forms;

/* The bf16 precision: the pre-transformer's projections, the ConvNeXt pw1 / pw2 and
 * the convs of the decoder blocks' residual units (conv1, conv2) switch to bf16
 * weights and the bf16 GEMMs (kz_conv_use_bf16); every other conv stays fp32. Call
 * before creating states. Returns KZ_OK or KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_codec_decoder_use_bf16(kz_codec_decoder *d, const kz_codec_forms *forms);

/* The winograd precision: the residual units' k7 convs (conv1, ~70 % of the decoder's
 * FLOPs) run as Winograd F(6, 7) or F(4, 7) in fp32 (layers/winograd.h; the tile size
 * per conv by kz_wino_tile_for from its block's frame rows), and so do the transposed
 * convs of the blocks with at least KZ_CODEC_WINO_UP_ROWS input rows per frame, as
 * F(6, 2) or F(4, 2) over their input rows, and decoder.0 (k7 over the 4 upsampled rows
 * of a frame: F(4, 7), 10 instead of 28 multiplications per frame and channel pair, for
 * transformed weights 10 / 7 of its 44 MB); everything else as in f32. The fp32 panels
 * of those convs are released once transformed (kz_conv_drop_panels). Call before
 * creating states. Returns KZ_OK or KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_codec_decoder_use_winograd(kz_codec_decoder *d, const kz_codec_forms *forms);

/* The winograd-bf16 precision: conv1 and the transposed convs as with winograd (fp32
 * Winograd tiles; conv1 also with tiles of 10, F(10, 7), where kz_wino_tile_for finds
 * fewer transformed rows: 16 per 10 outputs against 20 with F(6, 7)), the pointwise work
 * in bf16 as with bf16 (the pre-transformer's
 * projections, the ConvNeXt pw1 / pw2, the residual units' conv2) and the first block's
 * transposed conv (direct) in bf16 too; the rest stays fp32 (decoder.0 as Winograd, as
 * with winograd). Needs the kernels' bf16 conv-GEMM. Call before creating states. Returns KZ_OK or
 * KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_codec_decoder_use_winograd_bf16(kz_codec_decoder *d, const kz_codec_forms *forms);

/* Calls fn for every conv of the decoder (the pre-transformer's too), with its Winograd
 * form's slot (dec0_wino, a block's up_wino, a residual unit's wino1) or NULL. */
typedef void (*kz_codec_conv_fn)(void *user, kz_conv *c, kz_wino *w);
void kz_codec_decoder_each_conv(kz_codec_decoder *d, kz_codec_conv_fn fn, void *user);

/* Maps in the pages of every conv's form in use that lies in the model file (a GGUF's
 * stored forms after a switch), so that the first chunk does not fault them in. */
void kz_codec_decoder_populate(kz_codec_decoder *d);

/* State for internal steps of up to max_frames frames (memory ~ max_frames). */
kz_status kz_codec_state_init(kz_codec_state *s, const kz_codec_decoder *d, size_t max_frames);
void kz_codec_state_free(kz_codec_state *s);

/* Forgets all history: the next frame is decoded as the first of a stream. */
void kz_codec_state_reset(kz_codec_state *s);

/* The stream's history as floats: every conv's left context and the transformer's key
 * and value windows (kz_codec_state_floats of them) plus its position. A state saved
 * after some frames and restored into a state of the same decoder continues exactly as
 * the saved one would (the reference frames of a cloned voice, synth/voice_context.c). */
size_t kz_codec_state_floats(const kz_codec_state *s);
void kz_codec_state_save(const kz_codec_state *s, float *out, int64_t *pos);
void kz_codec_state_restore(kz_codec_state *s, const float *in, int64_t pos);

/* An upper bound of how many frames back the later stages' state reaches: the upsample
 * stages, decoder.0, the decoder blocks and the final conv carry a few rows of history
 * each (their sum, in frames, rounded up per conv, plus one), while the
 * quantizer's pre_conv and the transformer carry the whole stream's influence (its
 * attention window stacks over the layers). */
size_t kz_codec_back_frames(const kz_codec_decoder *d, const kz_codec_state *s);

/* Continues the stream in s over n_frames frames through the quantizer, pre_conv and
 * transformer only (their state advances; no audio). Frames followed by at least
 * kz_codec_back_frames decoded frames leave the same state this way as decoded, bit for
 * bit: a stream's context whose audio is not wanted (a cloned voice's reference) costs
 * the transformer, not the vocoder. */
void kz_codec_advance(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                      const int32_t *codes, size_t n_frames);

/* Decodes n_frames frames (codes frame-major [n_frames, num_quantizers], each
 * already checked to be in [0, codebook_size)) continuing the stream in s;
 * writes n_frames * decode_upsample_rate samples to pcm. */
void kz_codec_decode(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                     const int32_t *codes, size_t n_frames, float *pcm);

#endif
