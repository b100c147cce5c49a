/*
 * test_clone.c - synthesis with a cloned voice on the tiny Base checkpoints against the
 * PyTorch reference (tools/reference/talker.py with --speaker-embed / --ref-codes /
 * --ref-text, generate.py's official ICL audio).
 *
 * argv[1] is GOLDEN/base_cases.txt (make_fixture.py), one case per line:
 *   name|model_dir|xvec or icl|layout|language|frames|text|ref_text|golden
 * The voice is a struct kz_voice filled from the golden (its x-vector, reference codes)
 * and the transcript, as the voice API makes it, tagged with the case model's rate and
 * encoder fingerprint so that kz_voice_check takes it for that model's. Per case, greedy, `frames` frames:
 *   - prompt rows within PROMPT_TOL (relative RMS), first-frame talker and code predictor
 *     logits within LOGIT_TOL, codes identical to the reference;
 *   - ICL: the audio has the official length (the cut, one sample more for the 53 + 30
 *     frames pair) and is within the codec tests' WAV_SNR_DB of the reference's
 *     decode-then-cut; streamed in fixed and adaptive chunks it is bit-identical to
 *     kz_synthesize_all (x-vector voices too);
 *   - the same request again on the session: the prompt prefix comes from the prompt
 *     cache, the reference is not decoded again (codec frames = the new frames only), and
 *     codes and audio are bit-identical; a copy of the voice at another address hits too.
 * x-vector voices in the streaming layout: streamed text input (text_pull) gives the same
 * codes. The 0.6B streaming ICL case: text streamed in 1-3 byte pieces gives the codes and
 * audio of the text given at once, with a transcript longer than the codec column Lc, and
 * with a short one for a text that leaves X shorter than Lc (the prompt waits for the end)
 * and one that does not (the prompt is built before the last piece). First ICL case
 * also: kz_session_prepare warms both caches; another x-vector misses the prompt cache,
 * other reference codes re-decode the reference and the first voice's context is still
 * kept; kz_session_clear_prompt_cache forgets both; with only a frame cap (length unknown
 * in advance) the audio starts at the new speech. Per model: the
 * context of a reference longer than kz_codec_back_frames (the vocoder skipped over its
 * start) is the codec state of decoding the whole reference, bit for bit. Then the refusals
 * (no voice, a speaker, an instruction, a voice on CustomVoice, a voice of the wrong
 * size or with codes out of range, empty streamed text with an ICL voice) and the cut rule.
 */
#include <stdlib.h>

#include "io/safetensors.h"
#include "kztts.h"
#include "synth/request.h"
#include "synth/voice.h"
#include "synth/voice_context.h"
#include "test.h"

/* fp32 engine vs fp32 reference: summation order only (as test_talker.c). */
#define PROMPT_TOL 1e-5
#define LOGIT_TOL 1e-4
/* The ICL waveform against the reference's decode-then-cut (as test_codec_decoder.c). */
#define WAV_SNR_DB 60.0
#define MAX_GROUPS 64

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

static void on_observe(const char *name, int64_t frame, const float *data, size_t rows, size_t cols,
                       void *user) {
    observed *o = user;
    if (strcmp(name, "prefill_rows") == 0) {
        keep(&o->prefill, &o->prefill_n, data, rows * cols);
    } else if (strcmp(name, "talker_logits") == 0 && frame == 0) {
        keep(&o->talker0, &o->talker0_n, data, rows * cols);
    } else if (strcmp(name, "cp_logits") == 0 && frame == 0) {
        keep(&o->cp0, &o->cp0_n, data, rows * cols);
    }
}

static void free_observed(observed *o) {
    free(o->prefill);
    free(o->talker0);
    free(o->cp0);
    memset(o, 0, sizeof *o);
}

typedef struct codes_buf {
    int32_t codes[1024 * MAX_GROUPS];
    int64_t n_frames;
    int32_t groups;
} codes_buf;

static bool on_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    codes_buf *b = user;
    if (pos < 1024 && n > 0 && n <= MAX_GROUPS) {
        memcpy(b->codes + pos * n, codes, (size_t)n * sizeof(int32_t));
        b->n_frames = pos + 1;
        b->groups = n;
    }
    return true;
}

/* Streamed audio collected chunk by chunk. */
typedef struct stream_buf {
    float *samples;
    size_t n, cap;
    int n_calls, n_last;
} stream_buf;

