/*
 * test_quant.c - block-quantized weights (kernels/quant.h) and their matmul
 * kernels (kernels.h matmul_q8_0, matmul_q4_0).
 *
 * Data flow: fp16 conversion (exhaustive round trip, every rounding midpoint)
 * -> hand-made blocks with known bytes (layout, ties, clipping, signs)
 * -> quantize / dequantize round trips on random blocks at magnitudes from
 *    zero through fp16-subnormal scales to saturated ones, against the bounds
 *    of quant.h -> every ISA level's matmul against the scalar definition on
 *    random shapes (rows 1..70, n_in 32..3072 and 8224 (two activation chunks,
 *    odd tail), 1..5 tokens, strided and misaligned x / y / w) and prompt shapes (up
 *    to 41 tokens; rows of up to 6144 inputs, segmented by AVX-512 VNNI q4_0), quantized and
 *    raw random codes -> bit-identical results for any split of rows or tokens
 *    -> the sub-levels of one level (AVX-512: plain, VNNI, AMX; NEON: baseline,
 *    SDOT, SMMLA) give the same bits where their quantized matmuls differ, and so
 *    does every prefetch policy's entry point of a table.
 *
 * Tolerance of a SIMD level against the float definition. The SIMD kernels
 * replace the activations x_i of block b by d_x q_i with d_x = max|x| / 127,
 * q_i = round(x_i / d_x), so x_i = d_x q_i + e_i, |e_i| <= d_x / 2 (plus the
 * rounding of the division, <= |x_i| 2^-22). The weights are the same
 * (w_i = d_w c_i, c_i the code, c_i - 8 for q4_0), and the integer products
 * are exact, so
 *   |simd - ref| <= Q + F,
 *   Q = sum_b |d_w,b| sum_i |c_i| (d_x,b / 2 + |x_i| 2^-22)   (activation rounding)
 *   F = 2 (n_in + n_blocks + 8) 2^-24 sum_b |d_w,b| sum_i |c_i| (|x_i| + d_x,b)
 *       (float rounding of both sums: 32-term block sums and a chain over blocks
 *       in the definition, one fma chain per lane plus a reduction tree in SIMD).
 * Q is the worst case (every rounding error aligned with the weight's sign);
 * the test also prints the largest observed |simd - ref| / (Q + F).
 * A second, tight check predicts the SIMD result itself: with the activation
 * quantization of quant.h kz_quant_act_block (which the SIMD levels compute
 * bit for bit) the exact value is sum_b d_w,b d_x,b sum_i c_i q_i, computed
 * here in double from the same float products d_w d_x; SIMD may differ from
 * it only by the float accumulation, (n_blocks + 10) 2^-24 sum_b |d_w,b d_x,b|
 * sum_i (|c_i| + 8 for q4_0) |q_i| (the lane sums include q4_0's -8 sum q).
 * A wrong nibble, sign, tie or scale fails this by orders of magnitude.
 */
#define _DEFAULT_SOURCE // MAP_ANONYMOUS (glibc hides it under plain POSIX)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "test.h"
#include "test_levels.h"

static uint64_t rng = 88172645463325252ull;

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* --- fp16 ------------------------------------------------------------------ */

