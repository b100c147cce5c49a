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
 * Data flow: kz_matmul_q{8,4}_0_neon -> for n_tok >= 2, the SMMLA variant when
 * dispatch.c saw HWCAP2_I8MM (kz_quant_neon_enable_i8mm) and tests or benchmarks
 * have not switched it off (kz_quant_neon_set_i8mm); else the SDOT variant when
 * dispatch.c saw HWCAP_ASIMDDP (kz_quant_neon_enable_dotprod) and it is not
 * switched off (kz_quant_neon_set_dotprod); else the baseline one.
 */
#define QUANT_NEON_SDOT 0
#define QUANT_NEON_FN kz_matmul_q_neon_mull
#include "kernels/arm/quant_neon_body.h"

static int dotprod_available = 0; /* kz_quant_neon_enable_dotprod */
static int dotprod_allowed = 1;   /* kz_quant_neon_set_dotprod */
static int i8mm_available = 0;    /* kz_quant_neon_enable_i8mm */
static int i8mm_allowed = 1;      /* kz_quant_neon_set_i8mm */

void kz_quant_neon_enable_dotprod(void) {
    dotprod_available = 1;
}

int kz_quant_neon_set_dotprod(int allow) {
    dotprod_allowed = allow;
    return dotprod_available;
}

void kz_quant_neon_enable_i8mm(void) {
    i8mm_available = 1;
}

int kz_quant_neon_set_i8mm(int allow) {
    i8mm_allowed = allow;
    return i8mm_available;
}

static void matmul_q(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                     size_t n_tok, size_t o0, size_t o1, int q4) {
    if (n_tok >= 2 && i8mm_available && i8mm_allowed) {
        kz_matmul_q_neon_mmla(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4);
    } else if (dotprod_available && dotprod_allowed) {
        kz_matmul_q_neon_sdot(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4);
    } else {
        kz_matmul_q_neon_mull(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4);
    }
}

void kz_matmul_q8_0_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 0);
}

void kz_matmul_q4_0_neon(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                         size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    matmul_q(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, 1);
}
