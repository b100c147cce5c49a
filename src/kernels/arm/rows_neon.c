/*
 * rows_neon.c - NEON (aarch64 Advanced SIMD) row and elementwise kernels, and
 * the NEON table.
 *
 * Data flow: the NEON versions of ref/rows_ref.c, 4-lane ports of
 * x86/rows_avx2.c. Each walks its rows 4 channels at a time from the row
 * start with unaligned loads; the last n % 4 channels go through a
 * zero-padded 4-lane buffer and the same instruction sequence as the body, so
 * results do not depend on alignment or on where a row sits in a call.
 * Reductions (dot_rows, the norms) sum in a fixed lane layout per n; they differ
 * from the sequential scalar sums by rounding only. axpy_rows matches the scalar
 * definition bit for bit (mul then add, no FMA); snake_beta, gelu and swiglu
 * use the vector sin^2 / erf / exp of simd_math_neon.h. The table at the end
 * adds kz_gemm_neon, the matmuls of matmul_neon.c and quant_neon.c, and
 * gemm_rows_neon.c.
 */
#include "kernels/kernels.h"
#include "kernels/arm/simd_math_neon.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* Up to 3 trailing floats into a zeroed vector, and back. */
static inline float32x4_t load_tail(const float *p, size_t n) {
    float buf[4] = {0};
    memcpy(buf, p, n * sizeof(float));
    return vld1q_f32(buf);
}

/* Up to 3 trailing binary16 values widened into a zeroed vector. */
static inline float32x4_t load_tail_f16(const uint16_t *p, size_t n) {
    uint16_t buf[4] = {0};
    memcpy(buf, p, n * sizeof(uint16_t));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(buf)));
}

static inline void store_tail(float *p, float32x4_t v, size_t n) {
    float buf[4];
    vst1q_f32(buf, v);
    memcpy(p, buf, n * sizeof(float));
}

/* All-ones in the first n lanes (n <= 4). */
static inline uint32x4_t lane_mask(size_t n) {
    const uint32_t idx[4] = {0, 1, 2, 3};
    return vcgtq_u32(vdupq_n_u32((uint32_t)n), vld1q_u32(idx));
}

/* Sum of the 4 lanes in a fixed order: (l0 + l1) + (l2 + l3). */
static inline float hsum(float32x4_t v) {
    return vaddvq_f32(v);
}

/* y = x + inv_beta * sin(alpha * x)^2 for 4 lanes; lanes with a huge or
 * non-finite argument fall back to libm. */
static inline float32x4_t snake4(float32x4_t v, float32x4_t alpha, float32x4_t inv_beta) {
    const float32x4_t arg = vmulq_f32(alpha, v);
    float32x4_t s2 = sm_sin2_4(arg);
    const uint32x4_t bad = sm_sin2_bad4(arg);
    if (vmaxvq_u32(bad)) {
        float a[4];
        float s[4];
        uint32_t m[4];
        vst1q_f32(a, arg);
        vst1q_f32(s, s2);
        vst1q_u32(m, bad);
        for (int l = 0; l < 4; l++) {
            if (m[l]) {
                const float sl = sinf(a[l]);
                s[l] = sl * sl;
            }
        }
        s2 = vld1q_f32(s);
    }
    return vaddq_f32(v, vmulq_f32(inv_beta, s2));
}

static void snake_beta_neon(float *y, const float *x, size_t n_rows, size_t n_ch,
                            const float *alpha, const float *inv_beta) {
    const size_t body = n_ch / 4 * 4;
    const size_t rest = n_ch - body;
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        for (size_t c = 0; c < body; c += 4) {
            const float32x4_t r =
                snake4(vld1q_f32(xr + c), vld1q_f32(alpha + c), vld1q_f32(inv_beta + c));
            vst1q_f32(yr + c, r);
        }
        if (rest) {
            const float32x4_t r = snake4(load_tail(xr + body, rest),
                                         load_tail(alpha + body, rest),
                                         load_tail(inv_beta + body, rest));
            store_tail(yr + body, r, rest);
        }
    }
}

