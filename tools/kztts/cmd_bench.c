/*
 * cmd_bench.c - `kztts bench`: stage speed against this machine's limits.
 *
 * Data flow: load the model (kz_model_load's own wall time is reported) -> timed runs
 * -> the session's stage timings and counters (kz_timings: ms, weight bytes streamed
 * by the LM stages, codec FLOP) and the peak RSS -> the machine probes (kztts.h
 * kz_experimental_machine_*:
 * DRAM read bandwidth with the LM stage's threads, FMA peak at the model's kernel level
 * with the codec stage's threads; --peak-gbs / --peak-gflops replace them) -> per stage
 * ms/frame, achieved GB/s or GFLOP/s, the floor (bytes / bandwidth, FLOP / FMA peak)
 * and the % of the floor reached -> bench_report.c prints text or JSON (--json).
 * The probes run after the model runs so that their 256 MB buffer is not in the peak
 * RSS and their threads do not compete with the stages.
 *
 * --decoder-only: decode `frames` random frames in streaming mode `repeat` times after
 * one warm-up: per codec stage ms/frame, real-time factor, GFLOP/s against the FMA peak.
 * Default (full pipeline): after an untimed 2-frame warm-up (its wall time reported: a
 * process's first pass over its weights is slower), synthesize exactly `frames` frames from
 * a fixed 12-token text (about a 10-word sentence) with the model's first speaker: prefill, talker,
 * code predictor, sampling and codec; then the real-time factor and time to first
 * audio of streaming runs (pipelined, first chunk 1 frame) with the underruns a
 * real-time player would see, of offline runs (all frames, then one decode; their time
 * by stage), and the time to first audio of both text layouts.
 * A Base model speaks with a cloned voice (bench_voice.c): --voice FILE loaded, or
 * --ref-audio made `repeat` times first, its making timed per stage against the floor
 * (the encoders' FLOP at the FMA peak of the threads that made it).
 * A list in -m, --codec-precision or --schedule: bench_compare.c, the variants in one
 * process, runs alternated.
 * --concurrency N[,N...]: bench_concurrency.c, N streams batched by one scheduler.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "args.h"
#include "bench_compare.h"
#include "bench_concurrency.h"
#include "bench_report.h"
#include "bench_voice.h"
#include "cli.h"
#include "codes_file.h"
#include "progress.h"
#include "stats.h"

typedef struct bench_opts {
    const char *model, *isa, *codec_precision, *kv_cache, *schedule, *concurrency;
    int64_t frames, threads, threads_lm, threads_codec, chunk, repeat, seed;
    double peak_gbs, peak_gflops; /* 0 = measure */
    bench_voice_opts voice;
    bool decoder_only, json, help, quiet;
} bench_opts;

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* The engine as loaded: kernel level, codec precision in effect (and whether its forms
 * came from the file), the codec's bf16 GEMM, load time, and the session's thread counts
 * and schedule as it resolved them (kz_decode runs on its main pool). */
static void engine_facts(const kz_model *m, const kz_session *s, bool decoder_only,
                         bench_result *r) {
    kz_experimental_model_info mi;
    kz_experimental_session_info si;
    kz_experimental_model_get_info(m, &mi);
    kz_experimental_session_get_info(s, &si);
    r->kernels = mi.kernels;
    r->codec_precision = mi.codec_precision;
    r->kv_cache = mi.kv_cache;
    r->codec_forms_stored = mi.codec_forms_stored;
    r->bf16_gemm = mi.bf16_gemm;
    r->load_ms = mi.load_ms;
    r->frame_ms = 1e3 * kz_model_samples_per_frame(m) / kz_model_sample_rate(m);
    r->threads = si.n_threads;
    r->threads_lm = si.n_threads_lm;
    r->threads_codec = decoder_only ? si.n_threads : si.n_threads_codec;
    r->overlap = si.overlap;
}

/* The probes of kztts.h (kz_experimental_machine_*), 0 when one cannot run. */
static double probe_read_gbs(int n_threads) {
    double gbs = 0;
    return kz_experimental_machine_read_gbs(n_threads, &gbs) == KZ_OK ? gbs : 0;
}

