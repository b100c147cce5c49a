/*
 * bench_compare.h - `kztts bench` with a list in one option (`--codec-precision P1,P2`,
 * `--kv-cache f32,f16`, `--schedule turns,overlap` or `-m A.gguf,B.gguf`): the variants compared in one
 * process, their runs alternated, for shared and noisy machines where two separate
 * benchmark runs minutes apart measure the host as much as the code (bench_compare.c).
 * With --decoder-only the codec alone decodes random frames; else each variant
 * synthesizes the bench's fixed request through the whole pipeline.
 */
#ifndef KZ_BENCH_COMPARE_H
#define KZ_BENCH_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* Most variants one comparison takes. */
#define BENCH_COMPARE_MAX 5

typedef struct bench_compare_opts {
    const char *model, *isa, *schedule; /* model path(s), schedule name(s): a list or one */
    const char *precisions;             /* codec precision name(s), comma-separated */
    const char *kv_cache;               /* talker KV cache name(s), comma-separated */
    int64_t frames, chunk, rounds, seed;
    int threads, threads_lm, threads_codec; /* 0 = the session's default */
    bool decoder_only, json;
} bench_compare_opts;

/* True when one of the options is a list: a comma in the precision, KV cache or schedule,
 * or in a model path that does not exist as written. */
bool bench_compare_wanted(const char *model, const char *precisions, const char *kv_cache,
                          const char *schedule);

/* The bench's text, about a 10-word sentence (12 tokens with the released models'
 * tokenizer). */
#define BENCH_TEXT "Hello, world! I am its transparent. 12"

/* The bench's fixed request for m: BENCH_TEXT as token ids of m's own tokenizer (*ids,
 * owned by the caller: kz_ids_free), the model's first speaker, exactly `frames` frames,
 * chunk_frames `chunk` (0 = adaptive), seed; the audio is dropped (cli_discard_audio).
 * Returns kz_tokenize's status (*ids NULL on failure). */
kz_status bench_fixed_request(const kz_model *m, int64_t frames, int64_t chunk, int64_t seed,
                              kz_request *r, int32_t **ids);

/* Opens the model once per variant (exactly one option may hold a list; a schedule list
 * needs the pipeline), warms each up, then o->rounds rounds in which every variant runs
 * once (the order rotating by round): decodes o->frames random frames (decoder_only),
 * or synthesizes the fixed request of o->frames frames, streaming, its whole prompt
 * computed. Prints per variant the codec precision in effect and the median, min and
 * max wall ms per frame, its median against the first's, and for the pipeline the
 * medians of the codec's and the LM stages' ms per frame. Returns the exit code. */
int bench_compare(const bench_compare_opts *o);

#endif
