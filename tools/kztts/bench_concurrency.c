/*
 * bench_concurrency.c - `kztts bench --concurrency`: streams batched by one scheduler at
 * each concurrency of the list, against the batched floor (bench_concurrency.h).
 *
 * Data flow: the model and a session without a scheduler (cli_open_engine, --threads)
 * -> two short syntheses on that session, 2 and 4 frames: the difference of their weight
 * byte counters is the language model's bytes per frame W (the prefill cancels out), and
 * they warm the weights' pages -> per concurrency N: a scheduler (max_batch N) and N
 * sessions attached to it (1 thread each: kz_decode's, the synthesis runs on the
 * scheduler's pool), a warm-up round of 2 frames, then --repeat rounds: N threads
 * released together once all are started, each synthesizing the fixed request of --frames
 * frames with its own seed, streaming; each stream's start, first audio callback, end and
 * samples, the scheduler's counters and times before and after, the sessions' codec FLOP ->
 * the machine probes (after the runs, so that their threads and buffer compete with
 * nothing) -> the floor per N -> bench_concurrency_report.c prints.
 */
#include "bench_concurrency.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_compare.h"
#include "cli.h"
#include "kztts.h"
#include "stats.h"

int bench_concurrency_parse(const char *list, int levels[BENCH_CONCURRENCY_MAX_LEVELS]) {
    int n = 0;
    const char *p = list;
    for (;;) {
        char *end;
        const long v = strtol(p, &end, 10);
        const bool number = end != p && (*end == ',' || *end == '\0') && p[0] != '+' &&
                            p[0] != '-' && p[0] != ' ';
        if (!number || v < 1 || v > BENCH_CONCURRENCY_MAX) {
            fprintf(stderr, "kztts bench: --concurrency takes a list of whole numbers from 1 to "
                            "%d (e.g. 1,2,4,8), got '%.*s' in '%s'\n",
                    BENCH_CONCURRENCY_MAX, (int)strcspn(p, ","), p, list);
            return -1;
        }
        if (n == BENCH_CONCURRENCY_MAX_LEVELS) {
            fprintf(stderr, "kztts bench: --concurrency takes at most %d values\n",
                    BENCH_CONCURRENCY_MAX_LEVELS);
            return -1;
        }
        levels[n++] = (int)v;
        if (*end == '\0') {
            return n;
        }
        p = end + 1;
    }
}

/* --- one stream ------------------------------------------------------------------- */

/* The start line of a round: the client threads wait until the main thread has started
 * them all, then run together (or return, when one could not be started). */
typedef struct start_line {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int state; /* 0 waiting, 1 go, -1 abandoned */
} start_line;

typedef struct stream {
    kz_session *session;
    kz_request request;      /* the fixed request, this stream's seed and callback */
    start_line *line;
    double start_ms, first_ms, end_ms; /* stats_now_ms(); first_ms < 0 = no audio yet */
    int64_t samples;
    kz_status st;
    char error[256];         /* kz_last_error() of this thread when st != KZ_OK */
} stream;

static bool on_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    stream *x = user;
    (void)pcm;
    (void)pos;
    (void)last;
    if (x->first_ms < 0) {
        x->first_ms = stats_now_ms();
    }
    x->samples += (int64_t)n;
    return true;
}

/* Waits at the line; true to go. */
static bool wait_start(start_line *l) {
    pthread_mutex_lock(&l->lock);
    while (l->state == 0) {
        pthread_cond_wait(&l->changed, &l->lock);
    }
    const bool go = l->state > 0;
    pthread_mutex_unlock(&l->lock);
    return go;
}

