/*
 * rows_ref.c - scalar definitions of the row and elementwise kernels, and the
 * scalar kernel table.
 *
 * Data flow: each function reads [n_rows, n_ch] (or [n]) activations and
 * writes the same shape, row by row, in plain C with libm (sinf, erff, expf,
 * sqrtf). These are the results the AVX2 / AVX-512 variants in kernels/x86/
 * are tested against: axpy_rows bit for bit; snake_beta, gelu and swiglu within the
 * error of their vectorised sin / erf / exp; dot_rows and the norms within the
 * rounding of their lane-parallel sums. Reductions here run sequentially in
 * index order; the build's -ffp-contract=off keeps a*b+c as two roundings.
 * The table at the end adds kz_gemm_ref, the matmuls of matmul_ref.c and
 * the prefill GEMM and weight conversions of gemm_rows_ref.c.
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "runtime/error.h"

#include <math.h>
#include <stdbool.h>

static void snake_beta_ref(float *y, const float *x, size_t n_rows, size_t n_ch,
                           const float *alpha, const float *inv_beta) {
    for (size_t t = 0; t < n_rows; t++) {
        for (size_t c = 0; c < n_ch; c++) {
            const float v = x[t * n_ch + c];
            const float s = sinf(alpha[c] * v);
            y[t * n_ch + c] = v + inv_beta[c] * (s * s);
        }
    }
}

static void rms_norm_ref(float *y, const float *x, const float *w, size_t n_rows, size_t n_ch,
                         float eps) {
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        float ss = 0.0f;
        for (size_t c = 0; c < n_ch; c++) {
            ss += xr[c] * xr[c];
        }
        const float scale = 1.0f / sqrtf(ss / (float)n_ch + eps);
        for (size_t c = 0; c < n_ch; c++) {
            yr[c] = (xr[c] * scale) * w[c];
        }
    }
}

static void layer_norm_ref(float *y, const float *x, const float *w, const float *b,
                           size_t n_rows, size_t n_ch, float eps) {
    for (size_t t = 0; t < n_rows; t++) {
        const float *xr = x + t * n_ch;
        float *yr = y + t * n_ch;
        float sum = 0.0f;
        for (size_t c = 0; c < n_ch; c++) {
            sum += xr[c];
        }
        const float mu = sum / (float)n_ch;
        float var = 0.0f;
        for (size_t c = 0; c < n_ch; c++) {
            const float d = xr[c] - mu;
            var += d * d;
        }
        const float rstd = 1.0f / sqrtf(var / (float)n_ch + eps);
        for (size_t c = 0; c < n_ch; c++) {
            yr[c] = ((xr[c] - mu) * rstd) * w[c] + b[c];
        }
    }
}

static void gelu_ref(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = (0.5f * v) * (1.0f + erff(v * 0.70710678118654752f));
    }
}

static void elu_ref(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : expf(v) - 1.0f;
    }
}

static void swiglu_ref(float *y, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i];
        y[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

/* Element i of a run of cache rows: floats, or binary16 widened exactly. */
static inline float row_elem(const void *rows, bool f16, size_t i) {
    return f16 ? kz_fp16_to_f32(((const uint16_t *)rows)[i]) : ((const float *)rows)[i];
}

static void dot_rows_any(float *out, const float *q, const void *rows, bool f16, size_t stride,
                         size_t n_rows, size_t n, float scale) {
    for (size_t r = 0; r < n_rows; r++) {
        float acc = 0.0f;
        for (size_t i = 0; i < n; i++) {
            acc += q[i] * row_elem(rows, f16, r * stride + i);
        }
        out[r] = acc * scale;
    }
}

static void axpy_rows_any(float *y, const float *w, const void *rows, bool f16, size_t stride,
                          size_t n_rows, size_t n) {
    for (size_t r = 0; r < n_rows; r++) {
        for (size_t i = 0; i < n; i++) {
            y[i] = y[i] + w[r] * row_elem(rows, f16, r * stride + i);
        }
    }
}

