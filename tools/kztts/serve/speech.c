/*
 * speech.c - POST /v1/audio/speech: the handler on the connection's thread.
 *
 * Data flow: refuse while loading or draining (503 + Retry-After); parse the body
 * (speech_args.c, 400s); resolve the voice for the model's task (CustomVoice: a speaker
 * of the model, 404 voice_not_found otherwise; VoiceDesign: the instructions describe
 * it; Base: an uploaded voice from the store, or ref_audio cloned later on the worker)
 * and the language; then queue a job (speech_job.c) that writes into a fresh stream
 * (429 + Retry-After when the queue is full, 503 once the queue is closed) and wait for
 * its first bytes. Bytes, or a clean end, answer 200 with the format's Content-Type and
 * the stream as a chunked body; a failure before any byte answers with its error. While
 * waiting, a client that leaves cancels the job and a request past its timeout is
 * abandoned, so no worker is held for nobody.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "audio_enc.h"
#include "http.h"
#include "jobs.h"
#include "metrics.h"
#include "serve.h"
#include "speech_job.h"
#include "voices.h"

/* How often the wait for the first bytes looks at the client and the clock. */
#define SPEECH_POLL_MS 20

/* Seconds a refused client is told to wait before retrying. */
#define RETRY_AFTER_BUSY "1"
#define RETRY_AFTER_UNAVAILABLE "5"

static void send_unavailable(http_req *r, const char *code, const char *message) {
    http_error e;
    http_error_set(&e, 503, "unavailable", NULL, code, "%s", message);
    http_add_header(r, "Retry-After", RETRY_AFTER_UNAVAILABLE);
    http_send_error(r, &e);
}

/* CustomVoice: the speaker named by voice (any case), in the model's spelling. */
static int resolve_speaker(const server *s, speech_job *j, http_error *e) {
    const char *voice = j->args.voice;
    int32_t n = kz_model_speaker_count(s->model);
    char list[256] = "";
    for (int32_t i = 0; i < n; i++) {
        const char *name = kz_model_speaker_name(s->model, i);
        if (strcasecmp(name, voice) == 0) {
            j->speaker = name;
            return 0;
        }
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", name);
    }
    return http_error_set(e, 404, "invalid_request_error", "voice", "voice_not_found",
                          "Voice '%.64s' not found; this model's voices: %s.", voice, list);
}

/* Base without ref_audio: voice names an uploaded voice. */
static int resolve_uploaded(const server *s, speech_job *j, http_error *e) {
    const char *voice = j->args.voice;
    if (!s->voices || !voices_name_ok(voice)) {
        return http_error_set(e, 404, "invalid_request_error", "voice", "voice_not_found",
                              "Voice '%.64s' not found: upload it with POST /v1/audio/voices "
                              "or send ref_audio.", voice);
    }
    int rc = voices_get(s->voices, voice, &j->voice, e);
    if (rc != 0 && e->param) {
        e->param = "voice"; // a literal: the job's strings go when it ends
    }
    return rc;
}

static int resolve_voice(const server *s, speech_job *j, http_error *e) {
    switch (j->args.task) {
    case SPEECH_TASK_CUSTOM_VOICE:
        return resolve_speaker(s, j, e);
    case SPEECH_TASK_VOICE_DESIGN:
        return 0; // the instructions are the voice
    case SPEECH_TASK_BASE:
        return j->args.ref_audio ? 0 : resolve_uploaded(s, j, e);
    }
    return 0;
}

/* language: auto (NULL) or one of the model's, matched in any case. */
static int resolve_language(const server *s, speech_job *j, http_error *e) {
    const char *lang = j->args.language;
    if (!lang || !lang[0] || strcasecmp(lang, "auto") == 0) {
        j->language = NULL;
        return 0;
    }
    int32_t n = kz_model_language_count(s->model);
    char list[320] = "auto";
    for (int32_t i = 0; i < n; i++) {
        const char *name = kz_model_language_name(s->model, i);
        if (strcasecmp(name, lang) == 0) {
            j->language = name;
            return 0;
        }
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, ", %s", name);
    }
    return http_error_set(e, 400, "invalid_request_error", "language", "invalid_value",
                          "Unsupported language '%.64s'; this model speaks: %s.", lang, list);
}

