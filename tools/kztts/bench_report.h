/*
 * bench_report.h - what `kztts bench` measured, printed as text or as one JSON object.
 *
 * cmd_bench.c runs the model and the machine probes and fills a bench_result; the
 * functions here only format it. Each stage row carries its floor: the time per frame
 * the stage would take at the machine's measured limit (weight bytes / DRAM read
 * bandwidth for the talker and the code predictor, FLOP / FMA peak for the codec), and
 * "% of floor" is floor / time, so 100 % means the stage runs at that limit.
 */
#ifndef KZ_BENCH_REPORT_H
#define KZ_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_voice.h"

typedef enum bench_unit {
    BENCH_UNIT_NONE,  /* no rate, no floor */
    BENCH_UNIT_GBS,   /* weight bytes streamed, GB/s */
    BENCH_UNIT_GFLOPS /* floating-point operations, GFLOP/s */
} bench_unit;

typedef struct bench_stage {
    const char *name;     /* "talker", "code predictor", "codec decoder", ... */
    double ms_per_frame;  /* the stage's time per frame */
    bench_unit unit;
    double rate;          /* achieved GB/s or GFLOP/s */
    double floor_ms;      /* per frame at the machine's limit; 0 = no floor */
    double compared_ms;   /* per frame time the floor is compared with (usually ms_per_frame) */
    const char *note;     /* text output only, or NULL */
} bench_stage;

typedef struct bench_machine {
    double read_gbs;      /* DRAM read bandwidth of the LM stage's threads; 0 = not used */
    int read_threads;
    bool read_given;      /* from --peak-gbs instead of the probe */
    double fma_gflops;    /* FMA peak of the codec stage's threads */
    int fma_threads;
    bool fma_given;       /* from --peak-gflops instead of the probe */
    const char *fma_loop; /* loop that measured it, e.g. "avx2 fma" */
    double bf16_gflops;   /* bf16 matrix peak of the codec's fast precision; 0 = not used */
    const char *bf16_loop;/* loop that measured it, e.g. "amx tdpbf16ps" */
    double core_rt_ns;    /* cache-line round trip between two threads; 0 = not measured */
    double probe_ms;      /* time the probes took */
} bench_machine;

typedef struct bench_playback {
    double ms_per_frame;  /* wall time per frame */
    double first_audio_ms;/* first audio callback after the call */
    int underruns;        /* -1 = not tracked */
    double stall_ms;      /* per run, time a real-time player would wait */
    double chunks;        /* audio callbacks per run (streaming) */
    double codec_ms_per_frame; /* full pipeline: the codec stage per frame in these runs
                                  (streaming: small chunks; offline: one pass), 0 = none */
} bench_playback;

/* Where an offline run's wall time went, in bench_result.offline_stage_ms. */
enum { BENCH_OFFLINE_PREFILL, BENCH_OFFLINE_TALKER, BENCH_OFFLINE_CODE_PREDICTOR,
       BENCH_OFFLINE_SAMPLING, BENCH_OFFLINE_CODEC, BENCH_OFFLINE_OTHER, BENCH_OFFLINE_PARTS };

extern const char *const bench_offline_part_names[BENCH_OFFLINE_PARTS];

typedef struct bench_result {
    bool decoder_only;
    const char *kernels;  /* kernel level of the model, e.g. "avx2" */
    const char *codec_precision; /* in effect after load: f32, bf16, winograd(-bf16) */
    const char *kv_cache;        /* the talker's KV cache: f32, f16 */
    bool codec_forms_stored; /* its converted weights came from the file (quantize
                                --codec-forms), not computed at load */
    const char *bf16_gemm; /* the codec's bf16 GEMM ("amx", ...), "" without bf16 work */
    int64_t frames, runs, chunk;
    double frame_ms;      /* audio per codec frame (the model's samples per frame at its
                             sample rate): real-time factor = ms per frame / frame_ms */
    int threads, threads_lm, threads_codec;
    bool overlap;         /* the stages overlap (KZ_SCHEDULE_OVERLAP), else take turns */
    double load_ms;       /* kz_model_load wall time */
    double peak_rss_mb;   /* measured before the machine probes */
    bench_machine machine;
    int64_t prompt_rows;  /* full pipeline: prefill rows and time per run */
    double prefill_ms;
    double warmup_ms;     /* full pipeline: the untimed 2-frame run before the others (a
                             process's first pass over its weights is slower), its wall time */
    double codec_gflop_per_frame;
    bench_stage stages[8];
    int n_stages;
    bench_playback streaming;     /* decoder-only: the timed kz_decode runs */
    bench_playback offline;       /* full pipeline: all frames, then one decode (the mean of
                                     offline_runs runs) */
    int offline_runs;
    /* The offline runs' wall time per frame by stage (BENCH_OFFLINE_* order): prefill,
     * talker steps, code predictor, sampling, codec, and the rest of the wall time (setup,
     * per-frame work between the stages, hand-offs between the LM and codec threads). */
    double offline_stage_ms[BENCH_OFFLINE_PARTS];
    double first_audio_layout_ms[2][2]; /* full pipeline: [non-streaming, streaming text
                                           layout][whole prompt, voice prefix cached], the
                                           median of first_audio_layout_runs runs */
    int first_audio_layout_runs;
    bench_voice voice;    /* full pipeline: the voice spoken, and the making of a cloned one */
} bench_result;

void bench_print_text(const bench_result *r);
void bench_print_json(const bench_result *r);

#endif
