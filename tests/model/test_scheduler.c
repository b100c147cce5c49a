/*
 * test_scheduler.c - continuous batching through the public scheduler (kz_scheduler):
 * every request's codes and audio equal, bit for bit, the same request synthesized alone on
 * a session without a scheduler.
 *
 * argv[1]: a tiny CustomVoice checkpoint (make_fixture.py); it runs as stored and as a
 * Q8_0 GGUF (kz_quantize into a temporary folder). Per model:
 *   - 8 requests (speakers, texts, seeds and lengths differ; even ones greedy, odd ones
 *     sampled; one ends at end of speech or its cap instead of an exact count; one streams
 *     its text through text_pull) are run alone for reference;
 *   - then through a scheduler of max_batch B = 1, 2, 3 and 8 (2 threads): 8 client
 *     threads, each with its own session, start 0..14 ms apart (staggered arrivals, late
 *     joiners, and with B < 8 a line waiting for places); each must give the reference
 *     codes and audio. At B = 3 one more request cancels from its audio callback after a
 *     few frames: it returns KZ_STATUS_CANCELLED and the others are unaffected.
 *   - then through a scheduler of max_batch B = 8 and 4 with the 8 clients released
 *     together once their sessions exist (simultaneous arrivals: prefills side by side on
 *     halves of the pool, all prefills before the first round, the first codec chunks
 *     before the next round; at B = 4 half of them wait in line), same checks;
 *   - the scheduler's counters: frames >= the frames delivered, steps <= frames (== at
 *     B = 1, where every round holds one request), nothing active or waiting at the end.
 * Bad parameters and a scheduler of another model are refused with clear errors; freeing a
 * scheduler a session still uses is refused.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kztts.h"
#include "test.h"

#define N_REQ 8
#define MAX_FRAMES 64
#define MAX_SAMPLES (MAX_FRAMES * 4096)

static const char *const TEXTS[N_REQ] = {
    "Hello there.", "A second voice speaks here.", "Numbers: one, two, three.",
    "Streaming text arrives piece by piece.", "Short.", "The quick brown fox jumps.",
    "Batching must not change a single bit.", "Last one, late."};

/* One request's output. */
typedef struct result {
    int32_t codes[MAX_FRAMES * 32];
    int64_t n_frames;
    int32_t groups;
    float *audio;
    size_t n_samples;
    bool overflow;
    int cancel_after;   /* > 0: the audio callback cancels once this many frames came */
    kz_status st;
    char error[256];
    /* streamed text */
    const char *pull_text;
    size_t pull_pos;
} result;

static bool on_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    result *r = user;
    if (pos >= MAX_FRAMES || n > 32) {
        r->overflow = true;
        return false;
    }
    memcpy(r->codes + pos * n, codes, (size_t)n * sizeof(int32_t));
    r->groups = n;
    r->n_frames = pos + 1;
    return true;
}

static bool on_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)last;
    result *r = user;
    if (r->n_samples + n > MAX_SAMPLES) {
        r->overflow = true;
        return false;
    }
    memcpy(r->audio + r->n_samples, pcm, n * sizeof(float));
    r->n_samples += n;
    return !(r->cancel_after > 0 && pos + 1 >= r->cancel_after);
}

/* Hands out the text a few bytes at a time. */
static bool pull(char *buf, size_t cap, size_t *n_bytes, bool *done, void *user) {
    result *r = user;
    size_t left = strlen(r->pull_text) - r->pull_pos, n = left < 5 ? left : 5;
    n = n < cap ? n : cap;
    memcpy(buf, r->pull_text + r->pull_pos, n);
    r->pull_pos += n;
    *n_bytes = n;
    *done = r->pull_pos == strlen(r->pull_text);
    return true;
}

static void make_request(const kz_model *m, int i, result *r, kz_request *q) {
    kz_request_default_params(m, q);
    q->speaker = kz_model_speaker_name(m, i % kz_model_speaker_count(m));
    q->greedy = i % 2 == 0;
    q->seed = 1000 + (uint64_t)i;
    if (i == 4) {
        q->max_frames = 10 + 2 * i; // ends at end of speech or the cap
    } else {
        q->frames = 6 + 3 * i;
    }
    if (i == 3) {
        r->pull_text = TEXTS[i];
        r->pull_pos = 0;
        q->text_pull = pull;
    } else {
        q->text = TEXTS[i];
    }
    q->first_chunk_frames = 1;
    q->chunk_frames = 3;
    q->on_audio = on_audio;
    q->on_frame = on_frame;
    q->user = r;
}