static void test_fp16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = kz_fp16_to_f32((uint16_t)h);
        const int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
        if (nan) {
            bad += !isnan(f) || !isnan(kz_fp16_to_f32(kz_f32_to_fp16(f)));
            continue;
        }
        bad += kz_f32_to_fp16(f) != h;
        // value check independent of the bit tricks: (-1)^s 2^(e-15) (1 + m/1024), or m 2^-24
        const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v = e == 0    ? ldexp((double)m, -24)
                   : e == 31 ? INFINITY
                             : ldexp(1.0 + m / 1024.0, (int)e - 15);
        v = (h & 0x8000u) ? -v : v;
        bad += (double)f != v || !!signbit(f) != ((h & 0x8000u) != 0);
    }
    CHECK_MSG(bad == 0, "fp16 exhaustive round trip: %d mismatches", bad);

    // Every midpoint between adjacent finite halves goes to the even one; a float ulp
    // either side goes to the nearer one. Midpoints have <= 12 significant bits: exact.
    bad = 0;
    for (uint32_t h = 0; h < 0x7bffu; h++) {
        const float a = kz_fp16_to_f32((uint16_t)h), b = kz_fp16_to_f32((uint16_t)(h + 1));
        const float mid = (float)(((double)a + (double)b) / 2);
        const uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        bad += kz_f32_to_fp16(mid) != even;
        bad += kz_f32_to_fp16(nextafterf(mid, 0.0f)) != h;
        bad += kz_f32_to_fp16(nextafterf(mid, INFINITY)) != h + 1;
        bad += kz_f32_to_fp16(-mid) != (even | 0x8000u);
    }
    CHECK_MSG(bad == 0, "fp16 rounding at midpoints: %d mismatches", bad);
    CHECK_EQ_INT(kz_f32_to_fp16(65519.996f), 0x7bff);
    CHECK_EQ_INT(kz_f32_to_fp16(65520.0f), 0x7c00); // tie between 65504 (odd) and 2^16: inf
    CHECK_EQ_INT(kz_f32_to_fp16(1e30f), 0x7c00);
    CHECK_EQ_INT(kz_f32_to_fp16(-INFINITY), 0xfc00);
    CHECK_EQ_INT(kz_f32_to_fp16(0x1p-25f), 0x0000); // half the smallest subnormal: tie to 0
    CHECK_EQ_INT(kz_f32_to_fp16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    CHECK_EQ_INT(kz_f32_to_fp16(1e-30f), 0x0000);
    CHECK_EQ_INT(kz_f32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ_INT(kz_f32_to_fp16(u2f(0x00000001u)), 0x0000); // float subnormal
    CHECK_EQ_INT(kz_f32_to_fp16(nextafterf(0x1p-14f, 0.0f)),
                 0x0400); // rounds up to the smallest normal
    CHECK((kz_f32_to_fp16(NAN) & 0x7c00u) == 0x7c00u && (kz_f32_to_fp16(NAN) & 0x3ffu) != 0);
}

/* --- hand-made blocks ------------------------------------------------------ */

static void test_layout_q8_0(void) {
    // q8_0: amax 127 -> d = 1 (fp16 0x3c00), codes are round(x), ties away from zero.
    float x[KZ_QK];
    int8_t want[KZ_QK];
    for (int i = 0; i < KZ_QK; i++) {
        x[i] = (float)(i - 16) * 3.0f;
        want[i] = (int8_t)((i - 16) * 3);
    }
    x[0] = -127.0f, want[0] = -127;
    x[1] = 126.9f, want[1] = 127;
    x[2] = 0.5f, want[2] = 1;
    x[3] = -0.5f, want[3] = -1;
    x[4] = 2.5f, want[4] = 3;
    x[5] = -2.5f, want[5] = -3;
    x[6] = 0.49f, want[6] = 0;
    uint8_t blk[KZ_Q8_0_BLOCK_BYTES + 1];
    memset(blk, 0xee, sizeof blk);
    CHECK_EQ_INT(kz_quantize_row_q8_0(blk, x, KZ_QK), 0);
    CHECK_EQ_INT(blk[0], 0x00);
    CHECK_EQ_INT(blk[1], 0x3c);
    CHECK(memcmp(blk + 2, want, KZ_QK) == 0);
    CHECK_EQ_INT(blk[KZ_Q8_0_BLOCK_BYTES], 0xee); // nothing past the block
}

static void test_layout_q4_0(void) {
    // q4_0: the largest magnitude is -8 -> d = -8 / -8 = 1; q = round(x) + 8 clipped to 0..15.
    // Byte j: element j in the low nibble, element j + 16 in the high nibble.
    float x4[KZ_QK];
    int q4[KZ_QK];
    for (int i = 0; i < KZ_QK; i++) {
        x4[i] = (float)((i % 15) - 7); // -7..7
        q4[i] = (i % 15) + 1;
    }
    x4[0] = -8.0f, q4[0] = 0;
    x4[1] = 0.5f, q4[1] = 9; // tie away from zero
    x4[2] = -0.5f, q4[2] = 7;
    x4[17] = 7.5f, q4[17] = 15; // rounds to 8, clipped to 15
    x4[18] = -7.5f, q4[18] = 0; // rounds to -8
    x4[19] = 6.5f, q4[19] = 15;
    x4[20] = -6.5f, q4[20] = 1;
    uint8_t b4[KZ_Q4_0_BLOCK_BYTES];
    CHECK_EQ_INT(kz_quantize_row_q4_0(b4, x4, KZ_QK), 0);
    CHECK_EQ_INT(b4[0], 0x00);
    CHECK_EQ_INT(b4[1], 0x3c);
    int bad = 0;
    for (int j = 0; j < KZ_QK / 2; j++) {
        bad += b4[2 + j] != (uint8_t)(q4[j] | (q4[j + 16] << 4));
    }
    CHECK_MSG(bad == 0, "q4_0 nibble layout: %d bytes differ", bad);
    float y4[KZ_QK];
    CHECK_EQ_INT(kz_dequantize_row_q4_0(y4, b4, KZ_QK), 0);
    CHECK(y4[0] == -8.0f && y4[1] == 1.0f && y4[17] == 7.0f && y4[18] == -8.0f);

    // A positive extreme gives a negative scale: 8 -> q 0, -8 -> clipped to 15 (w = -7).
    for (int i = 0; i < KZ_QK; i++) {
        x4[i] = 0.0f;
    }
    x4[3] = 8.0f, x4[4] = -8.0f, x4[20] = 1.0f;
    CHECK_EQ_INT(kz_quantize_row_q4_0(b4, x4, KZ_QK), 0);
    CHECK_EQ_INT(b4[0] | (b4[1] << 8), 0xbc00); // -1.0
    CHECK_EQ_INT(b4[2 + 3] & 0x0f, 0);
    CHECK_EQ_INT(b4[2 + 4] & 0x0f, 15);
    CHECK_EQ_INT(b4[2 + 4] >> 4, 7); // element 20: 1 / -1 + 8
    CHECK_EQ_INT(kz_dequantize_row_q4_0(y4, b4, KZ_QK), 0);
    CHECK(y4[3] == 8.0f && y4[4] == -7.0f && y4[20] == 1.0f && y4[0] == 0.0f);
}

static void test_zero_and_bad_sizes(void) {
    // Zero blocks: scale 0, codes 0 (q8_0) or 8 (q4_0), dequantized to 0.
    float z[2 * KZ_QK] = {0};
    uint8_t bz[2 * KZ_Q8_0_BLOCK_BYTES];
    CHECK_EQ_INT(kz_quantize_row_q8_0(bz, z, 2 * KZ_QK), 0);
    int bad = 0;
    for (size_t i = 0; i < sizeof bz; i++) {
        bad += bz[i] != 0;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(kz_quantize_row_q4_0(bz, z, 2 * KZ_QK), 0);
    bad = 0;
    for (size_t b = 0; b < 2; b++) {
        const uint8_t *p = bz + b * KZ_Q4_0_BLOCK_BYTES;
        bad += p[0] != 0 || p[1] != 0;
        for (int j = 0; j < KZ_QK / 2; j++) {
            bad += p[2 + j] != 0x88;
        }
    }
    CHECK_EQ_INT(bad, 0);

    // n not a multiple of 32: -1, destination untouched.
    float x[2 * KZ_QK] = {1.0f}, y[2 * KZ_QK];
    uint8_t guard[KZ_Q8_0_BLOCK_BYTES];
    memset(guard, 0x5a, sizeof guard);
    y[0] = 7.0f;
    CHECK_EQ_INT(kz_quantize_row_q8_0(guard, x, 31), -1);
    CHECK_EQ_INT(kz_quantize_row_q4_0(guard, x, 33), -1);
    CHECK_EQ_INT(kz_dequantize_row_q8_0(y, guard, 16), -1);
    CHECK_EQ_INT(kz_dequantize_row_q4_0(y, guard, 48), -1);
    CHECK(y[0] == 7.0f);
    CHECK_EQ_INT(guard[0], 0x5a);
    CHECK_EQ_INT(guard[KZ_Q8_0_BLOCK_BYTES - 1], 0x5a);
}

/* --- round trips ----------------------------------------------------------- */

/* Checks one quantized block of 32 values against the bounds of quant.h.
 * Returns the number of violations; *worst tracks max error / amax (normal scales). */
static int check_block(const float *x, const uint8_t *blk, int q4, double *worst) {
    float amax = 0.0f, m = 0.0f;
    for (int i = 0; i < KZ_QK; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            m = x[i];
        }
    }
    const float d = q4 ? m / -8.0f : amax / 127.0f;
    uint16_t hb;
    memcpy(&hb, blk, 2);
    const double dh = kz_fp16_to_f32(hb);
    // the stored scale is d rounded to fp16, saturated at 65504
    uint16_t want = kz_f32_to_fp16(d);
    if ((want & 0x7fffu) == 0x7c00u) {
        want = (uint16_t)((want & 0x8000u) | 0x7bffu);
    }
    int bad = amax > 0.0f ? hb != want : hb != 0;
    float w[KZ_QK];
    if (q4) {
        kz_dequantize_row_q4_0(w, blk, KZ_QK);
    } else {
        kz_dequantize_row_q8_0(w, blk, KZ_QK);
    }
    const double slop = fabs(d - dh) * (q4 ? 8.0 : 127.0) + (double)amax * 0x1p-20;
    for (int i = 0; i < KZ_QK; i++) {
        const double err = fabs((double)x[i] - (double)w[i]);
        double bound = fabs(dh) * (0.5 + 0x1p-16) + slop;
        if (q4 && dh != 0 && x[i] / dh > 7.5) { // the clipped side of q4_0
            bound = fabs(dh) * (1.0 + 0x1p-16) + slop;
        }
        bad += err > bound;
        const int normal = (hb & 0x7c00u) != 0 && (hb & 0x7fffu) != 0x7bffu;
        if (normal && amax > 0.0f) {
            // normal scale: q8_0 within amax / 254, q4_0 within amax / 16 (amax / 8 clipped)
            const double rel = err / amax;
            bad += rel > (q4 ? 1.0 / 8 : 1.0 / 254) * (1 + 0x1p-9);
            if (rel > *worst) {
                *worst = rel;
            }
        }
    }
    if (q4 && dh != 0 &&
        amax > 0.0f) { // the extreme itself maps to -8: exact up to the scale rounding
        int im = 0;
        while (x[im] != m) {
            im++;
        }
        bad += fabs((double)m - w[im]) > 8.0 * fabs(d - dh) + (double)amax * 0x1p-20;
    }
    return bad;
}

static void test_round_trip(void) {
    static const float mags[] = {0.0f,  1e-9f, 3e-7f, 2e-6f, 1e-5f,  1e-4f, 6e-4f, 5e-3f,
                                 0.02f, 0.3f,  1.0f,  17.0f, 900.0f, 6e4f,  1e6f,  2e7f};
    const size_t n_mags = sizeof mags / sizeof mags[0];
    for (int q4 = 0; q4 < 2; q4++) {
        int bad = 0;
        double worst = 0;
        size_t n_blocks = 0;
        for (int rep = 0; rep < 400; rep++) {
            float x[4 * KZ_QK];
            for (int b = 0; b < 4; b++) {
                const float mag = mags[test_rng_below(&rng, n_mags)];
                for (int i = 0; i < KZ_QK; i++) {
                    x[b * KZ_QK + i] = mag * test_rng_float(&rng);
                }
                switch (test_rng_below(&rng, 6)) {
                case 0:
                    x[b * KZ_QK + test_rng_below(&rng, KZ_QK)] = mag * 1000.0f;
                    break; // one huge value
                case 1:
                    x[b * KZ_QK + test_rng_below(&rng, KZ_QK)] = -mag * 1.5f;
                    break; // negative extreme
                case 2:
                    x[b * KZ_QK + test_rng_below(&rng, KZ_QK)] = mag * 1.5f; // both extremes, tie
                    x[b * KZ_QK + test_rng_below(&rng, KZ_QK)] = -mag * 1.5f;
                    break;
                default:
                    break;
                }
            }
            uint8_t blk[4 * KZ_Q8_0_BLOCK_BYTES];
            const size_t bs = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
            CHECK_EQ_INT(q4 ? kz_quantize_row_q4_0(blk, x, 4 * KZ_QK)
                            : kz_quantize_row_q8_0(blk, x, 4 * KZ_QK),
                         0);
            for (int b = 0; b < 4; b++) {
                bad += check_block(x + b * KZ_QK, blk + (size_t)b * bs, q4, &worst);
                n_blocks++;
            }
        }
        // subnormal scales on purpose: amax from 2^-24 * 127 up to the smallest normal scale
        for (int e = -24; e <= -14; e++) {
            float x[KZ_QK];
            const float amax = ldexpf(1.0f, e) * (q4 ? 8.0f : 127.0f) * 0.77f;
            for (int i = 0; i < KZ_QK; i++) {
                x[i] = amax * test_rng_float(&rng);
            }
            x[7] = -amax;
            uint8_t blk[KZ_Q8_0_BLOCK_BYTES];
            if (q4) {
                kz_quantize_row_q4_0(blk, x, KZ_QK);
            } else {
                kz_quantize_row_q8_0(blk, x, KZ_QK);
            }
            uint16_t hb;
            memcpy(&hb, blk, 2);
            bad += (hb & 0x7c00u) != 0; // the scale must be subnormal here
            bad += check_block(x, blk, q4, &worst);
            n_blocks++;
        }
        CHECK_MSG(bad == 0, "%s round trip: %d bound violations", q4 ? "q4_0" : "q8_0", bad);
        printf(
            "%s round trip: %zu blocks, worst error %.5f of the block's max|x| (normal scales)\n",
            q4 ? "q4_0" : "q8_0", n_blocks, worst);
    }
}

/* --- matmul ---------------------------------------------------------------- */

typedef void (*mm_fn)(float *, size_t, const float *, size_t, const void *, size_t, size_t, size_t,
                      size_t);

/* Block b of row o: scale and the 32 signed codes (q4_0: nibble - 8). */
static double block_codes(const uint8_t *w, size_t o, size_t nb, size_t b, int q4, int c[KZ_QK]) {
    const size_t bs = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const uint8_t *p = w + (o * nb + b) * bs;
    uint16_t h;
    memcpy(&h, p, 2);
    for (int i = 0; i < KZ_QK; i++) {
        if (q4) {
            c[i] = (i < 16 ? p[2 + i] & 0x0f : p[2 + i - 16] >> 4) - 8;
        } else {
            c[i] = (int8_t)p[2 + i];
        }
    }
    return kz_fp16_to_f32(h);
}

static double worst_ratio[TEST_MAX_LEVELS][2];

/* Checks got against ref (loose bound) and against the exact quantized-activation
 * value (tight bound) for every (t, o). Returns the number of violations. */
static int check_values(const float *got, const float *ref, const uint8_t *w, const float *x,
                        size_t ldx, size_t ldy, size_t rows, size_t n_in, size_t n_tok, int q4,
                        int level) {
    const size_t nb = n_in / KZ_QK;
    int bad = 0;
    int8_t *xq = malloc(n_in);
    float *dx = malloc(nb * sizeof(float));
    for (size_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * ldx;
        for (size_t b = 0; b < nb; b++) {
            int32_t sum;
            kz_quant_act_block(xq + b * KZ_QK, dx + b, &sum, xt + b * KZ_QK);
        }
        for (size_t o = 0; o < rows; o++) {
            double q = 0, f = 0, exact = 0, tight = 0;
            for (size_t b = 0; b < nb; b++) {
                int c[KZ_QK];
                const double dw = block_codes(w, o, nb, b, q4, c);
                double sq = 0, sf = 0, ex = 0, tq = 0;
                for (int i = 0; i < KZ_QK; i++) {
                    const double xi = fabs((double)xt[b * KZ_QK + (size_t)i]);
                    sq += abs(c[i]) * (dx[b] / 2.0 + xi * 0x1p-22);
                    sf += abs(c[i]) * (xi + dx[b]);
                    ex += (double)c[i] * xq[b * KZ_QK + (size_t)i];
                    tq += (double)(abs(c[i]) + (q4 ? 8 : 0)) * abs(xq[b * KZ_QK + (size_t)i]);
                }
                q += fabs(dw) * sq;
                f += fabs(dw) * sf;
                exact += (double)((float)dw * dx[b]) * ex; // the kernel's float d_w d_x
                tight += fabs(dw * dx[b]) * tq;
            }
            const double loose = 1.001 * q + 2.0 * (double)(n_in + nb + 8) * 0x1p-24 * f + 1e-30;
            const double tight_tol = (double)(nb + 10) * 0x1p-24 * tight + 1e-30;
            const double g = got[t * ldy + o], r = ref[t * ldy + o];
            const double ratio = fabs(g - r) / loose;
            if (ratio > worst_ratio[level][q4]) {
                worst_ratio[level][q4] = ratio;
            }
            bad += !(fabs(g - r) <= loose);
            bad += !(fabs(g - exact) <= tight_tol);
        }
    }
    free(xq);
    free(dx);
    return bad;
}

/* Rows quantized from random floats (a quarter of them small enough for subnormal
 * q8_0 scales), or raw random codes (q8_0 -128 included) with scales 2^-12 .. 2^3. */
static void fill_weights(uint8_t *w, float *wrow, size_t rows, size_t n_in, int q4, int raw) {
    const size_t nb = n_in / KZ_QK, bs = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const size_t row_bytes = nb * bs;
    for (size_t o = 0; o < rows; o++) {
        if (raw) {
            for (size_t b = 0; b < nb; b++) {
                uint8_t *p = w + o * row_bytes + b * bs;
                const uint16_t h =
                    (uint16_t)(((3 + test_rng_below(&rng, 15)) << 10) | test_rng_below(&rng, 1024) |
                               (test_rng_below(&rng, 2) << 15));
                memcpy(p, &h, 2);
                for (size_t i = 2; i < bs; i++) {
                    p[i] = (uint8_t)test_rng_below(&rng, 256);
                }
            }
        } else {
            const float scale = test_rng_below(&rng, 4) == 0 ? 1e-3f : 0.05f;
            for (size_t i = 0; i < n_in; i++) {
                wrow[i] = scale * test_rng_float(&rng);
            }
            CHECK_EQ_INT(q4 ? kz_quantize_row_q4_0(w + o * row_bytes, wrow, n_in)
                            : kz_quantize_row_q8_0(w + o * row_bytes, wrow, n_in),
                         0);
        }
    }
}

/* Token rows of random blocks: zero, tiny, large, unit, and blocks of exact
 * rounding ties (max 127, so d_x = 1, and values k + 0.5); NaN in the padding. */
static void fill_activations(float *xs, size_t ldx, size_t n_in, size_t n_tok) {
    const size_t nb = n_in / KZ_QK;
    for (size_t t = 0; t < n_tok; t++) {
        float *xt = xs + t * ldx;
        for (size_t b = 0; b < nb; b++) {
            const int kind = (int)test_rng_below(&rng, 8);
            const float mag = kind == 0 ? 0.0f : kind == 1 ? 1e-6f : kind == 2 ? 300.0f : 1.0f;
            for (int i = 0; i < KZ_QK; i++) {
                xt[b * KZ_QK + (size_t)i] = mag * test_rng_float(&rng);
            }
            if (kind == 3) { // exact ties for the activation rounding: d_x = 1
                for (int i = 0; i < KZ_QK; i++) {
                    xt[b * KZ_QK + (size_t)i] =
                        (float)((int)test_rng_below(&rng, 200) - 100) + 0.5f;
                }
                xt[b * KZ_QK + test_rng_below(&rng, KZ_QK)] =
                    test_rng_below(&rng, 2) ? 127.0f : -127.0f;
            }
        }
        for (size_t i = n_in; i < ldx; i++) {
            xt[i] = NAN; // the padding must never be read
        }
    }
}

static void check_matmul(const kz_kernels *k, int level, int q4, size_t rows, size_t n_in,
                         size_t n_tok, int raw) {
    const size_t nb = n_in / KZ_QK, bs = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const size_t ldx = n_in + 3, ldy = rows + 5, row_bytes = nb * bs;
    uint8_t *wbuf = malloc(rows * row_bytes + 1);
    uint8_t *w = wbuf + 1; // odd address: blocks may sit at any alignment
    float *x = malloc((n_tok * ldx + 1) * sizeof(float));
    float *xs = x + 1; // activations not 32-byte aligned either
    float *wrow = malloc(n_in * sizeof(float));
    float *ref = malloc(n_tok * ldy * sizeof(float));
    float *got = malloc(n_tok * ldy * sizeof(float));
    float *split = malloc(n_tok * ldy * sizeof(float));
    fill_weights(w, wrow, rows, n_in, q4, raw);
    fill_activations(xs, ldx, n_in, n_tok);
    for (size_t i = 0; i < n_tok * ldy; i++) {
        ref[i] = got[i] = split[i] = -1234.5f;
    }
    const mm_fn ref_fn = q4 ? kz_kernels_scalar.matmul_q4_0 : kz_kernels_scalar.matmul_q8_0;
    const mm_fn fn = q4 ? k->matmul_q4_0 : k->matmul_q8_0;
    ref_fn(ref, ldy, xs, ldx, w, n_in, n_tok, 0, rows);
    fn(got, ldy, xs, ldx, w, n_in, n_tok, 0, rows);
    // any split of rows, and of tokens (one call per token), gives the same bits
    for (size_t o0 = 0; o0 < rows;) {
        size_t o1 = o0 + 1 + test_rng_below(&rng, 9);
        o1 = o1 > rows ? rows : o1;
        for (size_t t = 0; t < n_tok; t++) {
            fn(split + t * ldy, ldy, xs + t * ldx, ldx, w, n_in, 1, o0, o1);
        }
        o0 = o1;
    }
    int bad = 0;
    if (k->isa == KZ_ISA_SCALAR) {
        bad = memcmp(got, ref, n_tok * ldy * sizeof(float)) != 0;
    } else {
        bad = check_values(got, ref, w, xs, ldx, ldy, rows, n_in, n_tok, q4, level);
    }
    int pad = 0;
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = rows; o < ldy; o++) {
            pad += got[t * ldy + o] != -1234.5f || split[t * ldy + o] != -1234.5f;
        }
    }
    CHECK_MSG(bad == 0, "%s %s%s rows %zu n_in %zu n_tok %zu: %d values off", k->name,
              q4 ? "q4_0" : "q8_0", raw ? " raw" : "", rows, n_in, n_tok, bad);
    CHECK_MSG(memcmp(got, split, n_tok * ldy * sizeof(float)) == 0,
              "%s %s: a split of rows or tokens changes bits (rows %zu n_in %zu n_tok %zu)",
              k->name, q4 ? "q4_0" : "q8_0", rows, n_in, n_tok);
    CHECK_MSG(pad == 0, "%s: wrote outside [o0, o1)", k->name);
    free(wbuf);
    free(x);
    free(wrow);
    free(ref);
    free(got);
    free(split);
}

