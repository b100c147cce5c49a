/*
 * simd_math.h - vectorised exp, sin^2 and erf for the x86 row kernels.
 *
 * Data flow: static inline functions only, one __m256 version (AVX2 + FMA)
 * and, when the including file is compiled with AVX-512, one __m512 version
 * of each. rows_avx2.c / rows_avx512.c call them from SnakeBeta, GELU and
 * SwiGLU; nothing else sees them, so no wide instruction reaches a baseline
 * caller.
 *
 * Methods (coefficients fitted with mpmath.chebyfit in 50-digit arithmetic,
 * then rounded to float; errors measured against libm in test_kernels.c):
 *   exp(x):   n = rint(x / ln2), r = x - n*ln2 (ln2 in two parts, FMA),
 *             e^r = 1 + r + r^2 P(r), P degree 4 on |r| <= ln2/2, scaled by
 *             2^n as two exact powers so that overflow gives +inf and deep
 *             underflow 0 like expf. About 1 ulp.
 *   sin^2(a): k = rint(a / pi), r = a - k*pi with pi in three parts
 *             (Cody-Waite; the first FMA is exact), sin(a)^2 = sin(r)^2 so
 *             the sign of (-1)^k never matters; sin r = r + r^3 h(r^2), h
 *             degree 4 fitted on |r| <= pi/2 + 0.006. Valid for |a| <=
 *             SIN2_MAX_ARG, where rint(a / pi) is off by at most 0.002: the
 *             callers send larger or non-finite lanes to libm sinf.
 *   erf(z):   |z| < 0.9: z * c0 + z^3 Q(z^2), Q degree 5; 0.9 <= |z|:
 *             1 - exp(-z^2) R(|z| - 2.41), R degree 11 fitted on [0.9, 3.92]
 *             (|z| clamped to 3.92, where erf rounds to 1). Within 1.5e-7
 *             absolute of erf.
 * NaN inputs give NaN in all three.
 */
#ifndef KZ_SIMD_MATH_H
#define KZ_SIMD_MATH_H

#include <immintrin.h>

/* Largest |a| the vector sin^2 reduces accurately (rint(a / pi) < 2^15). */
#define SIN2_MAX_ARG 65536.0f

#define SM_PI_A 3.14159274f     /* float(pi), a multiple of 2^-22 */
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

/* --- AVX2 + FMA ---------------------------------------------------------- */

static inline __m256 sm_exp8(__m256 x) {
    // max/min return their second operand when either is NaN: NaN passes through.
    x = _mm256_min_ps(_mm256_set1_ps(SM_EXP_HI), _mm256_max_ps(_mm256_set1_ps(SM_EXP_LO), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(SM_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SM_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SM_LN2_LO), r);
    __m256 p = _mm256_set1_ps(SM_EXP_P4);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_EXP_P0));
    const __m256 er = _mm256_add_ps(_mm256_set1_ps(1.0f),
                                    _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r));
    // 2^n as 2^n1 * 2^n2, each a normal number for n in [-150, 129].
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(er, s1), s2);
}

/* sin(a)^2 for |a| <= SIN2_MAX_ARG; other lanes are garbage (callers patch them). */
static inline __m256 sm_sin2_8(__m256 a) {
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(SM_INV_PI)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(SM_PI_A), a);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(SM_PI_B), r);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(SM_PI_C), r);
    const __m256 u = _mm256_mul_ps(r, r);
    __m256 h = _mm256_set1_ps(SM_SIN_H4);
    h = _mm256_fmadd_ps(h, u, _mm256_set1_ps(SM_SIN_H3));
    h = _mm256_fmadd_ps(h, u, _mm256_set1_ps(SM_SIN_H2));
    h = _mm256_fmadd_ps(h, u, _mm256_set1_ps(SM_SIN_H1));
    h = _mm256_fmadd_ps(h, u, _mm256_set1_ps(SM_SIN_H0));
    const __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(r, u), h, r);
    return _mm256_mul_ps(s, s);
}

/* Lanes sm_sin2_8 cannot take: |a| > SIN2_MAX_ARG, inf or NaN. A bit mask. */
static inline int sm_sin2_bad8(__m256 a) {
    const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
    return _mm256_movemask_ps(_mm256_cmp_ps(abs, _mm256_set1_ps(SIN2_MAX_ARG), _CMP_NLE_UQ));
}

