/*
 * gemm_store_neon.h - the epilogue of one output row of a 16-column panel for the NEON
 * conv-GEMMs (arm/gemm_neon.c, arm/gemm_bf16_neon.c): r = acc (+ bias) (y + r), in that
 * order (kernels.h), stored to the panel's valid columns.
 *
 * Data flow: the row's four accumulators (columns 0..3, .., 12..15) -> the adds in
 * vectors for a whole panel -> y; a ragged last panel goes through the scalar
 * definition (kz_gemm_store_ref), which does the same two adds per element.
 */
#ifndef KZ_GEMM_STORE_NEON_H
#define KZ_GEMM_STORE_NEON_H

#include <arm_neon.h>

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) void gemm_store_row_neon(float *yr,
                                                                      const float32x4_t v[4],
                                                                      size_t width,
                                                                      const float *bias,
                                                                      int accumulate) {
    if (width == KZ_PANEL) {
        for (int i = 0; i < 4; i++) {
            float32x4_t r = v[i];
            if (bias) {
                r = vaddq_f32(r, vld1q_f32(bias + 4 * i));
            }
            if (accumulate) {
                r = vaddq_f32(vld1q_f32(yr + 4 * i), r);
            }
            vst1q_f32(yr + 4 * i, r);
        }
        return;
    }
    float acc[KZ_PANEL];
    for (int i = 0; i < 4; i++) {
        vst1q_f32(acc + 4 * i, v[i]);
    }
    kz_gemm_store_ref(yr, acc, width, bias, accumulate ? KZ_GEMM_ACCUMULATE : KZ_GEMM_STORE);
}

#endif
