/*
 * quant_mmla_neon.c - the NEON quantized matmul for two or more tokens with the
 * int8 matrix multiply extension (Armv8.6-A FEAT_I8MM, Linux HWCAP2_I8MM):
 * SMMLA multiplies a 2 x 8 int8 matrix by the transpose of another, adding the
 * 2 x 2 int32 products, so one instruction covers two weight rows x two tokens
 * x eight inputs (32 multiply-adds; SDOT does 16). Its entry points
 * (kz_quant_neon_i8mm, at the end), which only the neon-i8mm sub-level holds
 * (dispatch.c found the extension), take it for n_tok >= 2 and the SDOT variant
 * for one token.
 *
 * Data flow, per group of up to GROUP_PAIRS token pairs (a last odd token is
 * paired with itself) and per chunk of CHUNK_BLOCKS blocks:
 *   x[t], x[t+1] f32 --quant_block--> pair_act: per block four 16-byte rows
 *       [t: inputs 8k..8k+7 | t+1: the same]  and scales [d_t, d_t+1, d_t, d_t+1]
 *   per pair of weight rows (o, o+1; a last odd row is paired with itself):
 *     per block: the two rows' codes zipped into four [o: 8 | o+1: 8] rows,
 *       four SMMLA -> exact totals [T(o,t), T(o,t+1), T(o+1,t), T(o+1,t+1)],
 *       for each token pair of the set (up to two: the zipped codes reused)
 *     F[b % 4] = fma(float(T), [d_o d_t, d_o d_t+1, d_o+1 d_t, d_o+1 d_t+1], F[b % 4])
 *     y = (F0 + F1) + (F2 + F3), element by element (+ the previous chunks' sum)
 * Element (o, t) of F[j] goes through exactly the fused multiply-adds of lane j of
 * the single-token accumulator in arm/quant_neon_body.h (a short last group: the
 * missing blocks' fma there adds 0 * 0 and leaves the lane as it is), and the
 * final sums are the same, so this kernel gives the baseline and SDOT variants'
 * bits (tests/unit/test_quant.c). Each token pair's activations are quantized
 * once per chunk for all rows; a row pair's codes (2 x 34 bytes per block) are
 * read once per two token pairs, from L1 after the first.
 */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/arm/quant_neon_blocks.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#define CHUNK_BLOCKS 256 /* as arm/quant_neon_body.h: the chunk sums must be the same */
#define GROUP_PAIRS 4    /* token pairs quantized per pass: 80 KB of stack */

typedef struct pair_act {
    int8_t q[CHUNK_BLOCKS * 64]; /* block b, row k: [t: 8k..8k+7 | t+1: 8k..8k+7] */
    float d[CHUNK_BLOCKS * 4];   /* block b: d_t, d_t+1, d_t, d_t+1 */
} pair_act;

/* Token x (nb blocks) into slot e (0: t, 1: t+1) of a pair. */
static void quant_slot(pair_act *p, const float *x, size_t nb, int e) {
    for (size_t b = 0; b < nb; b++) {
        int8x16_t q0;
        int8x16_t q1;
        const float d = quant_block(x + b * KZ_QK, &q0, &q1);
        int8_t *dst = p->q + b * 64 + 8 * e;
        vst1_s8(dst, vget_low_s8(q0));
        vst1_s8(dst + 16, vget_high_s8(q0));
        vst1_s8(dst + 32, vget_low_s8(q1));
        vst1_s8(dst + 48, vget_high_s8(q1));
        p->d[b * 4 + (size_t)e] = d;
        p->d[b * 4 + 2 + (size_t)e] = d;
    }
}

/* Rows [o: 8 | o1: 8] of one block's codes: inputs 8k..8k+7 of both rows in a[k]. */
ALWAYS_INLINE void zip_rows(int8x16_t a[4], const uint8_t *b0, const uint8_t *b1, int q4) {
    int8x16_t w0;
    int8x16_t w1;
    int8x16_t v0;
    int8x16_t v1;
    block_codes(b0, q4, &w0, &w1);
    block_codes(b1, q4, &v0, &v1);
    const int64x2_t x0 = vreinterpretq_s64_s8(w0), x1 = vreinterpretq_s64_s8(w1);
    const int64x2_t y0 = vreinterpretq_s64_s8(v0), y1 = vreinterpretq_s64_s8(v1);
    a[0] = vreinterpretq_s8_s64(vzip1q_s64(x0, y0));
    a[1] = vreinterpretq_s8_s64(vzip2q_s64(x0, y0));
    a[2] = vreinterpretq_s8_s64(vzip1q_s64(x1, y1));
    a[3] = vreinterpretq_s8_s64(vzip2q_s64(x1, y1));
}

