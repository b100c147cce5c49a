/*
 * test_audio_in.c - reference audio in (src/audio: audio_read.c, audio_in.c, resample.c).
 *
 * Dataflow: libsndfile writes fixtures at run time into a mkdtemp directory (WAV 16-bit
 * and float, FLAC 24-bit, Ogg Vorbis, Ogg Opus, MP3; 8, 16, 22.05, 24, 44.1 and 48 kHz
 * where the codec allows; 1, 2 and 6 channels, MP3 at most 2) -> kz_audio_read_file ->
 * kz_audio_prepare_reference(out_rate 24000) -> checked:
 * - the header facts and, for lossless files, the samples written;
 * - the output length is librosa.resample's, ceil(n * (24000 / rate)), and 24 kHz input
 *   passes through as its exact channel mean;
 * - a 440 Hz sine keeps its frequency and amplitude: a least-squares fit of a 440 Hz
 *   sinusoid over the middle of the output must give amplitude 0.5 within 0.2 % and
 *   leave a residual below 0.1 % of it (lossless files); lossy codecs within 3 % and 5 %
 *   (a frequency error of even 0.1 % would leave a far larger residual);
 * - the channel mean is numpy's float32 np.mean to the bit (goldens from numpy for 8, 13
 *   and 64 channels, where its pairwise sum differs from adding in channel order);
 * - the resampling recipe: the output equals, bit for bit, libsoxr driven the way
 *   python-soxr drives it for librosa (SOXR_HQ, float32, its input chunks, one flush)
 *   then cut or zero-padded to librosa's length; Debian has neither python3-soxr nor
 *   python3-librosa to compare with, so the parity is by construction and this pins it;
 * - refusals: silent (opposite stereo channels, peaks below 1e-4), too short, too long
 *   (and accepted with a higher limit), NaN and infinity, bad arguments, and files that
 *   are missing, a directory, text named .wav, a truncated header, empty, absurd or
 *   corrupted (byte flips and truncations of every format: an error or audio, never a
 *   crash, and no descriptor left open).
 */
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sndfile.h>
#include <soxr.h>

#include "audio/audio_in.h"
#include "test.h"

#define OUT_RATE 24000
#define SINE_HZ 440.0
#define SINE_AMP 0.5

static char dir[] = "/tmp/kz_test_audio_XXXXXX";

static void path_of(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* Writes x [n_frames, channels] with libsndfile; false (and a failed check) if it cannot. */
static int write_audio(const char *path, int format, int rate, int channels, const float *x,
                       size_t n_frames) {
    SF_INFO info = {.samplerate = rate, .channels = channels, .format = format};
    SNDFILE *f = sf_open(path, SFM_WRITE, &info);
    CHECK_MSG(f != NULL, "%s: %s", path, sf_strerror(NULL));
    if (!f) {
        return 0;
    }
    sf_count_t n = sf_writef_float(f, x, (sf_count_t)n_frames);
    CHECK_EQ_INT(n, n_frames);
    sf_close(f);
    return n == (sf_count_t)n_frames;
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fwrite(bytes, 1, n, f), n);
        fclose(f);
    }
}

/* The whole file at path (malloc'd), or NULL. */
static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        rewind(f);
        buf = size > 0 ? malloc((size_t)size) : NULL;
        *n = buf ? fread(buf, 1, (size_t)size, f) : 0;
    }
    if (f) {
        fclose(f);
    }
    return buf;
}

/* Channel c carries amp_c * sin(2 pi 440 t), the amp_c spread evenly around their mean,
 * 0.5, so the channel mean is the 0.5 sine and a sum instead of a mean would show. Six
 * channels are 5.1 in Vorbis order, whose last channel (LFE) the Vorbis (from 44.1 kHz)
 * and Opus encoders low-pass: it stays silent and the other five carry 0.6 on average. */
static float *sine(int rate, int channels, size_t n_frames) {
    float *x = malloc(n_frames * (size_t)channels * sizeof *x);
    int lfe = channels == 6 ? 5 : -1, n_loud = channels - (lfe >= 0);
    for (size_t i = 0; i < n_frames; i++) {
        double s = sin(2 * M_PI * SINE_HZ * (double)i / rate);
        for (int c = 0, k = 0; c < channels; c++) {
            double amp = 0;
            if (c != lfe) {
                double spread = n_loud > 1 ? 0.2 * (k++ - (n_loud - 1) / 2.0) / n_loud : 0;
                amp = SINE_AMP * channels / n_loud * (1 + spread);
            }
            x[i * (size_t)channels + (size_t)c] = (float)(amp * s);
        }
    }
    return x;
}

