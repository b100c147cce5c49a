/*
 * gemm_rows_ref.c - scalar definition of the prefill GEMM over f32 weight rows
 * (kernels.h gemm_rows) and of the conversions that feed it (rows_to_f32_*).
 *
 * Data flow (layers/matrix.c, prompts of several tokens):
 *   stored weight rows (bf16 / f16 / q8_0 / q4_0) --rows_to_f32_*--> f32 rows [rows, k-block]
 *   f32 rows, x [n_tok, k-block] --gemm_rows--> y [n_tok, rows] (= or +=)
 * Here every output element is one dot product summed sequentially in index
 * order, multiply then add (the build's -ffp-contract=off keeps two roundings),
 * the same sequence as matmul_f32's definition. The conversions are the
 * format's definitions: bf16 is the high half of an f32, f16 is kz_fp16_to_f32, q8_0 / q4_0 are
 * kz_dequantize_row_q8_0 / kz_dequantize_row_q4_0 (quant_ref.c).
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"

void kz_gemm_rows_ref(float *y, size_t ldy, const float *x, size_t ldx, const float *w,
                      size_t ldw, size_t n_in, size_t n_tok, size_t n_rows, int accumulate) {
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = 0; o < n_rows; o++) {
            const float *wr = w + o * ldw;
            const float *xt = x + t * ldx;
            float acc = 0.0f;
            for (size_t i = 0; i < n_in; i++) {
                acc = acc + wr[i] * xt[i];
            }
            float *yp = y + t * ldy + o;
            *yp = accumulate ? *yp + acc : acc;
        }
    }
}

void kz_rows_to_f32_bf16_ref(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) {
        dst[i] = kz_bf16_to_f32(s[i]);
    }
}

void kz_rows_to_f32_f16_ref(float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) {
        dst[i] = kz_fp16_to_f32(s[i]);
    }
}

void kz_rows_to_f32_q8_0_ref(float *dst, const void *src, size_t n) {
    (void)kz_dequantize_row_q8_0(dst, src, n);
}

void kz_rows_to_f32_q4_0_ref(float *dst, const void *src, size_t n) {
    (void)kz_dequantize_row_q4_0(dst, src, n);
}
