/*
 * test_streaming.c - the pipelined synthesis engine on the tiny checkpoint.
 *
 * argv[1]: the tiny checkpoint; argv[2] (optional): a file holding the text's
 * token ids for it, comma-separated (default: Qwen2 ids, for released ids). The
 * codebook count and samples per frame are the model's. With a fixed seed and text:
 *   - the streamed audio equals the offline decode (kz_decode_all, one pass) of
 *     the same codes, bit for bit;
 *   - first/steady chunk sizes 1, 2, 4, 25 and adaptive chunks (first 1, then 1 to
 *     16 frames), LM/codec thread splits (1,1) and (2,1) and the two stage
 *     schedules (turns, overlap) change neither codes nor audio (and never
 *     deadlock); adaptive chunks stay within 1..16 frames;
 *   - the audio callback sees increasing pos_frame, is_last exactly once, at the end;
 *   - cancelling from the audio (fixed or adaptive chunks) or the frame callback at
 *     frame k returns
 *     KZ_STATUS_CANCELLED (the LM stage stops within a frame: at most the queue
 *     plus one frame generated after k), and the session then synthesizes the
 *     same audio again (ASan checks that nothing leaks);
 *   - teacher forcing (experimental) makes another seed give the same codes and audio;
 *   - one session's requests of 3, 100 and 3 frames (its talker state kept, grown, reused)
 *     each give a fresh session's codes and audio;
 *   - out-of-range session parameters (schedule, thread counts) and chunk sizes are
 *     refused; in a request, 0 is the model's default (the runs here use zeroed
 *     requests), -1 turns top-k off and never splits the text, other out-of-range
 *     numbers are refused naming the field;
 *   - long text split into utterances (model with a tokenizer): the audio and frame
 *     callbacks' positions run on without a gap or overlap across the joins, counted
 *     in the model's samples per frame.
 *   - the checkpoint loaded with codec_only decodes the same codes to the same audio and
 *     refuses synthesis and encoding;
 *   - kz_decode / kz_decode_all refuse a frame count whose codes or audio cannot exist
 *     (no code read, no callback), and kz_session_timings accepts a NULL output;
 *   - a session serves one call at a time: a call on it from its own callback, or from a
 *     second thread while a call runs, is INVALID_ARGUMENT ("in use"), never a deadlock
 *     or a corrupted synthesis; the running call then finishes with the same audio.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kztts.h"
#include "test.h"

#define N_FRAMES 40
#define MAX_GROUPS 64
static int32_t TEXT[64] = {9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13};
static size_t n_text = 9;
static size_t spf = 1920;  /* samples per frame, the model's */
static int32_t groups = 16; /* codebooks per frame, the model's */

typedef struct run {
    float *pcm;
    size_t n_samples;
    int32_t codes[N_FRAMES * MAX_GROUPS];
    int64_t n_codes;
    int64_t next_pos;
    int n_last;
    bool order_ok;
    size_t max_chunk;       /* samples of the largest callback */
    int64_t cancel_at;      /* audio callback returns false once pos_frame >= this */
    int64_t cancel_frame_at;/* frame callback returns false at this frame */
} run;

static bool on_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    run *r = user;
    r->order_ok = r->order_ok && pos == r->next_pos && r->n_last == 0;
    r->next_pos = pos + (int64_t)(n / spf);
    r->n_last += last;
    r->max_chunk = n > r->max_chunk ? n : r->max_chunk;
    r->pcm = realloc(r->pcm, (r->n_samples + n + 1) * sizeof(float));
    memcpy(r->pcm + r->n_samples, pcm, n * sizeof(float));
    r->n_samples += n;
    return !(r->cancel_at >= 0 && pos >= r->cancel_at);
}

static bool on_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    run *r = user;
    if (pos < N_FRAMES && n == groups) {
        memcpy(r->codes + pos * n, codes, (size_t)n * sizeof(int32_t));
        r->n_codes = pos + 1;
    }
    return pos != r->cancel_frame_at;
}

