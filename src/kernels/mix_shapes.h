/*
 * mix_shapes.h - kz_kernels.mix_rows for the AVX-512, AVX2 and NEON levels
 * (x86/rows_avx512.c, x86/rows_avx2.c, arm/rows_neon.c), included once per kernel as a
 * template over the vector type.
 *
 * Before including it a kernel defines MIX_COLS (floats per vector), MIX_VEC (the
 * vector type) and MIX_LOAD(p), MIX_ZERO(), MIX_FMA(acc, v, m) (acc + v * m, one fused
 * multiply-add with the scalar m broadcast), MIX_STORE(p, v); this file defines
 *
 *   mix_group        columns [c, c + MIX_COLS) of every destination row: the source
 *                    vectors in registers, destination rows in pairs so that two
 *                    independent FMA chains overlap (each row's own chain keeps the
 *                    definition's order, so the bits are the scalar definition's)
 *   mix_rows_shapes  the Winograd transforms' shapes (F(4, 7): input 10 x 10, output
 *                    4 x 11 or 4 x 10; F(6, 7): 12 x 12, 6 x 13, 6 x 12; F(6, 2):
 *                    7 x 7, 6 x 8, 6 x 7) with constant counts, so that the source
 *                    vectors stay in registers and the loops unroll; any other shape
 *                    with run-time counts; the columns left after the last whole
 *                    vector by the scalar definition (kz_mix_rows_cols_ref).
 */
#include <stddef.h>

#include "kernels/kernels.h"
#include "runtime/error.h"

static inline __attribute__((always_inline)) void mix_group(float *const *dst,
                                                            const float *const *src,
                                                            const float *mat, size_t n_dst,
                                                            size_t n_src, size_t c) {
    MIX_VEC sv[KZ_MIX_MAX_SRC];
    for (size_t s = 0; s < n_src; s++) {
        sv[s] = MIX_LOAD(src[s] + c);
    }
    size_t r = 0;
    for (; r + 2 <= n_dst; r += 2) {
        const float *m0 = mat + r * n_src, *m1 = m0 + n_src;
        MIX_VEC a0 = MIX_ZERO();
        MIX_VEC a1 = MIX_ZERO();
        for (size_t s = 0; s < n_src; s++) {
            a0 = MIX_FMA(a0, sv[s], m0[s]);
            a1 = MIX_FMA(a1, sv[s], m1[s]);
        }
        MIX_STORE(dst[r] + c, a0);
        MIX_STORE(dst[r + 1] + c, a1);
    }
    if (r < n_dst) {
        MIX_VEC acc = MIX_ZERO();
        for (size_t s = 0; s < n_src; s++) {
            acc = MIX_FMA(acc, sv[s], mat[r * n_src + s]);
        }
        MIX_STORE(dst[r] + c, acc);
    }
}

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

/* One constant shape, then `else`: a chain of them ends in the run-time shape. */
#define MIX_SHAPE(D, S)                                                                        \
    if (n_dst == (D) && n_src == (S)) {                                                        \
        c = mix_groups(dst, src, mat, (D), (S), n);                                            \
    } else

static void mix_rows_shapes(float *const *dst, const float *const *src, const float *mat,
                            size_t n_dst, size_t n_src, size_t n) {
    KZ_ASSERT(n_src <= KZ_MIX_MAX_SRC);
    size_t c;
    MIX_SHAPE(10, 10) MIX_SHAPE(4, 11) MIX_SHAPE(4, 10) // F(4, 7)
    MIX_SHAPE(12, 12) MIX_SHAPE(6, 13) MIX_SHAPE(6, 12) // F(6, 7)
    MIX_SHAPE(7, 7) MIX_SHAPE(6, 8) MIX_SHAPE(6, 7)     // F(6, 2)
    MIX_SHAPE(16, 16) MIX_SHAPE(10, 17) MIX_SHAPE(10, 16) // F(10, 7)
    {
        c = mix_groups(dst, src, mat, n_dst, n_src, n);
    }
    kz_mix_rows_cols_ref(dst, src, mat, n_dst, n_src, c, n);
}
#undef MIX_SHAPE
