/*
 * gemm_rows_neon.c - NEON (aarch64) prefill GEMM over f32 weight rows
 * (kernels.h gemm_rows) and the conversions of stored weight rows to f32 that
 * feed it (rows_to_f32_bf16 / _f16 / _q8_0 / _q4_0).
 *
 * Data flow: y [n_tok, ldy] (+)= x [n_tok, ldx] . w [n_rows, ldw]^T in register
 * tiles of 4 weight rows x 4 tokens: 16 accumulators of 4 lanes, each weight
 * vector serving 4 tokens and each token vector 4 rows (8 loads per 16 FMAs, 21
 * of the 32 vector registers); the last 1-3 tokens take a tile of that many.
 * Rows past the end of the range reuse the last valid row pointer; their sums
 * are computed and never stored (the walk over tiles: kernels/gemm_rows_tiles.h).
 *
 * Per output element (t, o), whatever its tile, n_tok or n_rows:
 *   acc[4] = 0
 *   for i0 = 0, 4, 8, ... < n_in:   acc[l] = fma(w[o, i0 + l], x[t, i0 + l], acc[l])
 *       (the last step with n_in % 4 lanes: zero-padded copies give 0 * 0 in the others)
 *   s = (a0 + a1) + (a2 + a3)
 *   y = s, or y + s
 * A token's four row sums come from two levels of pairwise adds (vpaddq), with
 * the same pairing for every lane, and are stored (or added) as one vector.
 *
 * The conversions are bit-identical to the scalar definitions: bf16 widened by a
 * 16-bit shift; q8_0 / q4_0 per block of 32 as d * (float)q with d from
 * kz_fp16_to_f32 and the codes widened to int32 and converted exactly.
 * The tile follows the register budget, untuned on ARM hardware (tested under qemu).
 */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_TOK 4

/* The 16 accumulators a<t><r> of a tile are named variables: GCC keeps an array of
 * them in memory and stores it on every step (as in matmul_neon.c). */
#define TOKENS(X, r) X(0, r) X(1, r) X(2, r) X(3, r)
#define ALL(X) TOKENS(X, 0) TOKENS(X, 1) TOKENS(X, 2) TOKENS(X, 3)
#define ACC_INIT(t, r) float32x4_t a##t##r = vdupq_n_f32(0.0f);
#define ACC_FMA(t, r)                                                                          \
    if ((t) < NT) {                                                                            \
        a##t##r = vfmaq_f32(a##t##r, w##r, x##t);                                              \
    }

/* w0..w3 and x0..x3 at i (x only for t < NT) */
#define LOAD_STEP(wp, xp, i)                                                                   \
    const float32x4_t w0 = vld1q_f32((wp)[0] + (i)), w1 = vld1q_f32((wp)[1] + (i));           \
    const float32x4_t w2 = vld1q_f32((wp)[2] + (i)), w3 = vld1q_f32((wp)[3] + (i));           \
    const float32x4_t x0 = vld1q_f32((xp)[0] + (i));                                           \
    const float32x4_t x1 = NT > 1 ? vld1q_f32((xp)[1] + (i)) : x0;                             \
    const float32x4_t x2 = NT > 2 ? vld1q_f32((xp)[2] + (i)) : x0;                             \
    const float32x4_t x3 = NT > 3 ? vld1q_f32((xp)[3] + (i)) : x0;

/* Token t's four row sums, stored (or added) at yp. */
ALWAYS_INLINE void store_token(float *yp, float32x4_t r0, float32x4_t r1, float32x4_t r2,
                               float32x4_t r3, size_t nr, int accumulate) {
    float32x4_t s = vpaddq_f32(vpaddq_f32(r0, r1), vpaddq_f32(r2, r3));
    if (nr == TILE_ROWS) {
        if (accumulate) {
            s = vaddq_f32(vld1q_f32(yp), s);
        }
        vst1q_f32(yp, s);
        return;
    }
    float out[4];
    vst1q_f32(out, s);
    for (size_t r = 0; r < nr; r++) {
        yp[r] = accumulate ? yp[r] + out[r] : out[r];
    }
}

