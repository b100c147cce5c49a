/*
 * gemm_blocking.h - the row blocking shared by the conv-GEMMs (x86/gemm_avx2.c,
 * x86/gemm_avx512.c, x86/gemm_bf16_avx512.c, x86/gemm_bf16_avx2.c, arm/gemm_neon.c,
 * arm/gemm_bf16_neon.c): how many output rows one row block takes.
 *
 * Each row block streams the whole packed weight once, while its x rows (all taps:
 * the block's rows plus span history rows) stay in L2 for every panel. So: as many
 * whole micro-tiles of mr rows as keep the x rows within budget bytes, at least one
 * tile, at most mc_max rows (a multiple of mr), then evened out over the call's rows,
 * so that a small remainder block does not cost a full extra weight pass.
 * Blocking never changes a result (each kernel's header says why).
 */
#ifndef KZ_GEMM_BLOCKING_H
#define KZ_GEMM_BLOCKING_H

#include <stddef.h>

static inline size_t kz_gemm_row_block(size_t rows, size_t row_bytes, size_t span, size_t mr,
                                       size_t mc_max, size_t budget) {
    const size_t fit = budget / (row_bytes ? row_bytes : 1);
    size_t mc = fit > span ? (fit - span) / mr * mr : 0;
    mc = mc < mr ? mr : mc;
    mc = mc > mc_max ? mc_max : mc;
    const size_t n_blocks = (rows + mc - 1) / mc;
    const size_t even = n_blocks ? (rows + n_blocks - 1) / n_blocks : mc;
    return (even + mr - 1) / mr * mr;
}

#endif
