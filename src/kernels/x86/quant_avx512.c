/*
 * quant_avx512.c - AVX-512 (F/BW/DQ/VL, and VNNI or AMX-INT8 in their sub-levels)
 * quantized language-model projections (kernels.h matmul_q8_0, matmul_q4_0;
 * formats in kernels/quant.h).
 *
 * Data flow, per set of tokens and per chunk of up to 256 blocks (8192 inputs)
 * of the row. A set is a pair (or a last single token) in calls of 1 to 3
 * tokens (decode steps) and up to four tokens in calls of four or more (the
 * prompt prefill: each weight group below is unpacked once for the set and the
 * rows are re-read half as often), eight for both formats on the VNNI path (their
 * codes unpacked into lane order once per group: no per-token work but the products)
 * (docs/ARCHITECTURE.md#language-model-matmuls). The activations of a set take up to
 * 85 KB of stack:
 *   x[t] f32 --quant_act--> int8 q_x by block quad (blocks 4j..4j+3): elements
 *            0..15 of the four blocks in one 64-byte row, 16..31 in the next;
 *            or, for VNNI sets of 4 to 8 tokens, in lane order: dword m (codes
 *            4m..4m+3) of block LANE(l) of a group at 64 m + 4 l (the quads' 4 x 4
 *            dword transpose per 128-bit section);
 *            d_x per block in lane order (below); -8 (q4_0) or -128 (q8_0) sum q_x
 *   per weight row o, per group of 16 blocks (the last one may be partial):
 *     64-byte windows of the row (unaligned loads; a full q8_0 group on a 32-byte boundary,
 *     as in GGUF tensors: its nine aligned lines, the windows cut from them by valignq)
 *     --vpermt2w--> per block quad:
 *     q8_0: codes 0..15 of the 4 blocks (wl), codes 16..31 (wh), int8
 *           sets in quad order: the sign of w moves onto q_x (masked subtract
 *             from zero), |w| (0..128) as u8 (w + 128 could saturate a maddubs pair)
 *             VNNI:  vpdpbusd(|wl|, +-q_x 0..15), vpdpbusd(|wh|, +-q_x 16..31), chained
 *             plain: maddubs, madd(1) for each half, add
 *     q4_0: the 4 blocks' 16 nibble bytes; low nibbles (elements 0..15, 0..15 as
 *           u8) against q_x 0..15, high nibbles against q_x 16..31
 *           VNNI:  two vpdpbusd, chained;  plain: two maddubs, add, madd(1)
 *       --> 4 x 4 int32 (block 4j + k in 128-bit section k)
 *     four quads --unpacks, adds--> 16 int32, block 4m + k in lane 4k + m (LANE):
 *       the exact sum_i c_i q_x,i (+ the offset's -8 sum q_x for q4_0)
 *     VNNI sets of 4 to 8 tokens instead (group_codes): the four quads' codes, u8
 *       (q8_0 u = w xor 0x80 = w + 128, q4_0 the nibbles), --the same dword
 *       transpose--> eight vectors in lane order, once for the set; per token eight
 *       vpdpbusd against its lane-order q_x, chained from its -128 (-8) sum q_x:
 *       16 int32 in lane order, no fold (the fold's shuffles become the
 *       transpose, paid once per set instead of once per token)
 *     d_w: the 16 fp16 scales picked from the same windows (vpermt2w, blends),
 *          vcvtph2ps
 *     acc = fma(float(int32 x 16), d_w * d_x, acc)
 *   y[t, o] = hsum(acc)   (+ the previous chunks' sum)
 *   (q4_0 prompts' lane-order sets of SEG_MIN_NT or more tokens over rows of more than
 *   SEG_GROUPS groups: the rows in tiles of SEG_ROWS, each tile's rows a segment of
 *   SEG_GROUPS groups at a time, the accumulators kept between segments, so a segment's
 *   activations stay in L1: chunk_rows)
 * Prompts of more than one set and up to KZ_PROMPT_TILE_TOKENS tokens quantize every
 * token once (up to ~250 KB of stack) and then walk the rows in tiles of about
 * KZ_PROMPT_TILE_BYTES, every set over a tile before the next tile, which the later sets
 * prefetch into L2 (matmul_q_tiles); longer ones run set after set over the call's rows.
 * The weight stream is prefetched into L1 4 KB (q8_0) or 8 KB (q4_0) ahead, one
 * prefetch per 64 bytes (the best distance and density for the DRAM stream under the L1
 * policy: docs/ARCHITECTURE.md#language-model-matmuls), or under the KZ_QPF_L2 policy into
 * L2 and from there into L1 (quant_prefetch.h; KZ_QPF_L2_FAR the same, further ahead);
 * the batched products' lane-order sets take KZ_QPF_L2's way under every policy
 * (set_prefetch).
 *
 * Exactness: every block's integer sum is exact in every path (|w| <= 128,
 * |q_x| <= 127: a maddubs pair is at most 32512, no saturation; vpdpbusd sums
 * u8 x s8 products in int32, at most 32 * 255 * 127 before the offset) and below
 * 2^24 after it, so its conversion is exact; the
 * scale is the float product d_w d_x (vcvtph2ps gives kz_fp16_to_f32's bits for
 * every half). The float work is one fma per block into lane LANE(block mod 16)
 * and a fixed 16-lane sum, so the VNNI and plain paths give the same bits
 * (tested) and differ from the scalar definition only through the activation
 * rounding and that accumulation (bound in tests/unit/test_quant.c). The order
 * differs from AVX2's, so the two levels agree with the definition within the
 * same bound but not bit for bit with each other.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on how many tokens share its set, on n_tok, on [o0, o1) or on which
 * integer path runs (a set only shares the weight unpacking; every token keeps
 * its own accumulator and its exact integer block sums, whichever order of integer
 * adds forms them).
 *
 * Batched matrix-vector products (kernels.h matvec_q8_0, matvec_q): the same chunk
 * kernels and activations with the rows outside the token sets, so each row tile is read
 * from memory once for every set of a pass; the same bits.
 *
 * Entry points (the end of the file): the integer path and the prefetch mode are
 * constants of each, collected in kz_quant_avx512 (plain), kz_quant_avx512_vnni and
 * kz_quant_avx512_amx (VNNI, and prompts of 8 or more tokens with q8_0 weights on AMX
 * tiles with the same bits: section "AMX-INT8 prompt path" below), which the probe puts
 * into the avx512, avx512-vnni and avx512-amx sub-levels' tables.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/x86/quant_prefetch.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 10 KB per token */
#define MAX_NT 8         /* tokens in a set (prefill): they share each group's unpacking */
#define MAX_NT_PLAIN 4   /* ... on the plain path, all of them in quad order */
#define MIN_LANE_NT 4    /* the smallest VNNI set in lane order (LANE_ORDER) */
#define GROUP 16         /* blocks per fold: one float lane each */
#define PREFETCH_Q8 4096 /* bytes ahead of the weight stream into L1 (quant_prefetch.h) */
#define PREFETCH_Q4 8192

/* The lane of block k (0..15) of a group after the fold (or the transpose), and the
 * block in lane k: the 4 x 4 transpose the fold leaves (an involution). */
#define LANE(k) (((k) % 4) * 4 + (k) / 4)

typedef struct act {
    /* quad order: quad j = blocks 4j..4j+3 at 128 j: elements 0..15 of block b at
     * 128 j + 16 (b - 4j), elements 16..31 64 bytes on (both formats); lane order
     * (quant_act's tr): elements 4m..4m+3 of block 16 g + LANE(l) at 512 g + 64 m + 4 l. */
    _Alignas(64) int8_t q[CHUNK_BLOCKS * KZ_QK];
    _Alignas(64) float d[CHUNK_BLOCKS];     /* d_x of block 16 g + k at 16 g + LANE(k) */
    _Alignas(64) int32_t off[CHUNK_BLOCKS]; /* -8 (q4_0) or -128 (q8_0) * sum q, same order */
    /* Five lines more: the tokens of a set (an array of act) would otherwise start every
     * 2.5 pages, half of them on the same L1 sets, which the weight stream passing through
     * L1 also needs. */
    _Alignas(64) char pad[5 * 64];
} act;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* --- integer paths ------------------------------------------------------------ */

/* The integer path of an entry point: maddubs + madd, vpdpbusd, or vpdpbusd with q8_0
 * prompts on AMX tiles. */
enum { PATH_PLAIN = 0, PATH_VNNI = 1, PATH_AMX = 2 };

/* vpdpbusd in inline assembly: the intrinsic would need the avx512vnni target
 * on every function it is inlined through, and that target would also let the
 * compiler turn the plain path's madd + add into VNNI instructions. Runs only
 * in the VNNI and AMX entry points, which only sub-levels of CPUs with VNNI hold.
 * acc + sum of 4 adjacent u8(u) * s8(s) per lane; s may be a memory operand, so an
 * activation vector loaded for one product is folded into it (one instruction fewer). */
ALWAYS_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    return acc;
}

/* --- folds ------------------------------------------------------------------ */

/* Combines int32 lanes: a sum, or (mx) the maximum of non-negative floats' bits. */
ALWAYS_INLINE __m512i comb(__m512i a, __m512i b, int mx) {
    return mx ? _mm512_max_epu32(a, b) : _mm512_add_epi32(a, b);
}

