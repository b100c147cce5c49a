/*
 * gemm_avx512.c - AVX-512 conv-GEMM, bit-identical to ref/gemm_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1) (the blocking, the tile job and
 * the accumulators' park and epilogue are x86/gemm_pair_drive_avx512.h, shared with the
 * bf16 kernel; the tile's multiply-adds are this file's):
 *
 *   for each row block of up to mc rows        (its x rows, all taps, stay in L2)
 *     for each pair of 16-column panels (a single panel at an odd end)
 *       for each k block of up to KC panel rows   (2 x KC x 64 B = 32 KB, L1 / L2)
 *         for each tile of MR = 8 rows: 16 zmm accumulators [8, 32]
 *           acc = 0 (first k block) or partial sums from part[]
 *           per panel row r = j * k_in + i: one zmm load of W per panel, for
 *           each row a broadcast of x[t + j*tap_stride, i] and one FMA per panel
 *           store partial sums to part[], or after the last k block: + bias,
 *           + y (accumulate mode), masked store of the valid columns to y
 *
 * Bit-identity with the scalar definition follows as in gemm_avx2.c: one zmm
 * lane is one output column and runs the fmaf chain of gemm_ref.c (j outer,
 * i inner, from +0) with partial sums parked unchanged between k blocks, then
 * the same two adds. Pairing panels, row blocks and tail tiles (fewer rows,
 * a compile-time count; masked columns) never change an element's sequence.
 *
 * With two 512-bit FMA units of 4-cycle latency 16 accumulators cover the
 * latency; 2 W loads + 8 broadcasts per 16 FMAs leave load-port headroom.
 */
#include "kernels/kernels.h"

#include <immintrin.h>

enum {
    MR = 8,       // output rows per micro-tile (the table's gemm_mr)
    NP = 2,       // panels per micro-tile
    KC = 256,     // panel rows per k block: 2 panels x 256 x 64 B = 32 KB
    MC_MAX = 192, // most rows per row block; bounds part[] to 24 KB of stack
    // Panel rows (64 B each) prefetched 8 KB ahead into L2, not into L1: few-row calls
    // stream their weights from DRAM and need more requests in flight than L1 prefetches
    // keep (docs/ARCHITECTURE.md#conv-gemm).
    PREFETCH_ROWS = 128,
};
// Budget for the x rows (all taps) of one row block, reused by every panel pair from L2
// (1 MB and more on AVX-512 cores).
#define X_BLOCK_BYTES (512u * 1024u)

#include "kernels/x86/gemm_pair_drive_avx512.h"

/* One micro-tile of `rows` (1..MR) x `np` panels (1 or 2), both constants
 * after inlining, over one k block. */
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows,
                                                       const int np) {
    const __m512 zero = _mm512_setzero_ps();
    TILE_ROWS(TILE_INIT)
    const size_t ldx = jb->ldx;
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->tap_rows;
        const size_t i = r - j * jb->tap_rows;
        const size_t end = (j + 1) * jb->tap_rows < jb->r1 ? (j + 1) * jb->tap_rows : jb->r1;
        const float *xp = (const float *)jb->x + j * jb->tap_step + i;
        const float *wa = (const float *)jb->panel + r * KZ_PANEL;
        const float *wb = np > 1 ? wa + jb->panel_step : wa;
        const size_t count = end - r;
        for (size_t k = 0; k < count; k++) {
            // The first tile of a k block streams the panels from DRAM (or L3) into L2.
            _mm_prefetch((const char *)(wa + (k + PREFETCH_ROWS) * KZ_PANEL), _MM_HINT_T1);
            if (np > 1) {
                _mm_prefetch((const char *)(wb + (k + PREFETCH_ROWS) * KZ_PANEL), _MM_HINT_T1);
            }
            const __m512 w0 = _mm512_load_ps(wa + k * KZ_PANEL);
            const __m512 w1 = np > 1 ? _mm512_load_ps(wb + k * KZ_PANEL) : zero;
#define TILE_FMA(q)                                                                            \
    if (rows > q) {                                                                            \
        const __m512 xb = _mm512_set1_ps(xp[q * ldx + k]);                                     \
        lo##q = _mm512_fmadd_ps(xb, w0, lo##q);                                                \
        if (np > 1) {                                                                          \
            hi##q = _mm512_fmadd_ps(xb, w1, hi##q);                                            \
        }                                                                                      \
    }
            TILE_ROWS(TILE_FMA)
        }
        r = end;
    }
    TILE_FINISH()
}
#undef TILE_FMA

void kz_gemm_avx512(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const kz_packed *w = a->w;
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= w->k_in);
    PAIR_DRIVE(a, w, w->k_in, KZ_PANEL, (w->k_in ? w->k_in : 1) * sizeof(float), t0, t1, p0, p1);
}
