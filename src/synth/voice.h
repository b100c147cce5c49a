/*
 * voice.h - the kz_voice object (public API in kztts.h): what a cloned voice holds and
 * which model it belongs to. Made by voice.c from reference audio (audio_in.h ->
 * speaker_encoder.h and codec_encoder.h), written and read by io/voice_file.c, turned into
 * prompt rows by prompt.c.
 */
#ifndef KZ_VOICE_H
#define KZ_VOICE_H

#include <stdbool.h>
#include <stdint.h>

#include "kztts.h"

struct kz_voice {
    int32_t format_version;
    char model_type[16];     /* "base" */
    int32_t enc_dim;         /* x-vector length = the talker's hidden size */
    uint64_t fingerprint;    /* kz_model_voice_fingerprint of the model it was made with */
    int32_t sample_rate;     /* the model's (codec input) rate the reference was taken at */
    double ref_seconds;
    float *xvector;          /* [enc_dim] */
    bool icl;                /* reference codes and transcript present */
    int32_t n_codebooks;     /* 0 when !icl */
    int32_t n_ref_frames;    /* 0 when !icl */
    int32_t *ref_codes;      /* [n_ref_frames, n_codebooks] or NULL */
    char *ref_text;          /* UTF-8 transcript, "" when !icl */
};

/* 64-bit fingerprint of m's speaker encoder and codec encoder weights as f32 values
 * (the same for a checkpoint directory and a GGUF made from it). 0 when m cannot clone. */
uint64_t kz_model_voice_fingerprint(const kz_model *m);

#endif
