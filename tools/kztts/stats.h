/*
 * stats.h - small statistics shared by `kztts bench` and the programs in bench/.
 */
#ifndef KZ_STATS_H
#define KZ_STATS_H

/* The median of n (>= 1) values; sorts v in place. */
double stats_median(double *v, int n);

#endif
