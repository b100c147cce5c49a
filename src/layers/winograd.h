/*
 * winograd.h - causal convolutions of r = 7 or 2 taps by Winograd F(m, r) in fp32,
 * m = 4 or 6 (and 10 for r = 7): in the codec's "winograd" precisions, the residual
 * units' k7 convs and the decoder blocks' transposed convs (2 taps over the input rows,
 * n = stride * c_out, conv.h), for CPUs without a fast bf16 GEMM.
 *
 * A tile is m outputs d rows apart (d the dilation), t, t + d, ..., t + (m-1) d; their
 * n = m + r - 1 input rows t + l d (l < n, history coordinates) go through
 *   V_k = sum_l BT[k][l] x_l                 (input transform, n x n)
 *   M_k = V_k U_k,  U_k = sum_j G[k][j] W_j  (n GEMMs over all tiles, U packed at load)
 *   y_i = sum_k AT[i][k] M_k + bias          (output transform, m x n)
 * which is n instead of r m multiplications per m outputs and input channel (r = 7: 10
 * for 28 with m = 4, 12 for 42 with m = 6, 16 for 70 with m = 10; r = 2: 5 for 8, 7 for
 * 12). The matrices come from exact Toom-Cook interpolation at the first n - 1 of 0, +-1,
 * +-2, +-1/2, +-3/2, +-3/4, +-1/4, +-3, and infinity. With r = 7 the fp32 rounding of the
 * transforms grows with m, far above the direct sum's at m = 10
 * (docs/ARCHITECTURE.md#winograd-convolutions), so m = 10 is only offered where bf16 work
 * elsewhere dominates the error (the codec's winograd-bf16 precision). U takes n / r of
 * the conv's panel memory.
 *
 * Tiles lie on a grid fixed per frame (frame_rows rows): each residue class mod d of
 * a frame's rows is cut into tiles of m, the last one partial (1 to m - 1 outputs)
 * where the count is not a multiple of m. kz_wino_tile_for picks the m that gives
 * fewer transformed rows per frame (short classes favour small tiles). A partial tile of
 * c outputs needs input rows l < c + r - 1;
 * rows l >= c + r - 1 lie in the next frame, and the tile always takes zeros for them
 * (exact in real arithmetic: no output of the tile depends on them). Chunks hold whole
 * frames, so every chunk size and thread count gives the same bits, as with the exact
 * path, and a run never reads the conv's own panels (kz_wino_init reads them once).
 */
#ifndef KZ_WINOGRAD_H
#define KZ_WINOGRAD_H

#include <stddef.h>

#include "layers/conv.h"

enum { KZ_WINO_MAX_R = 7, KZ_WINO_MAX_M = 10, KZ_WINO_MAX_N = 16 };

typedef struct kz_wino {
    kz_conv u[KZ_WINO_MAX_N]; /* U_k as 1x1 convs [k_in -> n], no bias, owned (n_pts) */
    const float *bias;        /* the conv's bias [n] or NULL (borrowed) */
    size_t k_in, n, dilation;
    size_t r;     /* taps: 2 or 7 */
    size_t m;     /* outputs per tile: 4, 6 or 10 */
    size_t n_pts; /* m + r - 1: transformed rows per tile */
    size_t group; /* most tiles per group of the grouped path (a run rounds it down to a
                     multiple of the kernels' gemm_mr), 0: whole-call path (kz_wino_run);
                     set by kz_wino_init, tests may change it */
} kz_wino;

/* Scratch a run needs: floats and size_t indices. */
typedef struct kz_wino_scratch {
    float *f;
    size_t n_f;
    size_t *idx;
    size_t n_idx;
} kz_wino_scratch;

/* The tile size (4, 6, or 10 with r = 7; at most max_m) whose tiles need the fewest
 * transformed rows for frames of frame_rows rows at this dilation and r taps; the smaller
 * on a tie (the smaller rounding error). */
size_t kz_wino_tile_for(size_t frame_rows, size_t dilation, size_t r, size_t max_m);

/* Builds the transformed weights of c (a causal conv with 2 or 7 taps and fp32 panels) for
 * tiles of m = 4 or 6 outputs, or 10 with 7 taps. c must outlive w. Returns KZ_OK or
 * KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_wino_init(kz_wino *w, const kz_conv *c, size_t m);

/* The same form over transformed weights already laid out at u (stored by `kztts
 * quantize`): U_k's panels [n_panels, k_in, KZ_PANEL] at u + k * n_panels * k_in * KZ_PANEL
 * floats for k < m + r - 1, 64-byte aligned, borrowed (never written or freed). c needs
 * no panels. Returns KZ_OK. */
kz_status kz_wino_init_mapped(kz_wino *w, const kz_conv *c, size_t m, const float *u);

/* Floats of the transformed weights of c for tiles of m outputs (the size u above). */
size_t kz_wino_floats(const kz_conv *c, size_t m);

void kz_wino_free(kz_wino *w);

/* Scratch floats and indices for n_frames frames of frame_rows output rows. */
void kz_wino_scratch_need(const kz_wino *w, size_t frame_rows, size_t n_frames, size_t *n_f,
                          size_t *n_idx);

/* y[n_rows, ldy] = conv(x) (store) where x points at the first history row, with
 * n_rows a multiple of frame_rows; s large enough (kz_wino_scratch_need). */
void kz_wino_run(const kz_wino *w, kz_exec *e, const kz_wino_scratch *s, float *y, size_t ldy,
                 const float *x, size_t ldx, size_t n_rows, size_t frame_rows);

#endif