static void test_matmul(void) {
    static const size_t widths[] = {32, 64, 96, 1024, 3072};
    for (int l = 0; l < (int)test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        CHECK_MSG(k->matmul_q8_0 && k->matmul_q4_0, "level %s: no quantized matmul in its table",
                  k->name);
        if (!k->matmul_q8_0 || !k->matmul_q4_0) {
            continue;
        }
        int n_cases = 0;
        for (int q4 = 0; q4 < 2; q4++) { // n_in 0: empty sums, y = 0
            float y[2 * 4] = {1, 1, 1, 1, 1, 1, 1, 1}, x0 = 1;
            uint8_t w0 = 0;
            (q4 ? k->matmul_q4_0 : k->matmul_q8_0)(y, 4, &x0, 0, &w0, 0, 2, 1, 3);
            CHECK_MSG(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 1 && y[5] == 0 && y[6] == 0,
                      "%s: n_in 0 must give 0 in [o0, o1) only", k->name);
        }
        for (int q4 = 0; q4 < 2; q4++) {
            for (int rep = 0; rep < 30; rep++) {
                const size_t rows = 1 + test_rng_below(&rng, 70);
                const size_t n_in = widths[test_rng_below(&rng, 5)];
                check_matmul(k, l, q4, rows, n_in, 1 + test_rng_below(&rng, 5), rep % 3 == 2);
                n_cases++;
            }
            for (size_t n_in = 32; n_in <= 544; n_in += 32) { // every block count mod 16
                check_matmul(k, l, q4, 7, n_in, 3, 0);
                n_cases++;
            }
            check_matmul(k, l, q4, 9, 8224, 3, 0); // two activation chunks, the second odd
            check_matmul(k, l, q4, 70, 3072, 5, 1);
            // prompts (AVX-512 with AMX-INT8 takes its tile path for q8_0 from 8 tokens)
            check_matmul(k, l, q4, 45, 1024, 22, 0);
            check_matmul(k, l, q4, 33, 8224, 17, 1);
            check_matmul(k, l, q4, 40, 3072, 41, 0); // many sets of tokens
            check_matmul(k, l, q4, 21, 1024, 28, 1); // a set of 16 and one of 12
            // rows of more than four groups with a partial last one, in a 16-row tile and
            // three more (AVX-512 VNNI: q4_0 prompt sets of five or more walk them in segments)
            check_matmul(k, l, q4, 19, 2720, 6, 0);
            check_matmul(k, l, q4, 35, 6144, 8, 1);
            // AVX-512 prompts of two or more sets up to KZ_PROMPT_TILE_TOKENS walk row tiles of
            // KZ_PROMPT_TILE_BYTES: several tiles and a partial last one (q8_0 60 rows of 1024
            // inputs a tile, q4_0 113), the limit, one past it, and two activation chunks
            check_matmul(k, l, q4, 250, 1024, 22, 0);
            check_matmul(k, l, q4, 47, 3072, KZ_PROMPT_TILE_TOKENS, 1);
            check_matmul(k, l, q4, 61, 2048, KZ_PROMPT_TILE_TOKENS + 1, 0);
            check_matmul(k, l, q4, 9, 8224, 9, 1);
            n_cases += 12;
        }
        if (k->isa == KZ_ISA_SCALAR) {
            printf("level %s: %d cases\n", k->name, n_cases);
        } else {
            printf("level %s: %d cases, worst |simd - ref| / bound: q8_0 %.4f, q4_0 %.4f\n",
                   k->name, n_cases, worst_ratio[l][0], worst_ratio[l][1]);
        }
    }
}

