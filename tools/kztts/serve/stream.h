/*
 * stream.h - the bytes of one streamed response between the worker that synthesizes
 * them and the connection thread that sends them: a growing buffer (the worker never
 * waits for a slow client), a done/failed state, a cancel flag for a client that left,
 * and the request's audio statistics for the log line and the metrics.
 *
 * Reference counted: the handler creates it (1), the job and the HTTP layer each hold a
 * reference; the last stream_unref frees it. All functions are thread-safe.
 */
#ifndef KZ_STREAM_H
#define KZ_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http.h"

typedef struct stream stream;

stream *stream_new(void); /* NULL when out of memory */
void stream_ref(stream *s);
void stream_unref(stream *s);

/* Producer (worker). stream_write returns 0, or -1 when the stream was cancelled. */
int stream_write(stream *s, const void *bytes, size_t n);
void stream_close(stream *s);                      /* all bytes written */
void stream_fail(stream *s, const http_error *e);  /* failed: before any byte, the handler
                                                      answers with e; after, the body is cut */
bool stream_cancelled(const stream *s);
void stream_add_audio(stream *s, double seconds);  /* audio produced, for stats */
void stream_mark_first_audio(stream *s);           /* first audio bytes are about to go out */

/* Consumer (connection). */
typedef enum stream_state { STREAM_WAITING, STREAM_DATA, STREAM_DONE, STREAM_FAILED } stream_state;
/* Waits up to timeout_ms for the first bytes or the end: STREAM_DATA when bytes are
 * there, STREAM_DONE (closed with no bytes), STREAM_FAILED (*e filled), or
 * STREAM_WAITING on timeout. */
stream_state stream_wait_start(stream *s, int timeout_ms, http_error *e);
/* Copies up to max bytes at offset pos of the stream into buf, waiting up to timeout_ms
 * for them: > 0 bytes copied, 0 on timeout, -1 at the end (all sent), -2 failed after
 * bytes were sent (cut the response). */
ssize_t stream_read(stream *s, size_t pos, void *buf, size_t max, int timeout_ms);
void stream_cancel(stream *s);                     /* the client went away */

/* Stats, read when the response is done. */
double stream_audio_seconds(const stream *s);
double stream_first_audio_ms(const stream *s);     /* since stream_new; < 0 if none */

#endif
