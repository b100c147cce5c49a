/*
 * gemm_neon.c - NEON (aarch64) conv-GEMM, bit-identical to ref/gemm_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1), x86/gemm_avx2.c's with
 * 4-lane vectors (the blocking is kernels/gemm_panel_drive.h, shared with the bf16 FMA
 * kernels; the tile is this file's):
 *
 *   for each row block of up to mc rows       (its x rows, all taps, stay in L2)
 *     for each 16-column panel p
 *       for each k block of up to KC panel rows  (KC x 64 B of the panel, L1)
 *         for each tile of MR = 6 rows: 24 q-register accumulators [6, 16]
 *           acc = 0 (first k block) or partial sums from part[]
 *           per panel row r = j * k_in + i: four loads of W (one 64-byte
 *           row), for each row a broadcast load (LD1R) of
 *           x[t + j*tap_stride, i] and four FMAs
 *           store partial sums to part[], or after the last k block: + bias,
 *           + y (accumulate mode), store to y
 *
 * Why this is bit-identical to the scalar definition: each lane of each
 * accumulator is one output column and sees exactly the fmaf chain of
 * gemm_ref.c (j outer, i inner, starting from +0): vfmaq_f32 rounds once like
 * fmaf, k blocks run in order and a partial sum parked in part[] is reloaded
 * unchanged. Blocking and tiling only decide which elements are computed
 * together, never an element's own order. The epilogue is the same add, add.
 * Tail rows use the same code with fewer rows (a compile-time row count),
 * tail columns compute all 16 lanes of the zero-padded panel and store only
 * the valid ones.
 *
 * Register budget: AArch64 has 32 q registers; 6 rows x 4 vectors = 24
 * accumulators + 4 W vectors + 1 broadcast leave 3 spare (7 rows would need
 * 33). Per panel row that is 4 + 6 loads for 24 FMAs, within the two load
 * ports and two FMA pipes of current big ARM cores. KC = 256 (16 KB of
 * panel) fits the 32-64 KB L1 of phone cores; the x budget assumes 256-512 KB
 * of L2 per core. These sizes follow from the budgets, untuned on ARM hardware
 * (tested under qemu).
 */
#include "kernels/kernels.h"

#include "kernels/arm/gemm_store_neon.h"
#include "runtime/error.h"

#include <arm_neon.h>

enum {
    MR = 6,       // output rows per micro-tile (the table's gemm_mr)
    KC = 256,     // panel rows per k block (16 KB)
    MC_MAX = 192, // most rows per row block; bounds part[] to 12 KB of stack
    PREFETCH_ROWS = 16, // panel rows (64 B each) prefetched ahead
};
// Budget for the x rows (all taps) of one row block, reused by every panel from L2.
#define X_BLOCK_BYTES (192u * 1024u)

#include "kernels/gemm_panel_drive.h"

/* One micro-tile of `rows` (1..MR, a constant after inlining) over one k block.
 * The accumulators are named variables, not an array, so that GCC keeps all
 * 24 in registers; rows beyond `rows` are dead code after inlining. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
#define TILE_INIT(q)                                                                           \
    float32x4_t a##q##_0 = zero;                                                               \
    float32x4_t a##q##_1 = zero;                                                               \
    float32x4_t a##q##_2 = zero;                                                               \
    float32x4_t a##q##_3 = zero;                                                               \
    if (rows > q && !jb->first) {                                                              \
        a##q##_0 = vld1q_f32(jb->part + q * KZ_PANEL);                                         \
        a##q##_1 = vld1q_f32(jb->part + q * KZ_PANEL + 4);                                     \
        a##q##_2 = vld1q_f32(jb->part + q * KZ_PANEL + 8);                                     \
        a##q##_3 = vld1q_f32(jb->part + q * KZ_PANEL + 12);                                    \
    }
    TILE_ROWS(TILE_INIT)
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
            __builtin_prefetch(wp + (k + PREFETCH_ROWS) * KZ_PANEL);
            const float *wk = wp + k * KZ_PANEL;
            const float32x4_t w0 = vld1q_f32(wk);
            const float32x4_t w1 = vld1q_f32(wk + 4);
            const float32x4_t w2 = vld1q_f32(wk + 8);
            const float32x4_t w3 = vld1q_f32(wk + 12);
#define TILE_FMA(q)                                                                            \
    if (rows > q) {                                                                            \
        const float32x4_t xb = vld1q_dup_f32(xp + q * ldx + k);                                \
        a##q##_0 = vfmaq_f32(a##q##_0, xb, w0);                                                \
        a##q##_1 = vfmaq_f32(a##q##_1, xb, w1);                                                \
        a##q##_2 = vfmaq_f32(a##q##_2, xb, w2);                                                \
        a##q##_3 = vfmaq_f32(a##q##_3, xb, w3);                                                \
    }
            TILE_ROWS(TILE_FMA)
        }
        r = end;
    }
    if (!jb->last) {
#define TILE_PARK(q)                                                                           \
    if (rows > q) {                                                                            \
        vst1q_f32(jb->part + q * KZ_PANEL, a##q##_0);                                          \
        vst1q_f32(jb->part + q * KZ_PANEL + 4, a##q##_1);                                      \
        vst1q_f32(jb->part + q * KZ_PANEL + 8, a##q##_2);                                      \
        vst1q_f32(jb->part + q * KZ_PANEL + 12, a##q##_3);                                     \
    }
        TILE_ROWS(TILE_PARK)
        return;
    }
#define TILE_EPILOGUE(q)                                                                       \
    if (rows > q) {                                                                            \
        const float32x4_t v##q[4] = {a##q##_0, a##q##_1, a##q##_2, a##q##_3};                  \
        gemm_store_row_neon(jb->y + q * jb->ldy, v##q, jb->width, jb->bias, jb->accumulate);   \
    }
    TILE_ROWS(TILE_EPILOGUE)
}
#undef TILE_INIT
#undef TILE_FMA
#undef TILE_PARK
#undef TILE_EPILOGUE

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

void kz_gemm_neon(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const panel_gemm g = panel_gemm_f32(a);
    panel_drive(&g, t0, t1, p0, p1);
}
