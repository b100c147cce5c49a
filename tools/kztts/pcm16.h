/*
 * pcm16.h - the one float-to-16-bit rounding of the CLI and the server: every 16-bit
 * output (s16, wav, flac, and the samples fed to the mp3, opus and aac encoders) takes
 * its samples from pcm16_from_float, so the formats agree sample for sample.
 */
#ifndef KZ_PCM16_H
#define KZ_PCM16_H

#include <math.h>
#include <stdint.h>

/* v scaled by 32767, clipped to the int16 range, rounded to nearest (ties to even, the
 * default rounding mode). NaN becomes 0. */
static inline int16_t pcm16_from_float(float v) {
    float s = v * 32767.0f;
    s = s > 32767.0f ? 32767.0f : s < -32768.0f ? -32768.0f : s;
    return s == s ? (int16_t)lrintf(s) : 0;
}

#endif
