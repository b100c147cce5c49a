/*
 * cmd_quality.c - `kztts quality`: how close MODEL's language model is to REF's
 * (say a quantized model and its bf16 original), by teacher forcing.
 *
 *   REF    greedy, exactly N frames: the session observer keeps its raw talker
 *          logits [N, vocab] and code predictor logits [N, G - 1, cp vocab]; the
 *          frame callback keeps its codes [N, G] (G: the model's codebooks per frame)
 *   MODEL  the same request with REF's codes forced, so both models see the same
 *          history; each logit block MODEL produces is compared at once with REF's:
 *          squared error, REF's energy, argmax of every row
 *   report relative L2 error over all frames and of the worst frame, top-1 agreement
 *          of codebook 0 (talker) and of codebooks 1..G-1 (code predictor), REF's top-2
 *          margin of every row (quantiles, the largest one that flipped, agreement by
 *          margin band), wall time of
 *          both runs and their talker + code predictor time per frame (the session
 *          timers, sampling excluded); as text, or one JSON object with --json
 *
 * Argmax is taken on the raw logits (before the repetition penalty, EOS masking and
 * sampling). The codec never runs: the first audio chunk is all N frames, and the frame
 * callback cancels the synthesis when the last frame reaches it, before any decoding.
 * The observer, the forcing and the models' shapes are the experimental part of kztts.h
 * (kz_experimental_*).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "progress.h"
#include "stats.h"

#define MAX_FRAMES 1024 /* one audio chunk: kz_request.first_chunk_frames <= 1024 */
#define DEFAULT_TEXT "The quick brown fox jumps over the lazy dog, then it takes a long nap."

typedef struct quality_opts {
    const char *model, *ref, *isa, *speaker, *language, *token_ids;
    const char *kv_cache; /* MODEL's talker KV cache (REF keeps f32) */
    int64_t frames, threads;
    bool json, help, quiet;
} quality_opts;

/* Rows are also counted by REF's top-2 margin (its best logit minus its second best): an
 * argmax that flips where REF itself hardly decides says less than one that flips where REF
 * is sure. Band upper bounds in logits; the last band is open. */
#define N_BANDS 3
static const double BANDS[N_BANDS - 1] = {0.1, 1.0};

/* One stage's logits (talker or code predictor): REF's, and MODEL's against them. */
typedef struct stage {
    size_t rows, cols;       /* per frame: 1 x vocab (talker), G - 1 x cp vocab */
    float *ref;              /* [frames, rows, cols] REF's logits */
    int64_t n_seen;          /* frames observed in the current run */
    double sq_err, sq_ref;   /* sum (a - b)^2 and sum b^2 over all frames */
    double worst;            /* largest per-frame relative error */
    int64_t n_agree, n_rows; /* rows whose argmax agrees, rows compared */
    double *margins;         /* [frames * rows] REF's top-2 margin of each compared row */
    double margin_p10, margin_median; /* their quantiles (stage_finish), -1: none */
    int64_t band_rows[N_BANDS], band_agree[N_BANDS]; /* rows by REF's margin (BANDS) */
    double max_flipped; /* largest REF margin of a row whose argmax differs, -1: none */
} stage;

typedef struct quality {
    int64_t n_frames;
    size_t groups;
    bool storing;                  /* REF run: keep; MODEL run: compare */
    bool bad_observation;          /* set on the LM thread: an array of an unexpected shape */
    bool bad_frame;                /* set on the calling thread: a frame out of order, unforced */
    stage talker, cp;
    int32_t *codes;                /* [frames, groups] REF's codes */
    int64_t frames_in;             /* frames that reached the frame callback */
    double ref_ms, model_ms;       /* wall time of each run, prefill included */
    double ref_lm_ms, model_lm_ms; /* talker + code predictor per frame (no sampling) */
} quality;

static size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++) {
        best = x[i] > x[best] ? i : best;
    }
    return best;
}

/* x[best] minus the largest other element (0 for a single element). */
static double top2_margin(const float *x, size_t n, size_t best) {
    double second = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        second = i != best && x[i] > second ? x[i] : second;
    }
    return n > 1 ? (double)x[best] - second : 0.0;
}

static size_t band_of(double margin) {
    size_t b = 0;
    while (b < N_BANDS - 1 && margin >= BANDS[b]) {
        b++;
    }
    return b;
}

/* sqrt(err / energy), 0 when both are 0. */
static double rel_l2(double err, double energy) {
    return energy > 0 ? sqrt(err / energy) : err > 0 ? INFINITY : 0;
}

/* --- observing --------------------------------------------------------------- */