static void reset(result *r) {
    float *audio = r->audio;
    memset(r, 0, sizeof *r);
    r->audio = audio;
}

static void synth(kz_session *s, const kz_model *m, int i, result *r) {
    kz_request q;
    make_request(m, i, r, &q);
    r->st = kz_synthesize(s, &q);
    if (r->st != KZ_OK) {
        snprintf(r->error, sizeof r->error, "%s", kz_last_error());
    }
}

typedef struct client {
    const kz_model *m;
    kz_scheduler *sch;
    int index, delay_ms;
    pthread_barrier_t *start; /* released together (then no delay), or NULL */
    result *r;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    kz_session_params p;
    kz_session_default_params(&p);
    p.n_threads = 1;
    p.scheduler = c->sch;
    kz_session *s = NULL;
    c->r->st = kz_session_new(c->m, &p, &s);
    if (c->start) {
        pthread_barrier_wait(c->start);
    } else {
        nanosleep(&(struct timespec){.tv_nsec = (long)c->delay_ms * 1000000L}, NULL);
    }
    if (c->r->st == KZ_OK) {
        synth(s, c->m, c->index, c->r);
    } else {
        snprintf(c->r->error, sizeof c->r->error, "%s", kz_last_error());
    }
    kz_session_free(s);
    return NULL;
}

static bool same(const result *a, const result *b) {
    return a->n_frames == b->n_frames && a->groups == b->groups &&
           memcmp(a->codes, b->codes, (size_t)(a->n_frames * a->groups) * sizeof(int32_t)) == 0 &&
           a->n_samples == b->n_samples &&
           memcmp(a->audio, b->audio, a->n_samples * sizeof(float)) == 0;
}

static void run_alone(const kz_model *m, result *ref) {
    kz_session_params p;
    kz_session_default_params(&p);
    p.n_threads = 2;
    kz_session *s = NULL;
    CHECK(kz_session_new(m, &p, &s) == KZ_OK);
    for (int i = 0; s && i < N_REQ; i++) {
        reset(&ref[i]);
        synth(s, m, i, &ref[i]);
        CHECK_MSG(ref[i].st == KZ_OK && !ref[i].overflow && ref[i].n_frames > 0,
                  "alone request %d: %s", i, ref[i].error);
    }
    kz_session_free(s);
}

/* The 8 requests (and at B = 3 a cancelling ninth) through a scheduler of max_batch B,
 * staggered or released together. */
static void run_batched(const kz_model *m, int B, bool together, const result *ref,
                        result *out) {
    kz_scheduler_params sp;
    kz_scheduler_default_params(&sp);
    sp.n_threads = 2;
    sp.max_batch = B;
    kz_scheduler *sch = NULL;
    CHECK(kz_scheduler_new(m, &sp, &sch) == KZ_OK);
    if (!sch) {
        return;
    }
    const int n = B == 3 ? N_REQ + 1 : N_REQ;
    client c[N_REQ + 1];
    pthread_t th[N_REQ + 1];
    pthread_barrier_t start;
    CHECK(pthread_barrier_init(&start, NULL, (unsigned)n) == 0);
    for (int i = 0; i < n; i++) {
        reset(&out[i]);
        const int index = i < N_REQ ? i : 1; // the ninth: request 1 again, cancelled
        out[i].cancel_after = i < N_REQ ? 0 : 4;
        c[i] = (client){.m = m, .sch = sch, .index = index, .delay_ms = (i * 2) % 15,
                        .start = together ? &start : NULL, .r = &out[i]};
        if (pthread_create(&th[i], NULL, client_main, &c[i]) != 0) {
            // the barrier would wait for it forever: nothing can be checked
            fprintf(stderr, "test_scheduler: cannot start client thread %d\n", i);
            exit(1);
        }
    }
    int64_t delivered = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        delivered += out[i].n_frames;
        if (i < N_REQ) {
            CHECK_MSG(out[i].st == KZ_OK && same(&out[i], &ref[i]),
                      "B=%d%s request %d: status %d (%s), %lld frames, %zu samples; alone "
                      "%lld frames, %zu samples", B, together ? " together" : "", i,
                      (int)out[i].st, out[i].error, (long long)out[i].n_frames, out[i].n_samples,
                      (long long)ref[i].n_frames, ref[i].n_samples);
        } else {
            CHECK_MSG(out[i].st == KZ_STATUS_CANCELLED, "B=%d cancelled request: status %d", B,
                      (int)out[i].st);
            CHECK_MSG(out[i].n_frames >= 4 && out[i].n_frames < ref[1].n_frames,
                      "B=%d cancelled request stopped after %lld frames", B,
                      (long long)out[i].n_frames);
        }
    }
    kz_scheduler_stats st;
    kz_scheduler_get_stats(sch, &st);
    CHECK_MSG(st.active == 0 && st.waiting == 0, "B=%d after: %d active, %d waiting", B,
              st.active, st.waiting);
    CHECK_MSG(st.frames >= delivered && st.steps >= 1 && st.steps <= st.frames,
              "B=%d counters: %lld steps, %lld frames, %lld delivered", B, (long long)st.steps,
              (long long)st.frames, (long long)delivered);
    CHECK_MSG(B > 1 || st.steps == st.frames, "B=1: %lld steps for %lld frames",
              (long long)st.steps, (long long)st.frames);
    CHECK(st.prefills >= n);

    kz_scheduler_free(sch);
    pthread_barrier_destroy(&start);
}