/* 2 x 8 lanes (blocks 0, 1) and 2 x 8 lanes (blocks 2, 3) -> 4 x 4 lanes
 * (blocks 0..3, one 128-bit section each). */
ALWAYS_INLINE __m512i fold_pairs(__m512i a, __m512i b, int mx) {
    return comb(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)), mx);
}

/* Four quads (block 4j + k in section k of q[j]) -> block 4m + k in lane 4k + m. */
ALWAYS_INLINE __m512i fold_quads(__m512i q0, __m512i q1, __m512i q2, __m512i q3, int mx) {
    // section k: [k, 4 + k, k, 4 + k] and [8 + k, 12 + k, 8 + k, 12 + k]
    const __m512i s0 = comb(_mm512_unpacklo_epi32(q0, q1), _mm512_unpackhi_epi32(q0, q1), mx);
    const __m512i s1 = comb(_mm512_unpacklo_epi32(q2, q3), _mm512_unpackhi_epi32(q2, q3), mx);
    return comb(_mm512_unpacklo_epi64(s0, s1), _mm512_unpackhi_epi64(s0, s1), mx);
}

/* Four vectors v[j] -> v[m]: in every 128-bit section s, lane j of the new v[m] is lane
 * m of the old v[j] (the 4 x 4 int32 transpose of each section; fold_quads' shuffles
 * without the sums). Quads (block 4j + s in section s of v[j], its dwords in the
 * section's lanes) become dword m of block LANE(l) in lane l of v[m]. */
ALWAYS_INLINE void transpose4(__m512i v[4]) {
    const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
    v[0] = _mm512_unpacklo_epi64(t0, t2);
    v[1] = _mm512_unpackhi_epi64(t0, t2);
    v[2] = _mm512_unpacklo_epi64(t1, t3);
    v[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* One group's codes (512 bytes at q) from quad order to lane order (act). */
static inline void transpose_group(int8_t *q) {
    __m512i v[2][4]; // [half][quad]: all read before any is overwritten
    for (int h = 0; h < 2; h++) {
        for (int j = 0; j < 4; j++) {
            v[h][j] = _mm512_load_si512((const void *)(q + 128 * j + 64 * h));
        }
    }
    for (int h = 0; h < 2; h++) {
        transpose4(v[h]);
        for (int m = 0; m < 4; m++) {
            _mm512_store_si512((void *)(q + 64 * (4 * h + m)), v[h][m]);
        }
    }
}

/* --- activations ----------------------------------------------------------- */

/* quant.h kz_quant_act_block for nb consecutive blocks, bit for bit, a group
 * of 16 at a time: the block maxima of |x| folded into one vector (lane
 * order), d = amax / 127 (IEEE division), then per block x / d (IEEE), clamp,
 * round half away from zero (trunc, then +-1 when the exact fraction is
 * >= 0.5); for q4_0 the code sums come from the stored codes by maddubs with
 * ones and the same fold (q8_0 too: its VNNI path offsets w by 128). Blocks past nb
 * up to the group's end are zero. tr: the codes in lane order (act), for group_codes. */
static void quant_act(act *a, const float *x, size_t nb, int q4, int tr) {
    const __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
    const __m512i one = _mm512_castps_si512(_mm512_set1_ps(1.0f));
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512 lo = _mm512_set1_ps(-127.0f);
    const __m512 hi = _mm512_set1_ps(127.0f);
    const __m512i ones8 = _mm512_set1_epi8(1);
    const __m512i ones16 = _mm512_set1_epi16(1);
    for (size_t g = 0; g * GROUP < nb; g++) {
        const size_t b0 = g * GROUP;
        __m512i quad[4], pair[2];
        for (int j = 0; j < GROUP / 2; j++) {
            __m512i m[2];
            for (int h = 0; h < 2; h++) {
                const size_t b = b0 + 2 * (size_t)j + (size_t)h;
                m[h] = _mm512_setzero_si512();
                if (b < nb) {
                    const __m512 v0 = _mm512_abs_ps(_mm512_loadu_ps(x + b * KZ_QK));
                    const __m512 v1 = _mm512_abs_ps(_mm512_loadu_ps(x + b * KZ_QK + 16));
                    m[h] = _mm512_castps_si512(_mm512_max_ps(v0, v1));
                }
            }
            // [block 2j: 8 lanes, block 2j + 1: 8 lanes]
            pair[j % 2] = _mm512_max_epu32(_mm512_shuffle_i64x2(m[0], m[1], 0x44),
                                           _mm512_shuffle_i64x2(m[0], m[1], 0xee));
            if (j % 2) {
                quad[j / 2] = fold_pairs(pair[0], pair[1], 1);
            }
        }
        const __m512 amax = _mm512_castsi512_ps(fold_quads(quad[0], quad[1], quad[2], quad[3], 1));
        _mm512_store_ps(a->d + b0, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)));
        for (int k = 0; k < GROUP; k++) {
            const size_t b = b0 + (size_t)k;
            int8_t *q0 = a->q + b / 4 * 128 + b % 4 * 16;
            int8_t *q1 = q0 + 64; /* elements 16..31 */
            const float d = a->d[b0 + LANE(k)];
            if (d == 0.0f) { // also every block past nb
                _mm_storeu_si128((__m128i *)q0, _mm_setzero_si128());
                _mm_storeu_si128((__m128i *)q1, _mm_setzero_si128());
                continue;
            }
            const __m512 dv = _mm512_set1_ps(d);
            for (int h = 0; h < 2; h++) {
                const float *xk = x + b * KZ_QK + 16 * (size_t)h;
                const __m512 r =
                    _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(_mm512_loadu_ps(xk), dv), lo), hi);
                __m512 t = _mm512_roundscale_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                const __mmask16 up =
                    _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(r, t)), half, _CMP_GE_OQ);
                const __m512 step = _mm512_castsi512_ps(
                    _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(r), sign), one));
                t = _mm512_mask_add_ps(t, up, t, step);
                _mm_storeu_si128((__m128i *)(h ? q1 : q0),
                                 _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(t)));
            }
        }
        for (int j = 0; j < 4; j++) {
            const int8_t *xq = a->q + (b0 / 4 + (size_t)j) * 128;
            const __m512i s16 = _mm512_add_epi16(
                _mm512_maddubs_epi16(ones8, _mm512_load_si512((const void *)xq)),
                _mm512_maddubs_epi16(ones8, _mm512_load_si512((const void *)(xq + 64))));
            quad[j] = _mm512_madd_epi16(s16, ones16);
        }
        const __m512i sum = fold_quads(quad[0], quad[1], quad[2], quad[3], 0);
        _mm512_store_si512((void *)(a->off + b0), // -8 or -128 sum q
                           _mm512_sub_epi32(_mm512_setzero_si512(),
                                            _mm512_slli_epi32(sum, q4 ? 3 : 7)));
        if (tr) {
            transpose_group(a->q + b0 * KZ_QK);
        }
    }
}

/* --- weights ------------------------------------------------------------------ */

/*
 * A group of 16 blocks is read as unaligned 64-byte windows (so that each load
 * serves several blocks), and every code and scale is picked out of a pair of
 * windows (128 bytes, 64 words) by vpermt2w: they all sit at even offsets in
 * the group. Offsets from the group's first byte:
 *   q8_0 (544 bytes): quad j (bytes 136 j ..) has windows 136 j + 0, 64 (its
 *        codes 0..15 and its scales) and 136 j + 8, 72 (codes 16..31).
 *   q4_0 (288 bytes): windows 0, 64, 128, 192, 224 (the last ends with the
 *        group); quad j (bytes 72 j ..) from windows j, j + 1; the scale of
 *        block k (byte 18 k) from windows 0, 1 (k <= 7), 2, 3 (k <= 10), 3, 4.
 * Below, w is a word of the result, u the u-th word after the quad's first
 * scale (q4_0: u = 9 k + i for byte pair i of block k), and the macros give
 * the word's index in its window pair.
 */
// clang-format off
#define Q4_T(j, u) ((j) < 3 ? 4 * (j) + 1 + (u) : (u) < 19 ? 13 + (u) : 29 + (u))
#define Q4_W(j, w) Q4_T(j, 9 * ((w) / 8) + (w) % 8) /* quad j, block w / 8 */
#define Q8_W(h, w) (17 * ((w) / 8) + 1 + 4 * (h) + (w) % 8) /* block w / 8, codes 16 h.. */
/* the scale of block k (in lane LANE(k)) */
#define Q8_S(k) (17 * ((k) % 4))
#define Q4_S(k)                                                                                \
    ((k) <= 7 ? 9 * (k) : (k) <= 10 ? 9 * (k) - 64 : (k) <= 14 ? 9 * (k) - 96 : 9 * (k) - 80)