/* MODEL's logits of one frame `got` against REF's `ref`, both [rows, cols]. */
static void stage_compare(stage *st, const float *ref, const float *got) {
    double err = 0, energy = 0;
    for (size_t i = 0; i < st->rows * st->cols; i++) {
        double d = (double)got[i] - (double)ref[i];
        err += d * d;
        energy += (double)ref[i] * (double)ref[i];
    }
    st->sq_err += err;
    st->sq_ref += energy;
    double rel = rel_l2(err, energy);
    st->worst = rel > st->worst ? rel : st->worst;
    for (size_t r = 0; r < st->rows; r++) {
        const float *ref_row = ref + r * st->cols;
        const size_t best = argmax(ref_row, st->cols);
        const bool agree = argmax(got + r * st->cols, st->cols) == best;
        const double margin = top2_margin(ref_row, st->cols, best);
        const size_t band = band_of(margin);
        st->margins[st->n_rows] = margin;
        st->band_rows[band]++;
        st->band_agree[band] += agree;
        st->max_flipped = !agree && margin > st->max_flipped ? margin : st->max_flipped;
        st->n_agree += agree;
        st->n_rows++;
    }
}

/* Session observer (LM thread): keeps REF's logits, or compares MODEL's with them. */
static void on_observe(const char *name, int64_t frame, const float *data, size_t rows,
                       size_t cols, void *user) {
    quality *q = user;
    stage *st = strcmp(name, "talker_logits") == 0 ? &q->talker
                : strcmp(name, "cp_logits") == 0   ? &q->cp
                                                   : NULL;
    if (!st) {
        return;
    }
    if (frame < 0 || frame >= q->n_frames || frame != st->n_seen || rows != st->rows ||
        cols != st->cols) {
        q->bad_observation = true;
        return;
    }
    float *ref = st->ref + (size_t)frame * rows * cols;
    if (q->storing) {
        memcpy(ref, data, rows * cols * sizeof *ref);
    } else {
        stage_compare(st, ref, data);
    }
    st->n_seen++;
}

/* Frame callback (calling thread): keeps REF's codes, checks MODEL's were forced.
 * Returns false after the last frame, which cancels the synthesis before the codec. */
static bool on_frame(const int32_t *codes, int32_t n_codebooks, int64_t pos, void *user) {
    quality *q = user;
    if ((size_t)n_codebooks != q->groups || pos != q->frames_in || pos >= q->n_frames) {
        q->bad_frame = true;
        return false;
    }
    int32_t *dst = q->codes + (size_t)pos * q->groups;
    if (q->storing) {
        memcpy(dst, codes, q->groups * sizeof *dst);
    } else if (memcmp(dst, codes, q->groups * sizeof *dst) != 0) {
        q->bad_frame = true;
    }
    q->frames_in++;
    return q->frames_in < q->n_frames;
}

/* --- setup ------------------------------------------------------------------- */

/* Both models must produce logits of the same shapes from the same codes. */
static int check_configs(const kz_experimental_model_info *m,
                         const kz_experimental_model_info *ref) {
    if (!m->num_code_groups || !ref->num_code_groups) {
        fprintf(stderr, "kztts quality: %s is a codec-only model; both need a talker\n",
                m->num_code_groups ? "REF" : "MODEL");
        return -1;
    }
    const struct { const char *name; int32_t a, b; } keys[] = {
        {"talker vocab_size", m->talker_vocab_size, ref->talker_vocab_size},
        {"talker hidden_size", m->talker_hidden_size, ref->talker_hidden_size},
        {"num_code_groups", m->num_code_groups, ref->num_code_groups},
        {"code predictor vocab_size", m->cp_vocab_size, ref->cp_vocab_size},
        {"code predictor hidden_size", m->cp_hidden_size, ref->cp_hidden_size},
        {"code predictor steps", m->cp_steps, ref->cp_steps},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].a != keys[i].b) {
            fprintf(stderr, "kztts quality: MODEL and REF configs differ: %s %d vs %d\n",
                    keys[i].name, (int)keys[i].a, (int)keys[i].b);
            return -1;
        }
    }
    return 0;
}

