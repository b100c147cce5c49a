/*
 * speech_job.c - the worker side of POST /v1/audio/speech (speech_job.h).
 *
 * Data flow: speech_job_run clones the voice from ref_audio if the request carries one,
 * builds the kz_request and calls kz_synthesize. Each audio callback goes through the
 * speed change (when speed != 1) into the encoder, whose sink collects the bytes in
 * `pending`; after each callback they go into the stream, raw or as one SSE delta event,
 * so every chunk leaves as soon as it is decoded. The encoder is made at the first audio,
 * so a request that fails before any sound sends nothing and the handler answers with a
 * proper error status. The callbacks stop the synthesis (return false) once the client
 * has gone (stream cancelled) or the request's deadline has passed: within one frame.
 * At the end: the speed change and the encoder are flushed, SSE gets speech.audio.done
 * with the usage, and the stream is closed; a failure fails the stream (before any byte:
 * the handler answers with it; after: the body is cut, or for SSE a speech.audio.error
 * event ends it).
 */
#include "speech_job.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio_enc.h"
#include "base64.h"
#include "metrics.h"
#include "speech_refusal.h"
#include "speed.h"
#include "voices.h"

double speech_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

speech_job *speech_job_new(void) {
    return calloc(1, sizeof(speech_job));
}

void speech_job_free(speech_job *j) {
    if (!j) {
        return;
    }
    audio_enc_free(j->enc);
    speed_change_free(j->speed);
    kz_voice_free(j->voice);
    speech_args_free(&j->args);
    free(j->pending);
    if (j->stream) {
        stream_unref(j->stream);
    }
    free(j);
}

/* Records the job's failure (the first one counts). param must be a literal. */
static void job_fail(speech_job *j, int status, const char *type, const char *param,
                     const char *code, const char *message) {
    if (j->failed) {
        return;
    }
    j->failed = true;
    j->error = (http_error){.status = status, .type = type, .param = param, .code = code};
    snprintf(j->error.message, sizeof j->error.message, "%s", message);
}

/* Whether the synthesis may go on: the client is there and the deadline not passed. */
static bool job_alive(speech_job *j) {
    if (stream_cancelled(j->stream)) {
        return false;
    }
    if (j->deadline > 0 && speech_now() > j->deadline) {
        j->timed_out = true;
        char msg[160];
        snprintf(msg, sizeof msg, "The request took longer than the server's request timeout "
                 "(%g s).", j->server->cfg->request_timeout);
        job_fail(j, 503, "unavailable", NULL, "timeout", msg);
        return false;
    }
    return true;
}

/* ---- bytes out: raw, or as SSE events -------------------------------------- */

static int stream_put(speech_job *j, const void *bytes, size_t n) {
    if (stream_write(j->stream, bytes, n) != 0) {
        return -1;
    }
    j->n_written += n;
    return 0;
}

/* One `data: <json>\n\n` event from a cJSON object (consumed). */
static int put_event(speech_job *j, cJSON *event) {
    char *json = event ? cJSON_PrintUnformatted(event) : NULL;
    cJSON_Delete(event);
    if (!json) {
        job_fail(j, 500, "server_error", NULL, "out_of_memory", "out of memory");
        return -1;
    }
    int rc = stream_put(j, "data: ", 6);
    rc = rc == 0 ? stream_put(j, json, strlen(json)) : rc;
    rc = rc == 0 ? stream_put(j, "\n\n", 2) : rc;
    free(json);
    return rc;
}

/* data: {"type":"speech.audio.delta","audio":"<base64>"} written without building a
 * cJSON copy of the (large) base64 text. */
static int put_delta(speech_job *j, const unsigned char *bytes, size_t n) {
    static const char head[] = "data: {\"type\":\"speech.audio.delta\",\"audio\":\"";
    static const char tail[] = "\"}\n\n";
    size_t n_b64 = base64_encoded_size(n);
    char *event = malloc(sizeof head + n_b64 + sizeof tail);
    if (!event) {
        job_fail(j, 500, "server_error", NULL, "out_of_memory", "out of memory");
        return -1;
    }
    memcpy(event, head, sizeof head - 1);
    size_t len = sizeof head - 1;
    len += base64_encode(bytes, n, event + len);
    memcpy(event + len, tail, sizeof tail - 1);
    len += sizeof tail - 1;
    int rc = stream_put(j, event, len);
    free(event);
    return rc;
}

/* Moves the encoder's pending bytes into the stream. */
static int flush_pending(speech_job *j) {
    if (j->n_pending == 0) {
        return 0;
    }
    int rc = j->args.sse ? put_delta(j, j->pending, j->n_pending)
                         : stream_put(j, j->pending, j->n_pending);
    j->n_pending = 0;
    return rc;
}