static double probe_fma_gflops(const char *loop, int n_threads, const char **loop_run) {
    double gflops = 0;
    return kz_experimental_machine_fma_gflops(loop, n_threads, &gflops, loop_run) == KZ_OK ? gflops
                                                                                         : 0;
}

static double probe_core_rt_ns(void) {
    double ns = 0;
    return kz_experimental_machine_core_rt_ns(&ns) == KZ_OK ? ns : 0;
}

/* The machine's limits for the stages' thread counts, and where its threads were placed. */
static void measure_machine(const bench_opts *o, bench_result *r) {
    bench_machine *m = &r->machine;
    const double t0 = stats_now_ms();
    m->read_threads = r->threads_lm;
    m->read_given = o->peak_gbs > 0;
    if (!o->decoder_only) {
        m->read_gbs = m->read_given ? o->peak_gbs : probe_read_gbs(r->threads_lm);
    }
    m->fma_threads = r->threads_codec;
    m->fma_given = o->peak_gflops > 0;
    m->fma_loop = "";
    m->fma_gflops = m->fma_given ? o->peak_gflops
                                 : probe_fma_gflops(r->kernels, r->threads_codec, &m->fma_loop);
    // The codec's bf16 convolutions: the bf16 GEMM the library installed sets the peak
    // (below the avx512 level it is FMAs on widened bf16: the FMA peak).
    m->bf16_gflops = 0;
    m->bf16_loop = "";
    if (r->bf16_gemm[0] && strcmp(r->kernels, "avx512") == 0) {
        m->bf16_gflops = probe_fma_gflops(r->bf16_gemm, r->threads_codec, &m->bf16_loop);
    }
    // A made voice ran on the session's thread count: its own FMA peak when that differs.
    bench_voice *v = &r->voice;
    if (v->make_runs > 0) {
        const char *loop;
        const double peak = m->fma_given || v->make_threads == r->threads_codec
                                ? m->fma_gflops
                                : probe_fma_gflops(r->kernels, v->make_threads, &loop);
        bench_voice_floors(v, peak);
    }
    m->core_rt_ns = r->threads_lm > 1 || r->threads_codec > 1 ? probe_core_rt_ns() : 0;
    m->probe_ms = stats_now_ms() - t0;
}

/* A stage compared with the time it would take at the machine's limit `peak` (GB/s or
 * GFLOP/s) for `work` (bytes or FLOP) per frame. */
static bench_stage stage_at(const char *name, double ms_per_frame, bench_unit unit, double work,
                            double compared_ms, double peak) {
    return (bench_stage){.name = name, .ms_per_frame = ms_per_frame, .unit = unit,
                         .rate = work / (compared_ms * 1e-3) * 1e-9,
                         .floor_ms = peak > 0 ? work / (peak * 1e9) * 1e3 : 0,
                         .compared_ms = compared_ms};
}

/* The codec decoder against its floor: its f32 FLOP at the FMA peak plus its bf16 FLOP
 * at the bf16 peak (the f32 peak when no bf16 peak was measured). */
static bench_stage codec_stage(const char *name, double ms_per_frame, const kz_timings *t,
                               double frames, double compared_ms, const bench_machine *m) {
    const double flop = t->codec_flop / frames, bf16 = t->codec_flop_bf16 / frames;
    bench_stage s = stage_at(name, ms_per_frame, BENCH_UNIT_GFLOPS, flop, compared_ms,
                             m->fma_gflops);
    if (m->fma_gflops > 0 && m->bf16_gflops > 0) {
        s.floor_ms = ((flop - bf16) / (m->fma_gflops * 1e9) + bf16 / (m->bf16_gflops * 1e9)) * 1e3;
    }
    return s;
}

static void print_result(const bench_opts *o, const bench_result *r) {
    if (o->json) {
        bench_print_json(r);
    } else {
        bench_print_text(r);
    }
}

/* --- codec decoder alone ------------------------------------------------------- */