/* One shape of a quantized matmul for comparing two entry points bit for bit. */
typedef struct path_case {
    int q4, raw;
    size_t rows, o0, n_in, n_tok, ldx, ldy;
} path_case;

/* Runs fa and fb (matmuls of c's format) on one shape: whether both wrote the same bits,
 * padding included. */
static int paths_agree(kz_matmul_fn fa, kz_matmul_fn fb, const path_case *c) {
    const size_t nb = c->n_in / KZ_QK, bs = c->q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    const size_t ny = c->n_tok * c->ldy;
    uint8_t *wbuf = malloc(c->rows * nb * bs + 1); // +1: misaligned weights
    float *x = malloc(c->n_tok * c->ldx * sizeof(float));
    float *wrow = malloc(c->n_in * sizeof(float));
    float *y[2] = {malloc(ny * sizeof(float)), malloc(ny * sizeof(float))};
    fill_weights(wbuf + 1, wrow, c->rows, c->n_in, c->q4, c->raw);
    fill_activations(x, c->ldx, c->n_in, c->n_tok);
    for (int v = 0; v < 2; v++) {
        for (size_t i = 0; i < ny; i++) {
            y[v][i] = -7.0f;
        }
        (v ? fb : fa)(y[v], c->ldy, x, c->ldx, wbuf + 1, c->n_in, c->n_tok, c->o0, c->rows);
    }
    const int same = memcmp(y[0], y[1], ny * sizeof(float)) == 0;
    free(wbuf);
    free(x);
    free(wrow);
    free(y[0]);
    free(y[1]);
    return same;
}

