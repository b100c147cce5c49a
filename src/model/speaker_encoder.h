/*
 * speaker_encoder.h - the Base models' ECAPA-TDNN speaker encoder (spec 5): 24 kHz mono
 * audio -> log-mel spectrogram [F, 128] -> x-vector [enc_dim], the row that stands for
 * the speaker in a cloned voice's prompt.
 *
 *   pcm -> mel (mel.h) -> TDNN k5 -> 3 SE-Res2Net blocks (dilation 2, 3, 4)
 *       -> MFA 1x1 over the three blocks -> attentive statistics pooling -> fc -> x-vector
 *
 * Weights: "speaker_encoder.*" of the main checkpoint (bf16 as released), converted to
 * f32 at load. Upstream: Qwen3TTSSpeakerEncoder (modeling_qwen3_tts.py).
 */
#ifndef KZ_SPEAKER_ENCODER_H
#define KZ_SPEAKER_ENCODER_H

#include <stdbool.h>

#include "io/weights.h"
#include "layers/conv.h"
#include "model/config.h"

typedef struct kz_speaker_encoder kz_speaker_encoder; /* defined in speaker_encoder.c */

/* Loads the encoder from w (cfg->speaker_enc_dim, cfg->speaker_sample_rate). *out NULL
 * and KZ_OK when w has no speaker_encoder tensors at all (not a Base checkpoint);
 * KZ_STATUS_BAD_MODEL naming the tensor when some are missing or misshapen. */
kz_status kz_speaker_encoder_load(const kz_weights *w, const kz_tts_config *cfg,
                                  kz_speaker_encoder **out);
void kz_speaker_encoder_free(kz_speaker_encoder *se);

/* x-vector [enc_dim] of n samples of mono audio at cfg->speaker_sample_rate (n >= the
 * mel's window; the caller checked the length). Scratch is allocated once per call,
 * outside the loops; threads from e->pool. Adds its FLOP to e->flop. */
kz_status kz_speaker_encoder_run(const kz_speaker_encoder *se, const float *pcm, size_t n,
                                 kz_exec *e, float *xvector);

int32_t kz_speaker_encoder_dim(const kz_speaker_encoder *se);

#endif
