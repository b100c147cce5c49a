/*
 * quant_avx512.c - AVX-512 (F/BW/DQ/VL, no VNNI) quantized language-model
 * projections (kernels.h matmul_q8_0, matmul_q4_0; formats in kernels/quant.h).
 *
 * The AVX2 version (quant_avx2.c) at twice the width: one 512-bit vector holds
 * two consecutive blocks. Data flow, per pair of tokens (or a last single
 * token) and per chunk of up to 256 blocks (8192 inputs) of the row:
 *   x[t] f32 --quant_act--> int8 q[32 b + i], float scale d_x[b], -8 * sum q (stack)
 *   per weight row o, per block pair (b, b + 1) (the last block alone, upper half zero):
 *     q8_0: 2 x 32 int8 w --(|w|, x negated where w < 0) maddubs, madd--> 16 int32
 *     q4_0: 2 x 16 bytes --nibbles to 64 u8 (0..15)-- maddubs, madd, + (-8 sum q) in lanes 0, 8
 *     acc[pair % 4] = fma(float(int32 x 16), [d_w d_x of b] x 8 | [of b + 1] x 8, acc[pair % 4])
 *   y[t, o] = hsum((acc0 + acc1) + (acc2 + acc3))   (+ the previous chunks' sum)
 * AVX-512 has no byte sign instruction: the sign of w moves onto x with a
 * masked subtract from zero. Integer products are exact (no maddubs
 * saturation: |w| <= 128, |q_x| <= 127). The block-to-accumulator mapping
 * differs from AVX2's, so the two levels agree with the scalar definition
 * within the same bound but not bit for bit with each other.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on whether it is paired with another token, on n_tok, or on [o0, o1).
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 10 KB per token */

typedef struct act {
    _Alignas(64) int8_t q[CHUNK_BLOCKS * KZ_QK];
    float d[CHUNK_BLOCKS];
    int32_t off[CHUNK_BLOCKS]; /* -8 * sum of the block's q (q4_0 offset) */
} act;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* quant.h kz_quant_act_block for nb consecutive blocks, bit for bit: IEEE
 * division by d, clamp, round half away from zero (trunc, then +-1 when the
 * exact fraction is >= 0.5). */
static void quant_act(act *a, const float *x, size_t nb) {
    const __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
    const __m512i one = _mm512_castps_si512(_mm512_set1_ps(1.0f));
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512 lo = _mm512_set1_ps(-127.0f);
    const __m512 hi = _mm512_set1_ps(127.0f);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * KZ_QK;
        const __m512 v0 = _mm512_loadu_ps(xb);
        const __m512 v1 = _mm512_loadu_ps(xb + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        a->d[b] = d;
        if (d == 0.0f) {
            _mm256_store_si256((__m256i *)(a->q + b * KZ_QK), _mm256_setzero_si256());
            a->off[b] = 0;
            continue;
        }
        const __m512 dv = _mm512_set1_ps(d);
        __m512i qi[2];
        for (int k = 0; k < 2; k++) {
            const __m512 r = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(k ? v1 : v0, dv), lo), hi);
            __m512 t = _mm512_roundscale_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __mmask16 up =
                _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(r, t)), half, _CMP_GE_OQ);
            const __m512 step = _mm512_castsi512_ps(
                _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(r), sign), one));
            t = _mm512_mask_add_ps(t, up, t, step);
            qi[k] = _mm512_cvtps_epi32(t);
        }
        a->off[b] = -8 * _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
        const __m256i q =
            _mm256_set_m128i(_mm512_cvtepi32_epi8(qi[1]), _mm512_cvtepi32_epi8(qi[0]));
        _mm256_store_si256((__m256i *)(a->q + b * KZ_QK), q);
    }
}

ALWAYS_INLINE float hsum(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* Blocks b and b + 1 of one row (only b when single) against nt (1 or 2)
 * tokens, into acc[t][k]. q4 selects the format at compile time. */
ALWAYS_INLINE void pair_step(__m512 acc[2][4], int k, const uint8_t *blk, const act *a, size_t b,
                             int nt, int q4, int single) {
    const __m512i ones = _mm512_set1_epi16(1);
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const float dw0 = kz_quant_scale(blk);
    const float dw1 = single ? 0.0f : kz_quant_scale(blk + bsize);
    __m512i wv;
    __m512i wabs = _mm512_setzero_si512();
    __mmask64 wneg = 0;
    if (q4) {
        const __m128i r0 = _mm_loadu_si128((const __m128i *)(blk + 2));
        const __m128i r1 =
            single ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(blk + bsize + 2));
        const __m256i raw = _mm256_set_m128i(r1, r0);
        // [b0, b1, b0 >> 4, b1 >> 4] -> [b0 lo, b0 hi, b1 lo, b1 hi] in 128-bit lanes
        const __m512i z =
            _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
        wv = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)),
                              _mm512_set1_epi8(0x0f));
    } else {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(blk + 2));
        const __m256i w1 = single ? _mm256_setzero_si256()
                                  : _mm256_loadu_si256((const __m256i *)(blk + bsize + 2));
        wv = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
        wabs = _mm512_abs_epi8(wv);
        wneg = _mm512_movepi8_mask(wv);
    }
    for (int t = 0; t < nt; t++) {
        const int8_t *xq = a[t].q + b * KZ_QK;
        const __m512i xv = single ? _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)xq))
                                  : _mm512_load_si512((const void *)xq);
        __m512i p;
        if (q4) {
            p = _mm512_madd_epi16(_mm512_maddubs_epi16(wv, xv), ones);
            p = _mm512_add_epi32(
                p, _mm512_maskz_expandloadu_epi32(single ? 0x0001 : 0x0101, a[t].off + b));
        } else {
            const __m512i xs = _mm512_mask_sub_epi8(xv, wneg, _mm512_setzero_si512(), xv);
            p = _mm512_madd_epi16(_mm512_maddubs_epi16(wabs, xs), ones);
        }
        const float s1 = single ? 0.0f : dw1 * a[t].d[b + 1];
        const __m512 sv =
            _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(dw0 * a[t].d[b]), _mm512_set1_ps(s1));
        acc[t][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sv, acc[t][k]);
    }
}

/* Dot products of one row's nb blocks with nt tokens; pair j (blocks 2j, 2j + 1)
 * feeds acc[j % 4]. */
ALWAYS_INLINE void row_dots(float *out, const uint8_t *row, const act *a, size_t nb, int nt,
                            int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const size_t n_pairs = (nb + 1) / 2; // the last one half-full when nb is odd
    __m512 acc[2][4];
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) {
            acc[t][k] = _mm512_setzero_ps();
        }
    }
    size_t j = 0;
    for (; j + 4 <= nb / 2; j += 4) {
        for (int k = 0; k < 4; k++) {
            const size_t b = 2 * (j + (size_t)k);
            pair_step(acc, k, row + b * bsize, a, b, nt, q4, 0);
        }
    }
    for (int k = 0; k < 4; k++) { // <= 3 full pairs and a half one; constant indices
        const size_t b = 2 * (j + (size_t)k);
        if (j + (size_t)k < n_pairs) {
            if (b + 1 < nb) {
                pair_step(acc, k, row + b * bsize, a, b, nt, q4, 0);
            } else {
                pair_step(acc, k, row + b * bsize, a, b, nt, q4, 1);
            }
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

void kz_matmul_q8_0_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

void kz_matmul_q4_0_avx512(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}
