/*
 * gemm_bf16_avx512.c - AVX512_BF16 conv-GEMM (vdpbf16ps) and the rounding of
 * activations to bf16 (vcvtneps2bf16); the definition is ref/gemm_bf16_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1), the blocking of
 * x86/gemm_pair_drive_avx512.h (shared with gemm_avx512.c, as are the tile job and the
 * accumulators' park and epilogue) with one 64-byte panel row holding a pair of input
 * channels:
 *
 *   for each row block of up to mc rows        (its bf16 x rows, all taps, stay in L2)
 *     for each pair of 16-column panels (a single panel at an odd end)
 *       for each k block of up to KC pair rows  (2 x KC x 64 B = 32 KB)
 *         for each tile of MR = 8 rows: 16 zmm accumulators [8, 32]
 *           per pair row r = j * k_pairs + q: one zmm load of W per panel, for
 *           each row a 32-bit broadcast of the x pair and one vdpbf16ps per panel
 *           (32 multiply-adds, twice an fp32 FMA's)
 *           partial sums parked in part[] between k blocks; after the last:
 *           + bias, + y (accumulate mode), masked store of the valid columns
 *
 * Determinism: one lane is one output column and runs the pairs of its tap /
 * pair sequence in order from +0, partial sums parked unchanged, then the same
 * two adds; row blocks, panel pairing and tail tiles never change it, so any
 * split gives identical bits. Against the scalar definition the only freedom is
 * inside vdpbf16ps (denormal flushing, the rounding of the pair), bounded in
 * tests/unit/test_gemm_bf16.c.
 */
#include "kernels/kernels.h"

#include "runtime/error.h"

#include <immintrin.h>

enum {
    MR = 8,       // output rows per micro-tile
    NP = 2,       // panels per micro-tile
    KC = 256,     // pair rows per k block: 2 panels x 256 x 64 B = 32 KB
    MC_MAX = 192, // most rows per row block; bounds part[] to 24 KB of stack
    PREFETCH_ROWS = 128, // pair rows (64 B each) prefetched ahead into L2 (gemm_avx512.c)
};
// Budget for the bf16 x rows (all taps) of one row block, reused by every panel pair from L2.
#define X_BLOCK_BYTES (512u * 1024u)

#include "kernels/x86/gemm_pair_drive_avx512.h"

static inline __attribute__((always_inline)) __m512bh as_bh(__m512i v) {
    return (__m512bh)v;
}

/* One micro-tile of `rows` (1..MR) x `np` panels (1 or 2), both constants after
 * inlining, over one k block. */
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows,
                                                       const int np) {
    const __m512 zero = _mm512_setzero_ps();
    TILE_ROWS(TILE_INIT)
    const size_t ldx = jb->ldx;
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->tap_rows;
        const size_t q0 = r - j * jb->tap_rows;
        const size_t end = (j + 1) * jb->tap_rows < jb->r1 ? (j + 1) * jb->tap_rows : jb->r1;
        const uint16_t *xp = (const uint16_t *)jb->x + j * jb->tap_step + 2 * q0;
        const uint16_t *wa = (const uint16_t *)jb->panel + r * KZ_PANEL * 2;
        const uint16_t *wb = np > 1 ? wa + jb->panel_step : wa;
        const size_t count = end - r;
        for (size_t k = 0; k < count; k++) {
            _mm_prefetch((const char *)(wa + (k + PREFETCH_ROWS) * KZ_PANEL * 2), _MM_HINT_T1);
            if (np > 1) {
                _mm_prefetch((const char *)(wb + (k + PREFETCH_ROWS) * KZ_PANEL * 2),
                             _MM_HINT_T1);
            }
            const __m512bh w0 = as_bh(_mm512_load_si512(wa + k * KZ_PANEL * 2));
            const __m512bh w1 =
                as_bh(np > 1 ? _mm512_load_si512(wb + k * KZ_PANEL * 2) : _mm512_setzero_si512());
#define TILE_DOT(q)                                                                            \
    if (rows > q) {                                                                            \
        const __m512bh xb =                                                                    \
            as_bh(_mm512_broadcastd_epi32(_mm_loadu_si32(xp + q * ldx + 2 * k)));              \
        lo##q = _mm512_dpbf16_ps(lo##q, xb, w0);                                               \
        if (np > 1) {                                                                          \
            hi##q = _mm512_dpbf16_ps(hi##q, xb, w1);                                           \
        }                                                                                      \
    }
            TILE_ROWS(TILE_DOT)
        }
        r = end;
    }
    TILE_FINISH()
}
#undef TILE_DOT

void kz_gemm_bf16_avx512(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                         size_t p1) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    PAIR_DRIVE(a, w, w->k_pairs, KZ_PANEL * 2,
               (w->k_pairs ? 2 * w->k_pairs : 1) * sizeof(uint16_t), t0, t1, p0, p1);
}

void kz_round_bf16_avx512(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                          size_t n_cols) {
    KZ_ASSERT(ldy >= n_cols);
    for (size_t r = 0; r < n_rows; r++) {
        uint16_t *yr = y + r * ldy;
        const float *xr = x + r * ldx;
        for (size_t c = 0; c < n_cols; c += 16) {
            const size_t width = n_cols - c < 16 ? n_cols - c : 16;
            const __mmask16 m = (__mmask16)(width == 16 ? 0xffffu : (1u << width) - 1u);
            const __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xr + c));
            _mm256_mask_storeu_epi16(yr + c, m, (__m256i)b);
        }
        for (size_t c = n_cols; c < ldy; c++) {
            yr[c] = 0;
        }
    }
}
