/*
 * bench_first_audio.c - time to first audio per text layout, with the voice's prompt
 * prefix computed or taken from the session's prompt cache, and where it went.
 *
 * Data flow: load MODEL, one session of --threads threads; then ROUNDS rounds, each
 * alternating the two text layouts (default, streaming text) of a 2-frame request for
 * kztts bench's 12-token sentence with the model's first speaker; per request in
 * `cold` mode the prompt cache is cleared first (every prompt computed whole), in
 * `cached` mode it is not (after the first round the voice's prefix comes from the
 * cache). A request's time to first audio runs from the call to the first audio
 * callback, where the session's stage timings are read too: prefill, code predictor
 * and codec time before the first sound. Prints per layout the median and the minimum
 * of the first audio and the medians of those three parts and of the prompt rows run.
 *
 * Only the public API (and tools/kztts/stats.c's median) is used, so the same source
 * also times an older library (one without a prompt cache: build it with
 * -DKZ_NO_PROMPT_CACHE, every run is cold).
 *
 * Usage: bench_first_audio MODEL [cold|cached] [--rounds N] [--threads N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kztts.h"
#include "stats.h"

enum { MAX_ROUNDS = 256 };

/* One request as the listener sees it, and the stages at its first sound. */
typedef struct probe {
    kz_session *s;
    double t0, first_ms;
    kz_timings at_first;
} probe;

static bool on_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    probe *p = user;
    (void)pcm, (void)n, (void)pos, (void)last;
    if (p->first_ms < 0) {
        p->first_ms = stats_now_ms() - p->t0;
        kz_session_timings(p->s, &p->at_first);
    }
    return true;
}

/* Per layout and round: first audio, prefill, code predictor, codec (ms), prompt rows. */
typedef struct samples {
    double first[MAX_ROUNDS], prefill[MAX_ROUNDS], cp[MAX_ROUNDS], codec[MAX_ROUNDS];
    double rows[MAX_ROUNDS];
} samples;

static kz_status one_request(kz_session *s, const kz_request *r, bool cold, samples *out,
                             int round) {
#ifndef KZ_NO_PROMPT_CACHE
    if (cold) {
        kz_session_clear_prompt_cache(s);
    }
#else
    (void)cold;
#endif
    kz_session_reset_timings(s);
    probe p = {.s = s, .t0 = stats_now_ms(), .first_ms = -1};
    kz_request q = *r;
    q.on_audio = on_audio;
    q.user = &p;
    kz_status st = kz_synthesize(s, &q);
    const kz_timings *t = &p.at_first;
    out->first[round] = p.first_ms;
    out->prefill[round] = t->prefill_ms;
    out->cp[round] = t->code_predictor_ms;
    out->codec[round] = stats_codec_ms(t);
    out->rows[round] = (double)t->prompt_tokens;
    return st;
}

static void report(const char *layout, samples *v, int n) {
    const double first = stats_median(v->first, n); // sorts: v->first[0] is the fastest
    printf("%-14s first audio median %6.1f ms (min %6.1f) | prefill %6.1f  code predictor "
           "%5.1f  codec %5.1f ms | prompt rows run %.0f\n",
           layout, first, v->first[0], stats_median(v->prefill, n), stats_median(v->cp, n),
           stats_median(v->codec, n), stats_median(v->rows, n));
}

int main(int argc, char **argv) {
    const char *path = NULL;
    bool cold = true;
    int rounds = 7, threads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "cold") == 0 || strcmp(argv[i], "cached") == 0) {
            cold = argv[i][1] == 'o';
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            path = NULL;
            break;
        }
    }
    if (!path || rounds < 1 || rounds > MAX_ROUNDS || threads < 1) {
        fprintf(stderr, "usage: bench_first_audio MODEL [cold|cached] [--rounds 1..%d] "
                        "[--threads N]\n", MAX_ROUNDS);
        return 2;
    }
    kz_model *m = NULL;
    kz_session *s = NULL;
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = threads;
    if (kz_model_load(path, NULL, &m) != KZ_OK || kz_session_new(m, &sp, &s) != KZ_OK) {
        fprintf(stderr, "bench_first_audio: %s\n", kz_last_error());
        kz_model_free(m);
        return 1;
    }
    static const int32_t text[] = {9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13, 220, 16, 17};
    kz_request r = {0};
    r.token_ids = text;
    r.n_token_ids = sizeof text / sizeof text[0];
    r.speaker = kz_model_speaker_name(m, 0);
    r.frames = 2;
    static samples v[2];
    kz_status st = KZ_OK;
    for (int i = 0; i < rounds && st == KZ_OK; i++) {
        for (int l = 0; l < 2 && st == KZ_OK; l++) {
            r.layout = l ? KZ_LAYOUT_STREAMING : KZ_LAYOUT_NON_STREAMING;
            st = one_request(s, &r, cold, &v[l], i);
        }
    }
    if (st != KZ_OK) {
        fprintf(stderr, "bench_first_audio: %s\n", kz_last_error());
    } else {
        printf("%s, %s, %d threads, %d rounds (medians)\n", path,
               cold ? "whole prompt each time" : "voice prefix cached", threads, rounds);
        report("default", &v[0], rounds);
        report("streaming text", &v[1], rounds);
    }
    kz_session_free(s);
    kz_model_free(m);
    return st == KZ_OK ? 0 : 1;
}