/* librosa.resample's length, written out independently of resample.c. */
static size_t librosa_length(size_t n, int in_rate, int out_rate) {
    if (in_rate == out_rate) {
        return n;
    }
    double ratio = (double)out_rate / (double)in_rate;
    return (size_t)ceil((double)n * ratio);
}

/* Least-squares fit of a sin + b cos at SINE_HZ over y[i0, i1) at rate: the amplitude
 * and the residual's RMS. */
static void fit_sine(const float *y, size_t i0, size_t i1, int rate, double *amp,
                     double *residual) {
    double ss = 0, sc = 0, cc = 0, ys = 0, yc = 0;
    for (size_t i = i0; i < i1; i++) {
        double w = 2 * M_PI * SINE_HZ * (double)i / rate, s = sin(w), c = cos(w);
        ss += s * s, sc += s * c, cc += c * c, ys += y[i] * s, yc += y[i] * c;
    }
    double det = ss * cc - sc * sc;
    double a = (ys * cc - yc * sc) / det, b = (yc * ss - ys * sc) / det, r = 0;
    for (size_t i = i0; i < i1; i++) {
        double w = 2 * M_PI * SINE_HZ * (double)i / rate;
        double e = y[i] - a * sin(w) - b * cos(w);
        r += e * e;
    }
    *amp = hypot(a, b);
    *residual = sqrt(r / (double)(i1 - i0));
}

typedef struct format_case {
    const char *name, *ext;
    int format;
    double quantum;              /* lossless: largest sample error; 0 = lossy. libsndfile
                                    writes floats as integers scaled by 2^(bits-1) - 1 and
                                    reads them back scaled by 2^(bits-1): two steps. */
    const int *rates, *channels; /* 0-terminated */
} format_case;

static const int all_rates[] = {8000, 16000, 22050, 24000, 44100, 48000, 0};
static const int opus_rates[] = {8000, 16000, 24000, 48000, 0};
static const int channels_126[] = {1, 2, 6, 0};
static const int channels_12[] = {1, 2, 0};