/* Four accumulators over 16 channels, then one over 4, then the padded tail. */
static float sum_squares(const float *x, size_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f);
    float32x4_t a1 = a0;
    float32x4_t a2 = a0;
    float32x4_t a3 = a0;
    size_t c = 0;
    for (; c + 16 <= n; c += 16) {
        const float32x4_t v0 = vld1q_f32(x + c);
        const float32x4_t v1 = vld1q_f32(x + c + 4);
        const float32x4_t v2 = vld1q_f32(x + c + 8);
        const float32x4_t v3 = vld1q_f32(x + c + 12);
        a0 = vfmaq_f32(a0, v0, v0);
        a1 = vfmaq_f32(a1, v1, v1);
        a2 = vfmaq_f32(a2, v2, v2);
        a3 = vfmaq_f32(a3, v3, v3);
    }
    for (; c + 4 <= n; c += 4) {
        const float32x4_t v = vld1q_f32(x + c);
        a0 = vfmaq_f32(a0, v, v);
    }
    if (c < n) {
        const float32x4_t v = load_tail(x + c, n - c);
        a1 = vfmaq_f32(a1, v, v);
    }
    return hsum(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
}

static void rms_norm_neon(float *y, const float *x, const float *w, size_t n_rows, size_t n_ch,
                          float eps) {
    const size_t body = n_ch / 4 * 4;
    const size_t rest = n_ch - body;
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        const float ss = sum_squares(xr, n_ch);
        const float32x4_t scale = vdupq_n_f32(1.0f / sqrtf(ss / (float)n_ch + eps));
        for (size_t c = 0; c < body; c += 4) {
            const float32x4_t v = vmulq_f32(vld1q_f32(xr + c), scale);
            vst1q_f32(yr + c, vmulq_f32(v, vld1q_f32(w + c)));
        }
        if (rest) {
            const float32x4_t v = vmulq_f32(load_tail(xr + body, rest), scale);
            store_tail(yr + body, vmulq_f32(v, load_tail(w + body, rest)), rest);
        }
    }
}

/* Sum of a row: two accumulators over 8 channels, then one over 4, then the padded tail. */
static float row_sum(const float *x, size_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f);
    float32x4_t a1 = a0;
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        a0 = vaddq_f32(a0, vld1q_f32(x + c));
        a1 = vaddq_f32(a1, vld1q_f32(x + c + 4));
    }
    if (c + 4 <= n) {
        a0 = vaddq_f32(a0, vld1q_f32(x + c));
        c += 4;
    }
    if (c < n) {
        a1 = vaddq_f32(a1, load_tail(x + c, n - c));
    }
    return hsum(vaddq_f32(a0, a1));
}

