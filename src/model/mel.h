/*
 * mel.h - the speaker encoder's log-mel spectrogram (spec 5.1): 24 kHz mono audio ->
 * [F, 128] time-major, as the official mel_spectrogram with the arguments
 * extract_speaker_embedding passes (n_fft 1024, Hann window 1024, hop 256, 128 Slaney
 * mels over 0..12 kHz, reflect padding of 384, no centering).
 *
 *   pcm [n] --reflect pad 384--> frames of 1024 every 256 --periodic Hann--> real FFT
 *       --sqrt(re^2 + im^2 + 1e-9)--> |X| [513] --filterbank [128 x 513]--> ln(max(., 1e-5))
 *
 * Window, filterbank (librosa's, computed in float64 and stored as float32) and FFT
 * tables are built once by kz_mel_init; a run allocates nothing and splits the frames
 * over the pool, each frame computed by one thread the same way, so the result does not
 * depend on the thread count.
 */
#ifndef KZ_MEL_H
#define KZ_MEL_H

#include <stddef.h>

#include "layers/conv.h"

enum {
    KZ_MEL_N_FFT = 1024,
    KZ_MEL_HOP = 256,
    KZ_MEL_BINS = KZ_MEL_N_FFT / 2 + 1,
    KZ_MEL_PAD = (KZ_MEL_N_FFT - KZ_MEL_HOP) / 2,
    KZ_MEL_N_MELS = 128
};

typedef struct kz_mel {
    float *window;  /* [n_fft] periodic Hann */
    float *filters; /* [n_mels, KZ_MEL_BINS] filterbank, read over [lo, hi) per mel */
    int lo[KZ_MEL_N_MELS], hi[KZ_MEL_N_MELS]; /* each filter's nonzero bins */
    double *twiddle; /* [n_fft / 2] e^{-2 pi i k / n_fft} as (re, im) pairs */
    int *bitrev;     /* [n_fft / 2] bit-reversal permutation of the half-size FFT */
} kz_mel;

/* Builds the tables for sample_rate Hz (the official spectrogram is fixed at 24 kHz:
 * fmax = 12 kHz). KZ_STATUS_OUT_OF_MEMORY on failure (m is then empty). */
kz_status kz_mel_init(kz_mel *m, int sample_rate);
void kz_mel_free(kz_mel *m);

/* Frames of n samples: (n + 2 * 384 - 1024) / 256 + 1; 0 when n is too short for the
 * reflect padding (n <= 384). */
size_t kz_mel_frames(size_t n);

/* Floats of scratch a run needs per pool thread. */
size_t kz_mel_scratch_floats(void);

/* out[f * 128 + j] = log-mel of frame f (kz_mel_frames(n) > 0 rows). scratch holds
 * kz_mel_scratch_floats() floats per thread of e->pool. Adds its FLOP to e->flop. */
void kz_mel_run(const kz_mel *m, const float *pcm, size_t n, kz_exec *e, float *scratch,
                float *out);

#endif