static int quality_init(quality *q, const kz_experimental_model_info *ref, int64_t n_frames) {
    q->n_frames = n_frames;
    q->groups = (size_t)ref->num_code_groups;
    q->talker.rows = 1;
    q->talker.cols = (size_t)ref->talker_vocab_size;
    q->cp.rows = (size_t)ref->cp_steps;
    q->cp.cols = (size_t)ref->cp_vocab_size;
    size_t n = (size_t)n_frames;
    q->talker.ref = malloc(n * q->talker.rows * q->talker.cols * sizeof(float));
    q->cp.ref = malloc(n * q->cp.rows * q->cp.cols * sizeof(float));
    q->codes = malloc(n * q->groups * sizeof(int32_t));
    q->talker.margins = malloc(n * q->talker.rows * sizeof(double));
    q->cp.margins = malloc(n * q->cp.rows * sizeof(double));
    q->talker.max_flipped = q->cp.max_flipped = -1;
    if (!q->talker.ref || !q->cp.ref || !q->codes || !q->talker.margins || !q->cp.margins) {
        fprintf(stderr, "kztts quality: out of memory for %lld frames of logits\n",
                (long long)n_frames);
        return -1;
    }
    return 0;
}

static void quality_free(quality *q) {
    free(q->talker.ref);
    free(q->cp.ref);
    free(q->talker.margins);
    free(q->cp.margins);
    free(q->codes);
}

/* Greedy, exactly N frames, one utterance (frame indices 0..N-1), one audio chunk. */
static void fill_request(const quality_opts *o, const kz_model *ref, quality *q, kz_request *r) {
    kz_request_default_params(ref, r);
    bool has_speakers = kz_model_speaker_count(ref) > 0;
    r->speaker = o->speaker ? o->speaker : has_speakers ? kz_model_speaker_name(ref, 0) : NULL;
    r->language = o->language ? o->language : "auto";
    r->greedy = true;
    r->frames = (int32_t)o->frames;
    r->first_chunk_frames = (int32_t)o->frames;
    r->chunk_frames = (int32_t)o->frames;
    r->max_utterance_bytes = -1; // one utterance
    r->on_audio = cli_discard_audio;
    r->on_frame = on_frame;
    r->user = q;
}

/* --- measuring --------------------------------------------------------------- */

/* One synthesis with the observer on; REF's (storing) or MODEL's (forced to REF's codes).
 * Returns 0 or the exit status after printing the problem. */
static int run_one(kz_session *s, const kz_request *r, quality *q, bool storing,
                   const char *which, double *ms, double *lm_ms) {
    q->storing = storing;
    q->frames_in = q->talker.n_seen = q->cp.n_seen = 0;
    kz_status st = kz_experimental_session_observe(s, on_observe, q);
    if (st == KZ_OK && !storing) {
        st = kz_experimental_session_force_codes(s, q->codes, (size_t)q->n_frames);
    }
    kz_session_reset_timings(s);
    double t0 = stats_now_ms();
    st = st == KZ_OK ? kz_synthesize(s, r) : st;
    *ms = stats_now_ms() - t0;
    kz_timings t;
    kz_session_timings(s, &t);
    *lm_ms = (t.talker_ms + t.code_predictor_ms) / (double)q->n_frames;
    bool complete = q->frames_in == q->n_frames && q->talker.n_seen == q->n_frames &&
                    q->cp.n_seen == q->n_frames;
    if (st == KZ_STATUS_CANCELLED && complete) {
        st = KZ_OK; // the frame callback's normal end
    }
    const bool out_of_step = q->bad_frame || q->bad_observation;
    if (st != KZ_OK && !out_of_step) {
        cli_report("quality", st); // before the next kztts call replaces the message
    }
    kz_experimental_session_observe(s, NULL, NULL);
    kz_experimental_session_force_codes(s, NULL, 0);
    if (out_of_step) {
        fprintf(stderr, "kztts quality: %s: %s out of step after %lld frames\n", which,
                q->bad_frame ? "codes" : "logits", (long long)q->frames_in);
        return 1;
    }
    if (st != KZ_OK) {
        return cli_exit_status(st);
    }
    if (!complete) {
        fprintf(stderr, "kztts quality: %s: logits of %lld of %lld frames observed\n", which,
                (long long)q->talker.n_seen, (long long)q->n_frames);
        return 1;
    }
    return 0;
}

/* The margins' quantiles once MODEL has run (sorts them: their order is not used). */
static void stage_finish(stage *st) {
    st->margin_p10 = st->margin_median = -1;
    if (st->n_rows > 0) {
        st->margin_median = stats_median(st->margins, (int)st->n_rows);
        st->margin_p10 = st->margins[st->n_rows / 10];
    }
}