static const format_case formats[] = {
    {"wav16", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 2.0 / 32768, all_rates, channels_126},
    {"wavf", "wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1e-30, all_rates, channels_126},
    {"flac24", "flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, 2.0 / 8388608, all_rates, channels_126},
    {"vorbis", "ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 0, all_rates, channels_126},
    {"opus", "opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 0, opus_rates, channels_126},
    {"mp3", "mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 0, all_rates, channels_12},
};

/* Lossless: the samples read are those written, within the format's quantum. */
static void check_lossless(const format_case *fc, const float *written, const float *read,
                           size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)written[i] - read[i]);
        worst = e > worst ? e : worst;
    }
    CHECK_MSG(worst <= fc->quantum, "%s: read differs from written by %g", fc->name, worst);
}

/* The prepared output: librosa's length, the sine kept; 24 kHz input is the channel mean. */
static void check_prepared(const format_case *fc, const char *path, const float *x, size_t n_frames,
                           int rate, int channels) {
    float *mono = NULL;
    size_t n_out = 0;
    kz_status st =
        kz_audio_prepare_reference(x, n_frames, rate, channels, OUT_RATE, 60, &mono, &n_out);
    CHECK_MSG(st == KZ_OK, "%s: %s", path, kz_last_error());
    if (st != KZ_OK) {
        return;
    }
    CHECK_EQ_INT(n_out, librosa_length(n_frames, rate, OUT_RATE));
    if (rate == OUT_RATE) {
        size_t n_differ = 0;
        for (size_t i = 0; i < n_frames; i++) {
            float sum = x[i * (size_t)channels];
            for (int c = 1; c < channels; c++) {
                sum += x[i * (size_t)channels + (size_t)c];
            }
            n_differ += mono[i] != sum / (float)channels;
        }
        CHECK_MSG(n_differ == 0, "%s: %zu samples differ from the channel mean", path, n_differ);
    }
    /* The sine after resampling, against the 0.5 written and the one decoded. */
    double amp, residual, amp_in, residual_in;
    fit_sine(mono, OUT_RATE / 4, n_out - OUT_RATE / 4, OUT_RATE, &amp, &residual);
    float *mean = malloc(n_frames * sizeof *mean);
    for (size_t i = 0; i < n_frames; i++) {
        double sum = 0;
        for (int c = 0; c < channels; c++) {
            sum += x[i * (size_t)channels + (size_t)c];
        }
        mean[i] = (float)(sum / channels);
    }
    fit_sine(mean, (size_t)rate / 4, n_frames - (size_t)rate / 4, rate, &amp_in, &residual_in);
    free(mean);
    double amp_tol = fc->quantum ? 2e-3 : 3e-2, res_tol = fc->quantum ? 1e-3 : 5e-2;
    CHECK_MSG(fabs(amp / SINE_AMP - 1) <= amp_tol && residual / SINE_AMP <= res_tol,
              "%s: 440 Hz amplitude %.5f (want %.2f within %g), residual %.2e of it (< %g)", path,
              amp, SINE_AMP, amp_tol, residual / SINE_AMP, res_tol);
    CHECK_MSG(fabs(amp / amp_in - 1) <= 2e-3 && residual <= residual_in + 1e-3 * SINE_AMP,
              "%s: amplitude %.5f after resampling, %.5f before; residual %.2e, %.2e before", path,
              amp, amp_in, residual, residual_in);
    free(mono);
}

/* Every format, rate and channel count: written, read, prepared. */
static void test_formats(void) {
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        const format_case *fc = &formats[f];
        for (const int *rate = fc->rates; *rate; rate++) {
            for (const int *ch = fc->channels; *ch; ch++) {
                char name[64], path[256];
                snprintf(name, sizeof name, "%s_%d_%d.%s", fc->name, *rate, *ch, fc->ext);
                path_of(path, sizeof path, name);
                size_t n_written = (size_t)(*rate * 3 / 2);
                float *x = sine(*rate, *ch, n_written);
                float *samples = NULL;
                size_t n_frames = 0;
                int32_t rate_read = 0, ch_read = 0;
                if (write_audio(path, fc->format, *rate, *ch, x, n_written)) {
                    kz_status st =
                        kz_audio_read_file(path, &samples, &n_frames, &rate_read, &ch_read);
                    CHECK_MSG(st == KZ_OK, "%s: %s", path, kz_last_error());
                }
                if (samples) {
                    CHECK_EQ_INT(rate_read, *rate);
                    CHECK_EQ_INT(ch_read, *ch);
                    if (fc->quantum) {
                        CHECK_EQ_INT(n_frames, n_written);
                        check_lossless(fc, x, samples, n_written * (size_t)*ch);
                    } else {
                        /* Lossy codecs may pad or trim up to a frame of audio. */
                        CHECK_MSG(labs((long)n_frames - (long)n_written) <= *rate / 20,
                                  "%s: %zu frames read, %zu written", path, n_frames, n_written);
                    }
                    check_prepared(fc, path, samples, n_frames, *rate, *ch);
                }
                free(samples);
                free(x);
            }
        }
    }
}

/* libsoxr as python-soxr's csoxr_divide_proc runs it for librosa.resample(res_type=
 * "soxr_hq"), then librosa's fix_length: out[librosa_length] (malloc'd). */
static float *python_soxr_resample(const float *x, size_t n, int in_rate, int out_rate,
                                   size_t *n_soxr) {
    soxr_error_t err = NULL;
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_t s = soxr_create(in_rate, out_rate, 1, &err, &io, &q, NULL);
    CHECK(err == NULL);
    size_t olen = (size_t)((double)n * out_rate / in_rate + 1);
    size_t div_len = (size_t)fmax(1000., 48000. * in_rate / out_rate);
    float *y = calloc(olen, sizeof *y);
    size_t pos = 0, done = 0;
    for (size_t i = 0; s && i < n; i += div_len) {
        soxr_process(s, x + i, n - i < div_len ? n - i : div_len, NULL, y + pos, olen - pos, &done);
        pos += done;
    }
    if (s) {
        soxr_process(s, NULL, 0, NULL, y + pos, olen - pos, &done);
        pos += done;
    }
    soxr_delete(s);
    *n_soxr = pos;
    size_t n_fixed = librosa_length(n, in_rate, out_rate);
    float *fixed = calloc(n_fixed, sizeof *fixed);
    memcpy(fixed, y, (pos < n_fixed ? pos : n_fixed) * sizeof *y);
    free(y);
    return fixed;
}

/* Our output is python-soxr + librosa's length fix, bit for bit; where libsoxr's
 * round(n * ratio) falls one short of librosa's ceil, the last sample is a padded zero. */
static void test_resample_recipe(void) {
    static const int rates[] = {8000, 11025, 16000, 22050, 32000, 44100, 48000, 96000, 12345};
    uint64_t rng = 0x5eed;
    int padded = 0;
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        for (size_t n = (size_t)rates[r]; n < (size_t)rates[r] * 5 / 2;
             n += (size_t)rates[r] / 3 + 7) {
            float *x = malloc(n * sizeof *x);
            for (size_t i = 0; i < n; i++) {
                x[i] = 0.3f * (float)sin(0.01 * (double)i) + 0.1f * test_rng_float(&rng);
            }
            size_t n_soxr, n_out = 0;
            float *want = python_soxr_resample(x, n, rates[r], OUT_RATE, &n_soxr);
            float *got = NULL;
            kz_status st =
                kz_audio_prepare_reference(x, n, rates[r], 1, OUT_RATE, 60, &got, &n_out);
            CHECK_MSG(st == KZ_OK, "%s", kz_last_error());
            size_t n_want = librosa_length(n, rates[r], OUT_RATE);
            CHECK_EQ_INT(n_out, n_want);
            CHECK_MSG(got && memcmp(got, want, n_want * sizeof *got) == 0,
                      "rate %d, %zu samples: not python-soxr's output bit for bit", rates[r], n);
            CHECK_EQ_INT(n_soxr, (size_t)((double)n * OUT_RATE / rates[r] + 0.5));
            if (got && n_soxr < n_want) {
                CHECK(got[n_want - 1] == 0.0f);
                padded++;
            }
            free(got);
            free(want);
            free(x);
        }
    }
    CHECK_MSG(padded > 0, "no length needed librosa's zero padding: the case is untested");
}

