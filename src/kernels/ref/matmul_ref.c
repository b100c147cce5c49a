/*
 * matmul_ref.c - scalar definition of the language-model projections
 * (kernels.h: matmul_bf16, matmul_f16, matmul_f32): for every token t and output row o in
 * [o0, o1), one dot product of the weight row and the token's activations,
 * summed sequentially in index order in float.
 */
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

static float bf16_to_f32(uint16_t v) {
    uint32_t bits = (uint32_t)v << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void kz_matmul_bf16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    const uint16_t *wb = w;
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = o0; o < o1; o++) {
            const uint16_t *row = wb + o * n_in;
            float acc = 0.0f;
            for (size_t i = 0; i < n_in; i++) {
                acc = acc + bf16_to_f32(row[i]) * x[t * ldx + i];
            }
            y[t * ldy + o] = acc;
        }
    }
}

void kz_matmul_f16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    const uint16_t *wh = w;
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = o0; o < o1; o++) {
            const uint16_t *row = wh + o * n_in;
            float acc = 0.0f;
            for (size_t i = 0; i < n_in; i++) {
                acc = acc + kz_fp16_to_f32(row[i]) * x[t * ldx + i];
            }
            y[t * ldy + o] = acc;
        }
    }
}

void kz_matmul_f32_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    const float *wf = w;
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = o0; o < o1; o++) {
            float acc = 0.0f;
            for (size_t i = 0; i < n_in; i++) {
                acc = acc + wf[o * n_in + i] * x[t * ldx + i];
            }
            y[t * ldy + o] = acc;
        }
    }
}
