/*
 * gemm_bf16_avx2.c - the bf16 conv-GEMM on AVX2 + FMA (no bf16 instructions):
 * bit-identical to its scalar definition ref/gemm_bf16_ref.c, and the rounding
 * of activations to bf16.
 *
 * Why: the bf16 panels are half the bytes of the fp32 ones. The codec's
 * projections and pointwise convolutions stream their weights at small chunks
 * (weight-bound), and their mapped pages are the process's memory; an fp32 FMA
 * on bf16 values widened to fp32 (exact) costs the same FMAs as the fp32 GEMM.
 *
 * Data flow: layers/conv.c rounds the conv input once per call with
 * kz_round_bf16_f32_avx2 (bf16 values kept as fp32, args.xf); given only bf16 rows
 * (args.x: tests, other callers) each tile widens its rows per tap segment first.
 * Then the blocking of gemm_panel_drive.h (shared with NEON: row blocks, 16-column
 * panels, k blocks of up to KC pair rows, one 64-byte panel row holding a pair of
 * input channels) runs this file's micro-tile (its accumulators' park and epilogue are
 * x86/gemm_store_avx2.h, shared with gemm_avx2.c):
 *
 *         for each tile of MR = 4 rows: 8 ymm accumulators [4, 16]
 *           per pair row r = j * k_pairs + q: two ymm loads of W, each widened
 *           to its odd elements (w & 0xffff0000) and even ones (w << 16); per
 *           row broadcasts of x1 and x0 (fp32), then
 *             acc = fma(x1, w1, acc); acc = fma(x0, w0, acc)   (lo and hi halves)
 *           partial sums parked in part[] between k blocks; after the last:
 *           + bias, + y (accumulate mode), store of the valid columns
 *
 * Exactness: a product of two bf16 values is exact in fp32, so each FMA is the
 * definition's one rounded add, in its order (odd element first, taps outer,
 * pairs inner, from +0); FMAs round denormals like fmaf (no flush). So every
 * element equals ref/gemm_bf16_ref.c bit for bit, from x or xf, whatever the
 * split of rows and panels (tests/unit/test_gemm_bf16.c). MR is 4, not
 * gemm_avx2.c's 6: the four widened weight vectors and the mask leave 8 of the 16
 * ymm registers for accumulators (5 rows spill).
 */
#include "kernels/kernels.h"

#include "kernels/x86/gemm_store_avx2.h"
#include "runtime/error.h"

#include <immintrin.h>
#include <string.h>

enum {
    MR = 4,       // output rows per micro-tile
    KC = 256,     // pair rows per k block (16 KB of panel)
    MC_MAX = 192, // most rows per row block; bounds part[] to 12 KB of stack
    PREFETCH_ROWS = 128, // pair rows (64 B each) prefetched ahead into L2 (gemm_avx2.c)
};
// Budget for the fp32 x rows (all taps) of one row block, reused by every panel from L2.
#define X_BLOCK_BYTES (320u * 1024u)

#include "kernels/gemm_panel_drive.h"

/* The odd (high) and even (low) bf16 halves of 32-bit pairs as fp32, exactly. */
static inline __attribute__((always_inline)) __m256 odd_f32(__m256i v, __m256i mask) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, mask));
}
static inline __attribute__((always_inline)) __m256 even_f32(__m256i v) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* x bf16 values [0, n) widened to fp32 (exact: the bits move to the high half). */
static inline __attribute__((always_inline)) void widen(float *dst, const uint16_t *src,
                                                        size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_store_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) {
        dst[i] = kz_bf16_to_f32(src[i]);
    }
}