static bool on_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pos;
    stream_buf *b = user;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->samples = realloc(b->samples, b->cap * sizeof(float));
    }
    memcpy(b->samples + b->n, pcm, n * sizeof(float));
    b->n += n;
    b->n_calls++;
    b->n_last += last;
    return true;
}

typedef struct clone_case {
    char name[64], model[512], mode[16], layout[32], language[32], golden[512];
    char text[256], ref_text[256];
    int frames;
} clone_case;

static int read_case(FILE *f, clone_case *c) {
    char line[4096];
    if (!fgets(line, sizeof line, f)) {
        return 0;
    }
    memset(c, 0, sizeof *c);
    int n = sscanf(line, "%63[^|]|%511[^|]|%15[^|]|%31[^|]|%31[^|]|%d|%255[^|]|%255[^|]|%511[^|\n]",
                   c->name, c->model, c->mode, c->layout, c->language, &c->frames, c->text,
                   c->ref_text, c->golden);
    CHECK_MSG(n == 9, "bad manifest line: %s", line);
    return n == 9;
}

static float *tensor_f32(const kz_st_file *g, const char *name, size_t *n) {
    const kz_st_tensor *t = kz_st_find(g, name);
    if (!t) {
        *n = 0;
        return NULL;
    }
    float *x = malloc(t->n_elements * sizeof(float));
    kz_tensor_to_f32(t, x);
    *n = t->n_elements;
    return x;
}

static double rel_err(const float *x, size_t nx, const float *r, size_t nr) {
    if (!x || !r || nx != nr) {
        return 1e9;
    }
    double e = 0, s = 0;
    for (size_t i = 0; i < nr; i++) {
        e += ((double)x[i] - r[i]) * ((double)x[i] - r[i]);
        s += (double)r[i] * r[i];
    }
    return sqrt(e / (s > 0 ? s : 1));
}

/* A voice as the voice API makes it, from the golden's x-vector and reference codes. */
static bool voice_from_golden(const kz_st_file *g, const clone_case *c, struct kz_voice *v) {
    memset(v, 0, sizeof *v);
    size_t n;
    v->format_version = 1;
    snprintf(v->model_type, sizeof v->model_type, "base");
    v->sample_rate = 24000;
    v->ref_seconds = 1.0;
    v->xvector = tensor_f32(g, "speaker_embedding", &n);
    v->enc_dim = (int32_t)n;
    v->ref_text = strdup(strcmp(c->mode, "icl") == 0 ? c->ref_text : "");
    if (strcmp(c->mode, "icl") != 0) {
        return v->xvector != NULL;
    }
    const kz_st_tensor *t = kz_st_find(g, "ref_codes");
    if (!t || t->n_dims != 2) {
        return false;
    }
    v->icl = true;
    v->n_ref_frames = (int32_t)t->shape[0];
    v->n_codebooks = (int32_t)t->shape[1];
    v->ref_codes = malloc(t->n_bytes);
    memcpy(v->ref_codes, t->data, t->n_bytes);
    return v->xvector != NULL;
}

static void voice_clear(struct kz_voice *v) {
    free(v->xvector);
    free(v->ref_codes);
    free(v->ref_text);
    memset(v, 0, sizeof *v);
}

static void voice_copy(const struct kz_voice *src, struct kz_voice *dst) {
    *dst = *src;
    dst->xvector = malloc((size_t)src->enc_dim * sizeof(float));
    memcpy(dst->xvector, src->xvector, (size_t)src->enc_dim * sizeof(float));
    size_t nc = (size_t)src->n_ref_frames * (size_t)src->n_codebooks;
    dst->ref_codes = nc ? malloc(nc * sizeof(int32_t)) : NULL;
    if (nc) {
        memcpy(dst->ref_codes, src->ref_codes, nc * sizeof(int32_t));
    }
    dst->ref_text = strdup(src->ref_text);
}

static void fill_request(const kz_model *m, const clone_case *c, const kz_voice *v, kz_request *r,
                         codes_buf *codes) {
    kz_request_default_params(m, r);
    r->text = c->text;
    r->voice = v;
    r->language = c->language;
    r->layout = strcmp(c->layout, "streaming") == 0 ? KZ_LAYOUT_STREAMING : KZ_LAYOUT_NON_STREAMING;
    r->frames = c->frames;
    r->greedy = true;
    r->on_frame = codes ? on_frame : NULL;
    r->user = codes;
}

typedef struct run_out {
    kz_audio audio;
    int64_t prompt_computed, prompt_cached, codec_frames;
} run_out;

