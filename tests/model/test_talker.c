/*
 * test_talker.c - talker + code predictor against the PyTorch reference
 * (tools/reference/talker.py), greedy, from fixed token ids.
 *
 * argv[1] is a manifest written by make_fixture.py, one case per line:
 *   name|model_dir|speaker|language|layout|frames|text_ids|instruct_ids|golden|kv_cache
 * (ids comma-separated, "-" for none; kv_cache f32 or f16, the talker's KV cache of both
 * the reference and the engine: with f16 both round each key and value to binary16). Per case: resolve the request (speaker,
 * language, layout), inject the instruction ids the reference used (full
 * "<|im_start|>user\n...<|im_end|>\n" ids: the tiny checkpoints' stand-in tokenizer
 * cannot spell an instruction), run greedy synthesis of `frames` frames, and require
 *   - prompt rows within PROMPT_TOL (relative RMS),
 *   - first-frame talker logits and the 15 code-predictor logits within LOGIT_TOL,
 *   - codes identical to the reference for every frame (a mismatch is reported
 *     with its frame, codebook and the reference logit margin).
 * The text ids are wrapped with the role ids the model's files state (config.json,
 * the tokenizer's "\n"), the reference's --text-ids / --text do the same, so the
 * remapped checkpoint's cases check that no released id is assumed.
 * Then the case again on the same session: its prompt prefix (instruction, role and
 * tag rows) comes from the session's prompt cache, and the codes and observed logits
 * are bit-identical to the first run's; for the first case also: another text layout
 * still finds the prefix, another speaker does not, a session without the cache
 * gives the same codes, and kz_session_prepare on a new session (no text) makes its
 * first run a hit with the same codes (and is refused without a cache).
 * Then: same seed twice -> same codes; 1 vs 2 threads -> same codes and audio
 * (sampling); a different seed -> different codes.
 */
#include <stdlib.h>

#include "io/safetensors.h"
#include "kztts.h"
#include "synth/request.h"
#include "test.h"

/* fp32 engine vs fp32 reference on the same bf16 weights: summation order only. */
#define PROMPT_TOL 1e-5
#define LOGIT_TOL 1e-4

typedef struct observed {
    float *prefill, *talker0, *cp0;
    size_t prefill_n, talker0_n, cp0_n;
} observed;

static void keep(float **dst, size_t *n, const float *src, size_t count) {
    free(*dst);
    *dst = malloc(count * sizeof(float));
    memcpy(*dst, src, count * sizeof(float));
    *n = count;
}

static void on_observe(const char *name, int64_t frame, const float *data, size_t rows,
                       size_t cols, void *user) {
    observed *o = user;
    if (strcmp(name, "prefill_rows") == 0) {
        keep(&o->prefill, &o->prefill_n, data, rows * cols);
    } else if (strcmp(name, "talker_logits") == 0 && frame == 0) {
        keep(&o->talker0, &o->talker0_n, data, rows * cols);
    } else if (strcmp(name, "cp_logits") == 0 && frame == 0) {
        keep(&o->cp0, &o->cp0_n, data, rows * cols);
    }
}

#define MAX_GROUPS 64 /* codebooks per frame this test keeps (the models have 16 or 8) */

typedef struct codes_buf {
    int32_t codes[4096 * MAX_GROUPS];
    int64_t n_frames;
    int32_t groups;    /* codebooks per frame, as the frame callback reported */
} codes_buf;

static bool on_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    codes_buf *b = user;
    if (pos < 4096 && n > 0 && n <= MAX_GROUPS) {
        memcpy(b->codes + pos * n, codes, (size_t)n * sizeof(int32_t));
        b->n_frames = pos + 1;
        b->groups = n;
    }
    return true;
}

static bool discard_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm; (void)n; (void)pos; (void)last; (void)user;
    return true;
}

static size_t parse_ids(const char *s, int32_t *out, size_t max) {
    size_t n = 0;
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    for (const char *p = s; *p && n < max;) {
        char *end;
        out[n++] = (int32_t)strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) {
            break;
        }
    }
    return n;
}

static double rel_err(const float *x, const kz_st_tensor *t, size_t n) {
    if (!t || t->n_elements != n) {
        return 1e9;
    }
    float *r = malloc(n * sizeof *r);
    kz_tensor_to_f32(t, r);
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)x[i] - r[i]) * ((double)x[i] - r[i]);
        s += (double)r[i] * r[i];
    }
    free(r);
    return sqrt(e / (s > 0 ? s : 1));
}

typedef struct lm_case {
    char name[64], model[512], speaker[64], language[64], layout[32], golden[512], kv[8];
    int frames;
    int32_t text[512], instruct[512];
    size_t n_text, n_instruct;
} lm_case;

