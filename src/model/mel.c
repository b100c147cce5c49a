/*
 * mel.c - the speaker encoder's log-mel spectrogram (see mel.h for the pipeline).
 *
 * Tables (kz_mel_init): the periodic Hann window, librosa's Slaney filterbank and the
 * FFT's twiddles and bit-reversal order. The filterbank follows librosa.filters.mel
 * step for step in float64 (bin frequencies k * sr / n_fft, 130 points equally spaced in
 * Slaney mel mapped back to Hz, triangular ramps), storing each row into float32 and
 * then multiplying it by the float64 area norm, a second rounding to float32, as
 * librosa's in-place `weights *= enorm` on its float32 array does.
 *
 * Per frame (kz_mel_run): the 1024 windowed samples (reflect-padded at the ends, read
 * through an index map instead of a padded copy) are multiplied in float32 as torch
 * does, then transformed in float64 as a 512-point complex FFT of the even/odd sample
 * pairs and split into the 513 bins of the real FFT; re and im are rounded to float32
 * and the magnitude, the filterbank sums and the log run in float32 like the reference.
 * Frames go to the pool in blocks; each thread has its own scratch.
 */
#include "model/mel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

enum { HALF = KZ_MEL_N_FFT / 2, FRAMES_PER_CHUNK = 8 };

static const double PI = 3.14159265358979323846;

/* --- filterbank (librosa, htk=False, norm='slaney') ---------------------------- */

static const double F_SP = 200.0 / 3, MIN_LOG_HZ = 1000.0;

static double hz_to_mel(double f) {
    const double min_log_mel = (MIN_LOG_HZ - 0.0) / F_SP, logstep = log(6.4) / 27.0;
    return f >= MIN_LOG_HZ ? min_log_mel + log(f / MIN_LOG_HZ) / logstep : (f - 0.0) / F_SP;
}

static double mel_to_hz(double mel) {
    const double min_log_mel = (MIN_LOG_HZ - 0.0) / F_SP, logstep = log(6.4) / 27.0;
    return mel >= min_log_mel ? MIN_LOG_HZ * exp(logstep * (mel - min_log_mel)) : 0.0 + F_SP * mel;
}

static void build_filters(kz_mel *m, int sample_rate) {
    enum { N_PTS = KZ_MEL_N_MELS + 2 };
    double mel_f[N_PTS];
    const double fmax = 0.5 * sample_rate, top = hz_to_mel(fmax), bottom = hz_to_mel(0.0);
    const double step = (top - bottom) / (N_PTS - 1); // numpy.linspace: i * step + start
    for (int i = 0; i < N_PTS; i++) {
        mel_f[i] = mel_to_hz(i == N_PTS - 1 ? top : i * step + bottom);
    }
    const double bin_hz = 1.0 / ((double)KZ_MEL_N_FFT * (1.0 / sample_rate)); // rfftfreq
    for (int i = 0; i < KZ_MEL_N_MELS; i++) {
        float *row = m->filters + (size_t)i * KZ_MEL_BINS;
        const double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        m->lo[i] = KZ_MEL_BINS;
        m->hi[i] = 0;
        for (int k = 0; k < KZ_MEL_BINS; k++) {
            const double f = k * bin_hz;
            const double lower = -(mel_f[i] - f) / (mel_f[i + 1] - mel_f[i]);
            const double upper = (mel_f[i + 2] - f) / (mel_f[i + 2] - mel_f[i + 1]);
            double w = lower < upper ? lower : upper;
            w = w > 0.0 ? w : 0.0;
            row[k] = (float)((double)(float)w * enorm);
            if (row[k] != 0.0f) {
                m->lo[i] = k < m->lo[i] ? k : m->lo[i];
                m->hi[i] = k + 1;
            }
        }
        if (m->hi[i] == 0) { // an empty filter (not with 24 kHz): sums nothing
            m->lo[i] = 0;
        }
    }
}