#define ROW32(f, j)                                                                            \
    {f(j, 0),  f(j, 1),  f(j, 2),  f(j, 3),  f(j, 4),  f(j, 5),  f(j, 6),  f(j, 7),             \
     f(j, 8),  f(j, 9),  f(j, 10), f(j, 11), f(j, 12), f(j, 13), f(j, 14), f(j, 15),            \
     f(j, 16), f(j, 17), f(j, 18), f(j, 19), f(j, 20), f(j, 21), f(j, 22), f(j, 23),            \
     f(j, 24), f(j, 25), f(j, 26), f(j, 27), f(j, 28), f(j, 29), f(j, 30), f(j, 31)}
#define BY_LANE(f, j) f(LANE(j)) /* lane j holds block LANE(j); lanes 16..31 unused */
#define LANES(f)                                                                               \
    {BY_LANE(f, 0),  BY_LANE(f, 1),  BY_LANE(f, 2),  BY_LANE(f, 3),  BY_LANE(f, 4),             \
     BY_LANE(f, 5),  BY_LANE(f, 6),  BY_LANE(f, 7),  BY_LANE(f, 8),  BY_LANE(f, 9),             \
     BY_LANE(f, 10), BY_LANE(f, 11), BY_LANE(f, 12), BY_LANE(f, 13), BY_LANE(f, 14),            \
     BY_LANE(f, 15)}
// clang-format on
static const _Alignas(64) uint16_t q8_code_idx[2][32] = {ROW32(Q8_W, 0), ROW32(Q8_W, 1)};
static const _Alignas(64) uint16_t q4_code_idx[4][32] = {ROW32(Q4_W, 0), ROW32(Q4_W, 1),
                                                         ROW32(Q4_W, 2), ROW32(Q4_W, 3)};
static const _Alignas(64) uint16_t q8_scale_idx[32] = LANES(Q8_S);
static const _Alignas(64) uint16_t q4_scale_idx[32] = LANES(Q4_S);

// clang-format off
/* lanes l whose block LANE(l) satisfies lo <= LANE(l) <= hi */
#define LANE_MASK(lo, hi)                                                                      \
    ((__mmask32)((LANE(0) >= (lo) && LANE(0) <= (hi)) << 0 |                                   \
                 (LANE(1) >= (lo) && LANE(1) <= (hi)) << 1 |                                   \
                 (LANE(2) >= (lo) && LANE(2) <= (hi)) << 2 |                                   \
                 (LANE(3) >= (lo) && LANE(3) <= (hi)) << 3 |                                   \
                 (LANE(4) >= (lo) && LANE(4) <= (hi)) << 4 |                                   \
                 (LANE(5) >= (lo) && LANE(5) <= (hi)) << 5 |                                   \
                 (LANE(6) >= (lo) && LANE(6) <= (hi)) << 6 |                                   \
                 (LANE(7) >= (lo) && LANE(7) <= (hi)) << 7 |                                   \
                 (LANE(8) >= (lo) && LANE(8) <= (hi)) << 8 |                                   \
                 (LANE(9) >= (lo) && LANE(9) <= (hi)) << 9 |                                   \
                 (LANE(10) >= (lo) && LANE(10) <= (hi)) << 10 |                                \
                 (LANE(11) >= (lo) && LANE(11) <= (hi)) << 11 |                                \
                 (LANE(12) >= (lo) && LANE(12) <= (hi)) << 12 |                                \
                 (LANE(13) >= (lo) && LANE(13) <= (hi)) << 13 |                                \
                 (LANE(14) >= (lo) && LANE(14) <= (hi)) << 14 |                                \
                 (LANE(15) >= (lo) && LANE(15) <= (hi)) << 15))
// clang-format on

#define Q8_WINDOWS 16
#define Q4_WINDOWS 5

/* 64 bytes at blk + off; in a tail group only the group's first nbytes are
 * read (the rest is zero), so nothing past the row's last block is touched. */
ALWAYS_INLINE __m512i window(const uint8_t *blk, int off, int nbytes, int full) {
    if (full) {
        __m512i v = _mm512_loadu_si512((const void *)(blk + off));
        // Keep the window in a register: the compiler would otherwise fold the
        // load into each of its two or three uses and read it that many times.
        __asm__("" : "+v"(v));
        return v;
    }
    const int n = nbytes - off < 0 ? 0 : nbytes - off > 64 ? 64 : nbytes - off;
    const __mmask64 m = n == 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
    return _mm512_maskz_loadu_epi8(m, blk + off);
}

/* Window i of a full q8_0 group (window's offset within the group: 136 (i / 4) + {0, 64, 8,
 * 72}[i % 4]) from the aligned lines L of the group, which starts lead bytes into L[0]. */
#define Q8_WINDOW_OFF(i) (136 * ((i) / 4) + ((i) % 2) * 64 + (((i) / 2) % 2) * 8)
#define Q8_LINE_AT(lead, i) ((lead) + Q8_WINDOW_OFF(i))
#define Q8_LINE_WINDOW(L, lead, i)                                                                 \
    _mm512_alignr_epi64(L[Q8_LINE_AT(lead, i) / 64 + 1], L[Q8_LINE_AT(lead, i) / 64],              \
                        (Q8_LINE_AT(lead, i) % 64) / 8)

/* A full q8_0 group's windows at blk, lead (0 or 32) bytes past a 64-byte boundary, from
 * the nine aligned lines that hold it, the two end lines masked to the group's bytes: nine
 * loads instead of sixteen unaligned ones, fourteen or sixteen of which span two lines. The core's
 * loads per line of weights are what let the DRAM stream overlap the arithmetic
 * (docs/ARCHITECTURE.md#language-model-matmuls). */
ALWAYS_INLINE void q8_windows_aligned(__m512i win[Q8_WINDOWS], const uint8_t *blk, int lead) {
    const uint8_t *base = blk - lead;
    const __mmask64 low = 0xffffffffull; // bytes 0..31 of a line
    __m512i L[10];
    L[0] = lead ? _mm512_maskz_loadu_epi8(~low, base) : _mm512_load_si512((const void *)base);
    for (int k = 1; k < 8; k++) {
        L[k] = _mm512_load_si512((const void *)(base + 64 * k));
    }
    L[8] = lead ? _mm512_load_si512((const void *)(base + 512))
                : _mm512_maskz_loadu_epi8(low, base + 512);
    L[9] = _mm512_setzero_si512(); // never picked: a window ends by byte 544 of the group
// clang-format off
#define Q8_LINE_WINDOWS(lead)                                                                      \
    win[0] = Q8_LINE_WINDOW(L, lead, 0);   win[1] = Q8_LINE_WINDOW(L, lead, 1);                    \
    win[2] = Q8_LINE_WINDOW(L, lead, 2);   win[3] = Q8_LINE_WINDOW(L, lead, 3);                    \
    win[4] = Q8_LINE_WINDOW(L, lead, 4);   win[5] = Q8_LINE_WINDOW(L, lead, 5);                    \
    win[6] = Q8_LINE_WINDOW(L, lead, 6);   win[7] = Q8_LINE_WINDOW(L, lead, 7);                    \
    win[8] = Q8_LINE_WINDOW(L, lead, 8);   win[9] = Q8_LINE_WINDOW(L, lead, 9);                    \
    win[10] = Q8_LINE_WINDOW(L, lead, 10); win[11] = Q8_LINE_WINDOW(L, lead, 11);                  \
    win[12] = Q8_LINE_WINDOW(L, lead, 12); win[13] = Q8_LINE_WINDOW(L, lead, 13);                  \
    win[14] = Q8_LINE_WINDOW(L, lead, 14); win[15] = Q8_LINE_WINDOW(L, lead, 15)
    // clang-format on
    if (lead) { // the shifts are immediates: one constant lead per branch
        Q8_LINE_WINDOWS(32);
    } else {
        Q8_LINE_WINDOWS(0);
    }
#undef Q8_LINE_WINDOWS
}

/* The windows of a group with nvalid blocks (GROUP outside a row's tail); full q8_0 groups
 * on a 32-byte boundary (every group of a GGUF tensor's rows of whole groups) from aligned
 * lines. */
ALWAYS_INLINE void load_windows(__m512i *win, const uint8_t *blk, int q4, int nvalid) {
    const int full = nvalid == GROUP;
    if (!q4 && full && ((uintptr_t)blk & 31) == 0) {
        q8_windows_aligned(win, blk, (int)((uintptr_t)blk & 63));
        return;
    }
    if (q4) {
        static const int off[Q4_WINDOWS] = {0, 64, 128, 192, 224};
        for (int i = 0; i < Q4_WINDOWS; i++) {
            win[i] = window(blk, off[i], nvalid * KZ_Q4_0_BLOCK_BYTES, full);
        }
    } else {
        static const int off[4] = {0, 64, 8, 72};
        for (int i = 0; i < Q8_WINDOWS; i++) {
            win[i] = window(blk, 136 * (i / 4) + off[i % 4], nvalid * KZ_Q8_0_BLOCK_BYTES, full);
        }
    }
}

ALWAYS_INLINE __m512i pick(__m512i lo, const uint16_t *idx, __m512i hi) {
    return _mm512_permutex2var_epi16(lo, _mm512_load_si512((const void *)idx), hi);
}

/* Integer dot products of the 16 blocks of group g (windows win) with nt (1
 * to MAX_NT_PLAIN) tokens (act in quad order), folded and offset: r[t] lane LANE(k) =
 * exact sum_i c_i q_i of block k. VNNI sets of MIN_LANE_NT or more take group_codes
 * instead. */
