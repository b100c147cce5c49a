/*
 * gemm_bf16_amx.c - the bf16 conv-GEMM on AMX tiles (tdpbf16ps); the definition is
 * ref/gemm_bf16_ref.c and the contract kernels.h (kz_gemm_bf16_args).
 *
 * AMX computes C[16, 16] += A[16, 16 pairs] * B[16 pairs, 16 columns] in one
 * instruction, C in fp32 and A, B as bf16 pairs. The packed bf16 panels already hold
 * B: pair row r of a panel is one 64-byte tile row (16 columns x 2), so 16
 * consecutive pair rows of a tap load as one B tile with a 64-byte stride. A is read
 * straight from the bf16 x rows: 16 output rows x 16 channel pairs of one tap, row
 * stride ldx.
 *
 * Data flow for one call, rows [t0, t1) x panels [p0, p1):
 *
 *   tiles 0..3 = C (two row tiles x two panels), 4..5 = A (two row tiles),
 *   6..7 = B (two panels)
 *   for each pair of panels (a single panel at an odd end)
 *     for each tile of 32 rows (16 at the end; fewer in a ragged tail, which runs
 *     under a second tile configuration with that many rows)
 *       zero C; for each tap j, for each 16 pairs q0 of the tap: load A, B, 4 x tdpbf16ps
 *       (a tap's last < 16 pairs are copied to zero-padded tiles in memory first)
 *       store C to a buffer; + bias, + y (accumulate mode), masked store of valid columns
 *
 * Determinism: an output element is accumulated from +0 over the pairs of its taps in
 * one fixed order (tap by tap, 16 pairs per instruction, zero-padded tails), whatever
 * its row's place in a tile, the tile's row count or the call's split; then the same
 * two adds as the definition. Against the definition the freedom is inside
 * tdpbf16ps (denormals flushed, the order and rounding of the 16 pair products of
 * one instruction), bounded in tests/unit/test_gemm_bf16.c.
 *
 * The tile registers need the process's permission (arch_prctl ARCH_REQ_XCOMP_PERM),
 * which dispatch.c asks for once before it installs this kernel. The tile
 * configuration is thread state: every call loads its own and releases the tiles
 * when it returns.
 */
#include "kernels/kernels.h"

#include "runtime/error.h"

#include <immintrin.h>

enum {
    TILE_ROWS = 16,  // rows of an A or C tile
    TILE_PAIRS = 16, // channel pairs of an A tile = pair rows of a B tile
    TILE_BYTES = 64, // bytes per tile row
};

/* Tiles 0..5 (C and A) get `rows` rows, the B tiles always 16; all rows 64 bytes. */
static void configure(int rows) {
    const uint8_t r = (uint8_t)rows;
    const uint8_t n[8] = {r, r, r, r, r, r, TILE_PAIRS, TILE_PAIRS};
    const uint16_t colsb[8] = {TILE_BYTES, TILE_BYTES, TILE_BYTES, TILE_BYTES,
                               TILE_BYTES, TILE_BYTES, TILE_BYTES, TILE_BYTES};
    _Alignas(64) kz_amx_tile_config c;
    kz_amx_tile_config_set(&c, n, colsb);
    _tile_loadconfig(&c);
}

typedef struct tile_job {
    const uint16_t *x;     // x row of the tile's first output row
    size_t x_stride;       // bytes between x rows
    size_t tap_step;       // bf16 elements from one tap's rows to the next
    size_t taps;
    size_t k_pairs;        // channel pairs per tap
    const uint16_t *panel; // first panel, [taps * k_pairs, 16, 2]
    size_t panel_step;     // bf16 elements from one panel to the next
    size_t o0;             // first column of the first panel
    int rows;              // valid rows of each row tile (16, or the ragged tail)
    float *y;              // y row of the tile's first row, at the first panel's first column
    size_t ldy;
    const float *bias;     // bias at the first panel's first column, or NULL
    int accumulate;
    __mmask16 mask0;       // valid columns of the first panel
    __mmask16 mask1;       // valid columns of the second panel
} tile_job;

