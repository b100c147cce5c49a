/*
 * speed.h - speaking-rate change that keeps the pitch (libsonic, made for speech), as
 * a stream: PCM in at any pace, PCM out as soon as it is ready, so a streamed response
 * stays streamed. Speed 1 passes samples through untouched (bit-exact).
 */
#ifndef KZ_SPEED_H
#define KZ_SPEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct speed_change speed_change;

/* A stream at sample_rate Hz (mono) played speed times as fast, speed in [0.25, 4].
 * NULL when out of memory. */
speed_change *speed_change_new(int32_t sample_rate, float speed);

/* Feeds n samples (last: no more follow, flush everything) and points *out at the
 * samples ready now (valid until the next call; *n_out may be 0). Returns 0 or -1 (out
 * of memory). */
int speed_change_run(speed_change *s, const float *pcm, size_t n, bool last, const float **out,
                     size_t *n_out);

void speed_change_free(speed_change *s);

#endif
