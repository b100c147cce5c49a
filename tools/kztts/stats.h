/*
 * stats.h - small statistics, the wall clock and the codec's share of a session's timings,
 * shared by `kztts bench`, `kztts quality` and the programs in bench/.
 */
#ifndef KZ_STATS_H
#define KZ_STATS_H

#include "kztts.h"

/* The median of n (>= 1) values; sorts v in place. */
double stats_median(double *v, int n);

/* The value at fraction q (0..1) of n (>= 1) values by nearest rank; sorts v in place. */
double stats_percentile(double *v, int n, double q);

/* CLOCK_MONOTONIC in milliseconds. */
double stats_now_ms(void);

/* The codec stage's time in t: quantizer + transformer + upsample + vocoder, ms. */
double stats_codec_ms(const kz_timings *t);

#endif