ALWAYS_INLINE void group_dots(__m512i r[MAX_NT_PLAIN], const __m512i *win, const act *a, size_t g,
                              int nt, int q4, int vnni) {
    if (vnni && q4) {
        // The nibbles 0..15 as unsigned codes against the signed q_x (a->off: -8 sum
        // q_x), unpacked once for every token of the set.
        __m512i ul[4], uh[4];
        for (int j = 0; j < 4; j++) {
            const __m512i low4 = _mm512_set1_epi8(0x0f);
            const __m512i w = pick(win[j], q4_code_idx[j], win[j + 1]);
            ul[j] = _mm512_and_si512(w, low4);
            uh[j] = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
        }
        for (int t = 0; t < nt; t++) {
            __m512i q[4];
            for (int j = 0; j < 4; j++) {
                const int8_t *xq = a[t].q + (g * GROUP / 4 + (size_t)j) * 128;
                const __m512i xl = _mm512_load_si512((const void *)xq);
                const __m512i xh = _mm512_load_si512((const void *)(xq + 64));
                q[j] = dpbusd(dpbusd(_mm512_setzero_si512(), ul[j], xl), uh[j], xh);
            }
            r[t] = _mm512_add_epi32(fold_quads(q[0], q[1], q[2], q[3], 0),
                                    _mm512_load_si512((const void *)(a[t].off + g * GROUP)));
        }
        return;
    }
    // The plain path (maddubs + madd), and q8_0 on VNNI: w's sign moved onto q_x, which
    // streams from DRAM at least as fast as offset codes
    // (docs/ARCHITECTURE.md#language-model-matmuls).
    __m512i quad[MAX_NT_PLAIN][4];
    const __m512i one = _mm512_set1_epi16(1);
    if (q4) {
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        for (int j = 0; j < 4; j++) {
            const __m512i w = pick(win[j], q4_code_idx[j], win[j + 1]);
            const __m512i wl = _mm512_and_si512(w, low4);
            const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = a[t].q + (g * GROUP / 4 + (size_t)j) * 128;
                const __m512i xl = _mm512_load_si512((const void *)xq);
                const __m512i xh = _mm512_load_si512((const void *)(xq + 64));
                const __m512i s16 = _mm512_add_epi16(_mm512_maddubs_epi16(wl, xl),
                                                     _mm512_maddubs_epi16(wh, xh));
                quad[t][j] = _mm512_madd_epi16(s16, one);
            }
        }
    } else {
        // The sign of w moves onto q_x (masked subtract from zero: AVX-512 has no
        // byte sign instruction), so |w| (0..128) is the unsigned operand: with w + 128
        // a maddubs pair could reach 2 * 255 * 127 and saturate.
        const __m512i z = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m512i wl = pick(win[4 * j], q8_code_idx[0], win[4 * j + 1]);
            const __m512i wh = pick(win[4 * j + 2], q8_code_idx[1], win[4 * j + 3]);
            const __m512i al = _mm512_abs_epi8(wl), ah = _mm512_abs_epi8(wh);
            const __mmask64 nl = _mm512_movepi8_mask(wl), nh = _mm512_movepi8_mask(wh);
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = a[t].q + (g * GROUP / 4 + (size_t)j) * 128;
                const __m512i xl = _mm512_load_si512((const void *)xq);
                const __m512i xh = _mm512_load_si512((const void *)(xq + 64));
                const __m512i sl = _mm512_mask_sub_epi8(xl, nl, z, xl);
                const __m512i sh = _mm512_mask_sub_epi8(xh, nh, z, xh);
                if (vnni) {
                    quad[t][j] = dpbusd(dpbusd(z, al, sl), ah, sh);
                } else { // maddubs pairs reach 2 * 128 * 127: widen each half before adding
                    quad[t][j] =
                        _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(al, sl), one),
                                         _mm512_madd_epi16(_mm512_maddubs_epi16(ah, sh), one));
                }
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        r[t] = fold_quads(quad[t][0], quad[t][1], quad[t][2], quad[t][3], 0);
        if (q4) {
            r[t] = _mm512_add_epi32(r[t], _mm512_load_si512((const void *)(a[t].off + g * GROUP)));
        }
    }
}

/* The 16 fp16 scales of a group (windows win) as floats in lane order. The
 * window pairs are permuted independently and blended, which keeps the chain
 * short (masked permutes into one register would serialise them). */
ALWAYS_INLINE __m512 group_scales(const __m512i *win, int q4) {
    __m512i h;
    if (q4) {
        const __m512i idx = _mm512_load_si512((const void *)q4_scale_idx);
        const __m512i a = _mm512_permutex2var_epi16(win[0], idx, win[1]);
        const __m512i b = _mm512_permutex2var_epi16(win[2], idx, win[3]);
        const __m512i c = _mm512_permutex2var_epi16(win[3], idx, win[4]);
        h = _mm512_mask_blend_epi16(LANE_MASK(11, 15),
                                    _mm512_mask_blend_epi16(LANE_MASK(8, 10), a, b), c);
    } else {
        const __m512i idx = _mm512_load_si512((const void *)q8_scale_idx);
        const __m512i a = _mm512_permutex2var_epi16(win[0], idx, win[1]);
        const __m512i b = _mm512_permutex2var_epi16(win[4], idx, win[5]);
        const __m512i c = _mm512_permutex2var_epi16(win[8], idx, win[9]);
        const __m512i d = _mm512_permutex2var_epi16(win[12], idx, win[13]);
        h = _mm512_mask_blend_epi16(LANE_MASK(8, 15),
                                    _mm512_mask_blend_epi16(LANE_MASK(4, 7), a, b),
                                    _mm512_mask_blend_epi16(LANE_MASK(12, 15), c, d));
    }
    return _mm512_cvtph_ps(_mm512_castsi512_si256(h));
}

/* The unsigned codes of a group (windows win) in lane order for vpdpbusd: u[m] lane l =
 * codes 4m..4m+3 of block LANE(l) (act's lane order), q4_0 nibbles 0..15 (act off: -8
 * sum q_x), q8_0 u = w xor 0x80 = w + 128, 0..255 (act off: -128 sum q_x). Picked per
 * quad as the plain path does, then transposed once for every token of the set. */
ALWAYS_INLINE void group_codes(__m512i u[8], const __m512i *win, int q4) {
    if (q4) {
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        __m512i w[4];
        for (int j = 0; j < 4; j++) {
            w[j] = pick(win[j], q4_code_idx[j], win[j + 1]);
        }
        transpose4(w); // bytes, so the nibbles can be split after it
        for (int m = 0; m < 4; m++) {
            u[m] = _mm512_and_si512(w[m], low4);
            u[4 + m] = _mm512_and_si512(_mm512_srli_epi16(w[m], 4), low4);
        }
        return;
    }
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int h = 0; h < 2; h++) {
        __m512i w[4];
        for (int j = 0; j < 4; j++) {
            w[j] = _mm512_xor_si512(pick(win[4 * j + 2 * h], q8_code_idx[h], win[4 * j + 2 * h + 1]),
                                    bias);
        }
        transpose4(w);
        for (int m = 0; m < 4; m++) {
            u[4 * h + m] = w[m];
        }
    }
}

/* Whether a set of nt tokens takes group_codes (act in lane order) rather than
 * group_dots (act in quad order). */
#define LANE_ORDER(nt, vnni) ((vnni) && (nt) >= MIN_LANE_NT)

/* acc[t] += the 16 blocks of group g (at blk, nvalid of them) against the nt tokens of
 * a, one fma per block into lane LANE(block). VNNI sets of MIN_LANE_NT or more: the
 * codes are unpacked and transposed once (group_codes) and each token's block sums are
 * eight vpdpbusd chained from its offset, already in lane order; the chains advance
 * together (one code vector against every token, then the next), so the set's
 * independent vpdpbusd issue back to back rather than one token's dependent chain after
 * another, and the registers hold the eight codes, the chains and the accumulators;
 * smaller sets (and the plain path): group_dots in quad order, which streams the weights
 * from DRAM faster there (docs/ARCHITECTURE.md#language-model-matmuls). */
ALWAYS_INLINE void group_step(__m512 acc[MAX_NT], const uint8_t *blk, const act *a, size_t g,
                              int nt, int q4, int vnni, int nvalid) {
    __m512i win[Q8_WINDOWS];
    load_windows(win, blk, q4, nvalid);
    if (LANE_ORDER(nt, vnni)) {
        const __m512 dw = group_scales(win, q4);
        __m512i u[8];
        group_codes(u, win, q4);
        __m512i r[MAX_NT];
        for (int t = 0; t < nt; t++) {
            r[t] = _mm512_load_si512((const void *)(a[t].off + g * GROUP));
        }
        for (int m = 0; m < 8; m++) {
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = a[t].q + g * GROUP * KZ_QK + 64 * m;
                r[t] = dpbusd(r[t], u[m], _mm512_load_si512((const void *)xq));
            }
        }
        for (int t = 0; t < nt; t++) {
            const __m512 s = _mm512_mul_ps(dw, _mm512_load_ps(a[t].d + g * GROUP));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r[t]), s, acc[t]);
        }
        return;
    }
    __m512i r[MAX_NT_PLAIN];
    group_dots(r, win, a, g, nt, q4, vnni);
    const __m512 dw = group_scales(win, q4);
    for (int t = 0; t < nt; t++) {
        const __m512 s = _mm512_mul_ps(dw, _mm512_load_ps(a[t].d + g * GROUP));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r[t]), s, acc[t]);
    }
}