static kz_status run_all(kz_session *s, const kz_request *r, codes_buf *codes, run_out *out) {
    kz_session_reset_timings(s);
    memset(codes, 0, sizeof *codes);
    kz_status st = kz_synthesize_all(s, r, &out->audio);
    kz_timings t;
    kz_session_timings(s, &t);
    out->prompt_computed = t.prompt_tokens;
    out->prompt_cached = t.prompt_tokens_cached;
    out->codec_frames = t.codec_frames;
    return st;
}

static bool same_audio(const kz_audio *a, const float *b, size_t nb) {
    return a->n_samples == nb && memcmp(a->samples, b, nb * sizeof(float)) == 0;
}

static void compare_reference(const clone_case *c, const kz_st_file *g, const codes_buf *got,
                              const observed *o, const kz_audio *audio, const kz_model *m) {
    size_t n;
    float *r = tensor_f32(g, "prefill_embeds", &n);
    double ep = rel_err(o->prefill, o->prefill_n, r, n);
    free(r);
    r = tensor_f32(g, "talker_logits_0", &n);
    double et = rel_err(o->talker0, o->talker0_n, r, n);
    free(r);
    r = tensor_f32(g, "cp_logits_0", &n);
    double ec = rel_err(o->cp0, o->cp0_n, r, n);
    free(r);
    printf("  %-26s prompt %.2e (%zu rows)  talker logits %.2e  cp logits %.2e\n", c->name, ep,
           o->prefill_n / (size_t)m->cfg.talker.hidden_size, et, ec);
    CHECK_MSG(ep <= PROMPT_TOL, "%s prompt rows rel %.3g", c->name, ep);
    CHECK_MSG(et <= LOGIT_TOL, "%s talker logits rel %.3g", c->name, et);
    CHECK_MSG(ec <= LOGIT_TOL, "%s cp logits rel %.3g", c->name, ec);
    const kz_st_tensor *t = kz_st_find(g, "codes");
    const int32_t groups = kz_model_num_codebooks(m);
    bool sized = t && t->n_elements == (size_t)c->frames * (size_t)groups &&
                 got->n_frames == c->frames && got->groups == groups;
    CHECK_MSG(sized, "%s: %lld frames of %d codes", c->name, (long long)got->n_frames, got->groups);
    if (sized) {
        CHECK_MSG(memcmp(t->data, got->codes, t->n_bytes) == 0, "%s: codes differ", c->name);
    }
    const size_t spf = (size_t)kz_model_samples_per_frame(m);
    if (strcmp(c->mode, "icl") != 0) {
        CHECK_EQ_INT(audio->n_samples, (size_t)c->frames * spf);
        return;
    }
    float *wav = tensor_f32(g, "icl_audio", &n);
    CHECK_MSG(wav && audio->n_samples == n, "%s: %zu samples, the official cut leaves %zu", c->name,
              audio->n_samples, n);
    if (wav && audio->n_samples == n) {
        double err = 0, ref = 0;
        for (size_t i = 0; i < n; i++) {
            err += ((double)audio->samples[i] - wav[i]) * ((double)audio->samples[i] - wav[i]);
            ref += (double)wav[i] * wav[i];
        }
        double snr = err > 0 ? 10.0 * log10(ref / err) : 999.0;
        printf("  %-26s ICL audio %zu samples (%zu frames + %zu), SNR %.1f dB\n", c->name, n,
               n / spf, n % spf, snr);
        CHECK_MSG(snr >= WAV_SNR_DB, "%s: ICL audio SNR %.1f dB", c->name, snr);
    }
    free(wav);
}

/* Streams the request in chunks of 1 then 3 frames: bit-identical to offline. */
static void test_stream(kz_session *s, const kz_request *base, const kz_audio *offline,
                        const char *name) {
    const int32_t sizes[2][2] = {{1, 3}, {2, 0}}; // first chunk, later chunks (0: adaptive)
    for (int i = 0; i < 2; i++) {
        kz_request r = *base;
        stream_buf b = {0};
        r.first_chunk_frames = sizes[i][0];
        r.chunk_frames = sizes[i][1];
        r.on_frame = NULL;
        r.on_audio = on_audio;
        r.user = &b;
        CHECK_MSG(kz_synthesize(s, &r) == KZ_OK, "%s stream: %s", name, kz_last_error());
        CHECK_MSG(same_audio(offline, b.samples, b.n) && b.n_last == 1 && b.n_calls > 2,
                  "%s: streamed audio (chunks %d/%d: %zu samples, %d calls) differs from "
                  "offline (%zu)",
                  name, sizes[i][0], sizes[i][1], b.n, b.n_calls, offline->n_samples);
        free(b.samples);
    }
}

