/*
 * mix_shapes.h - kz_kernels.mix_rows for the AVX-512, AVX2 and NEON levels
 * (x86/rows_avx512.c, x86/rows_avx2.c, arm/rows_neon.c), included once per kernel as a
 * template over the vector type.
 *
 * Before including it a kernel defines MIX_COLS (floats per vector), MIX_VEC (the
 * vector type), MIX_ACC (the most accumulators one pass keeps in registers) and
 * MIX_LOAD(p), MIX_ZERO(), MIX_FMA(acc, v, m) (acc + v * m, one fused multiply-add with
 * the scalar m broadcast), MIX_STORE(p, v); this file defines
 *
 *   mix_block        destination rows [r0, r0 + nr) over g = 1 or 2 vectors of columns:
 *                    one accumulator per row and vector, the source vectors streamed in
 *                    order into all of them (g nr independent FMA chains), each broadcast
 *                    coefficient serving g FMAs; a row's own chain keeps the
 *                    definition's order, so the bits are the scalar definition's
 *   mix_group        the destination rows in the fewest passes of at most MIX_ACC / g
 *   mix_rows_shapes  the Winograd transforms' shapes (F(4, 7): input 10 x 10, output
 *                    4 x 11 or 4 x 10; F(6, 7): 12 x 12, 6 x 13, 6 x 12; F(10, 7): 16 x 16,
 *                    10 x 17, 10 x 16; F(6, 2): 7 x 7, 6 x 8, 6 x 7; F(4, 2): 5 x 5, 4 x 6,
 *                    4 x 5) with constant counts, so that the accumulators stay in
 *                    registers and the loops unroll, two vectors of columns at a time;
 *                    any other shape with run-time counts (mix_pairs: rows in pairs over
 *                    the source vectors held in registers); the columns left after the
 *                    last whole vector by the scalar definition (kz_mix_rows_cols_ref).
 * The constant shapes do not use the pair form: it spills on AVX2 (16 sources for
 * F(10, 7)) and pays a broadcast per FMA with two chains in flight
 * (docs/ARCHITECTURE.md#winograd-convolutions).
 */
#include <stddef.h>

#include "kernels/kernels.h"
#include "runtime/error.h"

/* Destination rows [r0, r0 + nr) of columns [c, c + g MIX_COLS), g = 1 or 2 vectors a
 * row (g nr <= MIX_ACC): each broadcast coefficient serves g FMAs. */
static inline __attribute__((always_inline)) void mix_block(float *const *dst,
                                                            const float *const *src,
                                                            const float *mat, size_t r0,
                                                            size_t nr, size_t n_src, size_t c,
                                                            size_t g) {
    MIX_VEC acc[MIX_ACC];
    for (size_t r = 0; r < g * nr; r++) {
        acc[r] = MIX_ZERO();
    }
#pragma GCC unroll 17
    for (size_t s = 0; s < n_src; s++) {
        MIX_VEC v[2];
        for (size_t h = 0; h < g; h++) {
            v[h] = MIX_LOAD(src[s] + c + h * MIX_COLS);
        }
        for (size_t r = 0; r < nr; r++) {
            for (size_t h = 0; h < g; h++) {
                acc[h * nr + r] = MIX_FMA(acc[h * nr + r], v[h], mat[(r0 + r) * n_src + s]);
            }
        }
    }
    for (size_t h = 0; h < g; h++) {
        for (size_t r = 0; r < nr; r++) {
            MIX_STORE(dst[r0 + r] + c + h * MIX_COLS, acc[h * nr + r]);
        }
    }
}

/* Columns [c, c + g MIX_COLS) of every destination row, constant shapes: the fewest passes
 * of at most MIX_ACC / g rows, the same size but the last (16 rows of two vectors on AVX2:
 * 6 + 6 + 4, not 6 + 6 + 2 + 2). */
static inline __attribute__((always_inline)) void mix_group(float *const *dst,
                                                            const float *const *src,
                                                            const float *mat, size_t n_dst,
                                                            size_t n_src, size_t c, size_t g) {
    const size_t most = MIX_ACC / g;
    const size_t passes = (n_dst + most - 1) / most;
    const size_t per = (n_dst + passes - 1) / passes;
#pragma GCC unroll 4
    for (size_t r0 = 0; r0 < n_dst; r0 += per) {
        mix_block(dst, src, mat, r0, n_dst - r0 < per ? n_dst - r0 : per, n_src, c, g);
    }
}

/* The same for run-time shapes: destination rows in pairs over the source vectors. */
static void mix_pairs(float *const *dst, const float *const *src, const float *mat, size_t n_dst,
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
    for (; c + 2 * MIX_COLS <= n; c += 2 * MIX_COLS) {
        mix_group(dst, src, mat, n_dst, n_src, c, 2);
    }
    if (c + MIX_COLS <= n) {
        mix_group(dst, src, mat, n_dst, n_src, c, 1);
        c += MIX_COLS;
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
    MIX_SHAPE(5, 5) MIX_SHAPE(4, 6) MIX_SHAPE(4, 5)       // F(4, 2)
    {
        for (c = 0; c + MIX_COLS <= n; c += MIX_COLS) {
            mix_pairs(dst, src, mat, n_dst, n_src, c);
        }
    }
    kz_mix_rows_cols_ref(dst, src, mat, n_dst, n_src, c, n);
}
#undef MIX_SHAPE