static kz_status synth(const kz_model *m, kz_schedule schedule, int lm, int codec, int first,
                       int chunk, run *r, int64_t cancel_at, int64_t cancel_frame_at) {
    memset(r, 0, sizeof *r);
    r->order_ok = true;
    r->cancel_at = cancel_at;
    r->cancel_frame_at = cancel_frame_at;
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = lm + codec;
    sp.n_threads_lm = lm;
    sp.n_threads_codec = codec;
    sp.schedule = schedule;
    kz_session *s;
    kz_status st = kz_session_new(m, &sp, &s);
    if (st != KZ_OK) {
        return st;
    }
    kz_request q = {0};
    q.token_ids = TEXT;
    q.n_token_ids = n_text;
    q.speaker = "ryan";
    q.frames = N_FRAMES;
    q.seed = 5;
    q.first_chunk_frames = first;
    q.chunk_frames = chunk;
    q.on_frame = on_frame;
    q.on_audio = on_audio;
    q.user = r;
    st = kz_synthesize(s, &q);
    if (st == KZ_STATUS_CANCELLED) {
        CHECK_STR_CONTAINS(kz_last_error(), "cancelled");
        // The first chunk at or past cancel_at is cancelled after its frames were
        // reported: it starts before cancel_at + chunk (adaptive: + 16) and is a chunk long.
        int64_t most = chunk ? chunk : 2 * 16;
        CHECK_MSG(r->n_codes <= (cancel_at >= 0 ? cancel_at + most : cancel_frame_at + 1),
                  "frames reported after the cancel: %lld", (long long)r->n_codes);
        // The same session works after a cancellation and gives the same audio.
        run again = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        q.user = &again;
        CHECK(kz_synthesize(s, &q) == KZ_OK);
        CHECK_EQ_INT(again.n_samples, N_FRAMES * spf);
        r->n_codes = again.n_codes;
        free(r->pcm);
        r->pcm = again.pcm;
        r->n_samples = again.n_samples;
        memcpy(r->codes, again.codes, sizeof r->codes);
        r->order_ok = again.order_ok;
        r->n_last = again.n_last;
    }
    kz_session_free(s);
    return st;
}

static void check_offline(const kz_model *m, const run *ref) {
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    kz_decode_params dp;
    kz_decode_default_params(&dp);
    dp.chunk_frames = N_FRAMES;
    kz_audio offline;
    CHECK(kz_decode_all(s, ref->codes, N_FRAMES, &dp, &offline) == KZ_OK);
    CHECK_MSG(offline.n_samples == ref->n_samples &&
                  memcmp(offline.samples, ref->pcm, ref->n_samples * sizeof(float)) == 0,
              "streamed audio differs from the offline decode of the same codes");
    kz_audio_free(&offline);
    kz_session_free(s);
}

/* The checkpoint loaded with codec_only decodes ref's codes to ref's audio, bit for bit,
 * and refuses to synthesize or encode, saying why. */
static void check_codec_only(const char *path, const run *ref) {
    kz_model_params mp;
    kz_model_default_params(&mp);
    CHECK(!mp.codec_only);
    mp.codec_only = true;
    kz_model *m = NULL;
    CHECK_MSG(kz_model_load(path, &mp, &m) == KZ_OK, "%s", kz_last_error());
    if (!m) {
        return;
    }
    CHECK_MSG(strcmp(kz_model_type(m), "codec") == 0, "type %s", kz_model_type(m));
    CHECK_STR_CONTAINS(kz_model_describe(m), "codec_only");
    check_offline(m, ref);
    kz_session *s = NULL;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    kz_request q = {0};
    q.token_ids = TEXT;
    q.n_token_ids = n_text;
    q.speaker = "ryan";
    q.frames = 2;
    kz_audio audio = {0};
    CHECK(s && kz_synthesize_all(s, &q, &audio) == KZ_STATUS_UNSUPPORTED);
    CHECK(audio.samples == NULL && audio.n_samples == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "codec_only");
    float silence[2400] = {0};
    int32_t *codes = NULL;
    size_t n_frames = 0;
    int32_t n_codebooks = 0;
    CHECK(kz_encode(m, silence, 2400, 24000, 1, NULL, &codes, &n_frames, &n_codebooks) ==
          KZ_STATUS_UNSUPPORTED);
    CHECK_STR_CONTAINS(kz_last_error(), "codec_only");
    CHECK(codes == NULL && n_frames == 0);
    kz_session_free(s);
    kz_model_free(m);
}

static void check_same(const run *a, const run *b, const char *what) {
    CHECK_MSG(memcmp(a->codes, b->codes, sizeof a->codes) == 0, "%s: codes differ", what);
    CHECK_MSG(a->n_samples == b->n_samples &&
                  memcmp(a->pcm, b->pcm, a->n_samples * sizeof(float)) == 0,
              "%s: audio differs", what);
    CHECK_MSG(b->order_ok && b->n_last == 1, "%s: callback order or is_last wrong", what);
}

