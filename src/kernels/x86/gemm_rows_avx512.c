/*
 * gemm_rows_avx512.c - AVX-512 prefill GEMM over f32 weight rows (kernels.h
 * gemm_rows) and the conversions of stored weight rows to f32 that feed it
 * (rows_to_f32_bf16 / _f16 / _q8_0 / _q4_0).
 *
 * Data flow: y [n_tok, ldy] (+)= x [n_tok, ldx] . w [n_rows, ldw]^T in register
 * tiles of 4 weight rows x 4 tokens: 16 accumulators of 16 lanes, each weight
 * vector serving 4 tokens and each token vector 4 rows (8 loads per 16 FMAs);
 * the last 1-3 tokens take a tile of that many tokens (the prompt's 22 tokens
 * are 5 x 4 + 2, and a padded tile would waste 8 % of the FMAs). Rows past the
 * end of the range reuse the last valid row pointer; their sums are computed and
 * never stored. The 4 x 4 tile runs close to the FMA peak with w in L1 and x in L2;
 * 8 x 3, 4 x 5 and 4 x 6 tiles are slower (docs/ARCHITECTURE.md#language-model-matmuls).
 *
 * Per output element (t, o), whatever its tile, n_tok or n_rows:
 *   acc[16] = 0
 *   for i0 = 0, 16, 32, ... < n_in:   acc[l] = fma(w[o, i0 + l], x[t, i0 + l], acc[l])
 *       (the last step with n_in % 16 lanes: masked loads give 0 * 0 in the others)
 *   s = (((a0 + a8) + (a4 + a12)) + ((a2 + a10) + (a6 + a14)))
 *     + (((a1 + a9) + (a5 + a13)) + ((a3 + a11) + (a7 + a15)))
 *   y = s, or y + s
 * The 16 sums of a tile come out of one transposing tree of shuffles and adds
 * (4 levels, 15 adds for all 16 instead of 16 separate horizontal sums), whose
 * pairing is the same for every lane: token t's four rows land in 128-bit
 * section t and are stored (or added) with one 4-float masked access.
 *
 * The conversions are bit-identical to the scalar definitions: bf16 widened by a
 * 16-bit shift; q8_0 / q4_0 per block of 32 as d * (float)q with d from
 * vcvtph2ps (exact for every half; a NaN scale gives NaN products either way)
 * and the code widened to int32 and converted exactly.
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_TOK 4

ALWAYS_INLINE __mmask16 first_lanes(size_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* a0 + a2, a1 + a3 (128-bit sections) of a, then of b: [a02, a13, b02, b13]. */
ALWAYS_INLINE __m512 fold_halves(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
}

/* Sections 0 + 1, 2 + 3 of a, then of b: [a(01), a(23), b(01), b(23)]. */
ALWAYS_INLINE __m512 fold_pairs(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
}

/* The lane sums of v[0..15] as one vector: lane 4 j + m = sum of v[4 m + j]. */
ALWAYS_INLINE __m512 reduce16(const __m512 v[16]) {
    __m512 u[8], w[4];
    for (int k = 0; k < 8; k++) {
        u[k] = fold_halves(v[2 * k], v[2 * k + 1]); // [v2k: 8 partials, v2k+1: 8 partials]
    }
    for (int k = 0; k < 4; k++) {
        w[k] = fold_pairs(u[2 * k], u[2 * k + 1]); // section j: 4 partials of v[4k + j]
    }
    const __m512 x0 = _mm512_add_ps(_mm512_unpacklo_ps(w[0], w[1]), _mm512_unpackhi_ps(w[0], w[1]));
    const __m512 x1 = _mm512_add_ps(_mm512_unpacklo_ps(w[2], w[3]), _mm512_unpackhi_ps(w[2], w[3]));
    const __m512d d0 = _mm512_castps_pd(x0), d1 = _mm512_castps_pd(x1);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
}

/* One tile: rows wr[0..3] against the NT (1..4, a constant after inlining)
 * tokens xr[0..NT-1]; stores the first nr rows of each token at y (token t at
 * y + t * ldy). acc[4 r + t] is (r, t); a tile of fewer than 4 tokens computes
 * only its own sums, and the tree's inputs for the missing tokens repeat the
 * last token's accumulators, so every lane still goes through the same tree. */
