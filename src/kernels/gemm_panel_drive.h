/*
 * gemm_panel_drive.h - the part of the one-panel conv-GEMMs that depends on neither the
 * vector ISA nor the weight format: the tile job and the blocking driver, shared by the
 * fp32 kernels (x86/gemm_avx2.c, arm/gemm_neon.c) and the FMA bf16 ones
 * (x86/gemm_bf16_avx2.c, arm/gemm_bf16_neon.c). Included once by each, after its MR, KC,
 * MC_MAX and X_BLOCK_BYTES constants; the includer defines tile_rows() (one micro-tile
 * of 1..MR rows over one k block) and calls panel_drive() on panel_gemm_f32() or
 * panel_gemm_bf16() of its arguments.
 *
 * A panel row is 64 bytes in both formats: 16 fp32 weights of one input channel
 * (kz_packed), or 16 pairs of bf16 weights of two channels (kz_packed_bf16); a panel
 * holds taps * tap_rows of them, r = j * tap_rows + i.
 *
 * Data flow of one call, rows [t0, t1) x panels [p0, p1):
 *   for each row block of up to mc rows (gemm_blocking.h; its fp32 x rows, all taps,
 *   stay in L2)
 *     for each 16-column panel p
 *       for each k block of up to KC panel rows (KC x 64 B of the panel, L1)
 *         for each tile of MR rows: tile_rows(), partial sums parked in part[]
 *         between k blocks, the epilogue after the last.
 * An output element's sequence of FMAs depends only on its panel rows' order, never on
 * this blocking or on the split of rows and panels over calls.
 */
#ifndef KZ_GEMM_PANEL_DRIVE_H
#define KZ_GEMM_PANEL_DRIVE_H

#include "kernels/gemm_blocking.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

/* Bytes of one panel row in either format. */
#define PANEL_ROW_BYTES (KZ_PANEL * sizeof(float))

typedef struct tile_job {
    const float *x;        // fp32 x row of the tile's first output row (the bf16 GEMM's
                           // xf, the rounded rows as fp32 values), or NULL
    const uint16_t *xh;    // the bf16 GEMM's bf16 x row when it has no xf, else NULL
    size_t ldx;            // x row stride in elements
    size_t tap_step;       // tap_stride * ldx
    size_t tap_rows;       // panel rows per tap: input channels, or bf16 channel pairs
    const void *panel;     // the panel's taps * tap_rows rows of PANEL_ROW_BYTES
    size_t r0;             // k block: panel rows [r0, r1)
    size_t r1;
    float *part;           // [MR, 16] partial sums carried between k blocks
    int first;             // r0 == 0: start from zero
    int last;              // r1 == taps * tap_rows: run the epilogue
    float *y;              // y row of the tile's first row, at the panel's first column
    size_t ldy;            // y row stride
    const float *bias;     // bias at the panel's first column, or NULL
    int accumulate;        // KZ_GEMM_ACCUMULATE
    size_t width;          // valid columns of this panel, 1..16
} tile_job;

/* One call in the driver's terms. */
typedef struct panel_gemm {
    const unsigned char *panels; // panel p at p * taps * tap_rows * PANEL_ROW_BYTES
    size_t taps, tap_rows, n, n_panels;
    size_t row_channels;         // input channels per panel row: 1 (fp32) or 2 (bf16)
    const float *x;              // fp32 x rows (see tile_job), or NULL
    const uint16_t *xh;          // bf16 x rows, or NULL
    size_t ldx, tap_stride, n_rows;
    float *y;
    size_t ldy;
    const float *bias;
    int accumulate;
} panel_gemm;

_Static_assert(MC_MAX % MR == 0, "row blocks of whole tiles must fit part[]");

static void tile_rows(const tile_job *jb, size_t rows);

static inline panel_gemm panel_gemm_f32(const kz_gemm_args *a) {
    const kz_packed *w = a->w;
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= w->k_in);
    return (panel_gemm){.panels = (const unsigned char *)w->data,
                        .taps = w->taps,
                        .tap_rows = w->k_in,
                        .n = w->n,
                        .n_panels = w->n_panels,
                        .row_channels = 1,
                        .x = a->x,
                        .ldx = a->ldx,
                        .tap_stride = a->tap_stride,
                        .n_rows = a->n_rows,
                        .y = a->y,
                        .ldy = a->ldy,
                        .bias = a->bias,
                        .accumulate = a->mode == KZ_GEMM_ACCUMULATE};
}

static inline panel_gemm panel_gemm_bf16(const kz_gemm_bf16_args *a) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    return (panel_gemm){.panels = (const unsigned char *)w->data,
                        .taps = w->taps,
                        .tap_rows = w->k_pairs,
                        .n = w->n,
                        .n_panels = w->n_panels,
                        .row_channels = 2,
                        .x = a->xf,
                        .xh = a->xf ? NULL : a->x,
                        .ldx = a->ldx,
                        .tap_stride = a->tap_stride,
                        .n_rows = a->n_rows,
                        .y = a->y,
                        .ldy = a->ldy,
                        .bias = a->bias,
                        .accumulate = a->mode == KZ_GEMM_ACCUMULATE};
}

static void panel_drive(const panel_gemm *g, size_t t0, size_t t1, size_t p0, size_t p1) {
    KZ_ASSERT(t0 <= t1 && t1 <= g->n_rows && p0 <= p1 && p1 <= g->n_panels);
    const size_t k_rows = g->taps * g->tap_rows;
    const size_t span = g->taps ? (g->taps - 1) * g->tap_stride : 0;
    const size_t x_row_bytes = (g->tap_rows ? g->row_channels * g->tap_rows : 1) * sizeof(float);
    const size_t mc = kz_gemm_row_block(t1 > t0 ? t1 - t0 : 0, x_row_bytes, span, MR, MC_MAX,
                                        X_BLOCK_BYTES);
    _Alignas(32) float part[MC_MAX * KZ_PANEL];
    tile_job jb = {
        .ldx = g->ldx,
        .tap_step = g->tap_stride * g->ldx,
        .tap_rows = g->tap_rows,
        .ldy = g->ldy,
        .accumulate = g->accumulate,
    };
    for (size_t tb = t0; tb < t1; tb += mc) {
        const size_t te = t1 - tb < mc ? t1 : tb + mc;
        for (size_t p = p0; p < p1; p++) {
            const size_t o0 = p * KZ_PANEL;
            jb.panel = g->panels + p * k_rows * PANEL_ROW_BYTES;
            jb.width = g->n - o0 < KZ_PANEL ? g->n - o0 : KZ_PANEL;
            jb.bias = g->bias ? g->bias + o0 : NULL;
            size_t r0 = 0;
            do {
                const size_t r1 = k_rows - r0 < KC ? k_rows : r0 + KC;
                jb.r0 = r0;
                jb.r1 = r1;
                jb.first = r0 == 0;
                jb.last = r1 == k_rows;
                for (size_t t = tb; t < te; t += MR) {
                    jb.x = g->x ? g->x + t * g->ldx : NULL;
                    jb.xh = g->xh ? g->xh + t * g->ldx : NULL;
                    jb.y = g->y + t * g->ldy + o0;
                    jb.part = part + (t - tb) * KZ_PANEL;
                    tile_rows(&jb, te - t < MR ? te - t : MR);
                }
                r0 = r1;
            } while (r0 < k_rows);
        }
    }
}

#endif