static void decoder_stages(bench_result *r, const kz_timings *t, double wall_ms) {
    const double f = (double)t->codec_frames, per = wall_ms / f, flop = t->codec_flop / f;
    const bench_stage parts[] = {
        {.name = "codec quantizer", .ms_per_frame = t->codec_quantizer_ms / f},
        {.name = "codec transformer", .ms_per_frame = t->codec_transformer_ms / f},
        {.name = "codec upsample", .ms_per_frame = t->codec_upsample_ms / f},
        {.name = "codec vocoder", .ms_per_frame = t->codec_vocoder_ms / f},
        codec_stage("codec decoder", per, t, f, per, &r->machine),
    };
    memcpy(r->stages, parts, sizeof parts);
    r->n_stages = (int)(sizeof parts / sizeof parts[0]);
    r->codec_gflop_per_frame = flop * 1e-9;
    r->streaming = (bench_playback){.ms_per_frame = per, .first_audio_ms = -1, .underruns = -1};
}

/* Warm-up on up to 4 frames, then `repeat` timed decodes; *wall_ms is their total. */
static kz_status decode_runs(const bench_opts *o, kz_model *m, kz_session *s, double *wall_ms) {
    int32_t *codes = codes_random((size_t)o->frames, kz_model_num_codebooks(m),
                                  kz_model_codebook_size(m), (uint64_t)o->seed);
    kz_decode_params dp;
    kz_decode_default_params(&dp);
    dp.chunk_frames = (int32_t)o->chunk;
    dp.on_audio = cli_discard_audio;
    size_t warm = o->frames < 4 ? (size_t)o->frames : 4;
    kz_status st = codes ? kz_decode(s, codes, warm, &dp) : KZ_STATUS_OUT_OF_MEMORY;
    kz_session_reset_timings(s);
    *wall_ms = 0;
    for (int64_t r = 0; r < o->repeat && st == KZ_OK; r++) {
        double t1 = stats_now_ms();
        st = kz_decode(s, codes, (size_t)o->frames, &dp);
        *wall_ms += stats_now_ms() - t1;
    }
    free(codes);
    return st;
}

static int run_decoder(const bench_opts *o, bench_result *r) {
    kz_model *m;
    kz_session *s;
    const cli_engine e = {.isa = o->isa, .codec_precision = o->codec_precision,
                          .kv_cache = o->kv_cache, .threads = (int)o->threads,
                          .codec_only = true};
    if (cli_open_engine("bench", o->model, &e, &m, &s) != 0) {
        return 1;
    }
    engine_facts(m, s, true, r);
    double wall_ms;
    kz_status st = decode_runs(o, m, s, &wall_ms);
    if (st == KZ_OK) {
        kz_timings t;
        kz_session_timings(s, &t);
        r->peak_rss_mb = peak_rss_mb();
        measure_machine(o, r);
        decoder_stages(r, &t, wall_ms);
        print_result(o, r);
    } else {
        cli_report("bench", st);
    }
    kz_session_free(s);
    kz_model_free(m);
    return st == KZ_OK ? 0 : 1;
}

/* --- full pipeline ------------------------------------------------------------- */

/* One synthesis as a listener would see it: time to first audio, and underruns if
 * playback started at the first callback and consumed the model's sample rate. */
typedef struct playback {
    double sample_rate; /* Hz */
    double t0, first_ms, wall_ms;
    double played_s;   /* audio delivered so far, seconds */
    int underruns;
    double stall_ms;   /* total time the player would have waited */
    int chunks;        /* audio callbacks */
} playback;

static bool on_chunk(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    playback *p = user;
    (void)pcm; (void)pos; (void)last;
    double now = stats_now_ms() - p->t0;
    if (p->first_ms < 0) {
        p->first_ms = now;
    } else {
        double due = p->first_ms + p->stall_ms + p->played_s * 1e3;
        if (now > due) {
            p->underruns++;
            p->stall_ms += now - due;
        }
    }
    p->played_s += (double)n / p->sample_rate;
    p->chunks++;
    return true;
}

static kz_status timed(const kz_model *m, kz_session *s, const kz_request *r, playback *p) {
    *p = (playback){.sample_rate = kz_model_sample_rate(m), .t0 = stats_now_ms(), .first_ms = -1};
    kz_request q = *r;
    q.on_audio = on_chunk;
    q.user = p;
    kz_status st = kz_synthesize(s, &q);
    p->wall_ms = stats_now_ms() - p->t0;
    return st;
}

/* Talker: its rate, floor and % cover the prefill too (the byte counter does); the
 * ms/frame column is the steps alone. */
