/*
 * codec_encoder.h - the 12 Hz codec's encoder (spec 6.4, a Mimi encoder): 24 kHz mono
 * audio -> codes [T, encoder_valid_num_quantizers] at 12.5 frames a second, the
 * reference codes of an in-context cloned voice.
 *
 *   pcm -> causal conv stack (strides 4, 5, 6, 8; ELU residual blocks) [T25, 512]
 *       -> 8-layer causal transformer (LayerNorm, GELU MLP, layer scales)
 *       -> downsample conv k4 s2 (replicate padding) [T12, 512]
 *       -> split RVQ: semantic (1 layer) + acoustic layers, argmin distances -> codes
 *
 * Streaming: every stage is causal, so the audio is encoded in chunks with each conv's
 * left context and the transformer's KV carried, bit-identical to one pass. Memory: one
 * chunk's activations plus the transformer's keys and values of every 25 Hz row (the
 * reference attends to all earlier rows: its 250-row sliding_window is not applied),
 * about 33 KB a row at the released size, 50 MB for a minute of audio.
 * Weights: "encoder.*" of the codec checkpoint (f32). Upstream: Qwen3TTSTokenizerV2Encoder
 * (MimiModel's encoder parts).
 */
#ifndef KZ_CODEC_ENCODER_H
#define KZ_CODEC_ENCODER_H

#include "io/weights.h"
#include "layers/conv.h"
#include "model/codec_config.h"
#include "model/codec_decoder.h"

typedef struct kz_codec_encoder kz_codec_encoder; /* codec_encoder_internal.h */

/* Loads the encoder from w. *out NULL and KZ_OK when w has no "encoder." tensors (a
 * decoder-only codec); KZ_STATUS_BAD_MODEL naming the tensor when some are missing or
 * misshapen. */
kz_status kz_codec_encoder_load(const kz_weights *w, const kz_codec_config *cfg,
                                kz_codec_encoder **out);
void kz_codec_encoder_free(kz_codec_encoder *enc);

/* Codes of n samples of mono audio at the codec's input rate: *codes (malloc'd)
 * [*n_frames, kz_codec_encoder_codebooks()] with *n_frames = ceil(n / 1920); threads
 * from e->pool; adds its FLOP to e->flop. */
kz_status kz_codec_encoder_run(const kz_codec_encoder *enc, const float *pcm, size_t n,
                               kz_exec *e, int32_t **codes, size_t *n_frames);

/* kz_codec_encoder_run in chunks of chunk_frames code frames (run uses a fixed
 * size; the codes do not depend on it), for tests: tap (NULL: none) sees each chunk's
 * rows of the stages "conv_stack", "transformer" [rows at 25 Hz, hidden] and
 * "downsample" [code frames, hidden], as the reference's goldens name them. */
kz_status kz_codec_encoder_run_chunked(const kz_codec_encoder *enc, const float *pcm, size_t n,
                                       size_t chunk_frames, kz_codec_tap_fn tap, void *tap_user,
                                       kz_exec *e, int32_t **codes, size_t *n_frames);

int32_t kz_codec_encoder_codebooks(const kz_codec_encoder *enc);

#endif
