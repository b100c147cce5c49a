/*
 * quant_neon_body.h - the NEON quantized matmul (kernels.h matmul_q8_0,
 * matmul_q4_0; formats in kernels/quant.h), included as a template by
 * arm/quant_neon.c (QUANT_NEON_SDOT 0: baseline Advanced SIMD) and by
 * arm/quant_dot_neon.c (QUANT_NEON_SDOT 1: the dotprod extension's SDOT).
 * The includer defines QUANT_NEON_SDOT and QUANT_NEON_FN, the name of the
 * function `void QUANT_NEON_FN(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4)`
 * this file defines, and QUANT_NEON_BATCH_FN, its batched matrix-vector product
 * (kernels.h matvec_q8_0: quant_walk.h's batched walk, the same bits).
 *
 * Data flow, per pair of tokens (or a last single token) and per chunk of up
 * to 256 blocks (8192 inputs) of the row (the walk is kernels/quant_walk.h):
 *   x[t] f32 --quant_block--> int8 q[32 b + i], float scale d_x[b]   (stack)
 *   per weight row o, per group of four blocks b..b+3:
 *     q8_0: 32 int8 codes; q4_0: 16 bytes -> 32 nibbles - 8 as int8 (-8..7)
 *     4 int32 lane sums per block, lane l = elements {4l..4l+3, 16+4l..16+4l+3}:
 *         SDOT:     two SDOT (elements 0..15, then 16..31) into one int32x4
 *         baseline: SMULL + SMLAL (elements j and 16+j, two products in an
 *                   int16 lane), the same for the high halves, SADDLP twice,
 *                   ADDP: the same four sums
 *     the four blocks' totals by an ADDP tree: [T_b, T_b+1, T_b+2, T_b+3]
 *     acc = fma(float(T), d_w * d_x, acc): lane j takes the blocks b = j mod 4
 *                                                  (arm/quant_neon_blocks.h)
 *   y[t, o] = (lane 0 + lane 1) + (lane 2 + lane 3) of acc  (+ the previous chunks' sum)
 * The integer work is exact (|code| <= 128, |q_x| <= 127: two products are at
 * most 32512 in an int16 lane, a block total at most 520192, exact as a float),
 * so the variants (and the SMMLA one, arm/quant_mmla_neon.c, which forms the
 * same totals) give identical bits (tests/unit/test_quant.c checks it); like
 * the x86 kernels, a result differs from the float definition in
 * ref/quant_ref.c only through the activation rounding and the float
 * accumulation. q4_0 subtracts 8 from the codes before the multiply (signed
 * int8 products), where x86 needs the -8 * sum q correction of its unsigned
 * maddubs: same integer sums.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on whether it is paired with another token, on n_tok, or on [o0, o1).
 */
#include <arm_neon.h>
#include <stdint.h>

#include "kernels/arm/quant_neon_blocks.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 9 KB per token */

typedef struct act {
    int8_t q[CHUNK_BLOCKS * KZ_QK];
    float d[CHUNK_BLOCKS];
} act;

/* quant_block for nb consecutive blocks (one layout for both formats: q4 unused; no
 * prefetches: pf unused). */
static void quant_act(act *a, const float *x, size_t nb, int q4, int pf) {
    (void)q4;
    (void)pf;
    for (size_t b = 0; b < nb; b++) {
        int8x16_t q0;
        int8x16_t q1;
        a->d[b] = quant_block(x + b * KZ_QK, &q0, &q1);
        vst1q_s8(a->q + b * KZ_QK, q0);
        vst1q_s8(a->q + b * KZ_QK + 16, q1);
    }
}

/* Exact int32 lane sums of codes x activations for one block: lane l holds the
 * elements 4l..4l+3 and 16+4l..16+4l+3 (SDOT's grouping). */
ALWAYS_INLINE int32x4_t block_dot(int8x16_t w0, int8x16_t w1, const int8_t *xq) {
    const int8x16_t x0 = vld1q_s8(xq);
    const int8x16_t x1 = vld1q_s8(xq + 16);
#if QUANT_NEON_SDOT
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
#else
    int16x8_t lo = vmull_s8(vget_low_s8(w0), vget_low_s8(x0)); // elements j and 16 + j
    lo = vmlal_s8(lo, vget_low_s8(w1), vget_low_s8(x1));
    int16x8_t hi = vmull_high_s8(w0, x0); // elements 8 + j and 24 + j
    hi = vmlal_high_s8(hi, w1, x1);
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
#endif
}

/* A group of n (1..4) blocks of one row from block b on, against nt (1 or 2)
 * tokens' activations, into acc[t]; missing blocks count as total 0, scale 0. */
ALWAYS_INLINE void group_step(float32x4_t acc[2], const uint8_t *blk, size_t bsize, const act *a,
                              size_t b, int n, int nt, int q4) {
    float dw[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int32x4_t s[2][4];
    for (int k = 0; k < 4; k++) {
        if (k >= n) {
            s[0][k] = s[1][k] = vdupq_n_s32(0);
            continue;
        }
        const uint8_t *bk = blk + (size_t)k * bsize;
        dw[k] = block_scale(bk);
        int8x16_t w0;
        int8x16_t w1;
        block_codes(bk, q4, &w0, &w1);
        for (int t = 0; t < nt; t++) {
            s[t][k] = block_dot(w0, w1, a[t].q + (b + (size_t)k) * KZ_QK);
        }
    }
    const float32x4_t dwv = vld1q_f32(dw);
    for (int t = 0; t < nt; t++) {
        const int32x4_t totals =
            vpaddq_s32(vpaddq_s32(s[t][0], s[t][1]), vpaddq_s32(s[t][2], s[t][3]));
        float32x4_t dxv;
        if (n == 4) {
            dxv = vld1q_f32(a[t].d + b);
        } else { // a short last group: zeros past its blocks
            float dx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int k = 0; k < n; k++) {
                dx[k] = a[t].d[b + (size_t)k];
            }
            dxv = vld1q_f32(dx);
        }
        acc[t] = group_fma(acc[t], totals, dwv, dxv);
    }
}

/* Dot products of one row's nb blocks with nt tokens. */
ALWAYS_INLINE void row_dots(float *out, const uint8_t *row, const act *a, size_t nb, int nt,
                            int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        group_step(acc, row + b * bsize, bsize, a, b, 4, nt, q4);
    }
    if (b < nb) {
        group_step(acc, row + b * bsize, bsize, a, b, (int)(nb - b), nt, q4);
    }
    for (int t = 0; t < nt; t++) {
        out[t] = lanes_sum(acc[t]);
    }
}

#include "kernels/quant_walk.h"

void QUANT_NEON_FN(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                   size_t n_tok, size_t o0, size_t o1, int q4) {
    quant_walk(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4, 0);
}

void QUANT_NEON_BATCH_FN(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4) {
    quant_walk_batch(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4, 0);
}