/* One session, requests of 3, 100 and 3 frames: its talker state made, then grown past the
 * 64 positions it was rounded to, then reused larger than needed. Each request gives the
 * codes and audio of the same request on a fresh session. */
static void check_session_reuse(const kz_model *m) {
    static const int32_t frames[] = {3, 100, 3};
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        run kept = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        run fresh = kept;
        kz_request q = {0};
        q.token_ids = TEXT;
        q.n_token_ids = n_text;
        q.speaker = "ryan";
        q.frames = frames[i];
        q.seed = 11;
        q.on_frame = on_frame;
        q.on_audio = on_audio;
        q.user = &kept;
        CHECK(kz_synthesize(s, &q) == KZ_OK);
        kz_session *f;
        CHECK(kz_session_new(m, NULL, &f) == KZ_OK);
        q.user = &fresh;
        CHECK(kz_synthesize(f, &q) == KZ_OK);
        kz_session_free(f);
        char what[64];
        snprintf(what, sizeof what, "request %zu (%d frames) on a used session", i, frames[i]);
        CHECK_EQ_INT(kept.n_samples, (size_t)frames[i] * spf);
        check_same(&fresh, &kept, what);
        free(kept.pcm);
        free(fresh.pcm);
    }
    kz_session_free(s);
}

/* Positions across the utterances of long text: each callback starts where the last
 * ended (audio in frames of spf samples), frames numbered 0, 1, 2, ... */
typedef struct joined {
    int64_t next_pos, next_frame;
    size_t n_samples;
    bool ok;
} joined;

static bool joined_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    joined *j = user;
    (void)pcm;
    (void)last;
    j->ok = j->ok && pos == j->next_pos && n % spf == 0;
    j->next_pos = pos + (int64_t)(n / spf);
    j->n_samples += n;
    return true;
}

static bool joined_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    joined *j = user;
    (void)codes;
    j->ok = j->ok && n == groups && pos == j->next_frame;
    j->next_frame = pos + 1;
    return true;
}

static void test_long_text(const kz_model *m) {
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    kz_request q = {0};
    joined j = {.ok = true};
    q.text = "Hello world, this is a test. How are you today? Fine. Speak slowly and calmly.";
    q.max_utterance_bytes = 30;
    q.max_frames = 6;
    q.speaker = "ryan";
    q.seed = 3;
    q.on_audio = joined_audio;
    q.on_frame = joined_frame;
    q.user = &j;
    kz_status st = kz_synthesize(s, &q);
    CHECK_MSG(st == KZ_OK, "long text: %s", kz_last_error());
    CHECK_MSG(j.ok && j.next_pos == j.next_frame && (size_t)j.next_pos * spf == j.n_samples,
              "long text: positions do not run on across the joins (audio to frame %lld, "
              "frames to %lld, %zu samples)",
              (long long)j.next_pos, (long long)j.next_frame, j.n_samples);
    kz_session_free(s);
}

/* Teacher forcing (kz_experimental_session_force_codes): another seed forced to ref's
 * codes gives ref's codes and audio, and its own once the forcing ends; a code outside
 * its table is refused. */
static void check_forcing(const kz_model *m, const run *ref) {
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    int32_t bad[MAX_GROUPS] = {0};
    bad[3] = -1;
    CHECK(kz_experimental_session_force_codes(s, bad, 1) == KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "codebook 3");
    // Codebook 0 at the codec's codebook size: a talker control id (EOS, pad), no audio.
    bad[3] = 0;
    bad[0] = kz_model_codebook_size(m);
    CHECK(kz_experimental_session_force_codes(s, bad, 1) == KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "codebook 0");
    CHECK(kz_experimental_session_force_codes(s, ref->codes, N_FRAMES) == KZ_OK);
    for (int forced = 1; forced >= 0; forced--) {
        run r = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        kz_request q = {0};
        q.token_ids = TEXT;
        q.n_token_ids = n_text;
        q.speaker = "ryan";
        q.frames = N_FRAMES;
        q.seed = 77;
        q.on_audio = on_audio;
        q.on_frame = on_frame;
        q.user = &r;
        CHECK(kz_synthesize(s, &q) == KZ_OK);
        const bool same = memcmp(r.codes, ref->codes, sizeof r.codes) == 0 &&
                          r.n_samples == ref->n_samples &&
                          memcmp(r.pcm, ref->pcm, r.n_samples * sizeof(float)) == 0;
        CHECK_MSG(same == (forced == 1), "forced %d: the codes are%s ref's", forced,
                  same ? "" : " not");
        free(r.pcm);
        CHECK(kz_experimental_session_force_codes(s, NULL, 0) == KZ_OK);
    }
    kz_session_free(s);
}

