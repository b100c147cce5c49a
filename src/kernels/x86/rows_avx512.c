/*
 * rows_avx512.c - AVX-512 row and elementwise kernels, and the AVX-512 table.
 *
 * Data flow: the AVX-512 versions of ref/rows_ref.c, 16 channels at a time
 * from the row start with unaligned loads; the last n % 16 channels use
 * masked loads and stores (zero in the idle lanes) through the same
 * instruction sequence as the body, so results do not depend on alignment or
 * on where a row sits in a call. Reductions (dot_rows, the norms) sum in a fixed
 * lane layout per n and differ from the sequential scalar sums by rounding
 * only. axpy_rows matches the scalar definition bit for bit (mul then add, no FMA);
 * snake_beta, gelu and swiglu use the vector sin^2 / erf / exp of
 * simd_math.h. The table at the end adds kz_gemm_avx512, the matmuls of
 * matmul_avx512.c and quant_avx512.c, and gemm_rows_avx512.c.
 */
#include "kernels/kernels.h"
#include "runtime/error.h"
#include "kernels/x86/simd_math.h"

#include <immintrin.h>
#include <math.h>

/* Mask of the first n lanes (n <= 16). */
static inline __mmask16 first_lanes(size_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* y = x + inv_beta * sin(alpha * x)^2 for 16 lanes; lanes with a huge or
 * non-finite argument fall back to libm. Idle lanes hold zeros. */
static inline __m512 snake16(__m512 v, __m512 alpha, __m512 inv_beta) {
    const __m512 arg = _mm512_mul_ps(alpha, v);
    __m512 s2 = sm_sin2_16(arg);
    const __mmask16 bad = sm_sin2_bad16(arg);
    if (bad) {
        _Alignas(64) float a[16];
        _Alignas(64) float s[16];
        _mm512_store_ps(a, arg);
        _mm512_store_ps(s, s2);
        for (int l = 0; l < 16; l++) {
            if (bad >> l & 1) {
                const float sl = sinf(a[l]);
                s[l] = sl * sl;
            }
        }
        s2 = _mm512_load_ps(s);
    }
    return _mm512_add_ps(v, _mm512_mul_ps(inv_beta, s2));
}

static void snake_beta_avx512(float *y, const float *x, size_t n_rows, size_t n_ch,
                              const float *alpha, const float *inv_beta) {
    const size_t body = n_ch / 16 * 16;
    const __mmask16 m = first_lanes(n_ch - body);
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        for (size_t c = 0; c < body; c += 16) {
            const __m512 r = snake16(_mm512_loadu_ps(xr + c), _mm512_loadu_ps(alpha + c),
                                     _mm512_loadu_ps(inv_beta + c));
            _mm512_storeu_ps(yr + c, r);
        }
        if (m) {
            const __m512 r = snake16(_mm512_maskz_loadu_ps(m, xr + body),
                                     _mm512_maskz_loadu_ps(m, alpha + body),
                                     _mm512_maskz_loadu_ps(m, inv_beta + body));
            _mm512_mask_storeu_ps(yr + body, m, r);
        }
    }
}

/* Two accumulators over 32 channels, then one over 16, then the masked tail. */
static float sum_squares(const float *x, size_t n) {
    __m512 a0 = _mm512_setzero_ps();
    __m512 a1 = _mm512_setzero_ps();
    size_t c = 0;
    for (; c + 32 <= n; c += 32) {
        const __m512 v0 = _mm512_loadu_ps(x + c);
        const __m512 v1 = _mm512_loadu_ps(x + c + 16);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
        a1 = _mm512_fmadd_ps(v1, v1, a1);
    }
    if (c + 16 <= n) {
        const __m512 v = _mm512_loadu_ps(x + c);
        a0 = _mm512_fmadd_ps(v, v, a0);
        c += 16;
    }
    if (c < n) {
        const __m512 v = _mm512_maskz_loadu_ps(first_lanes(n - c), x + c);
        a1 = _mm512_fmadd_ps(v, v, a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

static void rms_norm_avx512(float *y, const float *x, const float *w, size_t n_rows, size_t n_ch,
                            float eps) {
    const size_t body = n_ch / 16 * 16;
    const __mmask16 m = first_lanes(n_ch - body);
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        const float ss = sum_squares(xr, n_ch);
        const __m512 scale = _mm512_set1_ps(1.0f / sqrtf(ss / (float)n_ch + eps));
        for (size_t c = 0; c < body; c += 16) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xr + c), scale);
            _mm512_storeu_ps(yr + c, _mm512_mul_ps(v, _mm512_loadu_ps(w + c)));
        }
        if (m) {
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + body), scale);
            _mm512_mask_storeu_ps(yr + body, m,
                                  _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + body)));
        }
    }
}

