/*
 * quant_ref.c - q8_0 / q4_0 row quantizers and dequantizers, and the scalar
 * definition of the quantized language-model projections (kernels.h
 * matmul_q8_0, matmul_q4_0). Formats and error bounds: kernels/quant.h.
 *
 * Data flow:
 *   f32 row [n] -> per block of 32: scale (fp16) and int8 / nibble codes -> packed row
 *   packed row -> d * q (q8_0) or d * (q - 8) (q4_0) -> f32 row [n]
 *   matmul: for token t and row o, per block b: s_b = sum_i q_i * x[32 b + i]
 *           (float, i = 0..31 in order), acc = acc + d_b * s_b (b in order).
 * The matmul here uses the float activations as they are; the SIMD variants
 * quantize the activations to int8 per block (quant.h kz_quant_act_block)
 * and so differ from this definition by a bounded amount, derived in
 * tests/unit/test_quant.c.
 */
#include "kernels/quant.h"

#include "kernels/kernels.h"
#include "runtime/error.h"

/* fp16 bits of a scale, saturated at the largest finite half (+-65504). */
static uint16_t scale_bits(float d) {
    uint16_t h = kz_f32_to_fp16(d);
    if ((h & 0x7fffu) == 0x7c00u) {
        h = (uint16_t)((h & 0x8000u) | 0x7bffu);
    }
    return h;
}

/* round(clamp(x / d, lo, hi)), half away from zero; 0 when d is 0. */
static int quant_one(float x, float d, float lo, float hi) {
    if (d == 0.0f) {
        return 0;
    }
    const float r = fminf(fmaxf(x / d, lo), hi);
    return (int)roundf(r);
}

int kz_quantize_row_q8_0(void *dst, const float *x, size_t n) {
    if (n % KZ_QK != 0) {
        return -1;
    }
    uint8_t *out = dst;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const float *xb = x + b * KZ_QK;
        float amax = 0.0f;
        for (int i = 0; i < KZ_QK; i++) {
            amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        }
        kz_block_q8_0 blk;
        blk.d = amax > 0.0f ? scale_bits(amax / 127.0f) : 0;
        const float dh = kz_fp16_to_f32(blk.d);
        for (int i = 0; i < KZ_QK; i++) {
            blk.q[i] = (int8_t)quant_one(xb[i], dh, -127.0f, 127.0f);
        }
        memcpy(out + b * KZ_Q8_0_BLOCK_BYTES, &blk, sizeof blk);
    }
    return 0;
}

int kz_quantize_row_q4_0(void *dst, const float *x, size_t n) {
    if (n % KZ_QK != 0) {
        return -1;
    }
    uint8_t *out = dst;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const float *xb = x + b * KZ_QK;
        float amax = 0.0f;
        float m = 0.0f;
        for (int i = 0; i < KZ_QK; i++) {
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                m = xb[i];
            }
        }
        kz_block_q4_0 blk;
        blk.d = amax > 0.0f ? scale_bits(m / -8.0f) : 0;
        const float dh = kz_fp16_to_f32(blk.d);
        for (int j = 0; j < KZ_QK / 2; j++) {
            const int lo = quant_one(xb[j], dh, -8.0f, 7.0f) + 8;
            const int hi = quant_one(xb[j + KZ_QK / 2], dh, -8.0f, 7.0f) + 8;
            blk.qs[j] = (uint8_t)(lo | (hi << 4));
        }
        memcpy(out + b * KZ_Q4_0_BLOCK_BYTES, &blk, sizeof blk);
    }
    return 0;
}

/* --- q4_0 with a least-squares scale search (kz_quantize_row_q4_0_search) -------
 * Per block of 32 weights x (m = the element of largest magnitude):
 *   for each candidate inverse scale s_k = -(8 + 0.1 k) / m, k = -9..9:
 *     L = clamp(round(s_k x), -8, 7); d = sum(x L) / sum(L L)   (best d for L)
 *     dh = fp16(d); q = clamp(round(x / dh), -8, 7); err = sum((x - dh q)^2)
 *   plus the plain quantizer's own choice d = m / -8;
 *   keep the candidate of least err (the first on ties).
 * So the stored block is never worse, in squared error against x, than
 * kz_quantize_row_q4_0's; for Gaussian weights its RMS error is ~6 % lower
 * (the plain quantizer spends one of 16 levels on the single largest weight).
 */

/* The q4_0 level of x at stored scale dh, as kz_quantize_row_q4_0 computes it. */
static int q4_level(float x, float dh) {
    return quant_one(x, dh, -8.0f, 7.0f);
}

/* Squared error of x quantized with stored scale bits h. */
static double block_error(const float *x, uint16_t h) {
    const float dh = kz_fp16_to_f32(h);
    double err = 0.0;
    for (int i = 0; i < KZ_QK; i++) {
        const double e = (double)x[i] - (double)dh * q4_level(x[i], dh);
        err += e * e;
    }
    return err;
}

/* Least-squares scale for the levels of inverse scale s. */
static float fitted_scale(const float *x, float s) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < KZ_QK; i++) {
        const float l = fminf(fmaxf(roundf(s * x[i]), -8.0f), 7.0f);
        num += (double)x[i] * l;
        den += (double)l * l;
    }
    return den > 0.0 ? (float)(num / den) : 0.0f;
}

