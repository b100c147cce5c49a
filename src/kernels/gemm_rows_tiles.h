/*
 * gemm_rows_tiles.h - the walk over register tiles that every SIMD level's
 * gemm_rows shares (x86/gemm_rows_avx2.c, x86/gemm_rows_avx512.c,
 * arm/gemm_rows_neon.c).
 *
 * A level defines TILE_ROWS and TILE_TOK (at most 4 each) and its tile function
 * `run_tile(yt, ldy, xr, wr, n_in, nr, accumulate, n_left)`, which multiplies rows
 * wr[0..TILE_ROWS) with min(n_left, TILE_TOK) tokens xr[..] and stores the first
 * nr rows of each token, then includes this file and calls gemm_rows_tiles:
 *
 *   rows in blocks of TILE_ROWS   (a short last block repeats its last row
 *     pointer, so every tile reads valid rows; only nr results are stored)
 *     tokens in blocks of TILE_TOK (pointers past n_tok repeat the first token
 *       of the block and are never read by run_tile)
 *       run_tile(y + t ldy + o, ...)
 *
 * Each (token, row) is summed inside one tile in a sequence fixed by n_in, so the
 * walk's order never changes results.
 */
#ifndef KZ_GEMM_ROWS_TILES_H
#define KZ_GEMM_ROWS_TILES_H

#include <stddef.h>

static inline void gemm_rows_tiles(float *y, size_t ldy, const float *x, size_t ldx,
                                   const float *w, size_t ldw, size_t n_in, size_t n_tok,
                                   size_t n_rows, int accumulate) {
    for (size_t o = 0; o < n_rows; o += TILE_ROWS) {
        const size_t nr = n_rows - o < TILE_ROWS ? n_rows - o : TILE_ROWS;
        const float *wr[TILE_ROWS];
        for (size_t r = 0; r < TILE_ROWS; r++) {
            wr[r] = w + (o + (r < nr ? r : nr - 1)) * ldw;
        }
        for (size_t t = 0; t < n_tok; t += TILE_TOK) {
            const float *xr[TILE_TOK];
            for (size_t k = 0; k < TILE_TOK; k++) {
                xr[k] = x + (t + (t + k < n_tok ? k : 0)) * ldx;
            }
            run_tile(y + t * ldy + o, ldy, xr, wr, n_in, nr, accumulate, n_tok - t);
        }
    }
}

#endif