static void full_stages(bench_result *r, const kz_timings *t, int n_runs) {
    const double f = (double)t->frames, bw = r->machine.read_gbs;
    const double codec = stats_codec_ms(t);
    bench_stage talker = stage_at("talker", t->talker_ms / f, BENCH_UNIT_GBS,
                                  t->talker_bytes / f, (t->talker_ms + t->prefill_ms) / f, bw);
    talker.note = "(rate, floor and % include the prefill)";
    const bench_stage rows[] = {
        talker,
        stage_at("code predictor", t->code_predictor_ms / f, BENCH_UNIT_GBS,
                 t->code_predictor_bytes / f, t->code_predictor_ms / f, bw),
        {.name = "sampling", .ms_per_frame = t->sampling_ms / f},
        codec_stage("codec decoder", codec / f, t, f, codec / f, &r->machine),
    };
    memcpy(r->stages, rows, sizeof rows);
    r->n_stages = (int)(sizeof rows / sizeof rows[0]);
    r->prompt_rows = t->prompt_tokens / n_runs;
    r->prefill_ms = t->prefill_ms / n_runs;
    r->codec_gflop_per_frame = t->codec_flop / f * 1e-9;
}

static void full_runs(bench_result *r, const playback *stream, int n_stream,
                      const playback *offline /* [n_stream] */, double layout_ms[2][2][64],
                      int n_layout) {
    const double frames = (double)r->frames;
    bench_playback *p = &r->streaming;
    *p = (bench_playback){0};
    for (int i = 0; i < n_stream; i++) {
        p->ms_per_frame += stream[i].wall_ms / frames / n_stream;
        p->first_audio_ms += stream[i].first_ms / n_stream;
        p->underruns += stream[i].underruns;
        p->stall_ms += stream[i].stall_ms / n_stream;
        p->chunks += (double)stream[i].chunks / n_stream;
    }
    r->offline = (bench_playback){.underruns = -1};
    for (int i = 0; i < n_stream; i++) {
        r->offline.ms_per_frame += offline[i].wall_ms / frames / n_stream;
        r->offline.first_audio_ms += offline[i].first_ms / n_stream;
    }
    for (int l = 0; l < 2; l++) {
        for (int c = 0; c < 2; c++) {
            r->first_audio_layout_ms[l][c] = stats_median(layout_ms[l][c], n_layout);
        }
    }
    r->first_audio_layout_runs = n_layout;
}

/* The offline runs' time per frame by stage, from their timings t and wall times, and
 * what of the wall time no stage accounts for. */
static void offline_stages(bench_result *r, const kz_timings *t, const playback *runs, int n) {
    const double f = (double)t->frames;
    double wall = 0;
    for (int i = 0; i < n; i++) {
        wall += runs[i].wall_ms;
    }
    double *ms = r->offline_stage_ms;
    ms[BENCH_OFFLINE_PREFILL] = t->prefill_ms / f;
    ms[BENCH_OFFLINE_TALKER] = t->talker_ms / f;
    ms[BENCH_OFFLINE_CODE_PREDICTOR] = t->code_predictor_ms / f;
    ms[BENCH_OFFLINE_SAMPLING] = t->sampling_ms / f;
    ms[BENCH_OFFLINE_CODEC] = stats_codec_ms(t) / f;
    ms[BENCH_OFFLINE_OTHER] = wall / f;
    for (int k = 0; k < BENCH_OFFLINE_OTHER; k++) {
        ms[BENCH_OFFLINE_OTHER] -= ms[k];
    }
    r->offline_runs = n;
    r->offline.codec_ms_per_frame = ms[BENCH_OFFLINE_CODEC];
}