/* The request again on the same session, with the voice and with a copy of it. */
static void test_cached(kz_session *s, const kz_model *m, const clone_case *c,
                        const struct kz_voice *v, const codes_buf *cold, const kz_audio *audio) {
    static codes_buf warm;
    struct kz_voice copy;
    voice_copy(v, &copy);
    const struct kz_voice *voices[2] = {v, &copy};
    for (int i = 0; i < 2; i++) {
        kz_request r;
        fill_request(m, c, voices[i], &r, &warm);
        run_out o = {0};
        CHECK_MSG(run_all(s, &r, &warm, &o) == KZ_OK, "%s again: %s", c->name, kz_last_error());
        CHECK_MSG(o.prompt_cached >= 6 && o.prompt_computed >= 1,
                  "%s again (%s): %lld prompt rows cached, %lld computed", c->name,
                  i ? "a copy of the voice" : "same voice", (long long)o.prompt_cached,
                  (long long)o.prompt_computed);
        CHECK_MSG(o.codec_frames == c->frames,
                  "%s again: %lld codec frames decoded, want %d "
                  "(the reference's state comes from the session)",
                  c->name, (long long)o.codec_frames, c->frames);
        CHECK_MSG(memcmp(warm.codes, cold->codes, sizeof warm.codes) == 0, "%s again: codes differ",
                  c->name);
        CHECK_MSG(same_audio(&o.audio, audio->samples, audio->n_samples), "%s again: audio differs",
                  c->name);
        kz_audio_free(&o.audio);
    }
    voice_clear(&copy);
}

/* First ICL case: prepare warms both caches; other voices miss what they should. */
static void test_keys(const kz_model *m, const clone_case *c, const struct kz_voice *v,
                      const codes_buf *cold, const kz_audio *audio) {
    static codes_buf got;
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = 2;
    kz_session *s;
    CHECK(kz_session_new(m, &sp, &s) == KZ_OK);
    kz_request r;
    fill_request(m, c, v, &r, NULL);
    r.text = NULL;
    CHECK_MSG(kz_session_prepare(s, &r) == KZ_OK, "prepare: %s", kz_last_error());
    fill_request(m, c, v, &r, &got);
    run_out o = {0};
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    CHECK_MSG(o.prompt_cached >= 6 && o.codec_frames == c->frames,
              "after kz_session_prepare: %lld rows cached, %lld codec frames",
              (long long)o.prompt_cached, (long long)o.codec_frames);
    CHECK(memcmp(got.codes, cold->codes, sizeof got.codes) == 0 &&
          same_audio(&o.audio, audio->samples, audio->n_samples));
    kz_audio_free(&o.audio);
    struct kz_voice other;
    voice_copy(v, &other);
    other.xvector[0] += 0.25f;
    fill_request(m, c, &other, &r, &got);
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    CHECK_MSG(o.prompt_cached == 0, "another x-vector reused the prompt prefix");
    CHECK_MSG(o.codec_frames == c->frames, "same reference codes: the codec context is reused");
    kz_audio_free(&o.audio);
    other.ref_codes[0] = (other.ref_codes[0] + 1) % 2048;
    fill_request(m, c, &other, &r, &got);
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    const int64_t back = (int64_t)kz_codec_back_frames(&m->decoder, &s->codec);
    const int64_t ref_decoded = other.n_ref_frames < back ? other.n_ref_frames : back;
    CHECK_MSG(o.codec_frames == c->frames + ref_decoded,
              "other reference codes: %lld codec frames, want the reference decoded again",
              (long long)o.codec_frames);
    kz_audio_free(&o.audio);
    fill_request(m, c, v, &r, &got);
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    CHECK_MSG(o.codec_frames == c->frames && same_audio(&o.audio, audio->samples, audio->n_samples),
              "back to the first voice: %lld codec frames (its context should be kept)",
              (long long)o.codec_frames);
    kz_audio_free(&o.audio);
    kz_session_clear_prompt_cache(s);
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    CHECK_MSG(o.codec_frames == c->frames + ref_decoded && o.prompt_cached == 0 &&
                  same_audio(&o.audio, audio->samples, audio->n_samples),
              "after kz_session_clear_prompt_cache: %lld codec frames, %lld rows cached",
              (long long)o.codec_frames, (long long)o.prompt_cached);
    kz_audio_free(&o.audio);
    voice_clear(&other);
    // Length unknown in advance (a cap, not a count): the audio starts at the new speech.
    fill_request(m, c, v, &r, &got);
    r.frames = 0;
    r.max_frames = c->frames;
    CHECK(run_all(s, &r, &got, &o) == KZ_OK);
    size_t spf = (size_t)kz_model_samples_per_frame(m);
    CHECK_MSG(o.audio.n_samples == (size_t)got.n_frames * spf && got.n_frames >= 2,
              "natural stop: %zu samples for %lld frames", o.audio.n_samples,
              (long long)got.n_frames);
    test_stream(s, &r, &o.audio, "natural stop");
    kz_audio_free(&o.audio);
    // Long text: each utterance starts after the reference (restored, not decoded again).
    fill_request(m, c, v, &r, &got);
    r.text = "Hello there. This is a test. And one more.";
    r.max_utterance_bytes = 14;
    r.frames = 40;
    CHECK_MSG(run_all(s, &r, &got, &o) == KZ_OK, "long text: %s", kz_last_error());
    CHECK_MSG(o.audio.n_samples == 40 * spf && o.codec_frames == 40,
              "long text with an ICL voice: %zu samples, %lld codec frames", o.audio.n_samples,
              (long long)o.codec_frames);
    test_stream(s, &r, &o.audio, "long text");
    kz_audio_free(&o.audio);
    kz_session_free(s);
}

