/*
 * config.h - hyperparameters of a Qwen3-TTS checkpoint (config.json) as typed
 * structs: the top level, talker_config, its nested code_predictor_config and
 * speaker_encoder_config.
 *
 * Each file is parsed from text (kz_*_parse: from memory, e.g. a GGUF metadata
 * string, named in messages by a label) or read from its path (kz_*_load, a
 * thin wrapper: read the file, parse it with the path as the label).
 *
 * Field names are the checkpoint's keys. Missing keys take the official
 * configuration classes' defaults (configuration_qwen3_tts.py), which differ
 * from the released values for several keys, as Hugging Face would load them;
 * a key those classes have no default for (talker_config.text_vocab_size) is
 * an error when missing, as the official model cannot be built without it.
 * The numbers in the field comments are the released checkpoints' values, for
 * orientation; nothing assumes them. Name tables (speakers, languages) keep the
 * checkpoint's spelling; lookups
 * lower-case the query as the official wrapper does.
 *
 * Every id is checked against the table it indexes once the file is read:
 * text token ids against text_vocab_size (the text embedding's rows), codec
 * ids, languages and speakers against the talker's vocab_size (the codec
 * embedding's rows); the tensors' shapes are checked against these sizes when
 * the weights are bound, and the codec's and tokenizer's sizes against them
 * in model.c, so no id read from a file can index past its table.
 */
#ifndef KZ_CONFIG_H
#define KZ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

#define KZ_MAX_NAMES 64
#define KZ_NAME_LEN 48

typedef struct kz_name_id {
    char name[KZ_NAME_LEN];    /* as written in config.json */
    int32_t id;                /* codec-vocabulary id */
    char dialect[KZ_NAME_LEN]; /* spk_is_dialect value for speakers ("" if none) */
} kz_name_id;

/* The official generate suppresses the last 1024 ids of the talker's codec
 * vocabulary (all but EOS): a fixed count in its code, not a config key. */
#define KZ_TALKER_CONTROL_IDS 1024

typedef struct kz_code_predictor_config {
    int32_t vocab_size;              /* 2048 per codebook */
    int32_t hidden_size;             /* 1024 */
    int32_t intermediate_size;       /* 3072 */
    int32_t num_hidden_layers;       /* 5 */
    int32_t num_attention_heads;     /* 16 */
    int32_t num_key_value_heads;     /* 8 */
    int32_t head_dim;                /* 128 */
    int32_t max_position_embeddings; /* 65536 */
    int32_t num_code_groups;         /* 16 */
    float rms_norm_eps;              /* 1e-6 */
    float rope_theta;                /* 1e6 */
} kz_code_predictor_config;

typedef struct kz_talker_config {
    int32_t vocab_size;              /* 3072 codec ids, > KZ_TALKER_CONTROL_IDS */
    int32_t first_control_id;        /* vocab_size - KZ_TALKER_CONTROL_IDS: codebook-0 codes
                                        are the ids below it (derived, not a key) */
    int32_t hidden_size;             /* D: 1024 (0.6B) or 2048 (1.7B) */
    int32_t intermediate_size;       /* 3072 / 6144 */
    int32_t num_hidden_layers;       /* 28 */
    int32_t num_attention_heads;     /* 16 */
    int32_t num_key_value_heads;     /* 8 */
    int32_t head_dim;                /* 128 */
    int32_t max_position_embeddings; /* 32768 */
    int32_t num_code_groups;         /* 16 */
    int32_t text_hidden_size;        /* 2048 */
    int32_t text_vocab_size;         /* 151936; required (no default upstream) */
    float rms_norm_eps;              /* 1e-6 */
    float rope_theta;                /* 1e6 */
    int32_t codec_eos_token_id;      /* 2150 */
    int32_t codec_think_id, codec_nothink_id, codec_think_bos_id, codec_think_eos_id;
    int32_t codec_pad_id, codec_bos_id;
    int32_t n_languages;
    kz_name_id languages[KZ_MAX_NAMES]; /* codec_language_id */
    int32_t n_speakers;
    kz_name_id speakers[KZ_MAX_NAMES];  /* spk_id + spk_is_dialect */
    kz_code_predictor_config code_predictor;
} kz_talker_config;

typedef struct kz_tts_config {
    char tts_model_type[32]; /* "custom_voice", "voice_design", "base" */
    char tts_model_size[16]; /* "0b6", "1b7" */
    char tokenizer_type[48]; /* "qwen3_tts_tokenizer_12hz" */
    int32_t im_start_token_id, im_end_token_id;                  /* 151644, 151645 */
    int32_t tts_pad_token_id, tts_bos_token_id, tts_eos_token_id; /* 151671..151673 */
    int32_t assistant_token_id;  /* 77091; not read by the official code (it tokenizes the
                                    role), used to wrap token-id input; -1 when absent */
    int32_t speaker_enc_dim;     /* speaker_encoder_config.enc_dim */
    int32_t speaker_sample_rate; /* speaker_encoder_config.sample_rate */
    kz_talker_config talker;
} kz_tts_config;

/* generation_config.json: sampling defaults (spec 8.5). Missing keys (or a
 * missing file) take the official wrapper's fallbacks: the same values except
 * max_new_tokens 2048. */
typedef struct kz_generation_config {
    bool do_sample;             /* true */
    float temperature;          /* 0.9 */
    int32_t top_k;              /* 50 */
    float top_p;                /* 1.0 */
    float repetition_penalty;   /* 1.05 */
    bool subtalker_dosample;    /* true */
    float subtalker_temperature;/* 0.9 */
    int32_t subtalker_top_k;    /* 50 */
    float subtalker_top_p;      /* 1.0 */
    int32_t max_new_tokens;     /* 8192 in the released file, 2048 fallback */
} kz_generation_config;

/* Parses n_bytes of generation_config.json text (need not be NUL-terminated)
 * over the fallbacks; text NULL means there is no such file: the fallbacks and
 * KZ_OK. Errors are KZ_STATUS_BAD_MODEL with a message starting "label: ". */
kz_status kz_generation_config_parse(const char *label, const char *text, size_t n_bytes,
                                     kz_generation_config *out);

/* Reads path if it exists (a missing file gives the fallbacks) and parses it
 * as above, path as the label. */
kz_status kz_generation_config_load(const char *path, kz_generation_config *out);

/* Parses and validates n_bytes of a Qwen3-TTS checkpoint's config.json text
 * (need not be NUL-terminated). Errors are KZ_STATUS_BAD_MODEL (or
 * KZ_STATUS_OUT_OF_MEMORY) with a message starting "label: ", the label being
 * a path or a name such as "model.gguf:kztts.config_json"; *out is then zeroed. */
kz_status kz_tts_config_parse(const char *label, const char *text, size_t n_bytes,
                              kz_tts_config *out);

/* Reads config.json at path and parses it as above, path as the label. */
kz_status kz_tts_config_load(const char *path, kz_tts_config *out);

/* Writes a multi-line summary into buf. */
void kz_tts_config_describe(const kz_tts_config *c, char *buf, size_t buf_size);

#endif
