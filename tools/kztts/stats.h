/*
 * stats.h - small statistics and the wall clock shared by `kztts bench`, `kztts quality`
 * and the programs in bench/.
 */
#ifndef KZ_STATS_H
#define KZ_STATS_H

/* The median of n (>= 1) values; sorts v in place. */
double stats_median(double *v, int n);

/* CLOCK_MONOTONIC in milliseconds. */
double stats_now_ms(void);

#endif
