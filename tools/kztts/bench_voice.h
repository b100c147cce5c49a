/*
 * bench_voice.h - the voice `kztts bench` synthesizes with, and the cost of making it.
 *
 * A CustomVoice model speaks with its first preset speaker. A Base model needs a cloned
 * voice: --voice FILE.kzvoice is loaded, or --ref-audio REF (with --ref-text T for an
 * in-context voice, or --xvector-only) is made `repeat` times on the session's thread
 * count, each time timed stage by stage (kztts.h kz_experimental_voice_get_stats: read,
 * resample, x-vector, codec encoder), best and median kept; the last voice made is the one
 * the synthesis runs use. bench_report.c prints the stages against their floors (the
 * encoders' FLOP at the FMA peak).
 */
#ifndef KZ_BENCH_VOICE_H
#define KZ_BENCH_VOICE_H

#include <stdbool.h>

#include "kztts.h"

/* The options that choose the voice (as `kztts synth` takes them). */
typedef struct bench_voice_opts {
    const char *model; /* the -m path, for messages */
    const char *voice, *ref_audio, *ref_text;
    bool xvector_only;
} bench_voice_opts;

enum { BENCH_VOICE_STAGES = 5 }; /* read, resample, x-vector, codec encoder, total */

typedef struct bench_voice {
    const char *kind;        /* "speaker", "x-vector", "icl" */
    const char *source;      /* "preset", "file" (--voice), "made" (--ref-audio) */
    const char *name;        /* the speaker, or the file */
    double ref_seconds;      /* cloned voice: its reference's length */
    int ref_frames;          /* ICL: reference codec frames */
    /* made: the making, over `make_runs` runs on `make_threads` threads */
    int make_runs, make_threads;
    double best_ms[BENCH_VOICE_STAGES], median_ms[BENCH_VOICE_STAGES];
    double gflop[BENCH_VOICE_STAGES]; /* x-vector and encoder only, total their sum */
    double floor_ms[BENCH_VOICE_STAGES]; /* gflop at fma_gflops; 0 = no floor */
    double fma_gflops;       /* FMA peak of make_threads threads */
} bench_voice;

extern const char *const bench_voice_stage_names[BENCH_VOICE_STAGES];

/* 0 when the options fit each other, else prints the problem and returns 2. */
int bench_voice_check_options(const bench_voice_opts *o);

/* The voice for model m (NULL for a preset speaker): loaded, or made `repeat` times on
 * n_threads with each making measured into *bv. Returns 0, or prints the problem and
 * returns 1 (2 for options that do not fit the model). */
int bench_voice_get(const bench_voice_opts *o, const kz_model *m, int repeat, int n_threads,
                    kz_voice **voice, bench_voice *bv);

/* The floors of a made voice's stages at fma_gflops GFLOP/s (0: none). */
void bench_voice_floors(bench_voice *bv, double fma_gflops);

#endif
