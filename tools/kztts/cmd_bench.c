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
 * machine's measured DRAM read bandwidth), sampling and codec ms/frame, peak
 * RSS; then the real-time factor and time to first audio of streaming runs
 * (pipelined, first chunk 1 frame) with the underruns a real-time player would
 * see, of an offline run (all frames, then one decode), and the time to first
 * audio of both text layouts.
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
    int64_t frames, threads, threads_lm, threads_codec, chunk, repeat, seed;
    bool decoder_only, help;
    int bw_threads; /* threads the bandwidth probe used */
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

/* One synthesis as a listener would see it: time to first audio, and underruns if
 * playback started at the first callback and consumed 24000 samples a second. */
typedef struct playback {
    double t0, first_ms, wall_ms;
    double played_s;   /* audio delivered so far, seconds */
    int underruns;
    double stall_ms;   /* total time the player would have waited */
} playback;

static bool on_chunk(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    playback *p = user;
    (void)pcm; (void)pos; (void)last;
    double now = now_ms() - p->t0;
    if (p->first_ms < 0) {
        p->first_ms = now;
    } else {
        double due = p->first_ms + p->stall_ms + p->played_s * 1e3;
        if (now > due) {
            p->underruns++;
            p->stall_ms += now - due;
        }
    }
    p->played_s += (double)n / 24000.0;
    return true;
}

static kz_status timed(kz_session *s, const kz_request *r, playback *p) {
    *p = (playback){.t0 = now_ms(), .first_ms = -1};
    kz_status st = kz_synthesize(s, r, on_chunk, p);
    p->wall_ms = now_ms() - p->t0;
    return st;
}

static void report_stages(const bench_opts *o, const kz_timings *t, double load_ms, double bw) {
    double f = (double)t->frames, codec = t->codec_quantizer_ms + t->codec_transformer_ms +
                                        t->codec_upsample_ms + t->codec_vocoder_ms;
    double cp_floor = t->code_predictor_bytes / f / (bw * 1e9) * 1e3;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("frames/run %lld, runs %lld, threads %lld, chunk %lld frames\n", (long long)o->frames,
           (long long)o->repeat, (long long)o->threads, (long long)o->chunk);
    printf("model load          %8.1f ms\n", load_ms);
    printf("prompt              %8lld rows, prefill %.1f ms\n",
           (long long)(t->prompt_tokens / o->repeat), t->prefill_ms / (double)o->repeat);
    printf("talker              %8.2f ms/frame  (weights %.1f GB/s incl. prefill)\n",
           t->talker_ms / f, t->talker_bytes / ((t->talker_ms + t->prefill_ms) * 1e-3) * 1e-9);
    printf("code predictor      %8.2f ms/frame  (%.0f MB of weights per frame at %.1f GB/s)\n",
           t->code_predictor_ms / f, t->code_predictor_bytes / f * 1e-6,
           t->code_predictor_bytes / (t->code_predictor_ms * 1e-3) * 1e-9);
    printf("  its weight reads  %8.2f ms/frame  at the measured %.1f GB/s (%d thread%s): "
           "overhead %.0f %%\n",
           cp_floor, bw, o->bw_threads, o->bw_threads == 1 ? "" : "s",
           100.0 * (1.0 - cp_floor / (t->code_predictor_ms / f)));
    printf("sampling            %8.2f ms/frame\n", t->sampling_ms / f);
    printf("codec decoder       %8.2f ms/frame  (%.1f GFLOP/s)\n", codec / f,
           t->codec_flop / (codec * 1e-3) * 1e-9);
    printf("peak RSS            %8.1f MB\n", (double)ru.ru_maxrss / 1024.0);
}

static void report_runs(const playback *stream, int n_stream, const playback *offline,
                        const playback *layout_nonstream, const playback *layout_stream,
                        double frames) {
    double wall = 0, ttfa = 0, stall = 0;
    int under = 0;
    for (int i = 0; i < n_stream; i++) {
        wall += stream[i].wall_ms / n_stream;
        ttfa += stream[i].first_ms / n_stream;
        under += stream[i].underruns;
        stall += stream[i].stall_ms / n_stream;
    }
    printf("streaming           %8.2f ms/frame  real-time factor %.3f\n", wall / frames,
           wall / frames / 80.0);
    printf("  time to first audio %6.1f ms; underruns when played in real time: %d (%.0f ms "
           "waiting per run)\n", ttfa, under, stall);
    printf("offline             %8.2f ms/frame  real-time factor %.3f, first audio %.0f ms "
           "(all frames, then one decode)\n",
           offline->wall_ms / frames, offline->wall_ms / frames / 80.0, offline->first_ms);
    printf("first audio by text layout: non-streaming %.1f ms, streaming %.1f ms\n",
           layout_nonstream->first_ms, layout_stream->first_ms);
}

static int run_full(bench_opts *o) {
    static const int32_t text[] = {9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13, 220, 16, 17};
    kz_model *m;
    kz_session *s;
    double t0 = now_ms();
    if (cli_open_split("bench", o->model, o->isa, (int)o->threads, (int)o->threads_lm,
                       (int)o->threads_codec, &m, &s) != 0) {
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
    // The code predictor runs on the LM stage's threads: compare with their bandwidth
    // (the session's default split gives the LM all of the threads).
    int n_lm = o->threads_lm > 0 ? (int)o->threads_lm : (int)(o->threads > 0 ? o->threads : 2);
    double bw = measure_bandwidth(n_lm);
    o->bw_threads = n_lm;
    playback runs[64], offline, lay_ns, lay_s;
    int n = o->repeat < 64 ? (int)o->repeat : 64;
    kz_session_reset_timings(s);
    kz_status st = KZ_OK;
    for (int i = 0; i < n && st == KZ_OK; i++) {
        st = timed(s, &r, &runs[i]);
    }
    kz_timings t;
    kz_session_timings(s, &t);
    kz_request off = r;
    off.first_chunk_frames = off.chunk_frames = (int32_t)(o->frames < 1024 ? o->frames : 1024);
    st = st ? st : timed(s, &off, &offline);
    kz_request quick = r;
    quick.frames = 2;
    quick.layout = KZ_LAYOUT_NON_STREAMING;
    st = st ? st : timed(s, &quick, &lay_ns);
    quick.layout = KZ_LAYOUT_STREAMING;
    st = st ? st : timed(s, &quick, &lay_s);
    if (st == KZ_OK) {
        report_stages(o, &t, load_ms, bw);
        report_runs(runs, n, &offline, &lay_ns, &lay_s, (double)o->frames);
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
        {"--threads-lm", NULL, ARG_INT, &o.threads_lm, 0, 256, "N     threads of the talker/code predictor stage"},
        {"--threads-codec", NULL, ARG_INT, &o.threads_codec, 0, 256, "N     threads of the codec stage"},
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