/* The encoder's sink: collects bytes until the callback that produced them returns. */
static int collect(const void *bytes, size_t n_bytes, void *user) {
    speech_job *j = user;
    if (stream_cancelled(j->stream)) {
        return -1;
    }
    if (j->n_pending + n_bytes > j->cap_pending) {
        size_t cap = j->cap_pending ? j->cap_pending : 16384;
        while (cap < j->n_pending + n_bytes) {
            cap *= 2;
        }
        unsigned char *p = realloc(j->pending, cap);
        if (!p) {
            job_fail(j, 500, "server_error", NULL, "out_of_memory", "out of memory");
            return -1;
        }
        j->pending = p;
        j->cap_pending = cap;
    }
    memcpy(j->pending + j->n_pending, bytes, n_bytes);
    j->n_pending += n_bytes;
    return 0;
}

static int ensure_encoder(speech_job *j) {
    if (j->enc) {
        return 0;
    }
    char err[160] = "";
    j->enc = audio_enc_new(j->args.response_format, j->sample_rate, 0, collect, j, err,
                           sizeof err);
    if (!j->enc) {
        job_fail(j, 500, "server_error", NULL, "encoder_failed", err);
        return -1;
    }
    return 0;
}

/* Encodes n samples (after the speed change) and sends what the encoder produced. */
static int emit_audio(speech_job *j, const float *pcm, size_t n) {
    if (n == 0) {
        return 0;
    }
    if (ensure_encoder(j) != 0) {
        return -1;
    }
    stream_mark_first_audio(j->stream);
    if (audio_enc_write(j->enc, pcm, n) != 0) {
        if (!stream_cancelled(j->stream)) {
            job_fail(j, 500, "server_error", NULL, "encoder_failed", audio_enc_error(j->enc));
        }
        return -1;
    }
    stream_add_audio(j->stream, (double)n / j->sample_rate);
    return flush_pending(j);
}

/* ---- synthesis callbacks ------------------------------------------------------ */

static bool on_audio(const float *pcm, size_t n_samples, int64_t pos_frame, bool is_last,
                     void *user) {
    (void)pos_frame;
    speech_job *j = user;
    if (!job_alive(j)) {
        return false;
    }
    const float *out = pcm;
    size_t n_out = n_samples;
    if (j->speed && speed_change_run(j->speed, pcm, n_samples, is_last, &out, &n_out) != 0) {
        job_fail(j, 500, "server_error", NULL, "out_of_memory", "out of memory");
        return false;
    }
    return emit_audio(j, out, n_out) == 0;
}

static bool on_frame(const int32_t *codes, int32_t n_codebooks, int64_t pos_frame, void *user) {
    (void)codes;
    (void)n_codebooks;
    (void)pos_frame;
    speech_job *j = user;
    j->n_frames++;
    metrics_frame(j->server->metrics);
    return job_alive(j);
}

/* ---- the job -------------------------------------------------------------------- */

/* Base with ref_audio: the voice is cloned here, on the worker, where the compute is. */
static int clone_voice(speech_job *j, kz_session *session) {
    if (j->voice || j->args.task != SPEECH_TASK_BASE || !j->args.ref_audio) {
        return 0;
    }
    if (!j->server->voices) {
        job_fail(j, 500, "server_error", NULL, NULL, "the voice store is not open");
        return -1;
    }
    kz_experimental_session_info info = {0};
    kz_experimental_session_get_info(session, &info);
    http_error e = {0};
    if (voices_from_data_uri(j->server->voices, j->args.ref_audio, j->args.ref_text,
                             j->args.x_vector_only, info.n_threads, &j->voice, &e) != 0) {
        job_fail(j, e.status ? e.status : 400, e.type ? e.type : "invalid_request_error",
                 "ref_audio", e.code, e.message);
        return -1;
    }
    return 0;
}

/* A seed for a request without one, different for every request (as vLLM-Omni and
 * OpenAI behave: asking twice gives two takes): splitmix64's finalizer over the wall
 * clock and a per-process counter. */
