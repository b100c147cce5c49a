/*
 * quant.h - block-quantized weight formats (q8_0, q4_0) for the language-model
 * projections: the byte layouts, fp16 scale conversion, row quantizers and
 * dequantizers, and the activation quantization the SIMD kernels use.
 *
 * Data flow:
 *   f32 weight row [n_in] --kz_quantize_row_*--> packed row [n_in / 32 blocks]
 *   packed rows [rows, n_in / 32 blocks] --kernels.h matmul_q8_0 / matmul_q4_0--> y
 *   packed row --kz_dequantize_row_*--> f32 row (tests, debugging)
 * A quantized matrix is its rows back to back, row o at byte o * kz_q*_row_bytes(n_in),
 * with no padding; blocks are byte-packed and may sit at any alignment.
 *
 * q8_0 (34 bytes per 32 weights, 8.5 bits per weight):
 *   bytes 0-1   d     scale, IEEE binary16 bits, little endian
 *   bytes 2-33  q[32] int8, element i of the block at byte 2 + i
 *   weight i = d * q[i]
 *   quantize: amax = max |x_i|; d = fp16(amax / 127); q_i = round(x_i / d) clamped
 *   to [-127, 127], round = half away from zero, division by the fp16-rounded d
 *   (so the error is measured against the scale actually stored); d = 0 gives
 *   an all-zero block.
 *
 * q4_0 (18 bytes per 32 weights, 4.5 bits per weight):
 *   bytes 0-1   d     scale, IEEE binary16 bits, little endian
 *   bytes 2-17  qs[16] nibbles: byte j holds element j in its low nibble and
 *                    element j + 16 in its high nibble
 *   weight i = d * (q_i - 8), q_i in 0..15
 *   quantize: m = the element of largest magnitude (the first one on ties);
 *   d = fp16(m / -8), so m maps to q = 0 exactly as ggml's q4_0; q_i =
 *   clamp(round(x_i / d) + 8, 0, 15); d = 0 gives q = 8 everywhere.
 *
 * The layouts and their meaning are ggml's block_q8_0 / block_q4_0, so files
 * quantized by either read the same. The quantizers differ in detail (ggml
 * multiplies by 1 / d with the unrounded d, and truncates x / d + 8.5 for
 * q4_0), so a code may differ from ggml's by one step near a rounding edge.
 *
 * Error of one quantized weight against its float, with d the unrounded scale
 * and dh the stored one (|d - dh| <= 2^-11 |d| for a normal fp16 scale, <=
 * 2^-25 when dh is subnormal, i.e. amax < 127 * 2^-14 for q8_0, 8 * 2^-14 for q4_0):
 *   q8_0: |x - w| <= dh / 2 + 127 |d - dh|          (about amax / 254)
 *   q4_0: |x - w| <= |dh| / 2 + 8 |d - dh| for x on m's side or |x| <= 7.5 |dh|,
 *         |x - w| <= |dh| + 8 |d - dh| for the rest (q clipped at 15: at most amax / 8)
 * Scales saturate at the largest half, 65504: |x| above 65504 * 127 (q8_0) or
 * 65504 * 8 (q4_0) is clipped. Inputs must be finite.
 *
 * Rows: n_in must be a multiple of 32 (KZ_QK). The row functions return -1
 * and write nothing otherwise; the matmul kernels require it (KZ_ASSERT in
 * debug builds), so code that binds a quantized tensor must check it.
 *
 * Plain C only: included by the ISA files, so it holds declarations and
 * static inline helpers, no intrinsics.
 */
#ifndef KZ_QUANT_H
#define KZ_QUANT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KZ_QK 32               /* weights per block, both formats */
#define KZ_Q8_0_BLOCK_BYTES 34 /* 2-byte fp16 scale + 32 int8 */
#define KZ_Q4_0_BLOCK_BYTES 18 /* 2-byte fp16 scale + 16 bytes of nibbles */

typedef struct kz_block_q8_0 {
    uint16_t d;      /* fp16 scale bits */
    int8_t q[KZ_QK]; /* weight i = d * q[i] */
} kz_block_q8_0;

typedef struct kz_block_q4_0 {
    uint16_t d;            /* fp16 scale bits */
    uint8_t qs[KZ_QK / 2]; /* byte j: element j (low nibble), element j + 16 (high nibble) */
} kz_block_q4_0;

_Static_assert(sizeof(kz_block_q8_0) == KZ_Q8_0_BLOCK_BYTES, "q8_0 block must be 34 bytes");
_Static_assert(sizeof(kz_block_q4_0) == KZ_Q4_0_BLOCK_BYTES, "q4_0 block must be 18 bytes");

