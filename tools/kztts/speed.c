/*
 * speed.c - the pitch-preserving speed change of speed.h on libsonic.
 *
 * Data flow: float PCM -> sonicWriteFloatToStream (pieces) -> sonic's pitch-synchronous
 *            overlap-add -> sonicReadFloatFromStream -> `out` (grown as needed) -> caller
 * Speed 1 never touches sonic: *out is the caller's own pcm, so the samples are the
 * input's bit for bit and nothing is delayed. At other speeds sonic keeps up to a pitch
 * period or two of input until more arrives; `last` flushes it.
 */
#include "speed.h"

#include <sonic.h>
#include <stdlib.h>

enum { PIECE = 1 << 16 }; /* samples handed to sonic per call (its counts are ints) */

struct speed_change {
    sonicStream sonic; /* NULL at speed 1 */
    float *out;
    size_t n_out, cap_out;
};

speed_change *speed_change_new(int32_t sample_rate, float speed) {
    if (sample_rate <= 0 || !(speed >= 0.25f && speed <= 4.0f)) {
        return NULL;
    }
    speed_change *s = calloc(1, sizeof *s);
    if (!s || speed == 1.0f) {
        return s;
    }
    if (!(s->sonic = sonicCreateStream(sample_rate, 1))) {
        free(s);
        return NULL;
    }
    sonicSetSpeed(s->sonic, speed);
    return s;
}

/* Appends everything sonic has ready to out. */
static int drain(speed_change *s) {
    const int ready = sonicSamplesAvailable(s->sonic);
    if (ready <= 0) {
        return 0;
    }
    if (s->n_out + (size_t)ready > s->cap_out) {
        size_t cap = s->cap_out ? s->cap_out : 4096;
        while (cap < s->n_out + (size_t)ready) {
            cap *= 2;
        }
        float *p = realloc(s->out, cap * sizeof *p);
        if (!p) {
            return -1;
        }
        s->out = p;
        s->cap_out = cap;
    }
    s->n_out += (size_t)sonicReadFloatFromStream(s->sonic, s->out + s->n_out, ready);
    return 0;
}

int speed_change_run(speed_change *s, const float *pcm, size_t n, bool last, const float **out,
                     size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (!s->sonic) {
        *out = pcm;
        *n_out = n;
        return 0;
    }
    s->n_out = 0;
    for (size_t i = 0; i < n; i += PIECE) {
        const int m = (int)(n - i < PIECE ? n - i : PIECE);
        // sonic's interface takes a non-const pointer but only reads the samples.
        if (!sonicWriteFloatToStream(s->sonic, (float *)(pcm + i), m) || drain(s) != 0) {
            return -1;
        }
    }
    if (last && (!sonicFlushStream(s->sonic) || drain(s) != 0)) {
        return -1;
    }
    *out = s->out;
    *n_out = s->n_out;
    return 0;
}

void speed_change_free(speed_change *s) {
    if (s) {
        if (s->sonic) {
            sonicDestroyStream(s->sonic);
        }
        free(s->out);
        free(s);
    }
}