static void print_margins(const char *label, const stage *st) {
    printf("%-22s median %.4f, 10 %% of rows below %.4f; largest flipped ", label,
           st->margin_median, st->margin_p10);
    if (st->max_flipped < 0) {
        printf("none\n");
    } else {
        printf("%.4f\n", st->max_flipped);
    }
    printf("%-22s", "  agreement by margin");
    for (size_t b = 0; b < N_BANDS; b++) {
        const double pct =
            st->band_rows[b] ? 100.0 * (double)st->band_agree[b] / (double)st->band_rows[b] : 0;
        if (b == 0) {
            printf(" < %.1f: ", BANDS[0]);
        } else if (b < N_BANDS - 1) {
            printf(" | %.1f-%.1f: ", BANDS[b - 1], BANDS[b]);
        } else {
            printf(" | >= %.1f: ", BANDS[b - 1]);
        }
        printf("%.2f %% (%lld / %lld)", pct, (long long)st->band_agree[b],
               (long long)st->band_rows[b]);
    }
    printf("\n");
}

static void print_stage(const char *label, const stage *st) {
    printf("%-22s %12.4e %12.4e %9.2f %% (%lld / %lld)\n", label, rel_l2(st->sq_err, st->sq_ref),
           st->worst, 100.0 * (double)st->n_agree / (double)st->n_rows, (long long)st->n_agree,
           (long long)st->n_rows);
}

static int report_text(const quality_opts *o, const quality *q) {
    printf("model %s\nref   %s\n", o->model, o->ref);
    printf("%lld frames, MODEL teacher-forced on REF's greedy codes\n\n", (long long)q->n_frames);
    char cp[32];
    snprintf(cp, sizeof cp, "code predictor (1-%zu)", q->groups - 1);
    printf("%-22s %12s %12s %s\n", "", "rel. error", "worst frame", "  top-1 agreement");
    print_stage("talker (codebook 0)", &q->talker);
    print_stage(cp, &q->cp);
    printf("\nREF's top-2 margin (logits; a flip where REF hardly decides matters less):\n");
    print_margins("talker (codebook 0)", &q->talker);
    print_margins(cp, &q->cp);
    printf("\n%-22s %12s %12s\n", "time", "REF", "MODEL");
    printf("%-22s %12.1f %12.1f\n", "run, ms", q->ref_ms, q->model_ms);
    printf("%-22s %12.3f %12.3f\n", "LM, ms/frame", q->ref_lm_ms, q->model_lm_ms);
    return 0;
}

static cJSON *stage_json(const stage *st) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "rel_error", rel_l2(st->sq_err, st->sq_ref));
    cJSON_AddNumberToObject(j, "max_frame_rel_error", st->worst);
    cJSON_AddNumberToObject(j, "top1_agreement", (double)st->n_agree / (double)st->n_rows);
    cJSON_AddNumberToObject(j, "agree", (double)st->n_agree);
    cJSON_AddNumberToObject(j, "compared", (double)st->n_rows);
    cJSON_AddNumberToObject(j, "ref_margin_p10", st->margin_p10);
    cJSON_AddNumberToObject(j, "ref_margin_median", st->margin_median);
    if (st->max_flipped < 0) {
        cJSON_AddNullToObject(j, "max_flipped_margin");
    } else {
        cJSON_AddNumberToObject(j, "max_flipped_margin", st->max_flipped);
    }
    cJSON *bands = cJSON_AddArrayToObject(j, "agreement_by_margin");
    for (size_t b = 0; bands && b < N_BANDS; b++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "from", b ? BANDS[b - 1] : 0);
        if (b < N_BANDS - 1) {
            cJSON_AddNumberToObject(o, "below", BANDS[b]);
        } else {
            cJSON_AddNullToObject(o, "below");
        }
        cJSON_AddNumberToObject(o, "agree", (double)st->band_agree[b]);
        cJSON_AddNumberToObject(o, "compared", (double)st->band_rows[b]);
        cJSON_AddItemToArray(bands, o);
    }
    return j;
}

static int report_json(const quality_opts *o, const quality *q) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "ref", o->ref);
    cJSON_AddNumberToObject(j, "frames", (double)q->n_frames);
    cJSON_AddItemToObject(j, "talker", stage_json(&q->talker));
    cJSON_AddItemToObject(j, "code_predictor", stage_json(&q->cp));
    cJSON_AddNumberToObject(j, "ref_ms", q->ref_ms);
    cJSON_AddNumberToObject(j, "model_ms", q->model_ms);
    cJSON_AddNumberToObject(j, "ref_lm_ms_per_frame", q->ref_lm_ms);
    cJSON_AddNumberToObject(j, "model_lm_ms_per_frame", q->model_lm_ms);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "kztts quality: out of memory\n");
        return 1;
    }
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

