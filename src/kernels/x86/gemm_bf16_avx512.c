/*
 * gemm_bf16_avx512.c - AVX512_BF16 conv-GEMM (vdpbf16ps) and the rounding of
 * activations to bf16 (vcvtneps2bf16); the definition is ref/gemm_bf16_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1), the blocking of
 * gemm_avx512.c with one 64-byte panel row holding a pair of input channels:
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
#include "kernels/gemm_blocking.h"

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

typedef struct tile_job {
    const uint16_t *x;     // x row of the tile's first output row
    size_t ldx;            // x row stride in bf16 elements
    size_t tap_step;       // tap_stride * ldx
    size_t k_pairs;        // input channel pairs per tap
    const uint16_t *panel; // first panel of the pair, [taps * k_pairs, 16, 2]
    size_t panel_step;     // bf16 elements from one panel to the next
    size_t r0;             // k block: pair rows [r0, r1), r = j * k_pairs + q
    size_t r1;
    float *part;           // [MR, 32] partial sums carried between k blocks
    int first;             // r0 == 0: start from zero
    int last;              // r1 == taps * k_pairs: run the epilogue
    float *y;              // y row of the tile's first row, at the first panel's first column
    size_t ldy;            // y row stride
    const float *bias;     // bias at the first panel's first column, or NULL
    int accumulate;        // KZ_GEMM_ACCUMULATE
    __mmask16 mask0;       // valid columns of the first panel
    __mmask16 mask1;       // valid columns of the second panel
} tile_job;

static inline __attribute__((always_inline)) __m512bh as_bh(__m512i v) {
    return (__m512bh)v;
}

/* Epilogue for 16 columns of one row: r = acc (+ bias) (y + r), masked store. */
static inline __attribute__((always_inline)) void store16(const tile_job *jb, float *yr,
                                                          const float *bias, __mmask16 m,
                                                          __m512 r) {
    if (bias) {
        r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, bias));
    }
    if (jb->accumulate) {
        r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr), r);
    }
    _mm512_mask_storeu_ps(yr, m, r);
}