/* Case rep of a comparison: 1-75 rows from a random o0, 1-120 blocks (rep 5: 8224
 * inputs, two activation chunks, the second odd), strided x and y, misaligned weights;
 * tokens from 1 through sets of 4 and 8 (the AVX-512 kernels), pairs (NEON's SMMLA), one
 * and two AMX token tiles (8 or more) to 47. */
static path_case path_case_of(int q4, int rep) {
    static const size_t toks[] = {1, 2, 3, 5, 8, 9, 12, 16, 17, 22, 33, 47};
    path_case c = {.q4 = q4, .raw = rep % 2, .n_tok = toks[rep % 12]};
    c.rows = 1 + test_rng_below(&rng, 75);
    c.n_in = rep == 5 ? 8224 : 32 * (1 + test_rng_below(&rng, 120));
    c.o0 = c.rows > 1 ? test_rng_below(&rng, c.rows / 2) : 0;
    c.ldx = c.n_in + (size_t)(rep % 3);
    c.ldy = c.rows + (size_t)(rep % 2);
    return c;
}

/* The sub-levels of one level form the same exact integer block sums and the same
 * float sequence in their quantized matmuls (AVX-512: maddubs, vpdpbusd, AMX-INT8
 * tiles for q8_0 prompts; NEON: baseline, SDOT, SMMLA for 2+ tokens): each sub-level
 * the CPU runs gives the bits of the one below it where their entry points differ. */
