/*
 * bench_compare.h - `kztts bench --codec-precision P1,P2,...`: codec precisions compared
 * in one process, their runs alternated, for shared and noisy machines where two
 * separate benchmark runs minutes apart measure the host as much as the code
 * (bench_compare.c). With --decoder-only the codec alone decodes random frames; else
 * each precision synthesizes the bench's fixed request through the whole pipeline.
 */
#ifndef KZ_BENCH_COMPARE_H
#define KZ_BENCH_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* Most precisions one comparison takes. */
#define BENCH_COMPARE_MAX 5

typedef struct bench_compare_opts {
    const char *model, *isa, *schedule;
    const char *precisions; /* comma-separated codec precision names */
    int64_t frames, chunk, rounds, seed;
    int threads, threads_lm, threads_codec;
    bool decoder_only, json;
} bench_compare_opts;

/* The bench's fixed request: a 12-token text (about a 10-word sentence) for the model's
 * first speaker, exactly `frames` frames, chunk_frames `chunk` (0 = adaptive), seed. */
void bench_fixed_request(const kz_model *m, int64_t frames, int64_t chunk, int64_t seed,
                         kz_request *r);

/* Splits o->precisions into names[] (at most BENCH_COMPARE_MAX, each a known precision
 * name); returns their count, or -1 after printing "kztts bench: problem". names point
 * into buf (cap bytes). */
int bench_compare_names(const char *precisions, char *buf, size_t cap,
                        const char *names[BENCH_COMPARE_MAX]);

/* Loads the model once per precision, warms each up, then o->rounds rounds in which
 * every precision runs once (the order rotating by round): decodes o->frames random
 * frames (decoder_only), or synthesizes the fixed request of o->frames frames,
 * streaming, its whole prompt computed. Prints per precision the precision in effect and
 * the median, min and max wall ms per frame, its median against the first's, and for the
 * pipeline the medians of the codec's and the LM stages' ms per frame. Returns the
 * process exit code. */
int bench_compare(const bench_compare_opts *o);

#endif
