/*
 * bench_report.c - prints a bench_result (see bench_report.h) as aligned text or JSON.
 *
 * Text: a header (run shape, the machine's limits, model load), one row per stage
 * (ms/frame, achieved rate, floor, % of floor), then the whole-run numbers (real-time
 * factors, time to first audio, peak RSS). JSON: the same numbers as one object on
 * one line, keys in snake_case, absent numbers (no floor, not measured) as null.
 */
#include "bench_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const bench_offline_part_names[BENCH_OFFLINE_PARTS] = {
    "prefill", "talker", "code predictor", "sampling", "codec", "other"};

static const char *unit_name(bench_unit u) {
    return u == BENCH_UNIT_GBS ? "GB/s" : u == BENCH_UNIT_GFLOPS ? "GFLOP/s" : "";
}

static double pct_of_floor(const bench_stage *s) {
    return s->floor_ms > 0 && s->compared_ms > 0 ? 100.0 * s->floor_ms / s->compared_ms : 0;
}

/* The real-time factor with every stage that has a rate at its floor, one after another
 * (the fastest these runs could go on this machine at its measured limits; sampling and
 * the rest count 0). 0 with the overlap schedule, whose stages share the cores, or when a
 * stage with a rate has no floor. */
static double floor_rtf(const bench_result *r) {
    if (r->overlap) {
        return 0;
    }
    double ms = 0;
    for (int i = 0; i < r->n_stages; i++) {
        const bench_stage *s = &r->stages[i];
        if (s->unit != BENCH_UNIT_NONE) {
            if (s->floor_ms <= 0) {
                return 0;
            }
            ms += s->floor_ms;
        }
    }
    return ms / r->frame_ms;
}

/* --- text -------------------------------------------------------------------- */

static const char *plural(int n) {
    return n == 1 ? "" : "s";
}

static void text_machine(const bench_result *r) {
    const bench_machine *m = &r->machine;
    printf("machine             ");
    if (m->read_gbs > 0) {
        printf("DRAM read %.1f GB/s (%d thread%s%s), ", m->read_gbs, m->read_threads,
               plural(m->read_threads), m->read_given ? ", --peak-gbs" : "");
    }
    printf("FMA peak %.1f GFLOP/s (%d thread%s, %s)", m->fma_gflops, m->fma_threads,
           plural(m->fma_threads), m->fma_given ? "--peak-gflops" : m->fma_loop);
    if (m->bf16_gflops > 0) {
        printf(", bf16 peak %.1f GFLOP/s (%s)", m->bf16_gflops, m->bf16_loop);
    }
    if (m->core_rt_ns > 0) {
        printf(", core round trip %.0f ns", m->core_rt_ns);
    }
    printf("; probes %.0f ms\n", m->probe_ms);
}

static void text_header(const bench_result *r) {
    char chunk[32];
    if (r->chunk) {
        snprintf(chunk, sizeof chunk, "%lld frames", (long long)r->chunk);
    } else {
        snprintf(chunk, sizeof chunk, "adaptive");
    }
    printf("frames/run %lld, runs %lld, chunk %s, kernels %s, codec %s%s, talker kv %s, "
           "threads %d",
           (long long)r->frames, (long long)r->runs, chunk, r->kernels, r->codec_precision,
           r->codec_forms_stored ? " (forms from the file)" : "", r->kv_cache, r->threads);
    if (!r->decoder_only) {
        printf(" (LM stage %d, codec stage %d, %s)", r->threads_lm, r->threads_codec,
               r->overlap ? "overlapping" : "taking turns");
    }
    printf("\n");
    text_machine(r);
    printf("model load          %8.1f ms\n", r->load_ms);
    if (!r->decoder_only) {
        printf("warm-up             %8.1f ms  (2 frames before the timed runs, not in them: "
               "a process's first pass over its weights is slower)\n",
               r->warmup_ms);
        printf("prompt              %8lld rows, prefill %.1f ms\n", (long long)r->prompt_rows,
               r->prefill_ms);
    }
}

static void text_stages(const bench_result *r) {
    printf("stage               ms/frame      achieved  floor ms/frame  %% of floor\n");
    for (int i = 0; i < r->n_stages; i++) {
        const bench_stage *s = &r->stages[i];
        printf("%-18s %9.2f", s->name, s->ms_per_frame);
        if (s->unit != BENCH_UNIT_NONE) {
            printf(" %6.1f %-7s", s->rate, unit_name(s->unit));
        }
        if (s->floor_ms > 0) {
            printf(" %14.2f %10.0f %%", s->floor_ms, pct_of_floor(s));
        }
        printf("%s%s\n", s->note ? "  " : "", s->note ? s->note : "");
    }
    const double f = floor_rtf(r);
    if (f > 0) {
        printf("floor RTF           %8.3f  (the stages above at their floors, one after another)\n",
               f);
    }
}