static void set_start(start_line *l, int state) {
    pthread_mutex_lock(&l->lock);
    l->state = state;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

static void *stream_main(void *arg) {
    stream *x = arg;
    kz_session_clear_prompt_cache(x->session); // every run computes its whole prompt
    x->first_ms = -1;
    x->samples = 0;
    if (!wait_start(x->line)) {
        return NULL;
    }
    x->start_ms = stats_now_ms();
    x->st = kz_synthesize(x->session, &x->request);
    x->end_ms = stats_now_ms();
    if (x->st != KZ_OK) {
        snprintf(x->error, sizeof x->error, "%s", kz_last_error());
    }
    return NULL;
}

/* One round: every stream synthesizes `frames` frames, all released at once. Returns the
 * first failure after printing it. */
static kz_status run_round(stream *xs, int n, int64_t frames) {
    start_line line = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th[BENCH_CONCURRENCY_MAX];
    int started = 0;
    for (int i = 0; i < n; i++) {
        xs[i].line = &line;
        xs[i].request.frames = (int32_t)frames;
        xs[i].st = KZ_OK;
    }
    while (started < n && pthread_create(&th[started], NULL, stream_main, &xs[started]) == 0) {
        started++;
    }
    kz_status st = KZ_OK;
    if (started < n) {
        fprintf(stderr, "kztts bench: cannot start %d client threads\n", n);
        st = KZ_STATUS_OUT_OF_MEMORY;
    }
    set_start(&line, st == KZ_OK ? 1 : -1);
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (st == KZ_OK && xs[i].st != KZ_OK) {
            st = xs[i].st;
            fprintf(stderr, "kztts bench: %s: %s\n", kz_status_str(st), xs[i].error);
        }
    }
    pthread_mutex_destroy(&line.lock);
    pthread_cond_destroy(&line.changed);
    return st;
}

/* --- one concurrency ---------------------------------------------------------------- */

typedef struct level_run {
    const kz_model *model;
    const kz_request *request; /* the fixed request */
    int threads;
    int64_t frames, repeat, seed;
    double frame_ms;
    int spf;                   /* samples per frame */
} level_run;

static kz_status open_streams(const level_run *c, kz_scheduler *sch, stream *xs, int n) {
    kz_session_params p;
    kz_session_default_params(&p);
    p.n_threads = 1; // kz_decode's; the synthesis runs on the scheduler's pool
    p.scheduler = sch;
    for (int i = 0; i < n; i++) {
        kz_status st = kz_session_new(c->model, &p, &xs[i].session);
        if (st != KZ_OK) {
            cli_report("bench", st);
            return st;
        }
        xs[i].request = *c->request;
        xs[i].request.seed = (uint64_t)(c->seed + i);
        xs[i].request.on_audio = on_audio;
        xs[i].request.user = &xs[i];
    }
    return KZ_OK;
}

/* The timed rounds' per-stream numbers into L, rounds' medians from fps[] and wall[]. */
static void summarize(const level_run *c, bench_concurrency_level *L, double *rtf, double *first,
                      double *fps, double *wall) {
    const int n_streams = L->n * (int)c->repeat;
    L->rtf_p50 = stats_percentile(rtf, n_streams, 0.5);
    L->rtf_worst = stats_percentile(rtf, n_streams, 1.0);
    L->first_audio_p50_ms = stats_percentile(first, n_streams, 0.5);
    L->first_audio_p95_ms = stats_percentile(first, n_streams, 0.95);
    L->frames_per_s = stats_median(fps, (int)c->repeat);
    L->wall_ms = stats_median(wall, (int)c->repeat);
}

/* One round's streams: their RTF and first audio into rtf[0..n) and first[0..n), the
 * round's wall time and frames/s, the audio frames added up. */
static void record_round(const level_run *c, const stream *xs, int n, double *rtf, double *first,
                         double *fps, double *wall, int64_t *audio_frames) {
    double t0 = xs[0].start_ms, t1 = xs[0].end_ms;
    for (int i = 0; i < n; i++) {
        t0 = xs[i].start_ms < t0 ? xs[i].start_ms : t0;
        t1 = xs[i].end_ms > t1 ? xs[i].end_ms : t1;
        rtf[i] = (xs[i].end_ms - xs[i].start_ms) / ((double)c->frames * c->frame_ms);
        first[i] = (xs[i].first_ms >= 0 ? xs[i].first_ms : xs[i].end_ms) - xs[i].start_ms;
        *audio_frames += xs[i].samples / c->spf;
    }
    *wall = t1 - t0;
    *fps = (double)n * (double)c->frames / (*wall * 1e-3);
}