static void check_refusals(const char *path, const kz_model *m) {
    kz_scheduler_params sp;
    kz_scheduler_default_params(&sp);
    kz_scheduler *sch = NULL;
    sp.max_batch = 65;
    CHECK(kz_scheduler_new(m, &sp, &sch) == KZ_STATUS_INVALID_ARGUMENT && !sch);
    CHECK_STR_CONTAINS(kz_last_error(), "max_batch");
    sp.max_batch = 0;
    sp.n_threads = -1;
    CHECK(kz_scheduler_new(m, &sp, &sch) == KZ_STATUS_INVALID_ARGUMENT && !sch);
    CHECK_STR_CONTAINS(kz_last_error(), "n_threads");
    CHECK(kz_scheduler_new(NULL, NULL, &sch) == KZ_STATUS_INVALID_ARGUMENT);
    // a session of another model (the same files loaded again) cannot use it
    kz_model *other = NULL;
    CHECK(kz_model_load(path, NULL, &other) == KZ_OK);
    CHECK(kz_scheduler_new(m, NULL, &sch) == KZ_OK);
    kz_session_params p;
    kz_session_default_params(&p);
    p.scheduler = sch;
    kz_session *s = NULL;
    if (other && sch) {
        CHECK(kz_session_new(other, &p, &s) == KZ_STATUS_INVALID_ARGUMENT && !s);
        CHECK_STR_CONTAINS(kz_last_error(), "another model");
    }
    // freeing it while a session still uses it is refused (logged), not a use after free
    if (sch && kz_session_new(m, &p, &s) == KZ_OK) {
        kz_scheduler_free(sch);
        kz_scheduler_stats st;
        kz_scheduler_get_stats(sch, &st);
        CHECK(st.active == 0);
        kz_session_free(s);
    }
    kz_scheduler_free(sch);
    kz_model_free(other);
}

static void run_model(const char *path) {
    kz_model *m = NULL;
    CHECK_MSG(kz_model_load(path, NULL, &m) == KZ_OK, "load %s: %s", path, kz_last_error());
    if (!m) {
        return;
    }
    result *ref = calloc(N_REQ, sizeof *ref), *out = calloc(N_REQ + 1, sizeof *out);
    for (int i = 0; i < N_REQ + 1; i++) {
        out[i].audio = malloc(MAX_SAMPLES * sizeof(float));
        if (i < N_REQ) {
            ref[i].audio = malloc(MAX_SAMPLES * sizeof(float));
        }
    }
    run_alone(m, ref);
    const int batches[] = {1, 2, 3, 8};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        run_batched(m, batches[b], false, ref, out);
    }
    run_batched(m, 8, true, ref, out);
    run_batched(m, 4, true, ref, out);
    check_refusals(path, m);
    for (int i = 0; i < N_REQ + 1; i++) {
        free(out[i].audio);
        if (i < N_REQ) {
            free(ref[i].audio);
        }
    }
    free(ref);
    free(out);
    kz_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_scheduler TINY_CHECKPOINT\n");
        return 2;
    }
    run_model(argv[1]);
    char dir[] = "/tmp/kz_sched_XXXXXX";
    if (mkdtemp(dir)) {
        char gguf[sizeof dir + 16];
        snprintf(gguf, sizeof gguf, "%s/q8.gguf", dir);
        kz_quantize_params qp;
        kz_quantize_default_params(&qp);
        CHECK_MSG(kz_quantize(argv[1], gguf, &qp) == KZ_OK, "quantize: %s", kz_last_error());
        run_model(gguf);
        unlink(gguf);
        rmdir(dir);
    }
    return test_main_result("test_scheduler");
}