ALWAYS_INLINE float hsum(__m512 s) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* Groups of a row segment and rows of a row tile in the segmented walk (chunk_rows), and
 * the smallest set that takes it. */
#define SEG_GROUPS 4
#define SEG_ROWS 16
#define SEG_MIN_NT 5

/* Row o's groups [g0, g1) of a chunk (at row, gbytes each) into acc; the tail group
 * (tail blocks past the last full one) too when tail > 0. */
ALWAYS_INLINE void row_groups(__m512 acc[MAX_NT], const uint8_t *row, size_t gbytes, size_t g0,
                              size_t g1, int tail, const act *a, int pf, int nt, int q4,
                              int vnni) {
    for (size_t g = g0; g < g1; g++) {
        const uint8_t *blk = row + g * gbytes;
        // Consecutive rows are contiguous: within a chunk, the prefetches run into
        // the next rows.
        quant_prefetch(blk, gbytes, q4 ? PREFETCH_Q4 : PREFETCH_Q8, pf);
        group_step(acc, blk, a, g, nt, q4, vnni, GROUP);
    }
    if (tail) {
        group_step(acc, row + g1 * gbytes, a, g1, nt, q4, vnni, tail);
    }
}

/* y[t * ldy + o] = the sum of acc[t]'s lanes, or y + it when accumulate. */
ALWAYS_INLINE void row_store(float *y, size_t ldy, size_t o, const __m512 acc[MAX_NT],
                             int accumulate, int nt) {
    for (int t = 0; t < nt; t++) {
        float *yp = y + (size_t)t * ldy + o;
        const float v = hsum(acc[t]);
        *yp = accumulate ? *yp + v : v;
    }
}

/* Rows [o0, o1) of one chunk (cn blocks from block c0 of each row) against
 * the nt tokens of a: y[t * ldy + o] = the dot product, or y + it when
 * accumulate (a later chunk). pf: the weight stream's prefetch mode (quant_prefetch.h).
 * With seg (matmul_q's prompts), q4_0 lane-order sets of SEG_MIN_NT or more tokens over
 * rows longer than SEG_GROUPS groups run segmented: per tile of
 * SEG_ROWS rows, every row's first SEG_GROUPS groups, then every row's next ones, the
 * accumulators kept on the stack in between, so that the part of the set's activations a
 * segment reads (up to eight tokens' codes, scales and offsets) stays in L1 across the
 * tile's rows; a whole row's would not for the MLP's down projection, and the kernel would
 * read them from L2 for every row. Each accumulator lane takes the same fma in the same
 * order either way: the same bits. The batched products (matvec_q) walk whole rows: their
 * row tiles are a few rows, streamed from DRAM, and segments there streamed four-token
 * sets slower (the weight prefetches run along whole rows), as they did four-token prompt
 * sets, whose activations take half the L1, and q8_0 prompt sets of five to eight, whose
 * rows are twice as long. */
ALWAYS_INLINE void chunk_rows(float *y, size_t ldy, const uint8_t *w, size_t nb, size_t c0,
                              size_t cn, size_t o0, size_t o1, const act *a, int accumulate, int pf,
                              int seg, int nt, int q4, int vnni) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const size_t gbytes = GROUP * bsize;
    const size_t full = cn / GROUP;
    const int tail = (int)(cn % GROUP);
    if (!seg || !q4 || !LANE_ORDER(nt, vnni) || nt < SEG_MIN_NT || full <= SEG_GROUPS) {
        for (size_t o = o0; o < o1; o++) {
            __m512 acc[MAX_NT];
            for (int t = 0; t < MAX_NT; t++) {
                acc[t] = _mm512_setzero_ps();
            }
            row_groups(acc, w + (o * nb + c0) * bsize, gbytes, 0, full, tail, a, pf, nt, q4,
                       vnni);
            row_store(y, ldy, o, acc, accumulate, nt);
        }
        return;
    }
    __m512 kept[SEG_ROWS][MAX_NT];
    for (size_t r0 = o0; r0 < o1; r0 += SEG_ROWS) {
        const size_t r1 = o1 - r0 < SEG_ROWS ? o1 : r0 + SEG_ROWS;
        for (size_t g0 = 0; g0 < full; g0 += SEG_GROUPS) {
            const size_t g1 = full - g0 < SEG_GROUPS ? full : g0 + SEG_GROUPS;
            for (size_t o = r0; o < r1; o++) {
                __m512 acc[MAX_NT];
                for (int t = 0; t < MAX_NT; t++) { // only the set's nt are kept and used
                    acc[t] = g0 && t < nt ? kept[o - r0][t] : _mm512_setzero_ps();
                }
                row_groups(acc, w + (o * nb + c0) * bsize, gbytes, g0, g1, g1 == full ? tail : 0,
                           a, pf, nt, q4, vnni);
                if (g1 == full) {
                    row_store(y, ldy, o, acc, accumulate, nt);
                } else {
                    for (int t = 0; t < nt; t++) {
                        kept[o - r0][t] = acc[t];
                    }
                }
            }
        }
    }
}

typedef void (*chunk_fn)(float *y, size_t ldy, const uint8_t *w, size_t nb, size_t c0, size_t cn,
                         size_t o0, size_t o1, const act *a, int accumulate, int pf, int seg);

#define CHUNK_FN(name, nt, q4, vnni)                                                               \
    static void name(float *y, size_t ldy, const uint8_t *w, size_t nb, size_t c0, size_t cn,      \
                     size_t o0, size_t o1, const act *a, int accumulate, int pf, int seg) {        \
        chunk_rows(y, ldy, w, nb, c0, cn, o0, o1, a, accumulate, pf, seg, nt, q4, vnni);           \
    }
CHUNK_FN(chunk_q8_1, 1, 0, 0)
CHUNK_FN(chunk_q8_2, 2, 0, 0)
CHUNK_FN(chunk_q8_1v, 1, 0, 1)
CHUNK_FN(chunk_q8_2v, 2, 0, 1)
CHUNK_FN(chunk_q4_1, 1, 1, 0)
CHUNK_FN(chunk_q4_2, 2, 1, 0)
CHUNK_FN(chunk_q4_1v, 1, 1, 1)
CHUNK_FN(chunk_q4_2v, 2, 1, 1)
CHUNK_FN(chunk_q8_3, 3, 0, 0)
CHUNK_FN(chunk_q8_4, 4, 0, 0)
CHUNK_FN(chunk_q8_3v, 3, 0, 1)
CHUNK_FN(chunk_q8_4v, 4, 0, 1)
CHUNK_FN(chunk_q4_3, 3, 1, 0)
CHUNK_FN(chunk_q4_4, 4, 1, 0)
CHUNK_FN(chunk_q4_3v, 3, 1, 1)
CHUNK_FN(chunk_q4_4v, 4, 1, 1)
CHUNK_FN(chunk_q8_5v, 5, 0, 1)
CHUNK_FN(chunk_q8_6v, 6, 0, 1)
CHUNK_FN(chunk_q8_7v, 7, 0, 1)
CHUNK_FN(chunk_q8_8v, 8, 0, 1)
CHUNK_FN(chunk_q4_5v, 5, 1, 1)
CHUNK_FN(chunk_q4_6v, 6, 1, 1)
CHUNK_FN(chunk_q4_7v, 7, 1, 1)
CHUNK_FN(chunk_q4_8v, 8, 1, 1)

/* --- AMX-INT8 prompt path ------------------------------------------------------
 *
 * Prompts of AMX_MIN_TOK or more tokens with q8_0 weights, in the AMX entry points
 * (the avx512-amx sub-level: dispatch.c saw AMX-INT8 and the OS granted the tiles). It
 * computes the same bits as the kernels above: the same activation quantization
 * (quant_act), the same exact integer sum per block, the same float product
 * d_w d_x, the same fma into lane LANE(block mod 16) and the same hsum tree,
 * only with the integer sums of 16 rows x 16 tokens from one tdpbssd:
 *
 *   per 32 tokens (two token tiles), per chunk of <= 256 blocks:
 *     quant_act per token --> B tiles: block b as 8 rows (4 codes each) x 16 tokens,
 *                             and d_x per block and token
 *     per 16 weight rows (a ragged tail under its own tile configuration), per token tile:
 *       per batch of 4 blocks: A tiles = the rows' 32 codes of each block straight
 *         from the q8_0 rows (stride: the row's bytes); C = A x B (tdpbssd, exact
 *         int32) for the 4 blocks, stored; while the next batch's tiles run:
 *         acc[row][LANE(b mod 16)][token] = fma(float(C), d_w d_x, that acc)
 *         (d_w of the 16 rows by one gather)
 *       hsum over the 16 lanes (hsum's tree, a vector of tokens at a time) -> y
 * The 16-lane accumulators (16 KB) stay in L1. The per-block accumulation, not the
 * tile multiply, bounds this path, and it still beats the VNNI kernel
 * (docs/ARCHITECTURE.md#language-model-matmuls). The codes are not copied into aligned
 * tiles first: that is slower. q4_0 keeps the kernels above (its nibbles would need
 * unpacking before a tile load).
 */
