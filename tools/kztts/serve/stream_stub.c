/*
 * stream_stub.c - SCAFFOLD: an empty stream until the speech helper's stream.c replaces
 * this file (delete it at that merge). Nothing creates streams while speech is a stub.
 */
#include <stdlib.h>

#include "stream.h"

struct stream {
    int refs;
};

stream *stream_new(void) {
    stream *s = calloc(1, sizeof *s);
    if (s) {
        s->refs = 1;
    }
    return s;
}

void stream_ref(stream *s) {
    s->refs++;
}

void stream_unref(stream *s) {
    if (s && --s->refs == 0) {
        free(s);
    }
}

ssize_t stream_read(stream *s, size_t pos, void *buf, size_t max, int timeout_ms) {
    (void)s;
    (void)pos;
    (void)buf;
    (void)max;
    (void)timeout_ms;
    return -1;
}

void stream_cancel(stream *s) {
    (void)s;
}

double stream_audio_seconds(const stream *s) {
    (void)s;
    return 0;
}

double stream_first_audio_ms(const stream *s) {
    (void)s;
    return -1;
}
