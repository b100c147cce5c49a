/*
 * model.h - the kz_model object: what a checkpoint directory holds once loaded.
 *
 * Load flow: path -> config.json (a Qwen3-TTS checkpoint, or a codec-only
 * Qwen3-TTS-Tokenizer-12Hz directory) -> typed configs -> mapped and validated
 * safetensors files -> kernel table for the CPU -> codec decoder weights packed
 * for that table. Immutable afterwards; shared by sessions on any thread.
 */
#ifndef KZ_MODEL_H
#define KZ_MODEL_H

#include <stdbool.h>

#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "kztts.h"
#include "model/code_predictor.h"
#include "model/codec_config.h"
#include "model/codec_decoder.h"
#include "model/config.h"
#include "model/talker.h"
#include "text/tokenizer.h"

struct kz_model {
    char *path;               /* as given to kz_model_load */
    bool has_tts;             /* a full Qwen3-TTS checkpoint (not codec-only) */
    kz_tts_config cfg;        /* valid when has_tts */
    kz_codec_config codec_cfg;
    kz_st_file *main_st;      /* model.safetensors (NULL when codec-only) */
    kz_st_file *codec_st;     /* speech_tokenizer/model.safetensors */
    kz_codec_decoder decoder;
    kz_talker talker;         /* when has_tts */
    kz_code_predictor cp;     /* when has_tts */
    kz_generation_config gen; /* when has_tts */
    kz_tokenizer *tokenizer;  /* NULL when the directory has no vocab.json */
    const kz_kernels *kernels;
    double load_ms;
    char *description;        /* kz_model_describe text */
};

/* Loads the directory at path (see kz_model_load in kztts.h). */
kz_status kz_model_open(const char *path, const kz_model_params *params, kz_model **out);

void kz_model_close(kz_model *m);

#endif