static kz_status timed_rounds(const level_run *c, kz_scheduler *sch, stream *xs,
                              bench_concurrency_level *L) {
    const int n = L->n, rounds = (int)c->repeat;
    double *rtf = malloc((size_t)(n * rounds) * sizeof *rtf);
    double *first = malloc((size_t)(n * rounds) * sizeof *first);
    double *fps = malloc((size_t)rounds * sizeof *fps), *wall = malloc((size_t)rounds * sizeof *wall);
    kz_status st = rtf && first && fps && wall ? KZ_OK : KZ_STATUS_OUT_OF_MEMORY;
    kz_scheduler_stats s0, s1;
    kz_scheduler_get_stats(sch, &s0);
    for (int r = 0; r < rounds && st == KZ_OK; r++) {
        st = run_round(xs, n, c->frames);
        if (st == KZ_OK) {
            record_round(c, xs, n, rtf + r * n, first + r * n, &fps[r], &wall[r],
                         &L->audio_frames);
        }
    }
    kz_scheduler_get_stats(sch, &s1);
    L->sched_frames = s1.frames - s0.frames;
    L->sched_steps = s1.steps - s0.steps;
    L->lm_ms_per_step = L->sched_steps ? (s1.batch_ms - s0.batch_ms) / (double)L->sched_steps : 0;
    L->prompt_ms = (s1.prompt_ms - s0.prompt_ms) / (double)(n * rounds);
    L->between_ms = L->sched_frames ? (s1.short_ms - s0.short_ms) / (double)L->sched_frames : 0;
    if (st == KZ_OK) {
        summarize(c, L, rtf, first, fps, wall);
    }
    free(rtf);
    free(first);
    free(fps);
    free(wall);
    return st;
}

/* The codec's FLOP per frame in the timed rounds, all streams; *bf16 its bf16 part. */
static double codec_flop_per_frame(const stream *xs, int n, double *bf16) {
    double flop = 0, flop_bf16 = 0, frames = 0;
    for (int i = 0; i < n; i++) {
        kz_timings t;
        kz_session_timings(xs[i].session, &t);
        flop += t.codec_flop;
        flop_bf16 += t.codec_flop_bf16;
        frames += (double)t.codec_frames;
    }
    *bf16 = frames > 0 ? flop_bf16 / frames : 0;
    return frames > 0 ? flop / frames : 0;
}

/* Concurrency L->n: scheduler, sessions, a warm-up round, the timed rounds. *bf16_flop
 * receives the codec's bf16 FLOP per frame. */
static kz_status run_level(const level_run *c, bench_concurrency_level *L, double *bf16_flop) {
    const int n = L->n;
    kz_scheduler_params sp;
    kz_scheduler_default_params(&sp);
    sp.n_threads = c->threads;
    sp.max_batch = n;
    kz_scheduler *sch;
    kz_status st = kz_scheduler_new(c->model, &sp, &sch);
    if (st != KZ_OK) {
        cli_report("bench", st);
        return st;
    }
    stream *xs = calloc((size_t)n, sizeof *xs);
    st = xs ? open_streams(c, sch, xs, n) : KZ_STATUS_OUT_OF_MEMORY;
    st = st == KZ_OK ? run_round(xs, n, c->frames < 2 ? c->frames : 2) : st;
    for (int i = 0; i < n && st == KZ_OK; i++) {
        kz_session_reset_timings(xs[i].session);
    }
    st = st == KZ_OK ? timed_rounds(c, sch, xs, L) : st;
    if (st == KZ_OK) {
        L->codec_gflop_per_frame = codec_flop_per_frame(xs, n, bf16_flop) * 1e-9;
    }
    for (int i = 0; xs && i < n; i++) {
        kz_session_free(xs[i].session);
    }
    free(xs);
    kz_scheduler_free(sch);
    return st;
}

