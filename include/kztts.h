/*
 * kztts.h - public API of kztts, a CPU inference engine for Qwen3-TTS (12 Hz codec).
 *
 * Text to speech (each call returns a kz_status; checks left out here):
 *
 *   kz_model *model;
 *   kz_session *session;
 *   kz_model_load("Qwen3-TTS-12Hz-0.6B-CustomVoice", NULL, &model);   // directory or .gguf
 *   kz_session_new(model, NULL, &session);
 *   kz_request req = {.text = "Hello, I am kztts.", .speaker = "ryan"};
 *   kz_audio audio;
 *   if (kz_synthesize_all(session, &req, &audio) == KZ_OK) {
 *       // audio.samples[0 .. audio.n_samples): mono float PCM at audio.sample_rate Hz
 *       kz_audio_free(&audio);
 *   }
 *   kz_session_free(session);
 *   kz_model_free(model);
 *
 * Streaming: set req.on_audio (and req.user) and call kz_synthesize(session, &req); the
 * audio arrives chunk by chunk while it is made.
 *
 * Objects: a kz_model (mapped weights, configs, tokenizer, kernel table) is immutable
 * after load and may be shared by any number of threads and sessions; a kz_session holds
 * everything that changes during synthesis (caches, codec state, thread pools) and is
 * used by one thread at a time: a call on a session while another runs on it (from its
 * callback or another thread) returns KZ_STATUS_INVALID_ARGUMENT ("in use").
 *
 * Parameters: every params and request struct is valid zero-initialised; a field's 0
 * means "the default" (the model's, where the model files state one), and the
 * *_default_params functions fill the same defaults in explicitly. Callbacks and the one
 * user pointer they all receive live in the struct of the call they belong to
 * (kz_request for synthesis, kz_decode_params for decoding).
 *
 * Errors are values: every fallible call returns a kz_status (KZ_OK == 0) and sets a
 * thread-local message readable with kz_last_error(). The library never prints (except
 * through the log callback) and never exits. Destructors accept NULL. Strings are UTF-8
 * and borrowed for the duration of the call.
 *
 * Environment: KZ_ISA=scalar|avx2|avx512|neon lowers the kernel level like
 * kz_model_params.isa does (it can only lower it). Nothing else is read.
 *
 * Compatibility: before 1.0, releases may add fields at the end of the structs and
 * change signatures; KZ_ABI_VERSION counts those changes (see kz_abi_version). Sections
 * marked experimental may change in any release without a KZ_ABI_VERSION change.
 */
#ifndef KZTTS_H
#define KZTTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KZ_BUILDING_LIBRARY) && defined(__GNUC__)
#define KZ_API __attribute__((visibility("default")))
#else
#define KZ_API
#endif

/* ---- version, status, logging ------------------------------------------ */

/* The layout of the public structs and the signatures of the public functions this
 * header declares, as a number that grows with every incompatible change. */
#define KZ_ABI_VERSION 4

/* KZ_ABI_VERSION of the library linked at run time. A program checks
 * kz_abi_version() == KZ_ABI_VERSION once at start-up: different numbers mean it was
 * built against another header than the library it runs with. */
KZ_API int32_t kz_abi_version(void);

/* Library version string, e.g. "0.1.0". Static, do not free. */
KZ_API const char *kz_version(void);

/* One-line description of the CPU features and kernel levels available. Static. */
KZ_API const char *kz_system_info(void);

typedef enum kz_status {
    KZ_OK = 0,
    KZ_STATUS_INVALID_ARGUMENT = 1, /* a parameter is out of range or NULL */
    KZ_STATUS_IO = 2,               /* a file could not be opened or read */
    KZ_STATUS_BAD_MODEL = 3,        /* a model file is malformed or inconsistent */
    KZ_STATUS_BAD_INPUT = 4,        /* request data is malformed (codes, text) */
    KZ_STATUS_OUT_OF_MEMORY = 5,
    KZ_STATUS_CANCELLED = 6,        /* a callback returned false */
    KZ_STATUS_UNSUPPORTED = 7,      /* valid request the model or build cannot serve */
    KZ_STATUS_INTERNAL = 8,
} kz_status;

/* Static name of a status, e.g. "bad model". */
KZ_API const char *kz_status_str(kz_status status);

/* Message describing the latest failure on this thread ("" if none). Valid until
 * the next kztts call on this thread. */
KZ_API const char *kz_last_error(void);

typedef enum kz_log_level {
    KZ_LOG_DEBUG = 0,
    KZ_LOG_INFO = 1,
    KZ_LOG_WARN = 2,
    KZ_LOG_ERROR = 3,
} kz_log_level;

typedef void (*kz_log_fn)(kz_log_level level, const char *message, void *user);

/* Sets the process-wide log callback (NULL restores the default: stderr, warnings
 * and above) and the minimum level passed to it. Not thread-safe against
 * concurrent logging; call it at start-up. */
KZ_API void kz_log_set(kz_log_fn fn, kz_log_level min_level, void *user);

/* ---- model --------------------------------------------------------------- */

typedef struct kz_model kz_model;

/* Kernel level cap. Levels are ordered scalar < avx2 < avx512 < neon, and a cap
 * above what the CPU has lowers nothing: on aarch64 avx2 and avx512 mean scalar,
 * on x86-64 neon means auto. */
typedef enum kz_isa_cap {
    KZ_ISA_CAP_AUTO = 0,   /* best the CPU supports */
    KZ_ISA_CAP_SCALAR = 1, /* plain C kernels (reference) */
    KZ_ISA_CAP_AVX2 = 2,   /* at most AVX2 + FMA */
    KZ_ISA_CAP_AVX512 = 3, /* at most AVX-512 */
    KZ_ISA_CAP_NEON = 4,   /* at most NEON (aarch64 Advanced SIMD) */
} kz_isa_cap;

