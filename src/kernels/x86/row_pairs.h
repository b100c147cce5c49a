/*
 * row_pairs.h - the token walk of the float step kernels, shared by matmul_avx2.c and
 * matmul_avx512.c: tokens in pairs (a last one alone) over a range of weight rows through
 * the including file's row_dots, and on it the batched matrix-vector product (kernels.h
 * matvec_*): per row tile of about KZ_MATVEC_TILE_BYTES, every pair over the tile's rows,
 * so every token gets the bits of a call of its own and the tile is read from memory once
 * for every pair.
 * Include it after row_dots.h (row_dots and W_F32); each ISA file compiles its own copy with
 * its own vector width.
 */
#ifndef KZ_ROW_PAIRS_H
#define KZ_ROW_PAIRS_H

#include <stddef.h>

/* Tokens t0.. of x, in pairs, over rows o0..o1 of w (rows of n_in elements of esize bytes). */
static inline void row_pairs(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                             size_t n_in, size_t esize, size_t t0, size_t n_tok, size_t o0,
                             size_t o1, int kind) {
    for (size_t t = t0; t < n_tok; t += 2) {
        const int n_t = n_tok - t >= 2 ? 2 : 1;
        const float *x0 = x + t * ldx, *x1 = x0 + (n_t == 2 ? ldx : 0);
        for (size_t o = o0; o < o1; o++) {
            float v0, v1;
            row_dots((const char *)w + o * n_in * esize, x0, x1, n_in, n_t, kind, &v0, &v1);
            y[t * ldy + o] = v0;
            if (n_t == 2) {
                y[(t + 1) * ldy + o] = v1;
            }
        }
    }
}

static inline void matvec(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                          size_t n_in, size_t n_tok, size_t o0, size_t o1, int kind) {
    const size_t esize = kind == W_F32 ? 4 : 2;
    const size_t tile = kz_matvec_tile_rows(n_in * esize);
    for (size_t r0 = o0; r0 < o1; r0 += tile) {
        const size_t r1 = o1 - r0 < tile ? o1 : r0 + tile;
        row_pairs(y, ldy, x, ldx, w, n_in, esize, 0, n_tok, r0, r1, kind);
    }
}

#endif
