/*
 * rows_avx2.c - AVX2 + FMA row and elementwise kernels, and the AVX2 table.
 *
 * Data flow: the AVX2 versions of ref/rows_ref.c. Each walks its rows 8
 * channels at a time from the row start with unaligned loads; the last
 * n % 8 channels go through a zero-padded 8-lane buffer and the same
 * instruction sequence as the body, so results do not depend on alignment or
 * on where a row sits in a call. Reductions (dot_rows, the norms) sum in a fixed
 * lane layout per n; they differ from the sequential scalar sums by rounding
 * only. axpy_rows matches the scalar definition bit for bit (mul then add, no FMA);
 * snake_beta, gelu and swiglu use the vector sin^2 / erf / exp of
 * simd_math.h. The table at the end adds kz_gemm_avx2, the matmuls of
 * matmul_avx2.c and quant_avx2.c, and gemm_rows_avx2.c.
 */
#include "kernels/kernels.h"
#include "kernels/x86/simd_math.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* Up to 7 trailing floats into a zeroed vector, and back. */
static inline __m256 load_tail(const float *p, size_t n) {
    _Alignas(32) float buf[8] = {0};
    memcpy(buf, p, n * sizeof(float));
    return _mm256_load_ps(buf);
}

/* Up to 7 trailing binary16 values widened into a zeroed vector. */
static inline __m256 load_tail_f16(const uint16_t *p, size_t n) {
    _Alignas(16) uint16_t buf[8] = {0};
    memcpy(buf, p, n * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)buf));
}

static inline void store_tail(float *p, __m256 v, size_t n) {
    _Alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    memcpy(p, buf, n * sizeof(float));
}

/* All-ones in the first n lanes (n <= 8). */
static inline __m256 lane_mask(size_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx));
}

/* Sum of the 8 lanes in a fixed order. */
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* y = x + inv_beta * sin(alpha * x)^2 for 8 lanes; lanes with a huge or
 * non-finite argument fall back to libm. */
static inline __m256 snake8(__m256 v, __m256 alpha, __m256 inv_beta) {
    const __m256 arg = _mm256_mul_ps(alpha, v);
    __m256 s2 = sm_sin2_8(arg);
    const int bad = sm_sin2_bad8(arg);
    if (bad) {
        _Alignas(32) float a[8];
        _Alignas(32) float s[8];
        _mm256_store_ps(a, arg);
        _mm256_store_ps(s, s2);
        for (int l = 0; l < 8; l++) {
            if (bad >> l & 1) {
                const float sl = sinf(a[l]);
                s[l] = sl * sl;
            }
        }
        s2 = _mm256_load_ps(s);
    }
    return _mm256_add_ps(v, _mm256_mul_ps(inv_beta, s2));
}

static void snake_beta_avx2(float *y, const float *x, size_t n_rows, size_t n_ch,
                            const float *alpha, const float *inv_beta) {
    const size_t body = n_ch / 8 * 8;
    const size_t rest = n_ch - body;
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        for (size_t c = 0; c < body; c += 8) {
            const __m256 r = snake8(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(alpha + c),
                                    _mm256_loadu_ps(inv_beta + c));
            _mm256_storeu_ps(yr + c, r);
        }
        if (rest) {
            const __m256 r = snake8(load_tail(xr + body, rest), load_tail(alpha + body, rest),
                                    load_tail(inv_beta + body, rest));
            store_tail(yr + body, r, rest);
        }
    }
}

/* Two accumulators over 16 channels, then one over 8, then the padded tail. */
static float sum_squares(const float *x, size_t n) {
    __m256 a0 = _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps();
    size_t c = 0;
    for (; c + 16 <= n; c += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + c);
        const __m256 v1 = _mm256_loadu_ps(x + c + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    if (c + 8 <= n) {
        const __m256 v = _mm256_loadu_ps(x + c);
        a0 = _mm256_fmadd_ps(v, v, a0);
        c += 8;
    }
    if (c < n) {
        const __m256 v = load_tail(x + c, n - c);
        a1 = _mm256_fmadd_ps(v, v, a1);
    }
    return hsum(_mm256_add_ps(a0, a1));
}

static void rms_norm_avx2(float *y, const float *x, const float *w, size_t n_rows, size_t n_ch,
                          float eps) {
    const size_t body = n_ch / 8 * 8;
    const size_t rest = n_ch - body;
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        const float ss = sum_squares(xr, n_ch);
        const __m256 scale = _mm256_set1_ps(1.0f / sqrtf(ss / (float)n_ch + eps));
        for (size_t c = 0; c < body; c += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + c), scale);
            _mm256_storeu_ps(yr + c, _mm256_mul_ps(v, _mm256_loadu_ps(w + c)));
        }
        if (rest) {
            const __m256 v = _mm256_mul_ps(load_tail(xr + body, rest), scale);
            store_tail(yr + body, _mm256_mul_ps(v, load_tail(w + body, rest)), rest);
        }
    }
}

