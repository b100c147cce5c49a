/*
 * test_speed.c - the speaking-rate change (tools/kztts/speed.c on libsonic) as the CLI
 * and the server drive it: audio in chunks of one codec frame, the rest flushed at the end.
 *
 * Dataflow: sines of 440 and 200 Hz at 24 kHz (1.5 s) -> speed_change_run in 1920-sample
 * chunks, `last` on the final one -> the concatenated output -> checked:
 * - speed 1 is the input itself: the same pointer and count, no delay, bit for bit;
 * - at 0.25, 0.5, 1.5, 2 and 4 the length is the input's / speed within 1 % and 20 ms
 *   (sonic works in pitch periods), and the pitch is kept: the strongest frequency of the
 *   middle of the output (Hann window, Goertzel magnitudes in 0.5 Hz steps) within 2 % of the
 *   input's;
 * - the output streams: audio comes out before `last` once half a second went in;
 * - out-of-range speeds and rates give no stream.
 */
#define _DEFAULT_SOURCE /* M_PI */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "speed.h"
#include "test.h"

enum { RATE = 24000, CHUNK = 1920 };

static float *sine(size_t n, double hz) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(0.5 * sin(2 * M_PI * hz * (double)i / RATE));
    }
    return x;
}

/* The frequency in [lo, hi] Hz with the largest magnitude in the Hann-windowed x[0..n)
 * (Goertzel's recurrence at each frequency). */
static double peak_hz(const float *x, size_t n, double lo, double hi) {
    double *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w[i] = x[i] * (0.5 - 0.5 * cos(2 * M_PI * (double)i / (double)(n - 1)));
    }
    double best = -1, best_hz = 0;
    for (double hz = lo; hz <= hi; hz += 0.5) {
        const double c = 2 * cos(2 * M_PI * hz / RATE);
        double s1 = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) {
            const double s0 = w[i] + c * s1 - s2;
            s2 = s1;
            s1 = s0;
        }
        const double power = s1 * s1 + s2 * s2 - c * s1 * s2;
        if (power > best) {
            best = power;
            best_hz = hz;
        }
    }
    free(w);
    return best_hz;
}

/* Runs x through a stream at speed in CHUNK pieces; returns the output (malloc'ed) and
 * how much had come out before the last call. */
static float *run(float speed, const float *x, size_t n, size_t *n_out, size_t *before_last) {
    speed_change *s = speed_change_new(RATE, speed);
    CHECK(s != NULL);
    float *all = malloc((size_t)((double)n / speed) * 2 * sizeof *all + 1024);
    *n_out = *before_last = 0;
    for (size_t i = 0; s && i < n; i += CHUNK) {
        const size_t m = n - i < CHUNK ? n - i : CHUNK;
        const bool last = i + m >= n;
        const float *out;
        size_t got;
        CHECK(speed_change_run(s, x + i, m, last, &out, &got) == 0);
        if (speed == 1.0f) {
            CHECK(out == x + i && got == m);
        }
        memcpy(all + *n_out, out, got * sizeof *out);
        *n_out += got;
        if (!last) {
            *before_last = *n_out;
        }
    }
    speed_change_free(s);
    return all;
}

static void test_identity(void) {
    const size_t n = RATE + 123;
    float *x = sine(n, 440);
    size_t n_out, before_last;
    float *y = run(1.0f, x, n, &n_out, &before_last);
    CHECK_EQ_INT(n_out, n);
    CHECK(n_out == n && memcmp(x, y, n * sizeof *x) == 0);
    CHECK_EQ_INT(before_last, n - (n % CHUNK ? n % CHUNK : CHUNK));
    free(x);
    free(y);
}

static void test_rates(void) {
    const float speeds[] = {0.25f, 0.5f, 1.5f, 2.0f, 4.0f};
    const double tones[] = {440, 200};
    const size_t n = RATE * 3 / 2;
    for (size_t t = 0; t < 2; t++) {
        float *x = sine(n, tones[t]);
        for (size_t k = 0; k < sizeof speeds / sizeof speeds[0]; k++) {
            size_t n_out, before_last;
            float *y = run(speeds[k], x, n, &n_out, &before_last);
            const double want = (double)n / speeds[k];
            CHECK_MSG(fabs((double)n_out - want) <= 0.01 * want + 0.02 * RATE,
                      "speed %g: %zu samples, want %.0f", speeds[k], n_out, want);
            // Half a second in, audio has come out.
            CHECK_MSG(before_last > 0, "speed %g: nothing before the end", speeds[k]);
            // The middle of the output, clear of the edges, at most half a second.
            const size_t len = n_out / 2 < RATE / 2 ? n_out / 2 : RATE / 2;
            const double hz = peak_hz(y + (n_out - len) / 2, len, tones[t] * 0.5, tones[t] * 1.5);
            CHECK_MSG(fabs(hz - tones[t]) <= 0.02 * tones[t], "speed %g: pitch %.1f Hz, want %.0f",
                      speeds[k], hz, tones[t]);
            free(y);
        }
        free(x);
    }
}

static void test_refusals(void) {
    const float bad[] = {0.2f, 4.5f, 0.0f, -1.0f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(speed_change_new(RATE, bad[i]) == NULL, "speed %g", bad[i]);
    }
    CHECK(speed_change_new(0, 2.0f) == NULL);
    CHECK(speed_change_new(-RATE, 1.0f) == NULL);
    speed_change_free(NULL);
}

int main(void) {
    test_identity();
    test_rates();
    test_refusals();
    return test_main_result("test_speed");
}
