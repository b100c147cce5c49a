/*
 * resample.h - mono float resampling exactly as the official pipeline's
 * librosa.resample(y, orig_sr=in_rate, target_sr=out_rate) does it with its default
 * res_type "soxr_hq": libsoxr with the HQ recipe, then librosa's length fix.
 *
 *   read(state) -> chunks of input samples -> soxr_process (libsoxr HQ, float32) ... ->
 *   flush -> out[0 .. what libsoxr gave) -> zeros up to n_out = kz_resample_length()
 *
 * libsoxr's output does not depend on how the input is chunked, so streaming chunks
 * from the caller gives the same samples as python-soxr's one call over the whole array.
 */
#ifndef KZ_RESAMPLE_H
#define KZ_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* librosa.resample's output length for n_in samples: ceil(n_in * (out_rate / in_rate)),
 * the ratio rounded to double first as librosa computes it. Rates > 0; n_in below 2^52. */
size_t kz_resample_length(size_t n_in, int32_t in_rate, int32_t out_rate);

/* Fills buf[0 .. cap) with the next input samples and returns how many; 0 at the end. */
typedef size_t (*kz_resample_read_fn)(void *state, float *buf, size_t cap);

/* Resamples the samples read() yields from in_rate to out_rate (both > 0) into
 * out[n_out], n_out = kz_resample_length(total input samples, in_rate, out_rate): what
 * libsoxr gives, cut or padded with zeros to n_out as librosa does. No allocation here
 * beyond libsoxr's own state. KZ_STATUS_OUT_OF_MEMORY or KZ_STATUS_INTERNAL when libsoxr
 * fails (message says so). */
kz_status kz_resample(int32_t in_rate, int32_t out_rate, kz_resample_read_fn read, void *state,
                      float *out, size_t n_out);

#endif