static void text_runs(const bench_result *r) {
    const bench_playback *st = &r->streaming, *off = &r->offline;
    if (r->decoder_only) {
        printf("real-time factor    %8.3f  (%g ms of audio per frame)\n",
               st->ms_per_frame / r->frame_ms, r->frame_ms);
        printf("codec GFLOP/frame   %8.3f\n", r->codec_gflop_per_frame);
        printf("peak RSS            %8.1f MB\n", r->peak_rss_mb);
        return;
    }
    printf("peak RSS            %8.1f MB\n", r->peak_rss_mb);
    printf("streaming           %8.2f ms/frame  real-time factor %.3f\n", st->ms_per_frame,
           st->ms_per_frame / r->frame_ms);
    printf("  time to first audio %6.1f ms; underruns when played in real time: %d (%.0f ms "
           "waiting per run); %.1f chunks per run\n",
           st->first_audio_ms, st->underruns, st->stall_ms, st->chunks);
    printf("offline             %8.2f ms/frame  real-time factor %.3f, first audio %.0f ms "
           "(all frames, then one decode; mean of %d run%s)\n",
           off->ms_per_frame, off->ms_per_frame / r->frame_ms, off->first_audio_ms,
           r->offline_runs, plural(r->offline_runs));
    printf("  by stage, ms/frame:");
    for (int k = 0; k < BENCH_OFFLINE_PARTS; k++) {
        printf("%s %s %.2f", k ? "," : "", bench_offline_part_names[k], r->offline_stage_ms[k]);
    }
    printf(" (other: the wall time outside the stages)\n");
    printf("  codec decoder %.2f ms/frame in the one pass (streaming: %.2f in %.1f chunks "
           "per run)\n",
           off->codec_ms_per_frame, st->codec_ms_per_frame, st->chunks);
    const double(*fa)[2] = r->first_audio_layout_ms;
    printf("first audio by text layout: non-streaming %.1f ms, streaming %.1f ms; with the "
           "voice's prompt prefix cached %.1f and %.1f ms (medians of %d)\n",
           fa[0][0], fa[1][0], fa[0][1], fa[1][1], r->first_audio_layout_runs);
}

/* The voice spoken; for a made one each stage of its making, best and median of the
 * runs, against its floor. */
static void text_voice(const bench_result *r) {
    const bench_voice *v = &r->voice;
    if (r->decoder_only || !v->kind) {
        return;
    }
    if (strcmp(v->source, "preset") == 0) {
        printf("voice               preset speaker %s\n", v->name ? v->name : "(none)");
        return;
    }
    printf("voice               %s voice %s %s: %.1f s reference", v->kind,
           strcmp(v->source, "made") == 0 ? "made from" : "read from", v->name, v->ref_seconds);
    if (strcmp(v->kind, "icl") == 0) {
        printf(", %d codec frames", v->ref_frames);
    }
    printf("\n");
    if (v->make_runs == 0) {
        return;
    }
    printf("making the voice    %d thread%s, best and median of %d runs; floor: GFLOP at "
           "%.1f GFLOP/s\n", v->make_threads, plural(v->make_threads), v->make_runs,
           v->fma_gflops);
    printf("  stage                best ms  median ms    GFLOP  floor ms  %% of floor\n");
    for (int k = 0; k < BENCH_VOICE_STAGES; k++) {
        printf("  %-18s %9.1f %10.1f", bench_voice_stage_names[k], v->best_ms[k],
               v->median_ms[k]);
        if (v->gflop[k] > 0) {
            printf(" %8.2f", v->gflop[k]);
        }
        if (v->floor_ms[k] > 0 && v->median_ms[k] > 0) {
            printf(" %9.1f %10.0f %%", v->floor_ms[k], 100 * v->floor_ms[k] / v->median_ms[k]);
        }
        printf("\n");
    }
}

void bench_print_text(const bench_result *r) {
    text_header(r);
    text_voice(r);
    text_stages(r);
    text_runs(r);
}

/* --- JSON -------------------------------------------------------------------- */