/* A reference longer than kz_codec_back_frames: the context (the vocoder skipped over the
 * reference's start) equals decoding all of it, bit for bit, and so does its last sample. */
static void test_context_state(kz_session *s, const kz_model *m, const struct kz_voice *v) {
    const size_t back = kz_codec_back_frames(&m->decoder, &s->codec);
    const size_t spf = (size_t)kz_model_samples_per_frame(m), nq = (size_t)v->n_codebooks;
    struct kz_voice lv;
    voice_copy(v, &lv);
    lv.n_ref_frames = (int32_t)(back + 37);
    free(lv.ref_codes);
    lv.ref_codes = malloc((size_t)lv.n_ref_frames * nq * sizeof(int32_t));
    uint64_t rng = 77;
    for (size_t i = 0; i < (size_t)lv.n_ref_frames * nq; i++) {
        lv.ref_codes[i] = (int32_t)test_rng_below(&rng, (size_t)m->codec_cfg.codebook_size);
    }
    size_t n_state = kz_codec_state_floats(&s->codec);
    float *full = malloc(n_state * sizeof(float)), *ctx = malloc(n_state * sizeof(float));
    float *pcm = malloc((size_t)lv.n_ref_frames * spf * sizeof(float));
    kz_codec_state_reset(&s->codec);
    kz_codec_decode(&m->decoder, &s->codec, &s->exec, lv.ref_codes, (size_t)lv.n_ref_frames, pcm);
    int64_t pos_full, pos_ctx;
    kz_codec_state_save(&s->codec, full, &pos_full);
    kz_voice_contexts_clear(&s->voice_ctx);
    float last = NAN;
    CHECK(kz_voice_context_enter(s, &lv, &last) == KZ_OK);
    kz_codec_state_save(&s->codec, ctx, &pos_ctx);
    printf("  reference of %d frames: the vocoder runs over its last %zu; state %zu floats\n",
           (int)lv.n_ref_frames, back, n_state);
    CHECK_MSG(memcmp(full, ctx, n_state * sizeof(float)) == 0 && pos_full == pos_ctx,
              "the voice context's codec state differs from decoding the whole reference");
    CHECK_MSG(memcmp(&last, &pcm[(size_t)lv.n_ref_frames * spf - 1], sizeof last) == 0,
              "the reference's last sample %g differs from the full decode's %g", last,
              pcm[(size_t)lv.n_ref_frames * spf - 1]);
    CHECK(back >= 8 && back < 64);
    free(full);
    free(ctx);
    free(pcm);
    voice_clear(&lv);
}

/* The same in the codec's other precisions (their arithmetic is chunk-invariant too). */
static void test_context_precisions(const char *model_dir, const struct kz_voice *v) {
    const kz_precision ps[] = {KZ_PRECISION_BF16, KZ_PRECISION_WINOGRAD,
                               KZ_PRECISION_WINOGRAD_BF16};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        kz_model_params mp;
        kz_model_default_params(&mp);
        mp.codec_precision = ps[i];
        kz_model *m;
        kz_session *s;
        if (kz_model_load(model_dir, &mp, &m) != KZ_OK) {
            printf("  codec precision %d: not on this CPU (%s)\n", (int)ps[i], kz_last_error());
            continue;
        }
        CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
        printf("  codec precision %d:", (int)ps[i]);
        test_context_state(s, m, v);
        kz_session_free(s);
        kz_model_free(m);
    }
}