/* acc += the session's timings since its last reset. */
static void timings_add(const kz_session *s, kz_timings *acc) {
    kz_timings t;
    kz_session_timings(s, &t);
    acc->codec_quantizer_ms += t.codec_quantizer_ms;
    acc->codec_transformer_ms += t.codec_transformer_ms;
    acc->codec_upsample_ms += t.codec_upsample_ms;
    acc->codec_vocoder_ms += t.codec_vocoder_ms;
    acc->codec_flop += t.codec_flop;
    acc->codec_flop_bf16 += t.codec_flop_bf16;
    acc->codec_frames += t.codec_frames;
    acc->prefill_ms += t.prefill_ms;
    acc->talker_ms += t.talker_ms;
    acc->code_predictor_ms += t.code_predictor_ms;
    acc->sampling_ms += t.sampling_ms;
    acc->frames += t.frames;
    acc->prompt_tokens += t.prompt_tokens;
    acc->prompt_tokens_cached += t.prompt_tokens_cached;
    acc->talker_bytes += t.talker_bytes;
    acc->code_predictor_bytes += t.code_predictor_bytes;
}

/* One run of request q with its whole prompt computed, its timings added to *acc. */
static kz_status timed_run(const kz_model *m, kz_session *s, const kz_request *q, playback *p,
                           kz_timings *acc) {
    kz_session_clear_prompt_cache(s);
    kz_session_reset_timings(s);
    kz_status st = timed(m, s, q, p);
    timings_add(s, acc);
    return st;
}

/* `repeat` streaming runs (timed stages) and `repeat` offline runs alternated, so that both
 * see the same minutes of a shared host, then `repeat` runs of 2 frames per text layout,
 * the layouts alternating: a single run reads whatever the shared host did in those
 * 150 ms (docs/PERF.md: a kernel thread takes one core for 5-20 ms every 0.5 s), the median
 * does not. */
static kz_status full_measure(const bench_opts *o, const kz_model *m, kz_session *s,
                              const kz_voice *voice, bench_result *res) {
    kz_request r;
    int32_t *text_ids;
    kz_status st = bench_fixed_request(m, o->frames, o->chunk, o->seed, &r, &text_ids);
    if (voice) {
        r.speaker = NULL;
        r.voice = voice;
    }
    playback runs[64], offline[64], layout;
    double layout_ms[2][2][64];
    int n = o->repeat < 64 ? (int)o->repeat : 64;
    res->runs = n;
    kz_request off = r;
    off.first_chunk_frames = off.chunk_frames = (int32_t)(o->frames < 1024 ? o->frames : 1024);
    kz_timings t = {0}, t_off = {0};
    kz_request quick = r;
    quick.frames = 2;
    // A process's first pass over its weights is slower, by a cost per page
    // (docs/PERF.md); the stages below are the steady speed.
    if (st == KZ_OK) {
        playback warm;
        st = timed(m, s, &quick, &warm);
        res->warmup_ms = warm.wall_ms;
    }
    for (int i = 0; i < n && st == KZ_OK; i++) {
        st = timed_run(m, s, &r, &runs[i], &t);
        st = st == KZ_OK ? timed_run(m, s, &off, &offline[i], &t_off) : st;
    }
    for (int i = 0; i < n && st == KZ_OK; i++) {
        for (int l = 0; l < 2 && st == KZ_OK; l++) {
            quick.layout = l == 0 ? KZ_LAYOUT_NON_STREAMING : KZ_LAYOUT_STREAMING;
            kz_session_clear_prompt_cache(s); // cold, then again with the voice cached
            for (int c = 0; c < 2 && st == KZ_OK; c++) {
                st = timed(m, s, &quick, &layout);
                layout_ms[l][c][i] = layout.first_ms;
            }
        }
    }
    if (st == KZ_OK) {
        res->peak_rss_mb = peak_rss_mb();
        measure_machine(o, res);
        full_stages(res, &t, n);
        full_runs(res, runs, n, offline, layout_ms, n);
        offline_stages(res, &t_off, offline, n);
        res->streaming.codec_ms_per_frame = stats_codec_ms(&t) / (double)t.frames;
    }
    kz_ids_free(text_ids);
    return st;
}