static int read_case(FILE *f, lm_case *c) {
    char line[8192], text[4096], instr[4096];
    if (!fgets(line, sizeof line, f)) {
        return 0;
    }
    memset(c, 0, sizeof *c);
    int n = sscanf(line,
                   "%63[^|]|%511[^|]|%63[^|]|%63[^|]|%31[^|]|%d|%4095[^|]|%4095[^|]|%511[^|]|%7[^|\n]",
                   c->name, c->model, c->speaker, c->language, c->layout, &c->frames, text, instr,
                   c->golden, c->kv);
    const bool ok = n == 10 && (strcmp(c->kv, "f32") == 0 || strcmp(c->kv, "f16") == 0);
    CHECK_MSG(ok, "bad manifest line: %s", line);
    c->n_text = parse_ids(text, c->text, 512);
    c->n_instruct = parse_ids(instr, c->instruct, 512);
    return ok;
}

static void fill_request(const kz_model *m, const lm_case *c, kz_request *r, uint64_t seed,
                         codes_buf *codes) {
    kz_request_default_params(m, r);
    r->token_ids = c->text;
    r->n_token_ids = c->n_text;
    r->speaker = strcmp(c->speaker, "-") ? c->speaker : NULL;
    r->language = c->language;
    r->layout = strcmp(c->layout, "streaming") == 0 ? KZ_LAYOUT_STREAMING : KZ_LAYOUT_NON_STREAMING;
    r->frames = c->frames;
    r->seed = seed;
    r->on_frame = on_frame;
    r->user = codes;
}

/* Runs the case greedily through the internal plan (to inject instruction ids). */
static kz_status run_greedy(kz_session *s, const kz_model *m, const lm_case *c, codes_buf *codes) {
    kz_request r;
    fill_request(m, c, &r, 0, codes);
    r.greedy = true;
    kz_plan plan;
    kz_plan_ids ids;
    kz_status st = kz_request_resolve(m, &r, &plan, &ids);
    if (st != KZ_OK) {
        return st;
    }
    if (c->n_instruct && strcmp(m->cfg.tts_model_size, "0b6") != 0) {
        plan.prompt.instruct_ids = c->instruct;
        plan.prompt.n_instruct = c->n_instruct;
    }
    st = kz_synth_run(s, &plan, discard_audio, NULL);
    kz_plan_ids_free(&ids);
    return st;
}

static void report_mismatch(const kz_st_file *g, const codes_buf *got, const int32_t *ref,
                            int frames, const char *name) {
    const int n = got->groups;
    for (int t = 0; t < frames; t++) {
        for (int q = 0; q < n; q++) {
            if (got->codes[t * n + q] != ref[t * n + q]) {
                CHECK_MSG(0, "%s: frame %d codebook %d: engine %d, reference %d", name, t, q,
                          got->codes[t * n + q], ref[t * n + q]);
                (void)g;
                return;
            }
        }
    }
}

static void compare_case(const lm_case *c, const codes_buf *got, const observed *o,
                         int32_t groups) {
    kz_st_file *g = NULL;
    CHECK_MSG(kz_st_open(c->golden, &g) == KZ_OK, "%s", kz_last_error());
    if (!g) {
        return;
    }
    double ep = rel_err(o->prefill, kz_st_find(g, "prefill_embeds"), o->prefill_n);
    double et = rel_err(o->talker0, kz_st_find(g, "talker_logits_0"), o->talker0_n);
    double ec = rel_err(o->cp0, kz_st_find(g, "cp_logits_0"), o->cp0_n);
    printf("  %-28s prompt %.2e  talker logits %.2e  cp logits %.2e\n", c->name, ep, et, ec);
    CHECK_MSG(ep <= PROMPT_TOL, "%s prompt rows rel %.3g", c->name, ep);
    CHECK_MSG(et <= LOGIT_TOL, "%s talker logits rel %.3g", c->name, et);
    CHECK_MSG(ec <= LOGIT_TOL, "%s cp logits rel %.3g", c->name, ec);
    const kz_st_tensor *t = kz_st_find(g, "codes");
    const size_t n_codes = (size_t)c->frames * (size_t)groups;
    CHECK(t && t->n_elements == n_codes && got->n_frames == c->frames && got->groups == groups);
    if (t && t->n_elements == n_codes && got->groups == groups) {
        int32_t *ref = malloc(t->n_bytes);
        memcpy(ref, t->data, t->n_bytes);
        bool same = memcmp(ref, got->codes, t->n_bytes) == 0;
        CHECK_MSG(same, "%s: codes differ", c->name);
        if (!same) {
            report_mismatch(g, got, ref, c->frames, c->name);
        }
        free(ref);
    }
    kz_st_close(g);
}

