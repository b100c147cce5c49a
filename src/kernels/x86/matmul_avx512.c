/*
 * matmul_avx512.c - AVX-512 language-model projections (kernels.h matmul_*).
 *
 * Per weight row and token: four 16-lane accumulators over i in steps of 64,
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
#include "kernels/quant.h"

#define PF_AHEAD 8192 /* bytes of the weight stream prefetched ahead into L2 (header) */

/* Weight element types (a constant after inlining). */
enum { W_F32 = 0, W_BF16 = 1, W_F16 = 2 };

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

static inline float wscalar(const void *w, size_t i, int kind) {
    if (kind == W_F32) {
        return ((const float *)w)[i];
    }
    const uint16_t h = ((const uint16_t *)w)[i];
    return kind == W_F16 ? kz_fp16_to_f32(h) : kz_bf16_to_f32(h);
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

/* Dot products of one weight row with n_t (1 or 2) token rows. */
static inline void row_dots(const void *wrow, const float *x0, const float *x1, size_t n_in,
                            int n_t, int kind, float *out0, float *out1) {
    __m512 a[2][4];
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) {
            a[t][k] = _mm512_setzero_ps();
        }
    }
    size_t i = 0;
    const char *wb = (const char *)wrow;
    size_t esize = kind == W_F32 ? 4 : 2;
    for (; i + 64 <= n_in; i += 64) {
        // One stream of weights per call: every line PF_AHEAD bytes ahead into L2 (also
        // into the next row).
        for (size_t b = 0; b < 64 * esize; b += 64) {
            _mm_prefetch(wb + i * esize + b + PF_AHEAD, _MM_HINT_T1);
        }
        for (int k = 0; k < 4; k++) {
            __m512 wv = wload(wrow, i + 16 * (size_t)k, kind);
            a[0][k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x0 + i + 16 * k), a[0][k]);
            if (n_t == 2) {
                a[1][k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x1 + i + 16 * k), a[1][k]);
            }
        }
    }
    for (; i + 16 <= n_in; i += 16) {
        __m512 wv = wload(wrow, i, kind);
        a[0][0] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x0 + i), a[0][0]);
        if (n_t == 2) {
            a[1][0] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x1 + i), a[1][0]);
        }
    }
    float s0 = hsum(a[0][0], a[0][1], a[0][2], a[0][3]);
    float s1 = hsum(a[1][0], a[1][1], a[1][2], a[1][3]);
    for (; i < n_in; i++) {
        float wi = wscalar(wrow, i, kind);
        s0 = s0 + wi * x0[i];
        s1 = s1 + wi * (n_t == 2 ? x1[i] : 0.0f);
    }
    *out0 = s0;
    *out1 = s1;
}

#include "row_pairs.h"

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
