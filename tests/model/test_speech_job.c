/*
 * test_speech_job.c - the worker side of POST /v1/audio/speech
 * (tools/kztts/serve/speech_job.c) on the tiny CustomVoice checkpoint, without HTTP.
 *
 * Dataflow: a speech_job built as the handler builds it -> speech_job_run on a real
 *        session -> the stream's bytes, read as the connection reads them -> compared
 *        with kz_synthesize_all of the same request turned into 16-bit samples (the
 *        reference: the server must send exactly the engine's audio), with the SSE
 *        events decoded, with each format's signature, and with the error the handler
 *        would send. The voice store and the metrics are doubles defined here.
 *
 * Covers: wav (streaming header + samples) and pcm bit-exact against the whole-buffer
 * call with the same seed and sampling fields; SSE deltas that decode to the same bytes,
 * then speech.audio.done with input tokens (kz_tokenize), output tokens (frames) and
 * their sum, each frame also counted for the metrics; mp3, opus, aac and flac signatures; speed 2 and 0.5 lengths; a client that
 * leaves after the first bytes stops the synthesis (no audio after the cancel beyond
 * the callback in flight); a request past its deadline fails before any byte with 503
 * timeout; an engine refusal (top_k beyond the vocabulary) fails before any byte with a
 * 400, the engine's message and param top_k.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base64.h"
#include "pcm16.h"
#include "speech_job.h"
#include "test.h"
#include "voices.h"

/* ---- doubles for what the job calls beyond the engine and the encoders -------- */

static int n_rejected_timeout;
static int n_frames_counted;

void metrics_frame(metrics *m) {
    (void)m;
    n_frames_counted++;
}

void metrics_rejected(metrics *m, const char *reason) {
    (void)m;
    if (strcmp(reason, "timeout") == 0) {
        n_rejected_timeout++;
    }
}

int voices_from_data_uri(voices *v, const char *uri, const char *ref_text, bool xvector_only,
                         int n_threads, kz_voice **out, http_error *e) {
    (void)v, (void)uri, (void)ref_text, (void)xvector_only, (void)n_threads;
    *out = NULL;
    *e = (http_error){.status = 400, .type = "invalid_request_error", .param = "ref_audio",
                      .code = "invalid_base64", .message = "bad base64 (test double)"};
    return 400;
}

/* ---- running a job ----------------------------------------------------------------- */

static kz_model *model;
static kz_session *session;
static serve_config cfg = {.request_timeout = 600};
static server srv;

/* A job for body (parsed as the handler parses it) with the speaker resolved. */
static speech_job *make_job(const char *body) {
    speech_job *j = speech_job_new();
    http_error e;
    int rc = speech_args_parse(body, strlen(body), 4096, kz_model_type(model), &j->args, &e);
    CHECK_MSG(rc == 0, "%s: %s", body, e.message);
    j->server = &srv;
    j->speaker = j->args.voice ? kz_model_speaker_name(model, 0) : NULL;
    j->stream = stream_new();
    return j;
}

typedef struct output {
    unsigned char *bytes;
    size_t n_bytes;
    stream_state start;  /* what stream_wait_start said first */
    http_error error;    /* when it failed before any byte */
    ssize_t end;         /* stream_read's last result: -1 end, -2 cut */
    double audio_seconds;
} output;

/* Reads the whole stream as the connection does. */
static void read_stream(stream *st, output *o) {
    memset(o, 0, sizeof *o);
    int waits = 0;
    while ((o->start = stream_wait_start(st, 100, &o->error)) == STREAM_WAITING && ++waits < 3000) {
    }
    if (o->start != STREAM_DATA && o->start != STREAM_DONE) {
        return;
    }
    size_t cap = 1 << 16;
    o->bytes = malloc(cap);
    for (int timeouts = 0; timeouts < 3000;) {
        if (o->n_bytes + 4096 > cap) {
            cap *= 2;
            o->bytes = realloc(o->bytes, cap);
        }
        ssize_t n = stream_read(st, o->n_bytes, o->bytes + o->n_bytes, 4096, 100);
        if (n < 0) {
            o->end = n;
            break;
        }
        timeouts += n == 0;
        o->n_bytes += (size_t)n;
    }
}

/* Runs the job for body on this thread, then reads what it left in the stream. */
static void run(const char *body, output *o) {
    speech_job *j = make_job(body);
    stream *st = j->stream;
    stream_ref(st);
    speech_job_run(session, j); // frees j
    read_stream(st, o);
    o->audio_seconds = stream_audio_seconds(st);
    stream_unref(st);
}

/* The reference: the same request through kz_synthesize_all, as 16-bit samples. */
static int16_t *reference(const char *body, size_t *n_samples) {
    speech_job *j = make_job(body);
    kz_request r = {.text = j->args.input, .speaker = j->speaker, .seed = j->args.seed,
                    .temperature = j->args.temperature, .top_k = j->args.top_k,
                    .max_frames = j->args.max_frames, .first_chunk_frames = 1};
    kz_audio audio;
    CHECK_EQ_INT(kz_synthesize_all(session, &r, &audio), KZ_OK);
    int16_t *s16 = malloc((audio.n_samples + 1) * sizeof *s16);
    for (size_t i = 0; i < audio.n_samples; i++) {
        s16[i] = pcm16_from_float(audio.samples[i]);
    }
    *n_samples = audio.n_samples;
    kz_audio_free(&audio);
    speech_job_free(j);
    return s16;
}