static uint64_t fresh_seed(void) {
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    z += (uint64_t)atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_request(speech_job *j, kz_request *r) {
    const speech_args *a = &j->args;
    *r = (kz_request){0};
    r->text = a->input;
    r->speaker = j->speaker;
    r->voice = j->voice;
    r->language = j->language;
    if (a->task != SPEECH_TASK_BASE && a->instructions && a->instructions[0]) {
        r->instruct = a->instructions;
    }
    r->greedy = a->greedy;
    r->temperature = a->temperature;
    r->top_k = a->top_k;
    r->top_p = a->top_p;
    r->repetition_penalty = a->repetition_penalty;
    r->seed = a->has_seed ? a->seed : fresh_seed();
    r->max_frames = a->max_frames;
    r->first_chunk_frames = 1; // the first audio leaves after one frame
    r->on_audio = on_audio;
    r->on_frame = on_frame;
    r->user = j;
}

/* kz_synthesize's status as an HTTP error (kz_last_error is this thread's message); a
 * refusal names the request field it concerns (speech_refusal.h). */
static void fail_from_status(speech_job *j, kz_status st) {
    if (j->failed || st == KZ_STATUS_CANCELLED) {
        return; // the callback that stopped it said why, or the client left
    }
    bool client = st == KZ_STATUS_INVALID_ARGUMENT || st == KZ_STATUS_BAD_INPUT ||
                  st == KZ_STATUS_UNSUPPORTED;
    char msg[384];
    snprintf(msg, sizeof msg, "%s", kz_last_error()[0] ? kz_last_error() : kz_status_str(st));
    job_fail(j, client ? 400 : 500, client ? "invalid_request_error" : "server_error",
             client ? speech_refusal_param(&j->args, msg) : NULL,
             client ? "invalid_value" : "synthesis_failed", msg);
}

static int synthesize(speech_job *j, kz_session *session) {
    j->sample_rate = kz_model_sample_rate(j->server->model);
    if (j->args.speed != 1.0f) {
        j->speed = speed_change_new(j->sample_rate, j->args.speed);
        if (!j->speed) {
            job_fail(j, 500, "server_error", NULL, "out_of_memory", "out of memory");
            return -1;
        }
    }
    kz_request r;
    fill_request(j, &r);
    kz_status st = kz_synthesize(session, &r);
    if (st != KZ_OK) {
        fail_from_status(j, st);
        return -1;
    }
    return 0;
}

/* Input text tokens for the usage (0 if the text cannot be tokenized). */
static int64_t input_tokens(const speech_job *j) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (kz_tokenize(j->server->model, j->args.input, KZ_TEXT_SPLIT_QWEN2, &ids, &n_ids) != KZ_OK) {
        return 0;
    }
    kz_ids_free(ids);
    return (int64_t)n_ids;
}

static int put_done_event(speech_job *j) {
    int64_t n_in = input_tokens(j);
    cJSON *event = cJSON_CreateObject();
    cJSON *usage = cJSON_CreateObject();
    if (!event || !usage) {
        cJSON_Delete(event);
        cJSON_Delete(usage);
        return put_event(j, NULL);
    }
    cJSON_AddStringToObject(event, "type", "speech.audio.done");
    cJSON_AddNumberToObject(usage, "input_tokens", (double)n_in);
    cJSON_AddNumberToObject(usage, "output_tokens", (double)j->n_frames);
    cJSON_AddNumberToObject(usage, "total_tokens", (double)(n_in + j->n_frames));
    cJSON_AddItemToObject(event, "usage", usage);
    return put_event(j, event);
}

/* After a complete synthesis: the encoder's trailer, then SSE's done event. */
static int finish(speech_job *j) {
    if (ensure_encoder(j) != 0) {
        return -1;
    }
    if (audio_enc_finish(j->enc) != 0) {
        job_fail(j, 500, "server_error", NULL, "encoder_failed", audio_enc_error(j->enc));
        return -1;
    }
    if (flush_pending(j) != 0) {
        return -1;
    }
    return j->args.sse ? put_done_event(j) : 0;
}

/* speech.audio.error: how an SSE stream that already sent events reports a failure. */
static void put_error_event(speech_job *j) {
    cJSON *event = cJSON_CreateObject();
    cJSON *error = cJSON_CreateObject();
    if (!event || !error) {
        cJSON_Delete(event);
        cJSON_Delete(error);
        return;
    }
    cJSON_AddStringToObject(event, "type", "speech.audio.error");
    cJSON_AddStringToObject(error, "message", j->error.message);
    cJSON_AddStringToObject(error, "type", j->error.type ? j->error.type : "server_error");
    if (j->error.param) {
        cJSON_AddStringToObject(error, "param", j->error.param);
    } else {
        cJSON_AddNullToObject(error, "param");
    }
    if (j->error.code) {
        cJSON_AddStringToObject(error, "code", j->error.code);
    } else {
        cJSON_AddNullToObject(error, "code");
    }
    cJSON_AddItemToObject(event, "error", error);
    put_event(j, event);
}

/* Ends the stream: closed on success or when nobody listens any more; failed otherwise. */
static void end_stream(speech_job *j, int rc) {
    if (rc == 0 || stream_cancelled(j->stream)) {
        stream_close(j->stream);
        return;
    }
    if (!j->failed) {
        job_fail(j, 500, "server_error", NULL, NULL, "the response could not be written");
    }
    if (j->timed_out && j->n_written > 0) {
        metrics_rejected(j->server->metrics, "timeout"); // before bytes the handler counts it
    }
    if (j->args.sse && j->n_written > 0) {
        put_error_event(j);
        stream_close(j->stream);
        return;
    }
    stream_fail(j->stream, &j->error);
}

void speech_job_run(kz_session *session, void *arg) {
    speech_job *j = arg;
    int rc = job_alive(j) ? 0 : -1;
    rc = rc == 0 ? clone_voice(j, session) : rc;
    rc = rc == 0 && job_alive(j) ? synthesize(j, session) : -1;
    rc = rc == 0 ? finish(j) : rc;
    end_stream(j, rc);
    speech_job_free(j);
}