/* Arithmetic of the codec decoder's convolutions. EXACT and FAST are the choices; the
 * rest are the forms FAST picks from, forced, for benchmarking: they may change or go in
 * any release. Audio is independent of chunk sizes and thread counts in every one. */
typedef enum kz_precision {
    KZ_PRECISION_DEFAULT = 0, /* the model file's choice: a GGUF written by `kztts quantize
                                 --codec-forms P` runs in P (as this CPU runs P), anything
                                 else in KZ_PRECISION_EXACT */
    KZ_PRECISION_EXACT = 1,   /* fp32 weights and activations, as the reference computes */
    KZ_PRECISION_FAST = 2,    /* the fastest form for this CPU, chosen at load: waveform
                                 within 40 dB SNR of EXACT (kz_model_describe names it) */
    /* Benchmarking knobs. */
    KZ_PRECISION_BF16 = 3,          /* bf16 weights and conv inputs, fp32 sums */
    KZ_PRECISION_WINOGRAD = 4,      /* fp32, the large convolutions by Winograd transforms */
    KZ_PRECISION_WINOGRAD_BF16 = 5, /* Winograd for the large convolutions, bf16 for the
                                       pointwise ones */
} kz_precision;

/* Element type of the talker's KV cache (the keys and values of every position so far,
 * read whole by every step). */
typedef enum kz_kv_cache {
    KZ_KV_CACHE_DEFAULT = 0, /* KZ_KV_CACHE_F32 */
    KZ_KV_CACHE_F32 = 1,     /* fp32, as the reference computes */
    KZ_KV_CACHE_F16 = 2,     /* IEEE binary16, each key and value rounded to nearest even as
                                it is stored (one beyond +-65504 would become infinite):
                                half the cache's memory and bytes read a step; the codes
                                may differ from F32's (the same in a batch of any size and
                                with the prompt cache, as F32's) */
} kz_kv_cache;

typedef struct kz_model_params {
    kz_isa_cap isa;               /* kernel level cap. Default (0) KZ_ISA_CAP_AUTO. */
    kz_precision codec_precision; /* codec decoder convolutions. Default (0)
                                     KZ_PRECISION_DEFAULT: what the file asks for. */
    bool skip_voice_encoders;     /* Base models: leave the speaker and codec encoders out
                                     (voices then come only from files, kz_voice_load): a
                                     faster load and ~160 MB less memory at 0.6B. Default
                                     false: a Base model can make voices. */
    kz_kv_cache kv_cache;         /* the talker's KV cache, for every session and scheduler
                                     on the model. Default (0) KZ_KV_CACHE_F32. */
    bool codec_only;              /* load only the codec decoder of a full checkpoint: kz_decode
                                     works, synthesis and encoding are refused; the language
                                     models, tokenizer and encoders are never bound or mapped
                                     in (less memory, a faster load). A codec-only file loads
                                     as it always does. Default false. */
} kz_model_params;

/* Defaults: isa = KZ_ISA_CAP_AUTO, codec_precision = KZ_PRECISION_DEFAULT, kv_cache =
 * KZ_KV_CACHE_DEFAULT (f32). */
KZ_API void kz_model_default_params(kz_model_params *params);

/* Loads a model from `path`: a Qwen3-TTS checkpoint directory as released
 * (config.json, model.safetensors, speech_tokenizer/), a codec-only directory
 * (Qwen3-TTS-Tokenizer-12Hz: config.json of model_type qwen3_tts_tokenizer_12hz
 * and model.safetensors), or a single .gguf file written by `kztts quantize`
 * (weights mapped in place, configs and tokenizer inside). Every header and shape
 * is validated. params may be NULL (the defaults). The text tokenizer is built on a
 * thread of its own while the weights are bound (the log callback may be called from
 * it); that thread has ended when this returns. On success *out owns the model
 * (kz_model_free). On failure *out is NULL. */
KZ_API kz_status kz_model_load(const char *path, const kz_model_params *params, kz_model **out);

KZ_API void kz_model_free(kz_model *model);

/* Human-readable multi-line description: configs, tensor counts and types,
 * memory, CPU features, the kernel level and the codec precision in use. Owned by
 * the model. */
KZ_API const char *kz_model_describe(const kz_model *model);

/* Output sample rate in Hz and samples per codec frame, from the model's files (24000 and
 * 1920 in the released models). */
KZ_API int32_t kz_model_sample_rate(const kz_model *model);
KZ_API int32_t kz_model_samples_per_frame(const kz_model *model);
/* Codebooks per frame and entries per codebook (16 and 2048 in the released models). */
KZ_API int32_t kz_model_num_codebooks(const kz_model *model);
KZ_API int32_t kz_model_codebook_size(const kz_model *model);

/* ---- text ---------------------------------------------------------------- */

/* Pre-tokenizer split pattern. */
typedef enum kz_text_split {
    KZ_TEXT_SPLIT_QWEN2 = 0,   /* the Qwen2 regex (hub-id loads of the official package) */
    KZ_TEXT_SPLIT_MISTRAL = 1, /* the pattern the official package uses for local folders */
} kz_text_split;

/* Tokenizes UTF-8 text with the model's tokenizer (NFC, special tokens, byte-level
 * BPE; no tokens added). On success *ids is owned by the caller (kz_ids_free).
 * Invalid UTF-8 returns KZ_STATUS_BAD_INPUT with the byte offset; a model without
 * tokenizer files returns KZ_STATUS_UNSUPPORTED. */
KZ_API kz_status kz_tokenize(const kz_model *model, const char *text, kz_text_split split,
                             int32_t **ids, size_t *n_ids);

/* Frees ids returned by kz_tokenize. Accepts NULL. */
KZ_API void kz_ids_free(int32_t *ids);

/* ---- session ------------------------------------------------------------- */

