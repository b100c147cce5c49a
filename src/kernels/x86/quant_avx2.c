/*
 * quant_avx2.c - AVX2 + FMA quantized language-model projections (kernels.h
 * matmul_q8_0, matmul_q4_0; formats in kernels/quant.h).
 *
 * Data flow, per pair of tokens (or a last single token) and per chunk of up
 * to 256 blocks (8192 inputs) of the row (the walk is kernels/quant_walk.h):
 *   x[t] f32 --quant_act--> int8 q[32 b + i], float scale d_x[b], -8 * sum q (stack)
 *   per weight row o, per group of 8 blocks (the last one may be partial):
 *     q8_0: 32 int8 w --(|w|, x * sign w) maddubs, madd--> int32 x 8 per block
 *     q4_0: blocks in pairs, 16 bytes each in one 256-bit vector: masked low nibbles
 *           (elements 0..15 of both) and shifted high ones (16..31) against the
 *           activations stored in the same pair layout (quant_act) --maddubs, add-->
 *           int16 x 16, eight partial sums per block
 *     the group's 8 (q4_0: 4) vectors --unpack/add transpose (q4_0: in int16, then
 *       shuffle, madd)--> int32 x 8, lane k = block k's exact sum (q4_0: + its -8 sum q)
 *     d_w: the 8 fp16 scales (16-bit inserts, F16C); acc = fma(float(sums), d_w d_x, acc)
 *   y[t, o] = hsum(acc)   (+ the previous chunks' sum)
 * The weight stream is prefetched into L1 2 KB ahead, one prefetch per 64 bytes (the
 * hardware prefetchers alone leave the DRAM stream slower:
 * docs/ARCHITECTURE.md#language-model-matmuls), or under the KZ_QPF_L2 policy into L2 and
 * from there into L1 (quant_prefetch.h): each entry point (kz_quant_avx2, at the end) runs
 * one mode, which quant_act records in the activations, where every group step sees it.
 * The integer products are exact (|w| <= 128, |q_x| <= 127: a maddubs pair
 * is at most 32512, no saturation; a q4_0 pair at most 3810, eight of them
 * 30480), so a result differs from the float definition in ref/quant_ref.c
 * only through the activation rounding and the float accumulation;
 * tests/unit/test_quant.c derives and checks the bound.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on whether it is paired with another token, on n_tok, or on [o0, o1).
 * AVX2 has no VNNI (AVX-VNNI CPUs aside), hence maddubs + madd; the activation
 * quantization costs O(n_in) per token per call and the weights stream once
 * per token pair. The batched entry points (kernels.h matvec_q8_0) run the same
 * row_dots in quant_walk.h's batched walk: each row tile read from memory once for
 * all tokens, one call per set of tokens sharing its weight loads (q8_0 pairs, q4_0
 * fours: WALK_SET_*), the same bits.
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/x86/quant_prefetch.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 10 KB per token */
#define GROUP 8          /* blocks per fold: one float lane each */
#define PREFETCH 2048    /* bytes ahead of the weight stream into L1 (quant_prefetch.h) */
#define WALK_SET_Q8 2    /* tokens per row_dots in the batched walk (quant_walk.h): */
#define WALK_SET_Q4 4    /* q8_0 spills past two (more instructions), q4_0 gains at four */
#define WALK_SET WALK_SET_Q4 /* the larger: the arrays of row_dots (quant_walk.h checks) */

typedef struct act {
    _Alignas(32) int8_t q[CHUNK_BLOCKS * KZ_QK];
    float d[CHUNK_BLOCKS + GROUP];     /* + GROUP: a last partial group reads 0 there */
    int32_t off[CHUNK_BLOCKS + GROUP]; /* -8 * sum of the block's q (q4_0 offset) */
    int prefetch;                      /* the entry point's prefetch mode (quant_prefetch.h) */
} act;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Stores block b's 32 codes: in order (q8_0), or in the q4_0 kernel's pair layout: blocks
 * 2p and 2p + 1 share 64 bytes, [2p: 0..15 | 2p+1: 0..15 | 2p: 16..31 | 2p+1: 16..31], so
 * that one 256-bit load meets the low (high) nibbles of two weight blocks. */
ALWAYS_INLINE void store_codes(act *a, size_t b, __m256i q, int q4) {
    if (!q4) {
        _mm256_store_si256((__m256i *)(void *)(a->q + b * KZ_QK), q);
        return;
    }
    int8_t *base = a->q + (b & ~(size_t)1) * KZ_QK + (b & 1) * 16;
    _mm_store_si128((__m128i *)(void *)base, _mm256_castsi256_si128(q));
    _mm_store_si128((__m128i *)(void *)(base + 32), _mm256_extracti128_si256(q, 1));
}