static void layer_norm_avx512(float *y, const float *x, const float *w, const float *b,
                              size_t n_rows, size_t n_ch, float eps) {
    const size_t body = n_ch / 16 * 16;
    const __mmask16 m = first_lanes(n_ch - body);
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        __m512 acc = _mm512_setzero_ps();
        for (size_t c = 0; c < body; c += 16) {
            acc = _mm512_add_ps(acc, _mm512_loadu_ps(xr + c));
        }
        if (m) {
            acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, xr + body));
        }
        const __m512 mu = _mm512_set1_ps(_mm512_reduce_add_ps(acc) / (float)n_ch);
        acc = _mm512_setzero_ps();
        for (size_t c = 0; c < body; c += 16) {
            const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xr + c), mu);
            acc = _mm512_fmadd_ps(d, d, acc);
        }
        if (m) {
            // Idle lanes would contribute (0 - mu)^2: zero them.
            const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, xr + body), mu);
            acc = _mm512_fmadd_ps(d, d, acc);
        }
        const float var = _mm512_reduce_add_ps(acc) / (float)n_ch;
        const __m512 rstd = _mm512_set1_ps(1.0f / sqrtf(var + eps));
        for (size_t c = 0; c < body; c += 16) {
            const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + c), mu), rstd);
            const __m512 r = _mm512_add_ps(_mm512_mul_ps(d, _mm512_loadu_ps(w + c)),
                                           _mm512_loadu_ps(b + c));
            _mm512_storeu_ps(yr + c, r);
        }
        if (m) {
            const __m512 d =
                _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + body), mu), rstd);
            const __m512 r = _mm512_add_ps(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, w + body)),
                                           _mm512_maskz_loadu_ps(m, b + body));
            _mm512_mask_storeu_ps(yr + body, m, r);
        }
    }
}

static inline __m512 gelu16(__m512 v) {
    const __m512 e = sm_erf16(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static void gelu_avx512(float *y, const float *x, size_t n) {
    const size_t body = n / 16 * 16;
    for (size_t i = 0; i < body; i += 16) {
        _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
    }
    if (n > body) {
        const __mmask16 m = first_lanes(n - body);
        _mm512_mask_storeu_ps(y + body, m, gelu16(_mm512_maskz_loadu_ps(m, x + body)));
    }
}

/* min(0, v) keeps a NaN v (the second operand wins), so NaN stays NaN. */
static inline __m512 elu16(__m512 v) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512 e = _mm512_sub_ps(sm_exp16(_mm512_min_ps(zero, v)), _mm512_set1_ps(1.0f));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), e, v);
}

static void elu_avx512(float *y, const float *x, size_t n) {
    const size_t body = n / 16 * 16;
    for (size_t i = 0; i < body; i += 16) {
        _mm512_storeu_ps(y + i, elu16(_mm512_loadu_ps(x + i)));
    }
    if (n > body) {
        const __mmask16 m = first_lanes(n - body);
        _mm512_mask_storeu_ps(y + body, m, elu16(_mm512_maskz_loadu_ps(m, x + body)));
    }
}

static inline __m512 swiglu16(__m512 g, __m512 up) {
    const __m512 e = sm_exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    return _mm512_mul_ps(silu, up);
}