ALWAYS_INLINE void tile(float *y, size_t ldy, const float *const xr[TILE_TOK],
                        const float *const wr[TILE_ROWS], size_t n_in, size_t nr, int accumulate,
                        const int NT) {
    __m512 acc[16];
    for (int k = 0; k < 16; k++) {
        acc[k] = _mm512_setzero_ps();
    }
    size_t i = 0;
    for (; i + 16 <= n_in; i += 16) {
        __m512 wv[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) {
            wv[r] = _mm512_loadu_ps(wr[r] + i);
        }
        for (int t = 0; t < NT; t++) {
            const __m512 xv = _mm512_loadu_ps(xr[t] + i);
            for (int r = 0; r < TILE_ROWS; r++) {
                acc[4 * r + t] = _mm512_fmadd_ps(wv[r], xv, acc[4 * r + t]);
            }
        }
    }
    if (i < n_in) {
        const __mmask16 m = first_lanes(n_in - i);
        __m512 wv[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) {
            wv[r] = _mm512_maskz_loadu_ps(m, wr[r] + i);
        }
        for (int t = 0; t < NT; t++) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, xr[t] + i);
            for (int r = 0; r < TILE_ROWS; r++) {
                acc[4 * r + t] = _mm512_fmadd_ps(wv[r], xv, acc[4 * r + t]);
            }
        }
    }
    for (int r = 0; r < TILE_ROWS; r++) {
        for (int t = NT; t < TILE_TOK; t++) {
            acc[4 * r + t] = acc[4 * r + NT - 1];
        }
    }
    const __m512 s = reduce16(acc);
    const __m128 part[TILE_TOK] = {_mm512_castps512_ps128(s), _mm512_extractf32x4_ps(s, 1),
                                   _mm512_extractf32x4_ps(s, 2), _mm512_extractf32x4_ps(s, 3)};
    const __mmask8 m = (__mmask8)((1u << nr) - 1u);
    for (int t = 0; t < NT; t++) {
        float *yp = y + (size_t)t * ldy;
        __m128 v = part[t];
        if (accumulate) {
            v = _mm_add_ps(_mm_maskz_loadu_ps(m, yp), v);
        }
        _mm_mask_storeu_ps(yp, m, v);
    }
}

#define GEMM_ROWS_FN kz_gemm_rows_avx512
#include "kernels/gemm_rows_tiles.h"

void kz_rows_to_f32_bf16_avx512(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    }
    if (i < n) {
        const __mmask16 m = first_lanes(n - i);
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
        _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    }
}

void kz_rows_to_f32_f16_avx512(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    }
    if (i < n) {
        const __mmask16 m = first_lanes(n - i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}

/* The block's fp16 scale in all 16 lanes. */
ALWAYS_INLINE __m512 block_scale(const uint8_t *blk) {
    uint16_t h;
    __builtin_memcpy(&h, blk, sizeof h);
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
}

void kz_rows_to_f32_q8_0_avx512(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q8_0_BLOCK_BYTES;
        const __m512 d = block_scale(blk);
        const __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        const __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)));
        _mm512_storeu_ps(dst + b * KZ_QK, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
        _mm512_storeu_ps(dst + b * KZ_QK + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
    }
}

void kz_rows_to_f32_q4_0_avx512(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    const __m512i low4 = _mm512_set1_epi32(0x0f);
    const __m512i eight = _mm512_set1_epi32(8);
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q4_0_BLOCK_BYTES;
        const __m512 d = block_scale(blk);
        const __m512i qs = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        const __m512i q0 = _mm512_sub_epi32(_mm512_and_si512(qs, low4), eight);
        const __m512i q1 = _mm512_sub_epi32(_mm512_srli_epi32(qs, 4), eight);
        _mm512_storeu_ps(dst + b * KZ_QK, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
        _mm512_storeu_ps(dst + b * KZ_QK + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
    }
}
