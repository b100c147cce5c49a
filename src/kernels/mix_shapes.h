/*
 * mix_shapes.h - the column walk and shape dispatch of kz_kernels.mix_rows that the
 * AVX2 and NEON variants share (x86/rows_avx2.c, arm/rows_neon.c), included once per
 * kernel as a template.
 *
 * Before including it a kernel defines MIX_COLS (columns per vector) and the
 * always-inline `mix_group(dst, src, mat, n_dst, n_src, c)` (columns [c, c + MIX_COLS)
 * of every destination row, in the definition's order per element); this file defines
 *
 *   static void mix_rows_shapes(dst, src, mat, n_dst, n_src, n)
 *     the Winograd transforms' shapes (input 10 x 10, output 4 x 11 or 4 x 10) with
 *     constant counts, so that the source vectors stay in registers and the loops
 *     unroll; any other shape with run-time counts; the columns left after the last
 *     whole vector by the scalar definition (kz_mix_rows_cols_ref).
 */
#include <stddef.h>

#include "kernels/kernels.h"
#include "runtime/error.h"

static inline __attribute__((always_inline)) size_t mix_groups(float *const *dst,
                                                               const float *const *src,
                                                               const float *mat, size_t n_dst,
                                                               size_t n_src, size_t n) {
    size_t c = 0;
    for (; c + MIX_COLS <= n; c += MIX_COLS) {
        mix_group(dst, src, mat, n_dst, n_src, c);
    }
    return c;
}

static void mix_rows_shapes(float *const *dst, const float *const *src, const float *mat,
                            size_t n_dst, size_t n_src, size_t n) {
    KZ_ASSERT(n_src <= KZ_MIX_MAX_SRC);
    size_t c;
    if (n_dst == 10 && n_src == 10) {
        c = mix_groups(dst, src, mat, 10, 10, n);
    } else if (n_dst == 4 && n_src == 11) {
        c = mix_groups(dst, src, mat, 4, 11, n);
    } else if (n_dst == 4 && n_src == 10) {
        c = mix_groups(dst, src, mat, 4, 10, n);
    } else {
        c = mix_groups(dst, src, mat, n_dst, n_src, n);
    }
    kz_mix_rows_cols_ref(dst, src, mat, n_dst, n_src, c, n);
}
