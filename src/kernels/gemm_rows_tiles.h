/*
 * gemm_rows_tiles.h - the walk over register tiles that every SIMD level's
 * gemm_rows shares (x86/gemm_rows_avx2.c, x86/gemm_rows_avx512.c,
 * arm/gemm_rows_neon.c), included once per level as a template.
 *
 * Before including it a level defines TILE_ROWS (4) and TILE_TOK (2, 3 or 4), its
 * ALWAYS_INLINE `tile(y, ldy, xr, wr, n_in, nr, accumulate, NT)`, which multiplies
 * rows wr[0..TILE_ROWS) with the NT (a compile-time count) tokens xr[0..NT) and
 * stores the first nr rows of each token, and GEMM_ROWS_FN, the name of its
 * kernels.h gemm_rows. This file defines that function:
 *
 *   rows in blocks of TILE_ROWS   (a short last block repeats its last row
 *     pointer, so every tile reads valid rows; only nr results are stored)
 *     tokens in blocks of TILE_TOK (pointers past n_tok repeat the block's first
 *       token and are never read: the tile gets the count left, 1..TILE_TOK)
 *       tile(y + t ldy + o, ...)
 *
 * Each (token, row) is summed inside one tile in a sequence fixed by n_in, so the
 * walk's order never changes results.
 */
#include <stddef.h>

#if TILE_TOK < 2 || TILE_TOK > 4
#error "gemm_rows_tiles.h: TILE_TOK must be 2, 3 or 4"
#endif

/* The tile for the n_left (>= 1) tokens still to do, with a compile-time count. */
ALWAYS_INLINE void run_tile(float *yt, size_t ldy, const float *const xr[TILE_TOK],
                            const float *const wr[TILE_ROWS], size_t n_in, size_t nr,
                            int accumulate, size_t n_left) {
    switch (n_left) {
    case 1: tile(yt, ldy, xr, wr, n_in, nr, accumulate, 1); break;
#if TILE_TOK >= 3
    case 2: tile(yt, ldy, xr, wr, n_in, nr, accumulate, 2); break;
#endif
#if TILE_TOK == 4
    case 3: tile(yt, ldy, xr, wr, n_in, nr, accumulate, 3); break;
#endif
    default: tile(yt, ldy, xr, wr, n_in, nr, accumulate, TILE_TOK); break;
    }
}

void GEMM_ROWS_FN(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t ldw,
                  size_t n_in, size_t n_tok, size_t n_rows, int accumulate) {
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