/* One micro-tile of `rows` (1..MR) x `np` panels (1 or 2), both constants after
 * inlining, over one k block. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows,
                                                       const int np) {
    const __m512 zero = _mm512_setzero_ps();
#define TILE_INIT(q)                                                                           \
    __m512 lo##q = zero;                                                                       \
    __m512 hi##q = zero;                                                                       \
    if (rows > q && !jb->first) {                                                              \
        lo##q = _mm512_load_ps(jb->part + q * NP * KZ_PANEL);                                  \
        if (np > 1) {                                                                          \
            hi##q = _mm512_load_ps(jb->part + q * NP * KZ_PANEL + KZ_PANEL);                   \
        }                                                                                      \
    }
    TILE_ROWS(TILE_INIT)
    const size_t ldx = jb->ldx;
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->k_pairs;
        const size_t q0 = r - j * jb->k_pairs;
        const size_t end = (j + 1) * jb->k_pairs < jb->r1 ? (j + 1) * jb->k_pairs : jb->r1;
        const uint16_t *xp = jb->x + j * jb->tap_step + 2 * q0;
        const uint16_t *wa = jb->panel + r * KZ_PANEL * 2;
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
    if (!jb->last) {
#define TILE_PARK(q)                                                                           \
    if (rows > q) {                                                                            \
        _mm512_store_ps(jb->part + q * NP * KZ_PANEL, lo##q);                                  \
        if (np > 1) {                                                                          \
            _mm512_store_ps(jb->part + q * NP * KZ_PANEL + KZ_PANEL, hi##q);                   \
        }                                                                                      \
    }
        TILE_ROWS(TILE_PARK)
        return;
    }
    const float *bias1 = np > 1 && jb->bias ? jb->bias + KZ_PANEL : NULL;
#define TILE_EPILOGUE(q)                                                                       \
    if (rows > q) {                                                                            \
        float *yr = jb->y + q * jb->ldy;                                                       \
        store16(jb, yr, jb->bias, jb->mask0, lo##q);                                           \
        if (np > 1) {                                                                          \
            store16(jb, yr + KZ_PANEL, bias1, jb->mask1, hi##q);                               \
        }                                                                                      \
    }
    TILE_ROWS(TILE_EPILOGUE)
}
#undef TILE_INIT
#undef TILE_DOT
#undef TILE_PARK
#undef TILE_EPILOGUE

#define TILE_CASES(np)                                                                         \
    switch (rows) {                                                                            \
    case 1: tile(jb, 1, np); break;                                                            \
    case 2: tile(jb, 2, np); break;                                                            \
    case 3: tile(jb, 3, np); break;                                                            \
    case 4: tile(jb, 4, np); break;                                                            \
    case 5: tile(jb, 5, np); break;                                                            \
    case 6: tile(jb, 6, np); break;                                                            \
    case 7: tile(jb, 7, np); break;                                                            \
    default: tile(jb, MR, np); break;                                                          \
    }

static void tile_rows_two(const tile_job *jb, size_t rows) {
    TILE_CASES(2)
}

static void tile_rows_one(const tile_job *jb, size_t rows) {
    TILE_CASES(1)
}
#undef TILE_CASES

static __mmask16 panel_mask(size_t n, size_t p) {
    const size_t width = n - p * KZ_PANEL;
    return width >= KZ_PANEL ? (__mmask16)0xffff : (__mmask16)((1u << width) - 1u);
}

void kz_gemm_bf16_avx512(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                         size_t p1) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    const size_t pair_rows = w->taps * w->k_pairs;
    const size_t span = w->taps ? (w->taps - 1) * a->tap_stride : 0;
    const size_t x_row_bytes = (w->k_pairs ? 2 * w->k_pairs : 1) * sizeof(uint16_t);
    const size_t mc = kz_gemm_row_block(t1 > t0 ? t1 - t0 : 0, x_row_bytes, span, MR, MC_MAX,
                                        X_BLOCK_BYTES);
    _Alignas(64) float part[MC_MAX * NP * KZ_PANEL];
    tile_job jb = {
        .ldx = a->ldx,
        .tap_step = a->tap_stride * a->ldx,
        .k_pairs = w->k_pairs,
        .panel_step = pair_rows * KZ_PANEL * 2,
        .ldy = a->ldy,
        .accumulate = a->mode == KZ_GEMM_ACCUMULATE,
    };
    for (size_t tb = t0; tb < t1; tb += mc) {
        const size_t te = t1 - tb < mc ? t1 : tb + mc;
        for (size_t p = p0; p < p1; p += NP) {
            const int np = p1 - p >= NP ? NP : 1;
            const size_t o0 = p * KZ_PANEL;
            jb.panel = w->data + p * pair_rows * KZ_PANEL * 2;
            jb.bias = a->bias ? a->bias + o0 : NULL;
            jb.mask0 = panel_mask(w->n, p);
            jb.mask1 = np > 1 ? panel_mask(w->n, p + 1) : 0;
            size_t r0 = 0;
            do {
                const size_t r1 = pair_rows - r0 < KC ? pair_rows : r0 + KC;
                jb.r0 = r0;
                jb.r1 = r1;
                jb.first = r0 == 0;
                jb.last = r1 == pair_rows;
                for (size_t t = tb; t < te; t += MR) {
                    const size_t rows = te - t < MR ? te - t : MR;
                    jb.x = a->x + t * a->ldx;
                    jb.y = a->y + t * a->ldy + o0;
                    jb.part = part + (t - tb) * NP * KZ_PANEL;
                    if (np > 1) {
                        tile_rows_two(&jb, rows);
                    } else {
                        tile_rows_one(&jb, rows);
                    }
                }
                r0 = r1;
            } while (r0 < pair_rows);
        }
    }
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