/* The channel mean is numpy's np.mean over float32 channels to the bit, pairwise sums
 * included. Goldens: numpy 1.24, d = ((i * 31 + c * 17) % 1000 - 500) / 997 as float32
 * [frames, channels], np.mean(d.T, axis=0) (librosa.to_mono's call) for frames 0..7. */
static void test_numpy_mean(void) {
    static const struct {
        int channels;
        uint32_t mean[8];
    } goldens[] = {
        {8,
         {0xbee236f3, 0xbed24b7e, 0xbec26008, 0xbeb27493, 0xbea2891e, 0xbe929da8, 0xbe82b232,
          0xbe658d7b}},
        {13,
         {0xbecc63a1, 0xbebc782b, 0xbeac8cb5, 0xbe9ca141, 0xbe8cb5cb, 0xbe7994ab, 0xbe59bdc0,
          0xbe39e6d6}},
        {64,
         {0xbd2f1e0b, 0xbd3024f9, 0xbce1f537, 0xbce40316, 0xbce610f4, 0xbce81ed0, 0xbcea2cad,
          0xbc57afe5}},
    };
    for (size_t g = 0; g < sizeof goldens / sizeof goldens[0]; g++) {
        int ch = goldens[g].channels;
        size_t n = OUT_RATE;
        float *x = malloc(n * (size_t)ch * sizeof *x), *mono = NULL;
        for (size_t i = 0; i < n; i++) {
            for (int c = 0; c < ch; c++) {
                x[i * (size_t)ch + (size_t)c] =
                    (float)((int)((i * 31 + (size_t)c * 17) % 1000) - 500) / 997.0f;
            }
        }
        size_t n_out = 0, n_sequential_differs = 0;
        CHECK_EQ_INT(kz_audio_prepare_reference(x, n, OUT_RATE, ch, OUT_RATE, 60, &mono, &n_out),
                     KZ_OK);
        for (size_t i = 0; mono && i < 8; i++) {
            uint32_t bits;
            memcpy(&bits, &mono[i], 4);
            CHECK_MSG(bits == goldens[g].mean[i], "%d channels, frame %zu: %08x, numpy %08x", ch, i,
                      (unsigned)bits, (unsigned)goldens[g].mean[i]);
            float sum = 0;
            for (int c = 0; c < ch; c++) {
                sum += x[i * (size_t)ch + (size_t)c];
            }
            n_sequential_differs += sum / (float)ch != mono[i];
        }
        CHECK_MSG(n_sequential_differs > 0, "%d channels: the order of the sum is not tested", ch);
        free(mono);
        free(x);
    }
}