static void layer_norm_avx2(float *y, const float *x, const float *w, const float *b,
                            size_t n_rows, size_t n_ch, float eps) {
    const size_t body = n_ch / 8 * 8;
    const size_t rest = n_ch - body;
    const __m256 tail_mask = lane_mask(rest);
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        __m256 acc = _mm256_setzero_ps();
        for (size_t c = 0; c < body; c += 8) {
            acc = _mm256_add_ps(acc, _mm256_loadu_ps(xr + c));
        }
        if (rest) {
            acc = _mm256_add_ps(acc, load_tail(xr + body, rest));
        }
        const float mu_s = hsum(acc) / (float)n_ch;
        const __m256 mu = _mm256_set1_ps(mu_s);
        acc = _mm256_setzero_ps();
        for (size_t c = 0; c < body; c += 8) {
            const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + c), mu);
            acc = _mm256_fmadd_ps(d, d, acc);
        }
        if (rest) {
            // Padded lanes would contribute (0 - mu)^2: mask them out.
            const __m256 v = load_tail(xr + body, rest);
            const __m256 d = _mm256_and_ps(_mm256_sub_ps(v, mu), tail_mask);
            acc = _mm256_fmadd_ps(d, d, acc);
        }
        const __m256 rstd = _mm256_set1_ps(1.0f / sqrtf(hsum(acc) / (float)n_ch + eps));
        for (size_t c = 0; c < body; c += 8) {
            const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + c), mu), rstd);
            const __m256 r = _mm256_add_ps(_mm256_mul_ps(d, _mm256_loadu_ps(w + c)),
                                           _mm256_loadu_ps(b + c));
            _mm256_storeu_ps(yr + c, r);
        }
        if (rest) {
            const __m256 d = _mm256_mul_ps(_mm256_sub_ps(load_tail(xr + body, rest), mu), rstd);
            const __m256 r = _mm256_add_ps(_mm256_mul_ps(d, load_tail(w + body, rest)),
                                           load_tail(b + body, rest));
            store_tail(yr + body, r, rest);
        }
    }
}

