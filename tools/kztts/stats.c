/*
 * stats.c - small statistics, the clock and the codec's timings shared by `kztts bench` and
 * bench/ (see stats.h).
 */
#include "stats.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double stats_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double stats_percentile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int k = (int)(q * n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

double stats_codec_ms(const kz_timings *t) {
    return t->codec_quantizer_ms + t->codec_transformer_ms + t->codec_upsample_ms +
           t->codec_vocoder_ms;
}

double stats_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