static uint16_t best_scale(const float *x) {
    float m = 0.0f;
    for (int i = 0; i < KZ_QK; i++) {
        m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
    }
    if (m == 0.0f) {
        return 0;
    }
    uint16_t best = scale_bits(m / -8.0f);
    double best_err = block_error(x, best);
    for (int k = -9; k <= 9; k++) {
        const float d = fitted_scale(x, -(8.0f + 0.1f * (float)k) / m);
        const uint16_t h = scale_bits(d);
        const double err = d != 0.0f && isfinite(d) ? block_error(x, h) : INFINITY;
        if (err < best_err) {
            best_err = err;
            best = h;
        }
    }
    return best;
}

int kz_quantize_row_q4_0_search(void *dst, const float *x, size_t n) {
    if (n % KZ_QK != 0) {
        return -1;
    }
    uint8_t *out = dst;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        const float *xb = x + b * KZ_QK;
        kz_block_q4_0 blk;
        blk.d = best_scale(xb);
        const float dh = kz_fp16_to_f32(blk.d);
        for (int j = 0; j < KZ_QK / 2; j++) {
            const int lo = q4_level(xb[j], dh) + 8;
            const int hi = q4_level(xb[j + KZ_QK / 2], dh) + 8;
            blk.qs[j] = (uint8_t)(lo | (hi << 4));
        }
        memcpy(out + b * KZ_Q4_0_BLOCK_BYTES, &blk, sizeof blk);
    }
    return 0;
}

int kz_dequantize_row_q8_0(float *y, const void *src, size_t n) {
    if (n % KZ_QK != 0) {
        return -1;
    }
    const uint8_t *in = src;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        kz_block_q8_0 blk;
        memcpy(&blk, in + b * KZ_Q8_0_BLOCK_BYTES, sizeof blk);
        const float d = kz_fp16_to_f32(blk.d);
        for (int i = 0; i < KZ_QK; i++) {
            y[b * KZ_QK + (size_t)i] = d * (float)blk.q[i];
        }
    }
    return 0;
}

int kz_dequantize_row_q4_0(float *y, const void *src, size_t n) {
    if (n % KZ_QK != 0) {
        return -1;
    }
    const uint8_t *in = src;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        kz_block_q4_0 blk;
        memcpy(&blk, in + b * KZ_Q4_0_BLOCK_BYTES, sizeof blk);
        const float d = kz_fp16_to_f32(blk.d);
        for (int j = 0; j < KZ_QK / 2; j++) {
            y[b * KZ_QK + (size_t)j] = d * (float)((blk.qs[j] & 0x0f) - 8);
            y[b * KZ_QK + (size_t)j + KZ_QK / 2] = d * (float)((blk.qs[j] >> 4) - 8);
        }
    }
    return 0;
}

void kz_matmul_q8_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    for (size_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * ldx;
        for (size_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)w + o * kz_q8_0_row_bytes(n_in);
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                kz_block_q8_0 blk;
                memcpy(&blk, row + b * KZ_Q8_0_BLOCK_BYTES, sizeof blk);
                float s = 0.0f;
                for (int i = 0; i < KZ_QK; i++) {
                    s = s + (float)blk.q[i] * xt[b * KZ_QK + (size_t)i];
                }
                acc = acc + kz_fp16_to_f32(blk.d) * s;
            }
            y[t * ldy + o] = acc;
        }
    }
}

void kz_matmul_q4_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    for (size_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * ldx;
        for (size_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)w + o * kz_q4_0_row_bytes(n_in);
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                kz_block_q4_0 blk;
                memcpy(&blk, row + b * KZ_Q4_0_BLOCK_BYTES, sizeof blk);
                const float *xb = xt + b * KZ_QK;
                float s = 0.0f;
                for (int i = 0; i < KZ_QK; i++) {
                    const int q = i < KZ_QK / 2 ? blk.qs[i] & 0x0f : blk.qs[i - KZ_QK / 2] >> 4;
                    s = s + (float)(q - 8) * xb[i];
                }
                acc = acc + kz_fp16_to_f32(blk.d) * s;
            }
            y[t * ldy + o] = acc;
        }
    }
}

/* The batched matrix-vector products (kernels.h matvec_q8_0): the definition's sums with
 * the rows outermost, each row read once for every token. */
void kz_matvec_q8_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; o++) {
        kz_matmul_q8_0_ref(y, ldy, x, ldx, w, n_in, n_tok, o, o + 1);
    }
}

void kz_matvec_q4_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; o++) {
        kz_matmul_q4_0_ref(y, ldy, x, ldx, w, n_in, n_tok, o, o + 1);
    }
}

/* The definitions do not prefetch: every policy's slot holds them. */
#define REF_SLOTS(f) {{f, f}, {f, f}, {f, f}}
const kz_quant_fns kz_quant_ref = {
    .q8_0 = REF_SLOTS(kz_matmul_q8_0_ref),
    .q4_0 = REF_SLOTS(kz_matmul_q4_0_ref),
    .q8_0_batch = REF_SLOTS(kz_matvec_q8_0_ref),
    .q4_0_batch = REF_SLOTS(kz_matvec_q4_0_ref),
};