static void test_sublevel_paths(void) {
    const kz_kernels *prev = NULL;
    int compared = 0;
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        if (!prev || prev->isa != k->isa || prev->quant == k->quant) {
            prev = k;
            continue;
        }
        int cases = 0;
        for (int q4 = 0; q4 < 2; q4++) {
            for (int rep = 0; rep < 36; rep++) {
                const path_case c = path_case_of(q4, rep);
                CHECK_MSG(paths_agree(q4 ? prev->matmul_q4_0 : prev->matmul_q8_0,
                                      q4 ? k->matmul_q4_0 : k->matmul_q8_0, &c),
                          "%s rows %zu..%zu n_in %zu n_tok %zu: %s and %s differ",
                          q4 ? "q4_0" : "q8_0", c.o0, c.rows, c.n_in, c.n_tok, prev->name,
                          k->name);
                cases++;
            }
        }
        printf("sub-level paths: %s == %s, %d cases\n", k->name, prev->name, cases);
        compared++;
        prev = k;
    }
    if (!compared) {
        printf("sub-level paths: no two quantized paths of one level on this CPU, skipped\n");
    }
}

/* Every table's quantized matmuls under every prefetch policy (kernels.h
 * kz_quant_prefetch: other prefetches, a mode carried through the x86 kernels' calls),
 * for streamed and reused weights, give the bits of the table's own, one to 47 tokens;
 * and each table's entry points are its quant set's for its policy. */