static bool pull_nothing(char *buf, size_t cap, size_t *n, bool *done, void *user) {
    (void)buf, (void)cap, (void)user;
    *n = 0;
    *done = true;
    return true;
}

/* Streamed text input: the text in one piece, and the frames (both callbacks share the
 * request's user pointer). */
typedef struct pull_text {
    const char *text;
    bool given;
    codes_buf *codes;
} pull_text;

static bool pull_once(char *buf, size_t cap, size_t *n, bool *done, void *user) {
    pull_text *p = user;
    size_t len = p->given ? 0 : strlen(p->text);
    if (len > cap) {
        return false;
    }
    memcpy(buf, p->text, len);
    *n = len;
    *done = true;
    p->given = true;
    return true;
}

static bool pull_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    return on_frame(codes, n, pos, ((pull_text *)user)->codes);
}

/* An x-vector voice with streamed text input: the codes of the text given at once. */
static void test_text_pull(kz_session *s, const kz_model *m, const clone_case *c,
                           const struct kz_voice *v, const codes_buf *cold) {
    static codes_buf got;
    memset(&got, 0, sizeof got);
    pull_text p = {.text = c->text, .codes = &got};
    kz_request r;
    fill_request(m, c, v, &r, NULL);
    r.text = NULL;
    r.text_pull = pull_once;
    r.on_frame = pull_frame;
    r.user = &p;
    kz_audio a;
    CHECK_MSG(kz_synthesize_all(s, &r, &a) == KZ_OK, "%s text_pull: %s", c->name, kz_last_error());
    CHECK_MSG(got.n_frames == c->frames && memcmp(got.codes, cold->codes, sizeof got.codes) == 0,
              "%s: streamed text input gives other codes", c->name);
    kz_audio_free(&a);
}

/* Streamed text in pieces of 1, 2 and 3 bytes in turn; the bytes given by the time the
 * prompt was built (observed on the LM thread, which also pulls). */
typedef struct pull_pieces {
    const char *text;
    size_t given, calls;
    long at_prefill; /* -1: no prefill seen */
    codes_buf *codes;
} pull_pieces;

static bool pull_piece(char *buf, size_t cap, size_t *n, bool *done, void *user) {
    pull_pieces *p = user;
    size_t left = strlen(p->text) - p->given, len = 1 + p->calls++ % 3;
    len = len < left ? len : left;
    if (len > cap) {
        return false;
    }
    memcpy(buf, p->text + p->given, len);
    p->given += len;
    *n = len;
    *done = p->given == strlen(p->text);
    return true;
}

static bool piece_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    return on_frame(codes, n, pos, ((pull_pieces *)user)->codes);
}

static void on_prefill(const char *name, int64_t frame, const float *data, size_t rows,
                       size_t cols, void *user) {
    (void)frame, (void)data, (void)rows, (void)cols;
    pull_pieces *p = user;
    if (strcmp(name, "prefill_rows") == 0) {
        p->at_prefill = (long)p->given;
    }
}

/* An ICL voice with text streamed in small pieces: the codes and audio of the text given at
 * once. X = transcript ++ text ++ [EOS_T] longer than the codec column Lc (`long_x`): the
 * prompt is built before the last piece; else only once the text is done. */
