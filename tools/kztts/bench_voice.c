/*
 * bench_voice.c - the voice of `kztts bench` and the cost of making it (bench_voice.h).
 *
 * options -> checked against each other and the model type -> preset speaker (nothing to
 * do), --voice (kz_voice_load + kz_voice_check), or --ref-audio: kz_voice_from_file
 * `repeat` times, each run's stage times read back with kz_experimental_voice_get_stats,
 * best and median per stage -> the last voice made is kept for the synthesis runs.
 */
#include "bench_voice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stats.h"

const char *const bench_voice_stage_names[BENCH_VOICE_STAGES] = {
    "read", "resample", "x-vector", "codec encoder", "total"};

int bench_voice_check_options(const bench_voice_opts *o) {
    if (o->voice && o->ref_audio) {
        fprintf(stderr, "kztts bench: give either --voice or --ref-audio, not both\n");
        return 2;
    }
    if (o->ref_text && o->xvector_only) {
        fprintf(stderr, "kztts bench: --ref-text makes an in-context voice, --xvector-only one "
                        "of the speaker embedding alone: give one of them\n");
        return 2;
    }
    if (o->ref_audio && !o->ref_text && !o->xvector_only) {
        fprintf(stderr, "kztts bench: --ref-audio needs --ref-text \"what the recording says\" "
                        "or --xvector-only\n");
        return 2;
    }
    if (!o->ref_audio && (o->ref_text || o->xvector_only)) {
        fprintf(stderr, "kztts bench: --ref-text and --xvector-only go with --ref-audio\n");
        return 2;
    }
    return 0;
}

/* 0 when the model type and the voice options agree, else prints why and returns 2. */
static int check_model(const bench_voice_opts *o, const kz_model *m, const char *path) {
    const char *type = kz_model_type(m);
    const bool base = strcmp(type, "base") == 0, cloned = o->voice || o->ref_audio;
    if (base && !cloned) {
        fprintf(stderr, "kztts bench: %s is a Base model: it has no preset speakers; give a "
                        "cloned voice (--voice FILE.kzvoice, or --ref-audio REF.wav with "
                        "--ref-text T or --xvector-only)\n", path);
        return 2;
    }
    if (!base && cloned) {
        fprintf(stderr, "kztts bench: %s is a %s model: --%s needs a Base model (the bench "
                        "speaks with this one's first speaker)\n",
                path, type, o->voice ? "voice" : "ref-audio");
        return 2;
    }
    return 0;
}

/* --ref-audio made `repeat` times; *voice the last one. */
static kz_status make_runs(const bench_voice_opts *o, const kz_model *m, int repeat,
                           int n_threads, kz_voice **voice, bench_voice *bv) {
    kz_voice_params vp;
    kz_voice_default_params(&vp);
    vp.ref_text = o->ref_text;
    vp.xvector_only = o->xvector_only;
    vp.n_threads = n_threads;
    double *ms = calloc((size_t)repeat * BENCH_VOICE_STAGES, sizeof *ms);
    if (!ms) {
        return KZ_STATUS_OUT_OF_MEMORY;
    }
    kz_status st = KZ_OK;
    kz_experimental_voice_stats s = {0};
    for (int i = 0; i < repeat && st == KZ_OK; i++) {
        kz_voice_free(*voice);
        *voice = NULL;
        st = kz_voice_from_file(m, o->ref_audio, &vp, voice);
        st = st == KZ_OK ? kz_experimental_voice_get_stats(*voice, &s) : st;
        const double row[BENCH_VOICE_STAGES] = {s.read_ms, s.resample_ms, s.xvector_ms,
                                                s.encode_ms, s.total_ms};
        for (int k = 0; k < BENCH_VOICE_STAGES; k++) {
            ms[k * repeat + i] = row[k];
        }
    }
    for (int k = 0; k < BENCH_VOICE_STAGES && st == KZ_OK; k++) {
        double *v = ms + k * repeat;
        bv->median_ms[k] = stats_median(v, repeat); // sorted: v[0] is the best
        bv->best_ms[k] = v[0];
    }
    bv->gflop[2] = s.xvector_flop * 1e-9;
    bv->gflop[3] = s.encode_flop * 1e-9;
    bv->gflop[4] = bv->gflop[2] + bv->gflop[3];
    bv->make_runs = repeat;
    bv->make_threads = s.n_threads;
    free(ms);
    return st;
}

int bench_voice_get(const bench_voice_opts *o, const kz_model *m, int repeat, int n_threads,
                    kz_voice **voice, bench_voice *bv) {
    *voice = NULL;
    *bv = (bench_voice){.kind = "speaker", .source = "preset",
                        .name = kz_model_speaker_name(m, 0)};
    const char *path = o->voice ? o->voice : o->ref_audio;
    int rc = check_model(o, m, o->model);
    if (rc != 0 || !path) {
        return rc;
    }
    kz_status st;
    if (o->voice) {
        st = kz_voice_load(o->voice, voice);
        st = st == KZ_OK ? kz_voice_check(m, *voice) : st;
    } else {
        st = make_runs(o, m, repeat, n_threads, voice, bv);
    }
    kz_voice_info vi;
    st = st == KZ_OK ? kz_voice_get_info(*voice, &vi) : st;
    if (st != KZ_OK) {
        kz_voice_free(*voice);
        *voice = NULL;
        cli_report("bench", st);
        return cli_exit_status(st);
    }
    bv->kind = vi.icl ? "icl" : "x-vector";
    bv->source = o->voice ? "file" : "made";
    bv->name = path;
    bv->ref_seconds = vi.ref_seconds;
    bv->ref_frames = vi.n_ref_frames;
    return 0;
}

void bench_voice_floors(bench_voice *bv, double fma_gflops) {
    bv->fma_gflops = fma_gflops;
    for (int k = 0; k < BENCH_VOICE_STAGES; k++) {
        bv->floor_ms[k] = fma_gflops > 0 ? bv->gflop[k] / fma_gflops * 1e3 : 0;
    }
}
