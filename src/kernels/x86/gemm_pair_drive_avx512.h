/*
 * gemm_pair_drive_avx512.h - the part of the AVX-512 two-panel conv-GEMMs that depends
 * not on the weight format: the tile job, the accumulators' reload, park and epilogue,
 * the dispatch of a tile's row count to a constant, and the blocking driver. Shared by
 * x86/gemm_avx512.c (fp32 panels, FMA) and x86/gemm_bf16_avx512.c (bf16 pair panels,
 * vdpbf16ps). Included once by each, after its MR, NP, KC, MC_MAX and X_BLOCK_BYTES
 * constants; the includer then defines tile() (one micro-tile of 1..MR rows x 1 or 2
 * panels over one k block, using the TILE_* macros below for its accumulators) and
 * runs PAIR_DRIVE() on its arguments.
 *
 * A panel row is 64 bytes in both formats: 16 fp32 weights of one input channel
 * (kz_packed), or 16 pairs of bf16 weights of two channels (kz_packed_bf16); a panel
 * holds taps * tap_rows of them, r = j * tap_rows + i.
 *
 * Data flow of one call, rows [t0, t1) x panels [p0, p1):
 *   for each row block of up to mc rows (gemm_blocking.h; its x rows, all taps, in L2)
 *     for each pair of 16-column panels (a single panel at an odd end)
 *       for each k block of up to KC panel rows (2 x KC x 64 B)
 *         for each tile of MR rows: tile(), accumulators lo (first panel) and hi
 *         (second) per row, partial sums parked in part[] between k blocks; after the
 *         last: + bias, + y (accumulate mode), masked store of the valid columns.
 * An output element's sequence of multiply-adds depends only on its panel rows' order,
 * never on this blocking, the panel pairing or the split of rows and panels over calls.
 */
#ifndef KZ_GEMM_PAIR_DRIVE_AVX512_H
#define KZ_GEMM_PAIR_DRIVE_AVX512_H

#include <immintrin.h>

#include "kernels/gemm_blocking.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

typedef struct tile_job {
    const void *x;     // x row of the tile's first output row: fp32, or bf16 pairs
    size_t ldx;        // x row stride in elements
    size_t tap_step;   // tap_stride * ldx
    size_t tap_rows;   // panel rows per tap: input channels, or bf16 channel pairs
    const void *panel; // first panel of the pair: taps * tap_rows panel rows of 64 bytes
    size_t panel_step; // elements (of w->data) from one panel to the next
    size_t r0;         // k block: panel rows [r0, r1)
    size_t r1;
    float *part;       // [MR, 32] partial sums carried between k blocks
    int first;         // r0 == 0: start from zero
    int last;          // r1 == taps * tap_rows: run the epilogue
    float *y;          // y row of the tile's first row, at the first panel's first column
    size_t ldy;        // y row stride
    const float *bias; // bias at the first panel's first column, or NULL
    int accumulate;    // KZ_GEMM_ACCUMULATE
    __mmask16 mask0;   // valid columns of the first panel
    __mmask16 mask1;   // valid columns of the second panel
} tile_job;

_Static_assert(MC_MAX % MR == 0, "row blocks of whole tiles must fit part[]");

/* The includer's micro-tile: `rows` (1..MR) x `np` panels (1 or 2), both constants after
 * inlining, over the k block of jb. */
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows,
                                                       const int np);

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

/* The accumulators of tile row q, lo##q and hi##q, inside tile() (where `zero`, `rows` and
 * `np` are defined): TILE_INIT starts them from +0 in the first k block, else from the
 * partial sums parked in part[]. Rows beyond `rows` are dead code. Named variables, not an
 * array, keep GCC from spilling them. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define TILE_INIT(q)                                                                           \
    __m512 lo##q = zero;                                                                       \
    __m512 hi##q = zero;                                                                       \
    if (rows > q && !jb->first) {                                                              \
        lo##q = _mm512_load_ps(jb->part + q * NP * KZ_PANEL);                                  \
        if (np > 1) {                                                                          \
            hi##q = _mm512_load_ps(jb->part + q * NP * KZ_PANEL + KZ_PANEL);                   \
        }                                                                                      \
    }
#define TILE_PARK(q)                                                                           \
    if (rows > q) {                                                                            \
        _mm512_store_ps(jb->part + q * NP * KZ_PANEL, lo##q);                                  \
        if (np > 1) {                                                                          \
            _mm512_store_ps(jb->part + q * NP * KZ_PANEL + KZ_PANEL, hi##q);                   \
        }                                                                                      \
    }
#define TILE_EPILOGUE(q)                                                                       \
    if (rows > q) {                                                                            \
        float *yr = jb->y + q * jb->ldy;                                                       \
        store16(jb, yr, jb->bias, jb->mask0, lo##q);                                           \
        if (np > 1) {                                                                          \
            store16(jb, yr + KZ_PANEL, bias1, jb->mask1, hi##q);                               \
        }                                                                                      \
    }

/* The end of tile(): park the partial sums, or after the last k block the epilogue. */
#define TILE_FINISH()                                                                          \
    if (!jb->last) {                                                                           \
        TILE_ROWS(TILE_PARK)                                                                   \
        return;                                                                                \
    }                                                                                          \
    const float *bias1 = np > 1 && jb->bias ? jb->bias + KZ_PANEL : NULL;                      \
    TILE_ROWS(TILE_EPILOGUE)

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