/* --- tables ------------------------------------------------------------------ */

kz_status kz_mel_init(kz_mel *m, int sample_rate) {
    memset(m, 0, sizeof *m);
    m->window = malloc(KZ_MEL_N_FFT * sizeof *m->window);
    m->filters = malloc((size_t)KZ_MEL_N_MELS * KZ_MEL_BINS * sizeof *m->filters);
    m->twiddle = malloc(2 * HALF * sizeof *m->twiddle);
    m->bitrev = malloc(HALF * sizeof *m->bitrev);
    if (!m->window || !m->filters || !m->twiddle || !m->bitrev) {
        kz_mel_free(m);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the mel tables");
    }
    for (int n = 0; n < KZ_MEL_N_FFT; n++) { // torch.hann_window: periodic
        m->window[n] = (float)(0.5 - 0.5 * cos(2.0 * PI * n / KZ_MEL_N_FFT));
    }
    for (int k = 0; k < HALF; k++) {
        m->twiddle[2 * k] = cos(2.0 * PI * k / KZ_MEL_N_FFT);
        m->twiddle[2 * k + 1] = -sin(2.0 * PI * k / KZ_MEL_N_FFT);
    }
    int bits = 0;
    while ((1 << bits) < HALF) {
        bits++;
    }
    for (int i = 0; i < HALF; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++) {
            r |= ((i >> b) & 1) << (bits - 1 - b);
        }
        m->bitrev[i] = r;
    }
    build_filters(m, sample_rate);
    return KZ_OK;
}

void kz_mel_free(kz_mel *m) {
    if (!m) {
        return;
    }
    free(m->window);
    free(m->filters);
    free(m->twiddle);
    free(m->bitrev);
    memset(m, 0, sizeof *m);
}

size_t kz_mel_frames(size_t n) {
    if (n <= KZ_MEL_PAD) {
        return 0;
    }
    return (n + 2 * KZ_MEL_PAD - KZ_MEL_N_FFT) / KZ_MEL_HOP + 1;
}

/* Per thread: the complex FFT buffer (HALF (re, im) doubles) and the magnitudes. */
size_t kz_mel_scratch_floats(void) {
    return 4 * HALF + KZ_MEL_BINS + 1;
}

/* --- one frame --------------------------------------------------------------- */

/* Sample i of the reflect-padded signal (i counts from the start of the padding). */
static float padded_at(const float *pcm, size_t n, size_t i) {
    ptrdiff_t j = (ptrdiff_t)i - KZ_MEL_PAD;
    if (j < 0) {
        j = -j;
    } else if (j >= (ptrdiff_t)n) {
        j = 2 * ((ptrdiff_t)n - 1) - j;
    }
    return pcm[j];
}

/* In-place radix-2 FFT of HALF complex values z (already in bit-reversed order). */
static void fft_half(const kz_mel *m, double *z) {
    for (int len = 2; len <= HALF; len *= 2) {
        const int stride = KZ_MEL_N_FFT / len; // twiddle index step: e^{-2 pi i j / len}
        for (int s = 0; s < HALF; s += len) {
            for (int j = 0; j < len / 2; j++) {
                const double wr = m->twiddle[2 * j * stride], wi = m->twiddle[2 * j * stride + 1];
                double *a = z + 2 * (s + j), *b = z + 2 * (s + j + len / 2);
                const double tr = b[0] * wr - b[1] * wi, ti = b[0] * wi + b[1] * wr;
                b[0] = a[0] - tr;
                b[1] = a[1] - ti;
                a[0] += tr;
                a[1] += ti;
            }
        }
    }
}

/* |X[k]| of the real FFT of frame x (n_fft samples packed as z[j] = x[2j] + i x[2j+1]
 * and transformed): X[k] = E[k] + W^k O[k], E/O the even/odd halves' spectra. */
