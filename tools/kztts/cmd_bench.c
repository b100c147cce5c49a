/*
 * cmd_bench.c - `kztts bench`: stage speed on random codes.
 *
 * --decoder-only: load the model (timed), decode `frames` random frames in
 * streaming mode `repeat` times after one warm-up, and print per-stage ms per
 * 80 ms frame, the real-time factor (compute time / audio time), the codec's
 * GFLOP/s and the process's peak RSS.
 * Default (full pipeline): synthesize exactly `frames` frames from a fixed
 * 12-token text (about a 10-word sentence) with the model's first speaker and
 * print prefill, talker, code predictor (ms/frame and weight GB/s against the
 * machine's measured DRAM read bandwidth), sampling and codec ms/frame, the
 * real-time factor, time to first audio and peak RSS.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include "args.h"
#include "cli.h"

typedef struct bench_opts {
    const char *model, *isa;
    int64_t frames, threads, chunk, repeat, seed;
    bool decoder_only, help;
} bench_opts;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static bool discard(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm; (void)n; (void)pos; (void)last; (void)user;
    return true;
}

static int32_t *random_codes(size_t n_frames, int n_q, int size, uint64_t seed) {
    int32_t *codes = malloc(n_frames * (size_t)n_q * sizeof *codes);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; codes && i < n_frames * (size_t)n_q; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        codes[i] = (int32_t)(x % (uint64_t)size);
    }
    return codes;
}

static void report(const bench_opts *o, const kz_timings *t, double wall_ms, double load_ms) {
    double frames = (double)t->codec_frames;
    double per = wall_ms / frames;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("frames/run %lld, runs %lld, threads %lld, chunk %lld frames\n", (long long)o->frames,
           (long long)o->repeat, (long long)o->threads, (long long)o->chunk);
    printf("model load        %8.1f ms\n", load_ms);
    printf("codec quantizer   %8.2f ms/frame\n", t->codec_quantizer_ms / frames);
    printf("codec transformer %8.2f ms/frame\n", t->codec_transformer_ms / frames);
    printf("codec upsample    %8.2f ms/frame\n", t->codec_upsample_ms / frames);
    printf("codec vocoder     %8.2f ms/frame\n", t->codec_vocoder_ms / frames);
    printf("codec total       %8.2f ms/frame  (80 ms of audio per frame)\n", per);
    printf("real-time factor  %8.3f\n", per / 80.0);
    printf("codec GFLOP/frame %8.3f\n", t->codec_flop / frames * 1e-9);
    printf("codec GFLOP/s     %8.1f\n", t->codec_flop / (wall_ms * 1e-3) * 1e-9);
    printf("peak RSS          %8.1f MB\n", (double)ru.ru_maxrss / 1024.0);
}

static int run(bench_opts *o) {
    kz_model *model;
    kz_session *session;
    double t0 = now_ms();
    if (cli_open("bench", o->model, o->isa, (int)o->threads, &model, &session) != 0) {
        return 1;
    }
    double load_ms = now_ms() - t0;
    int32_t *codes = random_codes((size_t)o->frames, kz_model_num_codebooks(model),
                                  kz_model_codebook_size(model), (uint64_t)o->seed);
    kz_decode_params dp;
    kz_decode_default_params(&dp);
    dp.chunk_frames = (int32_t)o->chunk;
    size_t warm = o->frames < 4 ? (size_t)o->frames : 4;
    kz_status st = codes ? kz_decode(session, codes, warm, &dp, discard, NULL)
                         : KZ_STATUS_OUT_OF_MEMORY;
    kz_session_reset_timings(session);
    double wall = 0;
    for (int64_t r = 0; r < o->repeat && st == KZ_OK; r++) {
        double t1 = now_ms();
        st = kz_decode(session, codes, (size_t)o->frames, &dp, discard, NULL);
        wall += now_ms() - t1;
    }
    if (st == KZ_OK) {
        kz_timings t;
        kz_session_timings(session, &t);
        report(o, &t, wall, load_ms);
    } else {
        cli_report("bench", st);
    }
    free(codes);
    kz_session_free(session);
    kz_model_free(model);
    return st == KZ_OK ? 0 : 1;
}

/* --- full pipeline --------------------------------------------------------- */

#define PROBE_BYTES (256u << 20)

typedef struct probe {
    const uint64_t *data;
    size_t n;
    uint64_t sum;
} probe;

static void *probe_read(void *arg) {
    probe *p = arg;
    uint64_t s = 0;
    for (size_t i = 0; i < p->n; i++) {
        s += p->data[i];
    }
    p->sum = s;
    return NULL;
}

/* DRAM read bandwidth in GB/s with n_threads readers over 256 MB (best of 3). */
static double measure_bandwidth(int n_threads) {
    uint64_t *buf = malloc(PROBE_BYTES);
    if (!buf) {
        return 0;
    }
    memset(buf, 1, PROBE_BYTES);
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[8];
        probe pr[8];
        int n = n_threads < 1 ? 1 : n_threads > 8 ? 8 : n_threads;
        size_t per = PROBE_BYTES / 8 / (size_t)n;
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            pr[i] = (probe){.data = buf + per * (size_t)i, .n = per};
            pthread_create(&th[i], NULL, probe_read, &pr[i]);
        }
        for (int i = 0; i < n; i++) {
            pthread_join(th[i], NULL);
        }
        double gbs = PROBE_BYTES / ((now_ms() - t0) * 1e-3) * 1e-9;
        best = gbs > best ? gbs : best;
    }
    free(buf);
    return best;
}

