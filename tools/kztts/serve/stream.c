/*
 * stream.c - the byte stream between a synthesis worker and the connection sending it
 * (stream.h).
 *
 * Data flow: the worker appends encoded audio with stream_write and ends with
 * stream_close or stream_fail; the connection thread waits for the first bytes
 * (stream_wait_start) to choose between a 200 and an error, then pulls bytes with
 * stream_read at increasing offsets. The buffer only grows on the producer side, so a
 * slow client never blocks the worker; the consumer's offset tells which bytes were sent,
 * and those are dropped (compacted) before the buffer grows again, so memory holds only
 * what the client has not taken yet.
 *
 * One mutex guards everything; one condition variable (on CLOCK_MONOTONIC, so a clock
 * change cannot stretch a wait) wakes the consumer on new bytes, the end, a failure or a
 * cancel. The producer never waits.
 */
#include "stream.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct stream {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    atomic_int refs;
    atomic_bool cancelled;
    unsigned char *data;  // bytes [base, base + n_data) of the stream, at data[start..]
    size_t start;         // bytes at the front of data already sent
    size_t n_data;        // bytes held, from data[start]
    size_t cap;           // allocated bytes of data
    size_t base;          // stream offset of data[start]
    bool closed;
    bool failed;
    http_error error;
    double t_start;       // monotonic seconds at stream_new
    double first_audio_ms;
    double audio_seconds;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

stream *stream_new(void) {
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        return NULL;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc_cond = pthread_cond_init(&s->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc_cond != 0) {
        free(s);
        return NULL;
    }
    if (pthread_mutex_init(&s->mutex, NULL) != 0) {
        pthread_cond_destroy(&s->cond);
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    atomic_init(&s->cancelled, false);
    s->t_start = now_seconds();
    s->first_audio_ms = -1.0;
    return s;
}

void stream_ref(stream *s) {
    atomic_fetch_add(&s->refs, 1);
}

void stream_unref(stream *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) {
        return;
    }
    pthread_mutex_destroy(&s->mutex);
    pthread_cond_destroy(&s->cond);
    free(s->data);
    free(s);
}

/* Room for n more bytes: sent bytes are dropped first, then the buffer doubles. */
static int reserve(stream *s, size_t n) {
    if (s->start > 0 && s->start + s->n_data + n > s->cap) {
        memmove(s->data, s->data + s->start, s->n_data);
        s->start = 0;
    }
    if (s->n_data + n <= s->cap) {
        return 0;
    }
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n_data + n) {
        if (cap > SIZE_MAX / 2) {
            return -1;
        }
        cap *= 2;
    }
    unsigned char *data = realloc(s->data, cap);
    if (!data) {
        return -1;
    }
    s->data = data;
    s->cap = cap;
    return 0;
}

int stream_write(stream *s, const void *bytes, size_t n) {
    pthread_mutex_lock(&s->mutex);
    int rc = 0;
    if (atomic_load(&s->cancelled) || s->closed || s->failed) {
        rc = -1;
    } else if (n > 0) {
        if (reserve(s, n) != 0) {
            // Out of memory: the response cannot be completed, so it ends as a failure.
            s->failed = true;
            s->error = (http_error){.status = 500, .type = "server_error",
                                   .code = "out_of_memory",
                                   .message = "out of memory while buffering the response"};
            rc = -1;
        } else {
            memcpy(s->data + s->start + s->n_data, bytes, n);
            s->n_data += n;
        }
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->mutex);
    return rc;
}

void stream_close(stream *s) {
    pthread_mutex_lock(&s->mutex);
    if (!s->failed) {
        s->closed = true;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mutex);
}

void stream_fail(stream *s, const http_error *e) {
    pthread_mutex_lock(&s->mutex);
    if (!s->closed && !s->failed) {
        s->failed = true;
        s->error = *e;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mutex);
}

bool stream_cancelled(const stream *s) {
    return atomic_load(&s->cancelled);
}

void stream_cancel(stream *s) {
    pthread_mutex_lock(&s->mutex);
    atomic_store(&s->cancelled, true);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mutex);
}

void stream_add_audio(stream *s, double seconds) {
    pthread_mutex_lock(&s->mutex);
    s->audio_seconds += seconds;
    pthread_mutex_unlock(&s->mutex);
}

void stream_mark_first_audio(stream *s) {
    pthread_mutex_lock(&s->mutex);
    if (s->first_audio_ms < 0) {
        s->first_audio_ms = (now_seconds() - s->t_start) * 1e3;
    }
    pthread_mutex_unlock(&s->mutex);
}

/* The absolute CLOCK_MONOTONIC time timeout_ms from now. */
static struct timespec deadline_after(int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Bytes ever written (sent ones included). */
static size_t written_total(const stream *s) {
    return s->base + s->n_data;
}

stream_state stream_wait_start(stream *s, int timeout_ms, http_error *e) {
    struct timespec until = deadline_after(timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&s->mutex);
    stream_state state = STREAM_WAITING;
    for (;;) {
        if (written_total(s) > 0) {
            state = STREAM_DATA;
        } else if (s->failed) {
            state = STREAM_FAILED;
            if (e) {
                *e = s->error;
            }
        } else if (s->closed) {
            state = STREAM_DONE;
        }
        if (state != STREAM_WAITING || atomic_load(&s->cancelled)) {
            break;
        }
        if (pthread_cond_timedwait(&s->cond, &s->mutex, &until) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&s->mutex);
    return state;
}

/* Drops the bytes before pos (the consumer has sent them). */
static void drop_before(stream *s, size_t pos) {
    size_t n_drop = pos - s->base;
    if (n_drop > s->n_data) {
        n_drop = s->n_data;
    }
    s->start += n_drop;
    s->n_data -= n_drop;
    s->base += n_drop;
    if (s->n_data == 0) {
        s->start = 0;
    }
}

ssize_t stream_read(stream *s, size_t pos, void *buf, size_t max, int timeout_ms) {
    struct timespec until = deadline_after(timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&s->mutex);
    ssize_t rc = 0;
    if (pos < s->base) {
        rc = -2; // those bytes were dropped: a consumer that went back cannot be served
    }
    while (rc == 0) {
        if (pos > written_total(s)) {
            rc = -2;
            break;
        }
        drop_before(s, pos);
        if (s->n_data > 0 && max > 0) {
            size_t n = s->n_data < max ? s->n_data : max;
            if (n > (size_t)SSIZE_MAX) {
                n = (size_t)SSIZE_MAX;
            }
            memcpy(buf, s->data + s->start, n);
            rc = (ssize_t)n;
        } else if (atomic_load(&s->cancelled) || s->failed) {
            rc = -2;
        } else if (s->closed) {
            rc = -1;
        } else if (pthread_cond_timedwait(&s->cond, &s->mutex, &until) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&s->mutex);
    return rc;
}

double stream_audio_seconds(const stream *s) {
    stream *m = (stream *)s; // the mutex is not part of the value
    pthread_mutex_lock(&m->mutex);
    double seconds = m->audio_seconds;
    pthread_mutex_unlock(&m->mutex);
    return seconds;
}

double stream_first_audio_ms(const stream *s) {
    stream *m = (stream *)s;
    pthread_mutex_lock(&m->mutex);
    double ms = m->first_audio_ms;
    pthread_mutex_unlock(&m->mutex);
    return ms;
}