/* Parses and resolves the request into j. 0, or the status with e filled. */
static int prepare(const server *s, http_req *r, speech_job *j, http_error *e) {
    size_t n_body = 0;
    const char *body = http_body(r, &n_body);
    int rc = speech_args_parse(body, n_body, s->cfg->max_input_chars, kz_model_type(s->model),
                               &j->args, e);
    rc = rc == 0 ? resolve_voice(s, j, e) : rc;
    rc = rc == 0 ? resolve_language(s, j, e) : rc;
    if (rc == 0 && s->cfg->request_timeout > 0) {
        j->deadline = speech_now() + s->cfg->request_timeout;
    }
    return rc;
}

static const char *content_type(const speech_job *j) {
    return j->args.sse ? "text/event-stream" : audio_enc_content_type(j->args.response_format);
}

/* Waits for the job's first bytes, then answers. deadline 0: none. */
static void respond(server *s, http_req *r, stream *st, const char *ctype, double deadline) {
    http_error e = {0};
    stream_state state;
    while ((state = stream_wait_start(st, SPEECH_POLL_MS, &e)) == STREAM_WAITING) {
        if (http_client_gone(r)) {
            stream_cancel(st);
            http_error_set(&e, 499, "invalid_request_error", NULL, "client_closed",
                           "The client closed the connection.");
            http_send_error(r, &e);
            return;
        }
        // A grace second lets a running job report its own timeout first.
        if (deadline > 0 && speech_now() > deadline + 1.0) {
            stream_cancel(st);
            metrics_rejected(s->metrics, "timeout");
            send_unavailable(r, "timeout", "The request waited longer than the server's "
                             "request timeout.");
            return;
        }
    }
    if (state == STREAM_FAILED) {
        if (e.code && strcmp(e.code, "timeout") == 0) {
            metrics_rejected(s->metrics, "timeout");
            http_add_header(r, "Retry-After", RETRY_AFTER_UNAVAILABLE);
        }
        http_send_error(r, &e);
        return;
    }
    if (http_send_stream(r, 200, ctype, st) != 0) {
        stream_cancel(st);
    }
}

/* Queues j; on refusal answers and frees j. Returns whether it was queued. */
static bool submit(server *s, http_req *r, speech_job *j) {
    jobs_result rc = jobs_submit(s->jobs, speech_job_run, j);
    if (rc == JOBS_OK) {
        return true;
    }
    speech_job_free(j);
    if (rc == JOBS_FULL) {
        http_error e;
        metrics_rejected(s->metrics, "queue_full");
        http_error_set(&e, 429, "rate_limit_error", NULL, "queue_full",
                       "The server is busy: every worker is synthesizing and the queue is "
                       "full. Retry shortly.");
        http_add_header(r, "Retry-After", RETRY_AFTER_BUSY);
        http_send_error(r, &e);
    } else {
        metrics_rejected(s->metrics, "draining");
        send_unavailable(r, "draining", "The server is shutting down; retry on another "
                         "replica.");
    }
    return false;
}

void speech_handle(server *s, http_req *r) {
    if (atomic_load(&s->draining)) {
        metrics_rejected(s->metrics, "draining");
        send_unavailable(r, "draining", "The server is shutting down; retry on another "
                         "replica.");
        return;
    }
    if (!atomic_load(&s->ready)) {
        send_unavailable(r, "loading", "The model is still loading; retry shortly.");
        return;
    }
    speech_job *j = speech_job_new();
    stream *st = stream_new();
    http_error e = {0};
    if (!j || !st) {
        speech_job_free(j);
        stream_unref(st);
        http_error_set(&e, 500, "server_error", NULL, "out_of_memory", "Out of memory.");
        http_send_error(r, &e);
        return;
    }
    j->server = s;
    if (prepare(s, r, j, &e) != 0) {
        http_send_error(r, &e); // before freeing j: e.param may point into its document
        speech_job_free(j);
        stream_unref(st);
        return;
    }
    const char *ctype = content_type(j);
    double deadline = j->deadline;
    stream_ref(st);
    j->stream = st; // the job's reference; from here the job owns j and frees it
    if (submit(s, r, j)) {
        respond(s, r, st, ctype, deadline);
    }
    stream_unref(st);
}
