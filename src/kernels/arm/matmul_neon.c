/*
 * matmul_neon.c - NEON (aarch64) language-model projections (kernels.h
 * matmul_bf16, matmul_f16, matmul_f32).
 *
 * Data flow: y[t, o] = W[o, :] . x[t, :] for tokens in groups of up to four
 * and output rows one or two at a time, weights read in place (bf16 widened
 * to float in registers by a 16-bit left shift, f16 by fcvtl). Every (t, o) runs the same
 * sequence whatever its group:
 *   four 4-lane accumulators a0..a3 over i in steps of 16 (a_k takes
 *   i + 4k .. i + 4k + 3), then 4-wide steps into a0, then
 *   (a0 + a1) + (a2 + a3) summed across lanes pairwise, then the last
 *   n_in % 4 terms one by one (multiply, then add).
 * So the result depends on n_in alone, never on n_tok, on the token's place in
 * its group, or on how [o0, o1) is split over threads.
 *
 * Grouping only shares loads: one or two tokens take two weight rows at a
 * time (16 accumulators, each x vector serves both rows), three or four
 * tokens take one weight row (16 accumulators, each weight vector serves all
 * tokens, the prompt prefill). Untuned on ARM hardware (tested under qemu).
 */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

enum { MAX_ROWS = 2, MAX_TOK = 4 };

/* Weight element types (a constant after inlining). */
enum { W_F32 = 0, W_BF16 = 1, W_F16 = 2 };

/* W[o, i .. i + 15] as four float vectors. */
static inline __attribute__((always_inline)) void load16(const void *w, size_t n_in, size_t o,
                                                         size_t i, int kind, float32x4_t v[4]) {
    if (kind == W_F16) {
        const uint16_t *p = (const uint16_t *)w + o * n_in + i;
        const float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16(p));
        const float16x8_t h1 = vreinterpretq_f16_u16(vld1q_u16(p + 8));
        v[0] = vcvt_f32_f16(vget_low_f16(h0));
        v[1] = vcvt_high_f32_f16(h0);
        v[2] = vcvt_f32_f16(vget_low_f16(h1));
        v[3] = vcvt_high_f32_f16(h1);
    } else if (kind == W_BF16) {
        const uint16_t *p = (const uint16_t *)w + o * n_in + i;
        const uint16x8_t h0 = vld1q_u16(p);
        const uint16x8_t h1 = vld1q_u16(p + 8);
        v[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h0), 16));
        v[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h0, 16));
        v[2] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h1), 16));
        v[3] = vreinterpretq_f32_u32(vshll_high_n_u16(h1, 16));
    } else {
        const float *p = (const float *)w + o * n_in + i;
        v[0] = vld1q_f32(p);
        v[1] = vld1q_f32(p + 4);
        v[2] = vld1q_f32(p + 8);
        v[3] = vld1q_f32(p + 12);
    }
}

/* W[o, i .. i + 3] as one float vector. */
static inline __attribute__((always_inline)) float32x4_t load4(const void *w, size_t n_in,
                                                               size_t o, size_t i, int kind) {
    const uint16_t *p = (const uint16_t *)w + o * n_in + i;
    if (kind == W_F16) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
    }
    if (kind == W_BF16) {
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
    }
    return vld1q_f32((const float *)w + o * n_in + i);
}

static inline float load1(const void *w, size_t n_in, size_t o, size_t i, int kind) {
    if (kind == W_F32) {
        return ((const float *)w)[o * n_in + i];
    }
    const uint16_t h = ((const uint16_t *)w)[o * n_in + i];
    return kind == W_F16 ? kz_fp16_to_f32(h) : kz_bf16_to_f32(h);
}

/* Dot products of weight rows o .. o + n_r - 1 with token rows x + t * ldx,
 * t < n_t, n_r * n_t <= 4: out[r * MAX_TOK + t]. n_r and n_t are constants
 * after inlining. Each (row, token) pair is a slot with four named
 * accumulators (an array of them would be kept on the stack by GCC). */
#define SLOTS(X) X(0) X(1) X(2) X(3)
#define SLOT_ON(s) ((s) < n_r * n_t)
#define SLOT_ROW(s) (n_r == 2 ? (s) / n_t : 0)
#define SLOT_TOK(s) (n_r == 2 ? (s) % n_t : (s))
static inline __attribute__((always_inline)) void dots(const void *w, size_t n_in, size_t o,
                                                       const float *x, size_t ldx, int kind,
                                                       const int n_r, const int n_t, float *out) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    // With one row both weight sets read row o; the compiler merges the loads.
    const size_t o_2 = o + (size_t)(n_r - 1);
