/*
 * cli.h - pieces shared by the kztts subcommands: the subcommand entry points,
 * the names the options take (ISA, codec precision, schedule, split, output
 * format), loading a model and session with one-line error reporting, the
 * output format from --format and -o, and the text of a request (--token-ids,
 * stdin).
 * Exit codes: 0 success, 1 failure at run time, 2 bad command line (a value
 * args.c refuses, or one the library refuses as KZ_STATUS_INVALID_ARGUMENT).
 */
#ifndef KZ_CLI_H
#define KZ_CLI_H

#include "args.h"
#include "kztts.h"

int cmd_decode(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_speakers(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quality(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_voice(int argc, char **argv);

/* Names of the options shared by several commands (any case on the command line). */
extern const arg_choice CLI_ISA_NAMES[];       /* --isa: auto, scalar, avx2, avx512, neon */
extern const arg_choice CLI_PRECISION_NAMES[]; /* --codec-precision: exact (f32), fast, ... */
extern const arg_choice CLI_KV_CACHE_NAMES[];  /* --kv-cache: f32, f16 */
extern const arg_choice CLI_SCHEDULE_NAMES[];  /* --schedule: auto, turns, overlap */
extern const arg_choice CLI_SPLIT_NAMES[];     /* --split: qwen2, mistral */
extern const arg_choice CLI_FORMAT_NAMES[]; /* --format: wav, f32, s16, flac, ogg, mp3, opus,
                                               aac, pcm */

/* Loads the model at path with the given ISA name (one of CLI_ISA_NAMES; NULL = auto)
 * and creates a session with n_threads. Prints "kztts CMD: message"
 * and returns -1 on failure (both outputs NULL). */
int cli_open(const char *cmd, const char *path, const char *isa, int n_threads, kz_model **model,
             kz_session **session);

/* Loads the model at path with the given ISA name (NULL = auto), without a session (the
 * commands that only run the encoders). Prints "kztts CMD: message" and returns -1 on
 * failure (*model NULL). */
int cli_load(const char *cmd, const char *path, const char *isa, kz_model **model);

/* How a command runs the engine: ISA name (NULL = auto), threads (0 = automatic), LM /
 * codec stage threads (0 = automatic), codec precision name (NULL: the model's default),
 * talker KV cache name (NULL = f32) and stage schedule name (NULL = auto); names as args.c
 * checked them. */
typedef struct cli_engine {
    const char *isa, *codec_precision, *kv_cache, *schedule;
    int threads, threads_lm, threads_codec;
    bool voice_files_only; /* a Base model without its voice encoders (a --voice file) */
    bool codec_only;       /* the codec alone (kz_model_params.codec_only): decoding */
} cli_engine;

/* The schedule named name (CLI_SCHEDULE_NAMES, any case; NULL means auto) into *out;
 * -1 after printing "kztts CMD: --schedule must be ..." for any other name. */
int cli_parse_schedule(const char *cmd, const char *name, kz_schedule *out);

/* The --quiet option's help text (every command that loads a model, which may download it). */
#define CLI_QUIET_HELP                                                                         \
    "no progress lines, downloads included (they are drawn only when stderr is a terminal)"

/* The --codec-precision option's help text (synth, decode, bench). */
#define CLI_CODEC_PRECISION_HELP                                                               \
    "P     codec convolutions: exact (f32, as the reference) or fast (this CPU's fastest, "   \
    ">= 40 dB SNR); default: the model file's (quantize --codec-forms), else exact; "        \
    "bf16, winograd, winograd-bf16 force one of fast's forms (benchmarking)"

/* The --kv-cache option's help text (synth, bench, serve). */
#define CLI_KV_CACHE_HELP                                                                      \
    "T     the talker's KV cache: f32 (default, as the reference) or f16 (half the memory "    \
    "and bytes a step; codes may differ from f32's)"

/* The KV cache type named name (CLI_KV_CACHE_NAMES, any case; NULL means the default, f32)
 * into *out; -1 after printing "kztts CMD: --kv-cache must be ..." for any other name. */
int cli_parse_kv_cache(const char *cmd, const char *name, kz_kv_cache *out);

/* The codec precision named name (CLI_PRECISION_NAMES, any case; NULL means
 * KZ_PRECISION_DEFAULT, the model file's choice) into *out; -1 after printing
 * "kztts CMD: --codec-precision must be ..." for any other name. */
int cli_parse_codec_precision(const char *cmd, const char *name, kz_precision *out);

/* cli_open with every engine option. */
int cli_open_engine(const char *cmd, const char *path, const cli_engine *e, kz_model **model,
                    kz_session **session);

/* A kz_audio_fn that drops the audio and goes on (benchmarks). */
bool cli_discard_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user);

/* Prints "kztts CMD: <status>: <last error>" to stderr. */
void cli_report(const char *cmd, kz_status st);

/* cli_report for a failure to read reference audio (voice, encode): a reference over
 * the length limit also gets how to raise it (--max-ref-seconds). */
void cli_report_reference(const char *cmd, kz_status st);

/* The exit status of a command whose library call failed with st: 2 for
 * KZ_STATUS_INVALID_ARGUMENT (the request carries a command-line value the model
 * refuses: a speaker, a language, top-k beyond the vocabulary), else 1. */
int cli_exit_status(kz_status st);

/* The audio format of output path out (decode, synth): format (already one of
 * CLI_FORMAT_NAMES) when given, else the file name's extension when it names a format
 * (any case), else wav when there is no extension (also for "-"). Into *name (the
 * table's spelling). -1 after printing "kztts CMD: problem" when the extension names no
 * format and --format is not given, when it names another format than --format, or when
 * the format cannot stream to stdout (flac, ogg with "-"). */
int cli_output_format(const char *cmd, const char *out, const char *format, const char **name);

/* Parses --token-ids "i,j,k" (commas or spaces, at most 65536 ids). On success *ids is
 * malloc'ed [*n_ids] (caller frees); returns -1 after printing "kztts CMD: problem". */
int cli_parse_token_ids(const char *cmd, const char *s, int32_t **ids, size_t *n_ids);

/* Reads all of stdin as text (at most 1 MB, no NUL byte: the text crosses the API as a
 * C string). Returns a malloc'ed NUL-terminated string (caller frees), or NULL after
 * printing "kztts CMD: problem" ("bad input: NUL byte at byte N of standard input"). */
char *cli_read_stdin(const char *cmd);

#endif
