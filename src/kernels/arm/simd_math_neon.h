/*
 * simd_math_neon.h - vectorised exp, sin^2 and erf for the NEON row kernels.
 *
 * Data flow: static inline functions on float32x4_t only; rows_neon.c calls
 * them from SnakeBeta, GELU and SwiGLU. They are the 4-lane ports of
 * x86/simd_math.h, with the same methods, the same coefficients (fitted with
 * mpmath.chebyfit, described there) and the same FMA steps, so NEON and AVX2
 * results agree lane for lane up to the libm fallback:
 *   exp(x):   n = rint(x / ln2), r = x - n*ln2 in two FMA steps,
 *             e^r = 1 + r + r^2 P(r), times 2^n as two exact powers.
 *   sin^2(a): k = rint(a / pi), r = a - k*pi in three FMA steps (Cody-Waite),
 *             sin r = r + r^3 h(r^2); valid for |a| <= SIN2_MAX_ARG, the
 *             caller sends other lanes to libm sinf.
 *   erf(z):   odd polynomial below 0.9, 1 - exp(-z^2) R(|z| - 2.41) above.
 * Trap when porting from x86: FMIN / FMAX return NaN when either input is NaN
 * (x86 returns the second operand), which is what exp wants anyway; FCVTZS of
 * NaN gives 0 where x86 gives INT_MIN, harmless because the NaN lane stays NaN
 * through the multiply. vrndnq_f32 (FRINTN) rounds to nearest even like
 * _MM_FROUND_TO_NEAREST_INT.
 */
#ifndef KZ_SIMD_MATH_NEON_H
#define KZ_SIMD_MATH_NEON_H

#include <arm_neon.h>

/* Largest |a| the vector sin^2 reduces accurately (rint(a / pi) < 2^15). */
#define SIN2_MAX_ARG 65536.0f

#define SM_PI_A 3.14159274f      /* float(pi), a multiple of 2^-22 */
#define SM_PI_B -8.74227766e-08f /* float(pi - PI_A) */
#define SM_PI_C -3.43024902e-15f /* float(pi - PI_A - PI_B) */
#define SM_INV_PI 0.318309873f
#define SM_LN2_HI 0.693147182f
#define SM_LN2_LO -1.90465421e-09f
#define SM_LOG2E 1.44269502f
#define SM_EXP_LO -104.0f /* e^-104 rounds to 0 */
#define SM_EXP_HI 89.0f   /* e^89 overflows to inf */
#define SM_ERF_C0 1.12837923f /* 2 / sqrt(pi) */
#define SM_ERF_SPLIT 0.9f
#define SM_ERF_MID 2.41000009f
#define SM_ERF_CLAMP 3.92f

/* h(u) = (sin(sqrt u) / sqrt u - 1) / u, highest degree first. */
#define SM_SIN_H4 -2.4072893e-08f
#define SM_SIN_H3 2.75361481e-06f
#define SM_SIN_H2 -0.000198410824f
#define SM_SIN_H1 0.00833333284f
#define SM_SIN_H0 -0.166666672f

/* P(r) = (e^r - 1 - r) / r^2. */
#define SM_EXP_P4 0.00139262842f
#define SM_EXP_P3 0.00836325902f
#define SM_EXP_P2 0.0416665524f
#define SM_EXP_P1 0.166665763f
#define SM_EXP_P0 0.5f

/* Q(u) = (erf(z) / z - c0) / u, u = z^2, on [0, 0.81]. */
static const float sm_erf_q[6] = {8.96869387e-05f, -0.000828207936f, 0.00521308137f,
                                  -0.02686413f,    0.112837777f,     -0.376126379f};
/* R(t) = erfc(z) e^(z^2), t = z - SM_ERF_MID, on z in [0.9, 3.92]. */
static const float sm_erf_r[12] = {-5.49539948e-07f, 2.19160188e-06f, -4.79031405e-06f,
                                   1.7593251e-05f,   -7.23456178e-05f, 0.000254716084f,
                                   -0.000857887324f, 0.00282289111f,   -0.00895241089f,
                                   0.0272241738f,    -0.0790380612f,   0.217705607f};

