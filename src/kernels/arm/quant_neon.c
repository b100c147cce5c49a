/*
 * quant_neon.c - NEON (aarch64) quantized language-model projections
 * (kernels.h matmul_q8_0, matmul_q4_0; formats in kernels/quant.h).
 *
 * The kernel itself is arm/quant_neon_body.h, compiled here for baseline
 * Advanced SIMD and in arm/quant_dot_neon.c for the dotprod extension (SDOT:
 * a block's four int32 lane sums in 2 instructions instead of 7); for two or
 * more tokens arm/quant_mmla_neon.c uses the int8 matrix multiply extension
 * (SMMLA: two rows x two tokens x eight inputs per instruction). All three form
 * the same exact block totals and the same float sequence: identical bits.
 *
 * Data flow: each sub-level's table holds one variant's entry points: neon the
 * baseline ones below (kz_quant_neon), neon-dotprod the SDOT ones
 * (kz_quant_neon_dotprod), neon-i8mm SMMLA for two or more tokens and SDOT for one
 * (kz_quant_neon_i8mm). They do not prefetch, so every policy's slot holds the same
 * function.
 */
#define QUANT_NEON_SDOT 0
#define QUANT_NEON_FN kz_matmul_q_neon_mull
#define QUANT_NEON_BATCH_FN kz_matvec_q_neon_mull
#include "kernels/arm/quant_neon_body.h"

void kz_matmul_q8_0_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matmul_q_neon_mull(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

void kz_matmul_q4_0_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matmul_q_neon_mull(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}

static void q8_batch(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                     size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matvec_q_neon_mull(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

static void q4_batch(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                     size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    kz_matvec_q_neon_mull(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}

const kz_quant_fns kz_quant_neon = {
    .q8_0_batch = {{q8_batch, q8_batch}, {q8_batch, q8_batch}, {q8_batch, q8_batch}},
    .q4_0_batch = {{q4_batch, q4_batch}, {q4_batch, q4_batch}, {q4_batch, q4_batch}},
    .q8_0 = {{kz_matmul_q8_0_neon, kz_matmul_q8_0_neon},
             {kz_matmul_q8_0_neon, kz_matmul_q8_0_neon},
             {kz_matmul_q8_0_neon, kz_matmul_q8_0_neon}},
    .q4_0 = {{kz_matmul_q4_0_neon, kz_matmul_q4_0_neon},
             {kz_matmul_q4_0_neon, kz_matmul_q4_0_neon},
             {kz_matmul_q4_0_neon, kz_matmul_q4_0_neon}},
};
