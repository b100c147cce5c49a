/*
 * bench_compare.h - `kztts bench --decoder-only --codec-precision P1,P2,...`: codec
 * precisions compared in one process, their runs alternated, for shared and noisy
 * machines where two separate benchmark runs minutes apart measure the host as much as
 * the code (bench_compare.c).
 */
#ifndef KZ_BENCH_COMPARE_H
#define KZ_BENCH_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most precisions one comparison takes. */
#define BENCH_COMPARE_MAX 5

typedef struct bench_compare_opts {
    const char *model, *isa;
    const char *precisions; /* comma-separated codec precision names */
    int64_t frames, chunk, rounds, seed;
    int threads;
    bool json;
} bench_compare_opts;

/* Splits o->precisions into names[] (at most BENCH_COMPARE_MAX, each a known precision
 * name); returns their count, or -1 after printing "kztts bench: problem". names point
 * into buf (cap bytes). */
int bench_compare_names(const char *precisions, char *buf, size_t cap,
                        const char *names[BENCH_COMPARE_MAX]);

/* Loads the model once per precision, warms each up, then o->rounds rounds in which
 * every precision decodes o->frames random frames once (the order rotating by round);
 * prints per precision the precision in effect and the median, min and max ms per
 * frame, and its median against the first's. Returns the process exit code. */
int bench_compare_decoder(const bench_compare_opts *o);

#endif