/* Exact totals of one block for a row pair and a token pair: one chain of four SMMLA
 * (the tiles of a loop step are independent chains, so its latency is hidden). */
ALWAYS_INLINE int32x4_t block_totals(const int8x16_t a[4], const int8_t *xq) {
    int32x4_t s = vmmlaq_s32(vdupq_n_s32(0), a[0], vld1q_s8(xq));
    s = vmmlaq_s32(s, a[1], vld1q_s8(xq + 16));
    s = vmmlaq_s32(s, a[2], vld1q_s8(xq + 32));
    return vmmlaq_s32(s, a[3], vld1q_s8(xq + 48));
}

/* Block b (accumulator j = b % 4) of rows r0, r1 against np (1 or 2) token pairs. */
ALWAYS_INLINE void tile_block(float32x4_t f[2][4], int j, const uint8_t *r0, const uint8_t *r1,
                              const pair_act *p, size_t b, int np, int q4) {
    int8x16_t a[4];
    zip_rows(a, r0, r1, q4);
    const float32x4_t dw = vcombine_f32(vdup_n_f32(block_scale(r0)), vdup_n_f32(block_scale(r1)));
    for (int i = 0; i < np; i++) {
        const int32x4_t t = block_totals(a, p[i].q + b * 64);
        f[i][j] = group_fma(f[i][j], t, dw, vld1q_f32(p[i].d + b * 4));
    }
}

/* Rows r0, r1 (nb blocks) against np (1 or 2) token pairs: out[i] =
 * [(o,t), (o,t+1), (o+1,t), (o+1,t+1)] of pair i. */
ALWAYS_INLINE void tile_rows(float32x4_t out[2], const uint8_t *r0, const uint8_t *r1,
                             const pair_act *p, size_t nb, int np, int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    float32x4_t f[2][4];
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 4; j++) {
            f[i][j] = vdupq_n_f32(0.0f);
        }
    }
    size_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        for (int j = 0; j < 4; j++) {
            const size_t off = (b + (size_t)j) * bsize;
            tile_block(f, j, r0 + off, r1 + off, p, b + (size_t)j, np, q4);
        }
    }
    for (int j = 0; j < 3; j++) { // constant indices keep f in registers
        if (b + (size_t)j < nb) {
            const size_t off = (b + (size_t)j) * bsize;
            tile_block(f, j, r0 + off, r1 + off, p, b + (size_t)j, np, q4);
        }
    }
    for (int i = 0; i < np; i++) {
        out[i] = vaddq_f32(vaddq_f32(f[i][0], f[i][1]), vaddq_f32(f[i][2], f[i][3]));
    }
}

/* tile_rows instantiated for each constant (np, q4). */
static void tiles(float32x4_t out[2], const uint8_t *r0, const uint8_t *r1, const pair_act *p,
                  size_t nb, int np, int q4) {
    if (q4) {
        np == 2 ? tile_rows(out, r0, r1, p, nb, 2, 1) : tile_rows(out, r0, r1, p, nb, 1, 1);
    } else {
        np == 2 ? tile_rows(out, r0, r1, p, nb, 2, 0) : tile_rows(out, r0, r1, p, nb, 1, 0);
    }
}

/* y[t, o] = r on the first chunk, y[t, o] + r after it. */
static inline void put(float *y, size_t ldy, size_t t, size_t o, float r, int first) {
    float *yp = y + t * ldy + o;
    *yp = first ? r : *yp + r;
}