static void test_prefetch_policies(void) {
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        CHECK_MSG(k->quant && k->matmul_q8_0 == k->quant->q8_0[k->prefetch][0] &&
                      k->matmul_q4_0 == k->quant->q4_0[k->prefetch][0] &&
                      k->matmul_q8_0_reused == k->quant->q8_0[k->prefetch][1] &&
                      k->matmul_q4_0_reused == k->quant->q4_0[k->prefetch][1],
                  "%s: the quantized matmuls are not its quant set's", k->name);
        int cases = 0, variants = 0;
        for (int q4 = 0; q4 < 2; q4++) {
            for (int p = 0; p < KZ_QPF_COUNT; p++) {
                for (int reused = 0; reused < 2; reused++) {
                    const kz_matmul_fn own = q4 ? k->matmul_q4_0 : k->matmul_q8_0;
                    const kz_matmul_fn f = (q4 ? k->quant->q4_0 : k->quant->q8_0)[p][reused];
                    if (f == own) {
                        continue; // the same function
                    }
                    variants++;
                    for (int rep = 0; rep < 12; rep++) {
                        const path_case c = path_case_of(q4, rep);
                        CHECK_MSG(paths_agree(own, f, &c),
                                  "%s %s rows %zu..%zu n_in %zu n_tok %zu: prefetch policy %d "
                                  "reused %d differs",
                                  k->name, q4 ? "q4_0" : "q8_0", c.o0, c.rows, c.n_in, c.n_tok, p,
                                  reused);
                        cases++;
                    }
                }
            }
        }
        if (variants) {
            printf("prefetch policies: %s, %d entry points, %d cases, all the same bits\n",
                   k->name, variants, cases);
        }
    }
}

