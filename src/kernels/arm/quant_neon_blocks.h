/*
 * quant_neon_blocks.h - the pieces every NEON quantized matmul variant shares
 * (arm/quant_neon_body.h: baseline and SDOT; arm/quant_mmla_neon.c: SMMLA),
 * static inline so that each variant compiles them under its own target flags
 * with the same instructions, hence the same bits:
 *   quant_block:  32 floats -> 32 int8 codes (two vectors) and their scale,
 *                 kernels/quant.h kz_quant_act_block bit for bit;
 *   block_codes:  one q8_0 / q4_0 weight block -> 32 signed int8 codes;
 *   block_scale:  its fp16 scale as a float (FCVT);
 *   group_fma:    a group of up to four blocks' exact int32 totals times
 *                 their scale products, into a float accumulator whose lane
 *                 j takes block b with b % 4 == j.
 * The float sequence of one (row, token) dot product is therefore: per group
 * of four blocks, lane j = fma(float(total_j), d_w * d_x, lane j); at the end
 * (lane 0 + lane 1) + (lane 2 + lane 3). Every variant follows it exactly.
 */
#ifndef KZ_QUANT_NEON_BLOCKS_H
#define KZ_QUANT_NEON_BLOCKS_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* quant.h kz_quant_act_block for one block, bit for bit: IEEE division by d
 * (FDIV), clamp, FCVTAS = round half away from zero like roundf. Elements
 * 0..15 go to *q0, 16..31 to *q1; returns d (codes all zero when d is 0). */
ALWAYS_INLINE float quant_block(const float *xb, int8x16_t *q0, int8x16_t *q1) {
    const float32x4_t lo = vdupq_n_f32(-127.0f);
    const float32x4_t hi = vdupq_n_f32(127.0f);
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(xb + 4 * k);
        m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float d = vmaxvq_f32(m) / 127.0f;
    if (d == 0.0f) {
        *q0 = vdupq_n_s8(0);
        *q1 = vdupq_n_s8(0);
        return d;
    }
    const float32x4_t dv = vdupq_n_f32(d);
    int16x8_t h[4];
    for (int k = 0; k < 4; k++) {
        const float32x4_t r0 = vminq_f32(vmaxq_f32(vdivq_f32(v[2 * k], dv), lo), hi);
        const float32x4_t r1 = vminq_f32(vmaxq_f32(vdivq_f32(v[2 * k + 1], dv), lo), hi);
        h[k] = vcombine_s16(vmovn_s32(vcvtaq_s32_f32(r0)), vmovn_s32(vcvtaq_s32_f32(r1)));
    }
    *q0 = vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1]));
    *q1 = vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3]));
    return d;
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

/* A block's fp16 scale as a float by the hardware conversion: exact, the value of
 * kz_quant_scale for every scale but a NaN (whose payload may differ). */
ALWAYS_INLINE float block_scale(const uint8_t *blk) {
    __fp16 h;
    memcpy(&h, blk, sizeof h);
    return (float)h;
}

/* acc + float(totals) * (d_w * d_x), lane by lane: the float step of one group of
 * four blocks (lanes of a short last group hold total 0 and scales 0, which leaves
 * the lane as it was: it is never -0). */
ALWAYS_INLINE float32x4_t group_fma(float32x4_t acc, int32x4_t totals, float32x4_t dw,
                                    float32x4_t dx) {
    return vfmaq_f32(acc, vcvtq_f32_s32(totals), vmulq_f32(dw, dx));
}

/* The end of the float sequence: (lane 0 + lane 1) + (lane 2 + lane 3). */
ALWAYS_INLINE float lanes_sum(float32x4_t acc) {
    const float32x4_t p = vpaddq_f32(acc, acc);
    return vgetq_lane_f32(p, 0) + vgetq_lane_f32(p, 1);
}

#endif