typedef struct first_audio {
    double t0, first_ms;
} first_audio;

static bool note_first(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    first_audio *f = user;
    (void)pcm; (void)n; (void)pos; (void)last;
    if (f->first_ms < 0) {
        f->first_ms = now_ms() - f->t0;
    }
    return true;
}

static void report_full(const bench_opts *o, const kz_timings *t, double wall, double ttfa,
                        double load_ms, double bw) {
    double f = (double)t->frames, codec = t->codec_quantizer_ms + t->codec_transformer_ms +
                                        t->codec_upsample_ms + t->codec_vocoder_ms;
    double step_bytes = t->talker_bytes, cp_gbs = t->code_predictor_bytes / (t->code_predictor_ms * 1e-3) * 1e-9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("frames/run %lld, runs %lld, threads %lld, chunk %lld frames\n", (long long)o->frames,
           (long long)o->repeat, (long long)o->threads, (long long)o->chunk);
    printf("model load          %8.1f ms\n", load_ms);
    printf("prompt              %8lld rows, prefill %.1f ms\n", (long long)(t->prompt_tokens / o->repeat),
           t->prefill_ms / (double)o->repeat);
    printf("talker              %8.2f ms/frame  (weights %.1f GB/s incl. prefill)\n", t->talker_ms / f,
           step_bytes / ((t->talker_ms + t->prefill_ms) * 1e-3) * 1e-9);
    printf("code predictor      %8.2f ms/frame  (%.0f MB of weights per frame at %.1f GB/s)\n",
           t->code_predictor_ms / f, t->code_predictor_bytes / f * 1e-6, cp_gbs);
    printf("  at measured DRAM  %8.2f ms/frame  (%.1f GB/s read, %d threads): overhead %.0f %%\n",
           t->code_predictor_bytes / f / (bw * 1e9) * 1e3, bw, (int)o->threads,
           100.0 * (1.0 - (t->code_predictor_bytes / (bw * 1e9) * 1e3) / t->code_predictor_ms));
    printf("sampling            %8.2f ms/frame\n", t->sampling_ms / f);
    printf("codec decoder       %8.2f ms/frame\n", codec / f);
    printf("total               %8.2f ms/frame  (80 ms of audio per frame)\n", wall / f);
    printf("real-time factor    %8.3f\n", wall / f / 80.0);
    printf("time to first audio %8.1f ms\n", ttfa);
    printf("peak RSS            %8.1f MB\n", (double)ru.ru_maxrss / 1024.0);
}

static int run_full(bench_opts *o) {
    static const int32_t text[] = {9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13, 220, 16, 17};
    kz_model *m;
    kz_session *s;
    double t0 = now_ms();
    if (cli_open("bench", o->model, o->isa, (int)o->threads, &m, &s) != 0) {
        return 1;
    }
    double load_ms = now_ms() - t0;
    kz_request r;
    kz_request_default(m, &r);
    r.token_ids = text;
    r.n_token_ids = sizeof text / sizeof text[0];
    r.speaker = kz_model_speaker_name(m, 0);
    r.frames = (int32_t)o->frames;
    r.chunk_frames = (int32_t)o->chunk;
    r.seed = (uint64_t)o->seed;
    double bw = measure_bandwidth(o->threads > 0 ? (int)o->threads : 2);
    kz_session_reset_timings(s);
    double wall = 0, ttfa = 0;
    kz_status st = KZ_OK;
    for (int64_t i = 0; i < o->repeat && st == KZ_OK; i++) {
        first_audio fa = {.t0 = now_ms(), .first_ms = -1};
        st = kz_synthesize(s, &r, note_first, &fa);
        wall += now_ms() - fa.t0;
        ttfa += fa.first_ms / (double)o->repeat;
    }
    if (st == KZ_OK) {
        kz_timings t;
        kz_session_timings(s, &t);
        report_full(o, &t, wall, ttfa, load_ms, bw);
    } else {
        cli_report("bench", st);
    }
    kz_session_free(s);
    kz_model_free(m);
    return st == KZ_OK ? 0 : 1;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.isa = "auto", .frames = 100, .chunk = 4, .repeat = 3, .seed = 1};
    const arg_spec specs[] = {
        {"--model", "-m", ARG_STRING, &o.model, 0, 0, "DIR   checkpoint or codec directory"},
        {"--decoder-only", NULL, ARG_FLAG, &o.decoder_only, 0, 0, "benchmark only the codec decoder, on random codes"},
        {"--frames", NULL, ARG_INT, &o.frames, 1, 100000, "N     frames per run (default 100 = 8 s)"},
        {"--threads", "-t", ARG_INT, &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"},
        {"--chunk", NULL, ARG_INT, &o.chunk, 1, 1024, "N     frames per streamed chunk (default 4)"},
        {"--repeat", NULL, ARG_INT, &o.repeat, 1, 1000, "N     timed runs (default 3)"},
        {"--seed", NULL, ARG_INT, &o.seed, 0, 1e15, "N     random codes seed (default 1)"},
        {"--isa", NULL, ARG_STRING, &o.isa, 0, 0, "LEVEL auto|scalar|avx2|avx512 kernel cap"},
        {"--help", "-h", ARG_FLAG, &o.help, 0, 0, "show this help"},
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("bench", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("bench", "-m MODEL [--decoder-only] [options]", specs, n_specs);
        return 0;
    }
    if (!o.model) {
        fprintf(stderr, "kztts bench: -m MODEL is required\n");
        return 2;
    }
    return o.decoder_only ? run(&o) : run_full(&o);
}