/* A request refused before any audio: INVALID_ARGUMENT naming `field`. */
static void expect_refused(kz_session *s, kz_request q, const char *field) {
    run got = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
    q.on_audio = on_audio;
    q.user = &got;
    CHECK_MSG(kz_synthesize(s, &q) == KZ_STATUS_INVALID_ARGUMENT && got.n_samples == 0,
              "%s: %s", field, kz_last_error());
    CHECK_STR_CONTAINS(kz_last_error(), field);
    free(got.pcm);
}

/* A request's numbers: 0 is the model's default, -1 turns top-k off or never splits the
 * text, anything else out of range is refused with the field's name (cp_top_k against the
 * code predictor's vocabulary); text and token ids together are refused; no audio comes. */
static void check_request_values(const kz_model *m, kz_session *s) {
    static const struct { const char *field; float temperature, top_p, penalty;
                          int32_t top_k, cp_top_k, max_utterance_bytes; bool ok; } cases[] = {
        {"top_k", 0, 0, 0, -1, -1, -1, true}, // off, off, never split
        {"top_k", 0, 0, 0, -2, 0, 0, false},
        {"cp_top_k", 0, 0, 0, 0, -2, 0, false},
        {"temperature", -1, 0, 0, 0, 0, 0, false},
        {"top_p", 0, 1.5f, 0, 0, 0, 0, false},
        {"top_p", 0, -0.5f, 0, 0, 0, 0, false},
        {"repetition_penalty", 0, 0, -1, 0, 0, 0, false},
        {"max_utterance_bytes", 0, 0, 0, 0, 0, -2, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kz_request q = {0};
        q.token_ids = TEXT;
        q.n_token_ids = n_text;
        q.speaker = "ryan";
        q.frames = 2;
        q.temperature = cases[i].temperature;
        q.top_p = cases[i].top_p;
        q.repetition_penalty = cases[i].penalty;
        q.top_k = cases[i].top_k;
        q.cp_top_k = cases[i].cp_top_k;
        q.max_utterance_bytes = cases[i].max_utterance_bytes;
        run got = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        q.on_audio = on_audio;
        q.user = &got;
        kz_status st = kz_synthesize(s, &q);
        if (cases[i].ok) {
            CHECK_MSG(st == KZ_OK && got.n_samples == 2 * spf, "case %zu: %s", i,
                      kz_last_error());
        } else {
            CHECK_MSG(st == KZ_STATUS_INVALID_ARGUMENT && got.n_samples == 0, "case %zu", i);
            CHECK_STR_CONTAINS(kz_last_error(), cases[i].field);
        }
        free(got.pcm);
    }
    kz_experimental_model_info info;
    CHECK(kz_experimental_model_get_info(m, &info) == KZ_OK);
    kz_request q = {0};
    q.token_ids = TEXT;
    q.n_token_ids = n_text;
    q.speaker = "ryan";
    q.frames = 2;
    q.cp_top_k = info.cp_vocab_size + 1;
    expect_refused(s, q, "cp_top_k");
    q.cp_top_k = 0;
    q.max_frames = 1;
    expect_refused(s, q, "above max_frames");
    q.max_frames = 0;
    q.text = "Hello.";
    expect_refused(s, q, "text and token_ids");
}

/* A second call on a busy session: from the audio callback (mode 0: kz_synthesize, 1:
 * kz_decode, 2: kz_session_prepare, 3: teacher forcing) or from another thread while the
 * callback waits (mode 4). */
typedef struct busy_probe {
    kz_session *s;
    int mode;
    kz_status got;
    char message[256];
    run audio;
} busy_probe;

static bool quiet_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm, (void)n, (void)pos, (void)last, (void)user;
    return true;
}