/* REF run, MODEL run, report. Returns the exit status. */
static int measure(const quality_opts *o, kz_model *m, kz_session *ms, kz_model *ref,
                   kz_session *rs, const char *text, const int32_t *ids, size_t n_ids) {
    quality q = {0};
    kz_experimental_model_info mi, ri;
    kz_experimental_model_get_info(m, &mi);
    kz_experimental_model_get_info(ref, &ri);
    if (check_configs(&mi, &ri) != 0 || quality_init(&q, &ri, o->frames) != 0) {
        quality_free(&q);
        return 1;
    }
    kz_request r;
    fill_request(o, ref, &q, &r);
    r.text = text;
    r.token_ids = ids;
    r.n_token_ids = n_ids;
    int rc = run_one(rs, &r, &q, true, "REF", &q.ref_ms, &q.ref_lm_ms);
    rc = rc ? rc : run_one(ms, &r, &q, false, "MODEL", &q.model_ms, &q.model_lm_ms);
    if (rc == 0) {
        stage_finish(&q.talker);
        stage_finish(&q.cp);
        rc = o->json ? report_json(o, &q) : report_text(o, &q);
    }
    quality_free(&q);
    return rc;
}

/* --- command line ------------------------------------------------------------ */

/* The text to speak: --token-ids, TEXT, stdin for "-", else DEFAULT_TEXT.
 * Returns 0, or the exit status after printing the problem. */
static int get_text(const quality_opts *o, const char *arg, char **owned, int32_t **ids,
                    size_t *n_ids, const char **text) {
    *owned = NULL;
    *ids = NULL;
    *n_ids = 0;
    *text = NULL;
    if (o->token_ids && arg) {
        fprintf(stderr, "kztts quality: give either TEXT or --token-ids, not both\n");
        return 2;
    }
    if (o->token_ids) {
        return cli_parse_token_ids("quality", o->token_ids, ids, n_ids) == 0 ? 0 : 2;
    }
    if (arg && strcmp(arg, "-") == 0) {
        *text = *owned = cli_read_stdin("quality");
        return *owned ? 0 : 1;
    }
    *text = arg ? arg : DEFAULT_TEXT;
    return 0;
}

static int run(const quality_opts *o, const char *arg) {
    char *owned;
    int32_t *ids;
    size_t n_ids;
    const char *text;
    int rc = get_text(o, arg, &owned, &ids, &n_ids, &text);
    if (rc != 0) {
        return rc;
    }
    kz_model *ref, *m;
    kz_session *rs, *ms;
    rc = 1;
    if (cli_open("quality", o->ref, o->isa, (int)o->threads, &ref, &rs) == 0) {
        const cli_engine e = {.isa = o->isa, .kv_cache = o->kv_cache, .threads = (int)o->threads};
        if (cli_open_engine("quality", o->model, &e, &m, &ms) == 0) {
            rc = measure(o, m, ms, ref, rs, text, ids, n_ids);
            kz_session_free(ms);
            kz_model_free(m);
        }
        kz_session_free(rs);
        kz_model_free(ref);
    }
    free(ids);
    free(owned);
    return rc;
}

int cmd_quality(int argc, char **argv) {
    quality_opts o = {.isa = "auto", .frames = 100};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL model to measure (e.g. quantized): directory, .gguf file or repo id"),
        ARG_OPT_STRING("--ref", NULL, &o.ref, "REF   reference model (e.g. the bf16 original)"),
        ARG_OPT_STRING("--speaker", "-s", &o.speaker, "NAME  CustomVoice speaker (default: REF's first)"),
        ARG_OPT_STRING("--language", "-l", &o.language, "LANG  auto (default) or a language name"),
        ARG_OPT_INT("--frames", NULL, &o.frames, 1, MAX_FRAMES, "N     frames to compare, at most 1024 (default 100)"),
        ARG_OPT_STRING("--token-ids", NULL, &o.token_ids, "IDS   comma-separated ids of the text instead of TEXT"),
        ARG_OPT_FLAG("--json", NULL, &o.json, "print one JSON object"),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_CHOICE("--kv-cache", NULL, &o.kv_cache, CLI_KV_CACHE_NAMES, "T     MODEL's talker KV cache: f32 (default) or f16 (REF keeps f32)"),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *synopsis = "-m MODEL --ref REF [options] [TEXT | - | --token-ids IDS]";
    const char *pos[1] = {NULL};
    int n_pos;
    if (args_parse("quality", specs, n_specs, argc, argv, pos, 1, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("quality", synopsis, specs, n_specs);
        return 0;
    }
    if (!o.model || !o.ref) {
        fprintf(stderr,
                "kztts quality: give the model to measure (-m) and the reference (--ref)\n");
        return 2;
    }
    if (o.quiet) {
        progress_quiet();
    }
    return run(&o, n_pos ? pos[0] : NULL);
}