/* A tap's last pairs (< 16): A rows and B rows copied into zero-padded tile images. */
typedef struct tail_tiles {
    _Alignas(64) uint16_t a[2][TILE_ROWS][TILE_PAIRS * 2];
    _Alignas(64) uint16_t b[2][TILE_PAIRS][KZ_PANEL * 2];
} tail_tiles;

static void stage_tail(tail_tiles *s, const tile_job *jb, const uint16_t *xj,
                       const uint16_t *wj, size_t q0, size_t pairs, int mr, int np) {
    memset(s, 0, sizeof *s);
    const size_t ldx = jb->x_stride / sizeof(uint16_t);
    for (int m = 0; m < mr; m++) {
        for (int r = 0; r < jb->rows; r++) {
            memcpy(s->a[m][r], xj + ((size_t)m * TILE_ROWS + (size_t)r) * ldx + 2 * q0,
                   pairs * 2 * sizeof(uint16_t));
        }
    }
    for (int p = 0; p < np; p++) {
        memcpy(s->b[p], wj + (size_t)p * jb->panel_step + q0 * KZ_PANEL * 2,
               pairs * KZ_PANEL * 2 * sizeof(uint16_t));
    }
}

/* C (tiles 0..3) += A (4..5) x B (6..7) for the tile shape mr x np. */
static inline __attribute__((always_inline)) void multiply(int mr, int np) {
    _tile_dpbf16ps(0, 4, 6);
    if (np > 1) {
        _tile_dpbf16ps(1, 4, 7);
    }
    if (mr > 1) {
        _tile_dpbf16ps(2, 5, 6);
        if (np > 1) {
            _tile_dpbf16ps(3, 5, 7);
        }
    }
}

/* All pairs of all taps into C for one tile of mr row tiles x np panels. */
static inline __attribute__((always_inline)) void accumulate_k(const tile_job *jb, int mr,
                                                               int np) {
    const size_t full = jb->k_pairs / TILE_PAIRS * TILE_PAIRS;
    const size_t a_next = TILE_ROWS * jb->x_stride / sizeof(uint16_t);
    for (size_t j = 0; j < jb->taps; j++) {
        const uint16_t *xj = jb->x + j * jb->tap_step;
        const uint16_t *wj = jb->panel + j * jb->k_pairs * KZ_PANEL * 2;
        for (size_t q0 = 0; q0 < full; q0 += TILE_PAIRS) {
            _tile_loadd(4, xj + 2 * q0, jb->x_stride);
            if (mr > 1) {
                _tile_loadd(5, xj + a_next + 2 * q0, jb->x_stride);
            }
            _tile_loadd(6, wj + q0 * KZ_PANEL * 2, TILE_BYTES);
            if (np > 1) {
                _tile_loadd(7, wj + jb->panel_step + q0 * KZ_PANEL * 2, TILE_BYTES);
            }
            multiply(mr, np);
        }
        if (full < jb->k_pairs) {
            tail_tiles s;
            stage_tail(&s, jb, xj, wj, full, jb->k_pairs - full, mr, np);
            _tile_loadd(4, s.a[0], TILE_BYTES);
            if (mr > 1) {
                _tile_loadd(5, s.a[1], TILE_BYTES);
            }
            _tile_loadd(6, s.b[0], TILE_BYTES);
            if (np > 1) {
                _tile_loadd(7, s.b[1], TILE_BYTES);
            }
            multiply(mr, np);
        }
    }
}

/* Epilogue for 16 columns of one row: r = acc (+ bias) (y + r), masked store. */
static inline void store16(const tile_job *jb, float *yr, const float *bias, __mmask16 m,
                           const float *acc) {
    __m512 r = _mm512_load_ps(acc);
    if (bias) {
        r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, bias));
    }
    if (jb->accumulate) {
        r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr), r);
    }
    _mm512_mask_storeu_ps(yr, m, r);
}

