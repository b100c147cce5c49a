/*
 * vector.h - small helpers for per-channel parameter vectors, residual updates and
 * the finite check shared by the model components and the synthesis loop.
 */
#ifndef KZ_VECTOR_H
#define KZ_VECTOR_H

#include <stddef.h>

#include "io/weights.h"

/* Reads tensor `name` of shape [n] as f32 into dst[n]; the message names the
 * file and tensor on a missing tensor or wrong shape. */
kz_status kz_vector_load(const kz_weights *f, const char *name, size_t n, float *dst);

/* x[t, c] += scale[c] * h[t, c] for [n_rows, n_ch]: the reference's
 * `residual + scale * h`, rounded as two separate operations. */
void kz_vector_add_scaled_rows(float *x, const float *h, const float *scale, size_t n_rows,
                               size_t n_ch);

/* Index of the first NaN or Inf in x[0, n), or n when every value is finite. Reads each
 * value once (twice when one is not finite). */
size_t kz_vector_first_nonfinite(const float *x, size_t n);

#endif
