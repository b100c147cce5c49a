/*
 * audio_in.c - reference audio made ready for the encoders (kz_audio_prepare_reference):
 *
 *   interleaved [n_frames, channels] at sample_rate
 *     -> arguments, length (1 s .. max_seconds) and finiteness checked
 *     -> channel mean, streamed into resample.c's input chunks (libsoxr) when
 *        sample_rate != out_rate, else written straight to the output
 *     -> mono [n_out] at out_rate -> refused when silent
 *
 * The official pipeline (Qwen3TTSModel._normalize_audio_inputs and
 * Qwen3TTSTokenizer._normalize_audio_inputs; librosa.load's to_mono for a path) takes
 * np.mean over the channel axis of float32 samples: numpy's float32 sum along the
 * (contiguous) channel axis, its pairwise_sum, divided by the channel count in float32;
 * downmix() adds in that same order, so the mean is numpy's to the bit (up to the sign
 * of a zero). It neither normalises nor clips, and resamples only when the rate differs
 * from the model's.
 * librosa refuses non-finite samples (util.valid_audio, "Audio buffer is not finite
 * everywhere") when it downmixes or resamples; kztts refuses them always. The length
 * and silence limits are kztts's own: the official code accepts any length.
 */
#include "audio/audio_in.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audio/resample.h"
#include "runtime/error.h"

#define MIN_RATE 8000
#define MAX_RATE 384000
#define MAX_CHANNELS 64
/* Silence: every sample of the mono signal at out_rate has |x| below this (-80 dBFS,
 * about 3 LSB of 16-bit audio), so digital silence or dither alone is refused while any
 * audible recording passes. */
#define SILENCE_PEAK 1e-4f

typedef struct downmix_state {
    const float *samples; /* [n_frames, channels] */
    size_t n_frames, pos_frame;
    int32_t channels;
} downmix_state;

/* The sum of one frame's channels in numpy's order for a float32 row shorter than its
 * pairwise block (128 terms): one by one below 8 terms; else 8 running sums over the
 * whole groups of 8, added as a tree, then the rest one by one. */
static float numpy_sum(const float *x, int32_t n) {
    float sum = 0.0f;
    int32_t i = 0;
    if (n >= 8) {
        float r[8];
        memcpy(r, x, sizeof r);
        for (i = 8; i < n - n % 8; i += 8) {
            for (int j = 0; j < 8; j++) {
                r[j] += x[i + j];
            }
        }
        sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    }
    for (; i < n; i++) {
        sum += x[i];
    }
    return sum;
}

/* The channel mean of the next frames into buf[cap]; how many (kz_resample_read_fn). */
static size_t downmix(void *state, float *buf, size_t cap) {
    downmix_state *d = state;
    size_t n = d->n_frames - d->pos_frame < cap ? d->n_frames - d->pos_frame : cap;
    const float *x = d->samples + d->pos_frame * (size_t)d->channels;
    float count = (float)d->channels;
    for (size_t i = 0; i < n; i++, x += d->channels) {
        buf[i] = numpy_sum(x, d->channels) / count;
    }
    d->pos_frame += n;
    return n;
}

static kz_status check_arguments(const float *samples, int32_t sample_rate, int32_t channels,
                                 int32_t out_rate, double max_seconds, float **mono,
                                 size_t *n_out) {
    if (!samples || !mono || !n_out) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "reference audio: NULL argument");
    }
    if (sample_rate < MIN_RATE || sample_rate > MAX_RATE) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "reference audio: sample rate %d Hz; %d..%d are accepted",
                            (int)sample_rate, MIN_RATE, MAX_RATE);
    }
    if (channels < 1 || channels > MAX_CHANNELS) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "reference audio: %d channels; 1..%d are accepted", (int)channels,
                            MAX_CHANNELS);
    }
    if (out_rate < MIN_RATE || out_rate > MAX_RATE) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "reference audio: output rate %d Hz; %d..%d are accepted",
                            (int)out_rate, MIN_RATE, MAX_RATE);
    }
    if (!(max_seconds >= 1 && max_seconds <= KZ_AUDIO_MAX_SECONDS)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "reference audio: max_seconds %g; 1..%d are accepted", max_seconds,
                            KZ_AUDIO_MAX_SECONDS);
    }
    return KZ_OK;
}

/* At least 1 s, at most max_seconds, judged on the input before any work. */
static kz_status check_length(size_t n_frames, int32_t sample_rate, double max_seconds) {
    double seconds = (double)n_frames / sample_rate;
    if (n_frames == 0) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "reference audio is empty");
    }
    if (n_frames < (size_t)sample_rate) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "reference audio is %.2f s long; at least 1 s is needed", seconds);
    }
    if ((double)n_frames > max_seconds * sample_rate) {
        // Neutral: how to raise the limit is the caller's to say (a CLI option, an API
        // field), and a server's clients cannot raise it at all.
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "reference audio is %.1f s long, over the limit of %g s", seconds,
                            max_seconds);
    }
    return KZ_OK;
}

static kz_status check_finite(const float *samples, size_t n_frames, int32_t channels) {
    /* Within max_seconds this holds on 64-bit hosts; a 32-bit one could overflow. */
    if (n_frames > SIZE_MAX / sizeof(float) / (size_t)channels) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "reference audio: %zu frames of %d channels: too many", n_frames,
                            (int)channels);
    }
    size_t n = n_frames * (size_t)channels;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(samples[i])) {
            return kz_error_set(KZ_STATUS_BAD_INPUT,
                                "reference audio: the sample of frame %zu, channel %d is %s",
                                i / (size_t)channels, (int)(i % (size_t)channels),
                                isnan(samples[i]) ? "NaN" : "infinite");
        }
    }
    return KZ_OK;
}

static kz_status check_not_silent(const float *mono, size_t n) {
    float peak = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(mono[i]);
        peak = a > peak ? a : peak;
    }
    if (peak < SILENCE_PEAK) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "reference audio is silent: its loudest sample (after the channel "
                            "mean) is %.3g, below %.0e (-80 dBFS)",
                            peak, SILENCE_PEAK);
    }
    return KZ_OK;
}

kz_status kz_audio_prepare_reference(const float *samples, size_t n_frames, int32_t sample_rate,
                                     int32_t channels, int32_t out_rate, double max_seconds,
                                     float **mono, size_t *n_out) {
    if (mono) {
        *mono = NULL;
    }
    if (n_out) {
        *n_out = 0;
    }
    kz_status st =
        check_arguments(samples, sample_rate, channels, out_rate, max_seconds, mono, n_out);
    if (st != KZ_OK) {
        return st;
    }
    if ((st = check_length(n_frames, sample_rate, max_seconds)) != KZ_OK ||
        (st = check_finite(samples, n_frames, channels)) != KZ_OK) {
        return st;
    }
    size_t n =
        sample_rate == out_rate ? n_frames : kz_resample_length(n_frames, sample_rate, out_rate);
    float *out = malloc(n * sizeof *out);
    if (!out) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "reference audio: out of memory");
    }
    downmix_state d = {.samples = samples, .n_frames = n_frames, .channels = channels};
    if (sample_rate == out_rate) {
        downmix(&d, out, n);
    } else {
        st = kz_resample(sample_rate, out_rate, downmix, &d, out, n);
    }
    if (st == KZ_OK) {
        st = check_not_silent(out, n);
    }
    if (st != KZ_OK) {
        free(out);
        return st;
    }
    *mono = out;
    *n_out = n;
    return KZ_OK;
}
