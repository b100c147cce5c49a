/*
 * quant_neon_body.h - the NEON quantized matmul (kernels.h matmul_q8_0,
 * matmul_q4_0; formats in kernels/quant.h), included as a template by
 * arm/quant_neon.c (QUANT_NEON_SDOT 0: baseline Advanced SIMD) and by
 * arm/quant_dot_neon.c (QUANT_NEON_SDOT 1: the dotprod extension's SDOT).
 * The includer defines QUANT_NEON_SDOT and QUANT_NEON_FN, the name of the
 * function `void QUANT_NEON_FN(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4)`
 * this file defines.
 *
 * Data flow, per pair of tokens (or a last single token) and per chunk of up
 * to 256 blocks (8192 inputs) of the row (the walk is kernels/quant_walk.h):
 *   x[t] f32 --quant_act--> int8 q[32 b + i], float scale d_x[b]   (stack)
 *   per weight row o, per block b:
 *     q8_0: 32 int8 codes; q4_0: 16 bytes -> 32 nibbles - 8 as int8 (-8..7)
 *     4 int32 lane sums s[l] = sum of code * q over the elements
 *       {4l..4l+3} and {16+4l..16+4l+3} of the block:
 *         SDOT:     two SDOT (elements 0..15, then 16..31) into one int32x4
 *         baseline: SMULL + SMLAL (elements j and 16+j, two products in an
 *                   int16 lane), the same for the high halves, SADDLP twice,
 *                   ADDP: the same four sums
 *     acc[b % 4] = fma(float(s), d_w[b] * d_x[b], acc[b % 4])
 *   y[t, o] = lanes of (acc0 + acc1) + (acc2 + acc3) summed pairwise
 *             (+ the previous chunks' sum)
 * The integer work is exact (|code| <= 128, |q_x| <= 127: two products are at
 * most 32512 in an int16 lane, a lane sum at most 130048, exact as a float),
 * and both variants form the same four lane sums, so they give identical bits
 * (tests/unit/test_quant.c checks it); like the x86 kernels, a result differs
 * from the float definition in ref/quant_ref.c only through the activation
 * rounding and the float accumulation. q4_0 subtracts 8 from the codes before
 * the multiply (signed int8 products), where x86 needs the -8 * sum q
 * correction of its unsigned maddubs: same integer sums.
 *
 * Determinism: a token's sequence of operations depends only on n_in, never
 * on whether it is paired with another token, on n_tok, or on [o0, o1).
 */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* activation blocks quantized per pass: 9 KB per token */

typedef struct act {
    int8_t q[CHUNK_BLOCKS * KZ_QK];
    float d[CHUNK_BLOCKS];
} act;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* quant.h kz_quant_act_block for nb consecutive blocks, bit for bit: IEEE
 * division by d (FDIV), clamp, FCVTAS = round half away from zero like roundf.
 * The sum of q is not needed here (q4_0 codes are made signed instead). */
static void quant_act(act *a, const float *x, size_t nb) {
    const float32x4_t lo = vdupq_n_f32(-127.0f);
    const float32x4_t hi = vdupq_n_f32(127.0f);
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * KZ_QK;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(xb + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        const float d = vmaxvq_f32(m) / 127.0f;
        a->d[b] = d;
        int8_t *q = a->q + b * KZ_QK;
        if (d == 0.0f) {
            memset(q, 0, KZ_QK);
            continue;
        }
        const float32x4_t dv = vdupq_n_f32(d);
        int16x8_t h[4];
        for (int k = 0; k < 4; k++) {
            const float32x4_t r0 = vminq_f32(vmaxq_f32(vdivq_f32(v[2 * k], dv), lo), hi);
            const float32x4_t r1 = vminq_f32(vmaxq_f32(vdivq_f32(v[2 * k + 1], dv), lo), hi);
            h[k] = vcombine_s16(vmovn_s32(vcvtaq_s32_f32(r0)), vmovn_s32(vcvtaq_s32_f32(r1)));
        }
        vst1q_s8(q, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
        vst1q_s8(q + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
    }
}

/* The 32 codes of a block as signed int8: elements 0..15 in *w0, 16..31 in *w1. */
ALWAYS_INLINE void block_codes(const uint8_t *blk, int q4, int8x16_t *w0, int8x16_t *w1) {
    if (q4) {
        const uint8x16_t raw = vld1q_u8(blk + 2);
        const int8x16_t eight = vdupq_n_s8(8);
        *w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f))), eight);
        *w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
    } else {
        *w0 = vld1q_s8((const int8_t *)(blk + 2));
        *w1 = vld1q_s8((const int8_t *)(blk + 18));
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

/* One block of one row against nt (1 or 2) tokens' activations, into acc[t][k]. */
ALWAYS_INLINE void block_step(float32x4_t acc[2][4], int k, const uint8_t *blk, const act *a,
                              size_t b, int nt, int q4) {
    const float dw = kz_quant_scale(blk);
    int8x16_t w0;
    int8x16_t w1;
    block_codes(blk, q4, &w0, &w1);
    for (int t = 0; t < nt; t++) {
        const int32x4_t s = block_dot(w0, w1, a[t].q + b * KZ_QK);
        acc[t][k] = vfmaq_f32(acc[t][k], vcvtq_f32_s32(s), vdupq_n_f32(dw * a[t].d[b]));
    }
}

/* Dot products of one row's nb blocks with nt tokens; block b feeds acc[b % 4]. */
ALWAYS_INLINE void row_dots(float *out, const uint8_t *row, const act *a, size_t nb, int nt,
                            int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    float32x4_t acc[2][4];
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) {
            acc[t][k] = vdupq_n_f32(0.0f);
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
        out[t] = vaddvq_f32(
            vaddq_f32(vaddq_f32(acc[t][0], acc[t][1]), vaddq_f32(acc[t][2], acc[t][3])));
    }
}

#include "kernels/quant_walk.h"

void QUANT_NEON_FN(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                   size_t n_tok, size_t o0, size_t o1, int q4) {
    quant_walk(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4);
}