/* Writes one row-pair x token-pair tile: tokens t (and t+1 when two), rows o (and o+1). */
static void put_tile(float *y, size_t ldy, float32x4_t v, size_t t, int two_tok, size_t o,
                     int two_rows, int first) {
    put(y, ldy, t, o, vgetq_lane_f32(v, 0), first);
    if (two_tok) {
        put(y, ldy, t + 1, o, vgetq_lane_f32(v, 1), first);
    }
    if (two_rows) {
        put(y, ldy, t, o + 1, vgetq_lane_f32(v, 2), first);
        if (two_tok) {
            put(y, ldy, t + 1, o + 1, vgetq_lane_f32(v, 3), first);
        }
    }
}

/* Rows [o0, o1), chunk blocks [c0, c0 + cn) of rows of nb blocks, against the nt tokens
 * (2 * np or 2 * np - 1) quantized in p. */
static void rows_pass(float *y, size_t ldy, const uint8_t *w, size_t nb, size_t t, size_t nt,
                      size_t np, const pair_act *p, size_t o0, size_t o1, size_t c0, size_t cn,
                      int q4) {
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    for (size_t o = o0; o < o1; o += 2) {
        const int two_rows = o + 1 < o1;
        const uint8_t *r0 = w + (o * nb + c0) * bsize;
        const uint8_t *r1 = two_rows ? r0 + nb * bsize : r0;
        for (size_t i = 0; i < np; i += 2) {
            const int n = np - i >= 2 ? 2 : 1;
            float32x4_t out[2];
            tiles(out, r0, r1, p + i, cn, n, q4);
            for (int k = 0; k < n; k++) {
                const size_t tk = t + 2 * (i + (size_t)k);
                put_tile(y, ldy, out[k], tk, tk + 1 < t + nt, o, two_rows, c0 == 0);
            }
        }
    }
}

void kz_matmul_q_neon_mmla(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    if (nb == 0) {
        for (size_t t = 0; t < n_tok; t++) {
            for (size_t o = o0; o < o1; o++) {
                y[t * ldy + o] = 0.0f;
            }
        }
        return;
    }
    pair_act p[GROUP_PAIRS];
    for (size_t t = 0; t < n_tok; t += 2 * GROUP_PAIRS) {
        const size_t nt = n_tok - t < 2 * GROUP_PAIRS ? n_tok - t : 2 * GROUP_PAIRS;
        const size_t np = (nt + 1) / 2;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            for (size_t i = 0; i < np; i++) {
                const size_t ta = t + 2 * i, tb = ta + 1 < t + nt ? ta + 1 : ta;
                quant_slot(&p[i], x + ta * ldx + c0 * KZ_QK, cn, 0);
                quant_slot(&p[i], x + tb * ldx + c0 * KZ_QK, cn, 1);
            }
            rows_pass(y, ldy, (const uint8_t *)w, nb, t, nt, np, p, o0, o1, c0, cn, q4);
        }
    }
}

static void q8_mmla(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                    size_t n_tok, size_t o0, size_t o1) {
    if (n_tok >= 2) {
        kz_matmul_q_neon_mmla(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
    } else {
        kz_matmul_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
    }
}

static void q4_mmla(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                    size_t n_tok, size_t o0, size_t o1) {
    if (n_tok >= 2) {
        kz_matmul_q_neon_mmla(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
    } else {
        kz_matmul_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
    }
}

/* The batched products (kernels.h matvec_q8_0) are the entry points themselves: their walk
 * quantizes up to GROUP_PAIRS token pairs once and then runs the rows, so a batch of up to
 * eight rows reads each weight row pair once, by SMMLA, with the SDOT bits. */
const kz_quant_fns kz_quant_neon_i8mm = {
    .q8_0_batch = {{q8_mmla, q8_mmla}, {q8_mmla, q8_mmla}, {q8_mmla, q8_mmla}},
    .q4_0_batch = {{q4_mmla, q4_mmla}, {q4_mmla, q4_mmla}, {q4_mmla, q4_mmla}},
    .q8_0 = {{q8_mmla, q8_mmla}, {q8_mmla, q8_mmla}, {q8_mmla, q8_mmla}},
    .q4_0 = {{q4_mmla, q4_mmla}, {q4_mmla, q4_mmla}, {q4_mmla, q4_mmla}},
};

#if defined(__clang__)
#pragma clang attribute pop
#endif
