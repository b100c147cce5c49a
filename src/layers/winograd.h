/*
 * winograd.h - a causal k = 7 convolution by Winograd F(4, 7) in fp32: the codec's
 * "winograd" precision, for CPUs without a fast bf16 GEMM.
 *
 * A tile is 4 outputs d rows apart (d the dilation), t, t + d, t + 2d, t + 3d; their
 * 10 input rows t + l d (l = 0..9, history coordinates) go through
 *   V_k = sum_l BT[k][l] x_l                 (input transform, 10 x 10)
 *   M_k = V_k U_k,  U_k = sum_j G[k][j] W_j  (10 GEMMs over all tiles, U packed at load)
 *   y_i = sum_k AT[i][k] M_k + bias          (output transform, 4 x 10)
 * which is 10 instead of 28 multiplications per 4 outputs and input channel. The
 * matrices come from exact Toom-Cook interpolation at 0, +-1, +-2, +-1/2, +-3/2 and
 * infinity; fp32 rounding of the transforms is ~45x that of the direct sum
 * (docs/PERF.md).
 *
 * Tiles lie on a grid fixed per frame (frame_rows rows): each residue class mod d of
 * a frame's rows is cut into tiles of 4, the last one partial (1-3 outputs) where the
 * count is not a multiple of 4. A partial tile of c outputs needs input rows l < c + 6;
 * rows l >= c + 6 lie in the next frame, and the tile always takes zeros for them
 * (exact in real arithmetic: no output of the tile depends on them). Chunks hold whole
 * frames, so every chunk size and thread count gives the same bits, as with the exact
 * path, and a run never reads the conv's own panels (kz_wino_init reads them once).
 */
#ifndef KZ_WINOGRAD_H
#define KZ_WINOGRAD_H

#include <stddef.h>

#include "layers/conv.h"

enum { KZ_WINO_M = 4, KZ_WINO_R = 7, KZ_WINO_N = 10 };

typedef struct kz_wino {
    kz_conv u[KZ_WINO_N]; /* U_k as 1x1 convs [k_in -> n], no bias, owned */
    const float *bias;    /* the conv's bias [n] or NULL (borrowed) */
    size_t k_in, n, dilation;
} kz_wino;

/* Scratch a run needs: floats and size_t indices. */
typedef struct kz_wino_scratch {
    float *f;
    size_t n_f;
    size_t *idx;
    size_t n_idx;
} kz_wino_scratch;

/* Builds the transformed weights of c (a causal conv with 7 taps and fp32 panels).
 * c must outlive w. Returns KZ_OK or KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_wino_init(kz_wino *w, const kz_conv *c);
void kz_wino_free(kz_wino *w);

/* Scratch floats and indices for n_frames frames of frame_rows output rows. */
void kz_wino_scratch_need(const kz_wino *w, size_t frame_rows, size_t n_frames, size_t *n_f,
                          size_t *n_idx);

/* y[n_rows, ldy] = conv(x) (store) where x points at the first history row, with
 * n_rows a multiple of frame_rows; s large enough (kz_wino_scratch_need). */
void kz_wino_run(const kz_wino *w, kz_exec *e, const kz_wino_scratch *s, float *y, size_t ldy,
                 const float *x, size_t ldx, size_t n_rows, size_t frame_rows);

#endif