/* p * r + c with one rounding, the order of _mm256_fmadd_ps(p, r, c). */
static inline float32x4_t sm_fma4(float32x4_t p, float32x4_t r, float c) {
    return vfmaq_f32(vdupq_n_f32(c), p, r);
}

static inline float32x4_t sm_exp4(float32x4_t x) {
    x = vminq_f32(vdupq_n_f32(SM_EXP_HI), vmaxq_f32(vdupq_n_f32(SM_EXP_LO), x));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(SM_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(SM_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(SM_LN2_LO));
    float32x4_t p = vdupq_n_f32(SM_EXP_P4);
    p = sm_fma4(p, r, SM_EXP_P3);
    p = sm_fma4(p, r, SM_EXP_P2);
    p = sm_fma4(p, r, SM_EXP_P1);
    p = sm_fma4(p, r, SM_EXP_P0);
    const float32x4_t er = vaddq_f32(vdupq_n_f32(1.0f), vfmaq_f32(r, vmulq_f32(r, r), p));
    // 2^n as 2^n1 * 2^n2, each a normal number for n in [-150, 129].
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(er, s1), s2);
}

/* sin(a)^2 for |a| <= SIN2_MAX_ARG; other lanes are garbage (callers patch them). */
static inline float32x4_t sm_sin2_4(float32x4_t a) {
    const float32x4_t k = vrndnq_f32(vmulq_f32(a, vdupq_n_f32(SM_INV_PI)));
    float32x4_t r = vfmsq_f32(a, k, vdupq_n_f32(SM_PI_A));
    r = vfmsq_f32(r, k, vdupq_n_f32(SM_PI_B));
    r = vfmsq_f32(r, k, vdupq_n_f32(SM_PI_C));
    const float32x4_t u = vmulq_f32(r, r);
    float32x4_t h = vdupq_n_f32(SM_SIN_H4);
    h = sm_fma4(h, u, SM_SIN_H3);
    h = sm_fma4(h, u, SM_SIN_H2);
    h = sm_fma4(h, u, SM_SIN_H1);
    h = sm_fma4(h, u, SM_SIN_H0);
    const float32x4_t s = vfmaq_f32(r, vmulq_f32(r, u), h);
    return vmulq_f32(s, s);
}

/* Lanes sm_sin2_4 cannot take: |a| > SIN2_MAX_ARG, inf or NaN (all-ones lanes). */
static inline uint32x4_t sm_sin2_bad4(float32x4_t a) {
    return vmvnq_u32(vcleq_f32(vabsq_f32(a), vdupq_n_f32(SIN2_MAX_ARG)));
}

static inline float32x4_t sm_erf4(float32x4_t z) {
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(z), vdupq_n_u32(0x80000000u));
    const float32x4_t az = vabsq_f32(z);
    // Small |z|: odd polynomial, sign comes with z.
    const float32x4_t u = vmulq_f32(z, z);
    float32x4_t q = vdupq_n_f32(sm_erf_q[0]);
    for (int i = 1; i < 6; i++) {
        q = sm_fma4(q, u, sm_erf_q[i]);
    }
    const float32x4_t small =
        vfmaq_f32(vmulq_f32(z, vdupq_n_f32(SM_ERF_C0)), vmulq_f32(z, u), q);
    // Large |z|: 1 - e^(-z^2) R(|z| - mid), |z| clamped where erf is 1 in float.
    const float32x4_t zc = vminq_f32(vdupq_n_f32(SM_ERF_CLAMP), az);
    const float32x4_t t = vsubq_f32(zc, vdupq_n_f32(SM_ERF_MID));
    float32x4_t rr = vdupq_n_f32(sm_erf_r[0]);
    for (int i = 1; i < 12; i++) {
        rr = sm_fma4(rr, t, sm_erf_r[i]);
    }
    const float32x4_t e = sm_exp4(vsubq_f32(vdupq_n_f32(0.0f), vmulq_f32(zc, zc)));
    const float32x4_t one_minus = vfmsq_f32(vdupq_n_f32(1.0f), e, rr);
    const float32x4_t large =
        vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(one_minus), sign));
    // NaN compares false: a NaN lane takes `large`, which is NaN through zc.
    return vbslq_f32(vcltq_f32(az, vdupq_n_f32(SM_ERF_SPLIT)), small, large);
}

#endif