/* One tile of mr row tiles (jb->rows valid rows each) x np panels, start to end. */
static inline __attribute__((always_inline)) void tile(const tile_job *jb, int mr, int np) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    accumulate_k(jb, mr, np);
    _Alignas(64) float c[2][2][TILE_ROWS][KZ_PANEL];
    _tile_stored(0, c[0][0], TILE_BYTES);
    if (np > 1) {
        _tile_stored(1, c[0][1], TILE_BYTES);
    }
    if (mr > 1) {
        _tile_stored(2, c[1][0], TILE_BYTES);
        if (np > 1) {
            _tile_stored(3, c[1][1], TILE_BYTES);
        }
    }
    const float *bias1 = np > 1 && jb->bias ? jb->bias + KZ_PANEL : NULL;
    for (int m = 0; m < mr; m++) {
        for (int r = 0; r < jb->rows; r++) {
            float *yr = jb->y + ((size_t)m * TILE_ROWS + (size_t)r) * jb->ldy;
            store16(jb, yr, jb->bias, jb->mask0, c[m][0][r]);
            if (np > 1) {
                store16(jb, yr + KZ_PANEL, bias1, jb->mask1, c[m][1][r]);
            }
        }
    }
}

static void tile_2x2(const tile_job *jb) {
    tile(jb, 2, 2);
}
static void tile_2x1(const tile_job *jb) {
    tile(jb, 2, 1);
}
static void tile_1x2(const tile_job *jb) {
    tile(jb, 1, 2);
}
static void tile_1x1(const tile_job *jb) {
    tile(jb, 1, 1);
}

static __mmask16 panel_mask(size_t n, size_t p) {
    const size_t width = n - p * KZ_PANEL;
    return width >= KZ_PANEL ? (__mmask16)0xffff : (__mmask16)((1u << width) - 1u);
}

/* Rows [t0, t1) against the panel(s) set in jb: tiles of 32 rows, then 16, under
 * the full configuration; a ragged tail under one with its row count. */
static void run_rows(tile_job *jb, const kz_gemm_bf16_args *a, size_t t0, size_t t1, int np) {
    size_t t = t0;
    jb->rows = TILE_ROWS;
    for (; t + 2 * TILE_ROWS <= t1; t += 2 * TILE_ROWS) {
        jb->x = a->x + t * a->ldx;
        jb->y = a->y + t * a->ldy + jb->o0;
        (np > 1 ? tile_2x2 : tile_2x1)(jb);
    }
    if (t + TILE_ROWS <= t1) {
        jb->x = a->x + t * a->ldx;
        jb->y = a->y + t * a->ldy + jb->o0;
        (np > 1 ? tile_1x2 : tile_1x1)(jb);
        t += TILE_ROWS;
    }
    if (t < t1) {
        jb->rows = (int)(t1 - t);
        configure(jb->rows);
        jb->x = a->x + t * a->ldx;
        jb->y = a->y + t * a->ldy + jb->o0;
        (np > 1 ? tile_1x2 : tile_1x1)(jb);
        configure(TILE_ROWS);
    }
}

void kz_gemm_bf16_amx(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    if (t0 == t1 || p0 == p1) {
        return;
    }
    const size_t pair_rows = w->taps * w->k_pairs;
    tile_job jb = {
        .x_stride = a->ldx * sizeof(uint16_t),
        .tap_step = a->tap_stride * a->ldx,
        .taps = w->taps,
        .k_pairs = w->k_pairs,
        .panel_step = pair_rows * KZ_PANEL * 2,
        .ldy = a->ldy,
        .accumulate = a->mode == KZ_GEMM_ACCUMULATE,
    };
    configure(TILE_ROWS);
    for (size_t p = p0; p < p1; p += 2) {
        const int np = p1 - p >= 2 ? 2 : 1;
        jb.panel = w->data + p * jb.panel_step;
        jb.o0 = p * KZ_PANEL;
        jb.bias = a->bias ? a->bias + p * KZ_PANEL : NULL;
        jb.mask0 = panel_mask(w->n, p);
        jb.mask1 = np > 1 ? panel_mask(w->n, p + 1) : 0;
        run_rows(&jb, a, t0, t1, np);
    }
    _tile_release();
}