static void swiglu_avx512(float *y, const float *gate, const float *up, size_t n) {
    const size_t body = n / 16 * 16;
    for (size_t i = 0; i < body; i += 16) {
        _mm512_storeu_ps(y + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    }
    if (n > body) {
        const __mmask16 m = first_lanes(n - body);
        const __m512 r = swiglu16(_mm512_maskz_loadu_ps(m, gate + body),
                                  _mm512_maskz_loadu_ps(m, up + body));
        _mm512_mask_storeu_ps(y + body, m, r);
    }
}

/* kernels.h dot_rows and axpy_rows and their binary16-row twins (kernels/attend_shapes.h) on
 * 16-float vectors. */
#define ATT_VEC __m512
#define ATT_LANES 16
#define ATT_ROWS 4 /* 16 accumulators and the query's loads in the 32 zmm */
#define ATT_ACC 8  /* a 128-float head */
#define ATT_ZERO() _mm512_setzero_ps()
#define ATT_LOAD(p) _mm512_loadu_ps(p)
#define ATT_LOAD_TAIL(p, n) _mm512_maskz_loadu_ps(first_lanes(n), (p))
#define ATT_STORE(p, v) _mm512_storeu_ps((p), (v))
#define ATT_STORE_TAIL(p, v, n) _mm512_mask_storeu_ps((p), first_lanes(n), (v))
#define ATT_FMA(a, b, acc) _mm512_fmadd_ps((a), (b), (acc))
#define ATT_ADD(a, b) _mm512_add_ps((a), (b))
#define ATT_MUL(a, b) _mm512_mul_ps((a), (b))
#define ATT_SET1(f) _mm512_set1_ps(f)
#define ATT_HSUM(v) _mm512_reduce_add_ps(v)
#define ATT_ROW float
#define ATT_LOAD_ROW(p) ATT_LOAD(p)
#define ATT_LOAD_ROW_TAIL(p, n) ATT_LOAD_TAIL((p), (n))
#define ATT_SUFFIX
#include "kernels/attend_shapes.h"
#define ATT_ROW uint16_t
#define ATT_LOAD_ROW(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define ATT_LOAD_ROW_TAIL(p, n) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(n), (p)))
#define ATT_SUFFIX _f16
#include "kernels/attend_shapes.h"

/* kernels.h mix_rows (kernels/mix_shapes.h) on 16-float vectors. */
#define MIX_COLS 16
#define MIX_ACC 24 /* 32 zmm */
#define MIX_VEC __m512
#define MIX_LOAD(p) _mm512_loadu_ps(p)
#define MIX_ZERO() _mm512_setzero_ps()
#define MIX_FMA(acc, v, m) _mm512_fmadd_ps(_mm512_set1_ps(m), (v), (acc))
#define MIX_STORE(p, v) _mm512_storeu_ps((p), (v))
#include "kernels/mix_shapes.h"

const kz_kernels kz_kernels_avx512 = {
    .isa = KZ_ISA_AVX512,
    .name = "avx512",
    .gemm = kz_gemm_avx512,
    .gemm_mr = 8,
    .gemm_bf16 = kz_gemm_bf16_avx2,
    .round_bf16 = kz_round_bf16_avx2,
    .round_bf16_f32 = kz_round_bf16_f32_avx2,
    .gemm_bf16_name = "avx2",
    .bf16_gain = KZ_BF16_NO_GAIN, // the fp32 GEMM here has twice the FMAs' width
    .snake_beta = snake_beta_avx512,
    .rms_norm = rms_norm_avx512,
    .layer_norm = layer_norm_avx512,
    .gelu = gelu_avx512,
    .elu = elu_avx512,
    .swiglu = swiglu_avx512,
    .dot_rows = attend_dot_rows,
    .axpy_rows = attend_axpy_rows,
    .dot_rows_f16 = attend_dot_rows_f16,
    .axpy_rows_f16 = attend_axpy_rows_f16,
    .mix_rows = mix_rows_shapes,
    .matmul_bf16 = kz_matmul_bf16_avx512,
    .matmul_f16 = kz_matmul_f16_avx512,
    .matmul_f32 = kz_matmul_f32_avx512,
    .matvec_bf16 = kz_matvec_bf16_avx512,
    .matvec_f16 = kz_matvec_f16_avx512,
    .matvec_f32 = kz_matvec_f32_avx512,
    .matmul_q8_0 = kz_matmul_q8_0_avx512,
    .matmul_q4_0 = kz_matmul_q4_0_avx512,
    .matmul_q8_0_reused = kz_matmul_q8_0_avx512,
    .matmul_q4_0_reused = kz_matmul_q4_0_avx512,
    .prefetch = KZ_QPF_L1,
    .quant = &kz_quant_avx512,
    .gemm_rows = kz_gemm_rows_avx512,
    .rows_to_f32_bf16 = kz_rows_to_f32_bf16_avx512,
    .rows_to_f32_f16 = kz_rows_to_f32_f16_avx512,
    .rows_to_f32_q8_0 = kz_rows_to_f32_q8_0_avx512,
    .rows_to_f32_q4_0 = kz_rows_to_f32_q4_0_avx512,
    .prefill_gemm_quant = false,
    .prompt_tile_tokens = KZ_PROMPT_TILE_TOKENS,
};
