/*
 * vector.c - per-channel parameter vectors, scaled residual adds and the finite check.
 */
#include "layers/vector.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/error.h"

kz_status kz_vector_load(const kz_weights *f, const char *name, size_t n, float *dst) {
    int64_t shape[1] = {(int64_t)n};
    const kz_tensor *t;
    kz_status st = kz_weights_get(f, name, 1, shape, &t);
    if (st != KZ_OK) {
        return st;
    }
    return kz_tensor_to_f32(t, dst);
}

void kz_vector_add_scaled_rows(float *x, const float *h, const float *scale, size_t n_rows,
                               size_t n_ch) {
    for (size_t t = 0; t < n_rows; t++) {
        float *xr = x + t * n_ch;
        const float *hr = h + t * n_ch;
        for (size_t c = 0; c < n_ch; c++) {
            float s = scale[c] * hr[c];
            xr[c] = xr[c] + s;
        }
    }
}

size_t kz_vector_first_nonfinite(const float *x, size_t n) {
    // An or over the exponent fields first (vectorized), the position only when one is bad:
    // adding the exponent's lowest bit carries past the field only for all ones.
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        acc |= (bits & 0x7F800000u) + 0x00800000u;
    }
    for (size_t i = 0; (acc & 0x80000000u) && i < n; i++) {
        if (!isfinite(x[i])) {
            return i;
        }
    }
    return n;
}
