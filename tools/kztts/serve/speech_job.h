/*
 * speech_job.h - one speech request as a job for the workers (jobs.h): what the handler
 * resolved (speech.c), and the worker's run that turns it into response bytes.
 *
 * Data flow on the worker: kz_synthesize -> on_audio (PCM) -> speed change (speed != 1)
 * -> audio encoder -> the stream (stream.h), each chunk as soon as it is decoded; with
 * stream_format sse each encoded piece is wrapped as a speech.audio.delta event and the
 * end as speech.audio.done with the usage. The job ends the stream (close, or fail with
 * an OpenAI error) and frees itself.
 */
#ifndef KZ_SPEECH_JOB_H
#define KZ_SPEECH_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve.h"
#include "speech_args.h"
#include "stream.h"

typedef struct audio_enc audio_enc;
typedef struct speed_change speed_change;

typedef struct speech_job {
    /* Set by the handler before the job is submitted. */
    server *server;
    stream *stream;        /* the job's own reference (released by speech_job_free) */
    speech_args args;      /* owned */
    const char *speaker;   /* CustomVoice: the model's spelling of the speaker (static) */
    const char *language;  /* the model's spelling, NULL for auto (static) */
    kz_voice *voice;       /* Base: an uploaded voice (owned); NULL: clone from ref_audio */
    double deadline;       /* speech_now() seconds after which the request is abandoned;
                              0: none */
    /* The worker's state. */
    int32_t sample_rate;
    audio_enc *enc;        /* made at the first audio, so nothing is sent before it */
    speed_change *speed;
    unsigned char *pending; /* encoded bytes not yet in the stream */
    size_t n_pending, cap_pending;
    size_t n_written;      /* bytes put into the stream */
    int64_t n_frames;      /* codec frames generated (usage output_tokens) */
    bool timed_out;
    http_error error;      /* the failure that stopped the job (param: a literal) */
    bool failed;
} speech_job;

/* A zeroed job; NULL when out of memory. */
speech_job *speech_job_new(void);

/* Frees everything the job owns, the stream reference included. NULL allowed. */
void speech_job_free(speech_job *j);

/* The job function (job_fn): synthesizes, encodes, ends the stream, frees j. */
void speech_job_run(kz_session *session, void *arg);

/* Monotonic clock in seconds (deadlines). */
double speech_now(void);

#endif
