/*
 * model.h - the kz_model object: what a checkpoint directory holds once loaded.
 *
 * Load flow: path -> config.json (a Qwen3-TTS checkpoint, or a codec-only
 * Qwen3-TTS-Tokenizer-12Hz directory) or a kztts .gguf file -> typed configs ->
 * mapped and validated weights (kz_weights) -> kernel table for the CPU ->
 * codec decoder weights packed (or used pre-packed from the GGUF). Immutable afterwards; shared by sessions on any thread.
 */
#ifndef KZ_MODEL_H
#define KZ_MODEL_H

#include <stdbool.h>

#include "io/gguf.h"
#include "io/weights.h"
#include "kernels/kernels.h"
#include "kztts.h"
#include "model/code_predictor.h"
#include "model/codec_config.h"
#include "model/codec_decoder.h"
#include "model/codec_encoder.h"
#include "model/config.h"
#include "model/speaker_encoder.h"
#include "model/talker.h"
#include "text/tokenizer.h"

struct kz_model {
    char *path;               /* as given to kz_model_load */
    bool has_tts;             /* a full Qwen3-TTS checkpoint (not codec-only) */
    kz_tts_config cfg;        /* valid when has_tts */
    kz_codec_config codec_cfg;
    kz_gguf_file *gguf;       /* the .gguf file of a single-file model, else NULL */
    kz_weights *main_w;       /* model.safetensors or the GGUF's "model." tensors (NULL when
                                 codec-only) */
    kz_weights *codec_w;      /* speech_tokenizer/model.safetensors or the GGUF's "codec." */
    kz_codec_decoder decoder;
    kz_talker talker;         /* when has_tts */
    kz_code_predictor cp;     /* when has_tts */
    kz_generation_config gen; /* when has_tts */
    kz_speaker_encoder *speaker_encoder; /* Base checkpoints, else NULL (kz_model_bind_tts) */
    kz_codec_encoder *codec_encoder;     /* when the codec has its encoder, else NULL
                                            (kz_model_bind_codec) */
    bool skip_voice_encoders;            /* kz_model_params.skip_voice_encoders */
    bool codec_only;                     /* kz_model_params.codec_only */
    bool codec_of_tts;                   /* codec_only took a full checkpoint's codec alone:
                                            has_tts is false, as for a codec-only file */
    uint64_t voice_fingerprint;          /* voice.h, set at load when both encoders are */
    kz_tokenizer *tokenizer;  /* NULL when the directory has no vocab.json */
    int32_t newline_id;       /* the tokenizer's one id for "\n", the third role token of
                                 token-id input (-1: no tokenizer, or "\n" is not one token) */
    const kz_kernels *kernels;
    double load_ms;
    bool codec_forms_mapped;  /* the codec's converted forms came from the GGUF (stored by
                                 `kztts quantize --codec-forms`), not computed at load */
    char *description;        /* kz_model_describe text */
};

/* Internal load options (the quantizer's view of what gets packed). */
typedef struct kz_load_opts {
    kz_weights_packed_fn on_packed; /* called for each codec weight packed at load */
    void *on_packed_user;
} kz_load_opts;

/* Loads the directory or .gguf file at path (see kz_model_load in kztts.h). */
kz_status kz_model_open(const char *path, const kz_model_params *params, kz_model **out);
kz_status kz_model_open_with(const char *path, const kz_model_params *params,
                             const kz_load_opts *opts, kz_model **out);

/* Steps shared by the directory and GGUF loaders: build the talker and code
 * predictor from m->main_w (m->cfg set), and the codec decoder from m->codec_w
 * (m->codec_cfg set; opts may be NULL). */
kz_status kz_model_bind_tts(kz_model *m);
kz_status kz_model_bind_codec(kz_model *m, const kz_load_opts *opts);

/* What a loader loads of a file that holds a full checkpoint (tts) or a codec alone:
 * sets has_tts and codec_of_tts from tts and m->codec_only. */
void kz_model_set_kind(kz_model *m, bool tts);

/* Precision p as it runs with m's kernels: FAST resolved for the CPU (every kernel table
 * has a bf16 conv-GEMM, so the others run as they are at any level); DEFAULT is taken as
 * EXACT (the load resolves it from the file first). */
kz_precision kz_model_codec_precision(const kz_model *m, kz_precision p);

/* The precision m's codec runs in now (never DEFAULT or FAST). */
kz_precision kz_model_precision_in_effect(const kz_model *m);

/* "default", "f32" (EXACT), "bf16", "winograd", "fast", "winograd-bf16". */
const char *kz_precision_name(kz_precision p);

/* Switches m's codec to p, a precision kz_model_codec_precision returned, with forms
 * (codec_decoder.h kz_codec_forms, may be NULL). */
kz_status kz_model_use_codec_precision(kz_model *m, kz_precision p, const kz_codec_forms *forms);

/* Checks, once a TTS model's parts are loaded, what no single file can: the
 * codec's codebooks against the codes the talker and code predictor produce,
 * the tokenizer's ids against the text embedding; finds the newline id. */
kz_status kz_model_check_tts(kz_model *m);

/* model_gguf.c: fills m from a kztts GGUF file (model/gguf_layout.h). */
kz_status kz_model_load_gguf(kz_model *m, const char *path);

void kz_model_close(kz_model *m);

#endif