static kz_status second_call(busy_probe *b) {
    kz_request q = {0};
    q.token_ids = TEXT;
    q.n_token_ids = n_text;
    q.speaker = "ryan";
    q.frames = 2;
    q.on_audio = quiet_audio;
    int32_t codes[MAX_GROUPS] = {0};
    kz_decode_params dp = {.on_audio = quiet_audio};
    switch (b->mode) {
    case 1: return kz_decode(b->s, codes, 1, &dp);
    case 2: return kz_session_prepare(b->s, &q);
    case 3: return kz_experimental_session_force_codes(b->s, codes, 1);
    default: return kz_synthesize(b->s, &q);
    }
}

static void *second_thread(void *arg) {
    busy_probe *b = arg;
    b->got = second_call(b);
    snprintf(b->message, sizeof b->message, "%s", kz_last_error());
    return NULL;
}

static bool probing_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    busy_probe *b = user;
    if (pos == 0 && b->got == KZ_OK) {
        b->got = KZ_STATUS_INTERNAL; // until the probe says otherwise: once only
        if (b->mode == 4) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, second_thread, b) == 0);
            pthread_join(t, NULL);
        } else {
            second_thread(b);
        }
    }
    return on_audio(pcm, n, pos, last, &b->audio);
}

static void check_busy(const kz_model *m, const run *ref) {
    kz_session *s;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    for (int mode = 0; mode <= 4; mode++) {
        busy_probe b = {.s = s, .mode = mode,
                        .audio = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1}};
        kz_request q = {0};
        q.token_ids = TEXT;
        q.n_token_ids = n_text;
        q.speaker = "ryan";
        q.frames = N_FRAMES;
        q.seed = 5; // ref's
        q.first_chunk_frames = 1;
        q.on_audio = probing_audio;
        q.user = &b;
        CHECK_MSG(kz_synthesize(s, &q) == KZ_OK, "mode %d: %s", mode, kz_last_error());
        CHECK_MSG(b.got == KZ_STATUS_INVALID_ARGUMENT, "mode %d: second call gave %d", mode,
                  (int)b.got);
        CHECK_STR_CONTAINS(b.message, "in use");
        CHECK_MSG(b.audio.n_samples == ref->n_samples &&
                      memcmp(b.audio.pcm, ref->pcm, ref->n_samples * sizeof(float)) == 0,
                  "mode %d: the running synthesis changed", mode);
        free(b.audio.pcm);
    }
    kz_session_free(s);
}