/* Writer state: whether the current object or array already has a member. */
typedef struct json_out {
    bool has_member[8];
    int depth;
} json_out;

static void json_key(json_out *j, const char *key) {
    printf("%s", j->has_member[j->depth] ? "," : "");
    j->has_member[j->depth] = true;
    if (key) {
        printf("\"%s\":", key);
    }
}

static void json_open(json_out *j, const char *key, char bracket) {
    json_key(j, key);
    printf("%c", bracket);
    j->has_member[++j->depth] = false;
}

static void json_close(json_out *j, char bracket) {
    printf("%c", bracket);
    j->depth--;
}

/* A number; 0 when `present` is false, NaN or infinite prints null. */
static void json_num(json_out *j, const char *key, double v, bool present) {
    json_key(j, key);
    if (present && isfinite(v)) {
        printf("%.6g", v);
    } else {
        printf("null");
    }
}

/* A string, escaped as JSON requires (a voice's name is a path as given). */
static void json_str(json_out *j, const char *key, const char *s) {
    json_key(j, key);
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\') {
            printf("\\%c", *c);
        } else if (*c < 0x20) {
            printf("\\u%04x", *c);
        } else {
            putchar(*c);
        }
    }
    putchar('"');
}

static void json_bool(json_out *j, const char *key, bool v) {
    json_key(j, key);
    printf("%s", v ? "true" : "false");
}

static void json_machine(json_out *j, const bench_machine *m) {
    json_open(j, "machine", '{');
    json_num(j, "read_gbs", m->read_gbs, m->read_gbs > 0);
    json_num(j, "read_threads", m->read_threads, m->read_gbs > 0);
    json_str(j, "read_source", m->read_gbs <= 0 ? "none" : m->read_given ? "option" : "probe");
    json_num(j, "fma_gflops", m->fma_gflops, true);
    json_num(j, "fma_threads", m->fma_threads, true);
    json_str(j, "fma_source", m->fma_given ? "option" : "probe");
    json_str(j, "fma_loop", m->fma_given ? "" : m->fma_loop);
    json_num(j, "bf16_gflops", m->bf16_gflops, m->bf16_gflops > 0);
    json_str(j, "bf16_loop", m->bf16_gflops > 0 ? m->bf16_loop : "");
    json_num(j, "core_rt_ns", m->core_rt_ns, m->core_rt_ns > 0);
    json_num(j, "probe_ms", m->probe_ms, true);
    json_close(j, '}');
}

static void json_stages(json_out *j, const bench_result *r) {
    json_open(j, "stages", '[');
    for (int i = 0; i < r->n_stages; i++) {
        const bench_stage *s = &r->stages[i];
        json_open(j, NULL, '{');
        json_str(j, "name", s->name);
        json_num(j, "ms_per_frame", s->ms_per_frame, true);
        json_num(j, "gbs", s->rate, s->unit == BENCH_UNIT_GBS);
        json_num(j, "gflops", s->rate, s->unit == BENCH_UNIT_GFLOPS);
        json_num(j, "floor_ms_per_frame", s->floor_ms, s->floor_ms > 0);
        json_num(j, "pct_of_floor", pct_of_floor(s), s->floor_ms > 0);
        json_close(j, '}');
    }
    json_close(j, ']');
}

static void json_playback(json_out *j, const char *key, const bench_playback *p,
                          double frame_ms) {
    json_open(j, key, '{');
    json_num(j, "ms_per_frame", p->ms_per_frame, true);
    json_num(j, "rtf", p->ms_per_frame / frame_ms, true);
    json_num(j, "first_audio_ms", p->first_audio_ms, p->first_audio_ms >= 0);
    json_num(j, "underruns", p->underruns, p->underruns >= 0);
    json_num(j, "stall_ms_per_run", p->stall_ms, p->underruns >= 0);
    json_num(j, "chunks_per_run", p->chunks, p->underruns >= 0);
    json_num(j, "codec_ms_per_frame", p->codec_ms_per_frame, p->codec_ms_per_frame > 0);
    json_close(j, '}');
}

/* "offline_stages": {"runs": N, "prefill_ms_per_frame": .., ..., "other_ms_per_frame": ..}. */
static void json_offline_stages(json_out *j, const bench_result *r) {
    static const char *const keys[BENCH_OFFLINE_PARTS] = {
        "prefill_ms_per_frame", "talker_ms_per_frame", "code_predictor_ms_per_frame",
        "sampling_ms_per_frame", "codec_ms_per_frame", "other_ms_per_frame"};
    json_open(j, "offline_stages", '{');
    json_num(j, "runs", r->offline_runs, true);
    for (int k = 0; k < BENCH_OFFLINE_PARTS; k++) {
        json_num(j, keys[k], r->offline_stage_ms[k], true);
    }
    json_close(j, '}');
}

