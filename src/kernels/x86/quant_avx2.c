/*
 * quant_avx2.c - AVX2 + FMA quantized language-model projections (kernels.h
 * matmul_q8_0, matmul_q4_0; formats in kernels/quant.h).
 *
 * Data flow, per pair of tokens (or a last single token) and per chunk of up
 * to 256 blocks (8192 inputs) of the row:
 *   x[t] f32 --quant_act--> int8 q[32 b + i], float scale d_x[b], -8 * sum q (stack)
 *   per weight row o, per block b:
 *     q8_0: 32 int8 w --(|w|, x * sign w) maddubs, madd--> 8 int32 partial sums
 *     q4_0: 16 bytes --nibbles to 32 u8 (0..15)-- maddubs, madd, + (-8 sum q) in lane 0
 *     acc[b % 4] = fma(float(int32 x 8), d_w[b] * d_x[b], acc[b % 4])
 *   y[t, o] = hsum((acc0 + acc1) + (acc2 + acc3))   (+ the previous chunks' sum)
 * The integer products are exact (|w| <= 128, |q_x| <= 127: a maddubs pair
 * is at most 32512, no saturation), so a result differs from the float
 * definition in ref/quant_ref.c only through the activation rounding and the
 * float accumulation; tests/unit/test_quant.c derives and checks the bound.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on whether it is paired with another token, on n_tok, or on [o0, o1).
 * This machine's AVX2 has no VNNI, hence maddubs + madd; the activation
 * quantization costs O(n_in) per token per call and the weights stream once
 * per token pair.
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 10 KB per token */

typedef struct act {
    _Alignas(32) int8_t q[CHUNK_BLOCKS * KZ_QK];
    float d[CHUNK_BLOCKS];
    int32_t off[CHUNK_BLOCKS]; /* -8 * sum of the block's q (q4_0 offset) */
} act;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* quant.h kz_quant_act_block for nb consecutive blocks, bit for bit: IEEE
 * division by d, clamp, round half away from zero (trunc, then +-1 when the
 * exact fraction is >= 0.5). */
static void quant_act(act *a, const float *x, size_t nb) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f);
    const __m256 hi = _mm256_set1_ps(127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * KZ_QK;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float d = _mm_cvtss_f32(m4) / 127.0f;
        a->d[b] = d;
        if (d == 0.0f) {
            _mm256_store_si256((__m256i *)(a->q + b * KZ_QK), _mm256_setzero_si256());
            a->off[b] = 0;
            continue;
        }
        const __m256 dv = _mm256_set1_ps(d);
        __m256i qi[4];
        for (int k = 0; k < 4; k++) {
            __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v[k], dv), lo), hi);
            __m256 t = _mm256_round_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(r, t));
            __m256 step = _mm256_or_ps(_mm256_and_ps(r, sign), one);
            t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), step));
            qi[k] = _mm256_cvtps_epi32(t);
        }
        __m256i s =
            _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        a->off[b] = -8 * _mm_cvtsi128_si32(s4);
        // packs interleave 128-bit lanes; the permute restores element order
        __m256i p =
            _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
        _mm256_store_si256((__m256i *)(a->q + b * KZ_QK), _mm256_permutevar8x32_epi32(p, perm));
    }
}

ALWAYS_INLINE float hsum(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* One block of one row against nt (1 or 2) tokens' activations, into the
 * accumulators acc[t][k]. q4 selects the format at compile time. */
ALWAYS_INLINE void block_step(__m256 acc[2][4], int k, const uint8_t *blk, const act *a, size_t b,
                              int nt, int q4) {
    const __m256i ones = _mm256_set1_epi16(1);
    const float dw = kz_quant_scale(blk);
    __m256i wv;
    __m256i wabs = _mm256_setzero_si256();
    if (q4) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)(blk + 2));
        wv =
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
    } else {
        wv = _mm256_loadu_si256((const __m256i *)(blk + 2));
        wabs = _mm256_sign_epi8(wv, wv);
    }
    for (int t = 0; t < nt; t++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)(a[t].q + b * KZ_QK));
        __m256i p;
        if (q4) {
            p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xv), ones);
            p = _mm256_add_epi32(p, _mm256_zextsi128_si256(_mm_cvtsi32_si128(a[t].off[b])));
        } else {
            p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv, wv)), ones);
        }
        acc[t][k] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a[t].d[b]), acc[t][k]);
    }
}

/* Dot products of one row's nb blocks with nt tokens; block b feeds acc[b % 4]. */
ALWAYS_INLINE void row_dots(float *out, const uint8_t *row, const act *a, size_t nb, int nt,
                            int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    __m256 acc[2][4];
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) {
            acc[t][k] = _mm256_setzero_ps();
        }
    }
    size_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        for (int k = 0; k < 4; k++) {
            block_step(acc, k, row + (b + (size_t)k) * bsize, a, b + (size_t)k, nt, q4);
        }
    }
    for (int k = 0; k < 3; k++) { // constant indices keep acc in registers
        if (b + (size_t)k < nb) {
            block_step(acc, k, row + (b + (size_t)k) * bsize, a, b + (size_t)k, nt, q4);
        }
    }
    for (int t = 0; t < nt; t++) {
        out[t] = hsum(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
    }
}

static void rows_q8(float *out, const uint8_t *row, const act *a, size_t nb, int nt) {
    if (nt == 2) {
        row_dots(out, row, a, nb, 2, 0);
    } else {
        row_dots(out, row, a, nb, 1, 0);
    }
}

static void rows_q4(float *out, const uint8_t *row, const act *a, size_t nb, int nt) {
    if (nt == 2) {
        row_dots(out, row, a, nb, 2, 1);
    } else {
        row_dots(out, row, a, nb, 1, 1);
    }
}

static void matmul_q(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                     size_t n_tok, size_t o0, size_t o1, int q4) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    if (nb == 0) { // empty dot products, as the definition: 0
        for (size_t t = 0; t < n_tok; t++) {
            for (size_t o = o0; o < o1; o++) {
                y[t * ldy + o] = 0.0f;
            }
        }
        return;
    }
    act a[2];
    for (size_t t = 0; t < n_tok; t += 2) {
        const int nt = n_tok - t >= 2 ? 2 : 1;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            for (int k = 0; k < nt; k++) {
                quant_act(&a[k], x + (t + (size_t)k) * ldx + c0 * KZ_QK, cn);
            }
            for (size_t o = o0; o < o1; o++) {
                const uint8_t *row = (const uint8_t *)w + (o * nb + c0) * bsize;
                float r[2];
                if (q4) {
                    rows_q4(r, row, a, cn, nt);
                } else {
                    rows_q8(r, row, a, cn, nt);
                }
                for (int k = 0; k < nt; k++) {
                    float *yp = y + (t + (size_t)k) * ldy + o;
                    *yp = c0 == 0 ? r[k] : *yp + r[k];
                }
            }
        }
    }
}

void kz_matmul_q8_0_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

void kz_matmul_q4_0_avx2(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}
