/*
 * resample.c - librosa.resample(res_type="soxr_hq") in C over the same libsoxr (see
 * resample.h): chunks from the caller -> soxr_process -> flush -> zero tail.
 *
 * What the official pipeline runs (Qwen3TTSModel.create_voice_clone_prompt and
 * Qwen3TTSTokenizer.load_audio / _normalize_audio_inputs call librosa.resample(y=...,
 * orig_sr=sr, target_sr=24000) with no res_type):
 * - librosa.resample (librosa/core/audio.py, 0.11): res_type "soxr_hq" ->
 *   soxr.resample(y, in_rate, out_rate, quality="soxr_hq"); then
 *   util.fix_length(y_hat, size=ceil(len(y) * (target_sr / orig_sr))), which cuts or
 *   pads zeros at the end; scale=False.
 * - python-soxr's resample (soxr/__init__.py; soxr_ext.cpp csoxr_split_ch and
 *   csoxr_divide_proc): "soxr_hq" -> SOXR_HQ; soxr_create(in_rate, out_rate, 1 channel,
 *   float32 in and out (split layout for a 1-D array: the same for one channel),
 *   soxr_quality_spec(SOXR_HQ, 0), runtime spec NULL); the input goes to soxr_process in
 *   chunks of max(1000, 48000 * in_rate / out_rate), then one flush call (input NULL);
 *   output capacity len * out_rate / in_rate + 1.
 * - SOXR_HQ is SOXR_20_BITQ: 20-bit precision, linear phase (50), passband end 0.9137
 *   of Nyquist, stopband begin 1, no flags; at 20 bits libsoxr runs its single-precision
 *   engine (cr32s with SIMD, else cr32). python-soxr bundles a fork of libsoxr 0.1.3
 *   whose changes touch the dithering of integer output, build files and NEON detection
 *   on aarch64, not the float32 arithmetic on x86-64; Debian's libsoxr0 is 0.1.3.
 * libsoxr gives round(len * ratio) samples in all after the flush, so when the ceil
 * above is one more, librosa's last sample is a padded zero; kz_resample keeps that.
 */
#include "audio/resample.h"

#include <math.h>
#include <string.h>

#include <soxr.h>

#include "runtime/error.h"

/* Input samples handed to libsoxr per call. */
#define CHUNK 4096

size_t kz_resample_length(size_t n_in, int32_t in_rate, int32_t out_rate) {
    double ratio = (double)out_rate / (double)in_rate;
    return (size_t)ceil((double)n_in * ratio);
}

/* libsoxr reports failures as text; an allocation failure is the one a caller can act on. */
static kz_status soxr_failed(const char *what, soxr_error_t err) {
    kz_status st = strstr(err, "alloc") ? KZ_STATUS_OUT_OF_MEMORY : KZ_STATUS_INTERNAL;
    return kz_error_set(st, "resampling: libsoxr %s: %s", what, err);
}

kz_status kz_resample(int32_t in_rate, int32_t out_rate, kz_resample_read_fn read, void *state,
                      float *out, size_t n_out) {
    soxr_error_t err = NULL;
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
    soxr_t soxr = soxr_create(in_rate, out_rate, 1, &err, &io, &quality, NULL);
    if (err) {
        return soxr_failed("create", err);
    }
    float buf[CHUNK];
    size_t n_done = 0, n_got = 0, n_in;
    while (!err && (n_in = read(state, buf, CHUNK)) > 0) {
        err = soxr_process(soxr, buf, n_in, NULL, out + n_done, n_out - n_done, &n_got);
        n_done += n_got;
    }
    if (!err) {
        err = soxr_process(soxr, NULL, 0, NULL, out + n_done, n_out - n_done, &n_got);
        n_done += n_got;
    }
    kz_status st = err ? soxr_failed("process", err) : KZ_OK;
    soxr_delete(soxr);
    memset(out + n_done, 0, (n_out - n_done) * sizeof *out);
    return st;
}