static void free_observed(observed *o) {
    free(o->prefill);
    free(o->talker0);
    free(o->cp0);
    memset(o, 0, sizeof *o);
}

static bool same_floats(const float *a, size_t na, const float *b, size_t nb) {
    return a && b && na == nb && memcmp(a, b, na * sizeof(float)) == 0;
}

/* Runs the case (greedy) with timings reset; *cached = prompt rows the cache gave. */
static kz_status run_counted(kz_session *s, const kz_model *m, const lm_case *c, codes_buf *codes,
                             int64_t *computed, int64_t *cached) {
    kz_session_reset_timings(s);
    memset(codes, 0, sizeof *codes);
    kz_status st = run_greedy(s, m, c, codes);
    kz_timings t;
    kz_session_timings(s, &t);
    *computed = t.prompt_tokens;
    *cached = t.prompt_tokens_cached;
    return st;
}

/* The case again on session s, which just ran it (cold: `cold`, `o_cold`, `rows` prompt
 * rows): the prefix must come from the cache and change nothing. */
static void test_prompt_cache_hit(kz_session *s, const kz_model *m, const lm_case *c,
                                  const codes_buf *cold, const observed *o_cold, int64_t rows) {
    static codes_buf warm;
    observed o = {0};
    void *prev = s->observe_user;
    s->observe_user = &o;
    int64_t computed, cached;
    CHECK_MSG(run_counted(s, m, c, &warm, &computed, &cached) == KZ_OK, "%s", kz_last_error());
    CHECK_MSG(cached >= 6 && computed + cached == rows && computed >= 1,
              "%s again: %lld prompt rows cached + %lld computed, want >= 6 + the rest of %lld",
              c->name, (long long)cached, (long long)computed, (long long)rows);
    CHECK_MSG(memcmp(warm.codes, cold->codes, sizeof warm.codes) == 0 &&
                  warm.n_frames == cold->n_frames,
              "%s: codes differ with the prompt prefix cached", c->name);
    CHECK_MSG(same_floats(o.talker0, o.talker0_n, o_cold->talker0, o_cold->talker0_n) &&
                  same_floats(o.cp0, o.cp0_n, o_cold->cp0, o_cold->cp0_n),
              "%s: first-frame logits differ with the prompt prefix cached", c->name);
    free_observed(&o);
    s->observe_user = prev;
}

/* First case only: what else hits or misses, and the cache switched off. */
static void test_prompt_cache_keys(kz_session *s, const kz_model *m, const lm_case *c,
                                   const codes_buf *cold) {
    static codes_buf other;
    int64_t computed, cached;
    kz_experimental_observe_fn observe = s->observe;
    s->observe = NULL;
    lm_case v = *c;
    snprintf(v.layout, sizeof v.layout, "%s",
             strcmp(c->layout, "streaming") == 0 ? "non_streaming" : "streaming");
    CHECK(run_counted(s, m, &v, &other, &computed, &cached) == KZ_OK);
    CHECK_MSG(cached >= 6, "%s, other text layout: the prefix is not reused", c->name);
    v = *c;
    for (int32_t i = 0; i < kz_model_speaker_count(m); i++) {
        const char *name = kz_model_speaker_name(m, i);
        if (strcmp(name, c->speaker) != 0) {
            snprintf(v.speaker, sizeof v.speaker, "%s", name);
            break;
        }
    }
    CHECK_MSG(strcmp(v.speaker, c->speaker) != 0, "%s: the model has one speaker", c->name);
    CHECK(run_counted(s, m, &v, &other, &computed, &cached) == KZ_OK);
    CHECK_MSG(cached == 0, "%s, speaker %s: reused the prefix of %s", c->name, v.speaker,
              c->speaker);
    s->observe = observe;
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = 2;
    sp.prompt_cache_mb = -1;
    kz_session *off;
    CHECK(kz_session_new(m, &sp, &off) == KZ_OK);
    for (int run = 0; run < 2; run++) {
        CHECK(run_counted(off, m, c, &other, &computed, &cached) == KZ_OK);
        CHECK_MSG(cached == 0, "%s: prompt_cache_mb -1 still caches", c->name);
        CHECK_MSG(memcmp(other.codes, cold->codes, sizeof other.codes) == 0,
                  "%s: codes differ without the prompt cache", c->name);
    }
    kz_request req;
    fill_request(m, c, &req, 0, NULL);
    req.token_ids = NULL;
    req.n_token_ids = 0;
    CHECK(kz_session_prepare(off, &req) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "no prompt cache");
    kz_session_free(off);
}

/* kz_session_prepare with the case's voice and no text: the first synthesis on the
 * new session takes the prefix from the cache and gives the cold run's codes. */