typedef struct kz_session kz_session;

/* How the two synthesis stages share the cores. */
typedef enum kz_schedule {
    KZ_SCHEDULE_AUTO = 0,    /* KZ_SCHEDULE_TURNS */
    KZ_SCHEDULE_TURNS = 1,   /* the stages take turns, each with all its threads: the
                                talker/code predictor step of a frame, then a codec chunk
                                whenever one is ready (the codec goes first); suits
                                machines where one core cannot saturate memory */
    KZ_SCHEDULE_OVERLAP = 2, /* the stages run at the same time on their own threads */
} kz_schedule;

typedef struct kz_scheduler kz_scheduler;

typedef struct kz_session_params {
    int32_t n_threads;       /* threads for kz_decode incl. the caller, 0..256. 0 (default)
                                = number of online CPUs (at most 8). */
    int32_t n_threads_lm;    /* synthesis: threads of the talker + code predictor stage,
                                which runs on its own thread. 0 (default) = n_threads */
    int32_t n_threads_codec; /* synthesis: threads of the codec stage, which runs on the
                                calling thread. 0 (default) = n_threads with
                                KZ_SCHEDULE_TURNS, n_threads / 2 (at least 1) with
                                KZ_SCHEDULE_OVERLAP */
    kz_schedule schedule;    /* default (0) KZ_SCHEDULE_AUTO */
    int32_t prompt_cache_mb; /* memory for the session's prompt cache, -1..65536: the
                                talker's keys and values of a prompt's leading rows
                                (instruction, role, language and speaker tags), kept so
                                that the next request with the same voice skips them.
                                0 (default) = 64 MB, -1 = off.
                                The codes and audio never depend on it. */
    kz_scheduler *scheduler; /* NULL (default): the session's own LM thread runs its
                                talker and code predictor. Otherwise the scheduler's
                                thread runs them, batched with the other sessions
                                attached to it (see "scheduler" below); n_threads_lm,
                                n_threads_codec and schedule are then unused and
                                n_threads serves kz_decode only. */
} kz_session_params;

/* Defaults: all fields 0 (n_threads: online CPUs, at most 8; the LM stage all of them,
 * the codec stage all of them as the stages take turns; prompt cache 64 MB). */
KZ_API void kz_session_default_params(kz_session_params *params);

/* Creates a session on `model` (which must outlive it). params may be NULL (the
 * defaults). The talker's KV cache is made by the session's first synthesis and kept for
 * the next ones (grown when one needs more positions): its memory, as much as the longest
 * synthesis so far touched, is returned by kz_session_free. */
KZ_API kz_status kz_session_new(const kz_model *model, const kz_session_params *params,
                                kz_session **out);

KZ_API void kz_session_free(kz_session *session);

/* Forgets the prompt prefixes the session keeps (see prompt_cache_mb). */
KZ_API void kz_session_clear_prompt_cache(kz_session *session);

/* ---- audio --------------------------------------------------------------- */

/* Receives mono float PCM at the model's sample rate, in [-1, 1]. `pcm` is valid only
 * during the call (copy what you keep). `pos_frame` is the index of the first codec
 * frame (80 ms in the released models) the buffer belongs to; `is_last` marks the final
 * buffer of the request (exactly once; in kz_synthesize it may be empty, n_samples 0,
 * since the end of speech is known only after the last frame). Called on the thread that
 * called kz_decode or kz_synthesize, in order; it must not re-enter the session (such a
 * call returns KZ_STATUS_INVALID_ARGUMENT). Return true to continue, false to cancel (the
 * call then returns KZ_STATUS_CANCELLED and the synthesis thread stops within one frame).
 * `user` is the struct's user pointer. */
typedef bool (*kz_audio_fn)(const float *pcm, size_t n_samples, int64_t pos_frame, bool is_last,
                            void *user);

typedef enum kz_decode_mode {
    /* Stateful causal decoding in chunks of chunk_frames with carried state: the
     * output is bit-identical for every chunk size and equals one single pass
     * over all frames. Memory does not grow with the number of frames. */
    KZ_DECODE_STREAM = 0,
    /* The official package's chunked_decode: independent passes over 300 frames
     * with 25 frames of left context. Equal to KZ_DECODE_STREAM up to 300 frames;
     * for longer inputs it reproduces the official output. */
    KZ_DECODE_OFFICIAL = 1,
} kz_decode_mode;

typedef struct kz_decode_params {
    kz_decode_mode mode;  /* default (0) KZ_DECODE_STREAM */
    int32_t chunk_frames; /* frames per callback in stream mode, 1..1024; 0 (default) = 4 */
    kz_audio_fn on_audio; /* receives the audio: required by kz_decode; kz_decode_all
                             calls it too when set (e.g. for progress) */
    void *user;           /* passed to on_audio */
} kz_decode_params;

/* Defaults: mode = KZ_DECODE_STREAM, chunk_frames = 4, on_audio and user NULL. */
KZ_API void kz_decode_default_params(kz_decode_params *params);

/* Decodes `n_frames` frames of codec codes to audio, frame-major: codes[t * n + q] is
 * codebook q of frame t (n = kz_model_num_codebooks), each in [0, codebook_size). Audio
 * reaches params->on_audio chunk by chunk, n_frames * samples_per_frame samples in all.
 * The session's codec state is reset at the start of every call. */
KZ_API kz_status kz_decode(kz_session *session, const int32_t *codes, size_t n_frames,
                           const kz_decode_params *params);

/* Whole-buffer audio owned by the caller. */
typedef struct kz_audio {
    float *samples;      /* [n_samples], free with kz_audio_free */
    size_t n_samples;
    int32_t sample_rate; /* Hz */
} kz_audio;

/* kz_decode into one buffer (built on the streaming call); params may be NULL (the
 * defaults). On failure *audio is left empty. */
