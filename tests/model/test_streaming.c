/*
 * test_streaming.c - the pipelined synthesis engine on the tiny checkpoint.
 *
 * argv[1]: the tiny checkpoint. With a fixed seed and text (token ids):
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
 *   - out-of-range session parameters (schedule, thread counts) and chunk sizes are
 *     refused;
 *   - kz_decode / kz_decode_all refuse a frame count whose codes or audio cannot exist
 *     (no code read, no callback), and kz_session_timings accepts a NULL output.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kztts.h"
#include "test.h"

#define N_FRAMES 40
static const int32_t TEXT[] = {9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13};

typedef struct run {
    float *pcm;
    size_t n_samples;
    int32_t codes[N_FRAMES * 16];
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
    r->next_pos = pos + (int64_t)(n / 1920);
    r->n_last += last;
    r->max_chunk = n > r->max_chunk ? n : r->max_chunk;
    r->pcm = realloc(r->pcm, (r->n_samples + n + 1) * sizeof(float));
    memcpy(r->pcm + r->n_samples, pcm, n * sizeof(float));
    r->n_samples += n;
    return !(r->cancel_at >= 0 && pos >= r->cancel_at);
}

static bool on_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    run *r = user;
    if (pos < N_FRAMES && n == 16) {
        memcpy(r->codes + pos * 16, codes, 16 * sizeof(int32_t));
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
    kz_request q;
    kz_request_default(m, &q);
    q.token_ids = TEXT;
    q.n_token_ids = sizeof TEXT / sizeof TEXT[0];
    q.speaker = "ryan";
    q.frames = N_FRAMES;
    q.seed = 5;
    q.first_chunk_frames = first;
    q.chunk_frames = chunk;
    q.on_frame = on_frame;
    q.frame_user = r;
    st = kz_synthesize(s, &q, on_audio, r);
    if (st == KZ_STATUS_CANCELLED) {
        CHECK_STR_CONTAINS(kz_last_error(), "cancelled");
        // The first chunk at or past cancel_at is cancelled after its frames were
        // reported: it starts before cancel_at + chunk (adaptive: + 16) and is a chunk long.
        int64_t most = chunk ? chunk : 2 * 16;
        CHECK_MSG(r->n_codes <= (cancel_at >= 0 ? cancel_at + most : cancel_frame_at + 1),
                  "frames reported after the cancel: %lld", (long long)r->n_codes);
        // The same session works after a cancellation and gives the same audio.
        run again = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        q.frame_user = &again;
        CHECK(kz_synthesize(s, &q, on_audio, &again) == KZ_OK);
        CHECK_EQ_INT(again.n_samples, N_FRAMES * 1920);
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

static void check_same(const run *a, const run *b, const char *what) {
    CHECK_MSG(memcmp(a->codes, b->codes, sizeof a->codes) == 0, "%s: codes differ", what);
    CHECK_MSG(a->n_samples == b->n_samples &&
                  memcmp(a->pcm, b->pcm, a->n_samples * sizeof(float)) == 0,
              "%s: audio differs", what);
    CHECK_MSG(b->order_ok && b->n_last == 1, "%s: callback order or is_last wrong", what);
}

static bool never_called(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm;
    (void)n;
    (void)pos;
    (void)last;
    (*(int *)user)++;
    return true;
}

/* A frame count whose codes (n_frames x 16 x 4 bytes) or audio cannot exist is refused
 * before any code is read. */
static void check_decode_limits(const kz_model *m) {
    kz_session *s = NULL;
    CHECK(kz_session_new(m, NULL, &s) == KZ_OK);
    static const int32_t codes[16] = {0};
    const size_t huge[] = {SIZE_MAX, SIZE_MAX / 16 + 1, (size_t)PTRDIFF_MAX / 64 + 1};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        int calls = 0;
        CHECK(kz_decode(s, codes, huge[i], NULL, never_called, &calls) ==
              KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "n_frames");
        CHECK_EQ_INT(calls, 0);
        kz_audio audio = {.n_samples = 3};
        CHECK(kz_decode_all(s, codes, huge[i], NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "too large");
        CHECK(audio.samples == NULL && audio.n_samples == 0);
    }
    // What the audio of kz_decode_all could not hold either.
    kz_audio audio;
    CHECK(kz_decode_all(s, codes, SIZE_MAX / 4 / 1920 + 1, NULL, &audio) ==
          KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "too large");
    kz_timings t;
    kz_session_timings(s, &t);
    CHECK_EQ_INT(t.codec_frames, 0);
    kz_session_timings(s, NULL);
    kz_session_free(s);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_streaming TINY_DIR\n");
        return 2;
    }
    kz_model *m;
    CHECK(kz_model_load(argv[1], NULL, &m) == KZ_OK);
    run ref, r;
    CHECK(synth(m, KZ_SCHEDULE_OVERLAP, 1, 1, 1, 4, &ref, -1, -1) == KZ_OK);
    CHECK_EQ_INT(ref.n_samples, N_FRAMES * 1920);
    CHECK(ref.order_ok && ref.n_last == 1);
    check_offline(m, &ref);
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
                CHECK_MSG(r.max_chunk <= (size_t)(chunks[c] ? chunks[c] : 16) * 1920,
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
    static const int32_t bad_chunks[][2] = {{1, -1}, {1, 1025}, {0, 4}, {1025, 0}};
    for (size_t i = 0; i < sizeof bad_chunks / sizeof bad_chunks[0]; i++) {
        kz_request q;
        kz_request_default(m, &q);
        q.token_ids = TEXT;
        q.n_token_ids = sizeof TEXT / sizeof TEXT[0];
        q.speaker = "ryan";
        q.first_chunk_frames = bad_chunks[i][0];
        q.chunk_frames = bad_chunks[i][1];
        run none = {.order_ok = true, .cancel_at = -1, .cancel_frame_at = -1};
        CHECK(kz_synthesize(s, &q, on_audio, &none) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "chunk_frames");
        CHECK(none.n_samples == 0);
        free(none.pcm);
    }
    kz_session_free(s);
    check_decode_limits(m);
    kz_session_clear_prompt_cache(NULL); // allowed, does nothing
    free(ref.pcm);
    kz_model_free(m);
    return test_main_result("test_streaming");
}