/* Opposite channels cancel, and peaks below 1e-4 are silence; 2e-4 is not. */
static void test_silence(void) {
    size_t n = OUT_RATE * 2;
    float *x = sine(OUT_RATE, 2, n);
    for (size_t i = 0; i < n; i++) {
        x[2 * i + 1] = -x[2 * i];
    }
    float *mono = (float *)1;
    size_t n_out = 7;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, OUT_RATE, 2, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK(mono == NULL && n_out == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "silent");
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, 48000, 2, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "silent");
    for (size_t i = 0; i < n; i++) {
        x[i] = (i % 2 ? 1 : -1) * 5e-5f;
    }
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, OUT_RATE, 1, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "silent");
    x[n / 2] = 2e-4f;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, OUT_RATE, 1, OUT_RATE, 60, &mono, &n_out), KZ_OK);
    CHECK_EQ_INT(n_out, n);
    free(mono);
    free(x);
}

/* Shorter than 1 s or longer than max_seconds is refused, stating the length and limit. */
static void test_lengths(void) {
    int rate = 16000;
    size_t n61 = (size_t)rate * 61;
    float *x = sine(rate, 1, n61);
    float *mono = NULL;
    size_t n_out = 0;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, 0, rate, 1, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "empty");
    CHECK_EQ_INT(
        kz_audio_prepare_reference(x, (size_t)rate / 2, rate, 1, OUT_RATE, 60, &mono, &n_out),
        KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "0.50 s long; at least 1 s");
    CHECK_EQ_INT(
        kz_audio_prepare_reference(x, (size_t)rate - 1, rate, 1, OUT_RATE, 60, &mono, &n_out),
        KZ_STATUS_BAD_INPUT);
    CHECK_EQ_INT(kz_audio_prepare_reference(x, (size_t)rate, rate, 1, OUT_RATE, 60, &mono, &n_out),
                 KZ_OK);
    CHECK_EQ_INT(n_out, OUT_RATE);
    free(mono);
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n61, rate, 1, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "61.0 s long, over the limit of 60 s");
    // Neutral: the CLI adds its option, the server its own limit (neither is the library's).
    CHECK(!strstr(kz_last_error(), "--") && !strstr(kz_last_error(), "max_seconds"));
    CHECK_EQ_INT(
        kz_audio_prepare_reference(x, (size_t)rate * 60, rate, 1, OUT_RATE, 60, &mono, &n_out),
        KZ_OK);
    free(mono);
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n61, rate, 1, OUT_RATE, 90, &mono, &n_out), KZ_OK);
    CHECK_EQ_INT(n_out, (size_t)OUT_RATE * 61);
    free(mono);
    free(x);
}

/* NaN and infinity anywhere are refused by frame and channel. */
static void test_non_finite(void) {
    size_t n = OUT_RATE * 2;
    float *x = sine(OUT_RATE, 2, n);
    float *mono = NULL;
    size_t n_out = 0;
    x[2 * 5 + 1] = NAN;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, 44100, 2, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "frame 5, channel 1 is NaN");
    x[2 * 5 + 1] = 0;
    x[2 * (n - 1)] = -INFINITY;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, n, OUT_RATE, 2, OUT_RATE, 60, &mono, &n_out),
                 KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "channel 0 is infinite");
    CHECK(mono == NULL && n_out == 0);
    free(x);
}

static void check_bad_argument(const float *x, int32_t rate, int32_t channels, int32_t out_rate,
                               double max_seconds, const char *message) {
    float *mono = (float *)1;
    size_t n_out = 7;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, OUT_RATE * 2, rate, channels, out_rate, max_seconds,
                                            &mono, &n_out),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK(mono == NULL && n_out == 0);
    CHECK_STR_CONTAINS(kz_last_error(), message);
}

