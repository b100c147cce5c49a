/*
 * bench_concurrency.h - `kztts bench --concurrency N[,N...]`: continuous batching through
 * the public scheduler (kztts.h, "scheduler: many requests batched"), measured at each
 * concurrency of the list against its batched floor (bench_concurrency.c measures,
 * bench_concurrency_report.c prints text or JSON).
 *
 * At concurrency N: one kz_scheduler (--threads threads, max_batch N) and N client
 * threads, each with its own session attached to it, all starting together, each
 * synthesizing the bench's fixed request of exactly --frames frames (its own seed),
 * streaming. Per N: aggregate frames/s (every stream's frames / wall time from the first
 * start to the last end), per-stream real-time factor (p50, worst), first audio (p50,
 * p95: from a stream's start to its first audio callback), the scheduler's mean batch
 * (frames / steps of kz_scheduler_get_stats), the speed-up against N = 1 of the same run
 * and the batched floor; and from the scheduler's counters the language model's time per
 * batched step against its part of the floor (W / BW + B 2 W / (4 P) at the mean batch B),
 * the prefills' time and the time between batches (the codec's chunks):
 *
 *   floor frames/s at N = N / (W / BW + N * (2 W / (4 P) + codec floor per frame))
 *
 * W  = the language model's weight bytes per frame (talker step + the code predictor's
 *      sub-steps, counted by a session without a scheduler), read once per batched step;
 * BW = DRAM read bandwidth of --threads threads (kz_experimental_machine_read_gbs);
 * 2 W / (4 P) = one row's arithmetic: a multiply-add per weight byte at the int8 peak,
 *      taken as 4 multiply-adds per FMA lane (dot-product instructions: VNNI, SDOT) of
 *      P, the FMA peak of --threads threads (kz_experimental_machine_fma_gflops);
 * codec floor per frame = its FLOP at P (its bf16 FLOP at the bf16 peak when one was
 *      measured), one per stream, on the same threads, in series with the LM steps.
 */
#ifndef KZ_BENCH_CONCURRENCY_H
#define KZ_BENCH_CONCURRENCY_H

#include <stdbool.h>
#include <stdint.h>

/* Most concurrencies in one list; the largest concurrency (the scheduler's max_batch
 * limit). */
#define BENCH_CONCURRENCY_MAX_LEVELS 16
#define BENCH_CONCURRENCY_MAX 64

typedef struct bench_concurrency_opts {
    const char *model, *isa, *codec_precision, *kv_cache;
    const char *list;   /* "1,2,4,8" as given */
    int64_t frames, chunk, repeat, seed;
    int threads;        /* the scheduler's pool; 0 = the online CPUs, at most 8 */
    double peak_gbs, peak_gflops; /* 0 = measure */
    bool json;
} bench_concurrency_opts;

/* Parses list ("1,2,4,8": 1 to BENCH_CONCURRENCY_MAX_LEVELS whole numbers, each 1 to
 * BENCH_CONCURRENCY_MAX) into levels[]; returns their count, or -1 after printing
 * "kztts bench: --concurrency ..." to stderr. */
int bench_concurrency_parse(const char *list, int levels[BENCH_CONCURRENCY_MAX_LEVELS]);

/* Runs the benchmark (the list already checked by bench_concurrency_parse) and prints it.
 * Returns the exit code: 0, 1 on a failure at run time, 2 on a bad list. */
int bench_concurrency(const bench_concurrency_opts *o);

/* --- results (bench_concurrency_report.c prints them) --------------------------- */

typedef struct bench_concurrency_level {
    int n;                    /* concurrency: streams and max_batch */
    int64_t audio_frames;     /* frames of audio delivered in the timed rounds, all streams */
    int64_t sched_frames, sched_steps; /* the scheduler's counters over the timed rounds */
    double wall_ms;           /* median over rounds: first start to last end */
    double frames_per_s;      /* median over rounds of N * frames / wall */
    double speedup;           /* frames_per_s / that of N = 1; 0 when 1 is not listed */
    double rtf_p50, rtf_worst;/* stream wall time / its audio seconds, over every stream */
    double first_audio_p50_ms, first_audio_p95_ms;
    double lm_ms_per_step;    /* the scheduler's wall time in batched steps / steps */
    double lm_floor_ms;       /* a step of the mean batch B at the floor: W / BW + B 2W/(4P) */
    double lm_pct_of_floor;   /* 100 * lm_floor_ms / lm_ms_per_step */
    double prompt_ms;         /* the scheduler's wall time in prefills, per stream */
    double between_ms;        /* its wall time between batches (codec chunks), per frame */
    double codec_gflop_per_frame; /* measured in these streams */
    double codec_floor_ms;    /* C: their codec FLOP per frame at the peaks */
    double floor_step_ms;     /* one batched frame step at the floor (formula above) */
    double floor_frames_per_s;
    double pct_of_floor;      /* 100 * frames_per_s / floor_frames_per_s */
} bench_concurrency_level;

typedef struct bench_concurrency_result {
    const char *kernels, *kernel_sub_level, *codec_precision, *kv_cache;
    const char *bf16_gemm;    /* the codec's bf16 GEMM, "" when it runs no bf16 */
    int64_t frames, runs, chunk;
    int threads;              /* the scheduler's pool, as resolved */
    double frame_ms;          /* audio per frame */
    double read_gbs, fma_gflops, bf16_gflops; /* 0 bf16 = not used */
    double core_rt_ns; /* cache-line round trip between two threads; 0 = not measured */
    bool read_given, fma_given; /* from --peak-gbs / --peak-gflops */
    const char *fma_loop, *bf16_loop;
    double lm_bytes_per_frame; /* W */
    double lm_read_ms;        /* W / BW */
    double lm_row_ms;         /* one row's arithmetic, 2 W / (4 P) */
    bench_concurrency_level levels[BENCH_CONCURRENCY_MAX_LEVELS];
    int n_levels;
} bench_concurrency_result;

void bench_concurrency_print_text(const bench_concurrency_result *r);
void bench_concurrency_print_json(const bench_concurrency_result *r);

/* The formula, for --help and the text output. */
#define BENCH_CONCURRENCY_FLOOR_HELP                                                           \
    "floor frames/s at N = N / (W / BW + N * (2 W / (4 P) + C)): W the language model's "      \
    "weight\nbytes per frame (talker + code predictor), read once per batched step at BW, "    \
    "the DRAM\nread bandwidth; 2 W / (4 P) one stream's arithmetic, a multiply-add per "       \
    "weight byte at the\nint8 dot-product peak taken as 4x P, the FMA peak; C the codec's "    \
    "FLOP per frame at P\n(bf16 FLOP at the bf16 peak), one per stream; BW and P measured "    \
    "with --threads threads.\n"

#endif