/* --- the model's side: W, and the machine's limits ------------------------------------ */

/* W: the LM weight bytes of 2 more frames, halved (a plain session; prompts recomputed). */
static kz_status lm_bytes_per_frame(kz_session *s, const kz_request *base, double *w) {
    double bytes[2] = {0, 0};
    kz_status st = KZ_OK;
    for (int k = 0; k < 2 && st == KZ_OK; k++) {
        kz_request q = *base;
        q.frames = 2 + 2 * k;
        kz_session_clear_prompt_cache(s);
        kz_session_reset_timings(s);
        st = kz_synthesize(s, &q);
        kz_timings t;
        kz_session_timings(s, &t);
        bytes[k] = t.talker_bytes + t.code_predictor_bytes;
    }
    *w = (bytes[1] - bytes[0]) / 2;
    if (st != KZ_OK) {
        cli_report("bench", st);
    }
    return st;
}

static void probe_machine(const bench_concurrency_opts *o, bench_concurrency_result *r) {
    r->read_given = o->peak_gbs > 0;
    r->fma_given = o->peak_gflops > 0;
    r->read_gbs = o->peak_gbs;
    r->fma_gflops = o->peak_gflops;
    r->fma_loop = r->bf16_loop = "";
    if (!r->read_given && kz_experimental_machine_read_gbs(r->threads, &r->read_gbs) != KZ_OK) {
        r->read_gbs = 0;
    }
    if (!r->fma_given && kz_experimental_machine_fma_gflops(r->kernels, r->threads, &r->fma_gflops,
                                                            &r->fma_loop) != KZ_OK) {
        r->fma_gflops = 0;
    }
    // The codec's bf16 convolutions, as `kztts bench` measures them (cmd_bench.c).
    r->bf16_gflops = 0;
    if (r->bf16_gemm[0] && strcmp(r->kernels, "avx512") == 0 &&
        kz_experimental_machine_fma_gflops(r->bf16_gemm, r->threads, &r->bf16_gflops,
                                           &r->bf16_loop) != KZ_OK) {
        r->bf16_gflops = 0;
    }
    if (r->threads < 2 || kz_experimental_machine_core_rt_ns(&r->core_rt_ns) != KZ_OK) {
        r->core_rt_ns = 0;
    }
}

/* Level L's floor (bench_concurrency.h); all 0 when a limit is unknown. */
static void level_floor(const bench_concurrency_result *r, bench_concurrency_level *L,
                        double bf16_flop) {
    const double flop = L->codec_gflop_per_frame * 1e9;
    if (r->read_gbs <= 0 || r->fma_gflops <= 0) {
        return;
    }
    L->codec_floor_ms = r->bf16_gflops > 0 ? ((flop - bf16_flop) / (r->fma_gflops * 1e9) +
                                              bf16_flop / (r->bf16_gflops * 1e9)) * 1e3
                                           : flop / (r->fma_gflops * 1e9) * 1e3;
    L->floor_step_ms = r->lm_read_ms + L->n * (r->lm_row_ms + L->codec_floor_ms);
    L->floor_frames_per_s = L->n / (L->floor_step_ms * 1e-3);
    L->pct_of_floor = 100 * L->frames_per_s / L->floor_frames_per_s;
    const double batch = L->sched_steps ? (double)L->sched_frames / (double)L->sched_steps : 0;
    L->lm_floor_ms = r->lm_read_ms + batch * r->lm_row_ms;
    L->lm_pct_of_floor = L->lm_ms_per_step > 0 ? 100 * L->lm_floor_ms / L->lm_ms_per_step : 0;
}

