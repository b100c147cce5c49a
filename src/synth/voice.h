/*
 * voice.h - the kz_voice object (public API in kztts.h): what a cloned voice holds and
 * which model it belongs to. Made by voice.c from reference audio (audio_in.h ->
 * speaker_encoder.h and codec_encoder.h), written and read by io/voice_file.c, turned into
 * prompt rows by prompt.c.
 */
#ifndef KZ_VOICE_H
#define KZ_VOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* One allocation holding the struct and its arrays (io/voice_file.h kz_voice_file_alloc),
 * so kz_voice_free is one free(). */
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
    kz_experimental_voice_stats stats; /* how kz_voice_make made it; zero when loaded */
};

/* Reference audio for a voice or an encode: a file (path set), or interleaved samples in
 * memory (path NULL). */
typedef struct kz_voice_audio {
    const char *path;
    const float *samples;    /* [n_frames, channels] */
    size_t n_frames;
    int32_t sample_rate;
    int32_t channels;
} kz_voice_audio;

/* A voice of m from audio (params checked by kztts.c): reference prepared at the model's
 * rate -> speaker encoder x-vector -> for ICL the codec encoder's codes and the transcript.
 * KZ_STATUS_UNSUPPORTED with one line when m is not a Base model with both encoders. */
kz_status kz_voice_make(const kz_model *m, const kz_voice_audio *a, const kz_voice_params *p,
                        kz_voice **out);

/* Codec codes of audio (kz_encode): *codes malloc'ed [*n_frames, *n_codebooks].
 * KZ_STATUS_UNSUPPORTED when m has no codec encoder. */
kz_status kz_voice_encode(const kz_model *m, const kz_voice_audio *a, const kz_voice_params *p,
                          int32_t **codes, size_t *n_frames, int32_t *n_codebooks);

/* KZ_OK when v was made for m; else KZ_STATUS_INVALID_ARGUMENT with one line naming what
 * differs and both values (model type, x-vector size, codebooks, code range, sample rate,
 * fingerprint). */
kz_status kz_voice_fits(const kz_model *m, const kz_voice *v);

/* 64-bit fingerprint of m's speaker encoder and codec encoder weights as f32 values
 * (the same for a checkpoint directory and a GGUF made from it); docs/VOICE_FILE.md gives
 * the definition. 0 when m has no speaker_encoder.* or no encoder.quantizer codebook tensors.
 * Reads those tensors: the load computes it once into m->voice_fingerprint
 * (voice_fingerprint.c). */
uint64_t kz_model_voice_fingerprint(const kz_model *m);

#endif