/* Bytes of one quantized row of n_in weights (n_in a multiple of KZ_QK). */
static inline size_t kz_q8_0_row_bytes(size_t n_in) {
    return n_in / KZ_QK * KZ_Q8_0_BLOCK_BYTES;
}
static inline size_t kz_q4_0_row_bytes(size_t n_in) {
    return n_in / KZ_QK * KZ_Q4_0_BLOCK_BYTES;
}

/* Exact binary16 -> binary32 (subnormals, infinities, NaN payloads kept). Pure
 * integer work plus one exact int-to-float product for subnormals, so it does
 * not depend on the FTZ / DAZ modes an embedding audio application may set. */
static inline float kz_fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = h & 0x7c00u;
    const uint32_t mant = h & 0x03ffu;
    uint32_t bits;
    if (exp == 0x7c00u) {
        bits = sign | 0x7f800000u | (mant << 13); // inf, NaN
    } else if (exp != 0) {
        bits = sign | (((uint32_t)(h & 0x7fffu) << 13) + 0x38000000u); // rebias 15 -> 127
    } else {
        float f = (float)mant * 0x1p-24f; // subnormal or zero: mant * 2^-24, exact
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

/* binary32 -> binary16, round to nearest even; overflow gives infinity, NaN
 * stays NaN (quiet). Integer only. */
static inline uint16_t kz_f32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) { // >= 65520, the midpoint of 65504 and 2^16: ties go to even (inf)
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >=
        0x38800000u) { // normal half: round the low 13 mantissa bits, carry may bump the exponent
        const uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    const uint32_t e = ax >> 23;
    if (e < 102) { // below 2^-25: rounds to zero
        return (uint16_t)sign;
    }
    // Subnormal half: value * 2^24 = m * 2^(e - 126) with m the 24-bit significand.
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t s = 126 - e; // 14..24
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u);
    const uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) {
        q++; // may reach 0x400, the smallest normal: the encoding carries over correctly
    }
    return (uint16_t)(sign | q);
}

/* Reads a block's fp16 scale from any byte address. */
static inline float kz_quant_scale(const void *block) {
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return kz_fp16_to_f32(h);
}

/*
 * Activation quantization of the SIMD matmul kernels (not a storage format):
 * one block of 32 floats -> scale *d (float, not fp16) and int8 q[32] with
 *   amax = max |x_i|; *d = amax / 127 (float division);
 *   q_i = round(clamp(x_i / *d, -127, 127)), round = half away from zero;
 * *d = 0 (and q = 0) when amax / 127 is 0. *sum = sum of q_i (the q4_0
 * kernels use it for the -8 offset). The SIMD versions compute exactly these
 * bits (IEEE division, exact rounding); tests use this definition to predict
 * their result tightly. x must be finite.
 */
static inline void kz_quant_act_block(int8_t *q, float *d, int32_t *sum, const float *x) {
    float amax = 0.0f;
    for (int i = 0; i < KZ_QK; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    const float dd = amax / 127.0f;
    int32_t s = 0;
    for (int i = 0; i < KZ_QK; i++) {
        float r = dd != 0.0f ? x[i] / dd : 0.0f;
        r = fminf(fmaxf(r, -127.0f), 127.0f);
        q[i] = (int8_t)roundf(r);
        s += q[i];
    }
    *d = dd;
    *sum = s;
}

/* --- quant_ref.c --------------------------------------------------------- */

/* Quantizes x[n] into n / 32 blocks at dst (kz_q8_0_row_bytes(n) bytes, any
 * alignment). Returns 0, or -1 (dst untouched) if n is not a multiple of 32. */
int kz_quantize_row_q8_0(void *dst, const float *x, size_t n);
int kz_quantize_row_q4_0(void *dst, const float *x, size_t n);

/* q4_0 with a least-squares scale search per block (quant_ref.c): the same
 * format, never a larger squared error than kz_quantize_row_q4_0. Used by the
 * model quantizer; slower (about 20 candidate scales per block). */
int kz_quantize_row_q4_0_search(void *dst, const float *x, size_t n);

/* y[n] = the dequantized weights of the n / 32 blocks at src. Returns 0, or -1
 * (y untouched) if n is not a multiple of 32. */
int kz_dequantize_row_q8_0(float *y, const void *src, size_t n);
int kz_dequantize_row_q4_0(float *y, const void *src, size_t n);

#endif
