/*
 * bench_concurrency_report.c - prints a bench_concurrency_result (bench_concurrency.h) as
 * aligned text or as one JSON object (cJSON).
 *
 * Text: the run's shape, the machine's limits and the floor's terms, one row per
 * concurrency, a second table with the scheduler's own times (the language model's steps
 * against their part of the floor, prefills, the work between batches), then the
 * floor's formula. JSON: the same numbers, keys in snake_case, one
 * object per concurrency in "levels"; numbers that are absent (no N = 1 for the
 * speed-up, a limit not measured for the floor) are null.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_concurrency.h"

static double mean_batch(const bench_concurrency_level *L) {
    return L->sched_steps > 0 ? (double)L->sched_frames / (double)L->sched_steps : 0;
}

static void text_header(const bench_concurrency_result *r) {
    char chunk[32] = "adaptive";
    if (r->chunk) {
        snprintf(chunk, sizeof chunk, "%lld frames", (long long)r->chunk);
    }
    printf("concurrency: N streams batched by one scheduler (max_batch N) on %d thread%s; "
           "%lld frames per stream, %lld round%s, chunk %s; kernels %s (%s), codec %s, talker "
           "kv %s\n",
           r->threads, r->threads == 1 ? "" : "s", (long long)r->frames, (long long)r->runs,
           r->runs == 1 ? "" : "s", chunk, r->kernels, r->kernel_sub_level, r->codec_precision,
           r->kv_cache);
    printf("machine: DRAM read %.1f GB/s%s, FMA peak %.1f GFLOP/s (%s)", r->read_gbs,
           r->read_given ? " (--peak-gbs)" : "", r->fma_gflops,
           r->fma_given ? "--peak-gflops" : r->fma_loop);
    if (r->bf16_gflops > 0) {
        printf(", bf16 peak %.1f GFLOP/s (%s)", r->bf16_gflops, r->bf16_loop);
    }
    if (r->core_rt_ns > 0) {
        printf(", core round trip %.0f ns", r->core_rt_ns);
    }
    printf("\nlanguage model: %.1f MB of weights per frame: %.2f ms per batched step to read, "
           "%.2f ms of arithmetic per stream\n",
           r->lm_bytes_per_frame * 1e-6, r->lm_read_ms, r->lm_row_ms);
}

void bench_concurrency_print_text(const bench_concurrency_result *r) {
    text_header(r);
    printf("%4s %9s %8s %6s %8s %9s %10s %10s %9s %10s %8s\n", "N", "frames/s", "speed-up",
           "batch", "RTF p50", "RTF worst", "1st p50 ms", "1st p95 ms", "codec ms", "floor f/s",
           "% floor");
    for (int i = 0; i < r->n_levels; i++) {
        const bench_concurrency_level *L = &r->levels[i];
        printf("%4d %9.2f ", L->n, L->frames_per_s);
        if (L->speedup > 0) {
            printf("%7.2fx ", L->speedup);
        } else {
            printf("%8s ", "-");
        }
        printf("%6.2f %8.3f %9.3f %10.1f %10.1f %9.2f", mean_batch(L), L->rtf_p50,
               L->rtf_worst, L->first_audio_p50_ms, L->first_audio_p95_ms, L->codec_floor_ms);
        if (L->floor_frames_per_s > 0) {
            printf(" %10.2f %6.0f %%", L->floor_frames_per_s, L->pct_of_floor);
        }
        printf("\n");
    }
    printf("%4s %11s %12s %10s %14s %18s\n", "N", "LM ms/step", "LM floor ms", "LM % floor",
           "prefill ms", "between ms/frame");
    for (int i = 0; i < r->n_levels; i++) {
        const bench_concurrency_level *L = &r->levels[i];
        printf("%4d %11.2f", L->n, L->lm_ms_per_step);
        if (L->lm_floor_ms > 0) {
            printf(" %12.2f %8.0f %%", L->lm_floor_ms, L->lm_pct_of_floor);
        } else {
            printf(" %12s %10s", "-", "-");
        }
        printf(" %14.1f %18.2f\n", L->prompt_ms, L->between_ms);
    }
    printf("(frames/s: all streams' frames / wall time from the first start to the last end, "
           "median of the rounds;\nspeed-up: against N = 1 of this run; batch: the "
           "scheduler's frames / steps; RTF: a stream's wall time / its\naudio; 1st: first "
           "audio from a stream's start, p50 and p95 of every stream;\ncodec ms: C, the "
           "codec's floor per frame; LM: the scheduler's time in batched steps per step, "
           "against\nW / BW + B 2 W / (4 P) at the mean batch B; prefill: its time in "
           "prefills per stream; between:\nits time between batches, the codec's chunks, "
           "per frame)\n" BENCH_CONCURRENCY_FLOOR_HELP);
}

/* A number, or null when absent. */
static void add_num(cJSON *o, const char *key, double v, bool present) {
    if (present) {
        cJSON_AddNumberToObject(o, key, v);
    } else {
        cJSON_AddNullToObject(o, key);
    }
}

