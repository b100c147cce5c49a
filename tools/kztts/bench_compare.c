/*
 * bench_compare.c - variants of one option compared in one process (see bench_compare.h).
 *
 * Data flow: the list in -m, --codec-precision, --kv-cache or --schedule (its names checked by the
 * CLI's own parsers) -> one model and session per variant (cli_open_engine; the GGUF or
 * safetensors pages of one file are shared, each precision's transformed panels are its
 * own) -> a warm-up run each (a decode of up to 4 frames, or a 2-frame synthesis) ->
 * rounds: in round r, variant (q + r) mod n runs q-th, so no variant always runs first or
 * after the same neighbour; each run decodes the same seeded random codes (in its
 * model's shape), or
 * synthesizes the fixed request with its whole prompt (the session's timings give the
 * codec's and the LM stages' share) -> per variant the ms per frame of every round ->
 * median, min, max, and the ratio of medians to the first variant's -> text, or JSON
 * through cJSON. Host noise that lasts longer than a round hits every variant alike;
 * the median drops the rounds a burst hit.
 */
#include "bench_compare.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "codes_file.h"
#include "kztts.h"
#include "stats.h"

typedef enum bench_axis { AXIS_PRECISION, AXIS_KV_CACHE, AXIS_SCHEDULE, AXIS_MODEL } bench_axis;

static const char *const AXIS_NAMES[] = {"codec precision", "kv cache", "schedule", "model"};
static const char *const AXIS_KEYS[] = {"codec_precision", "kv_cache", "schedule", "model"};

typedef struct variant {
    const char *requested;
    const char *in_effect; /* codec precision in effect (static) */
    int threads;           /* the session's threads, as it resolved them */
    kz_model *model;
    kz_session *session;
    kz_request request;    /* the fixed request (pipeline) */
    int32_t *text_ids;     /* its token ids, by this variant's tokenizer */
    int32_t *codes;        /* [frames, codebooks] seeded random codes in the variant's
                              shape (decoder alone): the same for variants of one shape */
    double *ms;       /* [rounds] wall ms per frame */
    double *codec_ms; /* [rounds] the codec's ms per frame (pipeline) */
    double *lm_ms;    /* [rounds] prefill, talker, code predictor, sampling (pipeline) */
    double median, min, max, codec_median, lm_median;
} variant;

/* Whether name is a valid element of the axis's list (the CLI's own parsers, which print
 * "kztts bench: --option must be ..., got 'name'" when not). */
static bool valid_name(bench_axis axis, const char *name) {
    kz_precision p;
    kz_kv_cache kv;
    kz_schedule sc;
    return axis == AXIS_MODEL       ? true
           : axis == AXIS_PRECISION ? cli_parse_codec_precision("bench", name, &p) == 0
           : axis == AXIS_KV_CACHE  ? cli_parse_kv_cache("bench", name, &kv) == 0
                                    : cli_parse_schedule("bench", name, &sc) == 0;
}

/* Splits list at commas into names[] (2 to BENCH_COMPARE_MAX valid names); returns
 * their count, or -1 after printing "kztts bench: problem". names point into buf. */
static int split_names(const char *list, bench_axis axis, char *buf, size_t cap,
                       const char *names[BENCH_COMPARE_MAX]) {
    const char *what = AXIS_NAMES[axis];
    if (snprintf(buf, cap, "%s", list) >= (int)cap) {
        fprintf(stderr, "kztts bench: the list of %ss is too long\n", what);
        return -1;
    }
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!valid_name(axis, t)) {
            return -1;
        }
        if (n == BENCH_COMPARE_MAX) {
            fprintf(stderr, "kztts bench: at most %d %ss to compare\n", BENCH_COMPARE_MAX, what);
            return -1;
        }
        names[n++] = t;
    }
    if (n < 2) {
        fprintf(stderr, "kztts bench: a comparison needs two or more %ss\n", what);
        return -1;
    }
    return n;
}

