/*
 * gemm_bf16_fma.h - the part of the FMA bf16 conv-GEMMs (x86/gemm_bf16_avx2.c,
 * arm/gemm_bf16_neon.c) that does not depend on the vector ISA: the tile job and the
 * blocking driver. Included once by each, after its MR, KC, MC_MAX and X_BLOCK_BYTES
 * constants; the includer defines tile_rows() (one micro-tile of 1..MR rows over one
 * k block) and calls bf16_fma_drive() from its kz_gemm_bf16_* entry point.
 *
 * Data flow of one call, rows [t0, t1) x panels [p0, p1):
 *   for each row block of up to mc rows (gemm_blocking.h; its fp32 x rows, all taps,
 *   stay in L2)
 *     for each 16-column panel p
 *       for each k block of up to KC pair rows (KC x 64 B of the panel, L1)
 *         for each tile of MR rows: tile_rows(), partial sums parked in part[]
 *         between k blocks, the epilogue after the last.
 * An output element's sequence of FMAs depends only on its pairs' order, never on
 * this blocking or on the split of rows and panels over calls.
 */
#ifndef KZ_GEMM_BF16_FMA_H
#define KZ_GEMM_BF16_FMA_H

#include "kernels/gemm_blocking.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

typedef struct tile_job {
    const uint16_t *x;     // x row of the tile's first output row (bf16), or
    const float *xf;       // the same as fp32 values (kz_gemm_bf16_args.xf) when given
    size_t ldx;            // x row stride in elements
    size_t tap_step;       // tap_stride * ldx
    size_t k_pairs;        // input channel pairs per tap
    const uint16_t *panel; // [taps * k_pairs, 16, 2]
    size_t r0;             // k block: pair rows [r0, r1), r = j * k_pairs + q
    size_t r1;
    float *part;           // [MR, 16] partial sums carried between k blocks
    int first;             // r0 == 0: start from zero
    int last;              // r1 == taps * k_pairs: run the epilogue
    float *y;              // y row of the tile's first row, at the panel's first column
    size_t ldy;            // y row stride
    const float *bias;     // bias at the panel's first column, or NULL
    int accumulate;        // KZ_GEMM_ACCUMULATE
    size_t width;          // valid columns of this panel, 1..16
} tile_job;

_Static_assert(MC_MAX % MR == 0, "row blocks of whole tiles must fit part[]");

static void tile_rows(const tile_job *jb, size_t rows);

static void bf16_fma_drive(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                           size_t p1) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    const size_t pair_rows = w->taps * w->k_pairs;
    const size_t span = w->taps ? (w->taps - 1) * a->tap_stride : 0;
    const size_t x_row_bytes = (w->k_pairs ? 2 * w->k_pairs : 1) * sizeof(float);
    const size_t mc = kz_gemm_row_block(t1 > t0 ? t1 - t0 : 0, x_row_bytes, span, MR, MC_MAX,
                                        X_BLOCK_BYTES);
    _Alignas(32) float part[MC_MAX * KZ_PANEL];
    tile_job jb = {
        .ldx = a->ldx,
        .tap_step = a->tap_stride * a->ldx,
        .k_pairs = w->k_pairs,
        .ldy = a->ldy,
        .accumulate = a->mode == KZ_GEMM_ACCUMULATE,
    };
    for (size_t tb = t0; tb < t1; tb += mc) {
        const size_t te = t1 - tb < mc ? t1 : tb + mc;
        for (size_t p = p0; p < p1; p++) {
            const size_t o0 = p * KZ_PANEL;
            jb.panel = w->data + p * pair_rows * KZ_PANEL * 2;
            jb.width = w->n - o0 < KZ_PANEL ? w->n - o0 : KZ_PANEL;
            jb.bias = a->bias ? a->bias + o0 : NULL;
            size_t r0 = 0;
            do {
                const size_t r1 = pair_rows - r0 < KC ? pair_rows : r0 + KC;
                jb.r0 = r0;
                jb.r1 = r1;
                jb.first = r0 == 0;
                jb.last = r1 == pair_rows;
                for (size_t t = tb; t < te; t += MR) {
                    jb.x = a->x ? a->x + t * a->ldx : NULL;
                    jb.xf = a->xf ? a->xf + t * a->ldx : NULL;
                    jb.y = a->y + t * a->ldy + o0;
                    jb.part = part + (t - tb) * KZ_PANEL;
                    tile_rows(&jb, te - t < MR ? te - t : MR);
                }
                r0 = r1;
            } while (r0 < pair_rows);
        }
    }
}

#endif