static void engine_facts(const kz_model *m, const kz_session *s, int threads,
                         bench_concurrency_result *r) {
    kz_experimental_model_info mi;
    kz_experimental_session_info si;
    kz_experimental_model_get_info(m, &mi);
    kz_experimental_session_get_info(s, &si);
    r->kernels = mi.kernels;
    r->kernel_sub_level = mi.kernel_sub_level;
    r->codec_precision = mi.codec_precision;
    r->kv_cache = mi.kv_cache;
    r->bf16_gemm = mi.bf16_gemm;
    r->frame_ms = 1e3 * kz_model_samples_per_frame(m) / kz_model_sample_rate(m);
    // Threads 0: the session resolved them as the scheduler would (the online CPUs, at
    // most 8); the scheduler gets the number, so both runs agree.
    r->threads = threads > 0 ? threads : si.n_threads;
}

/* Every level of the list, then the probes and the floors. */
static kz_status run_levels(const bench_concurrency_opts *o, const kz_model *m,
                            const kz_request *req, const int *levels,
                            bench_concurrency_result *r) {
    const level_run c = {.model = m, .request = req, .threads = r->threads,
                         .frames = o->frames, .repeat = o->repeat, .seed = o->seed,
                         .frame_ms = r->frame_ms, .spf = kz_model_samples_per_frame(m)};
    double bf16_flop[BENCH_CONCURRENCY_MAX_LEVELS] = {0};
    kz_status st = KZ_OK;
    for (int i = 0; i < r->n_levels && st == KZ_OK; i++) {
        r->levels[i].n = levels[i];
        st = run_level(&c, &r->levels[i], &bf16_flop[i]);
    }
    if (st != KZ_OK) {
        return st;
    }
    probe_machine(o, r);
    r->lm_read_ms = r->read_gbs > 0 ? r->lm_bytes_per_frame / (r->read_gbs * 1e9) * 1e3 : 0;
    r->lm_row_ms = r->fma_gflops > 0 ? 2 * r->lm_bytes_per_frame / (4 * r->fma_gflops * 1e9) * 1e3
                                     : 0;
    double one = 0;
    for (int i = 0; i < r->n_levels; i++) {
        one = r->levels[i].n == 1 && one == 0 ? r->levels[i].frames_per_s : one;
    }
    for (int i = 0; i < r->n_levels; i++) {
        bench_concurrency_level *L = &r->levels[i];
        L->speedup = one > 0 ? L->frames_per_s / one : 0;
        level_floor(r, L, bf16_flop[i]);
    }
    return KZ_OK;
}

int bench_concurrency(const bench_concurrency_opts *o) {
    int levels[BENCH_CONCURRENCY_MAX_LEVELS];
    bench_concurrency_result r = {.frames = o->frames, .runs = o->repeat, .chunk = o->chunk};
    r.n_levels = bench_concurrency_parse(o->list, levels);
    if (r.n_levels < 0) {
        return 2;
    }
    kz_model *m;
    kz_session *s; // without a scheduler: W, and the threads resolved
    const cli_engine e = {.isa = o->isa, .codec_precision = o->codec_precision,
                          .kv_cache = o->kv_cache, .threads = o->threads};
    if (cli_open_engine("bench", o->model, &e, &m, &s) != 0) {
        return 1;
    }
    engine_facts(m, s, o->threads, &r);
    kz_request req;
    int32_t *ids = NULL;
    kz_status st = bench_fixed_request(m, o->frames, o->chunk, o->seed, &req, &ids);
    if (st != KZ_OK) {
        cli_report("bench", st);
    }
    st = st == KZ_OK ? lm_bytes_per_frame(s, &req, &r.lm_bytes_per_frame) : st;
    kz_session_free(s);
    st = st == KZ_OK ? run_levels(o, m, &req, levels, &r) : st;
    if (st == KZ_OK) {
        (o->json ? bench_concurrency_print_json : bench_concurrency_print_text)(&r);
    }
    kz_ids_free(ids);
    kz_model_free(m);
    return st == KZ_OK ? 0 : cli_exit_status(st);
}
