/*
 * audio_in.h - reference audio into the library: a file (libsndfile) or samples in
 * memory -> mono float at the model's rate (channel mean, then libsoxr resampling as
 * the official pipeline's librosa.resample does) -> checked for length and silence.
 */
#ifndef KZ_AUDIO_IN_H
#define KZ_AUDIO_IN_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* The longest reference any caller may allow (kz_voice_params.max_seconds' upper bound). */
#define KZ_AUDIO_MAX_SECONDS 600

/* Reads an audio file: *samples (malloc'd) [*n_frames, *channels] interleaved floats.
 * KZ_STATUS_IO when it cannot be opened (missing, unreadable, not a regular file),
 * KZ_STATUS_BAD_INPUT when it is not audio libsndfile can read, is empty, fails to
 * decode, has a rate or channel count kz_audio_prepare_reference refuses, or lasts over
 * KZ_AUDIO_MAX_SECONDS (or 2^28 samples); the message names the file. Outputs are
 * cleared on failure. */
kz_status kz_audio_read_file(const char *path, float **samples, size_t *n_frames,
                             int32_t *sample_rate, int32_t *channels);

/* Checks interleaved input (rate 8000..384000, channels 1..64, every sample finite),
 * downmixes to mono by the channel mean and resamples to out_rate: *mono (malloc'd)
 * [*n_out]. Then refuses, with KZ_STATUS_BAD_INPUT and a one-line reason, audio shorter
 * than 1 s, longer than max_seconds, or silent (no sample of the mono output reaches
 * 1e-4, -80 dBFS). Rates, channels, out_rate (8000..384000) and max_seconds
 * (1..KZ_AUDIO_MAX_SECONDS; callers resolve kz_voice_params' 0) outside their ranges, or
 * NULL pointers, are KZ_STATUS_INVALID_ARGUMENT. *mono and *n_out are cleared on failure.
 * *n_out is n_frames at out_rate == sample_rate, else ceil(n_frames * out_rate /
 * sample_rate) as librosa.resample gives. */
kz_status kz_audio_prepare_reference(const float *samples, size_t n_frames,
                                     int32_t sample_rate, int32_t channels, int32_t out_rate,
                                     double max_seconds, float **mono, size_t *n_out);

#endif
