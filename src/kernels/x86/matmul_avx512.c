/*
 * matmul_avx512.c - AVX-512 language-model projections (kernels.h matmul_*).
 *
 * Per weight row and token (row_dots.h, shared with matmul_avx2.c at its own width, under
 * the token walk of row_pairs.h): four 16-lane accumulators over i in steps of 64,
 * then 16-wide steps into the first accumulator, a fixed reduction tree, and a
 * scalar tail. Every line of the weight stream is prefetched into L2 8 KB ahead: the
 * stream comes from DRAM, and prefetches into L1 at any distance leave it short of
 * requests in flight (docs/ARCHITECTURE.md#language-model-matmuls). Tokens are processed
 * two at a time so each weight vector is loaded (and, for bf16 / f16, widened) once for
 * both; the per-token sequence is the same whether a token is paired or alone.
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* The vector of row_dots.h. */
typedef __m512 vec;
enum { LANES = 16 };
static inline __attribute__((always_inline)) vec vec_zero(void) {
    return _mm512_setzero_ps();
}
static inline __attribute__((always_inline)) vec vec_loadu(const float *p) {
    return _mm512_loadu_ps(p);
}
static inline __attribute__((always_inline)) vec vec_fmadd(vec a, vec b, vec c) {
    return _mm512_fmadd_ps(a, b, c);
}

#include "kernels/x86/row_dots.h"

/* Sixteen weights from element i, widened to f32 (exact). */
static inline __m512 wload(const void *w, size_t i, int kind) {
    if (kind == W_F32) {
        return _mm512_loadu_ps((const float *)w + i);
    }
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (kind == W_F16) {
        return _mm512_cvtph_ps(h);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline float hsum(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

#include "kernels/x86/row_pairs.h"

static void matmul(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                   size_t n_tok, size_t o0, size_t o1, int kind) {
    size_t esize = kind == W_F32 ? 4 : 2;
    row_pairs(y, ldy, x, ldx, w, n_in, esize, 0, n_tok, o0, o1, kind);
}

void kz_matmul_bf16_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matmul_f16_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                          size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matmul_f32_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}

void kz_matvec_bf16_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matvec_f16_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matvec_f32_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}