static void json_voice(json_out *j, const bench_voice *v) {
    json_open(j, "voice", '{');
    json_str(j, "kind", v->kind);
    json_str(j, "source", v->source);
    json_str(j, "name", v->name); // a path or a speaker
    json_num(j, "ref_seconds", v->ref_seconds, strcmp(v->source, "preset") != 0);
    json_num(j, "ref_frames", v->ref_frames, strcmp(v->kind, "icl") == 0);
    if (v->make_runs > 0) {
        json_open(j, "make", '{');
        json_num(j, "runs", v->make_runs, true);
        json_num(j, "threads", v->make_threads, true);
        json_num(j, "fma_gflops", v->fma_gflops, v->fma_gflops > 0);
        json_open(j, "stages", '[');
        for (int k = 0; k < BENCH_VOICE_STAGES; k++) {
            const bool fl = v->floor_ms[k] > 0 && v->median_ms[k] > 0;
            json_open(j, NULL, '{');
            json_str(j, "name", bench_voice_stage_names[k]);
            json_num(j, "best_ms", v->best_ms[k], true);
            json_num(j, "median_ms", v->median_ms[k], true);
            json_num(j, "gflop", v->gflop[k], v->gflop[k] > 0);
            json_num(j, "floor_ms", v->floor_ms[k], fl);
            json_num(j, "pct_of_floor", fl ? 100 * v->floor_ms[k] / v->median_ms[k] : 0, fl);
            json_close(j, '}');
        }
        json_close(j, ']');
        json_close(j, '}');
    }
    json_close(j, '}');
}

void bench_print_json(const bench_result *r) {
    json_out j = {{false}, 0};
    json_open(&j, NULL, '{');
    json_str(&j, "mode", r->decoder_only ? "decoder-only" : "full");
    json_str(&j, "kernels", r->kernels);
    json_str(&j, "codec_precision", r->codec_precision);
    json_str(&j, "kv_cache", r->kv_cache);
    json_bool(&j, "codec_forms_stored", r->codec_forms_stored);
    json_num(&j, "frames", (double)r->frames, true);
    json_num(&j, "runs", (double)r->runs, true);
    json_num(&j, "chunk", (double)r->chunk, true);
    json_num(&j, "frame_ms", r->frame_ms, true);
    json_num(&j, "threads", r->threads, true);
    json_num(&j, "threads_lm", r->threads_lm, !r->decoder_only);
    json_num(&j, "threads_codec", r->threads_codec, true);
    if (!r->decoder_only) {
        json_str(&j, "schedule", r->overlap ? "overlap" : "turns");
    }
    json_machine(&j, &r->machine);
    json_num(&j, "model_load_ms", r->load_ms, true);
    json_num(&j, "prompt_rows", (double)r->prompt_rows, !r->decoder_only);
    json_num(&j, "prefill_ms", r->prefill_ms, !r->decoder_only);
    json_num(&j, "warmup_ms", r->warmup_ms, !r->decoder_only);
    json_num(&j, "codec_gflop_per_frame", r->codec_gflop_per_frame, true);
    json_stages(&j, r);
    const double f = floor_rtf(r);
    json_num(&j, "floor_rtf", f, f > 0);
    json_playback(&j, r->decoder_only ? "decode" : "streaming", &r->streaming, r->frame_ms);
    if (!r->decoder_only) {
        json_playback(&j, "offline", &r->offline, r->frame_ms);
        json_offline_stages(&j, r);
        const double(*fa)[2] = r->first_audio_layout_ms;
        json_num(&j, "first_audio_non_streaming_layout_ms", fa[0][0], true);
        json_num(&j, "first_audio_streaming_layout_ms", fa[1][0], true);
        json_num(&j, "first_audio_non_streaming_layout_cached_ms", fa[0][1], true);
        json_num(&j, "first_audio_streaming_layout_cached_ms", fa[1][1], true);
        json_num(&j, "first_audio_layout_runs", (double)r->first_audio_layout_runs, true);
        json_voice(&j, &r->voice);
    }
    json_num(&j, "peak_rss_mb", r->peak_rss_mb, true);
    json_close(&j, '}');
    printf("\n");
}