KZ_API kz_status kz_decode_all(kz_session *session, const int32_t *codes, size_t n_frames,
                               const kz_decode_params *params, kz_audio *audio);

/* Frees audio->samples and zeroes the struct. Accepts NULL and empty structs. */
KZ_API void kz_audio_free(kz_audio *audio);

/* ---- speakers and languages ------------------------------------------------ */

/* Speakers of a CustomVoice model (0 for other models) and their names, as written
 * in config.json (matched case-insensitively). index in [0, count). Static per model. */
KZ_API int32_t kz_model_speaker_count(const kz_model *model);
KZ_API const char *kz_model_speaker_name(const kz_model *model, int32_t index);
/* Languages other than "auto" (e.g. "english", "chinese"; dialects included). */
KZ_API int32_t kz_model_language_count(const kz_model *model);
KZ_API const char *kz_model_language_name(const kz_model *model, int32_t index);
/* "custom_voice", "voice_design", "base", or "codec" for a codec-only model. */
KZ_API const char *kz_model_type(const kz_model *model);

/* ---- voices: cloning with a Base model ----------------------------------- */

/* A voice cloned from a short reference recording: the speaker encoder's x-vector and,
 * for an in-context (ICL) voice, the reference's codec codes and transcript. Made once
 * (from samples or an audio file), saved to a small versioned file (.kzvoice) and
 * loaded again; immutable, so one voice may serve any number of sessions and threads.
 * A voice belongs to the model it was made with (the speaker encoder's size and a
 * fingerprint of the encoders' weights, the same in a GGUF made from that checkpoint).
 *
 *   kz_voice *voice;
 *   kz_voice_params vp = {.ref_text = "What the reference recording says."};
 *   kz_voice_from_file(model, "ref.wav", &vp, &voice);       // or kz_voice_load
 *   kz_voice_save(voice, "alice.kzvoice");
 *   kz_request req = {.text = "Hello in a cloned voice.", .voice = voice};
 *   kz_synthesize_all(session, &req, &audio);
 *   kz_voice_free(voice);
 *
 * Reference audio: any sample rate and channel count, downmixed (channel mean) and
 * resampled to the model's rate as the official pipeline does; at least 1 s, at most
 * max_seconds, not silent (else KZ_STATUS_BAD_INPUT; a reference that is too long gets a
 * message stating its length and "over the limit of" max_seconds). Use only voices whose
 * owners agreed to be cloned. */
typedef struct kz_voice kz_voice;

typedef struct kz_voice_params {
    const char *ref_text;  /* transcript of the reference audio: an ICL voice (the official
                              default mode). Required unless xvector_only. */
    bool xvector_only;     /* a voice of the speaker embedding only (no codes, no
                              transcript; ref_text is ignored) */
    float max_seconds;     /* longest reference accepted, [1, 600]; 0 = 60 */
    int32_t n_threads;     /* threads for the encoders, 0..256; 0 = online CPUs (at most 8) */
} kz_voice_params;

KZ_API void kz_voice_default_params(kz_voice_params *params);

/* A voice from samples in memory: n_frames frames of `channels` interleaved float
 * samples in [-1, 1] at sample_rate Hz (8000..384000). KZ_STATUS_UNSUPPORTED for a
 * model that cannot clone (not Base); KZ_STATUS_BAD_INPUT for unusable audio. */
KZ_API kz_status kz_voice_from_samples(const kz_model *model, const float *samples,
                                       size_t n_frames, int32_t sample_rate, int32_t channels,
                                       const kz_voice_params *params, kz_voice **out);
/* The same from an audio file (WAV, FLAC, Ogg Vorbis/Opus, MP3, ... as libsndfile reads). */
KZ_API kz_status kz_voice_from_file(const kz_model *model, const char *audio_path,
                                    const kz_voice_params *params, kz_voice **out);

/* Writes the voice file at path (complete or not at all). */
KZ_API kz_status kz_voice_save(const kz_voice *voice, const char *path);
/* Reads and validates a voice file; which model it fits is checked when it is used
 * (kz_voice_check, kz_synthesize). */
KZ_API kz_status kz_voice_load(const char *path, kz_voice **out);
KZ_API void kz_voice_free(kz_voice *voice);

/* KZ_OK when voice was made for model, else KZ_STATUS_INVALID_ARGUMENT with a one-line
 * reason in kz_last_error(). */
KZ_API kz_status kz_voice_check(const kz_model *model, const kz_voice *voice);

typedef struct kz_voice_info {
    int32_t format_version;  /* of the file format */
    bool icl;                /* has reference codes and transcript */
    int32_t xvector_dim;     /* the speaker encoder's enc_dim (= talker hidden size) */
    int32_t n_ref_frames;    /* reference codec frames (0 for x-vector only) */
    int32_t n_codebooks;     /* codes per frame (0 for x-vector only) */
    double ref_seconds;      /* length of the reference audio */
    const char *ref_text;    /* transcript ("" for x-vector only), valid while voice lives */
    const char *model_type;  /* "base" */
    uint64_t fingerprint;    /* of the encoders' weights of the model it belongs to */
} kz_voice_info;

KZ_API kz_status kz_voice_get_info(const kz_voice *voice, kz_voice_info *info);

/* ---- codec encoder ------------------------------------------------------- */

/* Codec codes of audio (the codec encoder of a Base or codec model): n_frames frames of
 * `channels` interleaved samples at sample_rate Hz in, downmixed and resampled as for a
 * voice; out: *codes [*n_codes_frames, n_codebooks] (codebook 0 first), free with
 * kz_codes_free. params: max_seconds and n_threads as for a voice (ref_text ignored). */
KZ_API kz_status kz_encode(const kz_model *model, const float *samples, size_t n_frames,
                           int32_t sample_rate, int32_t channels, const kz_voice_params *params,
                           int32_t **codes, size_t *n_codes_frames, int32_t *n_codebooks);