static void test_prepare(const kz_model *m, const lm_case *c, const codes_buf *cold) {
    static codes_buf got;
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = 2;
    kz_session *s;
    CHECK(kz_session_new(m, &sp, &s) == KZ_OK);
    kz_request req;
    fill_request(m, c, &req, 0, NULL);
    req.token_ids = NULL;
    req.n_token_ids = 0;
    CHECK_MSG(kz_session_prepare(s, &req) == KZ_OK, "prepare: %s", kz_last_error());
    CHECK(kz_session_prepare(s, &req) == KZ_OK); // again: nothing to do
    req.speaker = "nobody";
    CHECK(kz_session_prepare(s, &req) == KZ_STATUS_INVALID_ARGUMENT);
    int64_t computed, cached;
    CHECK(run_counted(s, m, c, &got, &computed, &cached) == KZ_OK);
    CHECK_MSG(cached >= 6, "%s: the prepared prefix was not used (%lld rows cached)", c->name,
              (long long)cached);
    CHECK_MSG(memcmp(got.codes, cold->codes, sizeof got.codes) == 0,
              "%s: codes differ after kz_session_prepare", c->name);
    kz_session_free(s);
}

static kz_status synth_sampled(const kz_model *m, const lm_case *c, int threads, uint64_t seed,
                               codes_buf *codes, kz_audio *audio) {
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = threads;
    kz_session *s;
    kz_status st = kz_session_new(m, &sp, &s);
    if (st != KZ_OK) {
        return st;
    }
    kz_request r;
    fill_request(m, c, &r, seed, codes);
    st = kz_synthesize_all(s, &r, audio);
    kz_session_free(s);
    return st;
}

static void test_seeds(const kz_model *m, const lm_case *c) {
    static codes_buf a, b, d;
    kz_audio wa, wb, wd;
    CHECK(synth_sampled(m, c, 1, 7, &a, &wa) == KZ_OK);
    CHECK(synth_sampled(m, c, 2, 7, &b, &wb) == KZ_OK);
    CHECK(synth_sampled(m, c, 2, 8, &d, &wd) == KZ_OK);
    CHECK_MSG(a.n_frames == b.n_frames && memcmp(a.codes, b.codes, sizeof a.codes) == 0,
              "same seed, 1 vs 2 threads: codes differ");
    CHECK_MSG(wa.n_samples == wb.n_samples &&
                  memcmp(wa.samples, wb.samples, wa.n_samples * sizeof(float)) == 0,
              "same seed, 1 vs 2 threads: audio differs");
    CHECK_MSG(memcmp(a.codes, d.codes, sizeof a.codes) != 0, "different seeds give the same codes");
    CHECK_EQ_INT(wa.n_samples, (size_t)c->frames * (size_t)kz_model_samples_per_frame(m));
    kz_audio_free(&wa);
    kz_audio_free(&wb);
    kz_audio_free(&wd);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_talker MANIFEST\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    CHECK_MSG(f != NULL, "cannot open %s", argv[1]);
    lm_case c;
    static codes_buf codes;
    int n_cases = 0;
    while (f && read_case(f, &c)) {
        kz_model *m;
        kz_model_params mp;
        kz_model_default_params(&mp);
        mp.kv_cache = strcmp(c.kv, "f16") == 0 ? KZ_KV_CACHE_F16 : KZ_KV_CACHE_F32;
        kz_status st = kz_model_load(c.model, &mp, &m);
        CHECK_MSG(st == KZ_OK, "%s: %s", c.model, kz_last_error());
        if (st != KZ_OK) {
            continue;
        }
        kz_session_params sp;
        kz_session_default_params(&sp);
        sp.n_threads = 2;
        kz_session *s;
        CHECK(kz_session_new(m, &sp, &s) == KZ_OK);
        observed o = {0};
        s->observe = on_observe;
        s->observe_user = &o;
        int64_t computed, cached;
        st = run_counted(s, m, &c, &codes, &computed, &cached);
        CHECK_MSG(st == KZ_OK, "%s: %s", c.name, kz_last_error());
        CHECK_MSG(cached == 0, "%s: a new session had a cached prompt", c.name);
        if (st == KZ_OK) {
            compare_case(&c, &codes, &o, kz_model_num_codebooks(m));
            test_prompt_cache_hit(s, m, &c, &codes, &o, computed);
        }
        if (n_cases++ == 0) {
            test_prompt_cache_keys(s, m, &c, &codes);
            test_prepare(m, &c, &codes);
            test_seeds(m, &c);
        }
        free_observed(&o);
        kz_session_free(s);
        kz_model_free(m);
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(n_cases >= 4, "only %d cases in the manifest", n_cases);
    return test_main_result("test_talker");
}