static int run_full(const bench_opts *o, bench_result *r) {
    kz_model *m;
    kz_session *s;
    const cli_engine e = {.isa = o->isa, .codec_precision = o->codec_precision,
                          .kv_cache = o->kv_cache, .schedule = o->schedule, .threads = (int)o->threads,
                          .threads_lm = (int)o->threads_lm, .threads_codec = (int)o->threads_codec,
                          .voice_files_only = o->voice.voice && !o->voice.ref_audio};
    if (cli_open_engine("bench", o->model, &e, &m, &s) != 0) {
        return 1;
    }
    engine_facts(m, s, false, r);
    kz_voice *voice = NULL;
    int rc = bench_voice_get(&o->voice, m, (int)o->repeat, r->threads, &voice, &r->voice);
    kz_status st = rc == 0 ? full_measure(o, m, s, voice, r) : KZ_OK;
    if (rc == 0 && st == KZ_OK) {
        print_result(o, r);
    } else if (rc == 0) {
        cli_report("bench", st);
        rc = 1;
    }
    kz_voice_free(voice);
    kz_session_free(s);
    kz_model_free(m);
    return rc;
}

/* --- many streams batched ---------------------------------------------------------- */

/* --concurrency: the list checked, the options that do not apply refused, then the
 * benchmark. Returns the exit code. */