/* The variant's input: random codes in its model's shape (decoder alone), or the fixed
 * request with the text tokenized by its model. -1 after printing the problem. */
static int variant_input(const bench_compare_opts *o, variant *x) {
    if (o->decoder_only) {
        x->codes = codes_random((size_t)o->frames, kz_model_num_codebooks(x->model),
                                kz_model_codebook_size(x->model), (uint64_t)o->seed);
        if (!x->codes) {
            fprintf(stderr, "kztts bench: out of memory for the codes\n");
            return -1;
        }
        return 0;
    }
    kz_status st = bench_fixed_request(x->model, o->frames, o->chunk, o->seed, &x->request,
                                       &x->text_ids);
    if (st != KZ_OK) {
        cli_report("bench", st);
        return -1;
    }
    return 0;
}

static int open_variants(const bench_compare_opts *o, bench_axis axis, variant *v, int n) {
    for (int i = 0; i < n; i++) {
        const char *label = v[i].requested;
        const cli_engine e = {.isa = o->isa,
                              .codec_precision = axis == AXIS_PRECISION ? label : o->precisions,
                              .kv_cache = axis == AXIS_KV_CACHE ? label : o->kv_cache,
                              .schedule = axis == AXIS_SCHEDULE ? label : o->schedule,
                              .threads = o->threads, .threads_lm = o->threads_lm,
                              .threads_codec = o->threads_codec};
        const char *path = axis == AXIS_MODEL ? label : o->model;
        if (cli_open_engine("bench", path, &e, &v[i].model, &v[i].session) != 0) {
            return -1;
        }
        kz_experimental_model_info mi;
        kz_experimental_session_info si;
        kz_experimental_model_get_info(v[i].model, &mi);
        kz_experimental_session_get_info(v[i].session, &si);
        v[i].in_effect = mi.codec_precision;
        v[i].threads = si.n_threads;
        if (variant_input(o, &v[i]) != 0) {
            return -1;
        }
        v[i].ms = malloc((size_t)o->rounds * sizeof *v[i].ms);
        v[i].codec_ms = calloc((size_t)o->rounds, sizeof *v[i].codec_ms);
        v[i].lm_ms = calloc((size_t)o->rounds, sizeof *v[i].lm_ms);
        if (!v[i].ms || !v[i].codec_ms || !v[i].lm_ms) {
            fprintf(stderr, "kztts bench: out of memory\n");
            return -1;
        }
    }
    return 0;
}

kz_status bench_fixed_request(const kz_model *m, int64_t frames, int64_t chunk, int64_t seed,
                              kz_request *r, int32_t **ids) {
    size_t n_ids = 0;
    kz_request_default_params(m, r);
    // Token ids, tokenized once: the runs time the synthesis, not the tokenizer.
    kz_status st = kz_tokenize(m, BENCH_TEXT, KZ_TEXT_SPLIT_QWEN2, ids, &n_ids);
    r->token_ids = *ids;
    r->n_token_ids = n_ids;
    r->speaker = kz_model_speaker_name(m, 0);
    r->frames = (int32_t)frames;
    r->chunk_frames = (int32_t)chunk;
    r->seed = (uint64_t)seed;
    r->on_audio = cli_discard_audio;
    return st;
}

/* One timed run of variant x: round r's wall ms per frame, and for the pipeline the
 * codec's and the LM stages' ms per frame from the session's timings. */