/* quant.h kz_quant_act_block for nb consecutive blocks, bit for bit: IEEE
 * division by d, clamp, round half away from zero (trunc, then +-1 when the
 * exact fraction is >= 0.5). q4 picks the q4_0 pair layout (store_codes); an odd
 * last block's partner is zeros there. Also records the prefetch mode pf for group_step. */
static void quant_act(act *a, const float *x, size_t nb, int q4, int pf) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f);
    const __m256 hi = _mm256_set1_ps(127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    a->prefetch = pf;
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
            store_codes(a, b, _mm256_setzero_si256(), q4);
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
        store_codes(a, b, _mm256_permutevar8x32_epi32(p, perm), q4);
    }
    if (q4 && nb % 2) {
        store_codes(a, nb, _mm256_setzero_si256(), q4);
    }
    for (size_t b = nb; b < nb + GROUP; b++) { // a last partial group reads these lanes
        a->d[b] = 0.0f;
        a->off[b] = 0;
    }
}

ALWAYS_INLINE float hsum8(__m256 s) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* The steps of the eight-block reduction (int32 x 8 partial sums of blocks 0..7 -> one
 * int32 x 8, lane k = the sum of block k's lanes), unpacks and adds only (no hadd, which
 * is three uops): 21 single-uop steps. They are taken as soon as their inputs exist
 * (group_sums_q8), so a token holds at most three vectors of the group instead of eight
 * and a pair of tokens fits the sixteen registers. */
ALWAYS_INLINE __m256i reduce_pair(__m256i a, __m256i b) { // per half: a x, b x, a y, b y
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
ALWAYS_INLINE __m256i reduce_quad(__m256i a, __m256i b) { // per half: blocks 4k .. 4k+3
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
ALWAYS_INLINE __m256i reduce_halves(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* q4_0: four block pairs' int16 partial sums (16 lanes, [block 2i: 8 | block 2i+1: 8], each
 * at most 7620) -> int32 x 8, lane k = block k's sum. Two transpose levels in int16 add
 * four partials a lane (at most 30480, no overflow) and leave, per 128-bit half, blocks
 * 0 4 2 6 (1 5 3 7 in the high half) in lanes i and i + 4; a byte shuffle puts each
 * block's two lanes side by side, one madd widens and adds them, one permute restores
 * the order: 12 operations where a madd per pair and an int32 transpose take 14, which
 * counts in a q4_0 row bound by its instructions
 * (docs/ARCHITECTURE.md#language-model-matmuls). The first level (reduce4_level) runs as
 * soon as two pairs exist (group_sums_q4), so a token holds at most two vectors. */
ALWAYS_INLINE __m256i reduce4_level(__m256i a, __m256i b) {
    return _mm256_add_epi16(_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
}
ALWAYS_INLINE __m256i reduce4_pairs(__m256i a, __m256i b) { // reduce4_level of pairs 0 1, 2 3
    const __m256i c = reduce4_level(a, b);
    const __m256i side_by_side = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7,
                                                  14, 15, 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12,
                                                  13, 6, 7, 14, 15);
    const __m256i w =
        _mm256_madd_epi16(_mm256_shuffle_epi8(c, side_by_side), _mm256_set1_epi16(1));
    return _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7));
}

/* q4_0 blocks b and b + 1 (b even) of one row, weight blocks w0 and w1 (w1 == w0 when
 * block b + 1 is past the chunk: its codes are zeros then), against nt tokens: int16 x 16
 * per token, [block b: 8 partial sums | block b + 1: 8] of nibble x q (0..15 nibbles,
 * maddubs pairs at most 3810, two of them added in int16: 7620, no overflow). */
ALWAYS_INLINE void pair_dots_q4(__m256i p[WALK_SET], const uint8_t *w0, const uint8_t *w1, const act *a,
                                size_t b, int nt) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const __m256i raw = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(w0 + 2))),
        _mm_loadu_si128((const __m128i *)(const void *)(w1 + 2)), 1);
    const __m256i lo = _mm256_and_si256(raw, mask);                       // elements 0..15
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask); // 16..31
    for (int t = 0; t < nt; t++) {
        const int8_t *xq = a[t].q + b * KZ_QK;
        const __m256i m = _mm256_add_epi16(
            _mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)(const void *)xq)),
            _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(const void *)(xq + 32))));
        p[t] = m;
    }
}

