/*
 * gemm_avx512.c - AVX-512 conv-GEMM, bit-identical to ref/gemm_ref.c.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1):
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
#include "kernels/gemm_blocking.h"

#include "runtime/error.h"

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

typedef struct tile_job {
    const float *x;     // x row of the tile's first output row
    size_t ldx;         // x row stride
    size_t tap_step;    // tap_stride * ldx
    size_t k_in;        // input channels per tap
    const float *panel; // first panel of the pair, [taps * k_in, 16]
    size_t panel_step;  // floats from one panel to the next
    size_t r0;          // k block: flat panel rows [r0, r1), r = j * k_in + i
    size_t r1;
    float *part;        // [MR, 32] partial sums carried between k blocks
    int first;          // r0 == 0: start from zero
    int last;           // r1 == taps * k_in: run the epilogue
    float *y;           // y row of the tile's first row, at the first panel's first column
    size_t ldy;         // y row stride
    const float *bias;  // bias at the first panel's first column, or NULL
    int accumulate;     // KZ_GEMM_ACCUMULATE
    __mmask16 mask0;    // valid columns of the first panel
    __mmask16 mask1;    // valid columns of the second panel
} tile_job;

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

/* One micro-tile of `rows` (1..MR) x `np` panels (1 or 2), both constants
 * after inlining, over one k block. Named accumulators keep GCC from
 * spilling an array; rows beyond `rows` are dead code. */
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
        const size_t j = r / jb->k_in;
        const size_t i = r - j * jb->k_in;
        const size_t end = (j + 1) * jb->k_in < jb->r1 ? (j + 1) * jb->k_in : jb->r1;
        const float *xp = jb->x + j * jb->tap_step + i;
        const float *wa = jb->panel + r * KZ_PANEL;
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
#undef TILE_FMA
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

void kz_gemm_avx512(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const kz_packed *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= w->k_in);
    const size_t k_rows = w->taps * w->k_in;
    const size_t span = w->taps ? (w->taps - 1) * a->tap_stride : 0;
    const size_t x_row_bytes = (w->k_in ? w->k_in : 1) * sizeof(float);
    const size_t mc = kz_gemm_row_block(t1 > t0 ? t1 - t0 : 0, x_row_bytes, span, MR, MC_MAX,
                                        X_BLOCK_BYTES);
    _Alignas(64) float part[MC_MAX * NP * KZ_PANEL];
    tile_job jb = {
        .ldx = a->ldx,
        .tap_step = a->tap_stride * a->ldx,
        .k_in = w->k_in,
        .panel_step = k_rows * KZ_PANEL,
        .ldy = a->ldy,
        .accumulate = a->mode == KZ_GEMM_ACCUMULATE,
    };
    for (size_t tb = t0; tb < t1; tb += mc) {
        const size_t te = t1 - tb < mc ? t1 : tb + mc;
        for (size_t p = p0; p < p1; p += NP) {
            const int np = p1 - p >= NP ? NP : 1;
            const size_t o0 = p * KZ_PANEL;
            jb.panel = w->data + p * k_rows * KZ_PANEL;
            jb.bias = a->bias ? a->bias + o0 : NULL;
            jb.mask0 = panel_mask(w->n, p);
            jb.mask1 = np > 1 ? panel_mask(w->n, p + 1) : 0;
            size_t r0 = 0;
            do {
                const size_t r1 = k_rows - r0 < KC ? k_rows : r0 + KC;
                jb.r0 = r0;
                jb.r1 = r1;
                jb.first = r0 == 0;
                jb.last = r1 == k_rows;
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
            } while (r0 < k_rows);
        }
    }
}