static bool same_samples(const unsigned char *bytes, const int16_t *ref, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int16_t v = (int16_t)(bytes[2 * i] | bytes[2 * i + 1] << 8);
        if (v != ref[i]) {
            fprintf(stderr, "sample %zu: %d, reference %d\n", i, v, ref[i]);
            return false;
        }
    }
    return true;
}

#define BODY(fields) \
    "{\"model\":\"tts-1\",\"input\":\"Hello there. A second sentence.\",\"voice\":\"x\"," fields "}"
#define SAMPLING "\"seed\":7,\"temperature\":0.8,\"top_k\":30,\"max_new_tokens\":40"

static void test_wav_pcm_exact(void) {
    size_t n_ref;
    int16_t *ref = reference(BODY(SAMPLING), &n_ref);
    CHECK(n_ref > 0);
    output o;
    run(BODY(SAMPLING ",\"response_format\":\"wav\""), &o);
    CHECK_EQ_INT(o.start, STREAM_DATA);
    CHECK_EQ_INT(o.end, -1);
    CHECK_EQ_INT(o.n_bytes, 44 + 2 * n_ref);
    CHECK(o.n_bytes >= 44 && memcmp(o.bytes, "RIFF", 4) == 0 && memcmp(o.bytes + 8, "WAVE", 4) == 0);
    CHECK(o.n_bytes == 44 + 2 * n_ref && same_samples(o.bytes + 44, ref, n_ref));
    CHECK_NEAR(o.audio_seconds, (double)n_ref / kz_model_sample_rate(model), 1e-9);
    unsigned char *wav = o.bytes;
    size_t n_wav = o.n_bytes;

    run(BODY(SAMPLING ",\"response_format\":\"pcm\""), &o);
    CHECK_EQ_INT(o.n_bytes, 2 * n_ref);
    CHECK(o.n_bytes == 2 * n_ref && same_samples(o.bytes, ref, n_ref));
    free(o.bytes);

    // SSE: the deltas carry the same bytes, then done with the usage.
    const int frames_before = n_frames_counted;
    run(BODY(SAMPLING ",\"response_format\":\"wav\",\"stream_format\":\"sse\""), &o);
    const int frames_counted = n_frames_counted - frames_before; // the metrics saw each frame
    CHECK_EQ_INT(o.end, -1);
    char *text = malloc(o.n_bytes + 1);
    memcpy(text, o.bytes, o.n_bytes);
    text[o.n_bytes] = '\0';
    unsigned char *joined = malloc(n_wav + 1);
    size_t n_joined = 0;
    int n_deltas = 0, n_done = 0;
    cJSON *last = NULL;
    for (char *ev = text; ev && *ev;) {
        char *next = strstr(ev, "\n\n");
        CHECK_MSG(strncmp(ev, "data: ", 6) == 0 && next, "event: %.40s", ev);
        if (!next || strncmp(ev, "data: ", 6) != 0) {
            break;
        }
        *next = '\0';
        cJSON_Delete(last);
        last = cJSON_Parse(ev + 6);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(last, "type"));
        CHECK(type != NULL);
        if (type && strcmp(type, "speech.audio.delta") == 0) {
            CHECK_EQ_INT(n_done, 0);
            const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(last, "audio"));
            uint8_t *dec = NULL;
            size_t n_dec = 0;
            CHECK(b64 && base64_decode(b64, strlen(b64), &dec, &n_dec) == 0);
            if (dec && n_joined + n_dec <= n_wav) {
                memcpy(joined + n_joined, dec, n_dec);
            }
            n_joined += n_dec;
            free(dec);
            n_deltas++;
        } else if (type && strcmp(type, "speech.audio.done") == 0) {
            n_done++;
        }
        ev = next + 2;
    }
    CHECK(n_deltas >= 2); // the audio came in pieces as it was made
    CHECK_EQ_INT(n_done, 1);
    CHECK(n_joined == n_wav && memcmp(joined, wav, n_wav) == 0);
    cJSON *usage = cJSON_GetObjectItem(last, "usage");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK_EQ_INT(kz_tokenize(model, "Hello there. A second sentence.", KZ_TEXT_SPLIT_QWEN2, &ids,
                             &n_ids), KZ_OK);
    kz_ids_free(ids);
    int64_t n_frames = (int64_t)(n_ref / (size_t)kz_model_samples_per_frame(model));
    double in = cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "input_tokens"));
    double out = cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "output_tokens"));
    double total = cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "total_tokens"));
    CHECK_EQ_INT(in, n_ids);
    CHECK_EQ_INT(out, n_frames);
    CHECK_EQ_INT(total, n_ids + n_frames);
    CHECK_EQ_INT(frames_counted, n_frames);
    cJSON_Delete(last);
    free(joined);
    free(text);
    free(o.bytes);
    free(wav);
    free(ref);
}

