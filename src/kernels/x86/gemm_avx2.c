/*
 * gemm_avx2.c - AVX2 + FMA conv-GEMM, bit-identical to ref/gemm_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1) (the blocking is
 * kernels/gemm_panel_drive.h, shared with the bf16 FMA kernels, the accumulators' park and
 * epilogue x86/gemm_store_avx2.h, shared with gemm_bf16_avx2.c; the tile is this file's):
 *
 *   for each row block of up to mc rows       (its x rows, all taps, stay in L2)
 *     for each 16-column panel p
 *       for each k block of up to KC panel rows  (KC x 64 B of the panel, L1 / L2)
 *         for each tile of MR = 6 rows: 12 ymm accumulators [6, 16]
 *           acc = 0 (first k block) or partial sums from part[]
 *           per panel row r = j * k_in + i: two loads of W, for each row a
 *           broadcast of x[t + j*tap_stride, i] and two FMAs
 *           store partial sums to part[], or after the last k block: + bias,
 *           + y (accumulate mode), store to y
 *
 * Why this is bit-identical to the scalar definition: each ymm lane is one
 * output column and sees exactly the fmaf chain of gemm_ref.c (j outer, i
 * inner, starting from +0), because k blocks run in order and a partial sum
 * parked in part[] is reloaded unchanged. Blocking and tiling only decide
 * which elements are computed together, never an element's own order. The
 * epilogue is the same add, add. Tail rows use the same code with fewer rows
 * (a compile-time row count), tail columns compute all 16 lanes of the
 * zero-padded panel and store only the valid ones.
 *
 * 12 independent accumulators cover the FMA latency even where a ymm FMA runs as
 * two 128-bit halves (one per cycle, 5-cycle latency), and the 2 W loads + 6
 * broadcasts per 12 FMAs fit two load ports. KC only bounds the k block to L1/L2
 * size: the panel streams from L2 fast enough for the codec's k=7 convs at any KC
 * from 128 to 1536. Row blocks are balanced and W is prefetched into L2 for the
 * weight-streaming shapes (few rows, large weights)
 * (docs/ARCHITECTURE.md#conv-gemm).
 */
#include "kernels/kernels.h"

#include "kernels/x86/gemm_store_avx2.h"
#include "runtime/error.h"

#include <immintrin.h>

enum {
    MR = 6,       // output rows per micro-tile (the table's gemm_mr)
    KC = 512,     // panel rows per k block (32 KB); see the header
    MC_MAX = 192, // most rows per row block; bounds part[] to 12 KB of stack
    PREFETCH_ROWS = 128, // panel rows (64 B each) prefetched ahead into L2 (gemm_avx512.c)
};
// Budget for the x rows (all taps) of one row block, reused by every panel from L2
// (512 KB on the smallest AVX2 cores, 1-2 MB on recent ones).
#define X_BLOCK_BYTES (320u * 1024u)

#include "kernels/gemm_panel_drive.h"

/* One micro-tile of `rows` (1..MR, a constant after inlining) over one k block.
 * The accumulators are named variables, not an array, so that GCC keeps all
 * twelve in registers; rows beyond `rows` are dead code after inlining. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows) {
    const __m256 zero = _mm256_setzero_ps();
    TILE_ROWS(GEMM_AVX2_TILE_INIT)
    const size_t ldx = jb->ldx;
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->tap_rows;
        const size_t i = r - j * jb->tap_rows;
        const size_t end = (j + 1) * jb->tap_rows < jb->r1 ? (j + 1) * jb->tap_rows : jb->r1;
        const float *xp = jb->x + j * jb->tap_step + i;
        const float *wp = (const float *)jb->panel + r * KZ_PANEL;
        const size_t count = end - r;
        for (size_t k = 0; k < count; k++) {
            // The first tile of a k block streams the panel from L2 or DRAM.
            _mm_prefetch((const char *)(wp + (k + PREFETCH_ROWS) * KZ_PANEL), _MM_HINT_T1);
            const __m256 w0 = _mm256_load_ps(wp + k * KZ_PANEL);
            const __m256 w1 = _mm256_load_ps(wp + k * KZ_PANEL + 8);
#define TILE_FMA(q)                                                                            \
    if (rows > q) {                                                                            \
        const __m256 xb = _mm256_broadcast_ss(xp + q * ldx + k);                               \
        lo##q = _mm256_fmadd_ps(xb, w0, lo##q);                                                \
        hi##q = _mm256_fmadd_ps(xb, w1, hi##q);                                                \
    }
            TILE_ROWS(TILE_FMA)
        }
        r = end;
    }
    GEMM_AVX2_TILE_FINISH()
}
#undef TILE_FMA

static void tile_rows(const tile_job *jb, size_t rows) {
    switch (rows) {
    case 1: tile(jb, 1); break;
    case 2: tile(jb, 2); break;
    case 3: tile(jb, 3); break;
    case 4: tile(jb, 4); break;
    case 5: tile(jb, 5); break;
    default: tile(jb, MR); break;
    }
}

void kz_gemm_avx2(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const panel_gemm g = panel_gemm_f32(a);
    panel_drive(&g, t0, t1, p0, p1);
}