static void dot_rows_ref(float *out, const float *q, const float *rows, size_t stride,
                         size_t n_rows, size_t n, float scale) {
    dot_rows_any(out, q, rows, false, stride, n_rows, n, scale);
}

static void axpy_rows_ref(float *y, const float *w, const float *rows, size_t stride,
                          size_t n_rows, size_t n) {
    axpy_rows_any(y, w, rows, false, stride, n_rows, n);
}

static void dot_rows_f16_ref(float *out, const float *q, const uint16_t *rows, size_t stride,
                             size_t n_rows, size_t n, float scale) {
    dot_rows_any(out, q, rows, true, stride, n_rows, n, scale);
}

static void axpy_rows_f16_ref(float *y, const float *w, const uint16_t *rows, size_t stride,
                              size_t n_rows, size_t n) {
    axpy_rows_any(y, w, rows, true, stride, n_rows, n);
}

void kz_mix_rows_cols_ref(float *const *dst, const float *const *src, const float *mat,
                          size_t n_dst, size_t n_src, size_t c0, size_t n) {
    KZ_ASSERT(n_src <= KZ_MIX_MAX_SRC);
    for (size_t r = 0; r < n_dst; r++) {
        for (size_t c = c0; c < n; c++) {
            float acc = 0.0f;
            for (size_t s = 0; s < n_src; s++) {
                acc = fmaf(mat[r * n_src + s], src[s][c], acc);
            }
            dst[r][c] = acc;
        }
    }
}

static void mix_rows_ref(float *const *dst, const float *const *src, const float *mat,
                         size_t n_dst, size_t n_src, size_t n) {
    kz_mix_rows_cols_ref(dst, src, mat, n_dst, n_src, 0, n);
}

const kz_kernels kz_kernels_scalar = {
    .isa = KZ_ISA_SCALAR,
    .name = "scalar",
    .gemm = kz_gemm_ref,
    .gemm_mr = 1,
    .gemm_bf16 = kz_gemm_bf16_ref,
    .round_bf16 = kz_round_bf16_ref,
    .gemm_bf16_name = "ref",
    .bf16_gain = KZ_BF16_NO_GAIN,
    .snake_beta = snake_beta_ref,
    .rms_norm = rms_norm_ref,
    .layer_norm = layer_norm_ref,
    .gelu = gelu_ref,
    .elu = elu_ref,
    .swiglu = swiglu_ref,
    .dot_rows = dot_rows_ref,
    .axpy_rows = axpy_rows_ref,
    .dot_rows_f16 = dot_rows_f16_ref,
    .axpy_rows_f16 = axpy_rows_f16_ref,
    .mix_rows = mix_rows_ref,
    .matmul_bf16 = kz_matmul_bf16_ref,
    .matmul_f16 = kz_matmul_f16_ref,
    .matmul_f32 = kz_matmul_f32_ref,
    .matmul_q8_0 = kz_matmul_q8_0_ref,
    .matmul_q4_0 = kz_matmul_q4_0_ref,
    .matmul_q8_0_reused = kz_matmul_q8_0_ref,
    .matmul_q4_0_reused = kz_matmul_q4_0_ref,
    .matvec_bf16 = kz_matvec_bf16_ref,
    .matvec_f16 = kz_matvec_f16_ref,
    .matvec_f32 = kz_matvec_f32_ref,
    .matvec_q8_0 = kz_matvec_q8_0_ref,
    .matvec_q4_0 = kz_matvec_q4_0_ref,
    .matvec_q8_0_reused = kz_matvec_q8_0_ref,
    .matvec_q4_0_reused = kz_matvec_q4_0_ref,
    .prefetch = KZ_QPF_L1,
    .quant = &kz_quant_ref,
    .gemm_rows = kz_gemm_rows_ref,
    .rows_to_f32_bf16 = kz_rows_to_f32_bf16_ref,
    .rows_to_f32_f16 = kz_rows_to_f32_f16_ref,
    .rows_to_f32_q8_0 = kz_rows_to_f32_q8_0_ref,
    .rows_to_f32_q4_0 = kz_rows_to_f32_q4_0_ref,
    .prefill_gemm_quant = true,
};