static void test_formats_and_speed(void) {
    static const struct {
        const char *format;
        const char *magic;
        size_t n_magic;
    } formats[] = {
        {"opus", "OggS", 4}, {"flac", "fLaC", 4}, {"aac", "\xff", 1}, {"mp3", NULL, 0},
    };
    for (int i = 0; i < 4; i++) {
        char body[400];
        snprintf(body, sizeof body, BODY(SAMPLING ",\"response_format\":\"%s\""),
                 formats[i].format);
        output o;
        run(body, &o);
        CHECK_MSG(o.start == STREAM_DATA && o.end == -1 && o.n_bytes > 100, "%s: %zu bytes",
                  formats[i].format, o.n_bytes);
        if (formats[i].magic) {
            CHECK(o.n_bytes >= formats[i].n_magic &&
                  memcmp(o.bytes, formats[i].magic, formats[i].n_magic) == 0);
        } else {
            // MP3: an ID3 tag or a frame sync.
            CHECK(o.n_bytes >= 3 && (memcmp(o.bytes, "ID3", 3) == 0 ||
                                     (o.bytes[0] == 0xff && (o.bytes[1] & 0xe0) == 0xe0)));
        }
        free(o.bytes);
    }
    size_t n_ref;
    free(reference(BODY(SAMPLING), &n_ref));
    const double speeds[] = {2.0, 0.5};
    for (int i = 0; i < 2; i++) {
        char body[400];
        snprintf(body, sizeof body, BODY(SAMPLING ",\"response_format\":\"pcm\",\"speed\":%g"),
                 speeds[i]);
        output o;
        run(body, &o);
        double expect = (double)n_ref / speeds[i];
        double got = (double)o.n_bytes / 2;
        CHECK_MSG(got > expect * 0.97 && got < expect * 1.03, "speed %g: %.0f samples, %.0f "
                  "expected", speeds[i], got, expect);
        free(o.bytes);
    }
}

typedef struct runner {
    speech_job *job;
} runner;

static void *run_thread(void *arg) {
    runner *r = arg;
    speech_job_run(session, r->job);
    return NULL;
}

static void test_cancel(void) {
    // A long request whose client leaves once the first bytes are there.
    speech_job *j = make_job(BODY("\"seed\":3,\"max_new_tokens\":400,\"response_format\":\"pcm\""));
    stream *st = j->stream;
    stream_ref(st);
    runner r = {.job = j};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run_thread, &r) == 0);
    http_error e;
    stream_state state;
    int waits = 0;
    while ((state = stream_wait_start(st, 100, &e)) == STREAM_WAITING && ++waits < 3000) {
    }
    CHECK_EQ_INT(state, STREAM_DATA);
    stream_cancel(st);
    double at_cancel = stream_audio_seconds(st);
    pthread_join(t, NULL);
    double at_end = stream_audio_seconds(st);
    // At most the callback that was running when the client left (16 frames).
    double chunk_s = 16.0 * kz_model_samples_per_frame(model) / kz_model_sample_rate(model);
    CHECK_MSG(at_end <= at_cancel + chunk_s + 1e-9, "%.2f s at the cancel, %.2f s at the end",
              at_cancel, at_end);
    CHECK(at_end < 400 * 0.08 / 2);
    stream_unref(st);
}

static void test_failures(void) {
    // Past its deadline before it starts: 503 timeout, nothing sent.
    speech_job *j = make_job(BODY("\"response_format\":\"wav\""));
    j->deadline = speech_now() - 1;
    stream *st = j->stream;
    stream_ref(st);
    speech_job_run(session, j);
    output o;
    read_stream(st, &o);
    CHECK_EQ_INT(o.start, STREAM_FAILED);
    CHECK_EQ_INT(o.error.status, 503);
    CHECK(o.error.code && strcmp(o.error.code, "timeout") == 0);
    CHECK_EQ_INT(n_rejected_timeout, 0); // the handler counts a timeout before any byte
    stream_unref(st);

    // The engine refuses a value: 400 with its message, before any byte.
    run(BODY("\"top_k\":100000000,\"stream_format\":\"sse\""), &o);
    CHECK_EQ_INT(o.start, STREAM_FAILED);
    CHECK_EQ_INT(o.error.status, 400);
    CHECK_STR_CONTAINS(o.error.message, "top_k");
    CHECK_MSG(o.error.param && strcmp(o.error.param, "top_k") == 0, "param %s",
              o.error.param ? o.error.param : "NULL");
    free(o.bytes);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_speech_job TINY_CHECKPOINT\n");
        return 2;
    }
    if (kz_model_load(argv[1], NULL, &model) != KZ_OK ||
        kz_session_new(model, &(kz_session_params){.n_threads = 2}, &session) != KZ_OK) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], kz_last_error());
        return 1;
    }
    srv = (server){.cfg = &cfg, .model = model};
    test_wav_pcm_exact();
    test_formats_and_speed();
    test_cancel();
    test_failures();
    kz_session_free(session);
    kz_model_free(model);
    return test_main_result("test_speech_job");
}