KZ_API kz_status kz_encode_file(const kz_model *model, const char *audio_path,
                                const kz_voice_params *params, int32_t **codes,
                                size_t *n_codes_frames, int32_t *n_codebooks);
KZ_API void kz_codes_free(int32_t *codes);

/* ---- synthesis ------------------------------------------------------------ */

/* How the text is laid out in the prompt (spec: the wrapper's non_streaming_mode). */
typedef enum kz_text_layout {
    KZ_LAYOUT_DEFAULT = 0,       /* the official wrapper's default: non-streaming for
                                    CustomVoice and VoiceDesign, streaming for Base (its
                                    generate_voice_clone) */
    KZ_LAYOUT_NON_STREAMING = 1, /* all text in the prefill */
    KZ_LAYOUT_STREAMING = 2,     /* one text token per generated frame */
} kz_text_layout;

/* Receives each generated frame's codes (codes[0] = codebook 0) before it is decoded,
 * on the thread that called kz_synthesize. Return false to cancel. */
typedef bool (*kz_frame_fn)(const int32_t *codes, int32_t n_codebooks, int64_t pos_frame,
                            void *user);

/* Streaming text input: called on the synthesis (LM) thread whenever the engine needs
 * more text. Write up to cap bytes of the next piece of UTF-8 text into buf and set
 * *n_bytes (0 is allowed); set *done when no text will follow (the last piece may come
 * with it). It may block until text is available (e.g. the next token of an LLM).
 * Return false to cancel the synthesis. */
typedef bool (*kz_text_pull_fn)(char *buf, size_t cap, size_t *n_bytes, bool *done, void *user);

/* One synthesis. Zero-initialised with text (or token ids, or text_pull) and, for a
 * CustomVoice model, a speaker, it is complete: every other field's 0 (NULL, false)
 * means the default named in its comment, "model" meaning the model's
 * generation_config.json (or the official wrapper's fallbacks where it has none). */
typedef struct kz_request {
    /* What to say: exactly one of text, token_ids, text_pull. */
    const char *text;          /* UTF-8 text to speak */
    const int32_t *token_ids;  /* ids of the user text only (the engine adds the chat
                                  wrapping) */
    size_t n_token_ids;
    kz_text_pull_fn text_pull; /* streaming text input: generation starts once the first
                                  tokens are known (with an in-context voice, the tokens
                                  its prompt holds: see voice), uses the streaming-text
                                  layout (layout KZ_LAYOUT_NON_STREAMING is refused), and
                                  does not end while more text is promised. At most 16 KB
                                  of text and max_frames (0: 1500, 2 minutes in the
                                  released models) frames. */
    /* Voice. */
    const char *speaker;       /* CustomVoice: required, one of the model's speakers */
    const kz_voice *voice;     /* Base: required, a cloned voice made for this model
                                  (kz_voice_*); refused by the other model types (and a
                                  speaker or an instruction by Base). An in-context voice's
                                  audio is only the new speech, equal to the official
                                  output (reference + new codes decoded, the reference cut
                                  off), streamed from the first frame; where the official
                                  double-precision cut keeps one sample of the reference
                                  before the new speech, that sample comes first when the
                                  frame count is known in advance (frames), and is left
                                  out otherwise. With text_pull, generation starts once
                                  transcript + text tokens outnumber the reference's frames
                                  (or the text ends). The session keeps the codec's state
                                  after the voice's reference, so only its first use
                                  decodes it. */
    const char *language;      /* NULL or "auto" (default) or a language name */
    const char *instruct;      /* style instruction (1.7B CustomVoice, VoiceDesign) or NULL;
                                  0.6B CustomVoice ignores it as the official wrapper does */
    kz_text_layout layout;     /* default KZ_LAYOUT_DEFAULT */
    kz_text_split split;       /* tokenizer split pattern, default KZ_TEXT_SPLIT_QWEN2 */
    /* Sampling: talker (codebook 0), then the code predictor (the frame's other codebooks). */
    bool greedy;               /* true: argmax for both. false (default): as the model says
                                  (sampling, unless its do_sample is false) */
    float temperature;         /* talker, (0, 100]; 0 = model (0.9) */
    int32_t top_k;             /* talker, 1..vocab, or -1 = off; 0 = model (50) */
    float top_p;               /* talker, (0, 1]; 0 = model (1.0) */
    float repetition_penalty;  /* talker, (0, 100], 1 = off, applies in greedy too;
                                  0 = model (1.05) */
    float cp_temperature;      /* code predictor, as temperature; 0 = model (0.9) */
    int32_t cp_top_k;          /* code predictor, 1..its vocab, or -1 = off; 0 = model (50) */
    float cp_top_p;            /* code predictor, as top_p; 0 = model (1.0) */
    uint64_t seed;             /* RNG seed; default 0 (0 is a seed like any other) */
    /* Length. */
    int32_t frames;            /* > 0: exactly this many frames in all (end of speech
                                  masked); 0 (default): until end of speech */
    int32_t max_frames;        /* > 0: at most this many frames in all (long text: over all
                                  its utterances); 0 (default): no total. Without frames,
                                  each utterance also stops at its runaway guard
                                  min(max_new_tokens - 1, 50 + 8 x its text tokens).
                                  frames above max_frames is KZ_STATUS_INVALID_ARGUMENT */
    int32_t max_utterance_bytes; /* text longer than this is split at sentence ends (any
                                  script) into utterances spoken back to back in one stream,
                                  joined with a 10 ms fade; -1 = never split; 0 = 600 */
    /* Audio delivery. */
    int32_t first_chunk_frames;/* frames of the first audio callback, 1..1024; 0 = 1
                                  (first sound after one frame) */
    int32_t chunk_frames;      /* frames per later audio callback, 1..1024, or 0 (default):
                                  adaptive, 1 to 16 frames sized by the audio a listener
                                  who started at the first callback still has buffered,
                                  so small while that is short (no underrun) and large
                                  once it is long (the codec's cheapest); a chunk that
                                  comes after that buffer ran dry, made slower than real
                                  time as the ones before it, doubles the smallest size
                                  (a machine slower than real time at one frame gets
                                  throughput). Audio and codes never depend on it.
                                  kz_synthesize_all takes 0 as 16. */
    /* Callbacks, each optional except on_audio for kz_synthesize; all get `user`. */
    kz_audio_fn on_audio;      /* the audio (kz_synthesize_all calls it too when set) */
    kz_frame_fn on_frame;      /* each frame's codes */
    void *user;                /* passed to on_audio, on_frame and text_pull */
} kz_request;