#define SLOT_INIT(s)                                                                           \
    float32x4_t a##s##_0 = zero;                                                               \
    float32x4_t a##s##_1 = zero;                                                               \
    float32x4_t a##s##_2 = zero;                                                               \
    float32x4_t a##s##_3 = zero;
    SLOTS(SLOT_INIT)
    size_t i = 0;
    for (; i + 16 <= n_in; i += 16) {
        float32x4_t w0[4];
        float32x4_t w1[4];
        load16(w, n_in, o, i, kind, w0);
        load16(w, n_in, o_2, i, kind, w1);
#define SLOT_FMA16(s)                                                                          \
    if (SLOT_ON(s)) {                                                                          \
        const float *xs = x + (size_t)SLOT_TOK(s) * ldx + i;                                   \
        const float32x4_t *ws = SLOT_ROW(s) ? w1 : w0;                                         \
        a##s##_0 = vfmaq_f32(a##s##_0, ws[0], vld1q_f32(xs));                                  \
        a##s##_1 = vfmaq_f32(a##s##_1, ws[1], vld1q_f32(xs + 4));                              \
        a##s##_2 = vfmaq_f32(a##s##_2, ws[2], vld1q_f32(xs + 8));                              \
        a##s##_3 = vfmaq_f32(a##s##_3, ws[3], vld1q_f32(xs + 12));                             \
    }
        SLOTS(SLOT_FMA16)
    }
    for (; i + 4 <= n_in; i += 4) {
        const float32x4_t w0 = load4(w, n_in, o, i, kind);
        const float32x4_t w1 = load4(w, n_in, o_2, i, kind);
#define SLOT_FMA4(s)                                                                           \
    if (SLOT_ON(s)) {                                                                          \
        const float32x4_t xv = vld1q_f32(x + (size_t)SLOT_TOK(s) * ldx + i);                   \
        a##s##_0 = vfmaq_f32(a##s##_0, SLOT_ROW(s) ? w1 : w0, xv);                             \
    }
        SLOTS(SLOT_FMA4)
    }
#define SLOT_SUM(s)                                                                            \
    if (SLOT_ON(s)) {                                                                          \
        const float32x4_t s4 = vaddq_f32(vaddq_f32(a##s##_0, a##s##_1),                        \
                                         vaddq_f32(a##s##_2, a##s##_3));                       \
        float sum = vaddvq_f32(s4);                                                            \
        const size_t row = o + (size_t)SLOT_ROW(s);                                            \
        const float *xs = x + (size_t)SLOT_TOK(s) * ldx;                                       \
        for (size_t k = i; k < n_in; k++) {                                                    \
            sum = sum + load1(w, n_in, row, k, kind) * xs[k];                                  \
        }                                                                                      \
        out[SLOT_ROW(s) * MAX_TOK + SLOT_TOK(s)] = sum;                                        \
    }
    SLOTS(SLOT_SUM)
}
#undef SLOT_INIT
#undef SLOT_FMA16
#undef SLOT_FMA4
#undef SLOT_SUM

/* Output rows [o0, o1) for tokens t0 .. t0 + n_t - 1. */
static inline __attribute__((always_inline)) void token_group(float *y, size_t ldy,
                                                              const float *x, size_t ldx,
                                                              const void *w, size_t n_in,
                                                              size_t o0, size_t o1, int kind,
                                                              const int n_t) {
    float out[MAX_ROWS * MAX_TOK];
    size_t o = o0;
    if (n_t <= 2) {
        for (; o + 2 <= o1; o += 2) {
            dots(w, n_in, o, x, ldx, kind, 2, n_t, out);
            for (int t = 0; t < n_t; t++) {
                y[(size_t)t * ldy + o] = out[t];
                y[(size_t)t * ldy + o + 1] = out[MAX_TOK + t];
            }
        }
    }
    for (; o < o1; o++) {
        dots(w, n_in, o, x, ldx, kind, 1, n_t, out);
        for (int t = 0; t < n_t; t++) {
            y[(size_t)t * ldy + o] = out[t];
        }
    }
}

static inline __attribute__((always_inline)) void matmul(float *y, size_t ldy, const float *x,
                                                         size_t ldx, const void *w, size_t n_in,
                                                         size_t n_tok, size_t o0, size_t o1,
                                                         int kind) {
    for (size_t t = 0; t < n_tok; t += MAX_TOK) {
        float *yt = y + t * ldy;
        const float *xt = x + t * ldx;
        switch (n_tok - t < MAX_TOK ? n_tok - t : MAX_TOK) {
        case 1: token_group(yt, ldy, xt, ldx, w, n_in, o0, o1, kind, 1); break;
        case 2: token_group(yt, ldy, xt, ldx, w, n_in, o0, o1, kind, 2); break;
        case 3: token_group(yt, ldy, xt, ldx, w, n_in, o0, o1, kind, 3); break;
        default: token_group(yt, ldy, xt, ldx, w, n_in, o0, o1, kind, 4); break;
        }
    }
}

void kz_matmul_bf16_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matmul_f16_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matmul_f32_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}

/* The batched matrix-vector product (kernels.h matvec_*): per row tile of about
 * KZ_MATVEC_TILE_BYTES, the tokens in groups of up to four over the tile's rows
 * (token_group); every (t, o) runs the sequence fixed by n_in (header), so the bits of a
 * call of its own, and the tile is read from memory once for every group. */
static inline __attribute__((always_inline)) void matvec(float *y, size_t ldy, const float *x,
                                                         size_t ldx, const void *w, size_t n_in,
                                                         size_t n_tok, size_t o0, size_t o1,
                                                         int kind) {
    const size_t tile = kz_matvec_tile_rows(n_in * (kind == W_F32 ? 4 : 2));
    for (size_t r0 = o0; r0 < o1; r0 += tile) {
        const size_t r1 = o1 - r0 < tile ? o1 : r0 + tile;
        matmul(y, ldy, x, ldx, w, n_in, n_tok, r0, r1, kind);
    }
}

void kz_matvec_bf16_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_BF16);
}

void kz_matvec_f16_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F16);
}

void kz_matvec_f32_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matvec(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, W_F32);
}