static void magnitudes(const kz_mel *m, const double *z, float *mag) {
    for (int k = 0; k <= HALF; k++) {
        const int a_i = k % HALF, b_i = (HALF - k) % HALF;
        const double ar = z[2 * a_i], ai = z[2 * a_i + 1];
        const double br = z[2 * b_i], bi = -z[2 * b_i + 1]; // conj(Z[HALF - k])
        const double er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
        const double dr = 0.5 * (ar - br), di = 0.5 * (ai - bi);
        const double or_ = di, oi = -dr; // O = D / i
        double wr = 1.0, wi = 0.0;
        if (k == HALF) {
            wr = -1.0;
        } else if (k > 0) {
            wr = m->twiddle[2 * k];
            wi = m->twiddle[2 * k + 1];
        }
        const float re = (float)(er + wr * or_ - wi * oi), im = (float)(ei + wr * oi + wi * or_);
        mag[k] = sqrtf(re * re + im * im + 1e-9f);
    }
}

static void mel_frame(const kz_mel *m, const float *pcm, size_t n, size_t f, double *z, float *mag,
                      float *out) {
    const size_t start = f * KZ_MEL_HOP;
    const bool inside = start >= KZ_MEL_PAD && start + KZ_MEL_N_FFT <= n + KZ_MEL_PAD;
    for (int j = 0; j < KZ_MEL_N_FFT; j++) {
        const float s =
            inside ? pcm[start + (size_t)j - KZ_MEL_PAD] : padded_at(pcm, n, start + (size_t)j);
        const int r = m->bitrev[j / 2];
        z[2 * r + (j & 1)] = (double)(s * m->window[j]);
    }
    fft_half(m, z);
    magnitudes(m, z, mag);
    for (int i = 0; i < KZ_MEL_N_MELS; i++) {
        const float *row = m->filters + (size_t)i * KZ_MEL_BINS;
        float acc = 0.0f;
        for (int k = m->lo[i]; k < m->hi[i]; k++) {
            acc += row[k] * mag[k];
        }
        out[(size_t)i] = logf(acc > 1e-5f ? acc : 1e-5f);
    }
}

/* --- run ----------------------------------------------------------------------- */

typedef struct mel_job {
    const kz_mel *m;
    const float *pcm;
    size_t n, n_frames;
    float *scratch, *out;
} mel_job;

static void mel_chunk(void *arg, size_t chunk, int worker) {
    const mel_job *j = arg;
    float *s = j->scratch + (size_t)worker * kz_mel_scratch_floats();
    double *z = (double *)(void *)s;
    float *mag = s + 4 * HALF;
    const size_t f0 = chunk * FRAMES_PER_CHUNK;
    const size_t f1 = f0 + FRAMES_PER_CHUNK < j->n_frames ? f0 + FRAMES_PER_CHUNK : j->n_frames;
    for (size_t f = f0; f < f1; f++) {
        mel_frame(j->m, j->pcm, j->n, f, z, mag, j->out + f * KZ_MEL_N_MELS);
    }
}

void kz_mel_run(const kz_mel *m, const float *pcm, size_t n, kz_exec *e, float *scratch,
                float *out) {
    const size_t n_frames = kz_mel_frames(n);
    mel_job j = {.m = m, .pcm = pcm, .n = n, .n_frames = n_frames, .scratch = scratch, .out = out};
    kz_pool_run(e->pool, (n_frames + FRAMES_PER_CHUNK - 1) / FRAMES_PER_CHUNK, mel_chunk, &j);
    size_t taps = 0;
    for (int i = 0; i < KZ_MEL_N_MELS; i++) {
        taps += (size_t)(m->hi[i] - m->lo[i]);
    }
    // window, radix-2 butterflies (10 per pair), the real-FFT split, magnitudes, filters
    const double per_frame = KZ_MEL_N_FFT + 5.0 * KZ_MEL_N_FFT / 2 * log2(HALF) +
                             16.0 * KZ_MEL_BINS + 2.0 * (double)taps;
    e->flop += per_frame * (double)n_frames;
}