/* Comma-separated ids from the file at path into TEXT. */
static void read_text_ids(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    n_text = 0;
    while (f && n_text < 64 && fscanf(f, "%d", &TEXT[n_text]) == 1) {
        n_text++;
        if (fgetc(f) != ',') {
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(n_text > 0, "%s: no ids", path);
}

static bool never_called(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm;
    (void)n;
    (void)pos;
    (void)last;
    (*(int *)user)++;
    return true;
}

/* A frame count whose codes (n_frames x groups x 4 bytes) or audio cannot exist is refused
 * before any code is read. */
static void check_decode_limits(const kz_model *m) {
    kz_session *s = NULL;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    static const int32_t codes[MAX_GROUPS] = {0};
    const size_t g = (size_t)groups;
    const size_t huge[] = {SIZE_MAX, SIZE_MAX / g + 1, (size_t)PTRDIFF_MAX / (4 * g) + 1};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        int calls = 0;
        kz_decode_params dp = {.on_audio = never_called, .user = &calls};
        CHECK(kz_decode(s, codes, huge[i], &dp) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "n_frames");
        CHECK_EQ_INT(calls, 0);
        kz_audio audio = {.n_samples = 3};
        CHECK(kz_decode_all(s, codes, huge[i], NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "too large");
        CHECK(audio.samples == NULL && audio.n_samples == 0);
    }
    // What the audio of kz_decode_all could not hold either.
    kz_audio audio;
    CHECK(kz_decode_all(s, codes, SIZE_MAX / 4 / spf + 1, NULL, &audio) ==
          KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "too large");
    kz_timings t;
    kz_session_timings(s, &t);
    CHECK_EQ_INT(t.codec_frames, 0);
    kz_session_timings(s, NULL);
    kz_session_free(s);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: test_streaming TINY_DIR [TEXT_IDS_FILE]\n");
        return 2;
    }
    if (argc == 3) {
        read_text_ids(argv[2]);
    }
    kz_model *m;
    CHECK(kz_model_load(argv[1], NULL, &m) == KZ_OK);
    spf = (size_t)kz_model_samples_per_frame(m);
    groups = kz_model_num_codebooks(m);
    run ref, r;
    CHECK(synth(m, KZ_SCHEDULE_OVERLAP, 1, 1, 1, 4, &ref, -1, -1) == KZ_OK);
    CHECK_EQ_INT(ref.n_samples, N_FRAMES * spf);
    CHECK(ref.order_ok && ref.n_last == 1);
    check_offline(m, &ref);
    check_codec_only(argv[1], &ref);
    check_forcing(m, &ref);
    check_busy(m, &ref);
    check_session_reuse(m);
    static const int chunks[] = {1, 2, 4, 25, 0}; /* 0: adaptive */
    static const int splits[][2] = {{1, 1}, {2, 1}};
    static const kz_schedule schedules[] = {KZ_SCHEDULE_TURNS, KZ_SCHEDULE_OVERLAP};
    for (int c = 0; c < 5; c++) {
        for (int sp = 0; sp < 2; sp++) {
            for (int k = 0; k < 2; k++) {
                char what[80];
                snprintf(what, sizeof what, "chunk %d, threads (%d,%d), %s", chunks[c],
                         splits[sp][0], splits[sp][1], k == 0 ? "turns" : "overlap");
                int first = chunks[c] ? chunks[c] : 1;
                CHECK(synth(m, schedules[k], splits[sp][0], splits[sp][1], first, chunks[c], &r, -1,
                            -1) == KZ_OK);
                check_same(&ref, &r, what);
                CHECK_MSG(r.max_chunk <= (size_t)(chunks[c] ? chunks[c] : 16) * spf,
                          "%s: a callback of %zu samples", what, r.max_chunk);
                free(r.pcm);
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        CHECK(synth(m, schedules[k], 1, 1, 1, 4, &r, 5, -1) == KZ_STATUS_CANCELLED);
        check_same(&ref, &r, "after an audio-callback cancel");
        free(r.pcm);
        CHECK(synth(m, schedules[k], 2, 1, 2, 2, &r, -1, 7) == KZ_STATUS_CANCELLED);
        check_same(&ref, &r, "after a frame-callback cancel");
        free(r.pcm);
        CHECK(synth(m, schedules[k], 1, 1, 1, 0, &r, 9, -1) == KZ_STATUS_CANCELLED);
        check_same(&ref, &r, "after an audio-callback cancel, adaptive chunks");
        free(r.pcm);
    }
    // Out-of-range session parameters are refused with a message.
    kz_session_params bad;
    kz_session_default_params(&bad);
    bad.schedule = (kz_schedule)7;
    kz_session *s = NULL;
    CHECK(kz_session_new(m, &bad, &s) == KZ_STATUS_INVALID_ARGUMENT && s == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "schedule 7");
    kz_session_default_params(&bad);
    bad.n_threads_codec = 257;
    CHECK(kz_session_new(m, &bad, &s) == KZ_STATUS_INVALID_ARGUMENT && s == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "n_threads_codec 257");
    for (int32_t mb = -2; mb <= 65537; mb += 65539) {
        kz_session_default_params(&bad);
        bad.prompt_cache_mb = mb;
        CHECK(kz_session_new(m, &bad, &s) == KZ_STATUS_INVALID_ARGUMENT && s == NULL);
        CHECK_STR_CONTAINS(kz_last_error(), "prompt_cache_mb");
    }
    // Out-of-range chunk sizes are refused before anything runs (0 = adaptive is valid).
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    static const int32_t bad_chunks[][2] = {{1, -1}, {1, 1025}, {-1, 4}, {1025, 0}};
    for (size_t i = 0; i < sizeof bad_chunks / sizeof bad_chunks[0]; i++) {
        kz_request q = {0};
        q.token_ids = TEXT;
        q.n_token_ids = n_text;
        q.speaker = "ryan";
        q.first_chunk_frames = bad_chunks[i][0];
        q.chunk_frames = bad_chunks[i][1];
        run none = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        q.on_audio = on_audio;
        q.user = &none;
        CHECK(kz_synthesize(s, &q) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "chunk_frames");
        CHECK(none.n_samples == 0);
        free(none.pcm);
    }
    check_request_values(m, s);
    kz_session_free(s);
    check_decode_limits(m);
    kz_session_clear_prompt_cache(NULL); // allowed, does nothing
    test_long_text(m);
    free(ref.pcm);
    kz_model_free(m);
    return test_main_result("test_streaming");
}
