/*
 * cli.h - pieces shared by the kztts subcommands: the subcommand entry points,
 * loading a model and session with one-line error reporting, the ISA option, and
 * the text of a request (--token-ids, stdin).
 * Exit codes: 0 success, 1 failure at run time, 2 bad command line.
 */
#ifndef KZ_CLI_H
#define KZ_CLI_H

#include "kztts.h"

int cmd_decode(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_speakers(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quality(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

/* Loads the model at path with the given ISA name ("auto", "scalar", "avx2",
 * "avx512", "neon") and creates a session with n_threads. Prints "kztts CMD: message"
 * and returns -1 on failure (both outputs NULL). */
int cli_open(const char *cmd, const char *path, const char *isa, int n_threads, kz_model **model,
             kz_session **session);

/* How a command runs the engine: ISA name, threads (0 = automatic), LM / codec stage
 * threads (0 = automatic), codec precision name ("f32", "bf16", "winograd", "winograd-bf16",
 * "fast"; NULL means f32) and stage schedule name ("turns", "overlap"; NULL means automatic). */
typedef struct cli_engine {
    const char *isa, *codec_precision, *schedule;
    int threads, threads_lm, threads_codec;
} cli_engine;

/* The schedule named name ("auto", "turns", "overlap"; NULL means auto) into *out;
 * -1 after printing "kztts CMD: --schedule must be ..." for any other name. */
int cli_parse_schedule(const char *cmd, const char *name, kz_schedule *out);

/* The --codec-precision option's help text (synth, decode, bench). */
#define CLI_CODEC_PRECISION_HELP                                                               \
    "P     codec convolutions: f32 (default, exact), bf16 (AMX or AVX512_BF16), winograd "   \
    "(any CPU), winograd-bf16 or fast (bf16 on AMX, winograd-bf16 on AVX2-only CPUs and "    \
    "Zen 4/5, else winograd)"

/* The codec precision named name ("f32", "bf16", "winograd", "winograd-bf16", "fast";
 * NULL means f32) into *out; -1 after printing "kztts CMD: --codec-precision must be ..."
 * for any other name. */
int cli_parse_codec_precision(const char *cmd, const char *name, kz_precision *out);

/* The first word after key in the model's description (kz_model_describe), e.g. key
 * "\ncodec precision: " gives the precision in effect; "unknown" if absent. Copied to
 * buf (cap bytes), which is returned. */
const char *cli_model_word(const kz_model *m, const char *key, char *buf, size_t cap);

/* cli_open with every engine option. */
int cli_open_engine(const char *cmd, const char *path, const cli_engine *e, kz_model **model,
                    kz_session **session);

/* A kz_audio_fn that drops the audio and goes on (benchmarks). */
bool cli_discard_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user);

/* Prints "kztts CMD: <status>: <last error>" to stderr. */
void cli_report(const char *cmd, kz_status st);

/* Parses --token-ids "i,j,k" (commas or spaces, at most 65536 ids). On success *ids is
 * malloc'ed [*n_ids] (caller frees); returns -1 after printing "kztts CMD: problem". */
int cli_parse_token_ids(const char *cmd, const char *s, int32_t **ids, size_t *n_ids);

/* Reads all of stdin as text (at most 1 MB). Returns a malloc'ed NUL-terminated
 * string (caller frees), or NULL after printing "kztts CMD: problem". */
char *cli_read_stdin(const char *cmd);

#endif