/* Fills r with the defaults above, the model's values written out (model may be NULL:
 * the official wrapper's fallbacks), language "auto", no text and no callbacks. The
 * result synthesizes exactly as the zero-initialised request does. */
KZ_API void kz_request_default_params(const kz_model *model, kz_request *r);

/* Synthesizes speech for r, streaming PCM at the model's sample rate to r->on_audio chunk
 * by chunk (see kz_audio_fn). Same seed and request -> same audio, on any thread count. */
KZ_API kz_status kz_synthesize(kz_session *session, const kz_request *r);

/* Computes the prompt prefix of r's voice (speaker or cloned voice, language,
 * instruction; an in-context voice's transcript rows and the codec's state after its
 * reference too) into the session's prompt cache now, so that the first kz_synthesize with that voice starts
 * from its text (e.g. while an LLM is still writing it). r's voice and numbers are
 * checked as kz_synthesize checks them; its text (text, token_ids, text_pull) and
 * callbacks are ignored and may be absent. Nothing happens if the session has the
 * prefix already. KZ_STATUS_INVALID_ARGUMENT if the session keeps no prompt cache
 * (prompt_cache_mb -1). */
KZ_API kz_status kz_session_prepare(kz_session *session, const kz_request *r);

/* kz_synthesize into one buffer (r->on_audio may be NULL). On failure *audio is left
 * empty. */
KZ_API kz_status kz_synthesize_all(kz_session *session, const kz_request *r, kz_audio *audio);

/* ---- scheduler: many requests batched ------------------------------------ */

/* A scheduler runs the synthesis compute of every session attached to it on one thread
 * and one pool: the language-model stage (talker and code predictor, the part bound by
 * memory traffic) steps the requests in progress together, each weight matrix read once
 * per frame for the whole batch; between two batched frames run the codec chunks that
 * streams wait for and at most one new request's prompt prefill on each half of the pool
 * (jobs that wait together run side by side on the halves when their sizes balance; a
 * stream's first chunk runs before the next batched frame). Requests join and leave
 * at frame boundaries; a cancelled request leaves at its next frame. Each session keeps
 * its own KV cache, codec state, sampler and random state, and its callbacks run on the
 * thread that called kz_synthesize, so a request's codes and audio are bit for bit those
 * of the same request on a session without a scheduler, whatever else runs.
 * Streamed text input (kz_request.text_pull) works; a request waiting for its text sits
 * out the frames until the text comes.
 *
 *   kz_scheduler *sch;
 *   kz_scheduler_params sp;
 *   kz_scheduler_default_params(&sp);
 *   kz_scheduler_new(model, &sp, &sch);
 *   // per client thread:
 *   kz_session_params p;
 *   kz_session_default_params(&p);
 *   p.n_threads = 1;           // kz_decode's threads (synthesis runs on the scheduler)
 *   p.scheduler = sch;
 *   kz_session_new(model, &p, &session);
 *   kz_synthesize(session, &request);   // batched with the other threads' requests
 *   kz_session_free(session);
 *   // when every attached session is freed:
 *   kz_scheduler_free(sch);
 */
typedef struct kz_scheduler_params {
    int32_t n_threads;  /* threads of its pool, which does all the synthesis compute of
                           the attached sessions, 0..256; 0 (default) = the online CPUs
                           (at most 8) */
    int32_t max_batch;  /* requests stepped together, 1..64; 0 (default) = 8. Further
                           requests wait (in arrival order) for a place in the batch. */
} kz_scheduler_params;

typedef struct kz_scheduler_stats {
    int32_t active;      /* requests in the batch now */
    int32_t waiting;     /* requests waiting for a place in the batch */
    int64_t steps;       /* batched frame steps run */
    int64_t frames;      /* frames generated (sum of the batch sizes of the steps) */
    int64_t prefills;    /* prompt prefills run */
    double batch_ms;     /* wall time in batched steps (talker and code predictor, the
                            pickers included) */
    double prompt_ms;    /* wall time in prefills */
    double short_ms;     /* wall time in the other work between batches: codec chunks,
                            streamed text tokens */
} kz_scheduler_stats;

KZ_API void kz_scheduler_default_params(kz_scheduler_params *params);

/* Creates a scheduler for `model` (which must outlive it) and starts its thread. params
 * may be NULL (the defaults). */
KZ_API kz_status kz_scheduler_new(const kz_model *model, const kz_scheduler_params *params,
                                  kz_scheduler **out);

/* Stops the thread and frees the scheduler. Every session attached to it must have been
 * freed before. NULL is allowed. */
KZ_API void kz_scheduler_free(kz_scheduler *scheduler);

/* A consistent snapshot of the counters; safe from any thread. */
KZ_API void kz_scheduler_get_stats(const kz_scheduler *scheduler, kz_scheduler_stats *out);

/* ---- timings ------------------------------------------------------------- */