static kz_status run_once(const bench_compare_opts *o, variant *x, int64_t r, size_t frames) {
    kz_status st;
    const double t0 = stats_now_ms();
    if (o->decoder_only) {
        kz_decode_params dp;
        kz_decode_default_params(&dp);
        dp.chunk_frames = (int32_t)o->chunk;
        dp.on_audio = cli_discard_audio;
        st = kz_decode(x->session, x->codes, frames, &dp);
    } else {
        kz_request q = x->request;
        q.frames = (int32_t)frames;
        kz_session_clear_prompt_cache(x->session); // every run computes its whole prompt
        kz_session_reset_timings(x->session);
        st = kz_synthesize(x->session, &q);
    }
    if (r < 0 || st != KZ_OK) {
        return st;
    }
    x->ms[r] = (stats_now_ms() - t0) / (double)frames;
    if (!o->decoder_only) {
        kz_timings t;
        kz_session_timings(x->session, &t);
        x->codec_ms[r] = stats_codec_ms(&t) / (double)frames;
        x->lm_ms[r] = (t.prefill_ms + t.talker_ms + t.code_predictor_ms + t.sampling_ms) /
                      (double)frames;
    }
    return st;
}

/* Warm-up (round -1, not kept), then the rounds; the same input for every precision. */
static kz_status run_rounds(const bench_compare_opts *o, variant *v, int n) {
    const int64_t most = o->decoder_only ? 4 : 2;
    const size_t warm = (size_t)(o->frames < most ? o->frames : most);
    kz_status st = KZ_OK;
    for (int i = 0; i < n && st == KZ_OK; i++) {
        st = run_once(o, &v[i], -1, warm);
    }
    for (int64_t r = 0; r < o->rounds && st == KZ_OK; r++) {
        for (int q = 0; q < n && st == KZ_OK; q++) {
            st = run_once(o, &v[(q + r) % n], r, (size_t)o->frames);
        }
    }
    return st;
}

static void summarize(variant *x, int64_t rounds) {
    x->min = x->max = x->ms[0];
    for (int64_t r = 1; r < rounds; r++) {
        x->min = x->ms[r] < x->min ? x->ms[r] : x->min;
        x->max = x->ms[r] > x->max ? x->ms[r] : x->max;
    }
    x->median = stats_median(x->ms, (int)rounds);
    x->codec_median = stats_median(x->codec_ms, (int)rounds);
    x->lm_median = stats_median(x->lm_ms, (int)rounds);
}

static void print_text(const bench_compare_opts *o, bench_axis axis, const variant *v, int n) {
    printf("%ss compared in one process (%s): %lld rounds of %lld frames, chunk %lld%s, "
           "threads %d, runs alternated\n",
           AXIS_NAMES[axis], o->decoder_only ? "codec decoder alone" : "whole pipeline, streaming",
           (long long)o->rounds, (long long)o->frames, (long long)o->chunk,
           o->chunk == 0 ? " (adaptive)" : "", v[0].threads);
    printf("%-24s %-16s %8s %8s %8s %10s", AXIS_NAMES[axis], "codec in effect", "median", "min",
           "max", "vs first");
    printf(o->decoder_only ? "\n" : " %10s %10s\n", "codec", "LM");
    for (int i = 0; i < n; i++) {
        printf("%-24s %-16s %8.2f %8.2f %8.2f %9.3fx", v[i].requested, v[i].in_effect,
               v[i].median, v[i].min, v[i].max, v[i].median / v[0].median);
        if (o->decoder_only) {
            printf("\n");
        } else {
            printf(" %10.2f %10.2f\n", v[i].codec_median, v[i].lm_median);
        }
    }
    printf("(wall ms per frame%s; 'vs first' = median / the first one's median)\n",
           o->decoder_only ? " of the codec decoder"
                           : "; codec and LM stages (prefill, talker, code predictor, "
                             "sampling): medians of their own ms per frame");
}