static int run_concurrency(const bench_opts *o) {
    int levels[BENCH_CONCURRENCY_MAX_LEVELS];
    if (bench_concurrency_parse(o->concurrency, levels) < 0) {
        return 2;
    }
    if (o->decoder_only || o->threads_lm || o->threads_codec || o->schedule ||
        o->voice.voice || o->voice.ref_audio ||
        bench_compare_wanted(o->model, o->codec_precision, o->kv_cache, NULL)) {
        fprintf(stderr, "kztts bench: --concurrency runs the whole pipeline of one model on the "
                        "scheduler's --threads (no --decoder-only, --threads-lm, "
                        "--threads-codec, --schedule, --voice, --ref-audio or compare list)\n");
        return 2;
    }
    const bench_concurrency_opts c = {.model = o->model, .isa = o->isa,
                                      .codec_precision = o->codec_precision,
                                      .kv_cache = o->kv_cache, .list = o->concurrency, .frames = o->frames,
                                      .chunk = o->chunk < 0 ? 0 : o->chunk, .repeat = o->repeat,
                                      .seed = o->seed, .threads = (int)o->threads,
                                      .peak_gbs = o->peak_gbs, .peak_gflops = o->peak_gflops,
                                      .json = o->json};
    return bench_concurrency(&c);
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.isa = "auto", .frames = 100, .chunk = -1, .repeat = 3, .seed = 1};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL checkpoint or codec directory, .gguf file or Hugging Face repo id (A,B,...: compare)"),
        ARG_OPT_FLAG("--decoder-only", NULL, &o.decoder_only, "benchmark only the codec decoder, on random codes"),
        ARG_OPT_INT("--frames", NULL, &o.frames, 1, 100000, "N     frames per run (default 100: 8 s in the released models)"),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_INT("--chunk", NULL, &o.chunk, 0, 1024, "N     frames per streamed chunk; 0 = adaptive (default; 4 with --decoder-only)"),
        ARG_OPT_INT("--threads-lm", NULL, &o.threads_lm, 0, 256, "N     threads of the talker/code predictor stage"),
        ARG_OPT_INT("--threads-codec", NULL, &o.threads_codec, 0, 256, "N     threads of the codec stage"),
        ARG_OPT_INT("--repeat", NULL, &o.repeat, 1, 1000, "N     timed runs (default 3)"),
        ARG_OPT_INT("--seed", NULL, &o.seed, 0, 1e15, "N     seed of the random codes and of the sampling (default 1)"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_CHOICES("--codec-precision", NULL, &o.codec_precision, CLI_PRECISION_NAMES, BENCH_COMPARE_MAX, CLI_CODEC_PRECISION_HELP),
        ARG_OPT_CHOICES("--kv-cache", NULL, &o.kv_cache, CLI_KV_CACHE_NAMES, BENCH_COMPARE_MAX, CLI_KV_CACHE_HELP),
        ARG_OPT_CHOICES("--schedule", NULL, &o.schedule, CLI_SCHEDULE_NAMES, BENCH_COMPARE_MAX, "S     how the LM and codec stages share the cores: turns (default) or overlap"),
        ARG_OPT_DOUBLE("--peak-gbs", NULL, &o.peak_gbs, 0, 1e6, "X     DRAM read GB/s of the LM threads (default: measured)"),
        ARG_OPT_DOUBLE("--peak-gflops", NULL, &o.peak_gflops, 0, 1e9, "Y     FMA GFLOP/s of the codec threads (default: measured)"),
        ARG_OPT_STRING("--concurrency", NULL, &o.concurrency, "N,... streams batched by one scheduler, per N (e.g. 1,2,4,8): frames/s, RTF, first audio, floor"),
        ARG_OPT_STRING("--voice", NULL, &o.voice.voice, "FILE  Base: speak with this cloned voice file"),
        ARG_OPT_STRING("--ref-audio", NULL, &o.voice.ref_audio, "FILE  Base: make the voice of this recording --repeat times (timed per stage), then speak with it"),
        ARG_OPT_STRING("--ref-text", NULL, &o.voice.ref_text, "T     what --ref-audio says: an in-context voice"),
        ARG_OPT_FLAG("--xvector-only", NULL, &o.voice.xvector_only, "a voice of --ref-audio's speaker embedding only"),
        ARG_OPT_FLAG("--json", NULL, &o.json, "print one JSON object instead of text"),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("bench", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("bench", "-m MODEL [--decoder-only] [options]", specs, n_specs);
        printf("\nPer stage: ms per codec frame (80 ms of audio in the released models), "
               "achieved GB/s\nof weights (talker, code predictor) or GFLOP/s (codec), and the "
               "floor: the time at\nthis machine's limits, DRAM read bandwidth with the LM "
               "stage's threads and the FMA\npeak with the codec's, both measured in well "
               "under a second after the runs;\n'%% of floor' = floor / time; the floor RTF: "
               "the stages at their floors,\none after another. Then real-time factors, time to "
               "first audio, peak RSS and the model\nload time.\n"
               "\nA list in one of -m, --codec-precision, --kv-cache or --schedule (A,B,...: 2 "
               "to 5) "
               "compares them in one\nprocess: one model each, --repeat rounds in which each "
               "runs once, the order rotating;\nmedian, min and max ms per frame and the "
               "ratio to the first.\n"
               "\n--concurrency N,...: per N, one scheduler (--threads threads, max_batch N) "
               "and N client threads,\neach with a session attached to it, synthesize "
               "--frames frames each (own seeds, streaming,\nall started together), --repeat "
               "rounds after a warm-up; include 1 for the speed-up.\n"
               BENCH_CONCURRENCY_FLOOR_HELP);
        return 0;
    }
    if (!o.model) {
        fprintf(stderr, "kztts bench: -m MODEL is required\n");
        return 2;
    }
    o.voice.model = o.model;
    if (bench_voice_check_options(&o.voice) != 0) {
        return 2;
    }
    const bool cloned = o.voice.voice || o.voice.ref_audio;
    if (cloned && (o.decoder_only || bench_compare_wanted(o.model, o.codec_precision, o.kv_cache, o.schedule))) {
        fprintf(stderr, "kztts bench: --voice and --ref-audio go with the full pipeline of one "
                        "model (not --decoder-only or a compare list)\n");
        return 2;
    }
    if (o.quiet) {
        progress_quiet();
    }
    if (o.concurrency) {
        return run_concurrency(&o);
    }
    if (o.chunk < 0) {
        o.chunk = o.decoder_only ? 4 : 0;
    }
    if (o.decoder_only && o.chunk == 0) {
        fprintf(stderr, "kztts bench: --decoder-only needs --chunk N of 1 to 1024\n");
        return 2;
    }
    bench_result r = {.decoder_only = o.decoder_only, .frames = o.frames, .runs = o.repeat,
                      .chunk = o.chunk};
    if (bench_compare_wanted(o.model, o.codec_precision, o.kv_cache, o.schedule)) {
        const bench_compare_opts c = {.model = o.model, .isa = o.isa, .schedule = o.schedule,
                                      .precisions = o.codec_precision, .kv_cache = o.kv_cache,
                                      .frames = o.frames,
                                      .chunk = o.chunk, .rounds = o.repeat, .seed = o.seed,
                                      .threads = (int)o.threads, .threads_lm = (int)o.threads_lm,
                                      .threads_codec = (int)o.threads_codec,
                                      .decoder_only = o.decoder_only, .json = o.json};
        return bench_compare(&c);
    }
    return o.decoder_only ? run_decoder(&o, &r) : run_full(&o, &r);
}
