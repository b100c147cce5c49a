/*
 * gemm_store_avx2.h - where the micro-tile accumulators of the AVX2 conv-GEMMs
 * (x86/gemm_avx2.c, x86/gemm_bf16_avx2.c) come from and go: their start from +0 or from
 * the partial sums parked in part[] between k blocks, the parking, and the epilogue of
 * one output row of a 16-column panel: r = acc (+ bias) (y + r), in that order
 * (kernels.h), stored to the panel's valid columns.
 *
 * Data flow: the row's two accumulators (columns 0..7, 8..15) -> the adds in vectors
 * for a whole panel -> y; a ragged last panel goes through the scalar definition
 * (kz_gemm_store_ref), which does the same two adds per element.
 */
#ifndef KZ_GEMM_STORE_AVX2_H
#define KZ_GEMM_STORE_AVX2_H

#include <immintrin.h>

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) void gemm_store_row_avx2(float *yr, __m256 lo,
                                                                      __m256 hi, size_t width,
                                                                      const float *bias,
                                                                      int accumulate) {
    if (width == KZ_PANEL) {
        if (bias) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(bias));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(bias + 8));
        }
        if (accumulate) {
            lo = _mm256_add_ps(_mm256_loadu_ps(yr), lo);
            hi = _mm256_add_ps(_mm256_loadu_ps(yr + 8), hi);
        }
        _mm256_storeu_ps(yr, lo);
        _mm256_storeu_ps(yr + 8, hi);
        return;
    }
    _Alignas(32) float acc[KZ_PANEL];
    _mm256_store_ps(acc, lo);
    _mm256_store_ps(acc + 8, hi);
    kz_gemm_store_ref(yr, acc, width, bias, accumulate ? KZ_GEMM_ACCUMULATE : KZ_GEMM_STORE);
}

/* The accumulators of tile row q, lo##q and hi##q, inside a tile function (where
 * `zero`, `rows` and `jb`, a gemm_panel_drive.h tile job, are defined). Rows beyond the
 * compile-time `rows` are dead code. */
#define GEMM_AVX2_TILE_INIT(q)                                                                 \
    __m256 lo##q = zero;                                                                       \
    __m256 hi##q = zero;                                                                       \
    if (rows > q && !jb->first) {                                                              \
        lo##q = _mm256_load_ps(jb->part + q * KZ_PANEL);                                       \
        hi##q = _mm256_load_ps(jb->part + q * KZ_PANEL + 8);                                   \
    }
#define GEMM_AVX2_TILE_PARK(q)                                                                 \
    if (rows > q) {                                                                            \
        _mm256_store_ps(jb->part + q * KZ_PANEL, lo##q);                                       \
        _mm256_store_ps(jb->part + q * KZ_PANEL + 8, hi##q);                                   \
    }
#define GEMM_AVX2_TILE_EPILOGUE(q)                                                             \
    if (rows > q) {                                                                            \
        gemm_store_row_avx2(jb->y + q * jb->ldy, lo##q, hi##q, jb->width, jb->bias,           \
                            jb->accumulate);                                                   \
    }

/* The end of a tile function whose TILE_ROWS(X) names its rows: park the partial sums, or
 * after the last k block the epilogue. */
#define GEMM_AVX2_TILE_FINISH()                                                                \
    if (!jb->last) {                                                                           \
        TILE_ROWS(GEMM_AVX2_TILE_PARK)                                                         \
        return;                                                                                \
    }                                                                                          \
    TILE_ROWS(GEMM_AVX2_TILE_EPILOGUE)

#endif