static void layer_norm_neon(float *y, const float *x, const float *w, const float *b,
                            size_t n_rows, size_t n_ch, float eps) {
    const size_t body = n_ch / 4 * 4;
    const size_t rest = n_ch - body;
    const uint32x4_t tail_mask = lane_mask(rest);
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        const float mu_s = row_sum(xr, n_ch) / (float)n_ch;
        const float32x4_t mu = vdupq_n_f32(mu_s);
        float32x4_t a0 = vdupq_n_f32(0.0f);
        float32x4_t a1 = a0;
        size_t c = 0;
        for (; c + 8 <= n_ch; c += 8) {
            const float32x4_t d0 = vsubq_f32(vld1q_f32(xr + c), mu);
            const float32x4_t d1 = vsubq_f32(vld1q_f32(xr + c + 4), mu);
            a0 = vfmaq_f32(a0, d0, d0);
            a1 = vfmaq_f32(a1, d1, d1);
        }
        if (c + 4 <= n_ch) {
            const float32x4_t d = vsubq_f32(vld1q_f32(xr + c), mu);
            a0 = vfmaq_f32(a0, d, d);
        }
        if (rest) {
            // Padded lanes would contribute (0 - mu)^2: mask them out.
            const float32x4_t v = load_tail(xr + body, rest);
            const float32x4_t d = vreinterpretq_f32_u32(
                vandq_u32(vreinterpretq_u32_f32(vsubq_f32(v, mu)), tail_mask));
            a1 = vfmaq_f32(a1, d, d);
        }
        const float var = hsum(vaddq_f32(a0, a1));
        const float32x4_t rstd = vdupq_n_f32(1.0f / sqrtf(var / (float)n_ch + eps));
        for (size_t k = 0; k < body; k += 4) {
            const float32x4_t d = vmulq_f32(vsubq_f32(vld1q_f32(xr + k), mu), rstd);
            const float32x4_t r = vaddq_f32(vmulq_f32(d, vld1q_f32(w + k)), vld1q_f32(b + k));
            vst1q_f32(yr + k, r);
        }
        if (rest) {
            const float32x4_t d = vmulq_f32(vsubq_f32(load_tail(xr + body, rest), mu), rstd);
            const float32x4_t r = vaddq_f32(vmulq_f32(d, load_tail(w + body, rest)),
                                            load_tail(b + body, rest));
            store_tail(yr + body, r, rest);
        }
    }
}

static inline float32x4_t gelu4(float32x4_t v) {
    const float32x4_t e = sm_erf4(vmulq_f32(v, vdupq_n_f32(0.70710678118654752f)));
    return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), v), vaddq_f32(vdupq_n_f32(1.0f), e));
}

static void gelu_neon(float *y, const float *x, size_t n) {
    const size_t body = n / 4 * 4;
    for (size_t i = 0; i < body; i += 4) {
        vst1q_f32(y + i, gelu4(vld1q_f32(x + i)));
    }
    if (n > body) {
        store_tail(y + body, gelu4(load_tail(x + body, n - body)), n - body);
    }
}

/* vminq_f32 returns NaN when an operand is NaN, so NaN stays NaN. */
static inline float32x4_t elu4(float32x4_t v) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    const float32x4_t e = vsubq_f32(sm_exp4(vminq_f32(v, zero)), vdupq_n_f32(1.0f));
    return vbslq_f32(vcgtq_f32(v, zero), v, e);
}

static void elu_neon(float *y, const float *x, size_t n) {
    const size_t body = n / 4 * 4;
    for (size_t i = 0; i < body; i += 4) {
        vst1q_f32(y + i, elu4(vld1q_f32(x + i)));
    }
    if (n > body) {
        store_tail(y + body, elu4(load_tail(x + body, n - body)), n - body);
    }
}

static inline float32x4_t swiglu4(float32x4_t g, float32x4_t up) {
    const float32x4_t e = sm_exp4(vnegq_f32(g));
    const float32x4_t silu = vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e));
    return vmulq_f32(silu, up);
}

static void swiglu_neon(float *y, const float *gate, const float *up, size_t n) {
    const size_t body = n / 4 * 4;
    for (size_t i = 0; i < body; i += 4) {
        vst1q_f32(y + i, swiglu4(vld1q_f32(gate + i), vld1q_f32(up + i)));
    }
    if (n > body) {
        const size_t rest = n - body;
        store_tail(y + body, swiglu4(load_tail(gate + body, rest), load_tail(up + body, rest)),
                   rest);
    }
}

/* kernels.h dot_rows and axpy_rows and their binary16-row twins (kernels/attend_shapes.h) on
 * 4-float vectors. */