#define AMX_MIN_TOK 8 /* prompts this long take the AMX path */
#define AMX_TILE 16   /* rows of a weight tile = tokens of an activation tile */

/* Four blocks per batch: C (rows x 16 int32) in tiles 0..3, A (rows x 32 codes)
 * alternating in 4 and 5, B (8 x 64 bytes) alternating in 6 and 7. */
__attribute__((target("amx-tile"))) static void amx_configure(int rows) {
    const uint8_t r = (uint8_t)rows, k4 = KZ_QK / 4;
    const uint8_t n[8] = {r, r, r, r, r, r, k4, k4};
    const uint16_t colsb[8] = {64, 64, 64, 64, KZ_QK, KZ_QK, 64, 64};
    _Alignas(64) kz_amx_tile_config c;
    kz_amx_tile_config_set(&c, n, colsb);
    _tile_loadconfig(&c);
}

#define AMX_BATCH 4 /* blocks whose tile products are issued before their accumulation */

typedef struct amx_buf {
    _Alignas(64) act a;                                           /* one token's chunk */
    _Alignas(64) int32_t b[2][CHUNK_BLOCKS][KZ_QK / 4][AMX_TILE]; /* B tiles per block */
    _Alignas(64) float dx[2][CHUNK_BLOCKS][AMX_TILE];             /* d_x per block, token */
    _Alignas(64) float acc[AMX_TILE][GROUP][AMX_TILE];            /* [row][lane][token] */
    _Alignas(64) int32_t c[2][AMX_BATCH][AMX_TILE][AMX_TILE];     /* C of two batches */
} amx_buf;

/* B tiles and d_x of tokens [t0, t0 + nt) (nt <= 32) for the chunk at block c0. */
static void amx_pack_tokens(amx_buf *m, const float *x, size_t ldx, size_t t0, size_t nt,
                            size_t c0, size_t cn) {
    for (int tt = 0; tt < 2; tt++) { // tokens past nt stay zero: their sums are 0
        memset(m->b[tt], 0, cn * sizeof m->b[tt][0]);
        memset(m->dx[tt], 0, cn * sizeof m->dx[tt][0]);
    }
    for (size_t i = 0; i < nt; i++) {
        quant_act(&m->a, x + (t0 + i) * ldx + c0 * KZ_QK, cn, 0, 0);
        const size_t tt = i / AMX_TILE, n = i % AMX_TILE;
        for (size_t b = 0; b < cn; b++) {
            const int8_t *q0 = m->a.q + b / 4 * 128 + b % 4 * 16;
            for (int k4 = 0; k4 < KZ_QK / 4; k4++) {
                memcpy(&m->b[tt][b][k4][n], q0 + (k4 < 4 ? 4 * k4 : 64 + 4 * (k4 - 4)), 4);
            }
            m->dx[tt][b][n] = m->a.d[b / GROUP * GROUP + LANE(b % GROUP)];
        }
    }
}

/* The fp16 scales at blk, blk + rs, ... (one block of each of `rows` rows) as
 * floats; lanes past rows 0 (their rows may lie beyond the matrix). */
static inline __m512 amx_row_scales(const uint8_t *blk, size_t rs, int rows) {
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int32_t)rs));
    const __mmask16 valid = (__mmask16)((1u << rows) - 1u);
    const __m512i h =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, idx, (const void *)blk, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}

/* C tiles 0..nbat-1 = the tile products of blocks [b0, b0 + nbat) (their codes at
 * blk + 2, rows rs bytes apart) against token tile tt, stored to c (tile numbers are
 * immediates: block b0 + i uses C tile i). */
__attribute__((target("amx-tile,amx-int8"))) static inline void
amx_issue_batch(amx_buf *m, const uint8_t *blk, size_t rs, int tt, size_t b0, size_t nbat,
                int32_t (*c)[AMX_TILE][AMX_TILE]) {
    const int32_t *bt = &m->b[tt][b0][0][0];
    const size_t bstep = sizeof m->b[tt][0] / sizeof(int32_t);
#define AMX_MUL(i, ta, tb)                                                                     \
    if ((i) < nbat) {                                                                          \
        _tile_zero(i);                                                                         \
        _tile_loadd(ta, blk + 2 + (i) * KZ_Q8_0_BLOCK_BYTES, rs);                              \
        _tile_loadd(tb, bt + (i) * bstep, 64);                                                 \
        _tile_dpbssd(i, ta, tb);                                                               \
    }
    AMX_MUL(0, 4, 6)
    AMX_MUL(1, 5, 7)
    AMX_MUL(2, 4, 6)
    AMX_MUL(3, 5, 7)
#undef AMX_MUL
    _tile_stored(0, c[0], 64);
    if (nbat > 1) {
        _tile_stored(1, c[1], 64);
    }
    if (nbat > 2) {
        _tile_stored(2, c[2], 64);
    }
    if (nbat > 3) {
        _tile_stored(3, c[3], 64);
    }
}

/* acc[row][LANE(b mod 16)] = fma(float(C), d_w d_x, acc) for blocks [b0, b0 + nbat);
 * a lane's first block (b < 16) starts from +0 as the VNNI kernels do. */
static inline void amx_accumulate_batch(amx_buf *m, const uint8_t *blk, size_t rs, int tt,
                                        size_t b0, size_t nbat,
                                        int32_t (*c)[AMX_TILE][AMX_TILE], int rows) {
    const __m512 zero = _mm512_setzero_ps();
    for (size_t i = 0; i < nbat; i++) {
        const size_t b = b0 + i;
        _Alignas(64) float dw[AMX_TILE];
        _mm512_store_ps(dw, amx_row_scales(blk + i * KZ_Q8_0_BLOCK_BYTES, rs, rows));
        const __m512 dx = _mm512_load_ps(m->dx[tt][b]);
        const int lane = LANE((int)(b % GROUP));
        for (int r = 0; r < rows; r++) {
            float *acc = m->acc[r][lane];
            const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
            const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c[i][r]));
            _mm512_store_ps(acc, _mm512_fmadd_ps(v, sc, b < GROUP ? zero : _mm512_load_ps(acc)));
        }
    }
}

/* Rows [o, o + rows) against token tile tt of the packed tokens, one chunk: the
 * lane accumulators, then their sums into y. The tile products of AMX_BATCH blocks
 * are issued before their accumulation, so their latencies overlap. */
__attribute__((target("amx-tile,amx-int8"))) static void
amx_rows(amx_buf *m, float *y, size_t ldy, const uint8_t *w, size_t nb, size_t c0, size_t cn,
         size_t o, int rows, int tt, size_t tok0, size_t ntok, int accumulate) {
    for (size_t k = cn; k < GROUP; k++) { // lanes no block of this chunk reaches stay 0
        for (int r = 0; r < rows; r++) {
            _mm512_store_ps(m->acc[r][LANE(k)], _mm512_setzero_ps());
        }
    }
    // Batch k's tile products and stores are issued before batch k - 1 is accumulated
    // (from the other half of c), so the tile latency hides behind vector work.
    const size_t rs = nb * KZ_Q8_0_BLOCK_BYTES;
    const uint8_t *row0 = w + o * rs + c0 * KZ_Q8_0_BLOCK_BYTES;
    size_t prev = 0;
    for (size_t b0 = 0; b0 < cn; b0 += AMX_BATCH) {
        const int slot = (int)(b0 / AMX_BATCH % 2);
        amx_issue_batch(m, row0 + b0 * KZ_Q8_0_BLOCK_BYTES, rs, tt, b0,
                        cn - b0 < AMX_BATCH ? cn - b0 : AMX_BATCH, m->c[slot]);
        if (b0 > 0) {
            amx_accumulate_batch(m, row0 + prev * KZ_Q8_0_BLOCK_BYTES, rs, tt, prev, AMX_BATCH,
                                 m->c[1 - slot], rows);
        }
        prev = b0;
    }
    if (cn > 0) {
        amx_accumulate_batch(m, row0 + prev * KZ_Q8_0_BLOCK_BYTES, rs, tt, prev, cn - prev,
                             m->c[prev / AMX_BATCH % 2], rows);
    }
    for (int r = 0; r < rows; r++) {
        __m512 l[GROUP];
        for (int k = 0; k < GROUP; k++) {
            l[k] = _mm512_load_ps(m->acc[r][k]);
        }
        for (int k = 0; k < 8; k++) { // hsum's tree: lanes i + 8, i + 4, i + 2, i + 1
            l[k] = _mm512_add_ps(l[k], l[k + 8]);
        }
        for (int k = 0; k < 4; k++) {
            l[k] = _mm512_add_ps(l[k], l[k + 4]);
        }
        l[0] = _mm512_add_ps(l[0], l[2]);
        l[1] = _mm512_add_ps(l[1], l[3]);
        _Alignas(64) float v[AMX_TILE];
        _mm512_store_ps(v, _mm512_add_ps(l[0], l[1]));
        for (size_t n = 0; n < ntok; n++) {
            float *yp = y + (tok0 + n) * ldy + o + (size_t)r;
            *yp = accumulate ? *yp + v[n] : v[n];
        }
    }
}

