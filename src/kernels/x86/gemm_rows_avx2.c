/*
 * gemm_rows_avx2.c - AVX2 + FMA prefill GEMM over f32 weight rows (kernels.h
 * gemm_rows) and the conversions of stored weight rows to f32 that feed it
 * (rows_to_f32_bf16 / _f16 / _q8_0 / _q4_0).
 *
 * Data flow: y [n_tok, ldy] (+)= x [n_tok, ldx] . w [n_rows, ldw]^T in register
 * tiles of 4 weight rows x 3 tokens: 12 accumulators of 8 lanes plus 4 weight
 * vectors fill the 16 ymm registers, the token vectors are FMA memory operands
 * (4 x 2 tiles with the token vectors in registers leave the FMA pipes no slack:
 * docs/ARCHITECTURE.md#language-model-matmuls); the last one or two tokens take a
 * smaller tile. Rows past the end of the range reuse the last valid row pointer;
 * their sums are computed and never stored.
 *
 * Per output element (t, o), whatever its tile, n_tok or n_rows:
 *   acc[8] = 0
 *   for i0 = 0, 8, 16, ... < n_in:   acc[l] = fma(w[o, i0 + l], x[t, i0 + l], acc[l])
 *       (the last step with n_in % 8 lanes: vmaskmovps loads give 0 * 0 in the others)
 *   s = ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))
 *   y = s, or y + s
 * The sums of a token pair come out of one transposing tree (128-bit halves added,
 * then two levels of horizontal adds) with the same pairing for every lane:
 * the pair's token j has its four rows in 128-bit half j, stored (or added) at once.
 *
 * The conversions are bit-identical to the scalar definitions: bf16 widened by a
 * 16-bit shift; q8_0 / q4_0 per block of 32 as d * (float)q with d converted by
 * F16C (exact, as kz_fp16_to_f32; a NaN scale comes out quiet, and d * q quiets it in
 * both forms) and the codes widened to int32 and converted exactly.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_TOK 3

/* vmaskmovps mask of the first n lanes (n <= 8). */
ALWAYS_INLINE __m256i first_lanes(size_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

/* The lane sums of v[0..7] as one vector: lane 4 j + m = sum of v[2 m + j]. */
ALWAYS_INLINE __m256 reduce8(const __m256 v[8]) {
    __m256 u[4];
    for (int k = 0; k < 4; k++) { // [v2k: l + l4 for l < 4, v2k+1: the same]
        const __m256 a = v[2 * k], b = v[2 * k + 1];
        u[k] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                             _mm256_permute2f128_ps(a, b, 0x31));
    }
    // half j of hadd(u0, u1): pair sums of v[j], then of v[2 + j]
    const __m256 w0 = _mm256_hadd_ps(u[0], u[1]);
    const __m256 w1 = _mm256_hadd_ps(u[2], u[3]);
    return _mm256_hadd_ps(w0, w1); // half j: v[j], v[2 + j], v[4 + j], v[6 + j]
}

/* One tile: rows wr[0..3] against the NT (1 to 3, a constant after inlining)
 * tokens xr[0..NT-1]; stores the first nr rows of each token at y (token t at
 * y + t * ldy). acc[4 t + r] is (r, t); the token vectors are FMA memory operands
 * (12 accumulators and 4 weight vectors fill the 16 registers). The sums go through
 * reduce8 in token pairs (0, 1) and (2, 2); a missing token repeats the last one. */
ALWAYS_INLINE void tile(float *y, size_t ldy, const float *const xr[TILE_TOK],
                        const float *const wr[TILE_ROWS], size_t n_in, size_t nr, int accumulate,
                        const int NT) {
    __m256 acc[TILE_ROWS * TILE_TOK];
    for (int k = 0; k < TILE_ROWS * TILE_TOK; k++) {
        acc[k] = _mm256_setzero_ps();
    }
    size_t i = 0;
    for (; i + 8 <= n_in; i += 8) {
        __m256 wv[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) {
            wv[r] = _mm256_loadu_ps(wr[r] + i);
        }
        for (int t = 0; t < NT; t++) {
            for (int r = 0; r < TILE_ROWS; r++) {
                acc[4 * t + r] = _mm256_fmadd_ps(wv[r], _mm256_loadu_ps(xr[t] + i), acc[4 * t + r]);
            }
        }
    }
    if (i < n_in) {
        const __m256i m = first_lanes(n_in - i);
        __m256 wv[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) {
            wv[r] = _mm256_maskload_ps(wr[r] + i, m);
        }
        for (int t = 0; t < NT; t++) {
            const __m256 xv = _mm256_maskload_ps(xr[t] + i, m);
            for (int r = 0; r < TILE_ROWS; r++) {
                acc[4 * t + r] = _mm256_fmadd_ps(wv[r], xv, acc[4 * t + r]);
            }
        }
    }
    __m128 part[4];
    for (int t0 = 0; t0 < NT; t0 += 2) { // reduce8's input (r, j) at 2 r + j: tokens t0, t0 + 1
        __m256 v[8];
        for (int r = 0; r < TILE_ROWS; r++) {
            for (int j = 0; j < 2; j++) {
                const int t = t0 + j < NT ? t0 + j : NT - 1;
                v[2 * r + j] = acc[4 * t + r];
            }
        }
        const __m256 s = reduce8(v);
        part[t0] = _mm256_castps256_ps128(s);
        part[t0 + 1] = _mm256_extractf128_ps(s, 1);
    }
    const __m128i m = _mm256_castsi256_si128(first_lanes(nr));
    for (int t = 0; t < NT; t++) {
        float *yp = y + (size_t)t * ldy;
        __m128 v = part[t];
        if (accumulate) {
            v = _mm_add_ps(_mm_maskload_ps(yp, m), v);
        }
        _mm_maskstore_ps(yp, m, v);
    }
}

#define GEMM_ROWS_FN kz_gemm_rows_avx2
#include "kernels/gemm_rows_tiles.h"

void kz_rows_to_f32_bf16_avx2(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    for (; i < n; i++) {
        dst[i] = kz_bf16_to_f32(s[i]);
    }
}

void kz_rows_to_f32_f16_avx2(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    }
    for (; i < n; i++) {
        dst[i] = kz_fp16_to_f32(s[i]);
    }
}

/* A block's fp16 scale broadcast as f32: one F16C conversion instead of the integer
 * definition's ten instructions and two branches, once per 32 weights. */
ALWAYS_INLINE __m256 block_scale(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

void kz_rows_to_f32_q8_0_avx2(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q8_0_BLOCK_BYTES;
        const __m256 d = block_scale(blk);
        for (int h = 0; h < 4; h++) {
            const __m128i q8 = _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * h));
            const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            _mm256_storeu_ps(dst + b * KZ_QK + 8 * (size_t)h, _mm256_mul_ps(d, q));
        }
    }
}

void kz_rows_to_f32_q4_0_avx2(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    const __m256i low4 = _mm256_set1_epi32(0x0f);
    const __m256i eight = _mm256_set1_epi32(8);
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q4_0_BLOCK_BYTES;
        const __m256 d = block_scale(blk);
        for (int h = 0; h < 2; h++) { // bytes 8h..8h+7: elements 8h.. (low), 16 + 8h.. (high)
            const __m128i q8 = _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * h));
            const __m256i qs = _mm256_cvtepu8_epi32(q8);
            const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(qs, low4), eight);
            const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(qs, 4), eight);
            float *o = dst + b * KZ_QK + 8 * (size_t)h;
            _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
            _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
    }
}