#define ATT_VEC float32x4_t
#define ATT_LANES 4
#define ATT_ROWS 4 /* 16 accumulators of the 32 q registers */
#define ATT_ACC 16
#define ATT_ZERO() vdupq_n_f32(0.0f)
#define ATT_LOAD(p) vld1q_f32(p)
#define ATT_LOAD_TAIL(p, n) load_tail((p), (n))
#define ATT_STORE(p, v) vst1q_f32((p), (v))
#define ATT_STORE_TAIL(p, v, n) store_tail((p), (v), (n))
#define ATT_FMA(a, b, acc) vfmaq_f32((acc), (a), (b))
#define ATT_ADD(a, b) vaddq_f32((a), (b))
#define ATT_MUL(a, b) vmulq_f32((a), (b))
#define ATT_SET1(f) vdupq_n_f32(f)
#define ATT_HSUM(v) hsum(v)
#define ATT_ROW float
#define ATT_LOAD_ROW(p) ATT_LOAD(p)
#define ATT_LOAD_ROW_TAIL(p, n) ATT_LOAD_TAIL((p), (n))
#define ATT_SUFFIX
#include "kernels/attend_shapes.h"
#define ATT_ROW uint16_t
#define ATT_LOAD_ROW(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))
#define ATT_LOAD_ROW_TAIL(p, n) load_tail_f16((p), (n))
#define ATT_SUFFIX _f16
#include "kernels/attend_shapes.h"

/* kernels.h mix_rows (kernels/mix_shapes.h) on 4-float vectors (untuned on ARM). */
#define MIX_COLS 4
#define MIX_ACC 24 /* 32 q registers */
#define MIX_VEC float32x4_t
#define MIX_LOAD(p) vld1q_f32(p)
#define MIX_ZERO() vdupq_n_f32(0.0f)
#define MIX_FMA(acc, v, m) vfmaq_f32((acc), (v), vdupq_n_f32(m))
#define MIX_STORE(p, v) vst1q_f32((p), (v))
#include "kernels/mix_shapes.h"

const kz_kernels kz_kernels_neon = {
    .isa = KZ_ISA_NEON,
    .name = "neon",
    .gemm = kz_gemm_neon,
    .gemm_mr = 6,
    .gemm_bf16 = kz_gemm_bf16_neon,
    .round_bf16 = kz_round_bf16_ref,
    .round_bf16_f32 = kz_round_bf16_f32_neon,
    .gemm_bf16_name = "neon",
    .bf16_gain = KZ_BF16_NO_GAIN, // no ARM timing shows the bf16 GEMM ahead
    .snake_beta = snake_beta_neon,
    .rms_norm = rms_norm_neon,
    .layer_norm = layer_norm_neon,
    .gelu = gelu_neon,
    .elu = elu_neon,
    .swiglu = swiglu_neon,
    .dot_rows = attend_dot_rows,
    .axpy_rows = attend_axpy_rows,
    .dot_rows_f16 = attend_dot_rows_f16,
    .axpy_rows_f16 = attend_axpy_rows_f16,
    .mix_rows = mix_rows_shapes,
    .matmul_bf16 = kz_matmul_bf16_neon,
    .matmul_f16 = kz_matmul_f16_neon,
    .matmul_f32 = kz_matmul_f32_neon,
    .matvec_bf16 = kz_matvec_bf16_neon,
    .matvec_f16 = kz_matvec_f16_neon,
    .matvec_f32 = kz_matvec_f32_neon,
    .matmul_q8_0 = kz_matmul_q8_0_neon,
    .matmul_q4_0 = kz_matmul_q4_0_neon,
    .matmul_q8_0_reused = kz_matmul_q8_0_neon,
    .matmul_q4_0_reused = kz_matmul_q4_0_neon,
    .prefetch = KZ_QPF_L1,
    .quant = &kz_quant_neon,
    .gemm_rows = kz_gemm_rows_neon,
    .rows_to_f32_bf16 = kz_rows_to_f32_bf16_neon,
    .rows_to_f32_f16 = kz_rows_to_f32_f16_neon,
    .rows_to_f32_q8_0 = kz_rows_to_f32_q8_0_neon,
    .rows_to_f32_q4_0 = kz_rows_to_f32_q4_0_neon,
    .prefill_gemm_quant = true,
};
