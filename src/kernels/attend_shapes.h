/*
 * attend_shapes.h - kz_kernels.dot_rows and axpy_rows (the attention's two passes over a
 * run of cache rows) and their binary16-row twins dot_rows_f16 and axpy_rows_f16, for the
 * AVX-512, AVX2 and NEON levels (x86/rows_avx512.c, x86/rows_avx2.c, arm/rows_neon.c),
 * included twice per kernel file as a template over the vector type and the row type.
 *
 * Before the first include a kernel defines ATT_VEC (the vector type), ATT_LANES (floats per
 * vector), ATT_ROWS (rows of dot_rows in flight, 2 or 4: four accumulators each), ATT_ACC
 * (output vectors axpy_rows keeps in registers), ATT_ZERO(), ATT_LOAD(p), ATT_LOAD_TAIL(p,
 * n) (the first n < ATT_LANES floats, zeros after), ATT_STORE(p, v), ATT_STORE_TAIL(p, v, n),
 * ATT_FMA(a, b, acc) (acc + a * b, fused), ATT_ADD(a, b), ATT_MUL(a, b), ATT_SET1(f) and
 * ATT_HSUM(v) (the level's fixed-order sum of the lanes). Before each include it defines
 * ATT_ROW (the cache rows' element type), ATT_LOAD_ROW(p) and ATT_LOAD_ROW_TAIL(p, n) (one
 * vector of rows widened to floats exactly, zeros after n) and ATT_SUFFIX (appended to the
 * names below); this file undefines those four at its end. It defines
 *
 *   attend_dot_lanes  one row's dot product as lanes: four accumulators over 4 ATT_LANES
 *                     floats at a time, then one over ATT_LANES, then the zero-padded
 *                     tail, summed (a0 + a1) + (a2 + a3): an order fixed by n alone
 *   attend_dot_rows   ATT_ROWS rows at a time, so their chains and reductions overlap,
 *                     each row in attend_dot_lanes' order whatever its place in the set
 *   attend_axpy_rows  the output held in ATT_ACC registers while every row adds to it in
 *                     turn; each element sees y + w[r] * x in row order, mul then add, the
 *                     scalar definition's bits (the tail lanes too, zero-padded)
 *
 * The widening is exact, so a binary16 twin gives the float kernel's bits on the widened
 * rows.
 */
#include <stddef.h>

#define ATT_CAT2(a, b) a##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define ATT_FN(name) ATT_CAT(name, ATT_SUFFIX)

static inline ATT_VEC ATT_FN(attend_dot_lanes)(const float *a, const ATT_ROW *b, size_t n) {
    ATT_VEC a0 = ATT_ZERO(), a1 = ATT_ZERO(), a2 = ATT_ZERO(), a3 = ATT_ZERO();
    size_t i = 0;
    for (; i + 4 * ATT_LANES <= n; i += 4 * ATT_LANES) {
        a0 = ATT_FMA(ATT_LOAD(a + i), ATT_LOAD_ROW(b + i), a0);
        a1 = ATT_FMA(ATT_LOAD(a + i + ATT_LANES), ATT_LOAD_ROW(b + i + ATT_LANES), a1);
        a2 = ATT_FMA(ATT_LOAD(a + i + 2 * ATT_LANES), ATT_LOAD_ROW(b + i + 2 * ATT_LANES), a2);
        a3 = ATT_FMA(ATT_LOAD(a + i + 3 * ATT_LANES), ATT_LOAD_ROW(b + i + 3 * ATT_LANES), a3);
    }
    for (; i + ATT_LANES <= n; i += ATT_LANES) {
        a0 = ATT_FMA(ATT_LOAD(a + i), ATT_LOAD_ROW(b + i), a0);
    }
    if (i < n) {
        a1 = ATT_FMA(ATT_LOAD_TAIL(a + i, n - i), ATT_LOAD_ROW_TAIL(b + i, n - i), a1);
    }
    return ATT_ADD(ATT_ADD(a0, a1), ATT_ADD(a2, a3));
}

static void ATT_FN(attend_dot_rows)(float *out, const float *q, const ATT_ROW *rows,
                                    size_t stride, size_t n_rows, size_t n, float scale) {
    size_t r = 0;
    // Named sums: an array of them went through the stack.
    for (; r + ATT_ROWS <= n_rows; r += ATT_ROWS) {
        const ATT_ROW *b = rows + r * stride;
        const ATT_VEC s0 = ATT_FN(attend_dot_lanes)(q, b, n);
        const ATT_VEC s1 = ATT_FN(attend_dot_lanes)(q, b + stride, n);
#if ATT_ROWS == 4
        const ATT_VEC s2 = ATT_FN(attend_dot_lanes)(q, b + 2 * stride, n);
        const ATT_VEC s3 = ATT_FN(attend_dot_lanes)(q, b + 3 * stride, n);
        out[r + 2] = ATT_HSUM(s2) * scale;
        out[r + 3] = ATT_HSUM(s3) * scale;
#endif
        out[r] = ATT_HSUM(s0) * scale;
        out[r + 1] = ATT_HSUM(s1) * scale;
    }
    for (; r < n_rows; r++) {
        out[r] = ATT_HSUM(ATT_FN(attend_dot_lanes)(q, rows + r * stride, n)) * scale;
    }
}

static void ATT_FN(attend_axpy_rows)(float *y, const float *w, const ATT_ROW *rows,
                                     size_t stride, size_t n_rows, size_t n) {
    size_t i = 0;
    for (; i + ATT_ACC * ATT_LANES <= n; i += ATT_ACC * ATT_LANES) {
        ATT_VEC acc[ATT_ACC];
        for (int j = 0; j < ATT_ACC; j++) {
            acc[j] = ATT_LOAD(y + i + (size_t)j * ATT_LANES);
        }
        for (size_t r = 0; r < n_rows; r++) {
            const ATT_VEC wv = ATT_SET1(w[r]);
            const ATT_ROW *x = rows + r * stride + i;
            for (int j = 0; j < ATT_ACC; j++) {
                acc[j] = ATT_ADD(acc[j], ATT_MUL(wv, ATT_LOAD_ROW(x + (size_t)j * ATT_LANES)));
            }
        }
        for (int j = 0; j < ATT_ACC; j++) {
            ATT_STORE(y + i + (size_t)j * ATT_LANES, acc[j]);
        }
    }
    for (; i + ATT_LANES <= n; i += ATT_LANES) {
        ATT_VEC acc = ATT_LOAD(y + i);
        for (size_t r = 0; r < n_rows; r++) {
            acc = ATT_ADD(acc, ATT_MUL(ATT_SET1(w[r]), ATT_LOAD_ROW(rows + r * stride + i)));
        }
        ATT_STORE(y + i, acc);
    }
    if (i < n) {
        const size_t m = n - i;
        ATT_VEC acc = ATT_LOAD_TAIL(y + i, m);
        for (size_t r = 0; r < n_rows; r++) {
            acc = ATT_ADD(acc,
                          ATT_MUL(ATT_SET1(w[r]), ATT_LOAD_ROW_TAIL(rows + r * stride + i, m)));
        }
        ATT_STORE_TAIL(y + i, acc, m);
    }
}

#undef ATT_ROW
#undef ATT_LOAD_ROW
#undef ATT_LOAD_ROW_TAIL
#undef ATT_SUFFIX