/* Each thread's amx_buf (~350 KB), allocated on its first prompt and freed when the
 * thread exits: a fresh allocation per call would take page faults, since buffers
 * this large are mapped and unmapped each time. */
static pthread_key_t amx_key;
static pthread_once_t amx_key_once = PTHREAD_ONCE_INIT;
static int amx_key_ok;

static void amx_key_init(void) {
    amx_key_ok = pthread_key_create(&amx_key, free) == 0;
}

static amx_buf *amx_thread_buf(void) {
    pthread_once(&amx_key_once, amx_key_init);
    if (!amx_key_ok) {
        return NULL;
    }
    amx_buf *m = pthread_getspecific(amx_key);
    if (!m) {
        m = aligned_alloc(64, sizeof(amx_buf));
        if (m && pthread_setspecific(amx_key, m) != 0) {
            free(m);
            m = NULL;
        }
    }
    return m;
}

/* The whole call on AMX; returns false (nothing written) if its buffer cannot be had. */
__attribute__((target("amx-tile,amx-int8"))) static bool
matmul_q8_amx(float *y, size_t ldy, const float *x, size_t ldx, const uint8_t *w, size_t nb,
              size_t n_tok, size_t o0, size_t o1) {
    if (nb * KZ_Q8_0_BLOCK_BYTES * AMX_TILE > (size_t)INT32_MAX) {
        return false; // the scale gather's offsets are int32
    }
    amx_buf *m = amx_thread_buf();
    if (!m) {
        return false;
    }
    for (size_t t0 = 0; t0 < n_tok; t0 += 2 * AMX_TILE) {
        const size_t nt = n_tok - t0 < 2 * AMX_TILE ? n_tok - t0 : 2 * AMX_TILE;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            amx_pack_tokens(m, x, ldx, t0, nt, c0, cn);
            int configured = 0;
            for (size_t o = o0; o < o1; o += AMX_TILE) {
                const int rows = (int)(o1 - o < AMX_TILE ? o1 - o : AMX_TILE);
                if (rows != configured) {
                    amx_configure(rows);
                    configured = rows;
                }
                for (int tt = 0; tt * AMX_TILE < (int)nt; tt++) {
                    const size_t tok0 = t0 + (size_t)tt * AMX_TILE;
                    const size_t ntok = nt - (size_t)tt * AMX_TILE < AMX_TILE
                                            ? nt - (size_t)tt * AMX_TILE
                                            : AMX_TILE;
                    amx_rows(m, y, ldy, w, nb, c0, cn, o, rows, tt, tok0, ntok, c0 != 0);
                }
            }
            _tile_release();
        }
    }
    return true;
}

/* The chunk kernel of each set size: [q4][vnni][nt - 1]; NULL: never chosen. */
static const chunk_fn fns[2][2][MAX_NT] = {
    {{chunk_q8_1, chunk_q8_2, chunk_q8_3, chunk_q8_4},
     {chunk_q8_1v, chunk_q8_2v, chunk_q8_3v, chunk_q8_4v, chunk_q8_5v, chunk_q8_6v, chunk_q8_7v,
      chunk_q8_8v}},
    {{chunk_q4_1, chunk_q4_2, chunk_q4_3, chunk_q4_4},
     {chunk_q4_1v, chunk_q4_2v, chunk_q4_3v, chunk_q4_4v, chunk_q4_5v, chunk_q4_6v, chunk_q4_7v,
      chunk_q4_8v}},
};

/* Tokens 0..n-1 of x (rows ldx apart) quantized into a[0..n-1] for the activation chunk of
 * cn blocks from block c0, each in the layout of its set (sets of per tokens from token 0:
 * lane order for the VNNI path's sets of MIN_LANE_NT or more). */
static void quant_tokens(act *a, const float *x, size_t ldx, size_t n, size_t per, size_t c0,
                         size_t cn, int q4, int vnni) {
    for (size_t k = 0; k < n; k++) {
        const size_t set = k / per * per;
        const size_t nt = n - set < per ? n - set : per;
        quant_act(&a[k], x + k * ldx + c0 * KZ_QK, cn, q4, LANE_ORDER(nt, vnni));
    }
}

/* Prefetches bytes [b0, b1) from p into L2. */
static void prefetch_l2(const char *p, size_t b0, size_t b1) {
    for (size_t b = b0 & ~(size_t)63; b < b1; b += 64) {
        _mm_prefetch(p + b, _MM_HINT_T1);
    }
}

/* matmul_q's prompts of more than one set and up to KZ_PROMPT_TILE_TOKENS tokens: every
 * token quantized once per activation chunk, then per row tile of about
 * KZ_PROMPT_TILE_BYTES every set over the tile, the first one streaming it from DRAM and,
 * before each later set, that set's share of the next tile prefetched into L2 (kernels.h
 * prompt_tile_tokens). Each (t, o) gets the same chunk kernel calls as in matmul_q's
 * walk: the same bits. */
static void matmul_q_tiles(float *y, size_t ldy, const float *x, size_t ldx, const uint8_t *w,
                           size_t nb, size_t n_tok, size_t o0, size_t o1, int q4, int vnni,
                           size_t per, int pf) {
    const size_t row_bytes = nb * (q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES);
    const size_t tile = row_bytes < KZ_PROMPT_TILE_BYTES ? KZ_PROMPT_TILE_BYTES / row_bytes : 1;
    const size_t n_sets = (n_tok + per - 1) / per;
    act a[KZ_PROMPT_TILE_TOKENS];
    for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
        const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
        quant_tokens(a, x, ldx, n_tok, per, c0, cn, q4, vnni);
        for (size_t r0 = o0; r0 < o1; r0 += tile) {
            const size_t r1 = o1 - r0 < tile ? o1 : r0 + tile;
            const size_t next = (o1 - r1 < tile ? o1 - r1 : tile) * row_bytes;
            for (size_t s = 0; s < n_sets; s++) {
                if (s > 0) {
                    prefetch_l2((const char *)(w + r1 * row_bytes), (s - 1) * next / (n_sets - 1),
                                s * next / (n_sets - 1));
                }
                const size_t t = s * per, nt = n_tok - t < per ? n_tok - t : per;
                fns[q4][vnni][nt - 1](y + t * ldy, ldy, w, nb, c0, cn, r0, r1, a + t, c0 != 0, pf,
                                      1);
            }
        }
    }
}

/* The matmul of one entry point: q4 the format, path the integer path, pf the prefetch
 * mode (quant_prefetch.h). */
static void matmul_q(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                     size_t n_tok, size_t o0, size_t o1, int q4, int path, int pf) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    if (nb == 0) { // empty dot products, as the definition: 0
        for (size_t t = 0; t < n_tok; t++) {
            for (size_t o = o0; o < o1; o++) {
                y[t * ldy + o] = 0.0f;
            }
        }
        return;
    }
    if (!q4 && path == PATH_AMX && n_tok >= AMX_MIN_TOK &&
        matmul_q8_amx(y, ldy, x, ldx, (const uint8_t *)w, nb, n_tok, o0, o1)) {
        return;
    }
    const int vnni = path != PATH_PLAIN;
    const size_t max_nt = vnni ? MAX_NT : MAX_NT_PLAIN;
    const size_t per = n_tok >= MAX_NT_PLAIN ? max_nt : 2; // tokens per set (header)
    if (n_tok > per && n_tok <= KZ_PROMPT_TILE_TOKENS) {
        matmul_q_tiles(y, ldy, x, ldx, (const uint8_t *)w, nb, n_tok, o0, o1, q4, vnni, per, pf);
        return;
    }
    act a[MAX_NT];
    for (size_t t = 0; t < n_tok; t += per) {
        const int nt = (int)(n_tok - t >= per ? per : n_tok - t);
        const chunk_fn fn = fns[q4][vnni][nt - 1];
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            for (int k = 0; k < nt; k++) {
                quant_act(&a[k], x + (t + (size_t)k) * ldx + c0 * KZ_QK, cn, q4,
                          LANE_ORDER(nt, vnni));
            }
            fn(y + t * ldy, ldy, (const uint8_t *)w, nb, c0, cn, o0, o1, a, c0 != 0, pf, 1);
        }
    }
}

/* The prefetch mode of a batched set: the entry point's, except that lane-order sets
 * stream with QPF_MODE_STREAM's pair (into L2 ahead, from there into L1) under every
 * policy but the reused weights'. Their kernels spend several times longer per weight byte
 * than the decode step's: with L1 prefetches alone they streamed from DRAM slower on the
 * Zen 4, and QPF_MODE_STREAM_FAR's longer distance, which the decode step gains from there,
 * was slower for them (docs/ARCHITECTURE.md#language-model-matmuls). */
static inline int set_prefetch(int pf, size_t nt, int vnni) {
    return pf != QPF_MODE_REUSE && LANE_ORDER(nt, vnni) ? QPF_MODE_STREAM : pf;
}