/* Cumulative wall time per stage since the session was created (or reset). */
typedef struct kz_timings {
    double codec_quantizer_ms;  /* codebook lookup + output projections + pre-conv */
    double codec_transformer_ms;/* pre-transformer */
    double codec_upsample_ms;   /* ConvTranspose + ConvNeXt stages */
    double codec_vocoder_ms;    /* SnakeBeta decoder blocks + final conv */
    double codec_flop;          /* floating-point operations performed by the codec */
    int64_t codec_frames;       /* frames decoded */
    double prefill_ms;          /* talker prefill over the prompt */
    double talker_ms;           /* talker steps (one per frame) */
    double code_predictor_ms;   /* code predictor (codebooks 1.. of each frame) */
    double sampling_ms;         /* logits processing and sampling */
    int64_t frames;             /* frames generated */
    int64_t prompt_tokens;      /* prefill rows processed */
    double talker_bytes;        /* weight bytes the talker streamed (prefill and steps) */
    double code_predictor_bytes;/* weight bytes the code predictor streamed */
    double codec_flop_bf16;     /* the part of codec_flop run in bf16 */
    int64_t prompt_tokens_cached; /* prefill rows taken from the session's prompt cache
                                     instead (not in prompt_tokens) */
} kz_timings;

/* Fills *out (zeroed for a NULL session; out NULL does nothing). */
KZ_API void kz_session_timings(const kz_session *session, kz_timings *out);
KZ_API void kz_session_reset_timings(kz_session *session);

/* ---- quantize ------------------------------------------------------------ */

/* A checkpoint directory -> one GGUF file that kz_model_load maps in place (weights in the
 * chosen type, the codec pre-packed, configs and tokenizer inside), as llama.cpp's
 * llama_model_quantize: `kztts quantize` is this call. */

/* What the talker's matrices (2-D talker.*.weight tensors with a multiple of 32 columns)
 * are stored as. Norms and biases keep their stored float type in every type; the codec is
 * stored as pre-packed fp32 panels. */
typedef enum kz_quantize_type {
    KZ_QUANTIZE_Q8_0 = 0,   /* every talker matrix Q8_0 (8-bit, blocks of 32) */
    KZ_QUANTIZE_Q4_0 = 1,   /* the layers' projections Q4_0 (least-squares scales); the
                               embeddings, heads and text projection Q8_0 */
    KZ_QUANTIZE_Q4_MLP = 2, /* only the layers' MLP projections Q4_0, the rest Q8_0 */
    KZ_QUANTIZE_BF16 = 3,   /* every talker matrix BF16 (as released) */
    KZ_QUANTIZE_F16 = 4,    /* every talker matrix F16 (values beyond 65504 become infinite) */
    KZ_QUANTIZE_F32 = 5,    /* every float tensor F32 */
} kz_quantize_type;

/* Progress of kz_quantize: n_done of n_total tensors written. Called on the calling thread
 * before the first tensor (n_done 0) and after each, the last time (n_total) once the file
 * is complete on disk and only its rename into place is left. Return false to cancel:
 * kz_quantize then removes its temporary file and returns KZ_STATUS_CANCELLED. */
typedef bool (*kz_quantize_progress_fn)(size_t n_done, size_t n_total, void *user);

/* Tensors written in one stored type. */
typedef struct kz_quantize_count {
    const char *type;  /* "F32", "F16", "BF16", "Q8_0" or "Q4_0" (static) */
    size_t n_tensors;
    uint64_t n_bytes;  /* their data bytes */
} kz_quantize_count;

/* What kz_quantize wrote. */
typedef struct kz_quantize_report {
    kz_quantize_count types[5]; /* F32 (packed codec panels included), F16, BF16, Q8_0, Q4_0 */
    size_t n_packed;            /* codec weights stored as pre-packed panels */
    size_t n_forms;             /* of those, stored in codec_forms' converted form too */
    size_t n_skipped;           /* source tensors of types GGUF cannot hold (unused) */
    double seconds;             /* wall time of the call */
    kz_quantize_count tokenizer; /* "tokenizer": the text tokenizer's tables, stored as
                                    integer tensors so that a load maps them (not weights,
                                    so not in types) */
} kz_quantize_report;

typedef struct kz_quantize_params {
    kz_quantize_type type;            /* default KZ_QUANTIZE_Q8_0 */
    kz_precision codec_forms;         /* also store the codec converted for this precision
                                         (BF16, WINOGRAD, WINOGRAD_BF16, or FAST: this CPU's),
                                         so loads in it map the form instead of converting;
                                         default (0) KZ_PRECISION_DEFAULT: none; the
                                         file then runs its codec in this precision
                                         unless kz_model_params says otherwise */
    int32_t n_threads;                /* threads converting rows; 0 (default) = the cores, at
                                         most 8 */
    kz_quantize_progress_fn progress; /* default NULL */
    void *user;                       /* passed to progress */
    kz_quantize_report *report;       /* filled when the call succeeds; default NULL */
} kz_quantize_params;

/* Defaults: type KZ_QUANTIZE_Q8_0, codec_forms KZ_PRECISION_DEFAULT, n_threads 0, no progress
 * callback, no report (a zeroed struct is the same). */
KZ_API void kz_quantize_default_params(kz_quantize_params *params);

/* Converts the checkpoint directory src (as kz_model_load takes it, validated the same
 * way; not a .gguf) into one GGUF file at out_path. A device or FIFO (/dev/null) is written
 * through; a symlink is followed to its target; a regular file, or none, is written as
 * "<target>.partial-XXXXXX" in the target's folder, synced and renamed over the target only
 * when complete (keeping the replaced file's permissions), and removed on any failure or
 * cancel: out_path is the old file or the whole new one. params NULL means the defaults. */
KZ_API kz_status kz_quantize(const char *src, const char *out_path,
                             const kz_quantize_params *params);