/* One micro-tile of `rows` (1..MR, a constant after inlining) over one k block;
 * named accumulators so that GCC keeps them in registers. The pair loop broadcasts
 * fp32 x values: from xf when the caller gave it, else from xw, where each tap segment
 * widens the tile's bf16 x pairs first (in L1, at a cost the products feel: hence xf,
 * docs/ARCHITECTURE.md#conv-gemm). */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3)
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows) {
    _Alignas(32) float xw[MR][2 * KC];
    const __m256 zero = _mm256_setzero_ps();
    const __m256i mask = _mm256_set1_epi32((int)0xffff0000u);
    TILE_ROWS(GEMM_AVX2_TILE_INIT)
    const size_t ldx = jb->ldx;
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->tap_rows;
        const size_t q0 = r - j * jb->tap_rows;
        const size_t end = (j + 1) * jb->tap_rows < jb->r1 ? (j + 1) * jb->tap_rows : jb->r1;
        const uint16_t *wp = (const uint16_t *)jb->panel + r * KZ_PANEL * 2;
        const size_t count = end - r;
        const float *xs = jb->x ? jb->x + j * jb->tap_step + 2 * q0 : xw[0];
        const size_t xstride = jb->x ? ldx : 2 * KC;
        if (!jb->x) {
            const uint16_t *xp = jb->xh + j * jb->tap_step + 2 * q0;
            for (int q = 0; q < rows; q++) {
                widen(xw[q], xp + (size_t)q * ldx, 2 * count);
            }
        }
        for (size_t k = 0; k < count; k++) {
            _mm_prefetch((const char *)(wp + (k + PREFETCH_ROWS) * KZ_PANEL * 2), _MM_HINT_T1);
            const __m256i wlo = _mm256_loadu_si256((const __m256i *)(wp + k * KZ_PANEL * 2));
            const __m256i whi = _mm256_loadu_si256((const __m256i *)(wp + k * KZ_PANEL * 2 + 16));
            const __m256 w1lo = odd_f32(wlo, mask), w0lo = even_f32(wlo);
            const __m256 w1hi = odd_f32(whi, mask), w0hi = even_f32(whi);
#define TILE_FMA(q)                                                                            \
    if (rows > q) {                                                                            \
        const __m256 x1 = _mm256_broadcast_ss(xs + q * xstride + 2 * k + 1);                   \
        lo##q = _mm256_fmadd_ps(x1, w1lo, lo##q);                                              \
        hi##q = _mm256_fmadd_ps(x1, w1hi, hi##q);                                              \
        const __m256 x0 = _mm256_broadcast_ss(xs + q * xstride + 2 * k);                       \
        lo##q = _mm256_fmadd_ps(x0, w0lo, lo##q);                                              \
        hi##q = _mm256_fmadd_ps(x0, w0hi, hi##q);                                              \
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
    default: tile(jb, MR); break;
    }
}

void kz_gemm_bf16_avx2(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const panel_gemm g = panel_gemm_bf16(a);
    panel_drive(&g, t0, t1, p0, p1);
}

/* kz_bf16_round on 8 lanes: RNE, denormals to signed zero, NaN quieted. */
static inline __m256i round8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i near = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                         _mm256_and_si256(top, one)),
        16);
    const __m256i zero = _mm256_and_si256(top, _mm256_set1_epi32(0x8000));
    const __m256i nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    const __m256i exp = _mm256_and_si256(u, _mm256_set1_epi32(0x7f800000));
    const __m256i is_denormal = _mm256_cmpeq_epi32(exp, _mm256_setzero_si256());
    const __m256i is_nan = _mm256_cmpgt_epi32(
        _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i r = _mm256_blendv_epi8(near, zero, is_denormal);
    return _mm256_blendv_epi8(r, nan, is_nan);
}

void kz_round_bf16_avx2(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                        size_t n_cols) {
    KZ_ASSERT(ldy >= n_cols);
    for (size_t r = 0; r < n_rows; r++) {
        uint16_t *yr = y + r * ldy;
        const float *xr = x + r * ldx;
        size_t c = 0;
        for (; c + 16 <= n_cols; c += 16) {
            // Both halves hold values <= 0xffff, so the signed-to-unsigned pack is exact;
            // it interleaves 128-bit lanes, which the permute puts back in order.
            const __m256i a = round8(_mm256_loadu_ps(xr + c));
            const __m256i b = round8(_mm256_loadu_ps(xr + c + 8));
            const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
            _mm256_storeu_si256((__m256i *)(yr + c), packed);
        }
        for (; c < n_cols; c++) {
            yr[c] = kz_bf16_round(xr[c]);
        }
        for (c = n_cols; c < ldy; c++) {
            yr[c] = 0;
        }
    }
}

void kz_round_bf16_f32_avx2(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                            size_t n_cols) {
    KZ_ASSERT(ldy >= n_cols);
    for (size_t r = 0; r < n_rows; r++) {
        float *yr = y + r * ldy;
        const float *xr = x + r * ldx;
        size_t c = 0;
        for (; c + 8 <= n_cols; c += 8) {
            const __m256i b = _mm256_slli_epi32(round8(_mm256_loadu_ps(xr + c)), 16);
            _mm256_storeu_ps(yr + c, _mm256_castsi256_ps(b));
        }
        for (; c < n_cols; c++) {
            yr[c] = kz_bf16_to_f32(kz_bf16_round(xr[c]));
        }
        for (c = n_cols; c < ldy; c++) {
            yr[c] = 0.0f;
        }
    }
}
