/*
 * matmul_ref.c - scalar definition of the language-model projections
 * (kernels.h: matmul_bf16, matmul_f16, matmul_f32): for every token t and output
 * row o in [o0, o1), one dot product of the weight row (16-bit weights widened to
 * f32 exactly) and the token's activations, summed sequentially in index order in
 * float.
 */
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

/* The definition for 16-bit weights, each widened exactly by `widen`. */
static void matmul_16(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w,
                      size_t n_in, size_t n_tok, size_t o0, size_t o1, float (*widen)(uint16_t)) {
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = o0; o < o1; o++) {
            const uint16_t *row = w + o * n_in;
            float acc = 0.0f;
            for (size_t i = 0; i < n_in; i++) {
                acc = acc + widen(row[i]) * x[t * ldx + i];
            }
            y[t * ldy + o] = acc;
        }
    }
}

static float bf16_widen(uint16_t v) {
    return kz_bf16_to_f32(v);
}

static float f16_widen(uint16_t v) {
    return kz_fp16_to_f32(v);
}

void kz_matmul_bf16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_16(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, bf16_widen);
}

void kz_matmul_f16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_16(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, f16_widen);
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

/* The batched form for 16-bit weights: the sums of matmul_16, each row once for all tokens. */
static void matvec_16(float *y, size_t ldy, const float *x, size_t ldx, const uint16_t *w,
                      size_t n_in, size_t n_tok, size_t o0, size_t o1, float (*widen)(uint16_t)) {
    for (size_t o = o0; o < o1; o++) {
        matmul_16(y, ldy, x, ldx, w, n_in, n_tok, o, o + 1, widen);
    }
}

void kz_matvec_bf16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec_16(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, bf16_widen);
}

void kz_matvec_f16_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec_16(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, f16_widen);
}

void kz_matvec_f32_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; o++) {
        kz_matmul_f32_ref(y, ldy, x, ldx, w, n_in, n_tok, o, o + 1);
    }
}
