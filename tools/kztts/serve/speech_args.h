/*
 * speech_args.h - the body of POST /v1/audio/speech, parsed and validated: JSON text in,
 * a struct of checked fields out, or a 400 in OpenAI's error envelope naming the field.
 * Pure (no model, no HTTP), so every rule is unit-tested on its own.
 *
 * Fields (OpenAI CreateSpeechRequest, additionalProperties false):
 *   model            string, required, any value ("tts-1" is fine)
 *   input            string, required, valid UTF-8, not blank, at most max_input_chars
 *                    Unicode characters (code points, as OpenAI counts)
 *   voice            string, or {"id": string}; required for CustomVoice, and for Base
 *                    unless ref_audio is given; ignored by VoiceDesign
 *   instructions     string, at most 4096 characters: the style instruction (CustomVoice),
 *                    the voice description (VoiceDesign, required there); refused by Base
 *   response_format  mp3|opus|aac|flac|wav|pcm, default mp3
 *   speed            number in [0.25, 4], default 1
 *   stream_format    audio|sse, default audio
 * Qwen3-TTS extensions, with vLLM-Omni's names:
 *   language         string (checked against the model by the handler), default auto
 *   task_type        CustomVoice|VoiceDesign|Base; default the loaded model's type; any
 *                    other type than the model's is a 400 (one model per server)
 *   ref_audio        string, a data: URI of base64 audio (no URLs, no files); Base only
 *   ref_text         string, the transcript of ref_audio; Base only, required with
 *                    ref_audio unless x_vector_only_mode
 *   x_vector_only_mode  bool: clone from the speaker embedding alone; Base only
 *   seed             integer in [0, 2^64) (JSON numbers beyond 2^53 are not exact);
 *                    absent: a fresh seed per request (two asks, two takes)
 *   temperature      number in [0, 2]: 0 = greedy decoding (both stages), else the
 *                    talker's sampling temperature
 *   top_k            integer >= -1: -1 and 0 turn top-k off, else the talker's top-k
 *   top_p            number in (0, 1]
 *   repetition_penalty  number in (0, 2] (1 = none)
 *   max_new_tokens   integer >= 1: at most this many codec frames in all
 * A sampling field left out takes the model's default (generation_config.json).
 * JSON null counts as absent for every optional field (clients written for vLLM-Omni send
 * it); for model and input it is a missing field. A field given twice takes the last
 * value, as Python's json does.
 *
 * Errors (status 400, type invalid_request_error): malformed JSON or a body that is not
 * an object (code invalid_json, param NULL); an unknown field (unknown_parameter, param =
 * its name); a missing required one (missing_required_parameter); a wrong JSON type
 * (invalid_type); a bad value or length (invalid_value, string_above_max_length).
 */
#ifndef KZ_SPEECH_ARGS_H
#define KZ_SPEECH_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

typedef enum speech_task {
    SPEECH_TASK_CUSTOM_VOICE = 1, /* kz_model_type "custom_voice" */
    SPEECH_TASK_VOICE_DESIGN = 2, /* "voice_design" */
    SPEECH_TASK_BASE = 3,         /* "base" (cloning) */
} speech_task;

/* Longest `instructions`, in characters (OpenAI's limit). */
#define SPEECH_MAX_INSTRUCTIONS_CHARS 4096

/* A parsed request. Strings point into the parsed document (valid until
 * speech_args_free); NULL means the field was absent. */
typedef struct speech_args {
    const char *model;
    const char *input;
    size_t input_chars;          /* code points of input */
    const char *voice;           /* the name, from a string or {"id"} */
    const char *instructions;
    const char *response_format; /* one of the six names (static) */
    float speed;                 /* 1 when absent */
    bool sse;                    /* stream_format "sse" */
    speech_task task;            /* given, or the model's */
    const char *language;
    const char *ref_audio;       /* starts with "data:" */
    const char *ref_text;
    bool x_vector_only;
    bool has_seed;
    uint64_t seed;
    bool greedy;                 /* temperature 0 */
    float temperature;           /* 0: the model's */
    int32_t top_k;               /* 0: the model's; -1: off */
    float top_p;                 /* 0: the model's */
    float repetition_penalty;    /* 0: the model's */
    int32_t max_frames;          /* max_new_tokens; 0: no limit */
    void *doc;                   /* the parsed JSON (owned) */
} speech_args;

/* Parses body[0..n_bytes) into *out for a model of kz_model_type model_type with inputs
 * of at most max_input_chars characters. Returns 0, or the HTTP status with e filled.
 * Call speech_args_free(out) in both cases: e->param may point into out's document. */
int speech_args_parse(const char *body, size_t n_bytes, int max_input_chars,
                      const char *model_type, speech_args *out, http_error *e);

void speech_args_free(speech_args *a);

/* Code points in s[0..n_bytes) if it is valid UTF-8 (shortest forms, no surrogates, at
 * most U+10FFFF), else -1. */
long speech_utf8_chars(const char *s, size_t n_bytes);

#endif
