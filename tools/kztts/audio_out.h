/*
 * audio_out.h - writing PCM to a file or stdout without ever leaving a half file.
 *
 * A file is written under a temporary name in the destination's folder
 * (OUT.partial-XXXXXX) and renamed to OUT only by audio_out_finish(true); any
 * failure or audio_out_finish(false) removes it. Formats: wav (16-bit PCM),
 * flac, ogg (Vorbis) through libsndfile; f32 (raw float32 LE) and s16 (raw
 * int16 LE). "-" writes to stdout (wav there carries the total length when
 * known, else maximal sizes, the streaming convention players accept); nothing
 * reaches stdout before the first samples, so a request that fails first (bad
 * text, no tokenizer, ...) leaves it empty.
 */
#ifndef KZ_AUDIO_OUT_H
#define KZ_AUDIO_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct audio_out audio_out;

/* Returns 0 when `name` is a known format ("wav", "f32", "s16", "flac", "ogg"). */
int audio_format_check(const char *name);

/* Opens the destination. total_samples is the final length when known (needed
 * for an exact wav header on stdout), else 0. On failure prints one line and returns NULL. */
audio_out *audio_out_open(const char *path, const char *format, int32_t sample_rate,
                          size_t total_samples);

/* Appends samples in [-1, 1]. Returns 0, or -1 after printing the problem. */
int audio_out_write(audio_out *o, const float *pcm, size_t n_samples);

/* Pushes buffered audio to the destination now (streaming). Returns 0 or -1. */
int audio_out_flush(audio_out *o);

/* success: flush, close and rename into place; otherwise close and delete.
 * Returns 0 on success. Frees o. */
int audio_out_finish(audio_out *o, bool success);

#endif