/* The body of kz_gemm_avx512 and kz_gemm_bf16_avx512, rows [t0, t1) x panels [p0, p1): `a`
 * is either GEMM's arguments, `w` its packed weights, `rows_per_tap` w's panel rows per tap,
 * `row_elems` the elements of w->data in one panel row and `x_row_bytes` the bytes of one
 * row's x values (for the row blocking). A macro rather than a function of a struct of both
 * argument types: it reads the arguments through `a` as the loops go, which the tiles'
 * vector stores may alias, while the fields of a local struct would be held in the general
 * registers that the inlined tiles need. */
#define PAIR_DRIVE(a, w, rows_per_tap, row_elems, x_row_bytes, t0, t1, p0, p1)                 \
    do {                                                                                       \
        KZ_ASSERT(t0 <= t1 && t1 <= (a)->n_rows && p0 <= p1 && p1 <= (w)->n_panels);           \
        const size_t k_rows = (w)->taps * (rows_per_tap);                                      \
        const size_t span = (w)->taps ? ((w)->taps - 1) * (a)->tap_stride : 0;                 \
        const size_t mc = kz_gemm_row_block(t1 > t0 ? t1 - t0 : 0, x_row_bytes, span, MR,      \
                                            MC_MAX, X_BLOCK_BYTES);                            \
        _Alignas(64) float part[MC_MAX * NP * KZ_PANEL];                                       \
        tile_job jb = {                                                                        \
            .ldx = (a)->ldx,                                                                   \
            .tap_step = (a)->tap_stride * (a)->ldx,                                            \
            .tap_rows = (rows_per_tap),                                                        \
            .panel_step = k_rows * (row_elems),                                                \
            .ldy = (a)->ldy,                                                                   \
            .accumulate = (a)->mode == KZ_GEMM_ACCUMULATE,                                     \
        };                                                                                     \
        for (size_t tb = t0; tb < t1; tb += mc) {                                              \
            const size_t te = t1 - tb < mc ? t1 : tb + mc;                                     \
            for (size_t p = p0; p < p1; p += NP) {                                             \
                const int np = p1 - p >= NP ? NP : 1;                                          \
                const size_t o0 = p * KZ_PANEL;                                                \
                jb.panel = (w)->data + p * k_rows * (row_elems);                               \
                jb.bias = (a)->bias ? (a)->bias + o0 : NULL;                                   \
                jb.mask0 = panel_mask((w)->n, p);                                              \
                jb.mask1 = np > 1 ? panel_mask((w)->n, p + 1) : 0;                             \
                size_t r0 = 0;                                                                 \
                do {                                                                           \
                    const size_t r1 = k_rows - r0 < KC ? k_rows : r0 + KC;                     \
                    jb.r0 = r0;                                                                \
                    jb.r1 = r1;                                                                \
                    jb.first = r0 == 0;                                                        \
                    jb.last = r1 == k_rows;                                                    \
                    for (size_t t = tb; t < te; t += MR) {                                     \
                        const size_t rows = te - t < MR ? te - t : MR;                         \
                        jb.x = (a)->x + t * (a)->ldx;                                          \
                        jb.y = (a)->y + t * (a)->ldy + o0;                                     \
                        jb.part = part + (t - tb) * NP * KZ_PANEL;                             \
                        if (np > 1) {                                                          \
                            tile_rows_two(&jb, rows);                                          \
                        } else {                                                               \
                            tile_rows_one(&jb, rows);                                          \
                        }                                                                      \
                    }                                                                          \
                    r0 = r1;                                                                   \
                } while (r0 < k_rows);                                                         \
            }                                                                                  \
        }                                                                                      \
    } while (0)

#endif