static void test_icl_text_pull(kz_session *s, const kz_model *m, const clone_case *c,
                               const struct kz_voice *v, const char *text, bool long_x) {
    static codes_buf whole, got;
    memset(&whole, 0, sizeof whole);
    memset(&got, 0, sizeof got);
    kz_request r;
    fill_request(m, c, v, &r, &whole);
    r.text = text;
    kz_plan plan;
    kz_plan_ids ids;
    CHECK_MSG(kz_request_resolve(m, &r, &plan, &ids) == KZ_OK, "%s", kz_last_error());
    size_t nx = plan.prompt.n_ref_text + plan.prompt.n_text + 1;
    size_t lc = plan.prompt.n_ref_frames + 1;
    kz_plan_ids_free(&ids);
    CHECK_MSG((nx > lc) == long_x, "%s: \"%s\" gives len(X) %zu against Lc %zu", c->name, text,
              nx, lc);
    kz_audio a, b;
    CHECK_MSG(kz_synthesize_all(s, &r, &a) == KZ_OK, "%s: %s", c->name, kz_last_error());
    pull_pieces p = {.text = text, .at_prefill = -1, .codes = &got};
    fill_request(m, c, v, &r, NULL);
    r.text = NULL;
    r.text_pull = pull_piece;
    r.on_frame = piece_frame;
    r.user = &p;
    s->observe = on_prefill;
    s->observe_user = &p;
    kz_status st = kz_synthesize_all(s, &r, &b);
    s->observe = NULL;
    CHECK_MSG(st == KZ_OK, "%s text_pull: %s", c->name, kz_last_error());
    CHECK_MSG(got.n_frames == c->frames && whole.n_frames == c->frames &&
                  memcmp(got.codes, whole.codes, sizeof got.codes) == 0,
              "%s: \"%s\" streamed in pieces gives other codes", c->name, text);
    CHECK_MSG(same_audio(&a, b.samples, b.n_samples),
              "%s: \"%s\" streamed in pieces gives other audio", c->name, text);
    long len = (long)strlen(text);
    printf("  %-26s streamed text, len(X) %zu, Lc %zu: prompt after %ld of %ld bytes\n", c->name,
           nx, lc, p.at_prefill, len);
    CHECK_MSG(long_x ? p.at_prefill >= 0 && p.at_prefill < len : p.at_prefill == len,
              "%s: \"%s\": prompt built after %ld of %ld bytes", c->name, text, p.at_prefill,
              len);
    kz_audio_free(&a);
    kz_audio_free(&b);
}

/* Streamed text with the case's ICL voice, whose transcript is longer than Lc (the prompt
 * holds one text token), and with a copy of it with a short transcript: a short text (X
 * padded to Lc) and the case's text (the prompt holds Lc - len(transcript) text tokens). */
static void test_icl_texts_pull(kz_session *s, const kz_model *m, const clone_case *c,
                                const struct kz_voice *v) {
    test_icl_text_pull(s, m, c, v, c->text, true);
    struct kz_voice short_rt;
    voice_copy(v, &short_rt);
    free(short_rt.ref_text);
    short_rt.ref_text = strdup("Ok.");
    test_icl_text_pull(s, m, c, &short_rt, "Hi.", false);
    test_icl_text_pull(s, m, c, &short_rt, c->text, true);
    voice_clear(&short_rt);
}

static void expect(kz_session *s, const kz_request *r, kz_status want, const char *needle) {
    kz_audio a;
    kz_status st = kz_synthesize_all(s, r, &a);
    CHECK_MSG(st == want, "status %d (%s), want %d", (int)st, kz_last_error(), (int)want);
    CHECK_STR_CONTAINS(kz_last_error(), needle);
    CHECK(a.n_samples == 0 && a.samples == NULL);
}

static void test_refusals(const kz_model *m, const clone_case *c, const struct kz_voice *v,
                          const char *custom_voice_dir) {
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    kz_request r;
    fill_request(m, c, NULL, &r, NULL);
    expect(s, &r, KZ_STATUS_INVALID_ARGUMENT, "needs a voice");
    fill_request(m, c, v, &r, NULL);
    r.speaker = "ryan";
    expect(s, &r, KZ_STATUS_INVALID_ARGUMENT, "no preset speakers");
    fill_request(m, c, v, &r, NULL);
    r.instruct = "Speak slowly.";
    expect(s, &r, KZ_STATUS_INVALID_ARGUMENT, "no instruction");
    struct kz_voice bad;
    voice_copy(v, &bad);
    bad.enc_dim = v->enc_dim - 1;
    fill_request(m, c, &bad, &r, NULL);
    expect(s, &r, KZ_STATUS_INVALID_ARGUMENT, "another model");
    bad.enc_dim = v->enc_dim;
    if (bad.icl) {
        bad.ref_codes[bad.n_ref_frames * bad.n_codebooks - 1] = 1 << 20;
        fill_request(m, c, &bad, &r, NULL);
        expect(s, &r, KZ_STATUS_BAD_INPUT, "outside");
        fill_request(m, c, v, &r, NULL);
        r.text = NULL;
        r.text_pull = pull_nothing;
        r.layout = KZ_LAYOUT_STREAMING;
        expect(s, &r, KZ_STATUS_BAD_INPUT, "empty or only whitespace");
    }
    voice_clear(&bad);
    kz_session_free(s);
    kz_model *cv;
    CHECK(kz_model_load(custom_voice_dir, NULL, &cv) == KZ_OK);
    CHECK(kz_session_new(cv, NULL, &s) == KZ_OK);
    fill_request(cv, c, v, &r, NULL);
    r.speaker = "ryan";
    expect(s, &r, KZ_STATUS_INVALID_ARGUMENT, "for Base models");
    kz_session_free(s);
    kz_model_free(cv);
}