static void test_bad_arguments(void) {
    float *x = sine(OUT_RATE, 2, OUT_RATE * 2);
    check_bad_argument(x, 7999, 1, OUT_RATE, 60, "sample rate 7999 Hz; 8000..384000");
    check_bad_argument(x, 384001, 1, OUT_RATE, 60, "sample rate 384001 Hz");
    check_bad_argument(x, 0, 1, OUT_RATE, 60, "sample rate 0 Hz");
    check_bad_argument(x, -16000, 1, OUT_RATE, 60, "sample rate -16000 Hz");
    check_bad_argument(x, OUT_RATE, 0, OUT_RATE, 60, "0 channels; 1..64");
    check_bad_argument(x, OUT_RATE, 65, OUT_RATE, 60, "65 channels");
    check_bad_argument(x, OUT_RATE, 1, 0, 60, "output rate 0 Hz");
    check_bad_argument(x, OUT_RATE, 1, OUT_RATE, 0.5, "max_seconds 0.5");
    check_bad_argument(x, OUT_RATE, 1, OUT_RATE, NAN, "max_seconds nan");
    check_bad_argument(x, OUT_RATE, 1, OUT_RATE, 601, "max_seconds 601");
    check_bad_argument(NULL, OUT_RATE, 1, OUT_RATE, 60, "NULL");
    float *mono = NULL;
    size_t n_out = 0;
    CHECK_EQ_INT(kz_audio_prepare_reference(x, 100, OUT_RATE, 1, OUT_RATE, 60, NULL, &n_out),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_audio_prepare_reference(x, 100, OUT_RATE, 1, OUT_RATE, 60, &mono, NULL),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK(mono == NULL);
    free(x);
}

/* The file is refused with `status` and a message naming it and containing `message`;
 * the outputs are cleared. */
static void check_refused_file(const char *path, kz_status status, const char *message) {
    float *samples = (float *)1;
    size_t n_frames = 7;
    int32_t rate = 7, channels = 7;
    CHECK_EQ_INT(kz_audio_read_file(path, &samples, &n_frames, &rate, &channels), status);
    CHECK(samples == NULL && n_frames == 0 && rate == 0 && channels == 0);
    CHECK_STR_CONTAINS(kz_last_error(), path);
    CHECK_STR_CONTAINS(kz_last_error(), message);
}

static void test_bad_files(void) {
    char path[256];
    path_of(path, sizeof path, "missing.wav");
    check_refused_file(path, KZ_STATUS_IO, "No such file");
    check_refused_file(dir, KZ_STATUS_IO, "a directory");
    path_of(path, sizeof path, "text.wav");
    const char *text = "This is a text file, not a recording.\n";
    write_bytes(path, text, strlen(text));
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "not audio libsndfile can read");
    path_of(path, sizeof path, "zero_bytes.wav");
    write_bytes(path, "", 0);
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "not audio libsndfile can read");
    path_of(path, sizeof path, "no_frames.wav");
    write_audio(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, NULL, 0);
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "no audio in the file");

    /* Half a second reads, and is refused when prepared. */
    path_of(path, sizeof path, "half_second.wav");
    float *x = sine(16000, 1, 8000), *samples = NULL, *mono = NULL;
    size_t n_frames = 0, n_out = 0;
    int32_t rate = 0, channels = 0;
    write_audio(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, x, 8000);
    CHECK_EQ_INT(kz_audio_read_file(path, &samples, &n_frames, &rate, &channels), KZ_OK);
    CHECK_EQ_INT(n_frames, 8000);
    CHECK_EQ_INT(
        kz_audio_prepare_reference(samples, n_frames, rate, channels, OUT_RATE, 60, &mono, &n_out),
        KZ_STATUS_BAD_INPUT);
    CHECK_STR_CONTAINS(kz_last_error(), "0.50 s long; at least 1 s");
    free(samples);
    free(x);
}

/* A 16-bit stereo WAV whose canonical 44-byte header (channels at 22, rate at 24, data
 * size at 40) is cut or edited. */
static void test_absurd_headers(void) {
    char path[256], good[256];
    path_of(good, sizeof good, "wav16_16000_2.wav");
    size_t n = 0;
    unsigned char *wav = read_bytes(good, &n);
    CHECK(wav != NULL && n > 44 && memcmp(wav + 36, "data", 4) == 0);
    if (!wav || n <= 44 || memcmp(wav + 36, "data", 4) != 0) {
        free(wav);
        return;
    }
    path_of(path, sizeof path, "truncated_header.wav");
    write_bytes(path, wav, 30);
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "not audio libsndfile can read");

    unsigned char *edited = malloc(n);
    memcpy(edited, wav, n);
    edited[22] = 200, edited[23] = 0;
    path_of(path, sizeof path, "200_channels.wav");
    write_bytes(path, edited, n);
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "200 channels; 1..64 are accepted");

    memcpy(edited, wav, n);
    uint32_t low_rate = 4000;
    memcpy(edited + 24, &low_rate, 4);
    path_of(path, sizeof path, "4000_hz.wav");
    write_bytes(path, edited, n);
    check_refused_file(path, KZ_STATUS_BAD_INPUT, "sample rate 4000 Hz; 8000..384000");

    /* The data chunk claims 2 GB: libsndfile reads the frames that are there. */
    memcpy(edited, wav, n);
    uint32_t huge = 0x7ffffff0u;
    memcpy(edited + 40, &huge, 4);
    path_of(path, sizeof path, "huge_data.wav");
    write_bytes(path, edited, n);
    float *samples = NULL;
    size_t n_frames = 0;
    int32_t rate = 0, channels = 0;
    kz_status st = kz_audio_read_file(path, &samples, &n_frames, &rate, &channels);
    CHECK_MSG(st == KZ_OK && n_frames == 24000 && channels == 2, "huge data chunk: %s",
              kz_last_error());
    free(samples);
    free(edited);
    free(wav);
}