static void print_json(const bench_compare_opts *o, bench_axis axis, const variant *v, int n) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "mode", o->decoder_only ? "decoder-compare" : "full-compare");
    cJSON_AddStringToObject(j, "axis", AXIS_KEYS[axis]);
    cJSON_AddNumberToObject(j, "frames", (double)o->frames);
    cJSON_AddNumberToObject(j, "rounds", (double)o->rounds);
    cJSON_AddNumberToObject(j, "chunk", (double)o->chunk);
    cJSON_AddNumberToObject(j, "threads", v[0].threads);
    cJSON *list = cJSON_AddArrayToObject(j, "variants");
    for (int i = 0; i < n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "requested", v[i].requested);
        cJSON_AddStringToObject(x, "codec_precision", v[i].in_effect);
        cJSON_AddNumberToObject(x, "median_ms_per_frame", v[i].median);
        cJSON_AddNumberToObject(x, "min_ms_per_frame", v[i].min);
        cJSON_AddNumberToObject(x, "max_ms_per_frame", v[i].max);
        cJSON_AddNumberToObject(x, "vs_first", v[i].median / v[0].median);
        if (!o->decoder_only) {
            cJSON_AddNumberToObject(x, "codec_ms_per_frame", v[i].codec_median);
            cJSON_AddNumberToObject(x, "lm_ms_per_frame", v[i].lm_median);
        }
        cJSON_AddItemToArray(list, x);
    }
    char *text = cJSON_PrintUnformatted(j);
    printf("%s\n", text ? text : "{}");
    free(text);
    cJSON_Delete(j);
}

bool bench_compare_wanted(const char *model, const char *precisions, const char *kv_cache,
                          const char *schedule) {
    struct stat sb;
    return (precisions && strchr(precisions, ',')) || (kv_cache && strchr(kv_cache, ',')) ||
           (schedule && strchr(schedule, ',')) ||
           (model && strchr(model, ',') && stat(model, &sb) != 0);
}

/* The option holding the list (exactly one may) and its elements; -1 on a bad list. */
static int variant_list(const bench_compare_opts *o, bench_axis *axis, char *buf, size_t cap,
                        const char *names[BENCH_COMPARE_MAX]) {
    const bool p = o->precisions && strchr(o->precisions, ',');
    const bool kv = o->kv_cache && strchr(o->kv_cache, ',');
    const bool s = o->schedule && strchr(o->schedule, ',');
    const bool m = bench_compare_wanted(o->model, NULL, NULL, NULL);
    if (p + kv + s + m != 1) {
        fprintf(stderr, "kztts bench: compare one thing at a time (a list in one of -m, "
                        "--codec-precision, --kv-cache, --schedule)\n");
        return -1;
    }
    if (kv && o->decoder_only) {
        fprintf(stderr, "kztts bench: --decoder-only has no KV cache to compare\n");
        return -1;
    }
    if (s && o->decoder_only) {
        fprintf(stderr, "kztts bench: --decoder-only has no schedule to compare\n");
        return -1;
    }
    *axis = p ? AXIS_PRECISION : kv ? AXIS_KV_CACHE : s ? AXIS_SCHEDULE : AXIS_MODEL;
    const char *list = p ? o->precisions : kv ? o->kv_cache : s ? o->schedule : o->model;
    return split_names(list, *axis, buf, cap, names);
}

int bench_compare(const bench_compare_opts *o) {
    char buf[4096];
    const char *names[BENCH_COMPARE_MAX];
    bench_axis axis;
    const int n = variant_list(o, &axis, buf, sizeof buf, names);
    if (n < 0) {
        return 2;
    }
    variant v[BENCH_COMPARE_MAX] = {{0}};
    for (int i = 0; i < n; i++) {
        v[i].requested = names[i];
    }
    int rc = open_variants(o, axis, v, n);
    if (rc == 0) {
        kz_status st = run_rounds(o, v, n);
        if (st != KZ_OK) {
            cli_report("bench", st);
        }
        rc = st == KZ_OK ? 0 : -1;
    }
    if (rc == 0) {
        for (int i = 0; i < n; i++) {
            summarize(&v[i], o->rounds);
        }
        (o->json ? print_json : print_text)(o, axis, v, n);
    }
    for (int i = 0; i < n; i++) {
        kz_session_free(v[i].session);
        kz_model_free(v[i].model);
        free(v[i].ms);
        free(v[i].codec_ms);
        free(v[i].lm_ms);
        kz_ids_free(v[i].text_ids);
        free(v[i].codes);
    }
    return rc == 0 ? 0 : 1;
}