/* The official cut: trunc(Tr / (Tr + F) * (Tr + F) * 1920) in double. */
static void test_cut_rule(void) {
    CHECK_EQ_INT(kz_voice_cut_lead(15, 7, 1920), 1); // spec 8.4's example: 28 799
    CHECK_EQ_INT(kz_voice_cut_lead(53, 30, 1920), 1);
    CHECK_EQ_INT(kz_voice_cut_lead(9, 30, 1920), 0);
    CHECK_EQ_INT(kz_voice_cut_lead(10, 10, 1920), 0);
    int n_lead = 0;
    for (size_t tr = 1; tr <= 100; tr++) {
        for (size_t f = 1; f <= 100; f++) {
            size_t lead = kz_voice_cut_lead(tr, f, 1920);
            double cut = (double)tr / (double)(tr + f) * (double)((tr + f) * 1920);
            CHECK((size_t)cut + lead == tr * 1920);
            n_lead += (int)lead;
        }
    }
    CHECK_MSG(n_lead > 0, "no (Tr, F) pair up to 100 has the one-sample lead");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_clone BASE_CASES CUSTOM_VOICE_DIR\n");
        return 2;
    }
    test_cut_rule();
    FILE *f = fopen(argv[1], "r");
    CHECK_MSG(f != NULL, "cannot open %s", argv[1]);
    clone_case c;
    static codes_buf codes;
    int n_cases = 0, n_icl = 0;
    while (f && read_case(f, &c)) {
        kz_st_file *g = NULL;
        kz_model *m = NULL;
        CHECK_MSG(kz_st_open(c.golden, &g) == KZ_OK, "%s", kz_last_error());
        CHECK_MSG(kz_model_load(c.model, NULL, &m) == KZ_OK, "%s: %s", c.model, kz_last_error());
        struct kz_voice v;
        if (!g || !m || !voice_from_golden(g, &c, &v)) {
            CHECK_MSG(0, "%s: cannot set the case up", c.name);
            kz_st_close(g);
            kz_model_free(m);
            continue;
        }
        v.fingerprint = kz_model_voice_fingerprint(m); // made "with" the case's model
        kz_session_params sp;
        kz_session_default_params(&sp);
        sp.n_threads = 2;
        kz_session *s;
        CHECK(kz_session_new(m, &sp, &s) == KZ_OK);
        observed o = {0};
        s->observe = on_observe;
        s->observe_user = &o;
        kz_request r;
        fill_request(m, &c, &v, &r, &codes);
        run_out out = {0};
        kz_status st = run_all(s, &r, &codes, &out);
        CHECK_MSG(st == KZ_OK, "%s: %s", c.name, kz_last_error());
        CHECK_MSG(out.prompt_cached == 0, "%s: a new session had a cached prompt", c.name);
        s->observe = NULL;
        if (st == KZ_OK) {
            compare_reference(&c, g, &codes, &o, &out.audio, m);
            test_stream(s, &r, &out.audio, c.name);
            test_cached(s, m, &c, &v, &codes, &out.audio);
            if (v.icl && n_icl++ == 0) {
                test_keys(m, &c, &v, &codes, &out.audio);
            }
            if (v.icl && strcmp(c.layout, "streaming") == 0) {
                test_context_state(s, m, &v);
            }
            if (v.icl && n_icl == 1) {
                test_context_precisions(c.model, &v);
            }
            if (!v.icl && strcmp(c.layout, "streaming") == 0) {
                test_text_pull(s, m, &c, &v, &codes);
            }
            if (v.icl && strcmp(c.layout, "streaming") == 0 && strncmp(c.name, "base06", 6) == 0) {
                test_icl_texts_pull(s, m, &c, &v);
            }
            if (n_cases == 0 || (v.icl && n_icl == 1)) {
                test_refusals(m, &c, &v, argv[2]);
            }
        }
        n_cases++;
        kz_audio_free(&out.audio);
        free_observed(&o);
        voice_clear(&v);
        kz_session_free(s);
        kz_model_free(m);
        kz_st_close(g);
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(n_cases >= 8 && n_icl >= 4, "only %d cases (%d ICL) in the manifest", n_cases, n_icl);
    return test_main_result("test_clone");
}