static cJSON *json_level(const bench_concurrency_result *r, const bench_concurrency_level *L) {
    cJSON *x = cJSON_CreateObject();
    const bool fl = L->floor_frames_per_s > 0;
    cJSON_AddNumberToObject(x, "concurrency", L->n);
    cJSON_AddNumberToObject(x, "streams", (double)L->n * (double)r->runs);
    cJSON_AddNumberToObject(x, "audio_frames", (double)L->audio_frames);
    cJSON_AddNumberToObject(x, "scheduler_frames", (double)L->sched_frames);
    cJSON_AddNumberToObject(x, "scheduler_steps", (double)L->sched_steps);
    cJSON_AddNumberToObject(x, "mean_batch", mean_batch(L));
    cJSON_AddNumberToObject(x, "wall_ms", L->wall_ms);
    cJSON_AddNumberToObject(x, "frames_per_s", L->frames_per_s);
    add_num(x, "speedup", L->speedup, L->speedup > 0);
    cJSON_AddNumberToObject(x, "rtf_p50", L->rtf_p50);
    cJSON_AddNumberToObject(x, "rtf_worst", L->rtf_worst);
    cJSON_AddNumberToObject(x, "first_audio_p50_ms", L->first_audio_p50_ms);
    cJSON_AddNumberToObject(x, "first_audio_p95_ms", L->first_audio_p95_ms);
    cJSON_AddNumberToObject(x, "codec_gflop_per_frame", L->codec_gflop_per_frame);
    add_num(x, "codec_floor_ms_per_frame", L->codec_floor_ms, fl);
    add_num(x, "floor_step_ms", L->floor_step_ms, fl);
    add_num(x, "floor_frames_per_s", L->floor_frames_per_s, fl);
    add_num(x, "pct_of_floor", L->pct_of_floor, fl);
    cJSON_AddNumberToObject(x, "lm_ms_per_step", L->lm_ms_per_step);
    add_num(x, "lm_floor_ms_per_step", L->lm_floor_ms, fl);
    add_num(x, "lm_pct_of_floor", L->lm_pct_of_floor, fl && L->lm_ms_per_step > 0);
    cJSON_AddNumberToObject(x, "prefill_ms_per_stream", L->prompt_ms);
    cJSON_AddNumberToObject(x, "between_batches_ms_per_frame", L->between_ms);
    return x;
}

static void json_machine(cJSON *j, const bench_concurrency_result *r) {
    cJSON *m = cJSON_AddObjectToObject(j, "machine");
    add_num(m, "read_gbs", r->read_gbs, r->read_gbs > 0);
    cJSON_AddStringToObject(m, "read_source", r->read_given ? "option" : "probe");
    add_num(m, "fma_gflops", r->fma_gflops, r->fma_gflops > 0);
    cJSON_AddStringToObject(m, "fma_source", r->fma_given ? "option" : "probe");
    cJSON_AddStringToObject(m, "fma_loop", r->fma_given ? "" : r->fma_loop);
    add_num(m, "bf16_gflops", r->bf16_gflops, r->bf16_gflops > 0);
    cJSON_AddStringToObject(m, "bf16_loop", r->bf16_gflops > 0 ? r->bf16_loop : "");
    add_num(m, "core_rt_ns", r->core_rt_ns, r->core_rt_ns > 0);
    cJSON_AddNumberToObject(m, "threads", r->threads);
}

void bench_concurrency_print_json(const bench_concurrency_result *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "mode", "concurrency");
    cJSON_AddStringToObject(j, "kernels", r->kernels);
    cJSON_AddStringToObject(j, "kernel_sub_level", r->kernel_sub_level);
    cJSON_AddStringToObject(j, "codec_precision", r->codec_precision);
    cJSON_AddStringToObject(j, "kv_cache", r->kv_cache);
    cJSON_AddNumberToObject(j, "frames", (double)r->frames);
    cJSON_AddNumberToObject(j, "runs", (double)r->runs);
    cJSON_AddNumberToObject(j, "chunk", (double)r->chunk);
    cJSON_AddNumberToObject(j, "threads", r->threads);
    cJSON_AddNumberToObject(j, "frame_ms", r->frame_ms);
    json_machine(j, r);
    cJSON_AddNumberToObject(j, "lm_bytes_per_frame", r->lm_bytes_per_frame);
    add_num(j, "lm_read_ms_per_step", r->lm_read_ms, r->lm_read_ms > 0);
    add_num(j, "lm_arithmetic_ms_per_stream", r->lm_row_ms, r->lm_row_ms > 0);
    cJSON *list = cJSON_AddArrayToObject(j, "levels");
    for (int i = 0; i < r->n_levels; i++) {
        cJSON_AddItemToArray(list, json_level(r, &r->levels[i]));
    }
    char *text = cJSON_PrintUnformatted(j);
    printf("%s\n", text ? text : "{}");
    free(text);
    cJSON_Delete(j);
}