static inline __m256 sm_erf8(__m256 z) {
    const __m256 sign = _mm256_and_ps(z, _mm256_set1_ps(-0.0f));
    const __m256 az = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    // Small |z|: odd polynomial, sign comes with z.
    const __m256 u = _mm256_mul_ps(z, z);
    __m256 q = _mm256_set1_ps(sm_erf_q[0]);
    for (int i = 1; i < 6; i++) {
        q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(sm_erf_q[i]));
    }
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(z, u), q,
                                         _mm256_mul_ps(z, _mm256_set1_ps(SM_ERF_C0)));
    // Large |z|: 1 - e^(-z^2) R(|z| - mid), |z| clamped where erf is 1 in float.
    const __m256 zc = _mm256_min_ps(_mm256_set1_ps(SM_ERF_CLAMP), az);
    const __m256 t = _mm256_sub_ps(zc, _mm256_set1_ps(SM_ERF_MID));
    __m256 rr = _mm256_set1_ps(sm_erf_r[0]);
    for (int i = 1; i < 12; i++) {
        rr = _mm256_fmadd_ps(rr, t, _mm256_set1_ps(sm_erf_r[i]));
    }
    const __m256 e = sm_exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(zc, zc)));
    const __m256 large = _mm256_or_ps(_mm256_fnmadd_ps(e, rr, _mm256_set1_ps(1.0f)), sign);
    const __m256 is_small = _mm256_cmp_ps(az, _mm256_set1_ps(SM_ERF_SPLIT), _CMP_LT_OQ);
    return _mm256_blendv_ps(large, small, is_small);
}

/* --- AVX-512 F ----------------------------------------------------------- */
#ifdef __AVX512F__

static inline __m512 sm_exp16(__m512 x) {
    // vminps/vmaxps return the second source when either is NaN, as with AVX.
    x = _mm512_min_ps(_mm512_set1_ps(SM_EXP_HI), _mm512_max_ps(_mm512_set1_ps(SM_EXP_LO), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SM_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SM_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SM_LN2_LO), r);
    __m512 p = _mm512_set1_ps(SM_EXP_P4);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_EXP_P0));
    const __m512 er = _mm512_add_ps(_mm512_set1_ps(1.0f),
                                    _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r));
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1);
    const __m512i n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(er, s1), s2);
}

static inline __m512 sm_sin2_16(__m512 a) {
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(SM_INV_PI)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(SM_PI_A), a);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(SM_PI_B), r);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(SM_PI_C), r);
    const __m512 u = _mm512_mul_ps(r, r);
    __m512 h = _mm512_set1_ps(SM_SIN_H4);
    h = _mm512_fmadd_ps(h, u, _mm512_set1_ps(SM_SIN_H3));
    h = _mm512_fmadd_ps(h, u, _mm512_set1_ps(SM_SIN_H2));
    h = _mm512_fmadd_ps(h, u, _mm512_set1_ps(SM_SIN_H1));
    h = _mm512_fmadd_ps(h, u, _mm512_set1_ps(SM_SIN_H0));
    const __m512 s = _mm512_fmadd_ps(_mm512_mul_ps(r, u), h, r);
    return _mm512_mul_ps(s, s);
}

static inline __mmask16 sm_sin2_bad16(__m512 a) {
    return _mm512_cmp_ps_mask(_mm512_abs_ps(a), _mm512_set1_ps(SIN2_MAX_ARG), _CMP_NLE_UQ);
}

static inline __m512 sm_erf16(__m512 z) {
    const __m512i sign_bit = _mm512_set1_epi32((int)0x80000000u);
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(z), sign_bit);
    const __m512 az = _mm512_abs_ps(z);
    const __m512 u = _mm512_mul_ps(z, z);
    __m512 q = _mm512_set1_ps(sm_erf_q[0]);
    for (int i = 1; i < 6; i++) {
        q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(sm_erf_q[i]));
    }
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(z, u), q,
                                         _mm512_mul_ps(z, _mm512_set1_ps(SM_ERF_C0)));
    const __m512 zc = _mm512_min_ps(_mm512_set1_ps(SM_ERF_CLAMP), az);
    const __m512 t = _mm512_sub_ps(zc, _mm512_set1_ps(SM_ERF_MID));
    __m512 rr = _mm512_set1_ps(sm_erf_r[0]);
    for (int i = 1; i < 12; i++) {
        rr = _mm512_fmadd_ps(rr, t, _mm512_set1_ps(sm_erf_r[i]));
    }
    const __m512 e = sm_exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(zc, zc)));
    const __m512 one_minus = _mm512_fnmadd_ps(e, rr, _mm512_set1_ps(1.0f));
    const __m512 large = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(one_minus), sign));
    const __mmask16 is_small = _mm512_cmp_ps_mask(az, _mm512_set1_ps(SM_ERF_SPLIT), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(is_small, large, small);
}

#endif /* __AVX512F__ */
#endif