/* The weights of c (its rows and blocks), quantized, at the end of a mapping followed by
 * an inaccessible page, so that a read past the last weight byte faults; *map and
 * *map_bytes for munmap. NULL when the mapping fails. */
static uint8_t *weights_at_guard(const path_case *c, float *wrow, void **map, size_t *map_bytes) {
    const size_t bytes = c->rows * (c->n_in / KZ_QK) *
                         (c->q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + page - 1) / page * page;
    *map_bytes = body + page;
    *map = mmap(NULL, *map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED || mprotect((char *)*map + body, page, PROT_NONE) != 0) {
        return NULL;
    }
    uint8_t *w = (uint8_t *)*map + body - bytes;
    fill_weights(w, wrow, c->rows, c->n_in, c->q4, c->raw);
    return w;
}

/* The AVX-512 kernels read a full q8_0 group on a 32-byte boundary (a GGUF tensor's rows of
 * whole groups) from aligned lines, the others with unaligned windows: each entry point
 * (matmul, reused, batched) gives the same bits for weights on 64- and 32-byte boundaries,
 * ending at an inaccessible page, as for the same weights at an odd address. */
static void test_aligned_weights(void) {
    static const struct { size_t rows, n_in, n_tok; } shapes[] = {
        {37, 1024, 1}, {37, 1024, 2}, {37, 1024, 3}, {20, 1024, 8}, {45, 1024, 22},
        {9, 512, 1}, {10, 512, 4}, {11, 3072, 5}, {6, 2048, 16}, {5, 8224, 2}, {13, 1056, 3}};
    int cases = 0;
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        for (int q4 = 0; q4 < 2; q4++) {
            const kz_matmul_fn fns[4] = {q4 ? k->matmul_q4_0 : k->matmul_q8_0,
                                         q4 ? k->matmul_q4_0_reused : k->matmul_q8_0_reused,
                                         q4 ? k->matvec_q4_0 : k->matvec_q8_0,
                                         q4 ? k->matvec_q4_0_reused : k->matvec_q8_0_reused};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                const path_case c = {.q4 = q4, .raw = (int)(s % 2), .rows = shapes[s].rows,
                                     .n_in = shapes[s].n_in, .n_tok = shapes[s].n_tok,
                                     .ldx = shapes[s].n_in + 1, .ldy = shapes[s].rows + 2};
                const size_t bytes = c.rows * (c.n_in / KZ_QK) *
                                     (q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES);
                const size_t ny = c.n_tok * c.ldy;
                float *wrow = malloc(c.n_in * sizeof(float));
                float *x = malloc(c.n_tok * c.ldx * sizeof(float));
                float *y[2] = {malloc(ny * sizeof(float)), malloc(ny * sizeof(float))};
                uint8_t *odd = malloc(bytes + 1);
                void *map = NULL;
                size_t map_bytes = 0;
                uint8_t *w = weights_at_guard(&c, wrow, &map, &map_bytes);
                CHECK_MSG(w != NULL, "mapping the weights with a guard page failed");
                if (w) {
                    memcpy(odd + 1, w, bytes);
                    fill_activations(x, c.ldx, c.n_in, c.n_tok);
                    for (int f = 0; f < 4; f++) {
                        if (!fns[f]) {
                            continue;
                        }
                        for (int v = 0; v < 2; v++) {
                            for (size_t i = 0; i < ny; i++) {
                                y[v][i] = -7.0f;
                            }
                            fns[f](y[v], c.ldy, x, c.ldx, v ? odd + 1 : w, c.n_in, c.n_tok, 0,
                                   c.rows);
                        }
                        CHECK_MSG(memcmp(y[0], y[1], ny * sizeof(float)) == 0,
                                  "%s %s entry %d rows %zu n_in %zu n_tok %zu: aligned weights "
                                  "(32-byte boundary: %d) give other bits than at an odd address",
                                  k->name, q4 ? "q4_0" : "q8_0", f, c.rows, c.n_in, c.n_tok,
                                  ((uintptr_t)w & 31) == 0);
                        cases++;
                    }
                }
                if (map && map != MAP_FAILED) {
                    munmap(map, map_bytes);
                }
                free(odd);
                free(wrow);
                free(x);
                free(y[0]);
                free(y[1]);
            }
        }
    }
    printf("aligned weights: %d cases, the bits of the odd address\n", cases);
}

int main(void) {
    test_fp16();
    test_layout_q8_0();
    test_layout_q4_0();
    test_zero_and_bad_sizes();
    test_round_trip();
    test_matmul();
    test_sublevel_paths();
    test_prefetch_policies();
    test_aligned_weights();
    return test_main_result("test_quant");
}
