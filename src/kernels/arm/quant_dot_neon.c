/*
 * quant_dot_neon.c - the NEON quantized matmul built for the dotprod extension
 * (Armv8.2-A FEAT_DotProd, Linux HWCAP_ASIMDDP): arm/quant_neon_body.h with
 * SDOT forming each block's lane sums, and its entry points (kz_quant_neon_dotprod),
 * which only the neon-dotprod and neon-i8mm sub-levels hold (dispatch.c found the
 * extension), so the rest of the library stays baseline Advanced SIMD. Same bits as
 * the baseline variant (the same exact integer lane sums, the same float sequence).
 */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define QUANT_NEON_SDOT 1
#define QUANT_NEON_FN kz_matmul_q_neon_sdot
#define QUANT_NEON_BATCH_FN kz_matvec_q_neon_sdot
#include "kernels/arm/quant_neon_body.h"

static void q8_sdot(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                    size_t n_tok, size_t o0, size_t o1) {
    kz_matmul_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

static void q4_sdot(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                    size_t n_tok, size_t o0, size_t o1) {
    kz_matmul_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}

static void q8_sdot_batch(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                          size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matvec_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

static void q4_sdot_batch(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                          size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matvec_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}

const kz_quant_fns kz_quant_neon_dotprod = {
    .q8_0_batch = {{q8_sdot_batch, q8_sdot_batch},
                   {q8_sdot_batch, q8_sdot_batch},
                   {q8_sdot_batch, q8_sdot_batch}},
    .q4_0_batch = {{q4_sdot_batch, q4_sdot_batch},
                   {q4_sdot_batch, q4_sdot_batch},
                   {q4_sdot_batch, q4_sdot_batch}},
    .q8_0 = {{q8_sdot, q8_sdot}, {q8_sdot, q8_sdot}, {q8_sdot, q8_sdot}},
    .q4_0 = {{q4_sdot, q4_sdot}, {q4_sdot, q4_sdot}, {q4_sdot, q4_sdot}},
};

#if defined(__clang__)
#pragma clang attribute pop
#endif