/* ---- experimental: may change or go in any release -------------------------
 * What `kztts bench` and `kztts quality` need beyond the API above: the engine's
 * configuration in effect, this machine's limits, and hooks into the frame loop for
 * measuring a model against another. Not covered by KZ_ABI_VERSION. */

/* The model as loaded. Strings are static or owned by the model. */
typedef struct kz_experimental_model_info {
    const char *kernels;         /* kernel level in use: "scalar", "avx2", "avx512", "neon" */
    const char *kernel_sub_level;/* its sub-level, e.g. "avx512-vnni" (kz_model_describe) */
    const char *codec_precision; /* in effect: "f32" (EXACT), "bf16", "winograd",
                                    "winograd-bf16" */
    const char *kv_cache;        /* the talker's KV cache: "f32" or "f16" */
    bool codec_forms_stored;     /* its converted weights were mapped from the GGUF
                                    (`kztts quantize --codec-forms`), not computed at load */
    const char *bf16_gemm;       /* the codec's bf16 GEMM: "ref", "avx2" (FMAs on widened
                                    bf16), "avx512bf16", "amx", "neon"; "" when the codec
                                    runs no bf16 */
    double load_ms;              /* wall time of kz_model_load */
    /* Language model shapes (0 for a codec-only model). */
    int32_t talker_vocab_size, talker_hidden_size, num_code_groups;
    int32_t cp_vocab_size, cp_hidden_size, cp_steps; /* code predictor; steps per frame */
} kz_experimental_model_info;

KZ_API kz_status kz_experimental_model_get_info(const kz_model *model,
                                                kz_experimental_model_info *out);

/* The session's thread counts as resolved from its params (with a scheduler the LM and
 * codec stages count its pool's threads, and they take turns on it). */
typedef struct kz_experimental_session_info {
    int32_t n_threads, n_threads_lm, n_threads_codec;
    bool overlap; /* the stages overlap (KZ_SCHEDULE_OVERLAP), else they take turns */
} kz_experimental_session_info;

KZ_API kz_status kz_experimental_session_get_info(const kz_session *session,
                                                  kz_experimental_session_info *out);

/* Receives a named array of each following synthesis on the synthesis (LM) thread:
 * "prefill_rows" [rows, talker hidden] once, then per frame "talker_logits"
 * [1, talker vocab] and "cp_logits" [cp_steps, cp vocab], raw (before the repetition
 * penalty, masking and sampling). data is valid only during the call. */
typedef void (*kz_experimental_observe_fn)(const char *name, int64_t pos_frame,
                                           const float *data, size_t n_rows, size_t n_cols,
                                           void *user);

/* Sets the session's observer (fn NULL removes it). */
KZ_API kz_status kz_experimental_session_observe(kz_session *session,
                                                 kz_experimental_observe_fn fn, void *user);

/* Teacher forcing: in each following synthesis, frame f < n_frames takes the codes
 * codes[f * num_code_groups ..] instead of sampled ones (the logits are still computed
 * and observed), each in [0, kz_model_codebook_size) and codebook 0 also below the
 * talker's vocabulary (EOS and the other control ids are no audio), else
 * KZ_STATUS_BAD_INPUT. codes is borrowed until the next call; NULL (or n_frames 0) ends
 * the forcing. */
KZ_API kz_status kz_experimental_session_force_codes(kz_session *session, const int32_t *codes,
                                                     size_t n_frames);

/* How a voice was made (kz_voice_from_file / _from_samples): each stage's wall time and
 * the encoders' FLOP, for `kztts bench`. All zero for a voice read with kz_voice_load. */
typedef struct kz_experimental_voice_stats {
    double read_ms;      /* reading and decoding the audio file (0 from samples) */
    double resample_ms;  /* downmix to mono, resampling, length and silence checks */
    double xvector_ms;   /* speaker encoder (log-mel included) */
    double encode_ms;    /* codec encoder (0 for an x-vector-only voice) */
    double total_ms;     /* the whole call, thread pool start included */
    double xvector_flop, encode_flop; /* floating-point operations of the two encoders */
    int32_t n_threads;   /* threads the encoders ran on */
} kz_experimental_voice_stats;

KZ_API kz_status kz_experimental_voice_get_stats(const kz_voice *voice,
                                                 kz_experimental_voice_stats *out);

/* This machine's limits, against which `kztts bench` states each stage's floor, measured on
 * a thread pool of n_threads (1..256, the caller included) as the stages run.
 * Read bandwidth: a 256 MB buffer read by every thread, best of three passes, *gbs in
 * GB/s. FMA peak: independent multiply-add chains in the loop named `loop` (a kernel
 * level as kz_experimental_model_info.kernels names it, or a bf16 GEMM as .bf16_gemm
 * names it; any other name, "scalar" included, or one this CPU cannot run, runs a
 * portable loop), each thread timed by
 * its own CPU time, best of three passes, *gflops in GFLOP/s (2 per FMA), *loop_run the
 * loop that ran (static). Each takes about 0.1-0.4 s. KZ_STATUS_OUT_OF_MEMORY when the
 * buffer or the threads cannot be had. */
KZ_API kz_status kz_experimental_machine_read_gbs(int32_t n_threads, double *gbs);
KZ_API kz_status kz_experimental_machine_fma_gflops(const char *loop, int32_t n_threads,
                                                    double *gflops, const char **loop_run);

/* The round trip of one cache line between two threads (a value written by one, returned
 * by the other), fastest of up to 40 trials within ~0.3 s, in *ns. On a virtual machine it
 * tells whether the two vCPUs share a cache, which moves every stage's rate. 0 when fewer
 * than two CPUs are allowed to this process, or when the machine is too busy for the two
 * threads to run at once. */
KZ_API kz_status kz_experimental_machine_core_rt_ns(double *ns);

#ifdef __cplusplus
}
#endif

#endif