/* The fp16 scales of blocks b .. b+7 of a row (blocks of bsize bytes), as floats: eight
 * 16-bit loads inserted into one vector, F16C. A gather is slower; the inserts take 8
 * fewer instructions than packing the halves into two 64-bit words on the integer units
 * (a compute-bound q4_0 row counts them). */
ALWAYS_INLINE __m256 group_scales(const uint8_t *row, size_t b, int bsize) {
    const uint8_t *p = row + b * (size_t)bsize;
    uint16_t h[GROUP];
    for (int k = 0; k < GROUP; k++) {
        memcpy(&h[k], p + k * bsize, sizeof h[k]);
    }
    __m128i v = _mm_cvtsi32_si128(h[0]);
    v = _mm_insert_epi16(v, h[1], 1);
    v = _mm_insert_epi16(v, h[2], 2);
    v = _mm_insert_epi16(v, h[3], 3);
    v = _mm_insert_epi16(v, h[4], 4);
    v = _mm_insert_epi16(v, h[5], 5);
    v = _mm_insert_epi16(v, h[6], 6);
    v = _mm_insert_epi16(v, h[7], 7);
    return _mm256_cvtph_ps(v);
}

/* The same for the last n < 8 blocks of a chunk; lanes n.. are 0. */
static __m256 tail_scales(const uint8_t *row, size_t b, size_t n, int bsize) {
    _Alignas(16) uint16_t h[GROUP] = {0};
    for (size_t k = 0; k < n; k++) {
        memcpy(&h[k], row + (b + k) * (size_t)bsize, sizeof h[k]);
    }
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)h));
}

/* q8_0 block b of one row against nt (1 or 2) tokens: int32 x 8 partial sums p[t] whose
 * lanes add up to sum_i w_i q_x,i. */
ALWAYS_INLINE void block_dots(__m256i p[WALK_SET], const uint8_t *blk, const act *a, size_t b, int nt) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    const __m256i wabs = _mm256_abs_epi8(w); // -128 -> 128 as u8
    for (int t = 0; t < nt; t++) {
        const __m256i x = _mm256_load_si256((const __m256i *)(const void *)(a[t].q + b * KZ_QK));
        p[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(x, w)), ones);
    }
}

/* The exact sums of q4_0 blocks b .. b + n - 1 (n <= 8) of one row against nt tokens,
 * without the -8 offset, block b + k in lane k, lanes past n 0. */
