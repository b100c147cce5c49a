/*
 * matmul_avx2.c - AVX2 + FMA language-model projections (kernels.h matmul_*).
 *
 * Per weight row and token (row_dots.h, shared with matmul_avx512.c at its own width, under
 * the token walk of row_pairs.h): four 8-lane accumulators over i in steps of 32,
 * then 8-wide steps into the first accumulator, a fixed reduction tree, and a
 * scalar tail, with a software prefetch of every line of the weight stream 8 KB ahead into
 * L2: the stream comes from DRAM, and prefetches into L2 keep more requests in flight than
 * ones into L1 (docs/ARCHITECTURE.md#language-model-matmuls). Tokens are processed two at
 * a time so each weight vector is loaded (and, for bf16 / f16, widened) once for both; the
 * per-token sequence is the same whether a token is paired or alone. Calls with 4 or more
 * tokens (the prompt prefill) take groups of four tokens with two accumulators each, so a
 * weight vector serves four tokens (this file's row_dots4); their order differs from the
 * 1-2 token path but depends only on n_tok and the token's index, never on threads or rows.
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* The vector of row_dots.h. */
typedef __m256 vec;
enum { LANES = 8 };
static inline __attribute__((always_inline)) vec vec_zero(void) {
    return _mm256_setzero_ps();
}
static inline __attribute__((always_inline)) vec vec_loadu(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline __attribute__((always_inline)) vec vec_fmadd(vec a, vec b, vec c) {
    return _mm256_fmadd_ps(a, b, c);
}

#include "kernels/x86/row_dots.h"

/* Eight weights from element i, widened to f32 (exact). */
static inline __m256 wload(const void *w, size_t i, int kind) {
    if (kind == W_F32) {
        return _mm256_loadu_ps((const float *)w + i);
    }
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (kind == W_F16) {
        return _mm256_cvtph_ps(h);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float hsum(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* Dot products of one weight row with 4 token rows (x + k * ldx). */
static inline void row_dots4(const void *wrow, const float *x, size_t ldx, size_t n_in, int kind,
                             float *out) {
    __m256 a[4][2];
    for (int t = 0; t < 4; t++) {
        a[t][0] = _mm256_setzero_ps();
        a[t][1] = _mm256_setzero_ps();
    }
    size_t i = 0;
    for (; i + 16 <= n_in; i += 16) {
        __m256 w0 = wload(wrow, i, kind);
        __m256 w1 = wload(wrow, i + 8, kind);
        for (int t = 0; t < 4; t++) {
            const float *xt = x + (size_t)t * ldx + i;
            a[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), a[t][0]);
            a[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), a[t][1]);
        }
    }
    __m256 zero = _mm256_setzero_ps();
    for (int t = 0; t < 4; t++) {
        float s = hsum(a[t][0], a[t][1], zero, zero);
        for (size_t k = i; k < n_in; k++) {
            s = s + wscalar(wrow, k, kind) * x[(size_t)t * ldx + k];
        }
        out[t] = s;
    }
}

#include "kernels/x86/row_pairs.h"

static void matmul(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                   size_t n_tok, size_t o0, size_t o1, int kind) {
    size_t esize = kind == W_F32 ? 4 : 2;
    size_t t = 0;
    if (n_tok >= 4) {
        for (; t + 4 <= n_tok; t += 4) {
            for (size_t o = o0; o < o1; o++) {
                float r[4];
                row_dots4((const char *)w + o * n_in * esize, x + t * ldx, ldx, n_in, kind, r);
                for (int k = 0; k < 4; k++) {
                    y[(t + (size_t)k) * ldy + o] = r[k];
                }
            }
        }
    }
    row_pairs(y, ldy, x, ldx, w, n_in, esize, t, n_tok, o0, o1, kind);
}

void kz_matmul_bf16_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matmul_f16_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matmul_f32_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}

void kz_matvec_bf16_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matvec_f16_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matvec_f32_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}