/* One tile: rows wr[0..3] against the NT (1..4, a constant after inlining)
 * tokens xr[0..NT-1]; stores the first nr rows of each token at y (token t at
 * y + t * ldy). a<t><r> is (row r, token t). */
ALWAYS_INLINE void tile(float *y, size_t ldy, const float *const xr[TILE_TOK],
                        const float *const wr[TILE_ROWS], size_t n_in, size_t nr, int accumulate,
                        const int NT) {
    ALL(ACC_INIT)
    size_t i = 0;
    for (; i + 4 <= n_in; i += 4) {
        LOAD_STEP(wr, xr, i)
        ALL(ACC_FMA)
    }
    if (i < n_in) { // the same step on copies padded with zeros
        float wt[TILE_ROWS][4] = {{0}};
        float xt[TILE_TOK][4] = {{0}};
        for (int r = 0; r < TILE_ROWS; r++) {
            memcpy(wt[r], wr[r] + i, (n_in - i) * sizeof(float));
        }
        for (int t = 0; t < NT; t++) {
            memcpy(xt[t], xr[t] + i, (n_in - i) * sizeof(float));
        }
        const float *const wp[TILE_ROWS] = {wt[0], wt[1], wt[2], wt[3]};
        const float *const xp[TILE_TOK] = {xt[0], xt[1], xt[2], xt[3]};
        LOAD_STEP(wp, xp, 0)
        ALL(ACC_FMA)
    }
    store_token(y, a00, a01, a02, a03, nr, accumulate);
    if (NT > 1) {
        store_token(y + ldy, a10, a11, a12, a13, nr, accumulate);
    }
    if (NT > 2) {
        store_token(y + 2 * ldy, a20, a21, a22, a23, nr, accumulate);
    }
    if (NT > 3) {
        store_token(y + 3 * ldy, a30, a31, a32, a33, nr, accumulate);
    }
}

#define GEMM_ROWS_FN kz_gemm_rows_neon
#include "kernels/gemm_rows_tiles.h"

void kz_rows_to_f32_bf16_neon(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(s + i);
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
        vst1q_f32(dst + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)));
    }
    for (; i < n; i++) {
        dst[i] = kz_bf16_to_f32(s[i]);
    }
}

void kz_rows_to_f32_f16_neon(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(s + i));
        vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
        vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
    }
    for (; i < n; i++) {
        dst[i] = kz_fp16_to_f32(s[i]);
    }
}

/* d * (float)q for 16 int8 codes, into dst[0..15]. */
ALWAYS_INLINE void store16(float *dst, int8x16_t q, float d) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q));
    const int16x8_t hi = vmovl_high_s8(q);
    vst1q_f32(dst, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    vst1q_f32(dst + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
    vst1q_f32(dst + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    vst1q_f32(dst + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

void kz_rows_to_f32_q8_0_neon(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q8_0_BLOCK_BYTES;
        const float d = kz_quant_scale(blk);
        store16(dst + b * KZ_QK, vld1q_s8((const int8_t *)(blk + 2)), d);
        store16(dst + b * KZ_QK + 16, vld1q_s8((const int8_t *)(blk + 18)), d);
    }
}

void kz_rows_to_f32_q4_0_neon(float *dst, const void *src, size_t n) {
    const uint8_t *in = src;
    const int8x16_t eight = vdupq_n_s8(8);
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const uint8_t *blk = in + b * KZ_Q4_0_BLOCK_BYTES;
        const float d = kz_quant_scale(blk);
        const uint8x16_t qs = vld1q_u8(blk + 2);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qs, vdupq_n_u8(0x0f))), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qs, 4)), eight);
        store16(dst + b * KZ_QK, lo, d);
        store16(dst + b * KZ_QK + 16, hi, d);
    }
}