ALWAYS_INLINE void group_sums_q4(__m256i s[WALK_SET], const uint8_t *row, const act *a, size_t b, size_t n,
                                 int nt) {
    __m256i prev[WALK_SET], lvl[WALK_SET][2];
    for (int t = 0; t < nt; t++) { // always written first; the zeros quiet GCC's flow analysis
        prev[t] = lvl[t][0] = lvl[t][1] = _mm256_setzero_si256();
    }
    for (int k = 0; k < GROUP; k += 2) {
        __m256i pk[WALK_SET];
        for (int t = 0; t < nt; t++) {
            pk[t] = _mm256_setzero_si256();
        }
        if ((size_t)k < n) {
            const uint8_t *w0 = row + (b + (size_t)k) * KZ_Q4_0_BLOCK_BYTES;
            const uint8_t *w1 = (size_t)k + 1 < n ? w0 + KZ_Q4_0_BLOCK_BYTES : w0;
            pair_dots_q4(pk, w0, w1, a, b + (size_t)k, nt);
        }
        for (int t = 0; t < nt; t++) {
            if (k % 4 == 0) {
                prev[t] = pk[t];
            } else {
                lvl[t][k / 4] = reduce4_level(prev[t], pk[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        s[t] = reduce4_pairs(lvl[t][0], lvl[t][1]);
    }
}

/* The same for q8_0 blocks. */
ALWAYS_INLINE void group_sums_q8(__m256i s[WALK_SET], const uint8_t *row, const act *a, size_t b, size_t n,
                                 int nt) {
    __m256i prev[WALK_SET], pair[WALK_SET], quad[WALK_SET][2];
    for (int t = 0; t < nt; t++) { // as in group_sums_q4
        prev[t] = pair[t] = quad[t][0] = quad[t][1] = _mm256_setzero_si256();
    }
    for (int k = 0; k < GROUP; k++) {
        __m256i pk[WALK_SET];
        for (int t = 0; t < nt; t++) {
            pk[t] = _mm256_setzero_si256();
        }
        if ((size_t)k < n) {
            block_dots(pk, row + (b + (size_t)k) * KZ_Q8_0_BLOCK_BYTES, a, b + (size_t)k, nt);
        }
        for (int t = 0; t < nt; t++) {
            if (k % 2 == 0) {
                prev[t] = pk[t];
                continue;
            }
            const __m256i h = reduce_pair(prev[t], pk[t]);
            if (k % 4 == 1) {
                pair[t] = h;
            } else {
                quad[t][k / 4] = reduce_quad(pair[t], h);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        s[t] = reduce_halves(quad[t][0], quad[t][1]);
    }
}

/* One group of n (1..8) blocks from block b: acc[t] += float(exact block sums) * d_w d_x,
 * block b + k in lane k. */
ALWAYS_INLINE void group_step(__m256 acc[WALK_SET], const uint8_t *row, const act *a, size_t b, size_t n,
                              int nt, int q4) {
    const int bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    quant_prefetch(row + b * (size_t)bsize, GROUP * (size_t)bsize, PREFETCH, a[0].prefetch);
    __m256i sums[WALK_SET];
    if (q4) {
        group_sums_q4(sums, row, a, b, n, nt);
    } else {
        group_sums_q8(sums, row, a, b, n, nt);
    }
    const __m256 dw = n == GROUP ? group_scales(row, b, bsize) : tail_scales(row, b, n, bsize);
    for (int t = 0; t < nt; t++) {
        __m256i s = sums[t];
        if (q4) { // lanes past n: off is 0 there (quant_act clears the chunk's tail)
            s = _mm256_add_epi32(s,
                                 _mm256_loadu_si256((const __m256i *)(const void *)(a[t].off + b)));
        }
        const __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(a[t].d + b));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[t]);
    }
}

/* Dot products of one row's nb blocks with nt tokens. */
ALWAYS_INLINE void row_dots(float *out, const uint8_t *row, const act *a, size_t nb, int nt,
                            int q4) {
    __m256 acc[WALK_SET];
    for (int t = 0; t < nt; t++) {
        acc[t] = _mm256_setzero_ps();
    }
    size_t b = 0;
    for (; b + GROUP <= nb; b += GROUP) {
        group_step(acc, row, a, b, GROUP, nt, q4);
    }
    if (b < nb) {
        group_step(acc, row, a, b, nb - b, nt, q4);
    }
    for (int t = 0; t < nt; t++) {
        out[t] = hsum8(acc[t]);
    }
}

#include "kernels/quant_walk.h"

void kz_matmul_q8_0_avx2(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 0, QPF_MODE_L1);
}

void kz_matmul_q4_0_avx2(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 1, QPF_MODE_L1);
}

static void q8_stream(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 0, QPF_MODE_STREAM);
}

static void q8_far(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 0, QPF_MODE_STREAM_FAR);
}

static void q8_reuse(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 0, QPF_MODE_REUSE);
}

static void q4_stream(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 1, QPF_MODE_STREAM);
}

static void q4_far(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 1, QPF_MODE_STREAM_FAR);
}

static void q4_reuse(QPF_PARAMS) {
    quant_walk(QPF_ARGS, 1, QPF_MODE_REUSE);
}

#define BATCH(name, q4, mode)                                                                  \
    static void name(QPF_PARAMS) {                                                             \
        quant_walk_batch(QPF_ARGS, q4, mode);                                                  \
    }
BATCH(q8_batch_l1, 0, QPF_MODE_L1)
BATCH(q8_batch_stream, 0, QPF_MODE_STREAM)
BATCH(q8_batch_far, 0, QPF_MODE_STREAM_FAR)
BATCH(q8_batch_reuse, 0, QPF_MODE_REUSE)
BATCH(q4_batch_l1, 1, QPF_MODE_L1)
BATCH(q4_batch_stream, 1, QPF_MODE_STREAM)
BATCH(q4_batch_far, 1, QPF_MODE_STREAM_FAR)
BATCH(q4_batch_reuse, 1, QPF_MODE_REUSE)
#undef BATCH

const kz_quant_fns kz_quant_avx2 = {
    .q8_0 = QPF_SLOTS(kz_matmul_q8_0_avx2, q8_stream, q8_far, q8_reuse),
    .q4_0 = QPF_SLOTS(kz_matmul_q4_0_avx2, q4_stream, q4_far, q4_reuse),
    .q8_0_batch = QPF_SLOTS(q8_batch_l1, q8_batch_stream, q8_batch_far, q8_batch_reuse),
    .q4_0_batch = QPF_SLOTS(q4_batch_l1, q4_batch_stream, q4_batch_far, q4_batch_reuse),
};