static inline __m256 gelu8(__m256 v) {
    const __m256 e = sm_erf8(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static void gelu_avx2(float *y, const float *x, size_t n) {
    const size_t body = n / 8 * 8;
    for (size_t i = 0; i < body; i += 8) {
        _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    }
    if (n > body) {
        store_tail(y + body, gelu8(load_tail(x + body, n - body)), n - body);
    }
}

/* min(0, v) keeps a NaN v (the second operand wins), so NaN stays NaN. */
static inline __m256 elu8(__m256 v) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 e = _mm256_sub_ps(sm_exp8(_mm256_min_ps(zero, v)), _mm256_set1_ps(1.0f));
    return _mm256_blendv_ps(e, v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
}

static void elu_avx2(float *y, const float *x, size_t n) {
    const size_t body = n / 8 * 8;
    for (size_t i = 0; i < body; i += 8) {
        _mm256_storeu_ps(y + i, elu8(_mm256_loadu_ps(x + i)));
    }
    if (n > body) {
        store_tail(y + body, elu8(load_tail(x + body, n - body)), n - body);
    }
}

static inline __m256 swiglu8(__m256 g, __m256 up) {
    const __m256 e = sm_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    return _mm256_mul_ps(silu, up);
}

static void swiglu_avx2(float *y, const float *gate, const float *up, size_t n) {
    const size_t body = n / 8 * 8;
    for (size_t i = 0; i < body; i += 8) {
        _mm256_storeu_ps(y + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    }
    if (n > body) {
        const size_t rest = n - body;
        store_tail(y + body, swiglu8(load_tail(gate + body, rest), load_tail(up + body, rest)),
                   rest);
    }
}

/* kernels.h dot_rows and axpy_rows and their binary16-row twins (kernels/attend_shapes.h) on
 * 8-float vectors (F16C widening). */
#define ATT_VEC __m256
#define ATT_LANES 8
#define ATT_ROWS 2 /* eight accumulators, half the 16 ymm */
#define ATT_ACC 8
#define ATT_ZERO() _mm256_setzero_ps()
#define ATT_LOAD(p) _mm256_loadu_ps(p)
#define ATT_LOAD_TAIL(p, n) load_tail((p), (n))
#define ATT_STORE(p, v) _mm256_storeu_ps((p), (v))
#define ATT_STORE_TAIL(p, v, n) store_tail((p), (v), (n))
#define ATT_FMA(a, b, acc) _mm256_fmadd_ps((a), (b), (acc))
#define ATT_ADD(a, b) _mm256_add_ps((a), (b))
#define ATT_MUL(a, b) _mm256_mul_ps((a), (b))
#define ATT_SET1(f) _mm256_set1_ps(f)
#define ATT_HSUM(v) hsum(v)
#define ATT_ROW float
#define ATT_LOAD_ROW(p) ATT_LOAD(p)
#define ATT_LOAD_ROW_TAIL(p, n) ATT_LOAD_TAIL((p), (n))
#define ATT_SUFFIX
#include "kernels/attend_shapes.h"
#define ATT_ROW uint16_t
#define ATT_LOAD_ROW(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define ATT_LOAD_ROW_TAIL(p, n) load_tail_f16((p), (n))
#define ATT_SUFFIX _f16
#include "kernels/attend_shapes.h"

/* kernels.h mix_rows (kernels/mix_shapes.h) on 8-float vectors. */
#define MIX_COLS 8
#define MIX_ACC 12 /* 16 ymm: 12 accumulators, two source vectors, a broadcast */
#define MIX_VEC __m256
#define MIX_LOAD(p) _mm256_loadu_ps(p)
#define MIX_ZERO() _mm256_setzero_ps()
#define MIX_FMA(acc, v, m) _mm256_fmadd_ps(_mm256_set1_ps(m), (v), (acc))
#define MIX_STORE(p, v) _mm256_storeu_ps((p), (v))
#include "kernels/mix_shapes.h"

const kz_kernels kz_kernels_avx2 = {
    .isa = KZ_ISA_AVX2,
    .name = "avx2",
    .gemm = kz_gemm_avx2,
    .gemm_mr = 6,
    .gemm_bf16 = kz_gemm_bf16_avx2,
    .round_bf16 = kz_round_bf16_avx2,
    .round_bf16_f32 = kz_round_bf16_f32_avx2,
    .gemm_bf16_name = "avx2",
    .bf16_gain = KZ_BF16_FASTER, // the fp32 GEMM's FMA rate on half the weight bytes
    .snake_beta = snake_beta_avx2,
    .rms_norm = rms_norm_avx2,
    .layer_norm = layer_norm_avx2,
    .gelu = gelu_avx2,
    .elu = elu_avx2,
    .swiglu = swiglu_avx2,
    .dot_rows = attend_dot_rows,
    .axpy_rows = attend_axpy_rows,
    .dot_rows_f16 = attend_dot_rows_f16,
    .axpy_rows_f16 = attend_axpy_rows_f16,
    .mix_rows = mix_rows_shapes,
    .matmul_bf16 = kz_matmul_bf16_avx2,
    .matmul_f16 = kz_matmul_f16_avx2,
    .matmul_f32 = kz_matmul_f32_avx2,
    .matvec_bf16 = kz_matvec_bf16_avx2,
    .matvec_f16 = kz_matvec_f16_avx2,
    .matvec_f32 = kz_matvec_f32_avx2,
    .matmul_q8_0 = kz_matmul_q8_0_avx2,
    .matmul_q4_0 = kz_matmul_q4_0_avx2,
    .matmul_q8_0_reused = kz_matmul_q8_0_avx2,
    .matmul_q4_0_reused = kz_matmul_q4_0_avx2,
    .prefetch = KZ_QPF_L1,
    .quant = &kz_quant_avx2,
    .gemm_rows = kz_gemm_rows_avx2,
    .rows_to_f32_bf16 = kz_rows_to_f32_bf16_avx2,
    .rows_to_f32_f16 = kz_rows_to_f32_f16_avx2,
    .rows_to_f32_q8_0 = kz_rows_to_f32_q8_0_avx2,
    .rows_to_f32_q4_0 = kz_rows_to_f32_q4_0_avx2,
    .prefill_gemm_quant = true,
};