/* A file longer than KZ_AUDIO_MAX_SECONDS stops being read there. */
static void test_too_long_file(void) {
    int rate = 8000;
    size_t n = (size_t)rate * (KZ_AUDIO_MAX_SECONDS + 1);
    float *x = calloc(n, sizeof *x);
    char path[256];
    path_of(path, sizeof path, "601_s.wav");
    if (write_audio(path, SF_FORMAT_WAV | SF_FORMAT_PCM_U8, rate, 1, x, n)) {
        check_refused_file(path, KZ_STATUS_BAD_INPUT,
                           "longer than 600 s (4800000 frames at 8000 Hz)");
    }
    free(x);
}

/* Byte flips and truncations of every format: an error or audio, never a crash. */
static void test_corrupted_files(void) {
    static const char *sources[] = {"wav16_22050_2.wav",   "wavf_44100_1.wav",
                                    "flac24_48000_6.flac", "vorbis_22050_2.ogg",
                                    "opus_16000_2.opus",   "mp3_44100_2.mp3"};
    uint64_t rng = 0xc0ffee;
    int n_ok = 0, n_refused = 0;
    for (size_t s = 0; s < sizeof sources / sizeof sources[0]; s++) {
        char src[256], path[256];
        path_of(src, sizeof src, sources[s]);
        path_of(path, sizeof path, "corrupt.bin");
        size_t n = 0;
        unsigned char *bytes = read_bytes(src, &n);
        CHECK_MSG(bytes != NULL, "%s missing", src);
        for (int trial = 0; bytes && trial < 24; trial++) {
            unsigned char *copy = malloc(n);
            memcpy(copy, bytes, n);
            size_t n_copy = n;
            if (trial < 4) {
                n_copy = n * (size_t)(trial + 1) / 5;
            } else {
                /* Flips in the first 512 bytes (headers) and anywhere. */
                for (int k = 0; k < 1 + trial % 4; k++) {
                    size_t span = trial % 2 ? n : (n < 512 ? n : 512);
                    copy[test_rng_below(&rng, span)] ^=
                        (unsigned char)(1 + test_rng_below(&rng, 255));
                }
            }
            write_bytes(path, copy, n_copy);
            float *samples = NULL;
            size_t n_frames = 0;
            int32_t rate = 0, channels = 0;
            kz_status st = kz_audio_read_file(path, &samples, &n_frames, &rate, &channels);
            CHECK_MSG(st == KZ_OK || st == KZ_STATUS_BAD_INPUT, "%s trial %d: %d %s", sources[s],
                      trial, (int)st, kz_last_error());
            if (st == KZ_OK) {
                CHECK(samples != NULL && n_frames > 0 && channels >= 1 && rate >= 8000);
                n_ok++;
            } else {
                n_refused++;
            }
            free(samples);
            free(copy);
        }
        free(bytes);
    }
    printf("corrupted files: %d read, %d refused\n", n_ok, n_refused);
    CHECK(n_ok > 0 && n_refused > 0);
}

static int count_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        n += e->d_name[0] != '.';
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] != '.') {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d) {
        closedir(d);
    }
    rmdir(dir);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int fds = count_open_fds();
    test_formats();
    test_resample_recipe();
    test_numpy_mean();
    test_silence();
    test_lengths();
    test_non_finite();
    test_bad_arguments();
    test_bad_files();
    test_absurd_headers();
    test_too_long_file();
    test_corrupted_files();
    CHECK_EQ_INT(count_open_fds(), fds);
    remove_dir();
    return test_main_result("test_audio_in");
}