/* The batched matrix-vector product of one entry point (kernels.h matvec_q8_0): every
 * token of a pass quantized once per chunk, then per row tile of about
 * KZ_MATVEC_TILE_BYTES the pass's tokens in sets of the path's largest size, each set's
 * chunk kernel over the tile's rows while they are in L1. The chunk kernels and the
 * activations are matmul_q's, and a token's bits never depend on its set (header), so
 * every token gets matmul_q's bits. Never the AMX path: it gives the same bits, and a
 * decode step's few tokens do not fill its tiles. */
static void matvec_q(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                     size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4, int path, int pf) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    if (nb == 0) {
        matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4, PATH_PLAIN, pf);
        return;
    }
    const int vnni = path != PATH_PLAIN;
    const size_t max_nt = vnni ? MAX_NT : MAX_NT_PLAIN;
    const size_t tile = kz_matvec_tile_rows(nb * (q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES));
    act a[KZ_MATVEC_PASS];
    for (size_t t0 = 0; t0 < n_tok; t0 += KZ_MATVEC_PASS) {
        const size_t np = n_tok - t0 < KZ_MATVEC_PASS ? n_tok - t0 : KZ_MATVEC_PASS;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            quant_tokens(a, x + t0 * ldx, ldx, np, max_nt, c0, cn, q4, vnni);
            for (size_t r0 = o0; r0 < o1; r0 += tile) {
                const size_t r1 = o1 - r0 < tile ? o1 : r0 + tile;
                for (size_t t = 0; t < np; t += max_nt) {
                    const size_t nt = np - t < max_nt ? np - t : max_nt;
                    fns[q4][vnni][nt - 1](y + (t0 + t) * ldy, ldy, (const uint8_t *)w, nb, c0,
                                          cn, r0, r1, a + t, c0 != 0, set_prefetch(pf, nt, vnni),
                                          0);
                }
            }
        }
    }
}

/* --- entry points ------------------------------------------------------------ */

void kz_matmul_q8_0_avx512(QPF_PARAMS) {
    matmul_q(QPF_ARGS, 0, PATH_PLAIN, QPF_MODE_L1);
}

void kz_matmul_q4_0_avx512(QPF_PARAMS) {
    matmul_q(QPF_ARGS, 1, PATH_PLAIN, QPF_MODE_L1);
}

/* A table entry: walk (matmul_q, or matvec_q for the batched steps) at a format, path and
 * prefetch mode. */
#define ENTRY(name, walk, q4, path, pf)                                                        \
    static void name(QPF_PARAMS) {                                                             \
        walk(QPF_ARGS, q4, path, pf);                                                          \
    }
ENTRY(q8_plain_stream, matmul_q, 0, PATH_PLAIN, QPF_MODE_STREAM)
ENTRY(q8_plain_reuse, matmul_q, 0, PATH_PLAIN, QPF_MODE_REUSE)
ENTRY(q4_plain_stream, matmul_q, 1, PATH_PLAIN, QPF_MODE_STREAM)
ENTRY(q4_plain_reuse, matmul_q, 1, PATH_PLAIN, QPF_MODE_REUSE)
ENTRY(q8_vnni_l1, matmul_q, 0, PATH_VNNI, QPF_MODE_L1)
ENTRY(q8_vnni_stream, matmul_q, 0, PATH_VNNI, QPF_MODE_STREAM)
ENTRY(q8_vnni_reuse, matmul_q, 0, PATH_VNNI, QPF_MODE_REUSE)
ENTRY(q4_vnni_l1, matmul_q, 1, PATH_VNNI, QPF_MODE_L1)
ENTRY(q4_vnni_stream, matmul_q, 1, PATH_VNNI, QPF_MODE_STREAM)
ENTRY(q4_vnni_reuse, matmul_q, 1, PATH_VNNI, QPF_MODE_REUSE)
ENTRY(q8_amx_l1, matmul_q, 0, PATH_AMX, QPF_MODE_L1)
ENTRY(q8_amx_stream, matmul_q, 0, PATH_AMX, QPF_MODE_STREAM)
ENTRY(q8_amx_reuse, matmul_q, 0, PATH_AMX, QPF_MODE_REUSE)
ENTRY(q8_plain_batch_l1, matvec_q, 0, PATH_PLAIN, QPF_MODE_L1)
ENTRY(q8_plain_batch_stream, matvec_q, 0, PATH_PLAIN, QPF_MODE_STREAM)
ENTRY(q8_plain_batch_reuse, matvec_q, 0, PATH_PLAIN, QPF_MODE_REUSE)
ENTRY(q4_plain_batch_l1, matvec_q, 1, PATH_PLAIN, QPF_MODE_L1)
ENTRY(q4_plain_batch_stream, matvec_q, 1, PATH_PLAIN, QPF_MODE_STREAM)
ENTRY(q4_plain_batch_reuse, matvec_q, 1, PATH_PLAIN, QPF_MODE_REUSE)
ENTRY(q8_vnni_batch_l1, matvec_q, 0, PATH_VNNI, QPF_MODE_L1)
ENTRY(q8_vnni_batch_stream, matvec_q, 0, PATH_VNNI, QPF_MODE_STREAM)
ENTRY(q8_vnni_batch_reuse, matvec_q, 0, PATH_VNNI, QPF_MODE_REUSE)
ENTRY(q4_vnni_batch_l1, matvec_q, 1, PATH_VNNI, QPF_MODE_L1)
ENTRY(q4_vnni_batch_stream, matvec_q, 1, PATH_VNNI, QPF_MODE_STREAM)
ENTRY(q4_vnni_batch_reuse, matvec_q, 1, PATH_VNNI, QPF_MODE_REUSE)
ENTRY(q8_plain_far, matmul_q, 0, PATH_PLAIN, QPF_MODE_STREAM_FAR)
ENTRY(q4_plain_far, matmul_q, 1, PATH_PLAIN, QPF_MODE_STREAM_FAR)
ENTRY(q8_vnni_far, matmul_q, 0, PATH_VNNI, QPF_MODE_STREAM_FAR)
ENTRY(q4_vnni_far, matmul_q, 1, PATH_VNNI, QPF_MODE_STREAM_FAR)
ENTRY(q8_amx_far, matmul_q, 0, PATH_AMX, QPF_MODE_STREAM_FAR)
ENTRY(q8_plain_batch_far, matvec_q, 0, PATH_PLAIN, QPF_MODE_STREAM_FAR)
ENTRY(q4_plain_batch_far, matvec_q, 1, PATH_PLAIN, QPF_MODE_STREAM_FAR)
ENTRY(q8_vnni_batch_far, matvec_q, 0, PATH_VNNI, QPF_MODE_STREAM_FAR)
ENTRY(q4_vnni_batch_far, matvec_q, 1, PATH_VNNI, QPF_MODE_STREAM_FAR)
#undef ENTRY

const kz_quant_fns kz_quant_avx512 = {
    .q8_0 = QPF_SLOTS(kz_matmul_q8_0_avx512, q8_plain_stream, q8_plain_far, q8_plain_reuse),
    .q4_0 = QPF_SLOTS(kz_matmul_q4_0_avx512, q4_plain_stream, q4_plain_far, q4_plain_reuse),
    .q8_0_batch = QPF_SLOTS(q8_plain_batch_l1, q8_plain_batch_stream, q8_plain_batch_far,
                            q8_plain_batch_reuse),
    .q4_0_batch = QPF_SLOTS(q4_plain_batch_l1, q4_plain_batch_stream, q4_plain_batch_far,
                            q4_plain_batch_reuse),
};
const kz_quant_fns kz_quant_avx512_vnni = {
    .q8_0 = QPF_SLOTS(q8_vnni_l1, q8_vnni_stream, q8_vnni_far, q8_vnni_reuse),
    .q4_0 = QPF_SLOTS(q4_vnni_l1, q4_vnni_stream, q4_vnni_far, q4_vnni_reuse),
    .q8_0_batch =
        QPF_SLOTS(q8_vnni_batch_l1, q8_vnni_batch_stream, q8_vnni_batch_far, q8_vnni_batch_reuse),
    .q4_0_batch =
        QPF_SLOTS(q4_vnni_batch_l1, q4_vnni_batch_stream, q4_vnni_batch_far, q4_vnni_batch_reuse),
};
/* q4_0 keeps the VNNI kernels (section "AMX-INT8 prompt path"); the batched products are
 * the VNNI ones (matvec_q). */
const kz_quant_fns kz_quant_avx512_amx = {
    .q8_0 = QPF_SLOTS(q8_amx_l1, q8_amx_stream, q8_amx_far, q8_amx_reuse),
    .q4_0 = QPF_SLOTS(q4_vnni_l1, q4_vnni_stream, q4_vnni_far, q4_vnni_reuse),
    .q8_0_batch =
        QPF_SLOTS(q8_vnni_batch_l1, q8_vnni_batch_stream, q8_vnni_batch_far, q8_vnni_batch_reuse),
    .q4_0_batch =
        QPF_SLOTS(q4_vnni_batch_l1, q4_vnni_batch_stream, q4_vnni_batch_far, q4_vnni_batch_reuse),
};
